//! `summary.json`, the source of truth for one strategy's run (its
//! lateness statistics are in [`super::lateness`]). Reports are rendered
//! from these files.

use super::cpu::CpuUse;
use super::lateness::{
    bucket, pool, stats, timeout_class, LatenessBucket, LatenessStats, OverdueTrend, Pct,
    TimeoutLateness,
};
use super::records::{GeneratorHealth, WorkerEvent, WorkerEventKind, WorkerReport};
use crate::faults::{FaultLoss, FaultRecord};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use strategies::checker::{Anomalies, AnomalyExamples, OrderCounts};
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

impl DatabaseInfo {
    /// `server`, before a namespace was made on it.
    pub fn server(server: &strategies::DbServer) -> DatabaseInfo {
        DatabaseInfo {
            kind: server.kind().as_str().to_string(),
            url: server.display_url(),
            namespace: None,
        }
    }

    /// The namespace at `location`.
    pub fn namespace(location: &strategies::DbLocation) -> DatabaseInfo {
        DatabaseInfo {
            kind: location.kind.as_str().to_string(),
            url: location.display_url(),
            namespace: Some(location.namespace.clone()),
        }
    }
}

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
    /// CPU the workers spent building and encoding their flushes, µs.
    pub flush_us: u64,
    /// `probe_us + flush_us` per cancel, µs.
    pub us_per_cancel: Option<f64>,
    /// `us_per_cancel` as a share of the workers' CPU per cancel (0.01 = 1 %).
    pub share_of_cpu: Option<f64>,
}

/// The folder of a strategy's unmeasured twin in its run folder
/// (`measure.unmeasured-twin`).
pub fn twin_folder(strategy: &str) -> String {
    format!("{strategy}.unmeasured")
}

/// The most the measurement may cost a strategy's path, as a share of its
/// CPU per cancel, before the report flags it.
pub const MEASUREMENT_BUDGET: f64 = 0.05;

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
    /// Lateness at the moment each cancel's COMMIT returned, from the
    /// workers' own clocks (`None` in runs made before it was measured).
    #[serde(default)]
    pub committed_lateness_us: Option<LatenessStats>,
    /// Per order, COMMIT returned minus the row's `cancelled_at_us`: what
    /// the row-based figure leaves out.
    #[serde(default)]
    pub commit_gap_us: Option<LatenessStats>,
    /// Orders paid after their deadline while still PENDING (measured
    /// window): `paid_at_us - expire_at_us`, a lower bound on how late the
    /// canceller was for orders that are missing from `lateness_us`.
    #[serde(default)]
    pub censored_lateness_us: Option<LatenessStats>,
    /// Order committed -> `schedule()` returned in the worker, per order
    /// (measured window).
    #[serde(default)]
    pub schedule_path_us: Option<LatenessStats>,
    /// Overdue and still PENDING over the window the measured orders fall
    /// due in (`None` in runs made before it was measured).
    #[serde(default)]
    pub overdue: Option<OverdueTrend>,
    /// CPU over the arrival window (warm-up end to last arrival), machine
    /// and per service (`None` where it cannot be read, or in older runs).
    #[serde(default)]
    pub cpu: Option<CpuUse>,
    /// The `[backlog]` the strategy held while it ran, and its restarts.
    #[serde(default)]
    pub backlog: Option<super::records::BacklogRecord>,
    /// With faults: the missed cancels, by the fault in effect during each
    /// lost order's life (a last row for losses no fault explains).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_by_fault: Vec<FaultLoss>,
    /// `+outbox`: the outbox's length over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox: Option<super::records::OutboxRecord>,
    pub cost: Cost,
    pub generator: GeneratorHealth,
    /// Worker processes that died without being asked, and restarts.
    #[serde(default)]
    pub worker_events: Vec<WorkerEvent>,
    /// Everything that makes a figure of this row less than it reads, in
    /// plain words; reports print them in the row.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The scenario's faults as they happened.
    #[serde(default)]
    pub faults: Vec<FaultRecord>,
    /// Why the strategy's teardown failed, if it did (its queues or keys may
    /// be left behind; the measurements stand).
    #[serde(default)]
    pub teardown_error: Option<String>,
    /// The scenario's `[before-each-strategy]` command as it ran before
    /// this strategy (`None` when the scenario has none, or the strategy
    /// was skipped before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_strategy: Option<super::records::HookRecord>,
    pub capabilities: Option<Capabilities>,
    pub instances: u32,
    /// The configured timeouts, next to every latency.
    pub timeouts: String,
    pub drain_ms: u64,
    /// Wall-clock seconds this strategy's run took.
    pub elapsed_s: f64,
    /// With `--repeat N`: every figure's median, min and max over the
    /// repetitions (`None` for a single run).
    #[serde(default)]
    pub repeats: Option<Repeats>,
    /// The probes and recorders that ran on the strategy's path (`None`
    /// in runs made before `[measure]` existed, which read the server's
    /// row counts in every canceller transaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<crate::scenario::Measure>,
}

