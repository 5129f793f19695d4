//! One kind's Parquet file: its columns, derived from the kind's JSON
//! Schema, filled row by row and written a row group at a time through
//! parquet's column writers (no Arrow: it would triple the build's cost).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use chrono::DateTime;
use parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type, TypePtr};
use serde_json::Value;

use super::Origin;

/// Rows per row group.
const BATCH_ROWS: usize = 16 * 1024;
/// The columns every table starts with: where the record was read.
const ORIGIN_COLUMNS: [&str; 4] = ["log_topic", "log_partition", "log_offset", "log_time"];
/// The envelope's fields, after the origin; the event's follow, by name.
const ENVELOPE_COLUMNS: [&str; 3] = ["schema", "event_id", "emitted_at"];

/// What a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Int,
    Int32,
    Bool,
    Time,
    TextList,
    /// An object, kept as its JSON text.
    Json,
}

#[derive(Debug)]
struct Column {
    name: String,
    kind: Kind,
    nullable: bool,
    /// The value of a field left out of the record (serde's default,
    /// not written): from the schema's `default`, else the type's zero.
    absent: Value,
    /// The row group's values and levels so far.
    values: Values,
    definitions: Vec<i16>,
    repetitions: Vec<i16>,
}

/// A column's values (nulls are only in its definition levels).
#[derive(Debug)]
enum Values {
    Text(Vec<ByteArray>),
    Int(Vec<i64>),
    Int32(Vec<i32>),
    Bool(Vec<bool>),
}

/// A row that cannot be written (the record is counted as malformed), or
/// a file that cannot.
#[derive(Debug)]
pub(super) enum RowError {
    Value(String),
    Write(String),
}

/// One kind's file being written.
pub(super) struct Table {
    columns: Vec<Column>,
    rows: usize,
    written: u64,
    writer: SerializedFileWriter<File>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table").field("columns", &self.columns.len()).field("written", &self.written).finish()
    }
}

impl Table {
    /// Creates `path` for records described by `schema` (a kind's JSON
    /// Schema, see `crate::schema`).
    pub(super) fn create(path: &Path, schema: &Value) -> Result<Self, String> {
        let columns = columns(schema);
        let fields = columns.iter().map(field).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        let schema = Type::group_type_builder("record").with_fields(fields).build().map_err(|e| e.to_string())?;
        let file = File::create(path).map_err(|e| e.to_string())?;
        let properties = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
        let writer =
            SerializedFileWriter::new(file, Arc::new(schema), Arc::new(properties)).map_err(|e| e.to_string())?;
        Ok(Self { columns, rows: 0, written: 0, writer })
    }

