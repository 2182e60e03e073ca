//! `[strategies]` in a scenario file: every strategy's options, each
//! section owned by its strategy's config type.

use crate::db_scan::{DbScanConfig, FallbackScanConfig};
use crate::db_timer::DbTimerConfig;
use crate::error::Result;
use crate::rabbit::RabbitConfig;
use crate::redis_zset::RedisZsetConfig;
use crate::timing_wheel::TimingWheelConfig;
use serde::{Deserialize, Serialize};

/// `[strategies]` in a scenario file: every strategy's options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct StrategyOptions {
    /// The order service tells a strategy that can drop a paid order's
    /// timer ([`StrategyInfo::drops_paid_timers`](crate::strategy_info::StrategyInfo::drops_paid_timers):
    /// timing-wheel, redis-zset) of each payment, as its experts run it
    /// (default true). false: the naive form, where every paid order's
    /// timer still fires and costs a cancel attempt that finds it paid.
    pub drop_paid_timers: bool,
    pub db_scan: DbScanConfig,
    pub db_timer: DbTimerConfig,
    pub timing_wheel: TimingWheelConfig,
    /// Shared by `rabbit-ttl`, `rabbit-delayed` and `rabbit-ttl-single-queue`.
    pub rabbit: RabbitConfig,
    /// Shared by `redis-zset`, `redis-zset-nonatomic` and `redis-keyspace-expiry`.
    pub redis_zset: RedisZsetConfig,
    pub fallback_scan: FallbackScanConfig,
}

impl Default for StrategyOptions {
    fn default() -> Self {
        StrategyOptions {
            drop_paid_timers: true,
            db_scan: DbScanConfig::default(),
            db_timer: DbTimerConfig::default(),
            timing_wheel: TimingWheelConfig::default(),
            rabbit: RabbitConfig::default(),
            redis_zset: RedisZsetConfig::default(),
            fallback_scan: FallbackScanConfig::default(),
        }
    }
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
