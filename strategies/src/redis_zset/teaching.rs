//! `redis-keyspace-expiry`, a teaching variant (off by default): one key per
//! order, `SET dlb:{<prefix>}:expire:<id> "" PX <ms until deadline>`, and a
//! subscriber on `__keyevent@<db>__:expired` that cancels the order when
//! Redis reports the key expired.
//!
//! Its damage, which the checker shows:
//! - pub/sub is fire-and-forget: an expiry while no subscriber listens (every
//!   instance down, or reconnecting) is never delivered, so the order stays
//!   PENDING until a fallback-scan finds it;
//! - Redis expires keys lazily (on access) or by sampling (the active expire
//!   cycle runs `hz` times a second on a sample of keys), so events come late,
//!   later the more keys wait;
//! - it needs the server-wide `notify-keyspace-events` to include `Ex`:
//!   `setup` sets it and `teardown` restores what was there before.

use super::conn::{Event, Redis, MIN_BACKOFF};
use super::RedisZsetConfig;
use crate::canceller::{Canceller, Capabilities, Service, StrategyCounters};
use crate::crash::{self, CrashPoint};
use crate::domain::{now_us, CancelOutcome, Micros, OrderId};
use crate::error::Result;
use crate::store::{OrderStore, StoreStats};
use async_trait::async_trait;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const NAME: &str = "redis-keyspace-expiry";

/// The keyspace-notification teaching variant (one instance).
#[derive(Debug)]
pub struct RedisKeyspaceExpiry {
    store: OrderStore,
    redis: Redis,
    /// `dlb:{<prefix>}:expire:`; the order id follows.
    key_prefix: String,
    /// `__keyevent@<db>__:expired`.
    channel: String,
    /// `notify-keyspace-events` before this instance's `setup` changed it.
    previous_events: Mutex<Option<String>>,
    counters: Counters,
}

crate::canceller::counters! {
    struct Counters {
        scheduled,
        expired_events,
        malformed,
        errors,
    }
}

impl RedisKeyspaceExpiry {
    pub fn new(store: OrderStore, config: &RedisZsetConfig) -> Result<Self> {
        if crate::redis_cluster::is_cluster(&config.url) {
            // Keyspace events are published only on the node whose key
            // expired, and a subscriber hears its own node only.
            return Err(crate::Error::Config(format!(
                "strategies.redis-zset.url = `{}` is a Redis Cluster; {NAME} cannot run on one: \
                 keyspace `expired` events stay on the node holding the key, so one subscriber \
                 misses the other masters' expiries. Run it on a standalone Redis (redis://...)",
                crate::redact::url(&config.url)
            )));
        }
        let redis = Redis::new(&config.url)?;
        Ok(RedisKeyspaceExpiry {
            key_prefix: format!("dlb:{{{}}}:expire:", store.location().resource_prefix()),
            channel: format!("__keyevent@{}__:expired", redis.db()),
            redis,
            store,
            previous_events: Mutex::new(None),
            counters: Counters::default(),
        })
    }

    /// The key that stands for `order_id` until its deadline.
    pub fn expire_key(&self, order_id: OrderId) -> String {
        format!("{}{order_id}", self.key_prefix)
    }

    /// `SET key "" PX ms`, the milliseconds rounded up so the key never
    /// expires before the deadline.
    async fn set_expiring(&self, order_id: OrderId, at_us: Micros) -> Result<()> {
        let ms = ((at_us - now_us()).max(1) as u64).div_ceil(1000);
        self.redis
            .query::<()>(
                redis::cmd("SET")
                    .arg(self.expire_key(order_id))
                    .arg("")
                    .arg("PX")
                    .arg(ms),
                "setting an expiring key in Redis",
            )
            .await
    }

    /// Cancels the orders whose key expired, as the events come.
    async fn consume(
        &self,
        mut expired: mpsc::UnboundedReceiver<OrderId>,
        shutdown: &CancellationToken,
    ) {
        loop {
            let id = tokio::select! {
                _ = shutdown.cancelled() => return,
                id = expired.recv() => match id {
                    Some(id) => id,
                    None => return,
                },
            };
            // The key is gone from Redis; this event is all that is left of it here.
            crash::reached(CrashPoint::AfterClaim);
            let retry_at = match self.store.cancel_if_due(id, NAME).await {
                Ok(CancelOutcome::NotDue) => now_us() + MIN_BACKOFF.as_micros() as i64,
                Ok(_) => continue,
                Err(e) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(order_id = id, error = %e, "cancel failed; retrying by a new key");
                    now_us() + MIN_BACKOFF.as_micros() as i64
                }
            };
            // Not due yet, or the cancel failed: a new key brings it back.
            if let Err(e) = self.set_expiring(id, retry_at).await {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(order_id = id, error = %e, "re-arming failed; the order is lost");
            }
        }
    }
}

