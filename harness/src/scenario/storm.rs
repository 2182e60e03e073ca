//! `[storm]`: many PENDING orders whose deadlines fall in one instant while
//! the regular load runs (a flash sale's unpaid orders expiring together).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[storm]`: `orders` PENDING orders, preloaded and handed to the
/// strategy before the load, all due `at` after the load's first order.
/// None is ever paid, so each must be cancelled: what is measured is how
/// fast the strategy's cancel path drains them, apart from order creation,
/// and what that does meanwhile to the regular orders falling due.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Storm {
    /// Orders due in the one instant. `delaybench run` takes exactly one
    /// size (the first).
    pub orders: Vec<u64>,
    /// The instant, counted from the load's first order: after the warm-up
    /// and before the last arrival, so the regular orders' lateness is
    /// seen before, during and after the drain (default 10s).
    #[serde(default = "ten_seconds", with = "humantime_serde")]
    pub at: Duration,
}

fn ten_seconds() -> Duration {
    Duration::from_secs(10)
}

impl Storm {
    /// How long before the deadline the storm's orders are written, once
    /// the instances run: the insert and the hand-off must fit in it before
    /// the load's `at` (5 s, plus 150 µs per order: a hand-off runs at 10k
    /// to 60k orders/s here).
    /// When they do not, the load starts late and the storm falls due
    /// earlier in it than `at`; the report says by how much.
    pub fn lead(&self, orders: u64) -> Duration {
        Duration::from_secs(5) + Duration::from_micros(150 * orders) + self.at
    }
}
