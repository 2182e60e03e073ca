//! Reports rendered from `run.json` and every `<strategy>/summary.json` on
//! disk (the JSON is the source of truth, so reports can be regenerated with
//! `delaybench report DIR`): `report.md`, `report.html` with plots, the plots
//! as SVG and PNG files in `plots/`, and the terminal table. The tables
//! both reports share are built here, once.

mod compare;
mod figures;
mod html;
mod markdown;
mod plots;
pub mod sweep;
mod text_table;

use crate::model::records::FaultReach;
use crate::model::run_info::RunInfo;
use crate::model::summary::{LatenessStats, Pct, Status, Summary};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;
use strategies::checker::Anomalies;

pub use compare::compare;

/// Reads `run.json` and the summaries in the order the run listed them.
pub fn load(run_dir: &Path) -> Result<(RunInfo, Vec<Summary>)> {
    let info = RunInfo::read(run_dir)?;
    let mut summaries = Vec::new();
    for name in &info.strategies {
        let dir = run_dir.join(name);
        if dir.join("summary.json").exists() {
            summaries.push(Summary::read(&dir)?);
        }
    }
    Ok((info, summaries))
}

/// Writes `report.md`, `report.html` and the plot files in `plots/` for the
/// run in `run_dir` (for a sweep folder, its `report.md` and plots).
pub fn write(run_dir: &Path) -> Result<()> {
    if run_dir.join("sweep.json").exists() {
        let result = crate::model::sweep::SweepResult::read(run_dir)?;
        return sweep::write(run_dir, &result);
    }
    let (info, summaries) = load(run_dir)?;
    let figures = figures::figures(run_dir, &info, &summaries);
    let drawn = plots::write_files(run_dir, &figures)?;
    let path = run_dir.join("report.md");
    std::fs::write(&path, markdown::markdown(&info, &summaries, &figures))
        .with_context(|| format!("writing {}", path.display()))?;
    let path = run_dir.join("report.html");
    std::fs::write(&path, html::html(&info, &summaries, &drawn))
        .with_context(|| format!("writing {}", path.display()))
}

