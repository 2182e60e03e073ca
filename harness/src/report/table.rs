//! The tables of a run, built once from its JSON: the run's facts, the
//! results, the trade-offs, the measurement's own cost and the faults.
//! `report.md`, `report.html`, the terminal and the reference README only
//! lay them out (as hyperfine's exporters render one table), so a figure
//! reads the same in every format.

use super::fault_table::fault_rows;
use super::storm_table::storm_rows;
use crate::model::records::BytesPerOrder;
use crate::model::run_info::RunInfo;
use crate::model::summary::{Spread, Status, Summary};
use strategies::checker::Anomalies;

/// One run's tables; each `Vec<Vec<String>>` is a header row and then one
/// row per strategy.
pub(crate) struct RunTables {
    /// The lines both reports open with, each with whether it is stressed.
    pub facts: Vec<(String, bool)>,
    /// The results of the options (every strategy that is not a teaching variant).
    pub results: Vec<Vec<String>>,
    /// The results of the teaching variants, when any ran.
    pub teaching: Option<Vec<Vec<String>>>,
    /// The trade-offs of the options.
    pub tradeoffs: Vec<Vec<String>>,
    /// The trade-offs of the teaching variants, when any ran.
    pub teaching_tradeoffs: Option<Vec<Vec<String>>>,
    /// Lateness by configured timeout, when some strategy had more than one.
    pub by_timeout: Option<Vec<Vec<String>>>,
    /// Probe on against probe off, when the run measured twins.
    pub measurement: Option<Vec<Vec<String>>>,
    /// What each strategy lost to faults, when the scenario injected any.
    pub faults: Option<Vec<Vec<String>>>,
    /// The deadline storm, when the scenario had one.
    pub storm: Option<Vec<Vec<String>>>,
}

impl RunTables {
    /// `twins` are the probe-off runs beside `summaries` (empty when none ran).
    pub(crate) fn build(info: &RunInfo, summaries: &[Summary], twins: &[Summary]) -> Self {
        let (options, teaching) = split_teaching(summaries);
        RunTables {
            facts: run_facts(info),
            results: rows(&options),
            teaching: (!teaching.is_empty()).then(|| rows(&teaching)),
            tradeoffs: tradeoff_rows(&options),
            teaching_tradeoffs: (!teaching.is_empty()).then(|| tradeoff_rows(&teaching)),
            by_timeout: timeout_rows(summaries),
            measurement: measurement_rows(summaries, twins),
            faults: fault_rows(summaries),
            storm: storm_rows(summaries),
        }
    }
}

