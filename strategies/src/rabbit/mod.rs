//! The RabbitMQ strategies: `rabbit-ttl` (a durable wait queue per timeout,
//! `x-message-ttl` + dead-letter exchange into a work queue), `rabbit-delayed`
//! (an `x-delayed-message` exchange with a per-message `x-delay`), and the
//! teaching variant `rabbit-ttl-single-queue` (per-message `expiration` on
//! one queue, which shows head-of-line blocking: RabbitMQ only expires
//! messages at the head of a queue).
//!
//! Shared rules: publisher confirms and persistent messages carrying
//! `order_id` and `expire_at_us`; the work queue is consumed with manual
//! ack and bounded prefetch; the consumer never trusts a message and calls
//! the one cancel function. It consumes as an expert would: the due
//! deliveries that have already arrived (up to `batch-size`) are cancelled
//! in one transaction, and one `basic.ack` with `multiple` settles them
//! after its commit; `consumers` channels per instance share each work
//! queue, of which there are `shards` (orders spread by id), so that no
//! one queue process bounds the drain.
//! The teaching variant `rabbit-ttl-per-delivery` keeps one transaction
//! and one ack per delivery, to show what batching buys. A message that arrives before its deadline (a delay
//! longer than the longest TTL, or a clock step) is **re-delayed** for the
//! rest of its wait and then acked; a malformed one is rejected without
//! requeue, so the work queue dead-letters it to `dlb.<ns>.dead` (no
//! crash, no redelivery loop). A database error nacks with requeue after a
//! short pause, so the cancel is retried.

mod config;
mod consumer;
mod info;
mod message;
pub mod nodes;
mod topology;

pub use config::{Mode, QueueType, RabbitConfig};
pub use info::{RABBIT_DELAYED, RABBIT_TTL, RABBIT_TTL_PER_DELIVERY, RABBIT_TTL_SINGLE_QUEUE};
pub use message::CancelMessage;
pub use topology::{broker_facts, BrokerFacts, DELAYED_EXCHANGE_TYPE};

use crate::canceller::{Canceller, Capabilities, Service, StrategyCounters};
use crate::crash::CrashPoint;
use crate::domain::{now_us, Micros, OrderId};
use crate::error::{Error, Result};
use crate::redact;
use crate::store::{OrderStore, StoreStats};
use async_trait::async_trait;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection};
use message::{pick_ttl, remaining_ms};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use topology::Names;

/// Pause before reconnecting or before requeueing after a database error.
const BACKOFF: Duration = Duration::from_millis(200);
/// How long a publish waits for its confirm before it counts as failed.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);

/// How an instance consumes its work queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consume {
    /// The due deliveries already received, up to `batch-size`, cancelled
    /// in one transaction and acked with one `multiple` ack after it
    /// commits, on `consumers` channels.
    Batched,
    /// Batches of one on one channel: a transaction and an ack per
    /// delivery (the teaching variant `rabbit-ttl-per-delivery`).
    PerDelivery,
}

/// One instance of a RabbitMQ strategy.
#[derive(Debug)]
pub struct RabbitStrategy {
    mode: Mode,
    /// The strategy's name, also its `cancelled_by`.
    name: &'static str,
    consume: Consume,
    store: OrderStore,
    config: RabbitConfig,
    names: Names,
    /// The publishing connection and its confirm-mode channel, opened lazily
    /// and reopened after a failure.
    publisher: Mutex<Option<(Connection, Channel)>>,
    /// The index (in `config.url`'s list of nodes) of the last node a
    /// connection was opened to: the first one the next connection tries.
    node: AtomicUsize,
    counters: Counters,
}

crate::canceller::counters! {
    struct Counters {
        published,
        consumed,
        redelayed,
        malformed,
        reconnects,
        errors,
    }
}

impl RabbitStrategy {
    pub fn new(mode: Mode, store: OrderStore, config: &RabbitConfig) -> Result<Self> {
        if mode == Mode::Ttl && config.ttl_ms().is_empty() {
            return Err(Error::Config(
                "strategies.rabbit.ttls is empty: rabbit-ttl needs one TTL per timeout".into(),
            ));
        }
        let names = Names::new(&store.location().resource_prefix());
        Ok(RabbitStrategy {
            mode,
            name: mode.name(),
            consume: Consume::Batched,
            store,
            config: config.clone(),
            names,
            publisher: Mutex::new(None),
            node: AtomicUsize::new(0),
            counters: Counters::default(),
        })
    }