/// What was run, where and on what: the lines both reports open with,
/// each with whether it is stressed (timeouts and faults).
fn run_facts(info: &RunInfo) -> Vec<(String, bool)> {
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
                "Database: {} ({}). Commit {}. Machine: {}.",
                info.database_url,
                info.database_version,
                info.git_commit,
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

fn ms(us: u64) -> String {
    as_ms(us as f64)
}

/// A percentile in ms, or `-` when it rests on too few samples.
fn pct(stats: &LatenessStats, which: Pct) -> String {
    stats.shown(which).map(ms).unwrap_or_else(|| "-".into())
}

/// A figure's cell: over repetitions `median (min–max)`, formatted by
/// `format`; for a single run, `single`. A figure some repetition lacked
/// is `-`.
fn fig(s: &Summary, key: &str, single: String, format: fn(f64) -> String) -> String {
    match &s.repeats {
        None => single,
        Some(r) => match r.figures.get(key) {
            Some(sp) if sp.min == sp.max => format(sp.median),
            Some(sp) => format!(
                "{} ({}–{})",
                format(sp.median),
                format(sp.min),
                format(sp.max)
            ),
            None => "-".into(),
        },
    }
}

/// A distribution's cell: the value `pooled` (over repetitions, the
/// percentile of all their samples together, or their total count), with
/// the repetitions' own min–max beside it where each supported it.
fn pooled_fig(s: &Summary, key: &str, pooled: String, format: fn(f64) -> String) -> String {
    match s.repeats.as_ref().and_then(|r| r.figures.get(key)) {
        Some(sp) if sp.min != sp.max && pooled != "-" => {
            format!("{pooled} ({}–{})", format(sp.min), format(sp.max))
        }
        _ => pooled,
    }
}

fn as_ms(us: f64) -> String {
    format!("{:.1}", us / 1000.0)
}

fn as_count(v: f64) -> String {
    format!("{v:.0}")
}

fn as_ratio(v: f64) -> String {
    format!("{v:.1}")
}

/// Whether `name` is a teaching variant (a deliberate mistake): reports
/// put those in their own tables.
fn is_teaching(name: &str) -> bool {
    strategies::registry::info(name).is_ok_and(|i| i.is_teaching())
}

/// The faults table (`None` when the run had none): one row per strategy,
/// each followed by its remedied variants (`+fallback`, `+outbox`, ...), so
/// a strategy and its remedy read side by side; one column per fault with
/// the missed cancels it explains, then what the faults did besides.
pub(crate) fn fault_rows(summaries: &[Summary]) -> Option<Vec<Vec<String>>> {
    let ran: Vec<&Summary> = summaries
        .iter()
        .filter(|s| s.status == Status::Ok && !s.faults.is_empty())
        .collect();
    let first = ran.first()?;
    let mut ordered = ran.clone();
    let base_of = |s: &Summary| {
        strategies::registry::Variant::parse(&s.strategy)
            .map(|v| (v.info.name, u8::from(v.outbox) * 2 + u8::from(v.fallback)))
            .unwrap_or(("", 0))
    };
    let first_seen = |base: &str| ran.iter().position(|s| base_of(s).0 == base).unwrap_or(0);
    ordered.sort_by_key(|s| {
        let (base, remedies) = base_of(s);
        (first_seen(base), remedies)
    });
    let mut header = vec!["strategy".to_string()];
    header.extend(
        first
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| format!("#{} {}", i + 1, f.label)),
    );
    header.extend(
        [
            "missed, several faults in effect",
            "missed, no fault in effect",
            "missed (all)",
            "schedules dropped",
            "duplicates absorbed after pause",
            "other anomalies",
        ]
        .map(String::from),
    );
    let mut out = vec![header];
    for s in ordered {
        let missed = |fault: Option<usize>, several: bool| -> u64 {
            s.missed_by_fault
                .iter()
                .filter(|l| l.fault == fault && l.several.is_empty() != several)
                .map(|l| l.missed)
                .sum()
        };
        let mut row = vec![s.strategy.clone()];
        for (i, f) in s.faults.iter().enumerate() {
            let n = missed(Some(i), false);
            let reach = f.reach();
            row.push(match reach {
                FaultReach::NotApplicable(_) => reach.word().into(),
                FaultReach::MissedTarget(_) => format!("{n} ({})", reach.word()),
                FaultReach::Hit => n.to_string(),
            });
        }
        let dropped: u64 = s
            .cost
            .instances
            .iter()
            .map(|i| i.schedules_dropped + i.schedules_lost_with_process)
            .sum();
        let duplicates: Option<u64> = s
            .faults
            .iter()
            .filter_map(|f| f.duplicates_absorbed)
            .reduce(|a, b| a + b);
        let others = s.anomalies.total() - s.anomalies.missed_cancels;
        row.extend([
            missed(None, true).to_string(),
            missed(None, false).to_string(),
            s.anomalies.missed_cancels.to_string(),
            dropped.to_string(),
            duplicates.map_or("-".into(), |d| d.to_string()),
            others.to_string(),
        ]);
        out.push(row);
    }
    Some(out)
}

/// What the faults table means, under it.
pub(crate) const FAULT_NOTES: &str = "Each missed cancel (an order still PENDING `drain` after its \
     deadline) is put down to the fault in effect during the order's life, from its creation to a \
     second past its deadline; when several were, the run cannot tell which and counts it apart. `n/a`: the fault does not touch this strategy \
     (a link or service it does not use, a crash point its path does not have), so it proves nothing \
     about it; `missed target`: the fault acted, but not on the part that matters (a standby instead \
     of the leader, a Redis master serving none of the strategy's shards). `schedules dropped`: \
     schedule calls given up on after `[schedule-retry]`, plus those sent to a process that died \
     before it made them (an upper bound); only a fallback cancels those orders. \
     `duplicates absorbed`: attempts on an order an earlier attempt had already decided \
     (cancelled, or found paid), made from each pause until 2 s after it, by any instance and \
     for any cause in that window; `other anomalies` at 0 proves they had no effect (no double \
     release).";

