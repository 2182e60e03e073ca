//! `summary.json`, the source of truth for one strategy's run, and the
//! lateness statistics it carries. Reports are rendered from these files.

use crate::driver::GeneratorHealth;
use crate::faults::FaultRecord;
use crate::instance::WorkerReport;
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use strategies::checker::{Anomalies, AnomalyExamples, CancelTiming, OrderCounts};
use strategies::{Capabilities, StoreStats};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Skipped,
    Failed,
}

impl Status {
    /// The word written to `summary.json` and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Skipped => "skipped",
            Status::Failed => "failed",
        }
    }
}

/// Where the strategy's data lives (kept after the run).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DatabaseInfo {
    /// `postgres`, `mysql` or `sqlite`.
    pub kind: String,
    /// Password removed.
    pub url: String,
    /// Schema, database or file; `null` if none was created.
    pub namespace: Option<String>,
}

/// Lateness = cancelled_at_us - expire_at_us over the measured orders.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessStats {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

/// Lateness of the orders whose deadline fell in one second of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessBucket {
    /// Seconds after t0 of the deadline.
    pub second: u64,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Lateness of the orders with one configured timeout (mixed-timeout
/// scenarios show head-of-line blocking here).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeoutLateness {
    pub timeout_ms: u64,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Lateness figures of one strategy run.
#[derive(Debug)]
pub struct Lateness {
    pub histogram: Histogram<u64>,
    pub over_time: Vec<LatenessBucket>,
    pub by_timeout: Vec<TimeoutLateness>,
}

/// What the strategy cost, over the measured window (after warm-up).
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
    /// Cancel attempts that changed nothing (duplicates absorbed).
    pub absorbed_attempts: u64,
    /// CPU of all instances, ms.
    pub cpu_ms: u64,
    /// `cpu_ms` per order the instances cancelled, in µs.
    #[serde(default)]
    pub cpu_us_per_cancel: Option<f64>,
    /// Largest peak RSS of any instance, KiB.
    pub peak_rss_kib: u64,
    pub strategy_counters: BTreeMap<String, u64>,
    /// Commands Redis served during the whole run (`INFO commandstats`
    /// delta, server-wide), for strategies that use Redis.
    pub redis_commands: Option<u64>,
    /// `redis_commands` per cancelled order (whole run).
    pub redis_commands_per_cancel: Option<f64>,
    /// Messages the RabbitMQ strategies published plus those they consumed
    /// (re-delays included), whole run, from the strategy's own counters.
    #[serde(default)]
    pub broker_messages: Option<u64>,
    /// `broker_messages` per cancelled order (whole run).
    #[serde(default)]
    pub broker_messages_per_cancel: Option<f64>,
    pub instances: Vec<WorkerReport>,
}

/// One strategy's result. Keys required by outside checkers: `strategy`,
/// `status`, `reason`, `database`, `orders`, `lateness_us`, `anomalies`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub strategy: String,
    pub status: Status,
    pub reason: Option<String>,
    pub database: DatabaseInfo,
    pub orders: OrderCounts,
    pub lateness_us: LatenessStats,
    pub anomalies: Anomalies,
    pub anomaly_examples: AnomalyExamples,
    pub cancelled_by: BTreeMap<String, u64>,
    pub payments: BTreeMap<String, u64>,
    pub releases: u64,
    pub lateness_over_time: Vec<LatenessBucket>,
    pub lateness_by_timeout: Vec<TimeoutLateness>,
    pub cost: Cost,
    pub generator: GeneratorHealth,
    /// The scenario's faults as they happened.
    #[serde(default)]
    pub faults: Vec<FaultRecord>,
    /// Why the strategy's teardown failed, if it did (its queues or keys may
    /// be left behind; the measurements stand).
    #[serde(default)]
    pub teardown_error: Option<String>,
    pub capabilities: Option<Capabilities>,
    pub instances: u32,
    /// The configured timeouts, next to every latency.
    pub timeouts: String,
    pub drain_ms: u64,
    /// Wall-clock seconds this strategy's run took.
    pub elapsed_s: f64,
}

