//! `delaybench sweep`: each strategy at a series of offered rates, to find
//! the highest rate at which it keeps its promise, beside the ceiling's.
//!
//! The ceiling runs first, then each strategy. Every step is a whole run of
//! the scenario at one rate (own namespace, workers, warm-up and measured
//! window), judged by [`sweep::judge`]. With `[sweep] rates` every listed
//! rate runs; otherwise discovery doubles from `start-rate` until a step
//! fails (or `max-rate`), then bisects `bisect` times between the highest
//! rate that held and the lowest that failed, in the manner of the
//! OpenMessaging Benchmark's max-rate mode. Last, the generator alone is
//! driven at twice the highest rate any strategy sustained, so a limit of
//! the harness is never read as a limit of a strategy.
//!
//! `sweep.json` and the report are rewritten after every step: a crash
//! loses nothing measured. The namespaces of clean steps are dropped (a
//! sweep makes dozens); any step with an anomaly or a failure keeps its
//! namespace for inspection, named in its `summary.json`.
//!
//! [`discovery`] picks the next rate, [`step`] runs one step (repeated,
//! and run again after a harness or host stall), [`generator`] drives the
//! generator alone.

mod discovery;
mod generator;
mod step;

use crate::model::summary::Status;
use crate::model::sweep::{self, StrategySweep, SweepAxis, SweepResult, SweepStep};
use crate::report;
use crate::run::args::CommonArgs;
use crate::run::folder::{new_run_dir, start_run_info};
use anyhow::Result;
use discovery::next_rate;
use std::path::PathBuf;
use step::{Size, StepContext};
use strategies::registry::{Role, Variant, STRATEGIES};
use strategies::DbServer;

/// What `delaybench sweep` was asked to do.
#[derive(Debug, Clone)]
pub struct SweepArgs {
    pub common: CommonArgs,
    /// Run every step this many times, back to back; a step holds only if
    /// every repetition held.
    pub repeat: u32,
}

/// What a sweep cannot run with: the errors name the field or flag.
fn check_sweepable(args: &SweepArgs, scenario: &crate::scenario::Scenario) -> Result<()> {
    // Each step offers its own rate: one given for the whole run would be
    // overwritten without a word.
    let rate_given = args.common.overrides.rate.is_some()
        || args.common.overrides.sets().iter().any(|s| s.key == "rate");
    anyhow::ensure!(
        !rate_given,
        "--rate (or --set rate=) is for `delaybench run`: a sweep offers the rates of [sweep] \
         (--set sweep.rates=[500,1000] or --set sweep.start-rate=200)"
    );
    // A step is judged by its lateness at commit and its schedule path:
    // without them it would be judged on less and could hold wrongly.
    anyhow::ensure!(
        scenario.measure.commit_times && scenario.measure.schedule_times,
        "fields `measure.commit-times` and `measure.schedule-times` must stay true for \
         `delaybench sweep`: it judges every step by the lateness at commit and the schedule path"
    );
    // A sweep varies one thing: the rate, the backlog or the storm.
    anyhow::ensure!(
        scenario.storm.is_none() || scenario.backlog.is_none(),
        "fields `storm` and `backlog` are both set: `delaybench sweep` varies one of them (their \
         sizes: `storm.orders`, `backlog.pending`); drop the other"
    );
    anyhow::ensure!(
        !scenario.measure.unmeasured_twin,
        "field `measure.unmeasured-twin` is for `delaybench run`; a sweep does not run twins"
    );
    Ok(())
}