/// A repeated strategy's figures. The `summary.json` beside it is the
/// median repetition's run (its namespace, order counts, examples) with
/// two exceptions that keep it from reading better than what happened:
/// `lateness_us` holds the medians and `anomalies` the worst repetition's
/// count of each kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// Repetitions that ran (status ok).
    pub count: u32,
    /// The folders of the repetitions, relative to the strategy's folder.
    pub folders: Vec<String>,
    /// Figure name (see [`figures`]) -> spread. A figure is absent when any
    /// repetition lacks it (say, too few samples for that percentile).
    pub figures: BTreeMap<String, Spread>,
    /// Repetitions that did not measure, as `repeat k: status: reason`.
    #[serde(default)]
    pub not_measured: Vec<String>,
}

/// Median, min and max of one figure over the repetitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(mut values: Vec<f64>) -> Spread {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Spread {
            median,
            min: values[0],
            max: values[n - 1],
        }
    }

    /// Whether the two ranges are disjoint: a difference larger than the spread.
    pub fn differs_from(&self, other: &Spread) -> bool {
        self.max < other.min || other.max < self.min
    }
}

/// Every figure of a strategy's run that reports and comparisons show, by
/// name; `None` where the run did not measure it or too few samples carry it.
pub fn figures(s: &Summary) -> Vec<(&'static str, Option<f64>)> {
    let l = &s.lateness_us;
    let us = |v: Option<u64>| v.map(|v| v as f64);
    let c = &s.cost;
    let attempts =
        (c.store.cancelled > 0).then(|| c.store.cancel_attempts as f64 / c.store.cancelled as f64);
    vec![
        ("created", Some(s.orders.created as f64)),
        ("paid", Some(s.orders.paid as f64)),
        ("cancelled", Some(s.orders.cancelled as f64)),
        ("pending", Some(s.orders.pending as f64)),
        ("paid_late", Some(s.orders.paid_after_deadline as f64)),
        ("n", Some(l.count as f64)),
        ("p50", us(l.shown(Pct::P50))),
        ("p90", us(l.shown(Pct::P90))),
        ("p99", us(l.shown(Pct::P99))),
        ("p999", us(l.shown(Pct::P999))),
        ("max", us(l.shown(Pct::Max))),
        (
            "commit_p99",
            us(s.committed_lateness_us
                .as_ref()
                .and_then(|c| c.shown(Pct::P99))),
        ),
        ("anomalies", Some(s.anomalies.total() as f64)),
        ("stmts_per_cancel", c.statements_per_cancel),
        ("attempts_per_cancel", attempts),
        ("server_rows_per_cancel", c.server_rows_read_per_cancel),
        (
            "canceller_rows_per_cancel",
            c.canceller_server_rows_read_per_cancel,
        ),
        ("broker_msgs_per_cancel", c.broker_messages_per_cancel),
        ("redis_cmds_per_cancel", c.redis_commands_per_cancel),
        ("cpu_us_per_cancel", c.cpu_us_per_cancel),
        (
            "measurement_us_per_cancel",
            c.measurement.as_ref().and_then(|m| m.us_per_cancel),
        ),
        (
            "measurement_share_of_cpu",
            c.measurement.as_ref().and_then(|m| m.share_of_cpu),
        ),
        ("peak_rss_mib", Some(c.peak_rss_kib as f64 / 1024.0)),
        ("lag_p99", Some(s.generator.lag_us_p99 as f64)),
        (
            "schedule_p99",
            us(s.schedule_path_us.as_ref().and_then(|p| p.shown(Pct::P99))),
        ),
    ]
}

