//! Every strategy by name: what it needs, whether it is built yet, and how
//! to construct it. The one place to look up a strategy.

use crate::canceller::{Canceller, Capabilities, Service, StrategyCounters};
use crate::ceiling::Ceiling;
use crate::db_scan::{DbScan, DbScanConfig, FallbackScanConfig};
use crate::db_timer::{DbTimer, DbTimerConfig};
use crate::domain::{Micros, OrderId};
use crate::error::{Error, Result};
use crate::rabbit::{Mode as RabbitMode, RabbitConfig, RabbitStrategy};
use crate::redis_zset::teaching::RedisKeyspaceExpiry;
use crate::redis_zset::{ClaimMode, RedisZset, RedisZsetConfig};
use crate::store::{AntiPattern, OrderStore, StoreStats};
use crate::timing_wheel::{TimingWheelConfig, TimingWheelStrategy};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// A strategy the registry knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrategyInfo {
    pub name: &'static str,
    /// One line for `--help` and reports.
    pub summary: &'static str,
    /// Services needed besides the order database.
    pub requires: &'static [Service],
    /// What the entry is for; only [`Role::Strategy`] runs by default.
    pub role: Role,
    /// What choosing it means beyond the measured numbers, for decision
    /// records (`delaybench adr`): each a "Good, because ..." clause. The
    /// services it needs are said apart, from `requires`.
    pub good: &'static [&'static str],
    /// Each a "Bad, because ..." clause.
    pub bad: &'static [&'static str],
}

/// What a registry entry is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A way to build a shop: runs by default, and its anomalies fail a run.
    Strategy,
    /// A known mistake reproduced on purpose: off by default (run only when
    /// named in `--strategies`), expected to show damage.
    Teaching,
    /// A yardstick for the others (`ceiling`): off by default in `run`,
    /// run first by `sweep`; its anomalies fail a run like a strategy's.
    Baseline,
}

impl StrategyInfo {
    /// A teaching variant (see [`Role::Teaching`]).
    pub fn is_teaching(&self) -> bool {
        self.role == Role::Teaching
    }
}

