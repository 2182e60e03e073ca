//! Configuration shared by `rabbit-ttl`, `rabbit-delayed` and the teaching
//! variant `rabbit-ttl-single-queue`.

use crate::error::{Error, Result};
use crate::redact;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Which of the RabbitMQ strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ttl,
    Delayed,
    SingleQueue,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Ttl => "rabbit-ttl",
            Mode::Delayed => "rabbit-delayed",
            Mode::SingleQueue => "rabbit-ttl-single-queue",
        }
    }
}

/// Which RabbitMQ queue type carries the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueType {
    /// Classic queues: dead-lettering is at-most-once (a message dead-lettered
    /// while the broker crashes can be lost).
    Classic,
    /// Quorum queues with `x-dead-letter-strategy=at-least-once` and
    /// `x-overflow=reject-publish`: dead-lettering survives failures.
    Quorum,
}

/// `[strategies.rabbit]` in a scenario file. Read through
/// [`RabbitConfigInput`], so a `batch-size` left out follows the
/// `prefetch` given; written with every value in effect.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", from = "RabbitConfigInput")]
pub struct RabbitConfig {
    /// Broker URL (default `amqp://guest:guest@127.0.0.1:5672/%2f`), or the
    /// nodes of a cluster separated by commas
    /// (`amqp://…@127.0.0.1:5681,amqp://…@127.0.0.1:5682`): the client uses
    /// the first that answers and moves to the next when its node dies.
    pub url: String,
    /// Unacknowledged deliveries per consumer (default 1000).
    pub prefetch: u16,
    /// Due deliveries a consumer cancels in one transaction, then acks
    /// with one `basic.ack` (`multiple`) after its commit (default 500, 1 to
    /// `prefetch`). A batch is what has already arrived: the consumer never
    /// waits to fill one, so batching adds no delay at a low rate. Below
    /// `prefetch`, the broker keeps sending while a batch commits.
    ///
    /// Why these defaults: under a storm of 100 000 due together, prefetch
    /// 100 and batches of 50 drained rabbit-delayed at 3 352 and 3 462
    /// cancels/s, prefetch 1 000 and batches of 500 at 4 935 and 4 990
    /// (rabbit-ttl: 2 815 and 2 429 against 3 365 and 3 329), two runs
    /// each (results/storm/20261204-15*-storm-100k-*). For scale: db-scan
    /// and db-timer cancel up to 200 per transaction by default (the storm
    /// presets set db-scan to 500), and their storm drains ran at 16 000-
    /// 20 000 cancels/s (results/storm/20261204-034454-storm-sweep).
    pub batch_size: u16,
    /// How long a consumer waits for a batch to fill once deliveries are
    /// flowing (more than one had already arrived), as Spring AMQP's batch
    /// listener waits up to its receive timeout (default 0: never; at most
    /// 1 s). A lone delivery never waits, so at a low rate it adds nothing.
    /// Under the storm of 100 000 at 10 ms (results/batch-wait, interleaved
    /// 10, 0, 10): rabbit-ttl 5 822 and 5 770 cancels/s against 5 019,
    /// rabbit-delayed 7 479 and 7 311 against 7 219; the same afternoon
    /// (0, 10, 0): rabbit-ttl 4 596 against 4 882 and 4 745,
    /// rabbit-delayed 6 259 against 6 656 and 7 169. No gain beyond the
    /// machine's drift, so not the default. In a rate sweep (the `sweep`
    /// preset at 800-1 800 orders/s, 0 then 20 ms; results/batch-wait/
    /// *-sweep-batch-wait-*, at 0edad13, the 20 ms one from a dirty tree
    /// there) 20 ms cut the statements per cancel at 800
    /// orders/s from 8.5 to 6.3 and the workers' CPU per cancel from 760 to
    /// 590 µs, but lifted no maximum: rabbit-ttl held 1 400 with 0 and 800
    /// with 20 ms (its 1 400 step failed on the schedule path, the
    /// publish's confirm, not on the consumer), rabbit-delayed 1 400 with
    /// both.
    #[serde(with = "humantime_serde")]
    pub batch_wait: Duration,
    /// Consumers of each work queue per instance, each on its own channel
    /// (default 1, 1 to 16).
    pub consumers: u16,
    /// Queue shards (default 1, 1 to 32): `rabbit-ttl` and `rabbit-delayed`
    /// spread orders by id over this many work queues (and rabbit-ttl over
    /// as many wait queues per TTL, each dead-lettering into its own work
    /// queue), and every instance consumes each. Why: a queue is one Erlang
    /// process, which enqueues, delivers and settles every message it holds
    /// on one scheduler, so one work queue can bound the drain on a broker
    /// with cores to spare. The teaching variant `rabbit-ttl-single-queue`
    /// keeps one queue: that is its point.
    ///
    /// Why the default is 1: on the two-core test machine four shards
    /// drained a storm of 100 000 slower (results/shards, interleaved 4, 1,
    /// 4): rabbit-ttl 4 262 and 4 236 cancels/s against 6 048, rabbit-delayed
    /// 5 471 and 5 690 against 6 956. Eight consumers took smaller batches,
    /// so the database's and the workers' CPU per cancel rose by 44-92 %
    /// (PostgreSQL 121-139 µs against 77-85) while the broker's stayed at
    /// 48-67 µs; the cores, 94-98 % busy, were the bound, not a queue's
    /// process.
    pub shards: u16,
    /// `classic` (default) or `quorum`.
    pub queue_type: QueueType,
    /// Classic queues only: `x-queue-version` for every queue, 1 or 2
    /// (RabbitMQ 3.10+). Left out, the broker's default (1 before 3.12).
    /// Version 2 is the newer index and message store of classic queues,
    /// the default from 3.12. For rabbit-ttl at 1 800 orders/s on 3.10.8
    /// (results/queue-version, three rounds interleaved) it halved the
    /// schedule path's p99 (3.4-4.5 ms against 7.7-9.9) for about a tenth
    /// more broker CPU (0.47-0.49 cores against 0.43-0.45). Not yet the
    /// default: no sweep has compared the two at the top.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_version: Option<u8>,
    /// The wait-queue TTLs of `rabbit-ttl`, one durable queue each. Empty
    /// (the default) means: the scenario's distinct timeouts, filled in by
    /// the harness. A delay between two TTLs goes to the next longer queue
    /// (never early); a longer one waits in the longest and is re-delayed.
    #[serde(with = "duration_list")]
    pub ttls: Vec<Duration>,
}

