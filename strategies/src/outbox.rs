//! The outbox relay: what turns the outbox rows the creating transactions
//! wrote (see [`crate::store::OrderStore::with_outbox`]) into schedules.
//!
//! Each canceller instance of a `+outbox` strategy runs one relay beside
//! the strategy. It claims a batch, calls the strategy's `schedule` for
//! every row at once (publishes wait for their confirms concurrently, ZADDs
//! pipeline on the multiplexed connection), deletes the rows that went
//! through, and hands the others back for a retry a moment later. A
//! schedule is therefore retried until it succeeds, however long the broker
//! or Redis is away; what it costs is lateness, which the report shows as
//! the schedule path (commit to `schedule` returning) and the outbox's
//! length over time.

use crate::canceller::Canceller;
use crate::domain::{Micros, OrderId};
use crate::store::OrderStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Rows one claim takes.
pub const RELAY_BATCH: u32 = 64;
/// How long a claimed row is left to its relay before another takes it
/// again: longer than the slowest schedule call that still returns (a
/// RabbitMQ publish gives up on its confirm after 5 s), so duplicates come
/// only from a relay that stalled or died. A failed schedule hands its row
/// back sooner ([`RELAY_RETRY`]).
pub const RELAY_LEASE: Duration = Duration::from_secs(15);
/// When a row whose schedule failed is tried again.
pub const RELAY_RETRY: Duration = Duration::from_millis(250);
/// Pause when the outbox is empty, or after a failed claim.
pub const RELAY_IDLE: Duration = Duration::from_millis(20);

/// What a relay did, for the worker's report.
#[derive(Debug, Default)]
pub struct RelayCounters {
    /// Schedules that went through (their rows deleted).
    pub relayed: AtomicU64,
    /// Schedule calls that failed; the row comes back after its lease.
    pub failed: AtomicU64,
    /// Claims or deletes that failed (the database was away).
    pub db_errors: AtomicU64,
}

/// Relays until `shutdown`. `sent(order, created_at_us)` is called for each
/// schedule that went through.
pub async fn relay(
    store: OrderStore,
    canceller: Arc<dyn Canceller>,
    counters: Arc<RelayCounters>,
    shutdown: CancellationToken,
    sent: impl Fn(OrderId, Micros) + Send + Sync + 'static,
) {
    let sent = Arc::new(sent);
    while !shutdown.is_cancelled() {
        let batch = match store.claim_outbox(RELAY_BATCH, RELAY_LEASE).await {
            Ok(batch) => batch,
            Err(e) => {
                counters.db_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "outbox claim failed; retrying");
                Vec::new()
            }
        };
        if batch.is_empty() {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(RELAY_IDLE) => {}
            }
            continue;
        }
        let mut calls = tokio::task::JoinSet::new();
        for row in batch {
            let canceller = Arc::clone(&canceller);
            calls.spawn(async move {
                (
                    row,
                    canceller.schedule(row.order_id, row.expire_at_us).await,
                )
            });
        }
        let (mut done, mut failed) = (Vec::new(), Vec::new());
        while let Some(joined) = calls.join_next().await {
            match joined {
                Ok((row, Ok(()))) => {
                    sent(row.order_id, row.created_at_us);
                    done.push(row.order_id);
                }
                Ok((row, Err(e))) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(order = row.order_id, error = %e, "relaying failed; retried soon");
                    failed.push(row.order_id);
                }
                Err(e) => tracing::error!(error = %e, "a relay call panicked"),
            }
        }
        // Failing to hand them back only delays them to the lease's end.
        if let Err(e) = store.release_outbox(&failed, RELAY_RETRY).await {
            counters.db_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "handing failed outbox rows back failed");
        }
        counters
            .relayed
            .fetch_add(done.len() as u64, Ordering::Relaxed);
        // Not deleted (the database went away): the lease ends, the row is
        // scheduled again, and the duplicate is absorbed by the strategy.
        if let Err(e) = store.delete_outbox(&done).await {
            counters.db_errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "deleting relayed outbox rows failed");
        }
    }
}
