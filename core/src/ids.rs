//! Identifiers of vouchers, orders and users.
//!
//! Order and voucher ids are UUIDv7: 48 bits of Unix milliseconds followed by
//! random bits. They are unique across ingress instances without any
//! coordination (no worker-id registry as Snowflake ids need), sort roughly by
//! creation time, and every tool that reads the log understands them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Longest user id accepted; user ids become Redis hash fields and view keys.
pub const MAX_USER_ID_LEN: usize = 64;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh, time-ordered id.
            pub fn generate() -> Self {
                Self(Uuid::now_v7())
            }

            /// The underlying UUID.
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(uuid: Uuid) -> Self {
                Self(uuid)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::try_parse(s).map(Self).map_err(|_| IdError::NotAUuid(truncate(s)))
            }
        }
    };
}

uuid_id!(
    /// Identifies one flash-sale voucher.
    VoucherId
);
uuid_id!(
    /// Identifies one order, from admission to its final status.
    OrderId
);

/// A user's identity as the platform knows it: 1 to 64 characters from
/// `[A-Za-z0-9_.:@-]`, so it is safe as a Redis field, a CQL key and a URL
/// path segment.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct UserId(String);

impl UserId {
    /// Validates `raw` as a user id.
    pub fn parse(raw: &str) -> Result<Self, IdError> {
        let valid_char = |c: char| c.is_ascii_alphanumeric() || "_.:@-".contains(c);
        if raw.is_empty() || raw.len() > MAX_USER_ID_LEN || !raw.chars().all(valid_char) {
            return Err(IdError::BadUserId(truncate(raw)));
        }
        Ok(Self(raw.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for UserId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for UserId {
    type Err = IdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Order and voucher ids are UUIDs.
    #[error("`{0}` is not a UUID")]
    NotAUuid(String),
    /// User ids are short and restricted to a safe alphabet.
    #[error("`{0}` is not a valid user id (1-64 characters of A-Z a-z 0-9 _ . : @ -)")]
    BadUserId(String),
}

/// Keeps hostile input from bloating error messages and logs.
fn truncate(raw: &str) -> String {
    raw.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_are_time_ordered_and_round_trip() {
        let first = OrderId::generate();
        let second = OrderId::generate();
        assert!(first < second);
        assert_eq!(first.to_string().parse::<OrderId>(), Ok(first));
    }

    #[test]
    fn user_ids_reject_unsafe_text() {
        assert!(UserId::parse("alice-1@example.com").is_ok());
        for bad in ["", "a b", "x{v:1}", "é", &"u".repeat(65)] {
            assert!(UserId::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(serde_json::from_str::<UserId>("\"has space\"").is_err());
    }

    #[test]
    fn voucher_id_rejects_non_uuid() {
        assert!(matches!("42".parse::<VoucherId>(), Err(IdError::NotAUuid(_))));
    }
}
