//! How orders behave: `[[timeouts]]`, `[stock]`, `[payments]`, and
//! `[schedule-retry]` (what the order service does when `schedule` fails).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[[timeouts]]`: how long an order may stay unpaid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Timeout {
    #[serde(with = "humantime_serde")]
    pub after: Duration,
    /// Relative weight (default 1).
    #[serde(default = "one")]
    pub weight: u32,
}

/// `[stock]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Stock {
    /// Number of SKUs; orders pick one uniformly (default 50).
    pub skus: u32,
    /// Units per SKU at the start (default 1000000). Creation is refused
    /// when a SKU runs short, and the report counts refusals.
    pub initial: i64,
    /// Orders take 1..=max-qty units (default 3).
    pub max_qty: u32,
}

impl Default for Stock {
    fn default() -> Self {
        Stock {
            skus: 50,
            initial: 1_000_000,
            max_qty: 3,
        }
    }
}

/// `[payments]`: how the simulated payment gateway behaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Payments {
    /// Share of orders that are paid at all (default 0.5).
    pub pay_ratio: f64,
    /// Share of payers paying within +-epsilon of the deadline, racing the
    /// canceller (default 0.1).
    pub near_deadline_share: f64,
    #[serde(with = "humantime_serde")]
    pub near_deadline_epsilon: Duration,
    /// Share of payers whose callback arrives after the deadline, when the
    /// order should already be cancelled: exactly one refund each (default 0.05).
    pub late_share: f64,
    /// Late callbacks arrive between late-by/2 and late-by after the deadline.
    #[serde(with = "humantime_serde")]
    pub late_by: Duration,
    /// Added to every callback (gateway-to-shop delay; default 0).
    #[serde(with = "humantime_serde")]
    pub callback_delay: Duration,
    /// Share of callbacks the gateway delivers twice (default 0.1).
    pub duplicate_ratio: f64,
    /// The retry comes this long after the first copy (default 100ms).
    #[serde(with = "humantime_serde")]
    pub duplicate_after: Duration,
}

impl Default for Payments {
    fn default() -> Self {
        Payments {
            pay_ratio: 0.5,
            near_deadline_share: 0.1,
            near_deadline_epsilon: Duration::from_millis(20),
            late_share: 0.05,
            late_by: Duration::from_secs(1),
            callback_delay: Duration::ZERO,
            duplicate_ratio: 0.1,
            duplicate_after: Duration::from_millis(100),
        }
    }
}

/// `[schedule-retry]`: without an outbox, the order service calls
/// `schedule` after its commit; when that fails (the broker or Redis is
/// away) the worker retries it from a bounded buffer, and what it finally
/// gives up on is counted as dropped: those orders are then cancelled only
/// by a fallback, or never.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ScheduleRetry {
    /// Give up on a schedule this long after its first failure (default 2s).
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
    /// Failed schedules held for retry at once per instance; one that fails
    /// while the buffer is full is dropped at once (default 1000).
    pub buffer: u32,
}

impl Default for ScheduleRetry {
    fn default() -> Self {
        ScheduleRetry {
            give_up_after: Duration::from_secs(2),
            buffer: 1000,
        }
    }
}

pub(super) fn one() -> u32 {
    1
}