/// What was run, where and on what: the lines both reports open with,
/// each with whether it is stressed (timeouts and faults).
pub(crate) fn run_facts(info: &RunInfo) -> Vec<(String, bool)> {
    let sc = &info.scenario;
    let mut lines = vec![];
    if info.repeat > 1 {
        lines.push((
            format!(
                "Each strategy ran {} times, interleaved. Lateness percentiles and `n` are of \
                 every repetition's samples pooled, with the repetitions' own min–max beside \
                 them where each had enough samples; every other figure is the median (min–max) \
                 over the repetitions; anomalies are the worst repetition's.",
                info.repeat
            ),
            true,
        ));
    }
    lines.extend(vec![
        (
            format!(
                "Scenario {} ({}), seed {}: {} orders/s for {} after a {} warm-up, drain {}, \
                 {} instance(s) per strategy.",
                sc.name,
                info.scenario_source,
                sc.seed,
                sc.rate,
                humantime::format_duration(sc.duration),
                humantime::format_duration(sc.warmup),
                humantime::format_duration(sc.drain),
                sc.instances,
            ),
            false,
        ),
        (
            format!(
                "Timeouts: {} — every latency below is lateness past these deadlines.",
                sc.timeouts_label()
            ),
            true,
        ),
        (
            format!(
                "Database: {} ({}). Commit {}{}. Machine: {}.",
                info.database_url,
                info.database_version,
                info.git_commit,
                info.build_profile
                    .as_deref()
                    .map(|p| format!(" ({p} build)"))
                    .unwrap_or_default(),
                info.machine.summary()
            ),
            false,
        ),
    ]);
    if let Some(faults) = sc.faults_label() {
        lines.push((
            format!("Faults, the same for every strategy: {faults}."),
            true,
        ));
    }
    if sc.network.adds_anything() {
        lines.push((
            format!(
                "Network ([network]): {}, held for the whole run by the harness's proxy between \
                 the services and the order service and canceller instances (not by netem; how \
                 late the proxy held is in each strategy's section).",
                sc.network.label()
            ),
            true,
        ));
    }
    if !sc.hosts.is_local() {
        lines.push((
            format!(
                "Hosts ([hosts]): the canceller instances ran on {} `delaybench agent` host{} \
                 ({}; instance i on agent i mod {}); {}. \
                 Clocks: each agent's offset from this host's was read before its instances \
                 started (from the probe with the shortest round trip, NTP's method; its bound \
                 is half that round trip) and every stamp they wrote was corrected by it; it was \
                 read again after they stopped. Each strategy's section gives the offsets and \
                 bounds. This host's CPU figures leave the agents' machines out; the workers' \
                 own CPU (per cancel) is theirs.",
                sc.hosts.agents.len(),
                if sc.hosts.agents.len() == 1 { "" } else { "s" },
                sc.hosts.agents.join(", "),
                sc.hosts.agents.len(),
                if sc.hosts.sharded_generator() {
                    "the generator ran as one shard per agent (order id mod the agents; the \
                     harness handed each order it reported on to its instance), the checker here"
                } else {
                    "the generator (the order service) and the checker here"
                },
            ),
            true,
        ));
    }
    if let Some(hook) = &sc.before_each_strategy {
        lines.push((
            format!(
                "Before each strategy: `{}` (run from delaybench's folder, timeout {}; its \
                 duration is in each strategy's section).",
                hook.label(),
                humantime::format_duration(hook.timeout)
            ),
            false,
        ));
    }
    for (service, version) in &info.services {
        lines.push((format!("{service}: {version}."), false));
    }
    lines
}

pub(crate) fn ms(us: u64) -> String {
    as_ms(us as f64)
}

/// One figure of a strategy as every table and plot shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shown {
    /// The run's own value; over repetitions, their median.
    pub value: f64,
    /// Over repetitions, their min and max.
    pub spread: Option<(f64, f64)>,
    /// How many repetitions the spread is over (1 for a single run).
    pub repetitions: u32,
}

impl Shown {
    /// Whether `self` and `other` (of one run) are separated beyond their
    /// repetitions' spread ([`Spread::separated_from`]); `Err` with why
    /// not where their ranges are apart but too few repetitions stand
    /// behind them.
    pub fn separated_from(&self, other: &Shown) -> Result<bool, String> {
        let (Some(a), Some(b)) = (self.spread(), other.spread()) else {
            return Ok(false);
        };
        let (n, m) = (self.repetitions, other.repetitions);
        if a.separated_from(n, &b, m) {
            Ok(true)
        } else if a.differs_from(&b) {
            Err(format!(
                "ranges apart, but {n} and {m} repetitions are too few to separate them (by \
                 chance alone 1 in {})",
                crate::model::summary::chance_one_in(n, m)
            ))
        } else {
            Ok(false)
        }
    }

    fn spread(&self) -> Option<Spread> {
        self.spread.map(|(min, max)| Spread {
            median: self.value,
            min,
            max,
        })
    }
}

/// The figures of a distribution, which repetitions pool: over
/// repetitions the summary's own value is of all their samples together
/// (the percentile of the pooled histogram, or the total count).
pub(crate) const POOLED: [&str; 7] = ["n", "p50", "p90", "p99", "p999", "max", "commit_p99"];