/// Runs the sweep and returns its folder.
pub async fn sweep(args: &SweepArgs) -> Result<PathBuf> {
    let (scenario, source) = args.common.scenario(crate::presets::SWEEP_DEFAULT)?;
    check_sweepable(args, &scenario).map_err(crate::exit::usage)?;
    let mut variants = args.common.selected_for(&scenario, false)?;
    // The yardstick first, whatever was asked, in a rate sweep. A sweep
    // over sizes leaves it out: it holds its schedule in memory and reloads
    // nothing (no recovery to compare), and a storm sweep measures each
    // cancel path's drain, not a rate to divide.
    variants.retain(|v| v.info.role != Role::Baseline);
    let sizes: Option<Vec<Size>> = match (&scenario.backlog, &scenario.storm) {
        (Some(b), _) => Some(b.pending.iter().map(|n| Size::Pending(*n)).collect()),
        (_, Some(s)) => Some(s.orders.iter().map(|n| Size::Storm(*n)).collect()),
        _ => None,
    };
    if sizes.is_none() {
        let baselines = STRATEGIES.iter().filter(|s| s.role == Role::Baseline);
        variants.splice(0..0, baselines.map(Variant::plain));
    }
    let names: Vec<String> = variants.iter().map(|v| v.name().to_string()).collect();
    let server = DbServer::parse(args.common.services.database(crate::service_args::SQLITE)?)?;
    let database_version = server.server_version().await?;
    let (run_id, run_dir) = new_run_dir(&args.common.out, &scenario.name)?;
    start_run_info(
        &run_id,
        args.repeat,
        source,
        &scenario,
        &variants,
        (&server, database_version),
        true,
    )
    .await?
    .write(&run_dir)?;
    let config = &scenario.sweep;
    // With a `[backlog]` or a `[storm]`, the steps are its sizes at the
    // scenario's rate.
    let mut result = SweepResult {
        run_id: run_id.clone(),
        axis: if scenario.storm.is_some() {
            SweepAxis::Storm
        } else if scenario.backlog.is_some() {
            SweepAxis::Pending
        } else {
            SweepAxis::Rate
        },
        mode: if config.rates.is_empty() && sizes.is_none() {
            "discover"
        } else {
            "list"
        }
        .to_string(),
        bound_ms: config.bound.as_secs_f64() * 1000.0,
        keep_up_ms: config.keep_up.as_secs_f64() * 1000.0,
        max_offered_rate: if config.rates.is_empty() {
            config.max_rate
        } else {
            config.rates.iter().copied().fold(0.0, f64::max)
        },
        strategies: Vec::new(),
        generator: None,
        ceiling_window_ms: Some(strategies::ceiling::WINDOW.as_secs_f64() * 1000.0),
        ceiling_claims_every_due_order: true,
    };
    eprintln!(
        "delaybench: sweep {run_id}: scenario {} ({} mode, bound p99 {} ms, keep-up {} ms), database {}, strategies {}",
        scenario.name,
        result.mode,
        result.bound_ms,
        result.keep_up_ms,
        server.display_url(),
        names.join(", ")
    );
    let ctx = StepContext {
        scenario: &scenario,
        server: &server,
        run_id: &run_id,
        run_dir: &run_dir,
        repeat: args.repeat.max(1),
        again: "",
    };
    // A sweep's steps are found as it goes, so the estimate is per strategy.
    let mut stages = crate::progress::Stages::new(variants.len(), None);
    for (variant, name) in variants.iter().zip(&names) {
        stages.begin(name);
        result.strategies.push(StrategySweep {
            strategy: *variant,
            status: Status::Ok,
            reason: None,
            steps: Vec::new(),
            max_rate: None,
            first_failed_rate: None,
            share_of_ceiling: None,
            limited_by: None,
        });
        let index = result.strategies.len() - 1;
        let mut next = match &sizes {
            Some(sizes) => sizes.first().map(|_| scenario.rate),
            None if config.rates.is_empty() => Some(config.start_rate),
            None => config.rates.first().copied(),
        };
        while let Some(rate) = next {
            let size = sizes
                .as_ref()
                .map(|s| s[result.strategies[index].steps.len()]);
            let (step, summary) = ctx.repeated_step(*variant, rate, size).await?;
            eprintln!("delaybench: {}", step_line(name, &step));
            let this = &mut result.strategies[index];
            if summary.status != Status::Ok && this.steps.is_empty() {
                // Nothing could run (a service is down): say so, once.
                this.status = summary.status;
                this.reason = summary.reason.clone();
                next = None;
            } else {
                this.steps.push(step);
                next = match &sizes {
                    Some(sizes) => (this.steps.len() < sizes.len()).then_some(scenario.rate),
                    None => next_rate(config, &this.steps),
                };
            }
            conclude(&mut result);
            result.write(&run_dir)?;
            report::sweep::write(&run_dir, &result)?;
        }
    }
    remeasure_ceiling(&ctx, &mut result, &run_dir).await?;
    result.generator = generator::probe(&ctx, &result).await?;
    if let Some(g) = &result.generator {
        eprintln!("delaybench: generator: {}", g.verdict);
    }
    result.write(&run_dir)?;
    report::sweep::write(&run_dir, &result)?;
    println!("\n{}", report::sweep::terminal_table(&result));
    println!("{}", report::written_to(&run_dir));
    Ok(run_dir)
}

