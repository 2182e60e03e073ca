//! The RabbitMQ strategies and their teaching variant, as the registry
//! lists them.

use crate::canceller::Service;
use crate::strategy_info::{Role, StrategyInfo};

pub const RABBIT_TTL: StrategyInfo = StrategyInfo {
    name: "rabbit-ttl",
    summary: "RabbitMQ wait queue per timeout with TTL + dead-letter exchange",
    requires: &[Service::RabbitMq],
    good: &[
        "the broker delivers each order at its timeout, and consumers scale out with manual acks and bounded prefetch",
        "the due deliveries that have arrived are cancelled in one transaction and settled by one ack, so a burst costs a commit per batch, not per order",
    ],
    bad: &[
        "one wait queue per distinct timeout: a delay between the declared TTLs waits for the next longer one",
        "classic-queue dead-lettering is at-most-once, and a node's loss loses its classic queues' messages: quorum queues or `+fallback` are needed",
        "the schedule is published after the order commits: a crash or broker outage in between loses it without `+outbox` or `+fallback`",
    ],
    ..StrategyInfo::BASE
};

pub const RABBIT_DELAYED: StrategyInfo = StrategyInfo {
    name: "rabbit-delayed",
    summary: "RabbitMQ x-delayed-message exchange with a per-message x-delay",
    requires: &[Service::RabbitMq],
    good: &["any per-order delay, without declaring the timeouts up front"],
    bad: &[
        "the broker needs a delayed-message exchange plugin (x-delayed-message), which RabbitMQ does not ship",
        "delayed messages wait in one node's own store, neither replicated nor fsynced per write: losing that node loses them without `+fallback`",
        "the broker confirms a schedule before the store has it on disk (it syncs about once a second), so its schedule path never waits for a disk write, as rabbit-ttl's confirm of a persistent message does",
        "the schedule is published after the order commits: a crash or broker outage in between loses it without `+outbox` or `+fallback`",
    ],
    rate_caveat: Some(
        "its broker confirms each schedule before it is on disk, where rabbit-ttl's waits for the disk",
    ),
    ..StrategyInfo::BASE
};

pub const RABBIT_TTL_SINGLE_QUEUE: StrategyInfo = StrategyInfo {
    name: "rabbit-ttl-single-queue",
    summary: "TEACHING: per-message expiration on one queue (head-of-line blocking)",
    requires: &[Service::RabbitMq],
    role: Role::Teaching,
    ..StrategyInfo::BASE
};

pub const RABBIT_TTL_PER_DELIVERY: StrategyInfo = StrategyInfo {
    name: "rabbit-ttl-per-delivery",
    summary:
        "TEACHING: rabbit-ttl consumed one delivery at a time (a transaction and an ack each), \
              to show what batching buys",
    requires: &[Service::RabbitMq],
    role: Role::Teaching,
    ..StrategyInfo::BASE
};
