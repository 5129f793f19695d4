//! Form parameters as Stripe reads them: `name=value` pairs, nested
//! objects as `line_items[0][price_data][currency]=…`, maps as
//! `metadata[key]=value`, lists as `expand[]=…`. Unknown names are refused,
//! as Stripe does, so a client's typo fails in the sandbox too.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::failure::Failure;

/// Stripe's bounds on metadata: keys, key length, value length.
const MAX_METADATA_KEYS: usize = 50;
const MAX_METADATA_KEY_CHARS: usize = 40;
const MAX_METADATA_VALUE_CHARS: usize = 500;

/// The parameters of one request, checked against the names it accepts.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Refuses names outside `accepted`: each is a name taken exactly
    /// (`amount`, `line_items[0][quantity]`) or, ending in `[*]`, a map
    /// (`metadata[*]` takes `metadata[<key>]`). `expand[]` is always
    /// accepted. A name given twice is refused, as ambiguous.
    pub(crate) fn parse(pairs: Vec<(String, String)>, accepted: &[&str]) -> Result<Self, Failure> {
        for (index, (name, _)) in pairs.iter().enumerate() {
            if is_expand(name) {
                continue;
            }
            if !accepted.iter().any(|pattern| matches(pattern, name)) {
                return Err(Failure::param("parameter_unknown", name, format!("Received unknown parameter: {name}")));
            }
            if pairs[..index].iter().any(|(earlier, _)| earlier == name) {
                return Err(Failure::param("parameter_invalid", name, format!("Parameter {name} given twice.")));
            }
        }
        Ok(Self { pairs })
    }

    /// The value of a plain parameter.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// A required parameter.
    pub(crate) fn required(&self, name: &str) -> Result<&str, Failure> {
        self.get(name)
            .ok_or_else(|| Failure::param("parameter_missing", name, format!("Missing required param: {name}.")))
    }

    /// The entries of the map `name` (`name[key]=value`), within Stripe's
    /// bounds on metadata.
    pub(crate) fn map(&self, name: &str) -> Result<BTreeMap<String, String>, Failure> {
        let mut map = BTreeMap::new();
        for (param, value) in &self.pairs {
            let Some(key) = param.strip_prefix(name).and_then(|rest| rest.strip_prefix('[')?.strip_suffix(']')) else {
                continue;
            };
            if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_CHARS {
                return Err(Failure::param(
                    "parameter_invalid",
                    param,
                    format!("Metadata keys must be 1 to {MAX_METADATA_KEY_CHARS} characters."),
                ));
            }
            if value.chars().count() > MAX_METADATA_VALUE_CHARS {
                return Err(Failure::param(
                    "parameter_invalid",
                    param,
                    format!("Metadata values can have up to {MAX_METADATA_VALUE_CHARS} characters."),
                ));
            }
            map.insert(key.to_owned(), value.clone());
        }
        if map.len() > MAX_METADATA_KEYS {
            return Err(Failure::param(
                "parameter_invalid",
                name,
                format!("Metadata can have up to {MAX_METADATA_KEYS} keys."),
            ));
        }
        Ok(map)
    }

    /// The `metadata[…]` entries.
    pub(crate) fn metadata(&self) -> Result<BTreeMap<String, String>, Failure> {
        self.map("metadata")
    }

    /// The fields asked expanded, in order.
    pub(crate) fn expansions(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().filter(|(name, _)| is_expand(name)).map(|(_, value)| value.as_str())
    }

    /// Identifies the request an idempotency key was first used with: the
    /// route and the parameters in any order, `expand[]` aside (it changes
    /// nothing here).
    pub(crate) fn fingerprint(&self, route: &str) -> u64 {
        let mut pairs: Vec<&(String, String)> =
            self.pairs.iter().filter(|(name, _)| !name.starts_with("expand[")).collect();
        pairs.sort();
        let mut hasher = DefaultHasher::new();
        route.hash(&mut hasher);
        pairs.hash(&mut hasher);
        hasher.finish()
    }
}

