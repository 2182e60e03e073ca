//! What the harness and a worker process say to each other: the spec in
//! the environment, the flush lines on stdout and their cadence.

use crate::model::WorkerReport;
use crate::scenario::{Measure, ScheduleRetry};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::Duration;
use strategies::registry::Variant;
use strategies::{DbLocation, InstanceRole, Micros, OrderId, StrategyOptions};

pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a worker sends its counters and timings to the harness: the
/// most a worker's death can lose.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Schedules a worker keeps in flight at once (publisher confirms, Redis
/// round trips), so one slow confirm does not hold up the orders behind it.
pub const SCHEDULES_IN_FLIGHT: usize = 64;

/// What a worker process runs. Passed in the environment, not argv, so the
/// database password never shows in `ps`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The strategy, remedies included (written as its name,
    /// `redis-zset+outbox+fallback`).
    pub strategy: Variant,
    pub instance: u32,
    /// How many instances the strategy runs: with `instance`, this one's
    /// share of the orders (`id % instances`), as the pool routes them.
    pub instances: u32,
    /// Where the database is, as this worker reaches it (through the
    /// harness's fault proxy when the scenario has network faults).
    pub location: DbLocation,
    pub options: StrategyOptions,
    /// The label of its database sessions, shared by every instance of the
    /// strategy, so `kill-db-connections` finds them.
    pub session: String,
    pub retry: ScheduleRetry,
    /// The probes and recorders on its path.
    pub measure: Measure,
    /// The `delaybench agent` (`host:port`) that runs it; `None`: this
    /// host, a child of the harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Added to its clock (`strategies::set_clock_correction`): minus its
    /// host's measured offset from the harness's clock, so its stamps
    /// compare with the generator's deadlines; 0 on this host.
    #[serde(default)]
    pub clock_correction_us: i64,
}

impl WorkerSpec {
    /// The strategy's options as this instance runs them: an in-process
    /// strategy (the wheel) reloads this instance's share of the orders,
    /// those the pool routes here.
    pub fn instance_options(&self) -> StrategyOptions {
        let mut options = self.options.clone();
        options.timing_wheel.share = Some(strategies::Share {
            index: self.instance,
            of: self.instances,
        });
        options
    }
}

/// One line a worker sends after `ready`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Flush {
    /// Counters since the process started (and since the warm-up ended).
    pub(super) report: WorkerReport,
    /// `(order id, when its cancel's COMMIT returned)`, since the previous flush.
    pub(super) cancel_commits: Vec<(OrderId, Micros)>,
    /// `(order id, us from the order's commit to schedule() returning)`,
    /// since the previous flush.
    pub(super) schedules: Vec<(OrderId, u64)>,
    /// `(order id, when)` of the attempts absorbed since the previous flush.
    #[serde(default)]
    pub(super) absorbed: Vec<(OrderId, Micros)>,
    /// The worker is stopping cleanly; nothing follows.
    pub(super) last: bool,
    /// Sent for a `b` command: every schedule before it has returned.
    #[serde(default)]
    pub(super) barrier: bool,
}

/// A worker's answer to `r <asked>`: its role at that moment, from its
/// strategy's own state ([`strategies::Canceller::role`]), so a fault aimed
/// at a role acts on the instance that holds it now, not a second ago.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct RoleAnswer {
    /// The number the question carried.
    pub(super) asked: u64,
    pub(super) role: InstanceRole,
}

/// The line a [`RoleAnswer`] travels in, told apart from a flush by its
/// only key.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AnswerLine {
    pub(super) answer: RoleAnswer,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves the data usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
