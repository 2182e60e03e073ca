//! `redis-zset`: a Redis sorted set scored by deadline, claimed atomically.
//!
//! Keys, per shard `k` of `shards` (the `{...}` hash tag puts a shard's keys
//! in one Redis Cluster slot, so every script touches one slot):
//! - `dlb:{<prefix>:<k>}:delay`: member = order id, score = `expire_at_us`;
//! - `dlb:{<prefix>:<k>}:processing`: claimed members, score = visibility deadline;
//! - `dlb:{<prefix>:<k>}:dead`: members that are not order ids, score = when buried;
//! - channel `dlb:{<prefix>}:wake`: `<k> <deadline_us>` when a deadline
//!   became shard `k`'s earliest.
//!
//! `<prefix>` comes from the database namespace, so runs never share keys;
//! an order's shard is a stable hash of its id modulo `shards`. On Redis
//! Cluster (`redis+cluster://` URL) the tag `<prefix>:<k>` may carry a salt
//! (`<prefix>:<k>.<salt>`) chosen so shard `k`'s slot lies in the `k`-th
//! slice of the slot space, spreading the shards over the masters.
//!
//! A worker claims due members with one script (`scripts.rs`: delay ->
//! processing), cancels them through `cancel_batch_if_due`, then acks by
//! ZREM from processing. A worker that dies between claim and ack leaves its
//! claims in processing; every worker's reclaimer gives them back to delay
//! once their visibility deadline passed. A claim acked late after it was
//! reclaimed and cancelled by someone else only removes a member whose order
//! is already final: the conditional UPDATE gave exactly one release.
//!
//! A worker (`worker.rs`) runs one loop per shard, each sleeping until its
//! shard's earliest score, so a shard whose Redis Cluster master is down
//! (each call waiting out the client's timeouts) holds up only itself;
//! `schedule` PUBLISHes a deadline that became a shard's earliest and every
//! worker SUBSCRIBEs, so an earlier order wakes that shard's loop. Every
//! `max-sleep` each loop claims its shard whatever it knows, which bounds
//! what a lost wake message costs.
//!
//! The teaching variant `redis-zset-nonatomic` (same keys, same waking)
//! reads with ZRANGEBYSCORE and removes with ZREM afterwards: instances
//! read the same ids and all try to cancel them.

mod config;
mod conn;
mod info;
mod scripts;
pub mod teaching;
mod worker;

pub use config::RedisZsetConfig;
pub use conn::START_HINT;
pub use info::{REDIS_KEYSPACE_EXPIRY, REDIS_ZSET, REDIS_ZSET_NONATOMIC, REDIS_ZSET_PUBLISH_FIRST};

use crate::canceller::{Canceller, Capabilities, Service, StrategyCounters};
use crate::crash::CrashPoint;
use crate::domain::{Micros, OrderId};
use crate::error::Result;
use crate::store::{OrderStore, StoreStats};
use crate::wake::DeadlineWaker;
use async_trait::async_trait;
use conn::{shard_of, Event, Persistence, Redis};
use scripts::Scripts;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long an order the database says is not due yet (clock skew between
/// instances) waits before it is claimed again.
const NOT_DUE_RETRY: Duration = Duration::from_millis(100);

/// The hash tag of shard `k`: `<prefix>:<k>` on a standalone Redis; on a
/// cluster, a tag whose slot lies in the `k`-th equal slice of the slot
/// space, so the shards spread over the masters (see
/// [`crate::redis_cluster::spread_tag`]).
fn shard_tag(prefix: &str, k: u32, shards: u32, cluster: bool) -> String {
    if cluster {
        crate::redis_cluster::spread_tag(prefix, k, shards)
    } else {
        format!("{prefix}:{k}")
    }
}

/// The Redis Cluster hash slot of each of the `shards` shards that a
/// redis-zset run on the namespace with `prefix` uses (its keys share the
/// shard's hash tag): which masters a fault on a node really touches.
pub fn cluster_shard_slots(prefix: &str, shards: u32) -> Vec<u16> {
    (0..shards)
        .map(|k| {
            crate::redis_cluster::key_slot(&format!("{{{}}}", shard_tag(prefix, k, shards, true)))
        })
        .collect()
}

/// The delay-set key of each of the `shards` shards a redis-zset run on
/// the namespace with `prefix` uses on a Redis Cluster, in shard order:
/// where a fault can find the shard of the next deadline.
pub fn cluster_delay_keys(prefix: &str, shards: u32) -> Vec<String> {
    (0..shards)
        .map(|k| delay_key_of(&shard_tag(prefix, k, shards, true)))
        .collect()
}

/// The delay set of the shard with hash tag `tag`.
fn delay_key_of(tag: &str) -> String {
    format!("dlb:{{{tag}}}:delay")
}

/// How due members are taken from the delay set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimMode {
    /// One Lua script moves them to processing (`redis-zset`).
    Atomic,
    /// ZRANGEBYSCORE, cancel, then ZREM (`redis-zset-nonatomic`, teaching).
    Nonatomic,
}

