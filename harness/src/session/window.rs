//! The measured window of a strategy's run: the plan driven from its first
//! order while the faults come at their times, the Redis commands and the
//! outbox read on the side, then the drain, the instances stopped and
//! their flushes gathered, and the server's counts read.

use super::load::Load;
use super::setup::SetUp;
use crate::db_stats;
use crate::faults::{self, FaultContext, FaultRecord};
use crate::instance::PoolRecord;
use crate::model::cpu::CpuUse;
use crate::model::records::OutboxRecord;
use crate::model::GeneratorHealth;
use crate::redis_stats;
use crate::scenario::Scenario;
use crate::shard::{ShardBase, Shards};
use crate::storm;
use crate::workload::Plan;
use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::Duration;
use strategies::{DbLocation, Micros, OrderStore, Service};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the window saw, before the checker reads the database.
#[derive(Debug)]
pub(super) struct Observed {
    /// The first order's time on the wall clock the rows are stamped with.
    pub(super) t0_us: Micros,
    pub(super) generator: GeneratorHealth,
    pub(super) faults: Vec<FaultRecord>,
    pub(super) outbox: Option<OutboxRecord>,
    pub(super) cpu: Option<CpuUse>,
    /// Every instance's flushes.
    pub(super) record: PoolRecord,
    /// Redis commands over the measured window, where the strategy uses Redis.
    pub(super) redis_commands: Result<redis_stats::Delta>,
    /// The server's rows read over the whole run (PostgreSQL).
    pub(super) server_rows_read: Option<u64>,
    /// Fresh connections to the namespace, for the checker.
    pub(super) store: OrderStore,
    /// What the storm's watch saw, when the scenario has a storm.
    pub(super) storm_drain: Option<storm::Drain>,
}

