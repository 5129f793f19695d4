//! The records' JSON Schemas, derived from the Rust types of
//! `seckill_core::event` (`schemars`), so every tool reading the log gets
//! its types without guessing them from the JSON.
//!
//! `docs/schemas/v{SCHEMA_VERSION}/` holds one file per event kind, which
//! describes a whole record of that kind (the envelope's fields, the `type`
//! tag and the event's own fields, flat, as on the topic) and allows no other
//! field, and `envelope.json`, which describes any record (one of the kinds).
//! They describe what this build writes: names older logs still carry and
//! readers still accept (`OrderConfirmed`, `confirmed_at`, `hold_seconds`)
//! are not in them. `seckill schema --out docs/schemas` writes them.

use std::path::{Path, PathBuf};

use schemars::schema_for;
use seckill_core::event::SCHEMA_VERSION;
use seckill_core::Envelope;
use serde_json::{json, Map, Value};

/// The envelope's own file.
pub const ENVELOPE_FILE: &str = "envelope.json";

/// The directory of this schema version's files under `root`.
pub fn version_dir(root: &Path) -> PathBuf {
    root.join(format!("v{SCHEMA_VERSION}"))
}

/// Every schema file, `(file name, schema)`: the envelope's first, then one
/// per event kind in the order `Event` declares them.
pub fn schemas() -> Vec<(String, Value)> {
    let envelope = schema_for!(Envelope).to_value();
    let mut files = vec![(ENVELOPE_FILE.to_owned(), envelope.clone())];
    for (kind, schema) in kinds(&envelope) {
        files.push((format!("{kind}.json"), schema));
    }
    files
}

/// Each kind's schema (as its file holds it), in the order `Event`
/// declares them.
pub fn kind_schemas() -> Vec<(String, Value)> {
    kinds(&schema_for!(Envelope).to_value())
}

/// The event kinds' names, in the order `Event` declares them.
pub fn kind_names() -> Vec<String> {
    kinds(&schema_for!(Envelope).to_value()).into_iter().map(|(kind, _)| kind).collect()
}

/// One strict, self-contained schema per kind, built from the envelope's:
/// its own properties plus those of the kind's branch of `oneOf`.
fn kinds(envelope: &Value) -> Vec<(String, Value)> {
    let defs = envelope.get("$defs").cloned().unwrap_or_else(|| json!({}));
    let own = envelope.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let own_required = strings(envelope.get("required"));
    let branches = envelope.get("oneOf").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut kinds = Vec::new();
    for branch in &branches {
        let mut branch_properties = Map::new();
        let mut branch_required = Vec::new();
        merge(branch, &defs, &mut branch_properties, &mut branch_required);
        let Some(kind) =
            branch_properties.get("type").and_then(|t| t.get("const")).and_then(Value::as_str).map(str::to_owned)
        else {
            continue;
        };
        let mut properties = own.clone();
        let mut required = own_required.clone();
        properties.extend(branch_properties);
        for name in branch_required {
            if !required.contains(&name) {
                required.push(name);
            }
        }
        let mut schema = Map::new();
        schema.insert("$schema".to_owned(), json!("https://json-schema.org/draft/2020-12/schema"));
        schema.insert("title".to_owned(), json!(kind));
        let description =
            branch.get("description").cloned().or_else(|| resolve(branch, &defs).get("description").cloned());
        if let Some(description) = description {
            schema.insert("description".to_owned(), description);
        }
        schema.insert("type".to_owned(), json!("object"));
        schema.insert("properties".to_owned(), Value::Object(properties));
        schema.insert("required".to_owned(), json!(required));
        schema.insert("additionalProperties".to_owned(), json!(false));
        let used = used_defs(&Value::Object(schema.clone()), &defs);
        if !used.is_empty() {
            schema.insert("$defs".to_owned(), Value::Object(used));
        }
        kinds.push((kind, Value::Object(schema)));
    }
    kinds
}

/// Adds the properties of `schema` (an object schema, maybe with a `$ref`,
/// maybe combining others with `allOf`, as flattened structs do) to
/// `properties`.
fn merge(schema: &Value, defs: &Value, properties: &mut Map<String, Value>, required: &mut Vec<String>) {
    if schema.get("$ref").is_some() {
        merge(&resolve(schema, defs), defs, properties, required);
    }
    if let Some(own) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in own {
            properties.insert(name.clone(), property.clone());
        }
    }
    for name in strings(schema.get("required")) {
        if !required.contains(&name) {
            required.push(name);
        }
    }
    for part in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        merge(part, defs, properties, required);
    }
}

/// `schema`, or the definition it refers to.
fn resolve(schema: &Value, defs: &Value) -> Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => defs.get(name).cloned().unwrap_or(Value::Null),
        None => schema.clone(),
    }
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

/// The definitions `schema` refers to, directly or through other ones.
fn used_defs(schema: &Value, defs: &Value) -> Map<String, Value> {
    let mut used = Map::new();
    let mut pending = Vec::new();
    refs(schema, &mut pending);
    while let Some(name) = pending.pop() {
        if used.contains_key(&name) {
            continue;
        }
        if let Some(def) = defs.get(&name) {
            refs(def, &mut pending);
            used.insert(name, def.clone());
        }
    }
    used.sort_keys();
    used
}

fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
                out.push(name.to_owned());
            }
            map.values().for_each(|v| refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// A schema as written to its file: pretty, two spaces, a final newline.
pub fn render(schema: &Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).expect("a JSON value serializes");
    text.push('\n');
    text
}

/// Writes every schema under `root` (in `v{SCHEMA_VERSION}/`); returns the
/// files written.
pub fn write(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = version_dir(root);
    std::fs::create_dir_all(&dir)?;
    let mut written = Vec::new();
    for (name, schema) in schemas() {
        let path = dir.join(name);
        std::fs::write(&path, render(&schema))?;
        written.push(path);
    }
    Ok(written)
}

/// How the files under `root` differ from the generated ones: one line per
/// file missing, different or not generated; empty when they agree.
pub fn differences(root: &Path) -> Vec<String> {
    let dir = version_dir(root);
    let generated = schemas();
    let mut differences = Vec::new();
    for (name, schema) in &generated {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) if text == render(schema) => {}
            Ok(_) => differences.push(format!("{} differs from the generated schema", path.display())),
            Err(e) => differences.push(format!("{} cannot be read: {e}", path.display())),
        }
    }
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !generated.iter().any(|(generated, _)| *generated == name) {
                differences.push(format!("{} is not generated by this build", entry.path().display()));
            }
        }
    }
    differences.sort();
    differences
}

#[cfg(test)]
mod tests;