/// The strategies that are real options, then the deliberately wrong ones.
fn split_teaching(summaries: &[Summary]) -> (Vec<Summary>, Vec<Summary>) {
    summaries
        .iter()
        .cloned()
        .partition(|s| !is_teaching(&s.strategy))
}

/// The warnings cell of a row.
fn warnings_cell(s: &Summary) -> String {
    if s.warnings.is_empty() {
        "-".into()
    } else {
        s.warnings.join("; ")
    }
}

fn ratio(v: Option<f64>) -> String {
    v.map(as_ratio).unwrap_or_else(|| "-".into())
}

/// Every anomaly the checker counts, with the name the reports use, in one
/// order everywhere.
pub fn anomaly_counts(a: &Anomalies) -> [(&'static str, u64); 9] {
    [
        ("early", a.early_cancels),
        ("paid-then-cancelled", a.paid_then_cancelled),
        ("duplicate-releases", a.duplicate_releases),
        ("missed", a.missed_cancels),
        ("refund-errors", a.refund_errors),
        ("stock-mismatches", a.stock_mismatches),
        ("unreleased", a.unreleased_cancels),
        ("orphan-releases", a.orphan_releases),
        ("phantom-schedules", a.phantom_schedules),
    ]
}

/// Anomalies as `name=count` for the non-zero ones, or `0`.
fn anomaly_cell(s: &Summary) -> String {
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
fn rows(summaries: &[Summary]) -> Vec<Vec<String>> {
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
            let mut row = vec![s.strategy.clone(), s.status.as_str().to_string()];
            // The reason is printed below every table.
            row.extend(std::iter::repeat_n("-".to_string(), header.len() - 2));
            rows.push(row);
            continue;
        }
        let l = &s.lateness_us;
        let c = &s.cost.store;
        let attempts = (c.cancelled > 0).then(|| c.cancel_attempts as f64 / c.cancelled as f64);
        let committed = s
            .committed_lateness_us
            .as_ref()
            .map(|c| pct(c, Pct::P99))
            .unwrap_or_else(|| "-".into());
        rows.push(vec![
            s.strategy.clone(),
            "ok".into(),
            fig(s, "created", s.orders.created.to_string(), as_count),
            fig(s, "paid", s.orders.paid.to_string(), as_count),
            fig(s, "cancelled", s.orders.cancelled.to_string(), as_count),
            fig(s, "pending", s.orders.pending.to_string(), as_count),
            fig(
                s,
                "paid_late",
                s.orders.paid_after_deadline.to_string(),
                as_count,
            ),
            pooled_fig(s, "n", l.count.to_string(), as_count),
            pooled_fig(s, "p50", pct(l, Pct::P50), as_ms),
            pooled_fig(s, "p90", pct(l, Pct::P90), as_ms),
            pooled_fig(s, "p99", pct(l, Pct::P99), as_ms),
            pooled_fig(s, "p999", pct(l, Pct::P999), as_ms),
            pooled_fig(s, "max", pct(l, Pct::Max), as_ms),
            pooled_fig(s, "commit_p99", committed, as_ms),
            anomaly_cell(s),
            fig(
                s,
                "stmts_per_cancel",
                ratio(s.cost.statements_per_cancel),
                as_ratio,
            ),
            fig(s, "attempts_per_cancel", ratio(attempts), as_ratio),
            warnings_cell(s),
        ]);
    }
    rows
}