/// Lateness by configured timeout, one row per strategy and timeout
/// (pooled over the repetitions); `None` when no strategy had more than one.
pub(crate) fn timeout_rows(summaries: &[Summary]) -> Option<Vec<Vec<String>>> {
    use crate::model::lateness::Pct;
    if !summaries.iter().any(|s| s.lateness_by_timeout.len() > 1) {
        return None;
    }
    let mut rows = vec![[
        "strategy", "timeout", "n", "p50 ms", "p90 ms", "p99 ms", "max ms",
    ]
    .map(String::from)
    .to_vec()];
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        for t in &s.lateness_by_timeout {
            let pct = |p| {
                t.shown(p)
                    .map(|us| as_ms(us as f64))
                    .unwrap_or_else(|| "-".into())
            };
            rows.push(vec![
                s.strategy.name().to_string(),
                format!("{} ms", t.timeout_ms),
                t.count.to_string(),
                pct(Pct::P50),
                pct(Pct::P90),
                pct(Pct::P99),
                pct(Pct::Max),
            ]);
        }
    }
    Some(rows)
}

/// Figure `key` (a name of [`crate::model::summary::figures`]) of `s`, the
/// one source the tables and the plots read, so that they cannot disagree:
/// over repetitions a pooled figure ([`POOLED`]) is the summary's own, the
/// others the median of `repeats.figures`, each with the repetitions' min
/// and max where every repetition had the figure; for a single run its
/// own figure. `None` where it was not measured (a pooled percentile its
/// pooled count does not support, say).
pub(crate) fn shown(s: &Summary, key: &str) -> Option<Shown> {
    let figures = crate::model::summary::figures(s);
    debug_assert!(
        figures.iter().any(|(k, _)| *k == key),
        "`{key}` is not a figure name"
    );
    let own = || {
        figures
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| *v)
    };
    match &s.repeats {
        Some(r) if POOLED.contains(&key) => own().map(|value| Shown {
            value,
            spread: r.figures.get(key).map(|sp| (sp.min, sp.max)),
            repetitions: r.count,
        }),
        Some(r) => r.figures.get(key).map(|sp| Shown {
            value: sp.median,
            spread: Some((sp.min, sp.max)),
            repetitions: r.count,
        }),
        None => own().map(|value| Shown {
            value,
            spread: None,
            repetitions: 1,
        }),
    }
}

/// A figure's cell, formatted by `format`: over repetitions
/// `median (min–max)` (just the median when they agree), for a single run
/// its value; `-` where [`shown`] has none.
pub(crate) fn fig(s: &Summary, key: &str, format: fn(f64) -> String) -> String {
    match shown(s, key) {
        None => "-".into(),
        Some(Shown {
            value,
            spread: Some((min, max)),
            ..
        }) if min != max => format!("{} ({}–{})", format(value), format(min), format(max)),
        Some(Shown { value, .. }) => format(value),
    }
}

pub(crate) fn as_ms(us: f64) -> String {
    format!("{:.1}", us / 1000.0)
}

pub(crate) fn as_count(v: f64) -> String {
    format!("{v:.0}")
}

pub(crate) fn as_ratio(v: f64) -> String {
    format!("{v:.1}")
}

/// The strategies that are real options, then the deliberately wrong ones.
pub(crate) fn split_teaching(summaries: &[Summary]) -> (Vec<Summary>, Vec<Summary>) {
    summaries
        .iter()
        .cloned()
        .partition(|s| !s.strategy.info.is_teaching())
}

/// The warnings cell of a row.
pub(crate) fn warnings_cell(s: &Summary) -> String {
    if s.warnings.is_empty() {
        "-".into()
    } else {
        s.warnings.join("; ")
    }
}

/// Every anomaly with its count, under the column name the reports use, in
/// the table's order (see [`Anomaly`](strategies::checker::Anomaly)).
pub(crate) fn anomaly_counts(a: &Anomalies) -> Vec<(&'static str, u64)> {
    a.iter().map(|(anomaly, n)| (anomaly.column(), n)).collect()
}