impl fmt::Debug for RabbitConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitConfig")
            .field("url", &redact::url(&self.url))
            .field("prefetch", &self.prefetch)
            .field("batch_size", &self.batch_size)
            .field("batch_wait", &self.batch_wait)
            .field("consumers", &self.consumers)
            .field("shards", &self.shards)
            .field("queue_type", &self.queue_type)
            .field("queue_version", &self.queue_version)
            .field("ttls", &self.ttls)
            .finish()
    }
}

/// The default batch, or the prefetch when that is smaller.
const DEFAULT_BATCH: u16 = 500;

impl Default for RabbitConfig {
    fn default() -> Self {
        RabbitConfigInput::default().into()
    }
}

/// `[strategies.rabbit]` as written: a `batch-size` left out is the
/// default batch, or the `prefetch` given when that is smaller (a scenario
/// or an older run's record that sets only `prefetch = 100` still loads).
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
struct RabbitConfigInput {
    url: String,
    prefetch: u16,
    batch_size: Option<u16>,
    #[serde(with = "humantime_serde")]
    batch_wait: Duration,
    consumers: u16,
    shards: u16,
    queue_type: QueueType,
    queue_version: Option<u8>,
    #[serde(with = "duration_list")]
    ttls: Vec<Duration>,
}

impl Default for RabbitConfigInput {
    fn default() -> Self {
        RabbitConfigInput {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
            prefetch: 1000,
            batch_size: None,
            batch_wait: Duration::ZERO,
            consumers: 1,
            shards: 1,
            queue_type: QueueType::Classic,
            queue_version: None,
            ttls: Vec::new(),
        }
    }
}

impl From<RabbitConfigInput> for RabbitConfig {
    fn from(input: RabbitConfigInput) -> Self {
        RabbitConfig {
            batch_size: input
                .batch_size
                .unwrap_or(DEFAULT_BATCH.min(input.prefetch.max(1))),
            url: input.url,
            prefetch: input.prefetch,
            batch_wait: input.batch_wait,
            consumers: input.consumers,
            shards: input.shards,
            queue_type: input.queue_type,
            queue_version: input.queue_version,
            ttls: input.ttls,
        }
    }
}