/// The trade-off table: one row per strategy that ran, measured numbers next
/// to what its capabilities promise. Header first.
fn tradeoff_rows(summaries: &[Summary]) -> Vec<Vec<String>> {
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
        "CPU µs/cancel",
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
    .collect()];
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        let c = &s.cost;
        let mut row = vec![
            s.strategy.clone(),
            pooled_fig(s, "n", s.lateness_us.count.to_string(), as_count),
            pooled_fig(s, "p90", pct(&s.lateness_us, Pct::P90), as_ms),
            pooled_fig(s, "p99", pct(&s.lateness_us, Pct::P99), as_ms),
            pooled_fig(s, "max", pct(&s.lateness_us, Pct::Max), as_ms),
            fig(
                s,
                "paid_late",
                s.orders.paid_after_deadline.to_string(),
                as_count,
            ),
            s.anomalies.total().to_string(),
            fig(
                s,
                "stmts_per_cancel",
                ratio(c.statements_per_cancel),
                as_ratio,
            ),
            // The canceller's own reads where measured; else the whole
            // run's, said in the cell.
            match c.canceller_server_rows_read_per_cancel {
                Some(v) => fig(s, "canceller_rows_per_cancel", format!("{v:.1}"), as_ratio),
                None if c.server_rows_read_per_cancel.is_some() => format!(
                    "{} (whole run)",
                    fig(
                        s,
                        "server_rows_per_cancel",
                        ratio(c.server_rows_read_per_cancel),
                        as_ratio
                    )
                ),
                None => "-".into(),
            },
            fig(
                s,
                "broker_msgs_per_cancel",
                ratio(c.broker_messages_per_cancel),
                as_ratio,
            ),
            fig(
                s,
                "redis_cmds_per_cancel",
                ratio(c.redis_commands_per_cancel),
                as_ratio,
            ),
            fig(
                s,
                "cpu_us_per_cancel",
                c.cpu_us_per_cancel
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "-".into()),
                as_count,
            ),
            fig(
                s,
                "peak_rss_mib",
                format!("{:.0}", c.peak_rss_kib as f64 / 1024.0),
                as_count,
            ),
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
        row.push(warnings_cell(s));
        rows.push(row);
    }
    rows
}

/// Explains the trade-off table's columns, for both reports.
const TRADEOFF_NOTES: &str = "Lateness (`n` orders; a percentile with fewer than 10 samples \
beyond it is `-`) and anomalies over the measured orders; `paid late`: orders paid after their \
deadline while still pending, whose lateness the table cannot show. DB statements, CPU, broker \
messages (published + consumed) and Redis commands (`INFO commandstats`, server-wide) per order \
the canceller cancelled, all over the measured window (after the warm-up). DB rows read by the \
server: on PostgreSQL those of the canceller's own transactions (measured window); on MariaDB \
the whole run's, server-wide and workload included, marked `(whole run)`; none on SQLite. Peak RSS of the largest instance. \
The yes/no columns are the strategy's declared capabilities; the conformance suite runs a \
check for each one declared yes (see `strategies/src/canceller.rs` for what it cannot check).";

/// The line that tells the user where a run folder's report went.
pub fn written_to(run_dir: &Path) -> String {
    format!(
        "report: {} (and report.html; plots as SVG and PNG in {})",
        run_dir.join("report.md").display(),
        run_dir.join("plots").display()
    )
}

/// The table for the terminal: figures right-aligned, text left.
pub fn terminal_table(summaries: &[Summary]) -> String {
    let table = rows(summaries);
    let mut out = text_table::render(&table[0], &table[1..]);
    for s in summaries.iter().filter(|s| s.status != Status::Ok) {
        let _ = writeln!(
            out,
            "{} {}: {}",
            s.strategy,
            s.status.as_str(),
            s.reason.as_deref().unwrap_or("")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    /// "Rendered from the JSON alone" holds by construction: the report
    /// modules import the data model and the scenario it embeds, nothing
    /// of the runtime side (driver, instances, faults, services).
    #[test]
    fn reports_read_only_the_data_model() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            files += 1;
            for (n, line) in text.lines().enumerate() {
                for (at, _) in line.match_indices("crate::") {
                    let used = &line[at + "crate::".len()..];
                    assert!(
                        used.starts_with('"') // this test's own pattern
                            || used.starts_with("model")
                            || used.starts_with("scenario"),
                        "{}:{}: a report uses the runtime side: {line}",
                        entry.path().display(),
                        n + 1
                    );
                }
            }
        }
        assert!(files >= 5);
    }
}
