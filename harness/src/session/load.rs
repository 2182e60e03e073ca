//! The load from its first order: the clock every time of the run is
//! counted from, the progress shown while it runs, and the machine's CPU
//! read over the arrival window. A strategy's session and the sweep's
//! generator step both drive their plan through it.

use super::bench::Bench;
use crate::driver;
use crate::instance::Pool;
use crate::model::cpu::CpuUse;
use crate::model::GeneratorHealth;
use crate::resources;
use crate::scenario::Scenario;
use crate::shard::{Running, Shards};
use crate::workload::Plan;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;
use strategies::{now_us, Micros};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A plan under way.
#[derive(Debug)]
pub struct Load {
    /// When the first order is due; every `*_ms` of the run counts from it.
    pub t0: Instant,
    /// The same instant on the wall clock the database rows are stamped with.
    pub t0_us: Micros,
    progress: ProgressBar,
    /// Without a terminal, a line every few seconds instead of the bar
    /// (stopped when dropped, finished or not).
    log_lines: Option<crate::progress::Ticker>,
    cpu: JoinHandle<Option<CpuUse>>,
}

impl Load {
    /// Starts the clock now (the instances learn it from `pool`), the
    /// progress bar labelled `label`, and the CPU reading, which covers the
    /// measured arrivals: from the warm-up's end to the last arrival.
    pub fn start(label: &str, plan: &Plan, scenario: &Scenario, pool: &Pool) -> Load {
        let (progress, drawn) = progress_bar(label, plan.events.len() as u64);
        let log_lines = (!drawn).then(|| crate::progress::ticker(progress.clone(), label.into()));
        let (t0, t0_us) = (Instant::now(), now_us());
        pool.set_t0(t0);
        let cpu = resources::measure_window(
            t0 + Duration::from_micros(plan.measured_from_us as u64),
            t0 + scenario.warmup + scenario.duration,
        );
        Load {
            t0,
            t0_us,
            progress,
            log_lines,
            cpu,
        }
    }

    /// Creates the plan's orders and applies its payments, each at its time
    /// after `t0`, through `bench`; returns how well the generator kept up.
    pub async fn drive(&self, plan: &Plan, bench: &Bench, pool: &Arc<Pool>) -> GeneratorHealth {
        driver::drive(
            plan,
            &bench.store,
            pool,
            self.t0,
            &self.progress,
            bench.connections,
        )
        .await
    }

    /// Starts the generator shards on the agents at `t0` (call it right
    /// after [`Load::start`]) and hands what they report to the pool.
    pub async fn start_shards(&self, shards: Shards, pool: &Arc<Pool>) -> Result<Running> {
        shards.go(self.t0_us, pool, &self.progress).await
    }

    /// Says the arrivals are over and the run waits for the last deadlines.
    pub fn draining(&self) {
        self.progress.set_message("draining");
    }

    /// The CPU use over the arrival window (waiting for its end), and the
    /// progress bar cleared.
    pub async fn finish(self) -> Result<Option<CpuUse>> {
        let cpu = self.cpu.await.context("reading CPU use");
        drop(self.log_lines);
        self.progress.finish_and_clear();
        cpu
    }
}

/// A progress bar, and whether it is drawn: on a terminal; hidden in CI
/// and in logs (which get [`crate::progress::ticker`]'s lines instead).
fn progress_bar(name: &str, len: u64) -> (ProgressBar, bool) {
    let quiet = std::env::var_os("CI").is_some() || !std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(
        Some(len),
        if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>14} [{bar:30}] {pos}/{len} events {elapsed}, arrivals end in {eta} {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(name.to_string());
    (bar, !quiet)
}