/// Anomalies as `name=count` for the non-zero ones, or `0`.
pub(crate) fn anomaly_cell(s: &Summary) -> String {
    let parts: Vec<String> = anomaly_counts(&s.anomalies)
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    if parts.is_empty() {
        "0".into()
    } else {
        parts.join(" ")
    }
}

/// The main table, one row per strategy (skipped and failed ones included).
/// Lateness is row-based (`cancelled_at_us`) with the sample count `n`;
/// `commit p99` is the same orders' lateness when the COMMIT returned.
pub(crate) fn rows(summaries: &[Summary]) -> Vec<Vec<String>> {
    let header = [
        "strategy",
        "status",
        "created",
        "paid",
        "cancelled",
        "pending",
        "paid late",
        "n",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "commit p99 ms",
        "anomalies",
        "stmts/cancel",
        "attempts/cancel",
        "warnings",
    ];
    let mut rows = vec![header.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    for s in summaries {
        if s.status != Status::Ok {
            let mut row = vec![s.strategy.name().to_string(), s.status.as_str().to_string()];
            // The reason is printed below every table.
            row.extend(std::iter::repeat_n("-".to_string(), header.len() - 2));
            rows.push(row);
            continue;
        }
        rows.push(vec![
            s.strategy.name().to_string(),
            "ok".into(),
            fig(s, "created", as_count),
            fig(s, "paid", as_count),
            fig(s, "cancelled", as_count),
            fig(s, "pending", as_count),
            fig(s, "paid_late", as_count),
            fig(s, "n", as_count),
            fig(s, "p50", as_ms),
            fig(s, "p90", as_ms),
            fig(s, "p99", as_ms),
            fig(s, "p999", as_ms),
            fig(s, "max", as_ms),
            fig(s, "commit_p99", as_ms),
            anomaly_cell(s),
            fig(s, "stmts_per_cancel", as_ratio),
            fig(s, "attempts_per_cancel", as_ratio),
            warnings_cell(s),
        ]);
    }
    rows
}

/// The trade-off table: one row per strategy that ran, measured numbers next
/// to what its capabilities promise. Header first.
pub(crate) fn tradeoff_rows(summaries: &[Summary]) -> Vec<Vec<String>> {
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut rows = vec![[
        "strategy",
        "n",
        "p90 ms",
        "p99 ms",
        "max ms",
        "paid late",
        "anomalies",
        "DB stmts/cancel",
        "DB rows read/cancel",
        "broker msgs/cancel",
        "Redis cmds/cancel",
        "CPU µs/cancel: services + workers",
        "peak RSS MiB",
        "survives restart",
        "any delay",
        "multi-instance",
        "needs fallback",
        "needs besides the DB",
        "warnings",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<String>>()];
    // A run with a `[storm]` shows each strategy's drain beside its cost.
    let storm = summaries.iter().any(|s| s.storm.is_some());
    if storm {
        let at = rows[0].len() - 1;
        rows[0].insert(at, "storm drain cancels/s".into());
    }
    // A run that held orders (a backlog, a storm) shows what each cost.
    let held = summaries.iter().any(|s| held_orders(s).is_some());
    if held {
        let at = rows[0].len() - 1;
        rows[0].insert(at, "bytes / pending order".into());
    }
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        let mut row = vec![
            s.strategy.name().to_string(),
            fig(s, "n", as_count),
            fig(s, "p90", as_ms),
            fig(s, "p99", as_ms),
            fig(s, "max", as_ms),
            fig(s, "paid_late", as_count),
            s.anomalies.total().to_string(),
            fig(s, "stmts_per_cancel", as_ratio),
            rows_read_text(s),
            fig(s, "broker_msgs_per_cancel", as_ratio),
            fig(s, "redis_cmds_per_cancel", as_ratio),
            fig(s, "cpu_all_us_per_cancel", as_count),
            fig(s, "peak_rss_mib", as_count),
        ];
        match &s.capabilities {
            Some(caps) => {
                row.extend([
                    yes_no(caps.durable_across_restart),
                    yes_no(caps.arbitrary_delay),
                    yes_no(caps.multi_instance_safe),
                    yes_no(caps.needs_fallback),
                ]);
                let services: Vec<&str> = caps.requires.iter().map(|s| s.name()).collect();
                row.push(if services.is_empty() {
                    "nothing".into()
                } else {
                    services.join(", ")
                });
            }
            None => row.extend(std::iter::repeat_n("?".to_string(), 5)),
        }
        if storm {
            row.push(storm_drain_cell(s));
        }
        if held {
            row.push(bytes_per_order_cell(s));
        }
        row.push(warnings_cell(s));
        rows.push(row);
    }
    rows
}

/// The storm's drain rate with its size (over repetitions, their median
/// and min–max), or what stopped it.
fn storm_drain_cell(s: &Summary) -> String {
    match &s.storm {
        Some(r) => match r.cancels_per_s {
            Some(_) => format!(
                "{} (n={})",
                fig(s, "storm_cancels_per_s", as_count),
                r.orders
            ),
            None => format!("not drained ({} of {} left)", r.pending_left, r.orders),
        },
        None => "-".into(),
    }
}

/// The orders `s` held whose footprint was read: its backlog's when it
/// had one of some size, else its storm's; with how many, and what.
fn held_orders(s: &Summary) -> Option<(BytesPerOrder, u64, &'static str)> {
    let backlog = s
        .backlog
        .as_ref()
        .and_then(|b| Some((b.bytes_per_order()?, b.pending, "backlog")));
    backlog.or_else(|| {
        let r = s.storm.as_ref()?;
        Some((r.bytes_per_order()?, r.orders, "storm"))
    })
}

/// Bytes per pending order by where they are held, with the orders they
/// were read over; `-` when the run held none or predates the reading.
fn bytes_per_order_cell(s: &Summary) -> String {
    match held_orders(s) {
        Some((bytes, n, what)) => {
            let parts: Vec<String> = bytes
                .parts()
                .into_iter()
                .map(|(at, b)| format!("{at} {b:.0}"))
                .collect();
            format!("{} ({what} of {n})", parts.join(" · "))
        }
        None => "-".into(),
    }
}

/// Which figure stands for the DB rows read per cancel of `s`: the
/// canceller's own reads where the database tells them apart, else the
/// whole run's (`server_rows_per_cancel`), else none. The trade-off table
/// and the rows-read plot both ask here.
pub(crate) fn rows_read_figure(s: &Summary) -> Option<&'static str> {
    let c = &s.cost;
    if c.canceller_server_rows_read_per_cancel.is_some() {
        Some("canceller_rows_per_cancel")
    } else if c.server_rows_read_per_cancel.is_some() {
        Some("server_rows_per_cancel")
    } else {
        None
    }
}

