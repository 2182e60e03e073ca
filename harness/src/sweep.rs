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

use crate::instance::Pool;
use crate::model::summary::{Status, Summary};
use crate::model::sweep::{
    self, GeneratorProbe, GeneratorStep, StrategySweep, SweepResult, SweepStep,
};
use crate::report;
use crate::run::args::CommonArgs;
use crate::run::folder::{namespace_name, new_run_dir, start_run_info};
use crate::scenario::Scenario;
use crate::session::{self, Bench, Load};
use crate::workload;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use strategies::checker::Anomaly;
use strategies::registry::{Role, Variant, STRATEGIES};
use strategies::{DbLocation, DbServer};

/// What `delaybench sweep` was asked to do.
#[derive(Debug, Clone)]
pub struct SweepArgs {
    pub common: CommonArgs,
    /// Run every step this many times, back to back; a step holds only if
    /// every repetition held.
    pub repeat: u32,
}

/// Discovery stops bisecting when the gap is below this share of the rate.
const BISECT_RESOLUTION: f64 = 0.05;

/// Runs the sweep and returns its folder.
pub async fn sweep(args: &SweepArgs) -> Result<PathBuf> {
    let (scenario, source) = args.common.scenario(crate::presets::SWEEP_DEFAULT)?;
    // A step is judged by its lateness at commit and its schedule path:
    // without them it would be judged on less and could hold wrongly.
    anyhow::ensure!(
        scenario.measure.commit_times && scenario.measure.schedule_times,
        "fields `measure.commit-times` and `measure.schedule-times` must stay true for \
         `delaybench sweep`: it judges every step by the lateness at commit and the schedule path"
    );
    anyhow::ensure!(
        !scenario.measure.unmeasured_twin,
        "field `measure.unmeasured-twin` is for `delaybench run`; a sweep does not run twins"
    );
    let mut variants = args.common.selected()?;
    // The yardstick first, whatever was asked, in a rate sweep. A backlog
    // sweep leaves it out: it holds its schedule in memory and reloads
    // nothing, so it has no recovery to compare.
    variants.retain(|v| v.info.role != Role::Baseline);
    if scenario.backlog.is_none() {
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
    // With a `[backlog]`, the steps are its sizes at the scenario's rate.
    let sizes: Option<Vec<u64>> = scenario.backlog.as_ref().map(|b| b.pending.clone());
    let mut result = SweepResult {
        run_id: run_id.clone(),
        axis: if sizes.is_some() { "pending" } else { "rate" }.to_string(),
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
    };
    for (variant, name) in variants.iter().zip(&names) {
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
            let pending = sizes
                .as_ref()
                .map(|s| s[result.strategies[index].steps.len()]);
            let (step, summary) = ctx.repeated_step(*variant, rate, pending).await?;
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
    result.generator = ctx.generator_probe(&result).await?;
    if let Some(g) = &result.generator {
        eprintln!("delaybench: generator: {}", g.verdict);
    }
    result.write(&run_dir)?;
    report::sweep::write(&run_dir, &result)?;
    println!("\n{}", report::sweep::terminal_table(&result));
    println!("{}", report::written_to(&run_dir));
    Ok(run_dir)
}

/// The next rate to offer, from the steps so far; `None` when done.
fn next_rate(config: &crate::scenario::Sweep, steps: &[SweepStep]) -> Option<f64> {
    if !config.rates.is_empty() {
        return config.rates.get(steps.len()).copied();
    }
    let (held, failed) = sweep::max_sustainable(steps);
    match (held, failed) {
        // Still doubling.
        (Some(h), None) => (h < config.max_rate).then(|| (h * 2.0).min(config.max_rate)),
        // The first rate failed: no bisection below it.
        (None, _) => None,
        (Some(h), Some(f)) => {
            // Every step after the first failure is a bisection.
            let first_failure = steps.iter().position(|s| !s.holds).unwrap_or(0);
            let bisections = steps.len() - first_failure - 1;
            (bisections < config.bisect as usize)
                .then(|| bisect(h, f))
                .flatten()
        }
    }
}

/// The next rate of a bisection between the highest rate that held and the
/// lowest that failed: their midpoint, rounded ([`round_rate`]); `None`
/// once the gap is within [`BISECT_RESOLUTION`] of `held`, or rounding
/// leaves no rate strictly between the two.
fn bisect(held: f64, failed: f64) -> Option<f64> {
    let mid = round_rate((held + failed) / 2.0);
    (failed - held > BISECT_RESOLUTION * held && mid > held && mid < failed).then_some(mid)
}

/// Rates read better whole: to 2 significant digits above 100.
fn round_rate(rate: f64) -> f64 {
    if rate < 100.0 {
        return rate.round().max(1.0);
    }
    let step = 10f64.powf(rate.log10().floor() - 1.0);
    (rate / step).round() * step
}

/// Fills each strategy's maximum rate, first failure, share of the
/// ceiling and limiting resource from its steps.
fn conclude(result: &mut SweepResult) {
    if result.axis != "rate" {
        return; // a backlog sweep runs one rate: no maximum to find
    }
    for s in &mut result.strategies {
        let (max, failed) = sweep::max_sustainable(&s.steps);
        s.max_rate = max;
        s.first_failed_rate = failed;
        s.limited_by = failed
            .and_then(|f| s.steps.iter().find(|st| st.rate == f))
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

struct StepContext<'a> {
    scenario: &'a Scenario,
    server: &'a DbServer,
    run_id: &'a str,
    run_dir: &'a Path,
    repeat: u32,
}

impl StepContext<'_> {
    /// One step, `repeat` times back to back. The step holds only if every
    /// repetition held; its figures are the median repetition's (by p99),
    /// with each repetition kept in `repeats` for the spread. Returns the
    /// first repetition's summary (for whether anything could run at all).
    async fn repeated_step(
        &self,
        variant: Variant,
        rate: f64,
        pending: Option<u64>,
    ) -> Result<(SweepStep, Summary)> {
        if self.repeat == 1 {
            return self.step(variant, rate, pending, None).await;
        }
        let mut steps = Vec::new();
        let mut first = None;
        for k in 1..=self.repeat {
            let (step, summary) = self.step(variant, rate, pending, Some(k)).await?;
            let stop = summary.status != Status::Ok;
            first.get_or_insert(summary);
            steps.push(step);
            if stop {
                break; // a strategy that cannot run will not run next time either
            }
        }
        Ok((
            sweep::fold_repeats(steps),
            first.expect("at least one repetition"),
        ))
    }

    /// One strategy at one rate (holding `pending` backlog orders): a
    /// whole run, judged; run again, up to [`sweep::HARNESS_STALL_RETRIES`]
    /// times, while it failed only on a harness stall
    /// ([`sweep::harness_stalled`]). A stalled attempt's folder is kept
    /// beside the step's as `<folder>-stalled-<k>` and named in `stalled`.
    async fn step(
        &self,
        variant: Variant,
        rate: f64,
        pending: Option<u64>,
        repetition: Option<u32>,
    ) -> Result<(SweepStep, Summary)> {
        let mut stalled = Vec::new();
        loop {
            let attempt = stalled.len() as u32;
            let (mut step, summary, dir) = self
                .attempt(variant, rate, pending, repetition, attempt)
                .await?;
            let keep_up = self.scenario.sweep.keep_up.as_micros() as u64;
            if attempt < sweep::HARNESS_STALL_RETRIES
                && sweep::harness_stalled(&summary, &step.reasons, keep_up)
            {
                let kept = format!("{}-stalled-{}", step.folder, attempt + 1);
                let moved = std::fs::rename(&dir, self.run_dir.join(&kept));
                let what = format!(
                    "attempt {} run again: generator p99 lag to commit {:.1} ms at {} ({})",
                    attempt + 1,
                    summary.generator.lag_us_p99 as f64 / 1000.0,
                    summary
                        .cpu
                        .as_ref()
                        .map(|c| c.describe())
                        .unwrap_or_default(),
                    match moved {
                        Ok(()) => format!("kept in {kept}"),
                        Err(e) => format!("its folder could not be kept: {e}"),
                    }
                );
                eprintln!("delaybench: {variant} at {rate} orders/s: harness stall, {what}");
                stalled.push(what);
                continue;
            }
            step.stalled = stalled;
            return Ok((step, summary));
        }
    }

    /// One attempt of a step: a whole run in its own namespace, judged.
    async fn attempt(
        &self,
        variant: Variant,
        rate: f64,
        pending: Option<u64>,
        repetition: Option<u32>,
        attempt: u32,
    ) -> Result<(SweepStep, Summary, PathBuf)> {
        let mut scenario = self.scenario.clone();
        scenario.rate = rate;
        if let (Some(b), Some(n)) = (&mut scenario.backlog, pending) {
            b.pending = vec![n];
        }
        let plan = workload::plan(&scenario);
        let mut point = match pending {
            Some(n) => format!("pending-{n}"),
            None => format!("rate-{}", rate.to_string().replace('.', "_")),
        };
        let name = variant.name();
        let mut folder = format!("{name}/{point}");
        if let Some(k) = repetition {
            point += &format!("_r{k}");
            folder += &format!("/repeat-{k}");
        }
        let dir = self.run_dir.join(&folder);
        if attempt > 0 {
            point += &format!("_a{attempt}");
        }
        let namespace = namespace_name(self.run_id, &format!("{name}_{point}"));
        let summary =
            session::measure(variant, &scenario, &plan, self.server, &namespace, &dir).await?;
        summary.write(&dir)?;
        let config = &self.scenario.sweep;
        let reasons = sweep::judge(
            &summary,
            config.bound.as_micros() as u64,
            config.keep_up.as_micros() as u64,
        );
        if summary.status == Status::Ok && summary.anomalies.total() == 0 {
            if let Some(ns) = &summary.database.namespace {
                self.drop_namespace(ns).await;
            }
        }
        let lateness = summary
            .committed_lateness_us
            .as_ref()
            .unwrap_or(&summary.lateness_us);
        let some = |v: u64| (lateness.count > 0).then_some(v);
        let arrivals_s = (scenario.warmup + scenario.duration).as_secs_f64();
        let step = SweepStep {
            rate,
            pending,
            backlog: summary.backlog.clone(),
            holds: reasons.is_empty(),
            reasons,
            folder,
            cancels: lateness.count,
            p50_us: some(lateness.p50),
            p99_us: some(lateness.p99),
            max_us: some(lateness.max),
            achieved_rate: summary.generator.created as f64 / arrivals_s,
            generator_lag_p99_us: summary.generator.lag_us_p99,
            schedule_path_p99_us: summary.schedule_path_us.as_ref().map(|p| p.p99),
            overdue_first: summary.overdue.as_ref().map(|o| o.first_quarter),
            overdue_last: summary.overdue.as_ref().map(|o| o.last_quarter),
            anomalies: summary.anomalies.total(),
            missed_cancels: summary.anomalies.get(Anomaly::MissedCancels),
            server_rows_read_per_cancel: summary
                .cost
                .canceller_server_rows_read_per_cancel
                .or(summary.cost.server_rows_read_per_cancel),
            cpu_us_per_cancel: summary.cost.cpu_us_per_cancel,
            cpu: summary.cpu.clone(),
            elapsed_s: summary.elapsed_s,
            repeats: Vec::new(),
            stalled: Vec::new(),
        };
        Ok((step, summary, dir))
    }

    /// Drops a clean step's namespace; a failure to drop only leaves it behind.
    async fn drop_namespace(&self, namespace: &str) {
        let location = DbLocation {
            kind: self.server.kind(),
            url: String::new(),
            namespace: namespace.to_string(),
        };
        if let Err(e) = self.server.drop_namespace(&location).await {
            tracing::warn!(namespace, error = %e, "could not drop a sweep step's namespace");
        }
    }

    /// The generator alone (creates and payments, no canceller) at twice
    /// the highest rate a strategy (not the ceiling) sustained; when it
    /// cannot drive that, bisected down to the rate it can.
    async fn generator_probe(&self, result: &SweepResult) -> Result<Option<GeneratorProbe>> {
        let Some(best) = result
            .strategies
            .iter()
            .filter(|s| s.strategy.info.role != Role::Baseline)
            .filter_map(|s| s.max_rate)
            .max_by(f64::total_cmp)
        else {
            return Ok(None);
        };
        let target = 2.0 * best;
        let mut steps = vec![self.generator_step(target).await?];
        let (mut held, mut failed) = (None, Some(target));
        for _ in 0..self.scenario.sweep.bisect {
            let lo = held.unwrap_or(best / 2.0);
            let Some(mid) = failed.and_then(|hi| bisect(lo, hi)) else {
                break;
            };
            let step = self.generator_step(mid).await?;
            if step.holds {
                held = Some(mid);
            } else {
                failed = Some(mid);
            }
            steps.push(step);
        }
        let first = &steps[0];
        let ms = |us: u64| us as f64 / 1000.0;
        let verdict = if first.holds {
            format!(
                "drove {target:.0} orders/s, twice the best strategy's {best:.0}, with p99 lag \
                 to commit {:.1} ms: the generator did not limit any strategy",
                ms(first.lag_p99_us)
            )
        } else {
            format!(
                "could not drive {target:.0} orders/s, twice the best strategy's {best:.0} (p99 \
                 lag to commit {:.1} ms, {} errors); alone it held {}. The generator and the \
                 database's commit path it waits on were the bottleneck from about that rate: \
                 read the maxima of strategies near it as lower bounds of what they could do \
                 on a bigger database",
                ms(first.lag_p99_us),
                first.errors,
                match held {
                    Some(h) => format!("{h:.0} orders/s"),
                    None => format!("no rate tried down to {:.0} orders/s", best / 2.0),
                }
            )
        };
        Ok(Some(GeneratorProbe {
            rate: target,
            holds: first.holds,
            max_rate: if first.holds { Some(target) } else { held },
            verdict,
            steps,
        }))
    }

    /// The generator alone at `rate`, on a namespace of its own (dropped).
    async fn generator_step(&self, rate: f64) -> Result<GeneratorStep> {
        let mut scenario = self.scenario.clone();
        scenario.rate = rate;
        scenario.backlog = None;
        let plan = workload::plan(&scenario);
        let dir = self.run_dir.join("generator");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let namespace = namespace_name(
            self.run_id,
            &format!("generator_{}", rate.to_string().replace('.', "_")),
        );
        let location = self.server.create_namespace(&namespace, &dir).await?;
        // The namespace is dropped whatever the step returns.
        let measured = async {
            let bench = Bench::open(&location, &scenario).await?;
            // No instances: every created order is "unscheduled", nothing cancels.
            let pool = Pool::spawn(Vec::new(), None).await?;
            let load = Load::start("generator", &plan, &scenario, &pool);
            let health = load.drive(&plan, &bench, &pool).await;
            let cpu = load.finish().await?;
            bench.store.close().await;
            let _ = pool.stop().await;
            anyhow::Ok((health, cpu))
        }
        .await;
        self.drop_namespace(&location.namespace).await;
        let (health, cpu) = measured?;
        let errors = health.create_errors + health.payment_errors;
        let holds =
            errors == 0 && health.lag_us_p99 <= self.scenario.sweep.keep_up.as_micros() as u64;
        eprintln!(
            "delaybench: generator alone at {rate} orders/s: {} (lag p99 {:.1} ms, {errors} errors{})",
            if holds { "keeps up" } else { "FALLS BEHIND" },
            health.lag_us_p99 as f64 / 1000.0,
            cpu.as_ref()
                .map(|c| format!(", {}", c.describe()))
                .unwrap_or_default()
        );
        Ok(GeneratorStep {
            rate,
            holds,
            created: health.created,
            planned: health.orders_planned,
            errors,
            lag_p50_us: health.lag_us_p50,
            lag_p99_us: health.lag_us_p99,
            cpu,
        })
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
        s.pending
            .map(|n| format!(" holding {n} pending"))
            .unwrap_or_default(),
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
    use crate::scenario::Sweep;

    fn step(rate: f64, holds: bool) -> SweepStep {
        SweepStep {
            rate,
            holds,
            ..SweepStep::default()
        }
    }

    /// Plays discovery against a strategy that holds up to `limit`.
    fn discover(config: &Sweep, limit: f64) -> Vec<f64> {
        let mut steps = Vec::new();
        let mut next = Some(config.start_rate);
        while let Some(rate) = next {
            steps.push(step(rate, rate <= limit));
            next = next_rate(config, &steps);
            assert!(steps.len() < 50, "discovery does not end: {steps:?}");
        }
        steps.iter().map(|s| s.rate).collect()
    }

    #[test]
    fn discovery_doubles_then_bisects_then_stops() {
        let config = Sweep::default();
        assert_eq!(
            discover(&config, 1000.0),
            vec![100.0, 200.0, 400.0, 800.0, 1600.0, 1200.0, 1000.0, 1100.0]
        );
        // The first rate fails: nothing below it is tried.
        assert_eq!(discover(&config, 50.0), vec![100.0]);
        // Never past max-rate, and a strategy holding there stops there.
        let capped = Sweep {
            max_rate: 500.0,
            ..Sweep::default()
        };
        assert_eq!(discover(&capped, 1e9), vec![100.0, 200.0, 400.0, 500.0]);
        let no_bisect = Sweep {
            bisect: 0,
            ..Sweep::default()
        };
        assert_eq!(discover(&no_bisect, 300.0), vec![100.0, 200.0, 400.0]);
    }

    #[test]
    fn listed_rates_all_run_in_order() {
        let config = Sweep {
            rates: vec![50.0, 500.0, 100.0],
            ..Sweep::default()
        };
        let mut steps = vec![step(50.0, true)];
        assert_eq!(next_rate(&config, &steps), Some(500.0));
        steps.push(step(500.0, false));
        assert_eq!(next_rate(&config, &steps), Some(100.0));
        steps.push(step(100.0, true));
        assert_eq!(next_rate(&config, &steps), None);
    }

    #[test]
    fn rates_round_to_two_significant_digits() {
        assert_eq!(round_rate(1234.0), 1200.0);
        assert_eq!(round_rate(150.0), 150.0);
        assert_eq!(round_rate(75.4), 75.0);
        assert_eq!(round_rate(0.2), 1.0);
    }

    #[test]
    fn a_bisection_stops_within_the_resolution_or_without_a_rate_between() {
        assert_eq!(bisect(800.0, 1600.0), Some(1200.0));
        assert_eq!(bisect(1200.0, 1600.0), Some(1400.0));
        // 1500 to 1560 is a gap of 4 %, under the 5 % resolution.
        assert_eq!(bisect(1500.0, 1560.0), None);
        // Rounding to two digits leaves nothing strictly between.
        assert_eq!(bisect(1000.0, 1100.0), None);
    }
}
