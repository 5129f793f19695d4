//! Prices and currencies: what a voucher sells for and what an order owes.
//!
//! Amounts are integers in the currency's minor unit (cents for `USD`), as
//! payment providers take them, so no amount is ever rounded. Every amount
//! stays below 2^53: the admission script computes price × quantity in
//! Redis's Lua, whose numbers are doubles.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Largest unit price: with [`crate::event::MAX_QUANTITY`] units, an
/// order's amount stays far below 2^53.
pub const MAX_PRICE: u64 = 100_000_000_000;

/// An ISO 4217 currency code: three ASCII capital letters (`EUR`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency([u8; 3]);

/// A string that is not a currency code.
#[derive(Debug, thiserror::Error)]
#[error("currency must be an ISO 4217 code of three capital letters (e.g. EUR), got {0:?}")]
pub struct CurrencyError(String);

impl Currency {
    /// Reads a code; providers write it in lowercase (`eur`), which is
    /// accepted and kept uppercase.
    pub fn parse(code: &str) -> Result<Self, CurrencyError> {
        let bytes = code.as_bytes();
        if bytes.len() != 3 || !bytes.iter().all(u8::is_ascii_alphabetic) {
            return Err(CurrencyError(code.chars().take(16).collect()));
        }
        let upper = bytes.to_ascii_uppercase();
        Ok(Self([upper[0], upper[1], upper[2]]))
    }

    /// The code in capitals.
    pub fn as_str(&self) -> &str {
        // Built from three ASCII letters only.
        std::str::from_utf8(&self.0).unwrap_or("XXX")
    }

    /// The code in lowercase, as Stripe-shaped providers write it.
    pub fn lowercase(&self) -> String {
        self.as_str().to_ascii_lowercase()
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Currency({})", self.as_str())
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        // Only capitals in records and bodies: one spelling per currency.
        if code.bytes().any(|b| b.is_ascii_lowercase()) {
            return Err(serde::de::Error::custom(CurrencyError(code.into_owned())));
        }
        Self::parse(&code).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_three_letters_kept_in_capitals() {
        assert_eq!(Currency::parse("eur").expect("valid").as_str(), "EUR");
        assert_eq!(Currency::parse("USD").expect("valid").lowercase(), "usd");
        for bad in ["", "EU", "EURO", "E1R", "€UR"] {
            assert!(Currency::parse(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<Currency>("\"eur\"").is_err(), "records use capitals only");
        assert_eq!(serde_json::to_string(&Currency::parse("jpy").expect("valid")).expect("json"), "\"JPY\"");
    }

    #[test]
    fn the_largest_order_amount_is_exact_in_a_double() {
        let largest = MAX_PRICE * u64::from(crate::event::MAX_QUANTITY);
        assert!(largest < (1 << 53));
    }
}