/// The measurement's own cost (`None` without unmeasured twins): each
/// strategy as measured beside its twin with every probe and recorder off,
/// run interleaved with it. Header first.
pub(crate) fn measurement_rows(
    summaries: &[Summary],
    twins: &[Summary],
) -> Option<Vec<Vec<String>>> {
    if twins.is_empty() {
        return None;
    }
    let mut rows = vec![[
        "strategy",
        "n",
        "p90 ms measured",
        "p90 ms unmeasured",
        "p99 ms measured",
        "p99 ms unmeasured",
        "p99: apart beyond the spread?",
        "workers' CPU µs/cancel measured",
        "workers' CPU µs/cancel unmeasured",
        "transactions read / all",
        "measurement µs/cancel",
        "of CPU/cancel",
    ]
    .map(String::from)
    .to_vec()];
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        let Some(twin) = twins
            .iter()
            .find(|t| t.strategy == s.strategy && t.status == Status::Ok)
        else {
            continue;
        };
        let p99 = |x: &Summary| shown(x, "p99").filter(|v| v.spread.is_some());
        let apart = match (p99(s), p99(twin)) {
            (Some(a), Some(b)) => match a.separated_from(&b) {
                Ok(true) => "**yes**".to_string(),
                Ok(false) => "no".to_string(),
                Err(why) => format!("no: {why}"),
            },
            _ => "- (needs repetitions with 1 000 samples each)".to_string(),
        };
        let m = s.cost.measurement.as_ref();
        rows.push(vec![
            s.strategy.name().to_string(),
            fig(s, "n", as_count),
            fig(s, "p90", as_ms),
            fig(twin, "p90", as_ms),
            fig(s, "p99", as_ms),
            fig(twin, "p99", as_ms),
            apart,
            fig(s, "cpu_us_per_cancel", as_count),
            fig(twin, "cpu_us_per_cancel", as_count),
            m.map_or("-".into(), |m| {
                format!("{} / {}", m.server_reads_probes, m.transactions)
            }),
            fig(s, "measurement_us_per_cancel", |v| format!("{v:.1}")),
            fig(s, "measurement_share_of_cpu", |v| {
                format!("{:.2} %", v * 100.0)
            }),
        ]);
    }
    Some(rows)
}