/// When a strategy's maximum beat the ceiling's, the ceiling runs once
/// more at that rate, after every strategy: the first measurement may have
/// met a slower moment of a shared machine (two sweeps an hour apart once
/// differed by 20 %). The ceiling is the upper envelope of its
/// measurements (see [`conclude`]), so one that holds there bounds the
/// strategy; one that fails leaves the strategy above it, and the report
/// says so with the measured rates. When no strategy beat it, the ceiling
/// runs once more at the rate it first failed ([`ceiling_to_remeasure`]).
async fn remeasure_ceiling(
    ctx: &StepContext<'_>,
    result: &mut SweepResult,
    run_dir: &std::path::Path,
) -> Result<()> {
    let Some(remeasure) = ceiling_to_remeasure(result) else {
        return Ok(());
    };
    let index = result
        .strategies
        .iter()
        .position(|s| s.strategy.info.role == Role::Baseline)
        .expect("a ceiling to re-measure");
    let variant = result.strategies[index].strategy;
    let rate = match remeasure {
        Remeasure::Beaten(rate) => {
            eprintln!(
                "delaybench: a strategy held {rate} orders/s, above the ceiling's maximum: \
                 re-measuring the ceiling there"
            );
            rate
        }
        Remeasure::FirstFailed(rate) => {
            eprintln!(
                "delaybench: the ceiling first failed at {rate} orders/s: running it there \
                 once more, so that one slow moment does not lower the bound every share \
                 divides by"
            );
            rate
        }
    };
    let again = StepContext {
        again: "-again",
        ..*ctx
    };
    let (step, _) = again.repeated_step(variant, rate, None).await?;
    eprintln!("delaybench: {}", step_line(variant.name(), &step));
    result.strategies[index].steps.push(step);
    conclude(result);
    result.write(run_dir)?;
    report::sweep::write(run_dir, result)
}

/// The rate to run the ceiling at once more (the sweep asks once, after
/// every strategy; a rate sweep only): the best strategy's maximum, when
/// it is above every rate the ceiling held, whether or not discovery tried
/// the ceiling there; otherwise the lowest rate above its maximum at which
/// the ceiling failed. A bound that reads low flatters every share that
/// divides by it, and one slow moment of a shared machine is enough: in
/// two list-mode sweeps 5 minutes apart the ceiling held 1 600 and 1 800
/// (results/batch-wait/*-sweep-batch-wait-*, at 0edad13, the second from a
/// dirty tree there), where the reference sweep an
/// hour before held 2 200, so the RabbitMQ strategies' 1 400 read 88 %.
fn ceiling_to_remeasure(result: &SweepResult) -> Option<Remeasure> {
    if result.axis != SweepAxis::Rate {
        return None;
    }
    let ceiling = result
        .strategies
        .iter()
        .find(|s| s.strategy.info.role == Role::Baseline && s.status == Status::Ok)?;
    let best = result
        .strategies
        .iter()
        .filter(|s| s.strategy.info.role != Role::Baseline)
        .filter_map(|s| s.max_rate)
        .max_by(f64::total_cmp)?;
    let held = ceiling.max_rate.unwrap_or(0.0);
    if best > held {
        return Some(Remeasure::Beaten(best));
    }
    ceiling
        .steps
        .iter()
        .filter(|st| !st.holds && st.rate > held)
        .map(|st| st.rate)
        .min_by(f64::total_cmp)
        .map(Remeasure::FirstFailed)
}

/// Why, and at which rate, the ceiling runs once more.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Remeasure {
    /// A strategy held this rate, above every rate the ceiling held.
    Beaten(f64),
    /// No strategy beat the ceiling; it first failed at this rate.
    FirstFailed(f64),
}

