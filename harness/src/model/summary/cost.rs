//! What a strategy's run cost, as `summary.json` holds it, and what the
//! reports say of how the server's rows read were counted.

use crate::model::records::WorkerReport;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use strategies::StoreStats;

/// What the strategy cost. Every figure covers the measured window (after
/// the warm-up) and is divided by the cancels the instances made in that
/// same window (`store.cancelled`), except `server_rows_read`, which covers
/// the whole run and the workload's own reads (see its doc).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cost {
    /// Canceller instances' store counters, summed, measured window.
    pub store: StoreStats,
    /// Statements the canceller issued per order it cancelled (app-side).
    pub statements_per_cancel: Option<f64>,
    /// Rows the canceller's scans returned per order it cancelled.
    pub rows_read_per_cancel: Option<f64>,
    /// Rows the database server read over the whole run, order creation,
    /// payments and cancels together (see `db_stats`); `None` on SQLite.
    /// The workload is the same for every strategy of a run, so the
    /// differences between strategies are the cancellers'.
    #[serde(default)]
    pub server_rows_read: Option<u64>,
    /// `server_rows_read` per cancelled order.
    #[serde(default)]
    pub server_rows_read_per_cancel: Option<f64>,
    /// Rows the server read inside the canceller's own transactions,
    /// measured window, apart from the workload's (PostgreSQL: the
    /// backend's row counters read after BEGIN and before COMMIT); `None`
    /// where the database cannot tell them apart or the probe was off.
    /// With `measure.server-reads = "sampled"` an estimate from the
    /// transactions read (see `measurement`).
    #[serde(default)]
    pub canceller_server_rows_read: Option<u64>,
    /// `canceller_server_rows_read` per cancel.
    #[serde(default)]
    pub canceller_server_rows_read_per_cancel: Option<f64>,
    /// Half-width of the 95 % interval of that per-cancel estimate (0 when
    /// every transaction was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canceller_server_rows_read_ci95_per_cancel: Option<f64>,
    /// What the probes and recorders on the strategy's path cost
    /// (`None` in runs made before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement: Option<MeasurementCost>,
    /// Cancel attempts that changed nothing (duplicates absorbed).
    pub absorbed_attempts: u64,
    /// CPU of all instances over the measured window, ms.
    pub cpu_ms: u64,
    /// `cpu_ms` per order the instances cancelled, in µs.
    #[serde(default)]
    pub cpu_us_per_cancel: Option<f64>,
    /// Largest peak RSS of any instance, KiB.
    pub peak_rss_kib: u64,
    /// The instances' strategy counters, summed, measured window.
    pub strategy_counters: BTreeMap<String, u64>,
    /// Commands Redis served during the measured window (`INFO
    /// commandstats` delta, server-wide), for strategies that use Redis.
    pub redis_commands: Option<u64>,
    /// `redis_commands` per cancel.
    pub redis_commands_per_cancel: Option<f64>,
    /// Why `redis_commands` is unknown when it is (a Redis restart resets
    /// its counts).
    #[serde(default)]
    pub redis_note: Option<String>,
    /// Messages the RabbitMQ strategies published plus those they consumed
    /// (re-delays included), measured window, from their own counters.
    #[serde(default)]
    pub broker_messages: Option<u64>,
    /// `broker_messages` per cancel.
    #[serde(default)]
    pub broker_messages_per_cancel: Option<f64>,
    /// Every worker process, dead ones with the counters of their last flush.
    pub instances: Vec<WorkerReport>,
}

/// The measurement's own cost on the strategy's path, measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasurementCost {
    /// Canceller transactions, and those whose server-side reads were read.
    pub transactions: u64,
    pub server_reads_probes: u64,
    /// Wall time in those readings' round trips, µs: an upper bound on the
    /// worker CPU they take, and what they delay the transactions by.
    pub probe_us: u64,
    /// The part of `probe_us` that was `[network]`'s round trip to the
    /// database as the proxy held it (its `rtt` plus twice the proxy's
    /// median lateness; two readings a probed transaction, one round trip
    /// each): waiting, not CPU, so left out of `us_per_cancel` and
    /// `share_of_cpu`. 0 over loopback. Runs at a45162e took out the `rtt`
    /// alone, so their share still holds the proxy's lateness (overstated).
    #[serde(default)]
    pub link_us: u64,
    /// CPU the workers spent building and encoding their flushes, µs.
    pub flush_us: u64,
    /// `probe_us - link_us + flush_us` per cancel, µs.
    pub us_per_cancel: Option<f64>,
    /// `us_per_cancel` as a share of the workers' CPU per cancel (0.01 = 1 %).
    pub share_of_cpu: Option<f64>,
}

/// The most the measurement may cost a strategy's path, as a share of its
/// CPU per cancel, before the report flags it.
pub const MEASUREMENT_BUDGET: f64 = 0.05;

/// What the PostgreSQL note and the MariaDB note say in reports.
pub fn server_rows_source(kind: &str) -> &'static str {
    match kind {
        "postgres" => "pg_stat_user_tables of the strategy's schema: seq_tup_read + idx_tup_fetch",
        "mysql" => "Handler_read_* deltas, server-wide",
        _ => "not available on SQLite",
    }
}

/// How the canceller's own server-side reads were told apart from the
/// workload's, for the reports.
pub fn canceller_rows_method(kind: &str) -> &'static str {
    match kind {
        "postgres" => {
            "the canceller's own transactions: the backend's row counters of the namespace's \
             tables and indexes read after BEGIN and before COMMIT, in one transaction a \
             second per instance (`[measure]`), the rest estimated from them; the readings are \
             not counted as statements; the wheel's reload on start runs outside a transaction \
             and is not included"
        }
        "mysql" => {
            "not separated on MariaDB (Handler_read_* are server-wide): the figure is the whole \
             run's, workload included"
        }
        _ => "not available on SQLite",
    }
}
