//! redis-zset and its teaching variants, as the registry lists them.

use crate::canceller::Service;
use crate::strategy_info::{Role, StrategyInfo};

pub const REDIS_ZSET: StrategyInfo = StrategyInfo {
    name: "redis-zset",
    summary: "Redis ZSET scored by deadline, atomic Lua claim, visibility timeout",
    requires: &[Service::Redis],
    good: &[
        "any per-order delay; an atomic Lua claim with a visibility timeout, so instances share the work and a dead claimer's orders come back",
        "shards with hash tags, so it runs on Redis Cluster",
    ],
    bad: &[
        "without append-only persistence a Redis restart loses the whole schedule; with it, what the fsync policy had not yet written",
        "a Redis Cluster master that is down stops its shards' claims and schedules until it is back",
        "the schedule is written after the order commits: a crash or Redis outage in between loses it without `+outbox` or `+fallback`",
    ],
    drops_paid_timers: true,
    ..StrategyInfo::BASE
};

pub const REDIS_KEYSPACE_EXPIRY: StrategyInfo = StrategyInfo {
    name: "redis-keyspace-expiry",
    summary: "TEACHING: a key per order with PX + keyspace `expired` events (lost when \
              nobody listens, late by expiry sampling)",
    requires: &[Service::Redis],
    role: Role::Teaching,
    ..StrategyInfo::BASE
};

pub const REDIS_ZSET_NONATOMIC: StrategyInfo = StrategyInfo {
    name: "redis-zset-nonatomic",
    summary: "TEACHING: ZRANGEBYSCORE then ZREM without an atomic claim (instances \
              cancel the same ids; duplicates absorbed)",
    requires: &[Service::Redis],
    role: Role::Teaching,
    ..StrategyInfo::BASE
};

/// redis-zset itself, correct in every step of its own; the mistake is the
/// order service's, which calls `schedule` inside the creating transaction
/// (see [`crate::remedy::PublishFirst`]).
pub const REDIS_ZSET_PUBLISH_FIRST: StrategyInfo = StrategyInfo {
    name: "redis-zset-publish-first",
    summary: "TEACHING: redis-zset scheduled before the order's transaction commits (a \
              rolled-back checkout leaves a phantom schedule; the outbox is the fix)",
    requires: &[Service::Redis],
    role: Role::Teaching,
    schedules_before_commit: true,
    ..StrategyInfo::BASE
};