    /// Appends `record` (an envelope as JSON) read at `origin`.
    pub(super) fn push(&mut self, record: &Value, origin: &Origin) -> Result<(), RowError> {
        // Every cell is checked before any is appended, so a bad record
        // leaves the columns aligned.
        let mut cells = Vec::with_capacity(self.columns.len());
        for column in &self.columns {
            let value = match column.name.as_str() {
                "log_topic" => Value::from(origin.topic.clone()),
                "log_partition" => origin.partition.map_or(Value::Null, Value::from),
                "log_offset" => Value::from(origin.offset),
                "log_time" => origin.time_ms.map_or(Value::Null, |ms| Value::from(ms.saturating_mul(1_000))),
                name => record.get(name).cloned().unwrap_or_else(|| column.absent.clone()),
            };
            cells.push(cell(column, value)?);
        }
        for (column, cell) in self.columns.iter_mut().zip(cells) {
            append(column, cell);
        }
        self.rows += 1;
        if self.rows >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), RowError> {
        if self.rows == 0 {
            return Ok(());
        }
        let failed = |e: parquet::errors::ParquetError| RowError::Write(e.to_string());
        let mut group = self.writer.next_row_group().map_err(failed)?;
        for column in &mut self.columns {
            let Some(mut writer) = group.next_column().map_err(failed)? else {
                return Err(RowError::Write(format!("no column writer for {}", column.name)));
            };
            let definitions = Some(column.definitions.as_slice());
            let repetitions = (column.kind == Kind::TextList).then_some(column.repetitions.as_slice());
            let written = match (writer.untyped(), &column.values) {
                (ColumnWriter::ByteArrayColumnWriter(w), Values::Text(v)) => w.write_batch(v, definitions, repetitions),
                (ColumnWriter::Int64ColumnWriter(w), Values::Int(v)) => w.write_batch(v, definitions, repetitions),
                (ColumnWriter::Int32ColumnWriter(w), Values::Int32(v)) => w.write_batch(v, definitions, repetitions),
                (ColumnWriter::BoolColumnWriter(w), Values::Bool(v)) => w.write_batch(v, definitions, repetitions),
                _ => return Err(RowError::Write(format!("{} has values of another type", column.name))),
            };
            written.map_err(failed)?;
            writer.close().map_err(failed)?;
            column.clear();
        }
        group.close().map_err(failed)?;
        self.written += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Writes what is left and closes the file; the rows written.
    pub(super) fn finish(mut self) -> Result<u64, String> {
        self.flush().map_err(|e| match e {
            RowError::Value(why) | RowError::Write(why) => why,
        })?;
        self.writer.close().map_err(|e| e.to_string())?;
        Ok(self.written)
    }
}

/// The table's columns: the origin, the envelope, then the event's fields
/// by name (the `type` tag is the table).
fn columns(schema: &Value) -> Vec<Column> {
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut columns = vec![
        column("log_topic", Kind::Text, false, Value::Null),
        column("log_partition", Kind::Int32, true, Value::Null),
        column("log_offset", Kind::Int, false, Value::Null),
        column("log_time", Kind::Time, true, Value::Null),
    ];
    let mut names: Vec<&String> = properties.keys().filter(|name| *name != "type").collect();
    names.sort_by_key(|name| (ENVELOPE_COLUMNS.iter().position(|e| e == name).unwrap_or(usize::MAX), name.as_str()));
    for name in names {
        debug_assert!(!ORIGIN_COLUMNS.contains(&name.as_str()));
        let property = &properties[name];
        let kind = kind_of(property);
        let optional = types(property).contains(&"null") || property.get("anyOf").is_some();
        let required = required.contains(&name.as_str());
        let absent = if optional || required {
            Value::Null
        } else {
            property.get("default").cloned().unwrap_or_else(|| zero(kind))
        };
        let nullable = optional || (!required && absent.is_null());
        columns.push(column(name, kind, nullable, absent));
    }
    columns
}

fn column(name: &str, kind: Kind, nullable: bool, absent: Value) -> Column {
    let values = match kind {
        Kind::Text | Kind::Json | Kind::TextList => Values::Text(Vec::new()),
        Kind::Int | Kind::Time => Values::Int(Vec::new()),
        Kind::Int32 => Values::Int32(Vec::new()),
        Kind::Bool => Values::Bool(Vec::new()),
    };
    Column { name: name.to_owned(), kind, nullable, absent, values, definitions: Vec::new(), repetitions: Vec::new() }
}

impl Column {
    fn clear(&mut self) {
        match &mut self.values {
            Values::Text(v) => v.clear(),
            Values::Int(v) => v.clear(),
            Values::Int32(v) => v.clear(),
            Values::Bool(v) => v.clear(),
        }
        self.definitions.clear();
        self.repetitions.clear();
    }
}

fn types(property: &Value) -> Vec<&str> {
    match property.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn kind_of(property: &Value) -> Kind {
    let types = types(property);
    if property.get("format").and_then(Value::as_str) == Some("date-time") {
        Kind::Time
    } else if types.contains(&"integer") {
        Kind::Int
    } else if types.contains(&"boolean") {
        Kind::Bool
    } else if types.contains(&"array") {
        Kind::TextList
    } else if types.contains(&"object") {
        Kind::Json
    } else {
        Kind::Text
    }
}

fn zero(kind: Kind) -> Value {
    match kind {
        Kind::Int | Kind::Int32 => Value::from(0),
        Kind::Bool => Value::Bool(false),
        Kind::TextList => Value::Array(Vec::new()),
        Kind::Text | Kind::Json | Kind::Time => Value::Null,
    }
}

/// The column's Parquet type: every column optional (a null is a
/// definition level 0); times are microseconds since the epoch, UTC; a list
/// is the standard three-level `LIST` of required strings.
fn field(column: &Column) -> parquet::errors::Result<TypePtr> {
    let primitive = |name: &str, physical: Physical, logical: Option<LogicalType>, repetition: Repetition| {
        Type::primitive_type_builder(name, physical).with_repetition(repetition).with_logical_type(logical).build()
    };
    let name = column.name.as_str();
    let optional = Repetition::OPTIONAL;
    Ok(Arc::new(match column.kind {
        Kind::Text | Kind::Json => primitive(name, Physical::BYTE_ARRAY, Some(LogicalType::String), optional)?,
        Kind::Int => primitive(name, Physical::INT64, None, optional)?,
        Kind::Int32 => primitive(name, Physical::INT32, None, optional)?,
        Kind::Bool => primitive(name, Physical::BOOLEAN, None, optional)?,
        Kind::Time => primitive(name, Physical::INT64, Some(LogicalType::timestamp(true, TimeUnit::MICROS)), optional)?,
        Kind::TextList => {
            let element = primitive("element", Physical::BYTE_ARRAY, Some(LogicalType::String), Repetition::REQUIRED)?;
            let list = Type::group_type_builder("list")
                .with_repetition(Repetition::REPEATED)
                .with_fields(vec![Arc::new(element)])
                .build()?;
            Type::group_type_builder(name)
                .with_repetition(optional)
                .with_logical_type(Some(LogicalType::List))
                .with_fields(vec![Arc::new(list)])
                .build()?
        }
    }))
}

/// A checked value, ready to append.
enum Cell {
    Null,
    Text(String),
    Int(i64),
    Bool(bool),
    List(Vec<String>),
}

fn cell(column: &Column, value: Value) -> Result<Cell, RowError> {
    let bad = |what: &str| RowError::Value(format!("{} is not {what}", column.name));
    if value.is_null() {
        return if column.nullable { Ok(Cell::Null) } else { Err(bad("present")) };
    }
    Ok(match column.kind {
        Kind::Text => match value {
            Value::String(text) => Cell::Text(text),
            other => Cell::Text(other.to_string()),
        },
        Kind::Json => Cell::Text(value.to_string()),
        Kind::Int | Kind::Int32 => Cell::Int(value.as_i64().ok_or_else(|| bad("a 64-bit integer"))?),
        Kind::Bool => Cell::Bool(value.as_bool().ok_or_else(|| bad("a boolean"))?),
        Kind::Time => match value {
            // The origin's time, already in microseconds.
            Value::Number(micros) => Cell::Int(micros.as_i64().ok_or_else(|| bad("a time"))?),
            Value::String(text) => {
                Cell::Int(DateTime::parse_from_rfc3339(&text).map_err(|_| bad("an RFC 3339 time"))?.timestamp_micros())
            }
            _ => return Err(bad("a time")),
        },
        Kind::TextList => Cell::List(
            value
                .as_array()
                .ok_or_else(|| bad("a list"))?
                .iter()
                .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| bad("a list of strings")))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// Adds `cell` to the column: its value, and its definition level (0 a
/// null; for a list, 1 an empty one and 2 an element, each after the first
/// repeated at level 1).
fn append(column: &mut Column, cell: Cell) {
    match (&mut column.values, cell) {
        (Values::Text(values), Cell::List(items)) => {
            if items.is_empty() {
                column.definitions.push(1);
                column.repetitions.push(0);
            }
            for (i, item) in items.into_iter().enumerate() {
                values.push(ByteArray::from(item.into_bytes()));
                column.definitions.push(2);
                column.repetitions.push(i16::from(i > 0));
            }
            return;
        }
        (Values::Text(values), Cell::Text(text)) => values.push(ByteArray::from(text.into_bytes())),
        (Values::Int(values), Cell::Int(n)) => values.push(n),
        (Values::Int32(values), Cell::Int(n)) => values.push(i32::try_from(n).unwrap_or(i32::MAX)),
        (Values::Bool(values), Cell::Bool(b)) => values.push(b),
        _ => {
            column.definitions.push(0);
            column.repetitions.push(0);
            return;
        }
    }
    column.definitions.push(1);
    column.repetitions.push(0);
}