    /// The teaching variant of `mode`: one transaction and one ack per
    /// delivery, under `name`.
    pub fn per_delivery(mut self, name: &'static str) -> Self {
        self.name = name;
        self.consume = Consume::PerDelivery;
        self
    }

    /// The (first shard's) queue consumers read (for operators and tests).
    pub fn work_queue(&self) -> &str {
        &self.names.work
    }

    /// Where malformed messages end up.
    pub fn dead_letter_queue(&self) -> &str {
        &self.names.dead
    }

    fn broker_error(&self, context: &'static str, e: lapin::Error) -> Error {
        Error::Broker {
            service: "RabbitMQ",
            context,
            message: e.to_string(),
        }
    }

    /// A connection to the node used last, or, when it does not answer
    /// (stopped), to the next listed one that does.
    async fn connect(&self) -> Result<Connection> {
        let urls = nodes::split(&self.config.url);
        let last = self.node.load(Ordering::Relaxed);
        match nodes::connect_first(&urls, last).await {
            Ok((connection, index)) => {
                if index != last {
                    tracing::warn!(
                        strategy = self.name,
                        node = %redact::url(urls[index]),
                        "connected to another node of the list"
                    );
                }
                self.node.store(index, Ordering::Relaxed);
                Ok(connection)
            }
            Err(reason) => Err(Error::unreachable(
                "RabbitMQ",
                redact::url(&self.config.url),
                reason,
                "start RabbitMQ: `docker compose up -d --wait rabbitmq`, or on a Debian host \
                       `rabbitmq-server -detached` (a local cluster: `scripts/services.sh \
                       rabbitmq-cluster`); or set [strategies.rabbit] url"
                    .into(),
            )),
        }
    }

