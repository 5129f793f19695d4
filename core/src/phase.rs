//! Where a sale stands, as its page and its readers show it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A sale's phase, decided by the same rules, in the same order, as
/// `admit.lua` decides an order: window, pause, stock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Before `begins_at`: orders get `not_started`.
    Upcoming,
    /// Open, with units left.
    Open,
    /// An admin paused it.
    Paused,
    /// Open, but admission has no units left (returned units may come back).
    SoldOut,
    /// At or after `ends_at`.
    Ended,
}

impl Phase {
    /// The phase at `now` of a sale with this window, pause and units left
    /// to admit.
    pub fn at(
        now: DateTime<Utc>,
        begins_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
        paused: bool,
        available: u64,
    ) -> Self {
        if now < begins_at {
            Self::Upcoming
        } else if now >= ends_at {
            Self::Ended
        } else if paused {
            Self::Paused
        } else if available == 0 {
            Self::SoldOut
        } else {
            Self::Open
        }
    }

    /// The snake_case name, as in API bodies.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Upcoming => "upcoming",
            Self::Open => "open",
            Self::Paused => "paused",
            Self::SoldOut => "sold_out",
            Self::Ended => "ended",
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;

    #[test]
    fn the_window_decides_first_then_the_pause_then_the_stock() {
        let now = Utc::now();
        let (begins, ends) = (now - Duration::minutes(1), now + Duration::minutes(1));
        assert_eq!(Phase::at(now, now + Duration::seconds(1), ends, true, 0), Phase::Upcoming);
        assert_eq!(Phase::at(now, begins, now, true, 0), Phase::Ended, "ends_at itself is over");
        assert_eq!(Phase::at(now, now, ends, true, 0), Phase::Paused, "begins_at itself is open");
        assert_eq!(Phase::at(now, begins, ends, false, 0), Phase::SoldOut);
        assert_eq!(Phase::at(now, begins, ends, false, 1), Phase::Open);
        assert_eq!(serde_json::to_value(Phase::SoldOut).expect("json"), "sold_out");
    }
}