/// All strategies, in report order.
pub const STRATEGIES: &[StrategyInfo] = &[
    StrategyInfo {
        name: "db-scan",
        summary: "periodic indexed SELECT of due PENDING orders, batch after batch",
        requires: &[],
        role: Role::Strategy,
        good: &[
            "it needs nothing but the database: the orders table and its index are the schedule, so no process death, broker or cache can lose a deadline",
            "any number of instances share the work (`FOR UPDATE SKIP LOCKED`, or one leader by lock where the database has none) and its cost per cancel does not grow with the pending orders held",
        ],
        bad: &[
            "every order is late by up to the scan interval plus a batch's time: the interval trades lateness for database load",
            "it reads the database every interval, also when nothing is due",
        ],
    },
    StrategyInfo {
        name: "db-scan-noindex",
        summary: "TEACHING: db-scan without the index its query needs (every scan reads the \
                  whole orders table; cost grows with the backlog)",
        requires: &[],
        role: Role::Teaching,
        good: &[],
        bad: &[],
    },
    StrategyInfo {
        name: "db-timer",
        summary: "the database alone: the leading instance sleeps until the earliest PENDING \
                  deadline, woken by LISTEN/NOTIFY on PostgreSQL (adaptive polling elsewhere), \
                  the others stand by",
        requires: &[],
        role: Role::Strategy,
        good: &[
            "it needs nothing but the database, and the orders table is the schedule: no process death can lose a deadline",
            "it cancels at the deadline rather than at the next scan: the leader sleeps until the earliest PENDING deadline",
        ],
        bad: &[
            "one leader (an advisory lock) cancels while the others stand by, so one instance and one transaction per deadline bound its rate",
            "LISTEN/NOTIFY wakes it only on PostgreSQL: elsewhere it polls, and an order due before the next wake is up to poll-max-sleep late",
            "a paused or stuck leader keeps its lead: its orders wait for the standby's claim of overdue orders (up to about twice poll-max-sleep)",
            "the creating transaction sends one NOTIFY per order",
        ],
    },
    StrategyInfo {
        name: "timing-wheel",
        summary: "in-process hierarchical timing wheel, reloads PENDING orders on start",
        requires: &[],
        role: Role::Strategy,
        good: &[
            "it needs nothing but the database, and timers in process are cheap per order",
            "a starting instance reloads every PENDING order from the database",
        ],
        bad: &[
            "the schedule lives in the process: a dead instance's orders wait until an instance starts again, so it needs `+fallback` for a guarantee",
            "each instance owns the orders it was given and holds them in memory: memory grows with the pending orders",
            "deadlines are rounded up to the tick, so lateness includes up to one tick",
        ],
    },
    StrategyInfo {
        name: "timing-wheel-unconditional",
        summary: "TEACHING: the wheel cancelling with an unconditional UPDATE (paid orders \
                  cancelled, stock released on every firing)",
        requires: &[],
        role: Role::Teaching,
        good: &[],
        bad: &[],
    },
    StrategyInfo {
        name: "timing-wheel-release-first",
        summary: "TEACHING: the wheel releasing stock before the conditional UPDATE (a paid \
                  order's stock released anyway)",
        requires: &[],
        role: Role::Teaching,
        good: &[],
        bad: &[],
    },
    StrategyInfo {
        name: "rabbit-ttl",
        summary: "RabbitMQ wait queue per timeout with TTL + dead-letter exchange",
        requires: &[Service::RabbitMq],
        role: Role::Strategy,
        good: &[
            "the broker delivers each order at its timeout, and consumers scale out with manual acks and bounded prefetch",
        ],
        bad: &[
            "one wait queue per distinct timeout: a delay between the declared TTLs waits for the next longer one",
            "classic-queue dead-lettering is at-most-once, and a node's loss loses its classic queues' messages: quorum queues or `+fallback` are needed",
            "the schedule is published after the order commits: a crash or broker outage in between loses it without `+outbox` or `+fallback`",
        ],
    },
    StrategyInfo {
        name: "rabbit-delayed",
        summary: "RabbitMQ x-delayed-message exchange with a per-message x-delay",
        requires: &[Service::RabbitMq],
        role: Role::Strategy,
        good: &[
            "any per-order delay, without declaring the timeouts up front",
        ],
        bad: &[
            "the broker needs a delayed-message exchange plugin (x-delayed-message), which RabbitMQ does not ship",
            "delayed messages wait in one node's own store, neither replicated nor fsynced per write: losing that node loses them without `+fallback`",
            "the schedule is published after the order commits: a crash or broker outage in between loses it without `+outbox` or `+fallback`",
        ],
    },
    StrategyInfo {
        name: "rabbit-ttl-single-queue",
        summary: "TEACHING: per-message expiration on one queue (head-of-line blocking)",
        requires: &[Service::RabbitMq],
        role: Role::Teaching,
        good: &[],
        bad: &[],
    },
    StrategyInfo {
        name: "redis-zset",
        summary: "Redis ZSET scored by deadline, atomic Lua claim, visibility timeout",
        requires: &[Service::Redis],
        role: Role::Strategy,
        good: &[
            "any per-order delay; an atomic Lua claim with a visibility timeout, so instances share the work and a dead claimer's orders come back",
            "shards with hash tags, so it runs on Redis Cluster",
        ],
        bad: &[
            "without append-only persistence a Redis restart loses the whole schedule; with it, what the fsync policy had not yet written",
            "a Redis Cluster master that is down stops its shards' claims and schedules until it is back",
            "the schedule is written after the order commits: a crash or Redis outage in between loses it without `+outbox` or `+fallback`",
        ],
    },
    StrategyInfo {
        name: "redis-keyspace-expiry",
        summary: "TEACHING: a key per order with PX + keyspace `expired` events (lost when \
                  nobody listens, late by expiry sampling)",
        requires: &[Service::Redis],
        role: Role::Teaching,
        good: &[],
        bad: &[],
    },
    StrategyInfo {
        name: "redis-zset-nonatomic",
        summary: "TEACHING: ZRANGEBYSCORE then ZREM without an atomic claim (instances \
                  cancel the same ids; duplicates absorbed)",
        requires: &[Service::Redis],
        role: Role::Teaching,
        good: &[],
        bad: &[],
    },
    StrategyInfo {
        name: "redis-zset-publish-first",
        summary: "TEACHING: redis-zset scheduled before the order's transaction commits (a \
                  rolled-back checkout leaves a phantom schedule; the outbox is the fix)",
        requires: &[Service::Redis],
        role: Role::Teaching,
        good: &[],
        bad: &[],
    },
    StrategyInfo {
        name: "ceiling",
        summary: "BASELINE: each order cancelled at its exact deadline from an in-process \
                  list, no delay mechanism: what the database and harness allow",
        requires: &[],
        role: Role::Baseline,
        good: &[],
        bad: &[],
    },
];

