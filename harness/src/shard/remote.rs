//! The harness side: starting the shards on the agents, handing each its
//! events, and passing what they did on to the pool.

use super::protocol::{End, ShardSpec};
use crate::agent;
use crate::driver;
use crate::instance::Pool;
use crate::model::GeneratorHealth;
use crate::workload::{Action, Plan};
use anyhow::{anyhow, bail, Context, Result};
use indicatif::ProgressBar;
use std::sync::Arc;
use strategies::domain::slot_of;
use strategies::registry::Variant;
use strategies::{DbLocation, Micros, StrategyOptions};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::task::JoinHandle;

/// One shard per agent, each connected, holding its events, and waiting
/// for `go`.
#[derive(Debug)]
pub struct Shards {
    shards: Vec<agent::Remote>,
    orders_planned: u64,
}

/// What every shard is started with, but its slot and its clock.
#[derive(Debug, Clone)]
pub struct ShardBase {
    pub strategy: Variant,
    pub options: StrategyOptions,
    pub location: DbLocation,
    pub connections: u32,
}

impl Shards {
    /// Starts a shard on each of `agents` (`(address, clock correction)`)
    /// and sends it the events of its orders.
    pub async fn start(agents: &[(String, i64)], plan: &Plan, base: ShardBase) -> Result<Shards> {
        let n = agents.len() as u32;
        let mut shards = Vec::new();
        for (k, (address, correction)) in agents.iter().enumerate() {
            let spec = ShardSpec {
                shard: k as u32,
                shards: n,
                strategy: base.strategy,
                options: base.options.clone(),
                location: base.location.clone(),
                connections: base.connections,
                measured_from_us: plan.measured_from_us,
                clock_correction_us: *correction,
            };
            let mut remote = agent::spawn(address, "generate", &serde_json::to_string(&spec)?)
                .await
                .with_context(|| format!("starting generator shard {k} of {n}"))?;
            let ready = remote.next_line().await?;
            if ready != crate::child::READY_LINE {
                bail!(
                    "generator shard {k} on the agent at {address} failed to start (said \
                     {ready:?}; the agent's log has its error)"
                );
            }
            let mut input = BufWriter::new(&mut remote.input);
            for event in &plan.events {
                let id = match &event.action {
                    Action::Create { id, .. } | Action::Pay { id, .. } => *id,
                };
                if slot_of(id, n) == k as u32 {
                    input
                        .write_all(format!("{}\n", serde_json::to_string(event)?).as_bytes())
                        .await?;
                }
            }
            input.flush().await?;
            shards.push(remote);
        }
        Ok(Shards {
            shards,
            orders_planned: plan.orders as u64,
        })
    }

    /// Starts every shard at `t0_us` (the harness's clock) and hands what
    /// they report to `pool` from now on; [`Running::finish`] waits for
    /// their ends. Called as the clock starts, so the shards start on time.
    pub async fn go(
        self,
        t0_us: Micros,
        pool: &Arc<Pool>,
        progress: &ProgressBar,
    ) -> Result<Running> {
        let mut relays = Vec::new();
        for mut shard in self.shards {
            shard
                .input
                .write_all(format!("go {t0_us}\n").as_bytes())
                .await?;
            let (pool, progress) = (Arc::clone(pool), progress.clone());
            relays.push(tokio::spawn(async move {
                let end = relay(&mut shard, &pool, &progress).await;
                (shard.agent, end)
            }));
        }
        Ok(Running {
            relays,
            orders_planned: self.orders_planned,
        })
    }
}

/// A shard's end and how many of its orders no instance took.
type Ended = (End, u64);

/// The shards under way.
#[derive(Debug)]
pub struct Running {
    relays: Vec<JoinHandle<(String, Result<Ended>)>>,
    orders_planned: u64,
}

impl Running {
    /// Waits for every shard's end and returns their health merged into
    /// one. One that fails fails the lot, and the others are stopped (their
    /// connections closed, so their agents stop them).
    pub async fn finish(mut self) -> Result<GeneratorHealth> {
        let mut merged = GeneratorHealth {
            orders_planned: self.orders_planned,
            ..GeneratorHealth::default()
        };
        let mut lag = driver::lag_histogram();
        let mut relays = std::mem::take(&mut self.relays).into_iter();
        while let Some(task) = relays.next() {
            let ended = match task.await {
                Ok((address, end)) => {
                    end.with_context(|| format!("the generator shard on the agent at {address}"))
                }
                Err(e) => Err(anyhow!("a generator shard's relay: {e}")),
            };
            let (end, unscheduled) = match ended {
                Ok(ended) => ended,
                Err(e) => {
                    relays.for_each(|rest| rest.abort());
                    return Err(e);
                }
            };
            merge(&mut merged, end.health, unscheduled);
            for (value, count) in end.lags {
                let _ = lag.record_n(value.max(1), count);
            }
        }
        Ok(driver::finish(merged, lag))
    }
}

impl Drop for Running {
    /// A run that ends before [`Running::finish`] (an error elsewhere)
    /// stops the shards: their connections close, their agents stop them.
    fn drop(&mut self) {
        self.relays.iter().for_each(JoinHandle::abort);
    }
}

/// Passes one shard's orders and payments to `pool` until its [`End`];
/// returns it with how many orders no instance took.
async fn relay(shard: &mut agent::Remote, pool: &Pool, progress: &ProgressBar) -> Result<Ended> {
    let mut unscheduled = 0;
    loop {
        let line = shard
            .output
            .next_line()
            .await?
            .ok_or_else(|| anyhow!("it ended without its report"))?;
        let mut parts = line.split_ascii_whitespace();
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("s"), Some(id), Some(expire), Some(committed)) => {
                if !pool.schedule(id.parse()?, expire.parse()?, committed.parse()?) {
                    unscheduled += 1;
                }
                progress.inc(1);
            }
            (Some("f"), Some(id), None, None) => {
                pool.paid(id.parse()?);
                progress.inc(1);
            }
            (Some("m"), None, None, None) => pool.start_measuring(),
            _ if line.starts_with("!exit ") => {
                bail!("it exited without its report ({})", &line[6..])
            }
            _ => {
                let end: End =
                    serde_json::from_str(&line).with_context(|| format!("it said {line:?}"))?;
                return Ok((end, unscheduled));
            }
        }
    }
}

/// Adds one shard's counts to `into`; its lag figures are recomputed from
/// the merged histogram.
fn merge(into: &mut GeneratorHealth, shard: GeneratorHealth, unscheduled_here: u64) {
    // Every field named, so a new one cannot be dropped here unseen.
    let GeneratorHealth {
        orders_planned: _, // the whole plan's, set once
        created,
        refused,
        create_errors,
        unscheduled,
        rolled_back,
        callbacks_delivered,
        payment_outcomes,
        payment_errors,
        lag_us_p50: _, // recomputed from the merged histogram
        lag_us_p99: _,
        lag_us_max: _,
        lag_us: _,
        lag_histogram: _,
        pool_connections,
        warning: _,
        first_error,
    } = shard;
    into.created += created;
    into.refused += refused;
    into.create_errors += create_errors;
    // An order the shard handed over that no live instance took: created,
    // never scheduled (as the local driver counts it).
    into.unscheduled += unscheduled + unscheduled_here;
    into.rolled_back += rolled_back;
    into.callbacks_delivered += callbacks_delivered;
    for (outcome, n) in payment_outcomes {
        *into.payment_outcomes.entry(outcome).or_default() += n;
    }
    into.payment_errors += payment_errors;
    into.pool_connections += pool_connections;
    if into.first_error.is_none() {
        into.first_error = first_error;
    }
}