    /// A fresh connection and a channel on it; the caller keeps the
    /// connection alive as long as it uses the channel.
    async fn open_channel(&self) -> Result<(Connection, Channel)> {
        let conn = self.connect().await?;
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| self.broker_error("opening a channel", e))?;
        Ok((conn, ch))
    }

    /// The confirm-mode publishing channel, (re)opened when needed.
    async fn publishing_channel(&self) -> Result<Channel> {
        let mut guard = self.publisher.lock().await;
        if let Some((_, ch)) = guard.as_ref() {
            if ch.status().connected() {
                return Ok(ch.clone());
            }
            self.counters.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        let (conn, ch) = self.open_channel().await?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| self.broker_error("enabling publisher confirms", e))?;
        *guard = Some((conn, ch.clone()));
        Ok(ch)
    }

    /// Publishes `message` to wait `remaining_ms` more, persistent and
    /// confirmed by the broker.
    async fn publish(&self, message: CancelMessage, remaining_ms: u64) -> Result<()> {
        let ch = self.publishing_channel().await?;
        let props = BasicProperties::default().with_delivery_mode(2);
        let shard = topology::shard_of(message.order_id, topology::shards(self.mode, &self.config));
        let (exchange, routing_key, props) = match self.mode {
            Mode::Ttl => (
                "",
                self.names
                    .wait_shard(pick_ttl(&self.config.ttl_ms(), remaining_ms), shard),
                props,
            ),
            Mode::Delayed => {
                let mut headers = FieldTable::default();
                headers.insert(
                    ShortString::from("x-delay"),
                    AMQPValue::LongLongInt(remaining_ms as i64),
                );
                (
                    self.names.delayed_exchange.as_str(),
                    self.names.work_shard(shard),
                    props.with_headers(headers),
                )
            }
            Mode::SingleQueue => (
                "",
                self.names.single.clone(),
                props.with_expiration(ShortString::from(remaining_ms.to_string())),
            ),
        };
        let pending = ch
            .basic_publish(
                exchange.into(),
                routing_key.as_str().into(),
                BasicPublishOptions::default(),
                &message.to_bytes(),
                props,
            )
            .await
            .map_err(|e| self.broker_error("publishing", e))?;
        // A confirm that never comes (a link cut mid-publish that the client
        // has not noticed) must fail the publish, not hang it: the caller
        // retries, and the next publish opens a fresh connection.
        let confirm = match tokio::time::timeout(CONFIRM_TIMEOUT, pending).await {
            Ok(confirm) => {
                confirm.map_err(|e| self.broker_error("waiting for a publisher confirm", e))?
            }
            Err(_) => {
                if let Some((conn, _)) = self.publisher.lock().await.take() {
                    let _ = conn.close(0, "confirm timed out".into()).await;
                }
                return Err(Error::Broker {
                    service: "RabbitMQ",
                    context: "waiting for a publisher confirm",
                    message: format!("no confirm within {CONFIRM_TIMEOUT:?}"),
                });
            }
        };
        if confirm.is_nack() {
            return Err(Error::Broker {
                service: "RabbitMQ",
                context: "publishing",
                message: format!(
                    "the broker nacked the message for order {}",
                    message.order_id
                ),
            });
        }
        self.counters.published.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[async_trait]
impl Canceller for RabbitStrategy {
    fn name(&self) -> &str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        let quorum = self.config.queue_type == QueueType::Quorum;
        let mut notes = vec![format!(
            "{} queues; persistent messages with publisher confirms; consumer acks after the cancel commits",
            if quorum { "quorum" } else { "classic" }
        )];
        if !quorum && self.mode != Mode::Delayed {
            notes.push("classic-queue dead-lettering is at-most-once: a crash while dead-lettering can lose a message; run with fallback-scan".into());
        }
        match self.mode {
            Mode::Ttl => notes.push(format!(
                "one wait queue per TTL {:?} ms: a delay between TTLs waits for the next longer one",
                self.config.ttl_ms()
            )),
            Mode::Delayed => notes.push(
                "x-delayed-message keeps delayed messages in the broker node's own store until due \
                 (not fsynced per write, and confirmed before it is on disk: a machine crash can \
                 lose the latest confirmed publishes; run with fallback-scan); a mandatory \
                 publish is reported unroutable at once and still delivered later"
                    .into(),
            ),
            Mode::SingleQueue => notes.push(
                "TEACHING VARIANT: per-message expiration on one queue; RabbitMQ only expires the \
                 head, so short timeouts queued behind long ones wait for them (head-of-line blocking)"
                    .into(),
            ),
        }
        Capabilities {
            durable_across_restart: true,
            arbitrary_delay: self.mode != Mode::Ttl,
            // The delayed exchange keeps messages in the plugin's store,
            // which is not fsynced on each write (rabbitmq-plugin/README.md).
            needs_fallback: !quorum || self.mode == Mode::Delayed,
            multi_instance_safe: true,
            instance_owns_its_orders: false,
            requires: vec![Service::RabbitMq],
            notes,
        }
    }

    async fn setup(&self) -> Result<()> {
        let (conn, ch) = self.open_channel().await?;
        let declared = topology::declare(&ch, &self.names, self.mode, &self.config).await;
        let _ = conn.close(200, "setup done".into()).await;
        declared.map_err(|e| match self.mode {
            Mode::Delayed
                if e.to_string().contains("exchange type")
                    || e.to_string().contains("COMMAND_INVALID") =>
            {
                Error::unreachable(
                    "RabbitMQ x-delayed-message exchange type",
                    redact::url(&self.config.url),
                    e.to_string(),
                    "enable a delayed-message plugin: `bash rabbitmq-plugin/install.sh` (as root) \
                           builds and enables the project's own"
                        .into(),
                )
            }
            _ => self.broker_error("declaring queues", e),
        })
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        let message = CancelMessage {
            order_id,
            expire_at_us,
        };
        self.publish(message, remaining_ms(expire_at_us, now_us()))
            .await
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        while !shutdown.is_cancelled() {
            if let Err(e) = self.consume(&shutdown).await {
                // The broker restarted or the connection dropped: unacked
                // messages go back to the queue; reconnect and go on.
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                self.counters.reconnects.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(strategy = self.name, error = %e, "consumer failed; reconnecting");
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::sleep(BACKOFF) => {}
                }
            }
        }
        if let Some((conn, _)) = self.publisher.lock().await.take() {
            let _ = conn.close(200, "shutdown".into()).await;
        }
        Ok(())
    }

    async fn teardown(&self) -> Result<()> {
        let (conn, ch) = self.open_channel().await?;
        let deleted = topology::delete(&ch, &self.names, self.mode, &self.config).await;
        let _ = conn.close(200, "teardown done".into()).await;
        deleted.map_err(|e| self.broker_error("deleting queues", e))
    }

    fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn counters(&self) -> StrategyCounters {
        self.counters.snapshot()
    }

    /// Both, in the consumer (consumer.rs), for every mode: `after-claim`
    /// once due deliveries are parsed and before their cancel transaction;
    /// `after-commit-before-ack` once it committed and before the ack.
    fn crash_points(&self) -> &'static [CrashPoint] {
        &[CrashPoint::AfterClaim, CrashPoint::AfterCommitBeforeAck]
    }
}