/// Folds the repetitions of one strategy (in run order) into one summary:
/// the median repetition (by p99 lateness) with every figure's spread, the
/// median lateness and the worst anomalies. `None` while none ran.
pub fn aggregate(reps: &[Summary], folders: &[String]) -> Option<Summary> {
    let ran: Vec<(&Summary, &String)> = reps
        .iter()
        .zip(folders)
        .filter(|(s, _)| s.status == Status::Ok)
        .collect();
    if ran.is_empty() {
        return None;
    }
    let mut by_p99: Vec<&(&Summary, &String)> = ran.iter().collect();
    by_p99.sort_by_key(|(s, _)| s.lateness_us.p99);
    let mut agg = by_p99[by_p99.len() / 2].0.clone();
    let mut figures: BTreeMap<String, Spread> = BTreeMap::new();
    let per_rep: Vec<Vec<(&str, Option<f64>)>> =
        ran.iter().map(|(s, _)| self::figures(s)).collect();
    for (i, (name, _)) in per_rep[0].iter().enumerate() {
        let values: Option<Vec<f64>> = per_rep.iter().map(|f| f[i].1).collect();
        if let Some(values) = values {
            figures.insert(name.to_string(), Spread::of(values));
        }
    }
    let mut warnings = Vec::new();
    // Percentiles come from every repetition's samples pooled, so three
    // repetitions of 400 cancels give one p99 of 1 200 samples; the
    // repetitions' own spread stays in `figures`.
    let pooled = |pick: fn(&Summary) -> Option<&LatenessStats>| -> Option<LatenessStats> {
        let parts: Vec<&LatenessStats> = ran.iter().filter_map(|(s, _)| pick(s)).collect();
        if parts.is_empty() {
            return None;
        }
        let with_samples = parts.iter().filter(|p| p.count > 0).map(|p| &p.histogram);
        pool(with_samples).map(|h| stats(&h))
    };
    match pooled(|s| Some(&s.lateness_us)) {
        Some(all) => agg.lateness_us = all,
        None => {
            // Runs made before histograms were kept: medians, said so.
            let median_of = |pick: fn(&LatenessStats) -> u64| {
                Spread::of(
                    ran.iter()
                        .map(|(s, _)| pick(&s.lateness_us) as f64)
                        .collect(),
                )
                .median as u64
            };
            agg.lateness_us = LatenessStats {
                count: median_of(|l| l.count),
                p50: median_of(|l| l.p50),
                p90: median_of(|l| l.p90),
                p99: median_of(|l| l.p99),
                p999: median_of(|l| l.p999),
                max: median_of(|l| l.max),
                mean: Spread::of(ran.iter().map(|(s, _)| s.lateness_us.mean).collect()).median,
                histogram: None,
            };
            warnings.push(
                "lateness percentiles are the repetitions' medians: this run kept no \
                 histograms to pool"
                    .to_string(),
            );
        }
    }
    agg.committed_lateness_us = pooled(|s| s.committed_lateness_us.as_ref());
    agg.commit_gap_us = pooled(|s| s.commit_gap_us.as_ref());
    agg.censored_lateness_us = pooled(|s| s.censored_lateness_us.as_ref());
    agg.schedule_path_us = pooled(|s| s.schedule_path_us.as_ref());
    let mut by_timeout: BTreeMap<u64, Vec<&Option<String>>> = BTreeMap::new();
    let mut by_second: BTreeMap<u64, Vec<&Option<String>>> = BTreeMap::new();
    for (s, _) in &ran {
        for t in &s.lateness_by_timeout {
            by_timeout
                .entry(t.timeout_ms)
                .or_default()
                .push(&t.histogram);
        }
        for b in &s.lateness_over_time {
            by_second.entry(b.second).or_default().push(&b.histogram);
        }
    }
    let timeouts: Option<Vec<TimeoutLateness>> = by_timeout
        .into_iter()
        .map(|(ms, parts)| pool(parts).map(|h| timeout_class(ms, &h)))
        .collect();
    let seconds: Option<Vec<LatenessBucket>> = by_second
        .into_iter()
        .map(|(second, parts)| pool(parts).map(|h| bucket(second, &h)))
        .collect();
    // Where a part kept no histogram the median repetition's stand.
    if let Some(t) = timeouts {
        agg.lateness_by_timeout = t;
    }
    if let Some(b) = seconds {
        agg.lateness_over_time = b;
    }
    let mut worst = agg.anomalies.clone();
    let mut broken = 0;
    for (s, _) in &ran {
        worst = worst.worst(&s.anomalies);
        broken += u32::from(s.anomalies.total() > 0);
    }
    agg.anomalies = worst;
    if broken > 0 {
        warnings.push(format!(
            "anomalies in {broken} of {} repetitions (the worst count of each kind is shown)",
            ran.len()
        ));
    }
    for (k, (s, _)) in ran.iter().enumerate() {
        for w in &s.warnings {
            warnings.push(format!("repeat {}: {w}", k + 1));
        }
    }
    let not_measured: Vec<String> = reps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.status != Status::Ok)
        .map(|(k, s)| {
            format!(
                "repeat {}: {}: {}",
                k + 1,
                s.status.as_str(),
                s.reason.as_deref().unwrap_or("no reason recorded")
            )
        })
        .collect();
    warnings.extend(not_measured.iter().cloned());
    agg.warnings = warnings;
    agg.repeats = Some(Repeats {
        count: ran.len() as u32,
        folders: ran.iter().map(|(_, f)| f.to_string()).collect(),
        figures,
        not_measured,
    });
    Some(agg)
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
            committed_lateness_us: None,
            commit_gap_us: None,
            censored_lateness_us: None,
            schedule_path_us: None,
            overdue: None,
            cpu: None,
            backlog: None,
            missed_by_fault: Vec::new(),
            outbox: None,
            cost: Cost::default(),
            generator: GeneratorHealth::default(),
            worker_events: Vec::new(),
            warnings: Vec::new(),
            faults: Vec::new(),
            teardown_error: None,
            before_strategy: None,
            capabilities: None,
            instances: 0,
            timeouts: String::new(),
            drain_ms: 0,
            elapsed_s: 0.0,
            repeats: None,
            measure: None,
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

