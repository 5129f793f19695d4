//! The sandbox's one notion of now: wall-clock milliseconds, because
//! Stripe's timestamps are unix seconds and the switches (search lag,
//! settling delays, key lifetimes) are milliseconds. The books take the
//! moment as an argument, so their rules are tested at any time.

/// A moment, in milliseconds since the unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Moment(i64);

impl Moment {
    /// The wall clock now.
    pub(crate) fn now() -> Self {
        Self(chrono::Utc::now().timestamp_millis())
    }

    /// The start of unix second `secs`.
    pub(crate) const fn from_secs(secs: i64) -> Self {
        Self(secs.saturating_mul(1_000))
    }

    /// In Stripe's unit: whole unix seconds.
    pub(crate) const fn secs(self) -> i64 {
        self.0.div_euclid(1_000)
    }

    #[cfg(test)]
    pub(crate) const fn millis(self) -> i64 {
        self.0
    }

    /// `ms` later.
    pub(crate) fn after_ms(self, ms: u64) -> Self {
        Self(self.0.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX)))
    }

    /// `ms` earlier.
    pub(crate) fn before_ms(self, ms: u64) -> Self {
        Self(self.0.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_whole_and_arithmetic_saturates() {
        let moment = Moment::from_secs(10).after_ms(999);
        assert_eq!((moment.secs(), moment.millis()), (10, 10_999));
        assert_eq!(moment.before_ms(1_000).secs(), 9);
        assert_eq!(Moment::from_secs(i64::MAX).after_ms(u64::MAX).millis(), i64::MAX);
    }
}