/// Fills each strategy's maximum rate, first failure, share of the
/// ceiling and limiting resource from its steps.
///
/// The ceiling's maximum is the upper envelope of its steps: the highest
/// rate it held in any of them, its discovery or the re-measure
/// ([`remeasure_ceiling`]). A bound has to err high: a rate the ceiling
/// held once, the machine can do, whatever a noisier step said below it.
fn conclude(result: &mut SweepResult) {
    if result.axis != SweepAxis::Rate {
        return; // a backlog sweep runs one rate: no maximum to find
    }
    for s in &mut result.strategies {
        let (max, failed) = sweep::max_sustainable(&s.steps);
        s.max_rate = if s.strategy.info.role == Role::Baseline {
            // The upper envelope, never below `max`, itself a held rate.
            s.steps
                .iter()
                .filter(|st| st.holds)
                .map(|st| st.rate)
                .max_by(f64::total_cmp)
        } else {
            max
        };
        s.first_failed_rate = failed;
        s.limited_by = failed
            .and_then(|f| s.steps.iter().find(|st| st.rate == f && !st.holds))
            .map(sweep::limited_by);
    }
    let ceiling = result
        .strategies
        .iter()
        .find(|s| s.strategy.info.role == Role::Baseline)
        .and_then(|s| s.max_rate);
    for s in &mut result.strategies {
        s.share_of_ceiling = match (s.max_rate, ceiling) {
            (Some(m), Some(c)) if c > 0.0 => Some(m / c),
            _ => None,
        };
    }
}

