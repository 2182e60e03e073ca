//! One step of a sweep: one strategy at one rate (or holding one backlog,
//! or draining one storm), a whole run in its own namespace, judged;
//! repeated, and run again when only the shared host stalled.

use crate::model::summary::{Status, Summary};
use crate::model::sweep::{self, SweepStep};
use crate::run::folder::namespace_name;
use crate::scenario::Scenario;
use crate::session;
use crate::workload;
use anyhow::Result;
use std::path::{Path, PathBuf};
use strategies::checker::Anomaly;
use strategies::registry::Variant;
use strategies::{DbLocation, DbServer};

/// What a step of a sweep over sizes varies: the backlog held (the
/// `pending` axis) or the orders of the storm (the `storm` axis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Size {
    Pending(u64),
    Storm(u64),
}

/// What every step of a sweep shares.
#[derive(Clone, Copy)]
pub(super) struct StepContext<'a> {
    pub(super) scenario: &'a Scenario,
    pub(super) server: &'a DbServer,
    pub(super) run_id: &'a str,
    pub(super) run_dir: &'a Path,
    pub(super) repeat: u32,
    /// Appended to each step's folder and namespace: `-again` for the
    /// ceiling's re-measure, whose rate discovery may already have tried,
    /// so that it never writes over that step's folder.
    pub(super) again: &'static str,
}

impl StepContext<'_> {
    /// One step, `repeat` times back to back. The step holds only if every
    /// repetition held; its figures are the median repetition's (by p99),
    /// with each repetition kept in `repeats` for the spread. Returns the
    /// first repetition's summary (for whether anything could run at all).
    pub(super) async fn repeated_step(
        &self,
        variant: Variant,
        rate: f64,
        size: Option<Size>,
    ) -> Result<(SweepStep, Summary)> {
        if self.repeat == 1 {
            return self.step(variant, rate, size, None).await;
        }
        let mut steps = Vec::new();
        let mut first = None;
        for k in 1..=self.repeat {
            let (step, summary) = self.step(variant, rate, size, Some(k)).await?;
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

    /// One strategy at one rate (holding a backlog, or draining a storm, of `size`): a
    /// whole run, judged; run again, up to [`sweep::HARNESS_STALL_RETRIES`]
    /// times, while the harness or the host stalled
    /// ([`sweep::harness_stalled`]). A stalled attempt's folder is kept
    /// beside the step's as `<folder>-stalled-<k>` and named in `stalled`.
    async fn step(
        &self,
        variant: Variant,
        rate: f64,
        size: Option<Size>,
        repetition: Option<u32>,
    ) -> Result<(SweepStep, Summary)> {
        let mut stalled = Vec::new();
        loop {
            let attempt = stalled.len() as u32;
            let (mut step, summary, dir) = self
                .attempt(variant, rate, size, repetition, attempt)
                .await?;
            let keep_up = self.scenario.sweep.keep_up.as_micros() as u64;
            if attempt < sweep::HARNESS_STALL_RETRIES
                && sweep::harness_stalled(&summary, &step.reasons, keep_up)
            {
                let kept = format!("{}-stalled-{}", step.folder, attempt + 1);
                let moved = std::fs::rename(&dir, self.run_dir.join(&kept));
                let what = format!(
                    "attempt {} run again: {} at {} ({})",
                    attempt + 1,
                    step.reasons.join("; "),
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
                eprintln!(
                    "delaybench: {variant} at {rate} orders/s: harness or host stall, {what}"
                );
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
        size: Option<Size>,
        repetition: Option<u32>,
        attempt: u32,
    ) -> Result<(SweepStep, Summary, PathBuf)> {
        let mut scenario = self.scenario.clone();
        scenario.rate = rate;
        match (size, &mut scenario.backlog, &mut scenario.storm) {
            (Some(Size::Pending(n)), Some(b), _) => b.pending = vec![n],
            (Some(Size::Storm(n)), _, Some(s)) => s.orders = vec![n],
            _ => {}
        }
        let plan = workload::plan(&scenario);
        let mut point = match size {
            Some(Size::Pending(n)) => format!("pending-{n}"),
            Some(Size::Storm(n)) => format!("storm-{n}"),
            None => format!("rate-{}", rate.to_string().replace('.', "_")),
        } + self.again;
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
            pending: match size {
                Some(Size::Pending(n)) => Some(n),
                _ => None,
            },
            backlog: summary.backlog.clone(),
            storm_orders: match size {
                Some(Size::Storm(n)) => Some(n),
                _ => None,
            },
            storm: summary.storm.clone(),
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
    pub(super) async fn drop_namespace(&self, namespace: &str) {
        let location = DbLocation {
            kind: self.server.kind(),
            url: String::new(),
            namespace: namespace.to_string(),
        };
        if let Err(e) = self.server.drop_namespace(&location).await {
            tracing::warn!(namespace, error = %e, "could not drop a sweep step's namespace");
        }
    }
}