/// What the measurement table means, under it.
pub(crate) const MEASUREMENT_NOTES: &str = "Each strategy ran twice per repetition, \
interleaved: as every run measures it, and with every probe and recorder on its path off \
(`<strategy>.unmeasured/`: no server-reads probe, no commit times, no schedule-path times; the \
workers still flush their counters). `measurement µs/cancel`: the wall time the workers spent in \
the server-reads probe's round trips (the database's work and the wait included, so an upper \
bound that grows on a busy machine; under `[network]` its round trips to the database, two a \
reading, are taken out as waiting) plus the CPU of building their flushes, per cancel, and that \
as a share of their CPU per cancel. The \
rows-read figure is estimated from the transactions read (`transactions read / all`).";

/// The DB rows read per cancel as every table prints it: the canceller's
/// own where measured, else the whole run's, said in the cell.
pub(crate) fn rows_read_text(s: &Summary) -> String {
    match rows_read_figure(s) {
        Some(key @ "server_rows_per_cancel") => format!("{} (whole run)", fig(s, key, as_ratio)),
        Some(key) => rows_read_cell(s, key),
        None => "-".into(),
    }
}

/// The canceller's rows read per cancel; a single run's sampled estimate
/// carries its 95 % interval (repetitions carry their min–max instead).
/// When every reading was alike the interval is 0, which would read as
/// certainty from a handful of readings: the cell says how many there were.
pub(crate) fn rows_read_cell(s: &Summary, key: &str) -> String {
    let cell = fig(s, key, as_ratio);
    let sampled = s
        .cost
        .measurement
        .as_ref()
        .filter(|m| m.server_reads_probes < m.transactions);
    match (s.cost.canceller_server_rows_read_ci95_per_cancel, sampled) {
        _ if s.repeats.is_some() || cell == "-" => cell,
        (Some(ci), _) if ci > 0.0 => format!("{cell} ±{ci:.1}"),
        (Some(_), Some(m)) => format!(
            "{cell} ({} of {} transactions read, all alike)",
            m.server_reads_probes, m.transactions
        ),
        _ => cell,
    }
}