/// Looks a strategy up, by its name or a [`Variant`]'s (`redis-zset+fallback`
/// gives `redis-zset`'s entry); the error lists the known names.
pub fn info(name: &str) -> Result<&'static StrategyInfo> {
    Ok(Variant::parse(name)?.info)
}

fn entry(name: &str) -> Result<&'static StrategyInfo> {
    STRATEGIES
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Error::UnknownStrategy {
            name: name.to_string(),
            known: format!(
                "{}; add +outbox and/or +fallback for the remedies, e.g. redis-zset+outbox+fallback",
                STRATEGIES
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// A strategy as `--strategies` names it: a registry entry plus the
/// remedies the seeds prescribe, so one run compares `redis-zset`,
/// `redis-zset+fallback`, `redis-zset+outbox` and `redis-zset+outbox+fallback`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub info: &'static StrategyInfo,
    /// `+outbox`: the creating transaction writes the schedule request to
    /// the outbox table and each instance relays it ([`crate::outbox`]),
    /// instead of the order service calling `schedule` after its commit.
    /// Only for strategies whose schedule leaves the database.
    pub outbox: bool,
    /// `+fallback`: a slow db-scan runs beside the strategy in each
    /// instance (`[strategies.fallback-scan]` sets its pace). Not for the
    /// db-scans, which are their own fallback.
    pub fallback: bool,
}

impl Variant {
    /// Parses `base[+outbox][+fallback]` (suffixes in either order).
    pub fn parse(name: &str) -> Result<Variant> {
        let mut parts = name.split('+').map(str::trim);
        let base = parts.next().unwrap_or_default();
        let info = entry(base)?;
        let mut variant = Variant {
            info,
            outbox: false,
            fallback: false,
        };
        for suffix in parts {
            match suffix {
                "outbox" if !variant.outbox => variant.outbox = true,
                "fallback" if !variant.fallback => variant.fallback = true,
                _ => {
                    return Err(Error::Config(format!(
                        "strategy `{name}`: unknown or repeated suffix `+{suffix}`; accepted: \
                         +outbox, +fallback (e.g. {base}+outbox+fallback)"
                    )))
                }
            }
        }
        if variant.outbox && info.requires.is_empty() {
            return Err(Error::Config(format!(
                "strategy `{name}`: +outbox applies to strategies that schedule in a broker or \
                 Redis (rabbit-ttl, rabbit-delayed, redis-zset, ...); `{base}` keeps its \
                 schedule in the database or in process"
            )));
        }
        if variant.outbox && base == "redis-zset-publish-first" {
            return Err(Error::Config(format!(
                "strategy `{name}`: the publish-first teaching variant schedules inside the \
                 creating transaction, which is what +outbox replaces; run redis-zset+outbox"
            )));
        }
        if variant.fallback && reads_the_orders_table(base) {
            return Err(Error::Config(format!(
                "strategy `{name}`: +fallback adds a db-scan beside the strategy; `{base}` \
                 reads the orders table itself and needs none"
            )));
        }
        Ok(variant)
    }

    /// The canonical name: `base`, then `+outbox`, then `+fallback`.
    pub fn name(&self) -> String {
        let mut name = self.info.name.to_string();
        if self.outbox {
            name += "+outbox";
        }
        if self.fallback {
            name += "+fallback";
        }
        name
    }

    /// Whether a remedy was added.
    pub fn is_remedied(&self) -> bool {
        self.outbox || self.fallback
    }

    /// The remedies added, in name order (`+outbox`, then `+fallback`).
    pub fn remedies(&self) -> Vec<&'static Remedy> {
        let mut remedies = Vec::new();
        if self.outbox {
            remedies.push(&OUTBOX);
        }
        if self.fallback {
            remedies.push(&FALLBACK);
        }
        remedies
    }
}