/// `flags` with `E` (keyevent channels) and `x` (expired events) added,
/// or `None` when they are already on (`A` stands for every class).
fn with_expired_events(flags: &str) -> Option<String> {
    let expired = flags.contains('x') || flags.contains('A');
    if flags.contains('E') && expired {
        return None;
    }
    let mut out = flags.to_string();
    if !flags.contains('E') {
        out.push('E');
    }
    if !expired {
        out.push('x');
    }
    Some(out)
}

#[async_trait]
impl Canceller for RedisKeyspaceExpiry {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            durable_across_restart: false,
            arbitrary_delay: true,
            needs_fallback: true,
            multi_instance_safe: true,
            instance_owns_its_orders: false,
            requires: vec![Service::Redis],
            notes: vec![
                "teaching variant: keyspace notifications are fire-and-forget pub/sub, so a key \
                 that expires while no subscriber listens loses its cancel (the order stays \
                 PENDING until fallback-scan)"
                    .into(),
                "late by design: Redis expires keys lazily or by sampling (hz times a second), \
                 not at their deadline"
                    .into(),
                "every instance receives every event, so with several instances each order \
                 gets several cancel attempts (absorbed by the conditional UPDATE)"
                    .into(),
                "sets the server-wide notify-keyspace-events to include Ex in setup and \
                 restores it in teardown"
                    .into(),
            ],
        }
    }

    async fn setup(&self) -> Result<()> {
        self.redis.ping().await?;
        let current = self
            .redis
            .config_get("notify-keyspace-events")
            .await?
            .unwrap_or_default();
        if let Some(wanted) = with_expired_events(&current) {
            self.redis
                .config_set("notify-keyspace-events", &wanted)
                .await?;
        }
        let mut previous = self.previous_events.lock().expect("lock");
        if previous.is_none() {
            *previous = Some(current);
        }
        Ok(())
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        self.counters.scheduled.fetch_add(1, Ordering::Relaxed);
        self.set_expiring(order_id, expire_at_us).await
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        let (tx, rx) = mpsc::unbounded_channel();
        let on_event = |event: Event<'_>| {
            let Event::Message(key) = event else { return };
            let Some(rest) = key.strip_prefix(&self.key_prefix) else {
                return; // another run's key
            };
            self.counters.expired_events.fetch_add(1, Ordering::Relaxed);
            match rest.parse::<OrderId>() {
                Ok(id) => {
                    let _ = tx.send(id);
                }
                Err(_) => {
                    self.counters.malformed.fetch_add(1, Ordering::Relaxed);
                }
            }
        };
        tokio::join!(
            self.redis
                .listen(&self.channel, &shutdown, &self.counters.errors, on_event),
            self.consume(rx, &shutdown),
        );
        Ok(())
    }

    /// Deletes the run's keys and restores `notify-keyspace-events`.
    async fn teardown(&self) -> Result<()> {
        let pattern = format!("{}*", self.key_prefix);
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = self
                .redis
                .query(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000),
                    "finding the run's Redis keys",
                )
                .await?;
            if !keys.is_empty() {
                self.redis
                    .query::<()>(
                        redis::cmd("DEL").arg(&keys),
                        "deleting the run's Redis keys",
                    )
                    .await?;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        let previous = self.previous_events.lock().expect("lock").take();
        if let Some(previous) = previous {
            self.redis
                .config_set("notify-keyspace-events", &previous)
                .await?;
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

    /// `after-claim`, in `consume`: the expired event was received (Redis
    /// already deleted the key) and the cancel has not run. Every instance
    /// receives its own copy of the event, so such a crash loses the cancel
    /// only where no other instance listens. Nothing is acked, so no
    /// `after-commit-before-ack`.
    fn crash_points(&self) -> &'static [CrashPoint] {
        &[CrashPoint::AfterClaim]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn expired_event_flags() {
        use super::with_expired_events as w;
        assert_eq!(w("").as_deref(), Some("Ex"));
        assert_eq!(w("K$").as_deref(), Some("K$Ex"));
        assert_eq!(w("Ex"), None);
        assert_eq!(w("AKE"), None);
        assert_eq!(w("Kx").as_deref(), Some("KxE"));
    }
}