/// The keys of one shard, and where its loop hears of new deadlines.
#[derive(Debug)]
struct Shard {
    index: usize,
    delay: String,
    processing: String,
    dead: String,
    /// Deadlines that became the shard's earliest (wake messages, this
    /// process's schedules and requeues) wake its loop through it.
    waker: DeadlineWaker,
}

/// The redis-zset strategy (one instance), or its non-atomic teaching variant.
#[derive(Debug)]
pub struct RedisZset {
    store: OrderStore,
    config: RedisZsetConfig,
    mode: ClaimMode,
    redis: Redis,
    scripts: Scripts,
    shards: Vec<Shard>,
    wake_channel: String,
    /// Learnt in `setup`; `None` in an instance that did not run it.
    persistence: Mutex<Option<Persistence>>,
    counters: Counters,
}

crate::canceller::counters! {
    struct Counters {
        scheduled,
        duplicate_schedules,
        dropped_paid,
        claims,
        claimed,
        acks,
        requeued,
        reclaimed,
        wakeups,
        malformed,
        errors,
    }
}

impl RedisZset {
    pub fn new(store: OrderStore, config: &RedisZsetConfig, mode: ClaimMode) -> Result<Self> {
        let prefix = store.location().resource_prefix();
        let redis = Redis::new(&config.url)?;
        let shards = (0..config.shards())
            .map(|k| {
                let tag = shard_tag(&prefix, k, config.shards(), redis.is_cluster());
                Shard {
                    index: k as usize,
                    waker: DeadlineWaker::default(),
                    delay: delay_key_of(&tag),
                    processing: format!("dlb:{{{tag}}}:processing"),
                    dead: format!("dlb:{{{tag}}}:dead"),
                }
            })
            .collect();
        Ok(RedisZset {
            redis,
            store,
            config: config.clone(),
            mode,
            scripts: Scripts::new(),
            shards,
            wake_channel: format!("dlb:{{{prefix}}}:wake"),
            persistence: Mutex::new(None),
            counters: Counters::default(),
        })
    }

    /// The delay-set key of every shard, in shard order.
    pub fn delay_keys(&self) -> Vec<&str> {
        self.shards.iter().map(|s| s.delay.as_str()).collect()
    }

    /// The delay-set key of `order_id`'s shard (tests inspect Redis with it).
    pub fn delay_key(&self, order_id: OrderId) -> &str {
        &self.shards[shard_of(order_id, self.shards.len() as u32)].delay
    }

    /// The processing-set key of `order_id`'s shard.
    pub fn processing_key(&self, order_id: OrderId) -> &str {
        &self.shards[shard_of(order_id, self.shards.len() as u32)].processing
    }

    /// The dead-set key of `order_id`'s shard.
    pub fn dead_key(&self, order_id: OrderId) -> &str {
        &self.shards[shard_of(order_id, self.shards.len() as u32)].dead
    }

    /// Records that shard `index` holds a member due at `deadline_us`, and
    /// wakes its loop if that is before the end of its sleep.
    fn note_due(&self, index: usize, deadline_us: Micros) {
        match self.shards.get(index) {
            Some(shard) => shard.waker.wake_for(deadline_us),
            None => self.forget_next_due(),
        }
    }

    /// Makes every shard's loop look at its shard (wake messages may be lost).
    fn forget_next_due(&self) {
        for shard in &self.shards {
            shard.waker.look_now();
        }
    }

    fn count(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }
}

#[async_trait]
impl Canceller for RedisZset {
    fn name(&self) -> &str {
        match self.mode {
            ClaimMode::Atomic => "redis-zset",
            ClaimMode::Nonatomic => "redis-zset-nonatomic",
        }
    }

    fn capabilities(&self) -> Capabilities {
        let persistence = *self.persistence.lock().expect("persistence lock");
        let mut notes = vec![match persistence {
            Some(Persistence::AppendOnly) => {
                "Redis persists with appendonly: the schedule survives a Redis restart up to \
                 the fsync policy; fallback-scan covers the rest"
                    .to_string()
            }
            Some(Persistence::Snapshots) => {
                "Redis persists with RDB snapshots only: a Redis restart loses what was \
                 scheduled since the last snapshot; fallback-scan recovers it"
                    .to_string()
            }
            Some(Persistence::None) => {
                "Redis runs without persistence (appendonly no, save \"\"): a Redis restart \
                 loses the whole schedule; fallback-scan recovers it"
                    .to_string()
            }
            None => "Redis persistence not checked (setup did not run here): without \
                     persistence a Redis restart loses the schedule; fallback-scan recovers it"
                .to_string(),
        }];
        if self.redis.is_cluster() {
            notes.push(format!(
                "Redis Cluster: {} shards, each in one hash slot spread over the masters; a \
                 master that is down stops the claims and schedules of its shards (only \
                 theirs while the cluster serves partial coverage), and comes back with \
                 their sets empty without persistence",
                self.shards.len()
            ));
        }
        notes.push(format!(
            "an earlier deadline wakes sleeping workers by PUBLISH; a lost wake message costs \
             at most max-sleep ({:?}) of lateness",
            self.config.max_sleep
        ));
        match self.mode {
            ClaimMode::Atomic => notes.push(format!(
                "a claim whose worker died is reclaimed after the visibility timeout ({:?}, \
                 checked every {:?}), so such orders are late by up to their sum",
                self.config.visibility_timeout, self.config.reclaim_interval
            )),
            ClaimMode::Nonatomic => notes.push(
                "teaching variant: ZRANGEBYSCORE then ZREM without an atomic claim, so \
                 instances read the same due ids and each tries to cancel them; the \
                 conditional UPDATE keeps it correct and the extra attempts show as \
                 already_cancelled"
                    .into(),
            ),
        }
        Capabilities {
            durable_across_restart: persistence == Some(Persistence::AppendOnly),
            arbitrary_delay: true,
            needs_fallback: true,
            multi_instance_safe: true,
            instance_owns_its_orders: false,
            requires: vec![Service::Redis],
            notes,
        }
    }