/// A remedy a [`Variant`] adds, and what it means beyond the numbers, for
/// decision records: only what it adds to its strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remedy {
    /// `+outbox`, `+fallback`.
    pub suffix: &'static str,
    /// One line, after the strategy's own.
    pub summary: &'static str,
    /// Each a "Good, because ..." clause.
    pub good: &'static [&'static str],
    /// Each a "Bad, because ..." clause.
    pub bad: &'static [&'static str],
}

/// `+outbox`.
pub const OUTBOX: Remedy = Remedy {
    suffix: "+outbox",
    summary: "an outbox table that the creating transaction writes the schedule request to, and a relay in each instance that sends it on",
    good: &[
        "no schedule is lost between the order's commit and the broker or Redis: the request commits with the order and is relayed until it goes through, across outages and crashes",
    ],
    bad: &[
        "an outbox table and a relay in every instance: more database statements per order",
        "while the broker or Redis is away the schedules wait in the outbox, so their orders are late by the outage",
        "it does not bring back what the broker or Redis lost after accepting it (a node or a restart without persistence): that needs `+fallback`",
    ],
};

/// `+fallback`.
pub const FALLBACK: Remedy = Remedy {
    suffix: "+fallback",
    summary: "a slow db-scan beside it in every instance",
    good: &[
        "whatever the strategy loses (a process death, a lost message, a node or a cache emptied) is still cancelled, by the slow scan",
    ],
    bad: &[
        "orders it lost are late by up to the fallback's interval plus its grace",
        "the database is scanned every fallback interval, also when nothing was lost",
    ],
};

/// `[strategies]` in a scenario file: every strategy's options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct StrategyOptions {
    pub db_scan: DbScanConfig,
    pub db_timer: DbTimerConfig,
    pub timing_wheel: TimingWheelConfig,
    /// Shared by `rabbit-ttl`, `rabbit-delayed` and `rabbit-ttl-single-queue`.
    pub rabbit: RabbitConfig,
    /// Shared by `redis-zset`, `redis-zset-nonatomic` and `redis-keyspace-expiry`.
    pub redis_zset: RedisZsetConfig,
    pub fallback_scan: FallbackScanConfig,
}

impl StrategyOptions {
    /// Checks every option's range; messages name the field.
    pub fn validate(&self) -> Result<()> {
        self.db_scan.validate("strategies.db-scan")?;
        self.db_timer.validate("strategies.db-timer")?;
        self.timing_wheel.validate("strategies.timing-wheel")?;
        self.rabbit.validate("strategies.rabbit")?;
        self.redis_zset.validate("strategies.redis-zset")?;
        let f = &self.fallback_scan;
        DbScanConfig {
            interval: f.interval,
            batch_size: f.batch_size,
            ..DbScanConfig::default()
        }
        .validate("strategies.fallback-scan")
    }
}

