//! Canceller instances as separate OS processes, so a kill is real.
//!
//! The harness starts `delaybench worker` once per instance with a
//! [`WorkerSpec`] in the environment. The protocol is line-based:
//! - worker -> harness (stdout): `{"ready":true}` once running, then a
//!   [`Flush`] JSON line at least every [`FLUSH_EVERY`] and one last flush
//!   (`"last": true`) when it stops. A flush carries the worker's counters so
//!   far and what it measured since the previous flush, so a worker that dies
//!   of anything (the OOM killer, an operator's `kill -9`, a panic) loses at
//!   most its last second;
//! - harness -> worker (stdin): `s <order_id> <expire_at_us> <committed_at_us>`
//!   to schedule, `m` to start measuring (end of warm-up), `b` for a
//!   barrier (the worker flushes with `"barrier": true` once every
//!   schedule sent before it has returned), `c <point>` / `p <point>` to
//!   arm a crash or a stall at a crash point, `d` to disarm them; EOF to
//!   stop.
//!
//! A worker that dies without its last flush is an event of the run
//! ([`WorkerEvent`](crate::model::WorkerEvent)): the pool keeps its measurements, sends new orders to
//! the live instances and, if the scenario says so, starts a fresh process.
//! Logs go to stderr, which the worker inherits.

use crate::model::WorkerReport;
use crate::scenario::{Measure, ScheduleRetry};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::Duration;
use strategies::{DbLocation, Micros, OrderId, StrategyOptions};

mod pool;
mod worker;

pub use pool::Pool;
pub use worker::worker_main;

const SPEC_ENV: &str = "DELAYBENCH_WORKER_SPEC";
const READY_TIMEOUT: Duration = Duration::from_secs(60);
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
    /// The strategy as `--strategies` names it, remedies included
    /// (`redis-zset+outbox+fallback`, see [`registry::Variant`]).
    pub strategy: String,
    pub instance: u32,
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
}

/// One line a worker sends after `ready`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Flush {
    /// Counters since the process started (and since the warm-up ended).
    report: WorkerReport,
    /// `(order id, when its cancel's COMMIT returned)`, since the previous flush.
    cancel_commits: Vec<(OrderId, Micros)>,
    /// `(order id, us from the order's commit to schedule() returning)`,
    /// since the previous flush.
    schedules: Vec<(OrderId, u64)>,
    /// `(order id, when)` of the attempts absorbed since the previous flush.
    #[serde(default)]
    absorbed: Vec<(OrderId, Micros)>,
    /// The worker is stopping cleanly; nothing follows.
    last: bool,
    /// Sent for a `b` command: every schedule before it has returned.
    #[serde(default)]
    barrier: bool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves the data usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
