//! `delaybench run`: every selected strategy in turn on a fresh namespace,
//! the same plan for each, then the checker, then `summary.json` and the
//! report, rewritten after every strategy so a crash loses nothing measured.
//!
//! [`args`] holds what the command line asks, [`folder`] the run's folder
//! and `run.json`; each strategy is measured by [`crate::session`].

pub mod args;
pub mod folder;

pub use args::{CommonArgs, RunArgs};

use crate::model::lateness;
use crate::model::summary::{self, Status, Summary};
use crate::report;
use crate::scenario::Scenario;
use crate::service_args;
use crate::session;
use crate::workload;
use anyhow::{Context, Result};
use folder::{namespace_name, new_run_dir, start_run_info};
use std::path::PathBuf;
use strategies::registry::Variant;
use strategies::DbServer;

/// Runs the comparison and returns the run folder.
pub async fn run(args: &RunArgs) -> Result<PathBuf> {
    let (scenario, scenario_source) = args.common.scenario(crate::presets::RUN_DEFAULT)?;
    let variants = args.common.selected_for(&scenario, true)?;
    let names: Vec<String> = variants.iter().map(|v| v.name().to_string()).collect();
    if let Some(b) = scenario.backlog.as_ref().filter(|b| b.pending.len() > 1) {
        anyhow::bail!(
            "field `backlog.pending` lists {} sizes; `delaybench run` holds one backlog \
             (`pending = [{}]`), and `delaybench sweep --scenario ...` runs one step per size",
            b.pending.len(),
            b.pending[0]
        );
    }
    if let Some(st) = scenario.storm.as_ref().filter(|s| s.orders.len() > 1) {
        anyhow::bail!(
            "field `storm.orders` lists {} sizes; `delaybench run` measures one storm \
             (`orders = [{}]`), and `delaybench sweep --scenario ...` runs one step per size \
             (the preset `storm-sweep`)",
            st.orders.len(),
            st.orders[0]
        );
    }
    let server = DbServer::parse(args.common.services.database(service_args::SQLITE)?)?;
    // Before the run folder exists: a database that is down leaves nothing behind.
    let database_version = server.server_version().await?;
    let (run_id, run_dir) = new_run_dir(&args.common.out, &scenario.name)?;
    start_run_info(
        &run_id,
        args.repeat,
        scenario_source,
        &scenario,
        &variants,
        (&server, database_version),
        args.common.strategies_named(),
    )
    .await?
    .write(&run_dir)?;
    let plan = workload::plan(&scenario);
    eprintln!(
        "delaybench: run {run_id}: scenario {} ({} orders, {} payment callbacks, timeouts {}), database {}, strategies {}",
        scenario.name,
        plan.orders,
        plan.callbacks,
        scenario.timeouts_label(),
        server.display_url(),
        names.join(", ")
    );
    let repeat = args.repeat.max(1);
    // Each strategy, and with `measure.unmeasured-twin` the same strategy
    // with every probe and recorder off beside it: `(folder, strategy,
    // scenario)`.
    let unmeasured = Scenario {
        measure: crate::scenario::Measure::nothing(),
        ..scenario.clone()
    };
    let items_of = |rep: u32| {
        let mut items: Vec<(String, Variant, &Scenario)> = Vec::new();
        for (variant, name) in variants.iter().zip(&names) {
            let measured = (name.clone(), *variant, &scenario);
            if scenario.measure.unmeasured_twin {
                let twin = (summary::twin_folder(name), *variant, &unmeasured);
                // Each goes first every other repetition, so neither
                // always runs on the other's warm caches.
                if rep % 2 == 1 {
                    items.extend([measured, twin]);
                } else {
                    items.extend([twin, measured]);
                }
            } else {
                items.push(measured);
            }
        }
        items
    };
    let mut reps: std::collections::BTreeMap<&str, (Vec<Summary>, Vec<String>)> =
        Default::default();
    let mut summaries = Vec::new();
    // Interleaved (A B C A B C), so a drift of the machine spreads over
    // every strategy instead of favouring the one that ran first.
    let items: Vec<Vec<(String, Variant, &Scenario)>> = (1..=repeat).map(items_of).collect();
    let skipped = |v: &Variant| args::skip_reason(*v, args.common.strategies_named()).is_some();
    let mut stages = crate::progress::Stages::new(
        items
            .iter()
            .flatten()
            .filter(|(_, v, _)| !skipped(v))
            .count(),
        Some(scenario.nominal_run_time()),
    );
    for rep in 1..=repeat {
        summaries.clear();
        for (folder_name, variant, scenario) in &items[rep as usize - 1] {
            let folder = format!("repeat-{rep}");
            let (dir, namespace) = if repeat == 1 {
                (
                    run_dir.join(folder_name),
                    namespace_name(&run_id, folder_name),
                )
            } else {
                (
                    run_dir.join(folder_name).join(&folder),
                    namespace_name(&run_id, &format!("{folder_name}_r{rep}")),
                )
            };
            let summary = match args::skip_reason(*variant, args.common.strategies_named()) {
                Some(reason) => Summary::not_run(
                    *variant,
                    Status::Skipped,
                    reason,
                    summary::DatabaseInfo::server(&server),
                ),
                None => {
                    stages.begin(&if repeat == 1 {
                        folder_name.clone()
                    } else {
                        format!("{folder_name}, repetition {rep} of {repeat}")
                    });
                    session::measure(*variant, scenario, &plan, &server, &namespace, &dir).await?
                }
            };
            summary.write(&dir)?;
            eprintln!(
                "delaybench: {}{}",
                one_line(&summary),
                if scenario.measure.is_nothing() {
                    " (unmeasured twin)"
                } else {
                    ""
                }
            );
            let shown = if repeat == 1 {
                summary
            } else {
                // The strategy's own summary.json folds the repetitions so
                // far, rewritten after each, so a crash loses nothing.
                let (done, folders) = reps.entry(folder_name).or_default();
                done.push(summary.clone());
                folders.push(folder);
                let strategy_dir = run_dir.join(folder_name);
                let agg = summary::aggregate(done, folders).unwrap_or(summary);
                agg.write(&strategy_dir)?;
                // The pooled distribution stands for the strategy.
                if let Some(h) = agg
                    .lateness_us
                    .histogram
                    .as_deref()
                    .and_then(lateness::decode_histogram)
                {
                    let path = strategy_dir.join("lateness.hgrm");
                    std::fs::write(&path, lateness::hgrm(&h))
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                agg
            };
            report::write(&run_dir)?;
            if !scenario.measure.is_nothing() {
                summaries.push(shown);
            }
        }
    }
    println!("\n{}", report::terminal_table(&summaries, args.wide));
    println!("{}", report::written_to(&run_dir));
    Ok(run_dir)
}

/// Why `run` exits non-zero: a strategy that failed, or a strategy that is
/// not a teaching variant with an anomaly (unless `allow_anomalies`).
pub fn problems(summaries: &[Summary], allow_anomalies: bool) -> crate::exit::Problems {
    let mut problems = crate::exit::Problems::default();
    for s in summaries {
        if s.status == Status::Failed {
            problems.failures.push(format!("{} failed", s.strategy));
        }
        for failed in s.repeats.iter().flat_map(|r| &r.not_measured) {
            if !failed.contains(": skipped: ") {
                problems.failures.push(format!("{} {failed}", s.strategy));
            }
        }
        let teaching = s.strategy.info.is_teaching();
        if !allow_anomalies && !teaching && s.anomalies.total() > 0 {
            problems.anomalies.push(format!(
                "{} has {} anomalies (pass --allow-anomalies if the scenario is meant to break it)",
                s.strategy,
                s.anomalies.total()
            ));
        }
    }
    problems
}

fn one_line(s: &Summary) -> String {
    match s.status {
        Status::Ok => {
            let l = &s.lateness_us;
            let ms = |v: Option<u64>| {
                v.map(|us| format!("{:.1} ms", us as f64 / 1000.0))
                    .unwrap_or_else(|| "-".into())
            };
            format!(
                "{}: ok in {:.1}s, {} orders, {} cancelled, lateness n={} p90 {} p99 {} max {}, {} anomalies{}",
                s.strategy,
                s.elapsed_s,
                s.orders.created,
                s.orders.cancelled,
                l.count,
                ms(l.shown(lateness::Pct::P90)),
                ms(l.shown(lateness::Pct::P99)),
                ms(l.shown(lateness::Pct::Max)),
                s.anomalies.total(),
                s.warnings
                    .iter()
                    .map(|w| format!("\n  warning: {w}"))
                    .collect::<String>()
            )
        }
        _ => format!(
            "{}: {} ({})",
            s.strategy,
            s.status.as_str(),
            s.reason.as_deref().unwrap_or("")
        ),
    }
}