/// Explains the trade-off table's columns, for both reports.
pub(crate) const TRADEOFF_NOTES: &str =
    "Lateness (`n` orders; a percentile with fewer than 10 samples \
beyond it is `-`) and anomalies over the measured orders; `paid late`: orders paid after their \
deadline while still pending, whose lateness the table cannot show. DB statements, CPU, broker \
messages (published + consumed) and Redis commands (`INFO commandstats`, server-wide) per order \
the canceller cancelled, all over the measured window (after the warm-up). DB rows read by the \
server: on PostgreSQL those of the canceller's own transactions (measured window); on MariaDB \
the whole run's, server-wide and workload included, marked `(whole run)`; none on SQLite. On \
PostgreSQL one transaction a second per instance is read and the rest estimated from them; a \
single run shows the estimate's 95 % interval as `±`. Peak RSS of the largest instance. \
`storm drain cancels/s` (with a `[storm]`): the storm's orders cancelled per second of its \
drain. `bytes / pending order` (with a backlog or a storm): what each backend's reading grew by \
from just before those orders went in to once every instance had them, over their number; \
workers summed over the instances (each order is scheduled on one), their resident memory as \
the allocator keeps it after the hand-off's burst: a strategy that holds nothing in its workers \
(db-scan, db-timer) shows that floor, so read the others against it; Redis and the broker are \
read server-wide, so what else moved meanwhile is in them. One run has no baseline with no \
backlog, so these are raw growths, noise included: a backlog sweep's table gives them net of its \
step of 0, each with its noise floor (`≈ 0` within it). \
The yes/no columns are the strategy's declared capabilities; the conformance suite runs a \
check for each one declared yes (see `strategies/src/canceller.rs` for what it cannot check).";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::records::{BacklogRecord, Holdings, StormRecord};
    use crate::model::summary::{DatabaseInfo, MeasurementCost};

    /// A single run whose rows read were estimated from `probes` of 1 000
    /// transactions, with the interval `ci`.
    fn sampled(probes: u64, ci: f64) -> Summary {
        let mut s = Summary::not_run(
            "db-timer".parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        s.cost.canceller_server_rows_read_per_cancel = Some(4.0);
        s.cost.canceller_server_rows_read_ci95_per_cancel = Some(ci);
        s.cost.measurement = Some(MeasurementCost {
            transactions: 1_000,
            server_reads_probes: probes,
            ..MeasurementCost::default()
        });
        s
    }

    #[test]
    fn an_estimate_whose_readings_were_all_alike_says_how_few_there_were() {
        let key = "canceller_rows_per_cancel";
        assert_eq!(rows_read_cell(&sampled(12, 0.3), key), "4.0 ±0.3");
        assert_eq!(
            rows_read_cell(&sampled(3, 0.0), key),
            "4.0 (3 of 1000 transactions read, all alike)"
        );
        // Every transaction read: a count, not an estimate.
        assert_eq!(rows_read_cell(&sampled(1_000, 0.0), key), "4.0");
    }

    fn holdings(rss_kib: &[u64], database: u64, redis: Option<u64>) -> Holdings {
        Holdings {
            worker_rss_kib: rss_kib.to_vec(),
            database_bytes: Some(database),
            redis_used_memory: redis,
            ..Holdings::default()
        }
    }

    #[test]
    fn bytes_per_pending_order_are_the_growth_over_the_orders_held() {
        let mut s = sampled(1_000, 0.0);
        assert_eq!(bytes_per_order_cell(&s), "-");
        // 1 000 orders: the database grew 300 kB, the two workers 50 KiB
        // each (102 400 B in all), Redis 120 kB.
        s.backlog = Some(BacklogRecord {
            pending: 1_000,
            held_before: Some(holdings(&[10_000, 10_000], 1_000_000, Some(5_000_000))),
            held: holdings(&[10_050, 10_050], 1_300_000, Some(5_120_000)),
            ..BacklogRecord::default()
        });
        assert_eq!(
            bytes_per_order_cell(&s),
            "database 300 · workers 102 · Redis 120 (backlog of 1000)"
        );
        // A worker restarted in between (a third pid read) is not compared.
        let b = s.backlog.as_mut().unwrap();
        b.held.worker_rss_kib.push(9_000);
        assert_eq!(
            bytes_per_order_cell(&s),
            "database 300 · Redis 120 (backlog of 1000)"
        );
        // A backlog of none, or one from before the reading, says nothing;
        // the storm's orders then stand in.
        let b = s.backlog.as_mut().unwrap();
        b.held_before = None;
        assert_eq!(bytes_per_order_cell(&s), "-");
        s.storm = Some(StormRecord {
            orders: 100,
            held_before: Some(holdings(&[10_000], 1_000_000, None)),
            held: holdings(&[10_010], 1_050_000, None),
            ..StormRecord::default()
        });
        assert_eq!(
            bytes_per_order_cell(&s),
            "database 500 · workers 102 (storm of 100)"
        );
    }
}