impl RabbitConfig {
    /// Checks ranges; `field` is the config path used in the message.
    pub fn validate(&self, field: &str) -> Result<()> {
        let urls = super::nodes::split(&self.url);
        if urls.is_empty() {
            return Err(Error::Config(format!(
                "{field}.url is empty; accepted: amqp://user:password@host:port/vhost, or several \
                 separated by commas (the nodes of a cluster)"
            )));
        }
        for url in urls {
            if !url.starts_with("amqp://") && !url.starts_with("amqps://") {
                return Err(Error::Config(format!(
                    "{field}.url: `{}` is not an AMQP URL; accepted: amqp://user:password@host:port/vhost, \
                     or several separated by commas (the nodes of a cluster)",
                    redact::url(url)
                )));
            }
        }
        if self.prefetch == 0 {
            return Err(Error::Config(format!(
                "{field}.prefetch = 0 is out of range; accepted: 1 to 65535"
            )));
        }
        if self.batch_size == 0 || self.batch_size > self.prefetch {
            return Err(Error::Config(format!(
                "{field}.batch-size = {} is out of range; accepted: 1 to {field}.prefetch ({})",
                self.batch_size, self.prefetch
            )));
        }
        if self.batch_wait > Duration::from_secs(1) {
            return Err(Error::Config(format!(
                "{field}.batch-wait = {:?} is out of range; accepted: 0ms to 1s",
                self.batch_wait
            )));
        }
        if !(1..=16).contains(&self.consumers) {
            return Err(Error::Config(format!(
                "{field}.consumers = {} is out of range; accepted: 1 to 16",
                self.consumers
            )));
        }
        if !(1..=32).contains(&self.shards) {
            return Err(Error::Config(format!(
                "{field}.shards = {} is out of range; accepted: 1 to 32",
                self.shards
            )));
        }
        match (self.queue_type, self.queue_version) {
            (_, None) | (QueueType::Classic, Some(1 | 2)) => {}
            (QueueType::Classic, Some(v)) => {
                return Err(Error::Config(format!(
                    "{field}.queue-version = {v} is out of range; accepted: 1 or 2"
                )))
            }
            (QueueType::Quorum, Some(_)) => {
                return Err(Error::Config(format!(
                    "{field}.queue-version applies to classic queues only; remove it, or set \
                     {field}.queue-type = \"classic\""
                )))
            }
        }
        for ttl in &self.ttls {
            if *ttl < Duration::from_millis(1) || *ttl > Duration::from_secs(86_400 * 24) {
                return Err(Error::Config(format!(
                    "{field}.ttls contains {ttl:?}; accepted: 1ms to 24 days each"
                )));
            }
        }
        Ok(())
    }

    /// The TTLs, sorted and deduplicated, in whole milliseconds (at least 1).
    pub(crate) fn ttl_ms(&self) -> Vec<u64> {
        let mut ms: Vec<u64> = self
            .ttls
            .iter()
            .map(|d| (d.as_millis() as u64).max(1))
            .collect();
        ms.sort_unstable();
        ms.dedup();
        ms
    }
}