    /// Checks that Redis answers and how it persists. Idempotent: the
    /// scripts are loaded on first use (and again after a restart).
    async fn setup(&self) -> Result<()> {
        self.redis.ping().await?;
        match self.redis.persistence().await {
            Ok(p) => *self.persistence.lock().expect("persistence lock") = Some(p),
            // CONFIG may be disabled (managed Redis): leave it unknown.
            Err(e) => tracing::warn!(error = %e, "cannot read Redis persistence settings"),
        }
        Ok(())
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        let shard = &self.shards[shard_of(order_id, self.shards.len() as u32)];
        let mut invocation = self.scripts.schedule.prepare_invoke();
        invocation
            .key(&shard.delay)
            .key(&shard.processing)
            .arg(expire_at_us)
            .arg(order_id)
            .arg(&self.wake_channel)
            .arg(shard.index);
        let result: i64 = self
            .redis
            .invoke(&invocation, "scheduling an order in Redis")
            .await?;
        Self::count(&self.counters.scheduled, 1);
        match result {
            0 => Self::count(&self.counters.duplicate_schedules, 1),
            // The new earliest of its shard: wake this process's worker
            // even if its subscriber is reconnecting.
            2 => self.note_due(shard.index, expire_at_us),
            _ => {}
        }
        Ok(())
    }

    /// ZREMs the paid order from its shard's delay set. A member already
    /// claimed (in the processing set) is left to its claimer, whose
    /// conditional UPDATE finds the order paid.
    async fn paid(&self, order_id: OrderId) -> Result<()> {
        let shard = &self.shards[shard_of(order_id, self.shards.len() as u32)];
        let removed: i64 = self
            .redis
            .query(
                redis::cmd("ZREM").arg(&shard.delay).arg(order_id),
                "dropping a paid order from its delay set",
            )
            .await?;
        Self::count(&self.counters.dropped_paid, removed.max(0) as usize);
        Ok(())
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        let on_event = |event: Event<'_>| match event {
            // Messages published while unsubscribed are lost: look again.
            Event::Subscribed => self.forget_next_due(),
            // `<shard> <deadline_us>`, published by the schedule script.
            Event::Message(payload) => match worker::parse_wake(payload) {
                Some((index, deadline)) => self.note_due(index, deadline),
                None => self.forget_next_due(),
            },
        };
        tokio::join!(
            self.redis.listen(
                &self.wake_channel,
                &shutdown,
                &self.counters.errors,
                on_event
            ),
            self.work(&shutdown),
        );
        Ok(())
    }

    /// Deletes the run's keys, shard by shard (one slot per DEL).
    async fn teardown(&self) -> Result<()> {
        for shard in &self.shards {
            let del = redis::cmd("DEL")
                .arg(&shard.delay)
                .arg(&shard.processing)
                .arg(&shard.dead)
                .clone();
            // DEL is idempotent; a connection broken by a Redis restart
            // fails once, then the connection manager reconnects.
            let mut attempt = 0;
            loop {
                match self
                    .redis
                    .query::<()>(&del, "deleting the run's Redis keys")
                    .await
                {
                    Ok(()) => break,
                    Err(e) if attempt == 2 => return Err(e),
                    Err(_) => {
                        attempt += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    }
                }
            }
        }
        Ok(())
    }

    fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn counters(&self) -> StrategyCounters {
        let mut counters = self.counters.snapshot();
        counters.insert("redis_commands".to_string(), self.redis.commands());
        counters
    }

    /// `redis-zset`: both, in `claim_and_cancel` (`worker.rs`):
    /// `after-claim` once the claim script moved members to processing,
    /// `after-commit-before-ack` once their cancels committed and before
    /// the ZREM from processing.
    ///
    /// `redis-zset-nonatomic`: only `after-commit-before-ack` (in
    /// `read_and_cancel`, before the ZREM from the delay set). Its
    /// ZRANGEBYSCORE takes nothing out of shared reach (the members stay in
    /// the delay set for every instance), so it has no `after-claim`.
    fn crash_points(&self) -> &'static [CrashPoint] {
        match self.mode {
            ClaimMode::Atomic => &[CrashPoint::AfterClaim, CrashPoint::AfterCommitBeforeAck],
            ClaimMode::Nonatomic => &[CrashPoint::AfterCommitBeforeAck],
        }
    }
}