impl Summary {
    /// A row for a strategy that did not run, with the reason.
    pub fn not_run(
        strategy: &str,
        status: Status,
        reason: String,
        database: DatabaseInfo,
    ) -> Summary {
        Summary {
            strategy: strategy.to_string(),
            status,
            reason: Some(reason),
            database,
            orders: OrderCounts::default(),
            lateness_us: LatenessStats::default(),
            anomalies: Anomalies::default(),
            anomaly_examples: AnomalyExamples::default(),
            cancelled_by: BTreeMap::new(),
            payments: BTreeMap::new(),
            releases: 0,
            lateness_over_time: Vec::new(),
            lateness_by_timeout: Vec::new(),
            cost: Cost::default(),
            generator: GeneratorHealth::default(),
            faults: Vec::new(),
            teardown_error: None,
            capabilities: None,
            instances: 0,
            timeouts: String::new(),
            drain_ms: 0,
            elapsed_s: 0.0,
        }
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("summary.json");
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    pub fn read(dir: &Path) -> Result<Summary> {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// A lateness histogram in microseconds, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 24 * 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Lateness of the measured orders (created at or after `measured_from_us`),
/// overall, per second of deadline and per configured timeout (each order
/// goes to the timeout closest to its `expire - created`). Early cancels
/// (negative lateness) are anomalies, counted by the checker, and left out.
pub fn lateness(
    timings: &[CancelTiming],
    measured_from_us: i64,
    t0_us: i64,
    timeouts_us: &[i64],
) -> Lateness {
    let mut all = new_histogram();
    let mut per_second: BTreeMap<u64, Histogram<u64>> = BTreeMap::new();
    let mut per_timeout: BTreeMap<i64, Histogram<u64>> = BTreeMap::new();
    for t in timings
        .iter()
        .filter(|t| t.created_at_us >= measured_from_us)
    {
        let late = t.cancelled_at_us - t.expire_at_us;
        if late < 0 {
            continue;
        }
        let late = late as u64;
        all.saturating_record(late);
        let second = ((t.expire_at_us - t0_us).max(0) / 1_000_000) as u64;
        per_second
            .entry(second)
            .or_insert_with(new_histogram)
            .saturating_record(late);
        let own = t.expire_at_us - t.created_at_us;
        if let Some(&timeout) = timeouts_us.iter().min_by_key(|&&c| (c - own).abs()) {
            per_timeout
                .entry(timeout)
                .or_insert_with(new_histogram)
                .saturating_record(late);
        }
    }
    Lateness {
        histogram: all,
        over_time: per_second
            .into_iter()
            .map(|(second, h)| LatenessBucket {
                second,
                count: h.len(),
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
                max_us: h.max(),
            })
            .collect(),
        by_timeout: per_timeout
            .into_iter()
            .map(|(timeout, h)| TimeoutLateness {
                timeout_ms: (timeout / 1000) as u64,
                count: h.len(),
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
                max_us: h.max(),
            })
            .collect(),
    }
}

pub fn stats(h: &Histogram<u64>) -> LatenessStats {
    if h.is_empty() {
        return LatenessStats::default();
    }
    LatenessStats {
        count: h.len(),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        mean: h.mean(),
    }
}

/// HdrHistogram's percentile-distribution text (values in milliseconds),
/// readable by HdrHistogram's plotting tools.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if !h.is_empty() {
        let mut total = 0;
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let inv = if q < 1.0 {
                format!("{:>14.2}", 1.0 / (1.0 - q))
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{:>12.3} {:>14.12} {:>10} {inv}",
                v.value_iterated_to() as f64 / 1000.0,
                q,
                total
            );
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / 1000.0,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(created: i64, expire: i64, cancelled: i64) -> CancelTiming {
        CancelTiming {
            created_at_us: created,
            expire_at_us: expire,
            cancelled_at_us: cancelled,
        }
    }

    #[test]
    fn lateness_skips_warmup_and_early_cancels() {
        let timings = vec![
            timing(0, 1_000_000, 1_500_000),         // warm-up: excluded
            timing(2_000_000, 3_000_000, 3_010_000), // 10 ms late
            timing(2_000_000, 3_000_000, 3_030_000), // 30 ms late
            timing(2_000_000, 3_000_000, 2_990_000), // early: the checker's business
        ];
        let l = lateness(&timings, 1_000_000, 0, &[1_000_000, 5_000_000]);
        let (h, buckets) = (&l.histogram, &l.over_time);
        let s = stats(h);
        assert_eq!(s.count, 2);
        // HdrHistogram reports the highest value equivalent at 3 significant digits.
        assert!((30_000..=30_030).contains(&s.max), "{s:?}");
        assert_eq!(buckets.len(), 1);
        assert_eq!(buckets[0].second, 3);
        assert_eq!(l.by_timeout.len(), 1);
        assert_eq!(
            (l.by_timeout[0].timeout_ms, l.by_timeout[0].count),
            (1000, 2)
        );
        let text = hgrm(h);
        assert!(
            text.contains("Total count") && text.contains("Percentile"),
            "{text}"
        );
    }
}
