//! Reports rendered from `run.json` and every `<strategy>/summary.json` on
//! disk (the JSON is the source of truth, so reports can be regenerated with
//! `delaybench report DIR`): `report.md`, `report.html` with plots, and the
//! terminal table. The tables both reports share are built here, once.

mod compare;
mod html;
mod markdown;
mod plots;

use crate::runinfo::RunInfo;
use crate::summary::{Status, Summary};
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

/// Writes `report.md` and `report.html` for the run in `run_dir`.
pub fn write(run_dir: &Path) -> Result<()> {
    let (info, summaries) = load(run_dir)?;
    let path = run_dir.join("report.md");
    std::fs::write(&path, markdown::markdown(&info, &summaries))
        .with_context(|| format!("writing {}", path.display()))?;
    let page = html::html(run_dir, &info, &summaries)?;
    let path = run_dir.join("report.html");
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))
}

/// What was run, where and on what: the lines both reports open with,
/// each with whether it is stressed (timeouts and faults).
fn run_facts(info: &RunInfo) -> Vec<(String, bool)> {
    let sc = &info.scenario;
    let mut lines = vec![
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
    ];
    if let Some(faults) = sc.faults_label() {
        lines.push((
            format!("Faults, the same for every strategy: {faults}."),
            true,
        ));
    }
    for (service, version) in &info.services {
        lines.push((format!("{service}: {version}."), false));
    }
    lines
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

fn ratio(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
}

/// Every anomaly the checker counts, with the name the reports use, in one
/// order everywhere.
pub fn anomaly_counts(a: &Anomalies) -> [(&'static str, u64); 8] {
    [
        ("early", a.early_cancels),
        ("paid-then-cancelled", a.paid_then_cancelled),
        ("duplicate-releases", a.duplicate_releases),
        ("missed", a.missed_cancels),
        ("refund-errors", a.refund_errors),
        ("stock-mismatches", a.stock_mismatches),
        ("unreleased", a.unreleased_cancels),
        ("orphan-releases", a.orphan_releases),
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
fn rows(summaries: &[Summary]) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "strategy",
        "status",
        "created",
        "paid",
        "cancelled",
        "pending",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "anomalies",
        "stmts/cancel",
        "attempts/cancel",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for s in summaries {
        if s.status != Status::Ok {
            let mut row = vec![s.strategy.clone(), s.status.as_str().to_string()];
            row.extend(std::iter::repeat_n("-".to_string(), 12));
            rows.push(row);
            continue;
        }
        let l = &s.lateness_us;
        let c = &s.cost.store;
        let attempts = (c.cancelled > 0).then(|| c.cancel_attempts as f64 / c.cancelled as f64);
        rows.push(vec![
            s.strategy.clone(),
            "ok".into(),
            s.orders.created.to_string(),
            s.orders.paid.to_string(),
            s.orders.cancelled.to_string(),
            s.orders.pending.to_string(),
            ms(l.p50),
            ms(l.p90),
            ms(l.p99),
            ms(l.p999),
            ms(l.max),
            anomaly_cell(s),
            ratio(s.cost.statements_per_cancel),
            ratio(attempts),
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
        "p99 ms",
        "max ms",
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
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        let c = &s.cost;
        let mut row = vec![
            s.strategy.clone(),
            ms(s.lateness_us.p99),
            ms(s.lateness_us.max),
            s.anomalies.total().to_string(),
            ratio(c.statements_per_cancel),
            ratio(c.server_rows_read_per_cancel),
            ratio(c.broker_messages_per_cancel),
            ratio(c.redis_commands_per_cancel),
            c.cpu_us_per_cancel
                .map(|v| format!("{v:.0}"))
                .unwrap_or_else(|| "-".into()),
            format!("{:.0}", c.peak_rss_kib as f64 / 1024.0),
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
        rows.push(row);
    }
    rows
}

/// Explains the trade-off table's columns, for both reports.
const TRADEOFF_NOTES: &str = "Lateness and anomalies over the measured orders; DB statements \
and CPU per order the canceller cancelled after the warm-up (app-side); DB rows read by the \
server over the whole run, order creation and payments included (the same workload for every \
strategy, so differences are the cancellers'; PostgreSQL counts the strategy's schema only, \
MariaDB's Handler_read_* are server-wide, SQLite has none); broker messages \
(published + consumed) and Redis commands (`INFO commandstats`, server-wide) per cancelled \
order over the whole run; peak RSS of the largest instance. The yes/no columns are the \
strategy's declared capabilities, which the conformance suite checks.";

/// The table for the terminal, columns aligned.
pub fn terminal_table(summaries: &[Summary]) -> String {
    let table = rows(summaries);
    let widths: Vec<usize> = (0..table[0].len())
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
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
