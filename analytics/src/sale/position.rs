//! Where a record sits in its topic: what orders a voucher's records as the
//! services read them (the fold and the waiting room's log both keep it).

/// Where a record sits in its topic. A voucher's records of one topic share
/// a partition, so their offsets order them as the services read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub partition: i32,
    pub offset: i64,
}