/// p99 of order commit -> `schedule()` returned above which a row is
/// flagged: for strategies whose delay starts at publish (rabbit-ttl), all
/// of it is lateness.
pub const SCHEDULE_PATH_BOUND_US: u64 = 20_000;

/// Short warnings for the row of `s`: everything that makes one of its
/// figures mean less than it reads. The sections of the reports give the
/// details.
pub fn warnings(s: &Summary) -> Vec<String> {
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    let mut w = Vec::new();
    let g = &s.generator;
    if g.warning.is_some() {
        w.push(format!(
            "harness behind: lag to commit p99 {}",
            ms(g.lag_us_p99)
        ));
    }
    if g.create_errors + g.payment_errors > 0 {
        w.push(format!(
            "{} order and {} payment transactions failed",
            g.create_errors, g.payment_errors
        ));
    }
    if g.unscheduled > 0 {
        w.push(format!(
            "{} orders created while every instance was down",
            g.unscheduled
        ));
    }
    let schedule_errors: u64 = s.cost.instances.iter().map(|i| i.schedule_errors).sum();
    let dropped: u64 = s.cost.instances.iter().map(|i| i.schedules_dropped).sum();
    if dropped > 0 {
        w.push(format!("{dropped} schedules dropped after retries"));
    } else if schedule_errors > 0 {
        w.push(format!(
            "{schedule_errors} schedule calls failed, all retried"
        ));
    }
    if let Some(p) = &s.schedule_path_us {
        if p.count > 0 && p.p99 > SCHEDULE_PATH_BOUND_US {
            w.push(format!(
                "schedule path p99 {} (bound {})",
                ms(p.p99),
                ms(SCHEDULE_PATH_BOUND_US)
            ));
        }
    }
    for e in &s.worker_events {
        if e.kind != WorkerEventKind::Restarted {
            w.push(format!(
                "instance {} {} at {:.1} s",
                e.instance,
                match e.kind {
                    WorkerEventKind::Died => "died",
                    _ => "failed to restart",
                },
                e.at_ms as f64 / 1000.0
            ));
        }
    }
    for r in &s.cost.instances {
        if let Some(e) = &r.run_error {
            w.push(format!("instance {} failed: {e}", r.instance));
        }
    }
    for f in &s.faults {
        if f.error.is_some() {
            w.push(format!(
                "fault at {:.1} s failed",
                f.planned_at_ms as f64 / 1000.0
            ));
        }
    }
    // Orders paid after their deadline have their own column (`paid late`)
    // in every table that shows lateness, so they are not repeated here.
    if let Some(note) = &s.cost.redis_note {
        w.push(format!("Redis commands {note}"));
    }
    if s.teardown_error.is_some() {
        w.push("teardown failed".into());
    }
    if let Some(share) = s
        .cost
        .measurement
        .as_ref()
        .and_then(|m| m.share_of_cpu)
        .filter(|share| *share > MEASUREMENT_BUDGET)
    {
        w.push(format!(
            "the measurement's own probes and flushes took {:.1} % of the CPU per cancel (budget {:.0} %)",
            share * 100.0,
            MEASUREMENT_BUDGET * 100.0
        ));
    }
    if s.status == Status::Ok && s.lateness_us.count == 0 {
        w.push("no cancels measured".into());
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lateness::*;
    use strategies::checker::{Anomaly, CancelTiming};

    fn timing(created: i64, expire: i64, cancelled: i64) -> CancelTiming {
        CancelTiming {
            id: 0,
            created_at_us: created,
            expire_at_us: expire,
            at_us: cancelled,
        }
    }

    /// One order due every 10 ms over 4 s, each resolved `late(k)` after
    /// its deadline.
    fn overdue_of(late: impl Fn(i64) -> i64) -> OverdueTrend {
        let intervals = (0..400).map(|k| {
            let due = k * 10_000;
            (due, due + late(k))
        });
        overdue_trend(intervals, 0, 4_000_000, 0).unwrap()
    }

    #[test]
    fn overdue_holds_steady_when_kept_up_and_grows_when_not() {
        // 50 ms late each: 5 overdue at any time, with an exact boundary.
        let steady = overdue_of(|_| 50_000);
        assert_eq!(steady.counts.len(), 41);
        assert!(steady.counts[1..40].iter().all(|c| *c == 5), "{steady:?}");
        assert!(!steady.growing);
        // A canceller at half the deadline rate: lateness grows with k.
        let behind = overdue_of(|k| k * 10_000);
        assert!(behind.growing, "{behind:?}");
        assert!(behind.last_quarter > 3 * behind.first_quarter.max(1));
        // Never resolved: every due order stays overdue.
        let forgotten = overdue_of(|_| i64::MAX / 2);
        assert_eq!(*forgotten.counts.last().unwrap(), 400);
        assert!(forgotten.growing);
        // Resolved early (an anomaly, not overdue) and too short a window.
        let early = overdue_trend([(100, 50)], 0, 1_000_000, 0).unwrap();
        assert!(early.counts.iter().all(|c| *c == 0));
        assert!(overdue_trend([(0, 1)], 0, 250_000, 0).is_none());
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
        assert_eq!(s.shown(Pct::Max), Some(s.max));
        assert_eq!(s.shown(Pct::P50), None, "2 samples carry no median");
        let text = hgrm(h);
        assert!(
            text.contains("Total count") && text.contains("Percentile"),
            "{text}"
        );
    }

    #[test]
    fn percentiles_need_ten_samples_beyond_them() {
        let s = |count| LatenessStats {
            count,
            p50: 1,
            p90: 2,
            p99: 3,
            p999: 4,
            max: 5,
            mean: 1.0,
            histogram: None,
        };
        assert_eq!(s(999).shown(Pct::P99), None);
        assert_eq!(s(1000).shown(Pct::P99), Some(3));
        assert_eq!(s(9_999).shown(Pct::P999), None);
        assert_eq!(s(10_000).shown(Pct::P999), Some(4));
        assert_eq!(s(100).shown(Pct::P90), Some(2));
        assert_eq!(s(20).shown(Pct::P50), Some(1));
        assert_eq!(s(0).shown(Pct::Max), None);
    }

    #[test]
    fn repetitions_fold_to_medians_worst_anomalies_and_failures_said() {
        let rep = |p99: u64, missed: u64| {
            let mut s = Summary::not_run(
                "db-scan",
                Status::Ok,
                String::new(),
                DatabaseInfo::default(),
            );
            s.reason = None;
            s.lateness_us = LatenessStats {
                count: 2_000,
                p50: p99 / 2,
                p90: p99,
                p99,
                p999: p99,
                max: p99,
                mean: 1.0,
                histogram: None,
            };
            s.anomalies.set(Anomaly::MissedCancels, missed);
            s
        };
        let failed = Summary::not_run(
            "db-scan",
            Status::Failed,
            "broker gone".into(),
            DatabaseInfo::default(),
        );
        let reps = [rep(300, 0), rep(100, 2), failed, rep(200, 0)];
        let folders: Vec<String> = (1..=4).map(|k| format!("repeat-{k}")).collect();
        let agg = aggregate(&reps, &folders).unwrap();
        let r = agg.repeats.as_ref().unwrap();
        assert_eq!(r.count, 3);
        assert_eq!(r.folders, ["repeat-1", "repeat-2", "repeat-4"]);
        let p99 = r.figures["p99"];
        assert_eq!((p99.min, p99.median, p99.max), (100.0, 200.0, 300.0));
        // Without histograms (older runs) the medians stand, and say so.
        assert_eq!(agg.lateness_us.p99, 200);
        assert!(agg
            .warnings
            .iter()
            .any(|w| w.contains("no histograms to pool")));
        // The worst repetition's anomalies, never the median's clean ones.
        assert_eq!(agg.anomalies.get(Anomaly::MissedCancels), 2);
        assert!(agg
            .warnings
            .iter()
            .any(|w| w.contains("anomalies in 1 of 3")));
        assert_eq!(r.not_measured, ["repeat 3: failed: broker gone"]);
        assert!(agg.warnings.iter().any(|w| w.contains("broker gone")));
    }

    /// Three repetitions of 400 cancels each: none supports a p99 alone,
    /// together they do (1 200 samples), and the pooled p99 is the 99th
    /// percentile of all of them, not a median of three.
    #[test]
    fn repetitions_pool_their_samples_for_the_percentiles() {
        let rep = |offset_ms: u64| {
            let mut s =
                Summary::not_run("redis-zset", Status::Ok, String::new(), Default::default());
            s.reason = None;
            let mut h = new_histogram();
            for i in 0..400u64 {
                h.record((offset_ms + i % 100) * 1000).unwrap();
            }
            s.lateness_us = stats(&h);
            s.lateness_by_timeout = vec![timeout_class(2000, &h)];
            s.lateness_over_time = vec![bucket(3, &h)];
            s
        };
        let reps = [rep(0), rep(50), rep(900)];
        assert!(reps.iter().all(|r| r.lateness_us.shown(Pct::P99).is_none()));
        let folders: Vec<String> = (1..=3).map(|k| format!("repeat-{k}")).collect();
        let agg = aggregate(&reps, &folders).unwrap();
        let l = &agg.lateness_us;
        assert_eq!(l.count, 1200);
        let p99 = l.shown(Pct::P99).expect("1 200 pooled samples carry a p99");
        // The top 1 % of all samples lies in the slow repetition (900..999 ms).
        assert!((985_000..=1_000_000).contains(&p99), "pooled p99 {p99}");
        let p50 = l.shown(Pct::P50).unwrap();
        assert!((99_000..=101_000).contains(&p50), "pooled p50 {p50}");
        // Spreads stay per repetition; a p99 no repetition supports has none.
        let r = agg.repeats.as_ref().unwrap();
        assert!(!r.figures.contains_key("p99"));
        assert_eq!(r.figures["n"].max, 400.0);
        assert_eq!(agg.lateness_by_timeout[0].count, 1200);
        assert_eq!(agg.lateness_over_time[0].count, 1200);
        assert!(!agg.warnings.iter().any(|w| w.contains("no histograms")));
        // The pooled distribution survives the JSON.
        let back = decode_histogram(l.histogram.as_deref().unwrap()).unwrap();
        assert_eq!(back.len(), 1200);
    }
}
