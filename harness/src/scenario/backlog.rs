//! `[backlog]`: far-future PENDING orders preloaded before the load.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[backlog]`: a pile of far-future PENDING orders that every strategy
/// holds while the scenario's load runs, as a shop with millions of unpaid
/// orders does. They go into the database in multi-row INSERTs, then to the
/// strategy through its own `schedule` (pipelined, as orders are), and both
/// steps are timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Backlog {
    /// Pending orders to preload. `delaybench sweep` runs one step per
    /// size (the backlog sweep, at the scenario's `rate`); `delaybench
    /// run` takes exactly one.
    pub pending: Vec<u64>,
    /// Their deadline, this long after the preload starts: beyond the run,
    /// so none falls due while it is measured (default 1h).
    #[serde(default = "an_hour", with = "humantime_serde")]
    pub after: Duration,
    /// After the drain, with the backlog in place, restart what holds it
    /// and time until a fresh, already-due order is cancelled again: each
    /// strategy's instance 0 (a wheel reloads every pending order), and
    /// the commands here for the services the strategy uses. Empty: that
    /// service is not restarted.
    #[serde(default)]
    pub restart_redis: Vec<String>,
    #[serde(default)]
    pub restart_rabbitmq: Vec<String>,
    /// Unplanned restarts, each after that service's planned one: the
    /// command SIGKILLs the service (Redis without a save, the broker
    /// without `stop_app`) and starts it again with the configuration it
    /// had, and returns once it serves. Timed as the planned ones, with a
    /// few orders in flight through it whose loss it reports. Empty: none.
    #[serde(default)]
    pub kill_redis: Vec<String>,
    #[serde(default)]
    pub kill_rabbitmq: Vec<String>,
    /// How long a restart may take to cancel again, and how long the
    /// orders in flight through it are watched before those not cancelled
    /// count as lost (default 3min).
    #[serde(default = "three_minutes", with = "humantime_serde")]
    pub recovery_limit: Duration,
}

fn an_hour() -> Duration {
    Duration::from_secs(3600)
}

fn three_minutes() -> Duration {
    Duration::from_secs(180)
}