/// Drives `plan` against the set-up strategy until every order has had
/// `drain` past its deadline, then stops the instances.
pub(super) async fn observe(
    setup: &SetUp,
    scenario: &Scenario,
    plan: &Plan,
    location: &DbLocation,
) -> Result<Observed> {
    let options = setup.deployment.options();
    let store = &setup.bench.store;
    let pool = &setup.pool;
    // The load starts `at` before the storm's instant (at once when the
    // preparation took longer than its lead: the storm then falls due
    // earlier in the load, as its record says).
    if let (Some(prepared), Some(s)) = (&setup.storm, &scenario.storm) {
        storm::sleep_until_wall(prepared.expire_at_us - s.at.as_micros() as Micros).await;
    }
    // Shards on the agents are connected and hold their events before the
    // clock starts.
    let shards = match scenario.hosts.sharded_generator() {
        true => Some(
            Shards::start(
                &setup.placement.agents(),
                plan,
                ShardBase {
                    strategy: setup.deployment.variant(),
                    options: options.clone(),
                    location: setup.links.order_service_location.clone(),
                    connections: setup.bench.connections,
                },
            )
            .await?,
        ),
        false => None,
    };
    let load = Load::start(setup.deployment.variant().name(), plan, scenario, pool);
    let shards = match shards {
        Some(shards) => Some(load.start_shards(shards, pool).await?),
        None => None,
    };
    let (t0, t0_us) = (load.t0, load.t0_us);
    let storm_watch = match &setup.storm {
        Some(prepared) => Some(storm::watch(
            OrderStore::connect(location, 1).await?,
            prepared,
            t0 + Duration::from_micros(plan.measured_from_us as u64),
            storm::due_instant(prepared.expire_at_us, t0, t0_us),
        )),
        None => None,
    };
    // Redis cost is read on the server over the measured window: INFO
    // commandstats when the warm-up ends and after the drain.
    let uses_redis = setup.capabilities.requires.contains(&Service::Redis);
    let redis_url = uses_redis.then(|| options.redis_zset.url.clone());
    let redis_before = tokio::spawn({
        let url = redis_url.clone();
        let warmup_end = t0 + Duration::from_micros(plan.measured_from_us as u64);
        async move {
            tokio::time::sleep_until(warmup_end).await;
            match url {
                Some(url) => redis_stats::snapshot(&url).await.map(Some),
                None => Ok(None),
            }
        }
    });
    let faults = tokio::spawn(faults::inject(
        scenario.faults.clone(),
        FaultContext {
            pool: Arc::clone(pool),
            proxies: setup.links.instances.clone(),
            db: OrderStore::connect(location, 1).await?,
            session: setup.session.clone(),
            crash_points: setup.crash_points,
            t0,
            give_up_at: t0 + scenario.warmup + scenario.duration,
            requires: setup.capabilities.requires.clone(),
            redis: uses_redis.then(|| {
                (
                    options.redis_zset.url.clone(),
                    location.resource_prefix(),
                    options.redis_zset.shards(),
                )
            }),
            rabbit: setup
                .capabilities
                .requires
                .contains(&Service::RabbitMq)
                .then(|| (options.rabbit.url.clone(), location.resource_prefix())),
        },
    ));
    let stop_sampling = CancellationToken::new();
    let outbox_samples = setup
        .deployment
        .relays_outbox()
        .then(|| tokio::spawn(sample_outbox(store.clone(), t0, stop_sampling.clone())));
    let generator = match shards {
        Some(shards) => shards.finish().await?,
        None => load.drive(plan, &setup.bench, pool).await,
    };

    // Every order has had `drain` past its (actual) deadline when we stop.
    load.draining();
    let drain_end = t0
        + Duration::from_micros(plan.last_deadline_us as u64 + generator.lag_us_max)
        + scenario.drain;
    tokio::time::sleep_until(drain_end).await;
    // And until the storm drained (or its watch gave up).
    let storm_drain = match storm_watch {
        Some(watch) => Some(watch.await.context("watching the storm")?),
        None => None,
    };
    let mut faults = faults.await.context("fault injection")?;
    let outbox = match outbox_samples {
        Some(task) => {
            stop_sampling.cancel();
            let samples = task.await.unwrap_or_default();
            Some(OutboxRecord::of(samples, store.outbox_left().await.ok()))
        }
        None => None,
    };

    let cpu = load.finish().await?;
    let record = pool.stop().await?;
    // The proxies stay up after the instances stopped: the backlog's
    // recovery starts them again on the same (proxied) addresses. They stop
    // once it is done (`measured`), or when the set-up is dropped.
    // Only where every attempt was noted: without the recorder a count
    // of 0 would read as "no duplicates".
    if scenario.measure.commit_times {
        faults::count_duplicates(&mut faults, &record.cancel_commits, &record.absorbed, t0_us);
    }
    let redis_commands = match (&redis_url, redis_before.await.context("reading Redis")?) {
        (Some(url), Ok(Some(before))) => redis_stats::snapshot(url)
            .await
            .map(|after| after.since(&before)),
        (Some(_), Err(e)) => Err(e),
        _ => Ok(redis_stats::Delta::NotUsed),
    };
    // Closing the harness's own connections makes PostgreSQL publish their
    // counts; the checker then reads on fresh ones, after the reading.
    store.close().await;
    let store = OrderStore::connect(location, 4).await?;
    let server_rows_read = match (setup.rows_before, db_stats::rows_read(&store).await?) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    Ok(Observed {
        t0_us,
        generator,
        faults,
        outbox,
        cpu,
        record,
        redis_commands,
        server_rows_read,
        store,
        storm_drain,
    })
}

/// The outbox's length every [`OUTBOX_SAMPLE_EVERY`] from `t0` until
/// `stop`: `(ms after t0, rows)`. A failed count is skipped, not zero.
async fn sample_outbox(store: OrderStore, t0: Instant, stop: CancellationToken) -> Vec<(u64, u64)> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(OUTBOX_SAMPLE_EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return samples,
            _ = tick.tick() => {}
        }
        if let Ok(rows) = store.outbox_len().await {
            samples.push((t0.elapsed().as_millis() as u64, rows));
        }
    }
}

const OUTBOX_SAMPLE_EVERY: Duration = Duration::from_millis(250);