/// Builds one instance of strategy `name` on `store` (each instance gets its
/// own store, so its counters are its own). With `fallback-scan` enabled the
/// strategy is wrapped so a slow db-scan runs beside it.
pub fn build(
    name: &str,
    options: &StrategyOptions,
    store: OrderStore,
) -> Result<Box<dyn Canceller>> {
    let variant = Variant::parse(name)?;
    let strategy: Box<dyn Canceller> = match variant.info.name {
        "db-scan" => Box::new(DbScan::new(store.clone(), &options.db_scan)),
        "db-scan-noindex" => Box::new(DbScan::without_index(store.clone(), &options.db_scan)),
        "db-timer" => Box::new(DbTimer::new(store.clone(), &options.db_timer)),
        "timing-wheel" => Box::new(TimingWheelStrategy::new(
            store.clone(),
            &options.timing_wheel,
        )),
        "timing-wheel-unconditional" => Box::new(TimingWheelStrategy::teaching(
            store.clone(),
            &options.timing_wheel,
            "timing-wheel-unconditional",
            AntiPattern::UnconditionalUpdate,
        )),
        "timing-wheel-release-first" => Box::new(TimingWheelStrategy::teaching(
            store.clone(),
            &options.timing_wheel,
            "timing-wheel-release-first",
            AntiPattern::ReleaseBeforeUpdate,
        )),
        "rabbit-ttl" => Box::new(RabbitStrategy::new(
            RabbitMode::Ttl,
            store.clone(),
            &options.rabbit,
        )?),
        "rabbit-delayed" => Box::new(RabbitStrategy::new(
            RabbitMode::Delayed,
            store.clone(),
            &options.rabbit,
        )?),
        "rabbit-ttl-single-queue" => Box::new(RabbitStrategy::new(
            RabbitMode::SingleQueue,
            store.clone(),
            &options.rabbit,
        )?),
        "redis-zset" => Box::new(RedisZset::new(
            store.clone(),
            &options.redis_zset,
            ClaimMode::Atomic,
        )?),
        "redis-zset-nonatomic" => Box::new(RedisZset::new(
            store.clone(),
            &options.redis_zset,
            ClaimMode::Nonatomic,
        )?),
        "redis-zset-publish-first" => Box::new(PublishFirst(Box::new(RedisZset::new(
            store.clone(),
            &options.redis_zset,
            ClaimMode::Atomic,
        )?))),
        "ceiling" => Box::new(Ceiling::new(store.clone())),
        "redis-keyspace-expiry" => Box::new(RedisKeyspaceExpiry::new(
            store.clone(),
            &options.redis_zset,
        )?),
        other => unreachable!("registry entry `{other}` is available but has no constructor"),
    };
    // A fallback db-scan beside db-scan itself would only add load.
    let fallback = variant.fallback
        || (options.fallback_scan.enabled && !reads_the_orders_table(variant.info.name));
    if fallback {
        return Ok(Box::new(WithFallback {
            fallback: DbScan::fallback(store, &options.fallback_scan),
            strategy,
        }));
    }
    Ok(strategy)
}

/// Whether strategy `base` finds due orders by reading the orders table
/// itself (db-scan, its variants, db-timer): a fallback scan beside it
/// would only repeat its work.
fn reads_the_orders_table(base: &str) -> bool {
    base.starts_with("db-scan") || base == "db-timer"
}

/// The order service's store for strategy `name`: for `db-timer` its
/// creating transactions also send the deadline by `NOTIFY` (PostgreSQL),
/// which wakes the instances; every other strategy gets `store` as is.
pub fn order_service_store(name: &str, store: OrderStore) -> OrderStore {
    match Variant::parse(name) {
        Ok(v) if v.info.name == "db-timer" => store.with_deadline_notify(),
        _ => store,
    }
}

/// Whether the order service schedules `name`'s orders *before* their
/// creating transaction commits (the `-publish-first` teaching variant);
/// every other strategy is scheduled after the commit, or by the outbox.
pub fn publishes_before_commit(name: &str) -> bool {
    Variant::parse(name).is_ok_and(|v| v.info.name == "redis-zset-publish-first")
}

/// `redis-zset-publish-first`: redis-zset itself, correct in every step of
/// its own; the mistake is the order service's, which calls `schedule`
/// inside the creating transaction ([`publishes_before_commit`]). A
/// checkout that then fails rolls the order back, and its schedule stays:
/// a phantom, which fires at the deadline on an order that never existed
/// (counted as `missing` attempts, reported as phantom schedules).
#[derive(Debug)]
struct PublishFirst(Box<dyn Canceller>);

