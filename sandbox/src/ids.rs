//! Object ids in Stripe's form: a type prefix and a unique suffix.

/// `<prefix>_<32 hex digits>`: unique, and ordered by creation like Stripe's.
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}