fn step_line(name: &str, s: &SweepStep) -> String {
    let ms = |v: Option<u64>| {
        v.map(|us| format!("{:.1} ms", us as f64 / 1000.0))
            .unwrap_or_else(|| "-".into())
    };
    format!(
        "{name} at {} orders/s{}: {} (n={} p50 {} p99 {}, lag p99 {:.1} ms{}){}{}",
        s.rate,
        match (s.pending, s.storm_orders) {
            (Some(n), _) => format!(" holding {n} pending"),
            (_, Some(n)) => format!(
                " with a storm of {n}{}",
                s.storm
                    .as_ref()
                    .map(|r| match r.drain_s {
                        Some(d) => format!(" drained in {d:.2} s"),
                        None => format!(" NOT drained ({} left)", r.pending_left),
                    })
                    .unwrap_or_default()
            ),
            _ => String::new(),
        },
        if s.holds { "holds" } else { "FAILS" },
        s.cancels,
        ms(s.p50_us),
        ms(s.p99_us),
        s.generator_lag_p99_us as f64 / 1000.0,
        s.cpu
            .as_ref()
            .map(|c| format!(", {}", c.describe()))
            .unwrap_or_default(),
        if s.reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", s.reasons.join("; "))
        },
        if s.stalled.is_empty() {
            String::new()
        } else {
            format!(" [{}]", s.stalled.join("; "))
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use strategies::registry::STRATEGIES;

    fn strategy(name: &str, steps: &[(f64, bool)]) -> StrategySweep {
        let info = STRATEGIES
            .iter()
            .find(|s| s.name == name)
            .expect("a listed strategy");
        StrategySweep {
            strategy: Variant::plain(info),
            status: Status::Ok,
            reason: None,
            steps: steps
                .iter()
                .map(|&(rate, holds)| SweepStep {
                    rate,
                    holds,
                    ..SweepStep::default()
                })
                .collect(),
            max_rate: None,
            first_failed_rate: None,
            share_of_ceiling: None,
            limited_by: None,
        }
    }

    fn result(strategies: Vec<StrategySweep>) -> SweepResult {
        let mut result = SweepResult::rate_sweep_for_test(strategies);
        conclude(&mut result);
        result
    }

    #[test]
    fn a_strategy_above_the_ceiling_has_the_ceiling_run_again_at_its_maximum() {
        let ceiling = strategy(
            "ceiling",
            &[(1600.0, true), (1800.0, true), (2000.0, false)],
        );
        let db_scan = strategy("db-scan", &[(2400.0, true), (2600.0, false)]);
        let r = result(vec![ceiling.clone(), db_scan.clone()]);
        assert_eq!(ceiling_to_remeasure(&r), Some(Remeasure::Beaten(2400.0)));
        // Discovery failed there already: once more all the same, since one
        // slow moment is what the re-measure is for.
        let mut tried = ceiling;
        tried.steps.push(SweepStep {
            rate: 2400.0,
            holds: false,
            ..SweepStep::default()
        });
        assert_eq!(
            ceiling_to_remeasure(&result(vec![tried, db_scan])),
            Some(Remeasure::Beaten(2400.0))
        );
        // Below the ceiling: the ceiling once more where it first failed,
        // since a bound read low flatters every share.
        let low = strategy("db-scan", &[(1600.0, true), (1800.0, false)]);
        let ceiling = strategy(
            "ceiling",
            &[(1800.0, true), (2400.0, false), (2000.0, false)],
        );
        assert_eq!(
            ceiling_to_remeasure(&result(vec![ceiling, low.clone()])),
            Some(Remeasure::FirstFailed(2000.0))
        );
        // A ceiling that held every rate offered: nothing to run again.
        let ceiling = strategy("ceiling", &[(1800.0, true), (2000.0, true)]);
        assert_eq!(ceiling_to_remeasure(&result(vec![ceiling, low])), None);
    }

    #[test]
    fn the_ceiling_is_the_highest_rate_it_ever_held_and_the_share_divides_by_it() {
        // Discovery failed at 2000, the re-measure held at 2400.
        let ceiling = strategy(
            "ceiling",
            &[(1800.0, true), (2000.0, false), (2400.0, true)],
        );
        let db_scan = strategy("db-scan", &[(2400.0, true), (2600.0, false)]);
        let wheel = strategy("timing-wheel", &[(1200.0, true), (1400.0, false)]);
        let r = result(vec![ceiling, db_scan, wheel]);
        assert_eq!(r.strategies[0].max_rate, Some(2400.0));
        assert_eq!(r.strategies[0].first_failed_rate, Some(2000.0));
        assert_eq!(r.strategies[1].share_of_ceiling, Some(1.0));
        assert_eq!(r.strategies[2].share_of_ceiling, Some(0.5));
        // A strategy's own maximum is not an envelope: a held step above a
        // failed one does not count.
        let bumpy = strategy(
            "db-timer",
            &[(1000.0, true), (1200.0, false), (1400.0, true)],
        );
        let r = result(vec![strategy("ceiling", &[(2000.0, true)]), bumpy]);
        assert_eq!(r.strategies[1].max_rate, Some(1000.0));
    }

    #[test]
    fn the_figures_at_the_ceilings_maximum_are_the_step_that_held_there() {
        // Discovery failed at 800, the re-measure held there: the table's
        // figures at the maximum must be the re-measure's.
        let ceiling = strategy(
            "ceiling",
            &[(550.0, true), (800.0, false), (600.0, false), (800.0, true)],
        );
        let r = result(vec![ceiling]);
        assert_eq!(r.strategies[0].max_rate, Some(800.0));
        let at = crate::report::sweep::at_max(&r.strategies[0]).unwrap();
        assert!(at.rate == 800.0 && at.holds);
    }

    /// A maximum that owes something to a weaker promise (rabbit-delayed's
    /// broker confirms before the disk) carries its caveat in the cell, not
    /// in a footnote; the others carry none.
    #[test]
    fn a_maximum_bought_by_a_weaker_promise_says_so_beside_it() {
        let r = result(vec![
            strategy("ceiling", &[(2000.0, true), (2200.0, false)]),
            strategy("rabbit-delayed", &[(1800.0, true), (2000.0, false)]),
            strategy("rabbit-ttl", &[(1100.0, true), (1200.0, false)]),
        ]);
        let mut out = String::new();
        crate::report::sweep::rate_tables(&mut out, &r);
        let row = |name: &str| {
            out.lines()
                .find(|l| l.starts_with(&format!("| {name} |")))
                .unwrap_or_else(|| panic!("no row for {name} in {out}"))
                .to_string()
        };
        let caveat = STRATEGIES
            .iter()
            .find(|s| s.name == "rabbit-delayed")
            .and_then(|s| s.rate_caveat)
            .expect("rabbit-delayed declares a rate caveat");
        assert!(
            row("rabbit-delayed").contains(&format!("| 1800 ({caveat}) |")),
            "{}",
            row("rabbit-delayed")
        );
        assert!(!row("rabbit-ttl").contains(caveat));
        assert!(!row("ceiling").contains(caveat));
    }
}