/// `expand[]`, or Stripe's indexed form `expand[0]`.
fn is_expand(name: &str) -> bool {
    name.strip_prefix("expand[")
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|index| index.chars().all(|c| c.is_ascii_digit()))
}

/// Whether `name` is what `pattern` accepts.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix("[*]") {
        // A key of the map, itself without brackets.
        Some(map) => name
            .strip_prefix(map)
            .and_then(|rest| rest.strip_prefix('[')?.strip_suffix(']'))
            .is_some_and(|key| !key.contains(['[', ']'])),
        None => pattern == name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn metadata_and_expansions_are_read_and_unknown_names_refused() {
        let params = Params::parse(
            pairs(&[("amount", "5"), ("metadata[order_id]", "o1"), ("expand[]", "latest_charge")]),
            &["amount", "metadata[*]"],
        )
        .expect("accepted");
        assert_eq!(params.get("amount"), Some("5"));
        assert_eq!(params.metadata().expect("valid").get("order_id").map(String::as_str), Some("o1"));
        let error = Params::parse(pairs(&[("amount", "5"), ("amont", "5")]), &["amount"]).expect_err("refused");
        assert_eq!(error.code, Some("parameter_unknown"));
        let error = Params::parse(pairs(&[("amount", "5"), ("amount", "6")]), &["amount"]).expect_err("refused");
        assert_eq!(error.code, Some("parameter_invalid"));
    }

    #[test]
    fn nested_names_are_taken_exactly_and_maps_by_key() {
        let accepted = &["line_items[0][quantity]", "payment_intent_data[metadata][*]", "metadata[*]"];
        let params = Params::parse(
            pairs(&[
                ("line_items[0][quantity]", "2"),
                ("payment_intent_data[metadata][order_id]", "o1"),
                ("metadata[order_id]", "o2"),
                ("expand[0]", "payment_intent"),
                ("expand[]", "payment_intent.latest_charge"),
            ]),
            accepted,
        )
        .expect("accepted");
        assert_eq!(params.get("line_items[0][quantity]"), Some("2"));
        let intent = params.map("payment_intent_data[metadata]").expect("valid");
        assert_eq!(intent.get("order_id").map(String::as_str), Some("o1"));
        assert_eq!(params.metadata().expect("valid").get("order_id").map(String::as_str), Some("o2"));
        assert_eq!(params.expansions().collect::<Vec<_>>(), ["payment_intent", "payment_intent.latest_charge"]);
        for unknown in [
            "line_items[1][quantity]",
            "line_items[0][price]",
            "payment_intent_data[description]",
            "metadata[a][b]",
            "expand[x]",
        ] {
            let error = Params::parse(pairs(&[(unknown, "1")]), accepted).expect_err(unknown);
            assert_eq!(error.code, Some("parameter_unknown"), "{unknown}");
        }
        let error = Params::parse(pairs(&[("metadata[a]", "1"), ("metadata[a]", "2")]), accepted).expect_err("twice");
        assert_eq!(error.code, Some("parameter_invalid"));
        let error = Params::parse(pairs(&[("metadata[]", "1")]), accepted).expect("parsed").metadata();
        assert!(error.is_err(), "an empty key");
    }

    #[test]
    fn the_fingerprint_ignores_order_and_expansions_only() {
        let accepted = &["a", "b"];
        let one = Params::parse(pairs(&[("a", "1"), ("b", "2")]), accepted).expect("ok");
        let two = Params::parse(pairs(&[("b", "2"), ("expand[]", "x"), ("a", "1")]), accepted).expect("ok");
        let other = Params::parse(pairs(&[("a", "1"), ("b", "3")]), accepted).expect("ok");
        assert_eq!(one.fingerprint("r"), two.fingerprint("r"));
        assert_ne!(one.fingerprint("r"), other.fingerprint("r"));
        assert_ne!(one.fingerprint("r"), one.fingerprint("s"));
    }
}