/// A list of humantime durations (`["1s", "3s"]`).
mod duration_list {
    use humantime_serde::Serde;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(list: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        list.iter()
            .map(|d| Serde::from(*d))
            .collect::<Vec<_>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        let list = Vec::<Serde<Duration>>::deserialize(d)?;
        Ok(list.into_iter().map(Serde::into_inner).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(config: RabbitConfig) -> String {
        match config.validate("strategies.rabbit") {
            Err(Error::Config(message)) => message,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn a_queue_version_is_one_or_two_and_for_classic_queues_only() {
        let read = |json: &str| serde_json::from_str::<RabbitConfig>(json).unwrap();
        let v2 = read(r#"{"queue-version": 2}"#);
        assert_eq!(v2.queue_version, Some(2));
        v2.validate("strategies.rabbit").unwrap();
        // Left out, it is not written: the broker's default is in effect.
        let written = serde_json::to_value(RabbitConfig::default()).unwrap();
        assert!(written.get("queue-version").is_none(), "{written}");
        let message = error_of(read(r#"{"queue-version": 3}"#));
        assert!(
            message.contains("strategies.rabbit.queue-version = 3") && message.contains("1 or 2"),
            "{message}"
        );
        let message = error_of(read(r#"{"queue-version": 2, "queue-type": "quorum"}"#));
        assert!(
            message.contains("strategies.rabbit.queue-version applies to classic queues"),
            "{message}"
        );
    }

    #[test]
    fn the_defaults_are_accepted() {
        RabbitConfig::default()
            .validate("strategies.rabbit")
            .unwrap();
    }

    #[test]
    fn a_batch_left_out_follows_a_smaller_prefetch_and_is_written_as_in_effect() {
        let read = |json: &str| serde_json::from_str::<RabbitConfig>(json).unwrap();
        let default = read("{}");
        assert_eq!((default.prefetch, default.batch_size), (1000, 500));
        // An older run's record, from before batch-size existed.
        let older = read(r#"{"prefetch": 100}"#);
        assert_eq!(older.batch_size, 100);
        older.validate("strategies.rabbit").unwrap();
        let chosen = read(r#"{"prefetch": 100, "batch-size": 20}"#);
        assert_eq!(chosen.batch_size, 20);
        // Written with the batch in effect, so a replay does not depend on
        // a later default.
        let written = serde_json::to_value(&older).unwrap();
        assert_eq!(written["batch-size"], 100);
        assert!(serde_json::from_str::<RabbitConfig>(r#"{"batch": 1}"#).is_err());
    }

    #[test]
    fn a_batch_of_none_or_beyond_the_prefetch_names_the_field_and_its_range() {
        let none = error_of(RabbitConfig {
            batch_size: 0,
            ..RabbitConfig::default()
        });
        assert!(
            none.starts_with("strategies.rabbit.batch-size = 0 is out of range"),
            "{none}"
        );
        let prefetch = RabbitConfig::default().prefetch;
        let beyond = error_of(RabbitConfig {
            batch_size: prefetch + 1,
            ..RabbitConfig::default()
        });
        assert!(
            beyond.contains(&format!(
                "accepted: 1 to strategies.rabbit.prefetch ({prefetch})"
            )),
            "{beyond}"
        );
        // At the prefetch exactly it is accepted.
        RabbitConfig {
            batch_size: prefetch,
            ..RabbitConfig::default()
        }
        .validate("strategies.rabbit")
        .unwrap();
    }

    #[test]
    fn a_batch_wait_beyond_a_second_names_the_field() {
        let message = error_of(RabbitConfig {
            batch_wait: Duration::from_millis(1001),
            ..RabbitConfig::default()
        });
        assert_eq!(
            message,
            "strategies.rabbit.batch-wait = 1.001s is out of range; accepted: 0ms to 1s"
        );
        let parsed: RabbitConfig = serde_json::from_str(r#"{"batch-wait": "5ms"}"#).unwrap();
        assert_eq!(parsed.batch_wait, Duration::from_millis(5));
        parsed.validate("strategies.rabbit").unwrap();
    }

    #[test]
    fn shards_outside_one_to_thirty_two_name_the_field() {
        for shards in [0, 33] {
            let message = error_of(RabbitConfig {
                shards,
                ..RabbitConfig::default()
            });
            assert_eq!(
                message,
                format!("strategies.rabbit.shards = {shards} is out of range; accepted: 1 to 32")
            );
        }
        for shards in [1, 32] {
            RabbitConfig {
                shards,
                ..RabbitConfig::default()
            }
            .validate("strategies.rabbit")
            .unwrap();
        }
    }

    #[test]
    fn consumers_outside_one_to_sixteen_name_the_field() {
        for consumers in [0, 17] {
            let message = error_of(RabbitConfig {
                consumers,
                ..RabbitConfig::default()
            });
            assert_eq!(
                message,
                format!(
                    "strategies.rabbit.consumers = {consumers} is out of range; accepted: 1 to 16"
                )
            );
        }
        for consumers in [1, 16] {
            RabbitConfig {
                consumers,
                ..RabbitConfig::default()
            }
            .validate("strategies.rabbit")
            .unwrap();
        }
    }
}
