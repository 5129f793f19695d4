//! Form parameters as Stripe reads them: `name=value` pairs, maps as
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
    /// Refuses names outside `accepted`; `metadata[…]` is accepted when
    /// `metadata` is, and `expand[]` always (and then ignored: charges are
    /// always expanded).
    pub(crate) fn parse(pairs: Vec<(String, String)>, accepted: &[&str]) -> Result<Self, Failure> {
        for (name, _) in &pairs {
            let base = name.split_once('[').map_or(name.as_str(), |(base, _)| base);
            let known =
                if base == name { accepted.contains(&base) } else { base == "expand" || accepted.contains(&base) };
            if !known {
                return Err(Failure::param("parameter_unknown", name, format!("Received unknown parameter: {name}")));
            }
        }
        let params = Self { pairs };
        for name in accepted.iter().filter(|name| **name != "metadata") {
            if params.pairs.iter().filter(|(key, _)| key == name).count() > 1 {
                return Err(Failure::param("parameter_invalid", name, format!("Parameter {name} given twice.")));
            }
        }
        Ok(params)
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

    /// The `metadata[…]` entries, within Stripe's bounds.
    pub(crate) fn metadata(&self) -> Result<BTreeMap<String, String>, Failure> {
        let mut metadata = BTreeMap::new();
        for (name, value) in &self.pairs {
            let Some(key) = name.strip_prefix("metadata[").and_then(|rest| rest.strip_suffix(']')) else {
                continue;
            };
            if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_CHARS {
                return Err(Failure::param(
                    "parameter_invalid",
                    name,
                    format!("Metadata keys must be 1 to {MAX_METADATA_KEY_CHARS} characters."),
                ));
            }
            if value.chars().count() > MAX_METADATA_VALUE_CHARS {
                return Err(Failure::param(
                    "parameter_invalid",
                    name,
                    format!("Metadata values can have up to {MAX_METADATA_VALUE_CHARS} characters."),
                ));
            }
            metadata.insert(key.to_owned(), value.clone());
        }
        if metadata.len() > MAX_METADATA_KEYS {
            return Err(Failure::param(
                "parameter_invalid",
                "metadata",
                format!("Metadata can have up to {MAX_METADATA_KEYS} keys."),
            ));
        }
        Ok(metadata)
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
            &["amount", "metadata"],
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
