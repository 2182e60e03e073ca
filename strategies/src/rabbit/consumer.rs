//! The consumer of the work queue: a channel per consumer, the batch of
//! deliveries already received cancelled in one transaction and settled by
//! one `multiple` ack after its commit; the teaching variant takes the
//! same path with batches of one (a transaction and an ack per delivery). Continues `impl RabbitStrategy`
//! from mod.rs, as redis_zset/worker.rs continues its strategy's.

use super::{Consume, RabbitStrategy, BACKOFF};
use crate::crash::{self, CrashPoint};
use crate::domain::{now_us, CancelOutcome, OrderId};
use crate::error::{Error, Result};
use crate::rabbit::message::{remaining_ms, CancelMessage};
use futures_lite::StreamExt;
use futures_util::FutureExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions, BasicRejectOptions,
};
use lapin::types::FieldTable;
use lapin::Connection;
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

impl RabbitStrategy {
    /// Consumes every work queue shard until shutdown or a connection
    /// failure: one connection, a channel per consumer of each shard. When
    /// one consumer fails the others stop with it, the connection closes,
    /// and the broker requeues every unacked delivery.
    pub(super) async fn consume(&self, shutdown: &CancellationToken) -> Result<()> {
        let conn = self.connect().await?;
        let (consumers, batch_size) = match self.consume {
            Consume::Batched => (self.config.consumers, self.config.batch_size),
            // A batch of one: a transaction and an ack per delivery.
            Consume::PerDelivery => (1, 1),
        };
        let shards = super::topology::shards(self.mode, &self.config);
        let queues: Vec<String> = (0..shards)
            .flat_map(|k| (0..consumers).map(move |_| k))
            .map(|k| self.names.work_shard(k))
            .collect();
        let all = queues
            .iter()
            .map(|queue| self.consume_on(&conn, queue, usize::from(batch_size), shutdown));
        let consumed = futures_util::future::try_join_all(all).await;
        let _ = conn.close(200, "shutdown".into()).await;
        consumed.map(drop)
    }

    /// One consumer of `queue`, on a channel of its own (delivery tags, and
    /// so a `multiple` ack, are per channel: one queue per channel keeps a
    /// batch's ack from settling another stream's deliveries).
    async fn consume_on(
        &self,
        conn: &Connection,
        queue: &str,
        batch_size: usize,
        shutdown: &CancellationToken,
    ) -> Result<()> {
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| self.broker_error("opening a channel", e))?;
        ch.basic_qos(self.config.prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| self.broker_error("setting prefetch", e))?;
        let mut deliveries = ch
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| self.broker_error("consuming the work queue", e))?;
        let received = |next: Option<lapin::Result<Delivery>>| match next {
            Some(Ok(delivery)) => Ok(delivery),
            Some(Err(e)) => Err(self.broker_error("receiving", e)),
            None => Err(Error::Broker {
                service: "RabbitMQ",
                context: "consuming",
                message: "the consumer was cancelled by the broker".into(),
            }),
        };
        loop {
            let first = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                next = deliveries.next() => received(next)?,
            };
            // What has already arrived joins the batch.
            let mut batch = vec![first];
            while batch.len() < batch_size {
                match deliveries.next().now_or_never() {
                    Some(next) => batch.push(received(next)?),
                    None => break,
                }
            }
            // Deliveries are flowing: wait up to `batch-wait` for the batch
            // to fill, since each transaction's cost is mostly per batch. A
            // lone delivery never waits.
            if batch.len() > 1 && !self.config.batch_wait.is_zero() {
                let until = tokio::time::Instant::now() + self.config.batch_wait;
                while batch.len() < batch_size {
                    match tokio::time::timeout_at(until, deliveries.next()).await {
                        Ok(next) => batch.push(received(next)?),
                        Err(_) => break,
                    }
                }
            }
            self.handle_batch(batch).await?;
        }
    }

    /// A malformed delivery goes to the dead-letter queue, never back.
    async fn reject_malformed(&self, delivery: &Delivery) -> Result<()> {
        self.counters.malformed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            bytes = delivery.data.len(),
            "malformed message dead-lettered"
        );
        delivery
            .reject(BasicRejectOptions { requeue: false })
            .await
            .map(drop)
            .map_err(|e| self.broker_error("rejecting a malformed message", e))
    }

    /// A batch of deliveries, in delivery order: malformed ones rejected
    /// one by one; the due ones cancelled in one transaction; early ones
    /// (or found not yet due by their UPDATE) re-delayed; then one ack with
    /// `multiple` on the last, after the commit, settles the rest. A
    /// database error nacks them all with requeue after a pause.
    async fn handle_batch(&self, batch: Vec<Delivery>) -> Result<()> {
        self.counters
            .consumed
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut messages = Vec::with_capacity(batch.len());
        let mut last = None;
        for delivery in &batch {
            match CancelMessage::parse(&delivery.data) {
                Some(message) => {
                    messages.push(message);
                    last = Some(delivery);
                }
                None => self.reject_malformed(delivery).await?,
            }
        }
        let Some(last) = last else {
            return Ok(());
        };
        let now = now_us();
        let (due, mut early): (Vec<CancelMessage>, Vec<CancelMessage>) =
            messages.into_iter().partition(|m| m.expire_at_us <= now);
        if !due.is_empty() {
            // Received, due and unacked: the broker holds them for this consumer only.
            crash::reached(CrashPoint::AfterClaim);
            let ids: Vec<OrderId> = due.iter().map(|m| m.order_id).collect();
            match self.store.cancel_batch_if_due(&ids, self.name).await {
                Ok(outcomes) => {
                    // The cancels committed; the deliveries are not acked yet.
                    crash::reached(CrashPoint::AfterCommitBeforeAck);
                    early.extend(
                        due.iter()
                            .zip(&outcomes)
                            .filter(|(_, (_, outcome))| *outcome == CancelOutcome::NotDue)
                            .map(|(message, _)| *message),
                    );
                }
                Err(e) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(orders = ids.len(), error = %e, "batch cancel failed; requeueing");
                    tokio::time::sleep(BACKOFF).await;
                    let requeue = BasicNackOptions {
                        multiple: true,
                        requeue: true,
                    };
                    return last
                        .nack(requeue)
                        .await
                        .map(drop)
                        .map_err(|e| self.broker_error("nacking", e));
                }
            }
        }
        for message in early {
            // Early: wait the rest in the broker again, then drop this copy.
            self.counters.redelayed.fetch_add(1, Ordering::Relaxed);
            self.publish(message, remaining_ms(message.expire_at_us, now_us()).max(1))
                .await?;
        }
        last.ack(BasicAckOptions { multiple: true })
            .await
            .map(drop)
            .map_err(|e| self.broker_error("acking", e))
    }
}
