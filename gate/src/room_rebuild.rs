//! What a lost waiting room is put back as, from the log: its line and
//! places as `lua/queue_restore.lua` takes them. `crate::room_restore`
//! makes it for a room not revealed yet, `crate::room_revealed` for one
//! revealed.

/// A join after the start is placed at 2^52 + its seq, behind the whole
/// pre-queue, whose keys are below 2^52 (`lua/queue_join.lua`).
pub(crate) const AFTER_START: u64 = 1 << 52;

/// One line member and its holder's place, as `queue_restore.lua` takes
/// them.
#[derive(Debug)]
pub(crate) struct Placed {
    pub(crate) score: String,
    pub(crate) user: String,
    pub(crate) attempt: u32,
    /// The places hash's value (`lua/queue_join.lua` lists the forms);
    /// empty for a place its holder took again later.
    pub(crate) value: String,
}

/// What a lost room is put back as.
#[derive(Debug)]
pub(crate) struct RoomRebuild {
    /// In line order.
    pub(crate) places: Vec<Placed>,
    /// The entries issued and not spent, with their token's end (ms).
    pub(crate) holds: Vec<(u64, i64)>,
    pub(crate) seed: String,
    /// The room hash's fields beyond a new room's (`lua/room_fields.lua`).
    pub(crate) fields: Vec<(&'static str, String)>,
}
