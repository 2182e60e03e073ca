//! The registry's one table: every strategy's [`StrategyInfo`] beside its
//! constructor, one line each, in report order. Adding a strategy is its
//! module (its info, config and constructor) plus one line here (and its
//! options section in [`StrategyOptions`], if it has one).

use super::options::StrategyOptions;
use crate::canceller::Canceller;
use crate::ceiling::{self, Ceiling};
use crate::db_scan::{self, DbScan};
use crate::db_timer::{self, DbTimer};
use crate::error::Result;
use crate::rabbit::{self, Mode as Rabbit, RabbitStrategy};
use crate::redis_zset::teaching::RedisKeyspaceExpiry;
use crate::redis_zset::{self, ClaimMode, RedisZset};
use crate::remedy::PublishFirst;
use crate::store::{AntiPattern, OrderStore};
use crate::strategy_info::StrategyInfo;
use crate::timing_wheel::{self, TimingWheelStrategy as Wheel};

/// Builds one instance of a strategy on a store of its own (so its
/// counters are its own), from the scenario's `[strategies]` options.
pub type Build = fn(&StrategyOptions, OrderStore) -> Result<Box<dyn Canceller>>;

/// A strategy in the registry: what it is, and how to build it.
#[derive(Clone, Copy)]
pub struct Entry {
    info: &'static StrategyInfo,
    build: Build,
}

impl Entry {
    const fn new(info: &'static StrategyInfo, build: Build) -> Entry {
        Entry { info, build }
    }

    pub fn info(&self) -> &'static StrategyInfo {
        self.info
    }

    /// One instance of the strategy itself, without its remedies.
    pub(super) fn build(
        &self,
        options: &StrategyOptions,
        store: OrderStore,
    ) -> Result<Box<dyn Canceller>> {
        (self.build)(options, store)
    }
}

/// An entry reads as its info (`entry.name`, `entry.requires`): the
/// constructor beside it is the registry's business.
impl std::ops::Deref for Entry {
    type Target = StrategyInfo;

    fn deref(&self) -> &StrategyInfo {
        self.info
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Entry").field(&self.info.name).finish()
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.info == other.info
    }
}

impl Eq for Entry {}

/// Every strategy, in report order.
#[rustfmt::skip]
pub const STRATEGIES: &[Entry] = &[
    Entry::new(&db_scan::DB_SCAN, |o, s| Ok(Box::new(DbScan::new(s, &o.db_scan)))),
    Entry::new(&db_scan::DB_SCAN_NOINDEX, |o, s| Ok(Box::new(DbScan::without_index(s, &o.db_scan)))),
    Entry::new(&db_timer::DB_TIMER, |o, s| Ok(Box::new(DbTimer::new(s, &o.db_timer)))),
    Entry::new(&timing_wheel::TIMING_WHEEL, |o, s| Ok(Box::new(Wheel::new(s, &o.timing_wheel)))),
    Entry::new(&timing_wheel::TIMING_WHEEL_UNCONDITIONAL, |o, s| Ok(Box::new(Wheel::teaching(s, &o.timing_wheel, timing_wheel::TIMING_WHEEL_UNCONDITIONAL.name, AntiPattern::UnconditionalUpdate)))),
    Entry::new(&timing_wheel::TIMING_WHEEL_RELEASE_FIRST, |o, s| Ok(Box::new(Wheel::teaching(s, &o.timing_wheel, timing_wheel::TIMING_WHEEL_RELEASE_FIRST.name, AntiPattern::ReleaseBeforeUpdate)))),
    Entry::new(&rabbit::RABBIT_TTL, |o, s| Ok(Box::new(RabbitStrategy::new(Rabbit::Ttl, s, &o.rabbit)?))),
    Entry::new(&rabbit::RABBIT_DELAYED, |o, s| Ok(Box::new(RabbitStrategy::new(Rabbit::Delayed, s, &o.rabbit)?))),
    Entry::new(&rabbit::RABBIT_TTL_PER_DELIVERY, |o, s| Ok(Box::new(RabbitStrategy::new(Rabbit::Ttl, s, &o.rabbit)?.per_delivery(rabbit::RABBIT_TTL_PER_DELIVERY.name)))),
    Entry::new(&rabbit::RABBIT_TTL_SINGLE_QUEUE, |o, s| Ok(Box::new(RabbitStrategy::new(Rabbit::SingleQueue, s, &o.rabbit)?))),
    Entry::new(&redis_zset::REDIS_ZSET, |o, s| Ok(Box::new(RedisZset::new(s, &o.redis_zset, ClaimMode::Atomic)?))),
    Entry::new(&redis_zset::REDIS_KEYSPACE_EXPIRY, |o, s| Ok(Box::new(RedisKeyspaceExpiry::new(s, &o.redis_zset)?))),
    Entry::new(&redis_zset::REDIS_ZSET_NONATOMIC, |o, s| Ok(Box::new(RedisZset::new(s, &o.redis_zset, ClaimMode::Nonatomic)?))),
    Entry::new(&redis_zset::REDIS_ZSET_PUBLISH_FIRST, |o, s| Ok(Box::new(PublishFirst::new(redis_zset::REDIS_ZSET_PUBLISH_FIRST.name, Box::new(RedisZset::new(s, &o.redis_zset, ClaimMode::Atomic)?))))),
    Entry::new(&ceiling::CEILING, |_, s| Ok(Box::new(Ceiling::new(s)))),
];