#[async_trait]
impl Canceller for PublishFirst {
    fn name(&self) -> &str {
        "redis-zset-publish-first"
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = self.0.capabilities();
        caps.notes.push(
            "TEACHING VARIANT: scheduled before the order's transaction commits; a rolled-back \
             checkout leaves a phantom schedule behind (run with `checkout-abort-ratio` > 0)"
                .into(),
        );
        caps
    }

    async fn setup(&self) -> Result<()> {
        self.0.setup().await
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        self.0.schedule(order_id, expire_at_us).await
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        self.0.run(shutdown).await
    }

    async fn teardown(&self) -> Result<()> {
        self.0.teardown().await
    }

    fn crash_points(&self) -> &'static [crate::crash::CrashPoint] {
        self.0.crash_points()
    }

    fn role(&self) -> crate::canceller::InstanceRole {
        self.0.role()
    }

    fn store_stats(&self) -> StoreStats {
        self.0.store_stats()
    }

    fn counters(&self) -> StrategyCounters {
        self.0.counters()
    }
}

/// A strategy with a `fallback-scan` running beside it in the same instance.
#[derive(Debug)]
struct WithFallback {
    strategy: Box<dyn Canceller>,
    fallback: DbScan,
}

#[async_trait]
impl Canceller for WithFallback {
    fn name(&self) -> &str {
        self.strategy.name()
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = self.strategy.capabilities();
        caps.notes
            .push("runs with fallback-scan: lost work is cancelled by the slow scan".into());
        caps
    }

    async fn setup(&self) -> Result<()> {
        self.strategy.setup().await
    }

    fn crash_points(&self) -> &'static [crate::crash::CrashPoint] {
        self.strategy.crash_points()
    }

    /// The strategy's role; the fallback scan runs in every instance alike.
    fn role(&self) -> crate::canceller::InstanceRole {
        self.strategy.role()
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        self.strategy.schedule(order_id, expire_at_us).await
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        let (a, b) = tokio::join!(
            self.strategy.run(shutdown.clone()),
            self.fallback.run(shutdown)
        );
        a.and(b)
    }

    async fn teardown(&self) -> Result<()> {
        self.strategy.teardown().await
    }

    /// Both paths share one store, so its counters already hold both.
    fn store_stats(&self) -> StoreStats {
        self.strategy.store_stats()
    }

    fn counters(&self) -> StrategyCounters {
        let mut counters = self.strategy.counters();
        for (k, v) in self.fallback.counters() {
            counters.insert(format!("fallback_{k}"), v);
        }
        counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_to_their_canonical_name() {
        let v = Variant::parse("redis-zset+fallback+outbox").unwrap();
        assert_eq!(
            (v.info.name, v.outbox, v.fallback),
            ("redis-zset", true, true)
        );
        assert_eq!(v.name(), "redis-zset+outbox+fallback");
        assert_eq!(Variant::parse("db-scan").unwrap().name(), "db-scan");
        for bad in [
            "db-scan+fallback",
            "db-timer+fallback",
            "db-timer+outbox",
            "timing-wheel+outbox",
            "redis-zset+outbox+outbox",
            "redis-zset+retry",
            "redis-zset-publish-first+outbox",
        ] {
            let msg = Variant::parse(bad).unwrap_err().to_string();
            assert!(msg.contains(bad), "{msg}");
        }
        assert!(Variant::parse("timing-wheel+fallback").unwrap().fallback);
        let suffixes: Vec<&str> = Variant::parse("redis-zset+fallback+outbox")
            .unwrap()
            .remedies()
            .iter()
            .map(|r| r.suffix)
            .collect();
        assert_eq!(suffixes, ["+outbox", "+fallback"]);
    }

    #[test]
    fn every_strategy_says_what_choosing_it_means() {
        for s in STRATEGIES.iter().filter(|s| s.role == Role::Strategy) {
            assert!(!s.good.is_empty() && !s.bad.is_empty(), "{}", s.name);
        }
    }

    #[test]
    fn unknown_strategy_lists_known_ones() {
        let msg = info("db-scna").unwrap_err().to_string();
        for s in STRATEGIES {
            assert!(msg.contains(s.name), "{msg}");
        }
    }
}
