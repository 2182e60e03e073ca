//! **The** cancel function, every strategy's and every fallback path's
//! end: one order or a batch in one transaction, and the db-scan and
//! db-timer claim-and-cancel batches. Each order's conditional UPDATE
//! reads the clock afresh; stock rows are released in ascending SKU order
//! so two cancellers cannot deadlock on them; outcomes are counted once
//! committed.

use super::handle::OrderStore;
use super::tx::in_tx;
use crate::domain::{CancelOutcome, Micros, OrderId, OrderStatus};
use crate::error::{DbContext, Error, Result};
use sqlx::{AnyConnection, Row, SqlStr};
use std::collections::BTreeMap;

/// What one db-scan batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanBatch {
    /// Ids the scan returned (rows read).
    pub claimed: usize,
    /// Ids this batch actually cancelled.
    pub cancelled: Vec<OrderId>,
    /// The earliest order still PENDING after the batch, as `(deadline,
    /// id)`, where the caller asked for it and the batch came back short
    /// ([`OrderStore::scan_and_cancel_due_then_peek`]); `None` otherwise,
    /// or when nothing is pending.
    pub next_pending: Option<(Micros, OrderId)>,
}

impl OrderStore {
    /// **The** cancel function: every strategy and every fallback path ends
    /// here. Cancels the order if it is still PENDING and its deadline has
    /// passed, and releases its stock, in one transaction.
    ///
    /// The time of the cancel is read from the application's clock
    /// immediately before the order's UPDATE, fresh on every retry: it is
    /// the moment the cancel took effect as near as the application can
    /// tell, so waits for a connection or a retry count as lateness. A wait
    /// for the order's row lock inside the UPDATE (another transaction
    /// holding it) does not; it shows in the lateness at COMMIT, which the
    /// report prints beside the row's.
    pub async fn cancel_if_due(&self, order_id: OrderId, by: &str) -> Result<CancelOutcome> {
        let outcomes = self.cancel_batch_if_due(&[order_id], by).await?;
        Ok(outcomes[0].1)
    }

    /// [`OrderStore::cancel_if_due`] for several orders in one transaction;
    /// returns each id's outcome in input order. Each order's UPDATE reads
    /// the clock afresh: a batch never shares one `now`.
    pub async fn cancel_batch_if_due(
        &self,
        ids: &[OrderId],
        by: &str,
    ) -> Result<Vec<(OrderId, CancelOutcome)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let outcomes = in_tx!(self, "cancelling orders", |conn| async {
            self.cancel_in_tx(conn, ids, by).await
        })?;
        self.committed(&outcomes);
        Ok(outcomes)
    }

    /// One db-scan batch: find up to `limit` PENDING orders whose deadline
    /// is at least `grace_us` in the past on the `(status, expire_at_us)`
    /// index, and cancel them (each at the time of its own UPDATE).
    ///
    /// Where the database has `FOR UPDATE SKIP LOCKED` (PostgreSQL, MariaDB
    /// 10.6+) the rows are claimed and cancelled in one transaction, so
    /// concurrent scanners take disjoint batches. SQLite has no row locks:
    /// scanners may read the same ids, and the conditional UPDATE lets one
    /// win while the others' attempts are absorbed (counted, harmless).
    pub async fn scan_and_cancel_due(
        &self,
        grace_us: Micros,
        limit: u32,
        by: &str,
    ) -> Result<ScanBatch> {
        self.scan_and_cancel(grace_us, limit, by, None).await
    }

    /// [`OrderStore::scan_and_cancel_due`] for `db-timer`: when the batch
    /// comes back short (nothing more is due), the same transaction also
    /// reads the earliest PENDING order after the claim's bound into
    /// [`ScanBatch::next_pending`], so the read is counted with the claim's
    /// (and, where measured, in its server-side rows). Orders due by the
    /// bound that the claim skipped are locked by another instance
    /// cancelling them: waking for them would only find them locked again.
    ///
    /// `due_first`: an order the caller already read (the previous batch's
    /// `next_pending`) and knows to be due. It goes through the one cancel
    /// function first, in the same transaction, without being claimed: its
    /// conditional UPDATE locks and re-checks it, so it is cancelled only if
    /// still PENDING and due, and the claim after it no longer sees it. That
    /// saves reading each order twice, once as "next" and once as "due".
    /// Unlike the claim it does not skip a locked row: if another
    /// transaction holds it (a standby's overdue claim), the UPDATE waits.
    pub async fn scan_and_cancel_due_then_peek(
        &self,
        limit: u32,
        by: &str,
        due_first: Option<OrderId>,
    ) -> Result<ScanBatch> {
        self.scan_and_cancel(0, limit, by, Some(due_first)).await
    }

    /// One claim-and-cancel batch; `peek` is `Some(due_first)` for db-timer
    /// (see [`OrderStore::scan_and_cancel_due_then_peek`]).
    async fn scan_and_cancel(
        &self,
        grace_us: Micros,
        limit: u32,
        by: &str,
        peek: Option<Option<OrderId>>,
    ) -> Result<ScanBatch> {
        let due_first: Vec<OrderId> = peek.flatten().into_iter().collect();
        let peek = peek.is_some();
        let batch = if let Some(claim_sql) = &self.sql.scan_due_skip_locked {
            in_tx!(self, "scanning for due orders", |conn| async {
                let mut cancels = TxCancels::default();
                self.cancel_each_in_tx(conn, &due_first, by, &mut cancels)
                    .await?;
                let due_before_us = crate::now_us() - grace_us;
                let ids = self
                    .select_ids(conn, claim_sql, due_before_us, limit)
                    .await?;
                self.cancel_each_in_tx(conn, &ids, by, &mut cancels).await?;
                let outcomes = self.release_in_tx(conn, cancels).await?;
                let next = if peek && ids.len() < limit as usize {
                    self.earliest_pending_in(conn, due_before_us).await?
                } else {
                    None
                };
                Ok::<_, Error>((ids.len(), outcomes, next))
            })
            .map(|(claimed, outcomes, next)| {
                self.committed(&outcomes);
                ScanBatch {
                    next_pending: next,
                    ..batch_of(claimed, &outcomes)
                }
            })?
        } else {
            let mut outcomes = self.cancel_batch_if_due(&due_first, by).await?;
            let mut conn = self.pool.acquire().await.ctx("scanning for due orders")?;
            let due_before_us = crate::now_us() - grace_us;
            let ids = self
                .select_ids(&mut conn, &self.sql.scan_due, due_before_us, limit)
                .await?;
            drop(conn);
            outcomes.extend(self.cancel_batch_if_due(&ids, by).await?);
            let next = if peek && ids.len() < limit as usize {
                let mut conn = self.pool.acquire().await.ctx("reading the next deadline")?;
                self.earliest_pending_in(&mut conn, due_before_us).await?
            } else {
                None
            };
            ScanBatch {
                next_pending: next,
                ..batch_of(ids.len(), &outcomes)
            }
        };
        self.count(&self.counters.rows_read, batch.claimed as u64);
        Ok(batch)
    }

    async fn select_ids(
        &self,
        conn: &mut AnyConnection,
        sql: &SqlStr,
        due_before_us: Micros,
        limit: u32,
    ) -> Result<Vec<OrderId>> {
        self.count(&self.counters.statements, 1);
        let rows = sqlx::query(sql.clone())
            .bind(due_before_us)
            .bind(i64::from(limit))
            .fetch_all(&mut *conn)
            .await
            .ctx("scanning for due orders")?;
        rows.iter()
            .map(|r| r.try_get(0).ctx("scanning for due orders"))
            .collect()
    }

    /// The body of the one cancel function, inside the caller's transaction.
    async fn cancel_in_tx(
        &self,
        conn: &mut AnyConnection,
        ids: &[OrderId],
        by: &str,
    ) -> Result<Vec<(OrderId, CancelOutcome)>> {
        let mut cancels = TxCancels::default();
        self.cancel_each_in_tx(conn, ids, by, &mut cancels).await?;
        self.release_in_tx(conn, cancels).await
    }

    /// The per-order half of the cancel function: each order's conditional
    /// UPDATE and stock movement, its outcome and the units to release
    /// added to `cancels`. [`OrderStore::release_in_tx`] must follow in the
    /// same transaction.
    async fn cancel_each_in_tx(
        &self,
        conn: &mut AnyConnection,
        ids: &[OrderId],
        by: &str,
        cancels: &mut TxCancels,
    ) -> Result<()> {
        let TxCancels { outcomes, releases } = cancels;
        for &id in ids {
            // Read right before this order's UPDATE: see `cancel_if_due`.
            let now_us = crate::now_us();
            self.count(&self.counters.statements, 2);
            let won = sqlx::query(self.sql.cancel_update.clone())
                .bind(now_us)
                .bind(by)
                .bind(id)
                .bind(now_us)
                .execute(&mut *conn)
                .await
                .ctx("cancelling an order")?
                .rows_affected()
                == 1;
            let outcome = if won {
                let row = sqlx::query(self.sql.select_sku_qty.clone())
                    .bind(id)
                    .fetch_one(&mut *conn)
                    .await
                    .ctx("reading a cancelled order")?;
                let (sku, qty): (i64, i32) = (
                    row.try_get(0).ctx("reading a cancelled order")?,
                    row.try_get(1).ctx("reading a cancelled order")?,
                );
                self.count(&self.counters.statements, 1);
                sqlx::query(self.sql.insert_move.clone())
                    .bind(id)
                    .bind("RELEASE")
                    .bind(qty)
                    .bind(now_us)
                    .bind(by)
                    .execute(&mut *conn)
                    .await
                    .ctx("recording a stock release")?;
                *releases.entry(sku).or_default() += i64::from(qty);
                CancelOutcome::Cancelled
            } else {
                let status: Option<String> = sqlx::query(self.sql.select_status.clone())
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await
                    .ctx("classifying a refused cancel")?
                    .map(|r| r.try_get(0))
                    .transpose()
                    .ctx("classifying a refused cancel")?;
                match status.as_deref().and_then(OrderStatus::parse) {
                    None => CancelOutcome::Missing,
                    Some(OrderStatus::Paid) => CancelOutcome::AlreadyPaid,
                    Some(OrderStatus::Cancelled) => CancelOutcome::AlreadyCancelled,
                    Some(OrderStatus::Pending) => CancelOutcome::NotDue,
                }
            };
            outcomes.push((id, outcome));
        }
        Ok(())
    }

    /// The stock half of the cancel function: one UPDATE per SKU, in
    /// ascending SKU order (every transaction that locks several inventory
    /// rows takes them in this order, so none deadlocks on them).
    async fn release_in_tx(
        &self,
        conn: &mut AnyConnection,
        cancels: TxCancels,
    ) -> Result<Vec<(OrderId, CancelOutcome)>> {
        let TxCancels { outcomes, releases } = cancels;
        for (sku, qty) in releases {
            self.count(&self.counters.statements, 1);
            sqlx::query(self.sql.release_stock.clone())
                .bind(qty)
                .bind(sku)
                .execute(&mut *conn)
                .await
                .ctx("releasing stock")?;
        }
        Ok(outcomes)
    }

    /// Counts committed outcomes only, so a retried transaction counts
    /// once, and notes when the commit of each effective cancel returned.
    fn committed(&self, outcomes: &[(OrderId, CancelOutcome)]) {
        self.commit_log.note(outcomes);
        let c = &self.counters;
        for (_, outcome) in outcomes {
            self.count(&c.cancel_attempts, 1);
            let counter = match outcome {
                CancelOutcome::Cancelled => &c.cancelled,
                CancelOutcome::AlreadyPaid => &c.already_paid,
                CancelOutcome::AlreadyCancelled => &c.already_cancelled,
                CancelOutcome::NotDue => &c.not_due,
                CancelOutcome::Missing => &c.missing,
            };
            self.count(counter, 1);
        }
    }
}

/// What the cancels of one transaction have done so far: each order's
/// outcome, and the units to release per SKU (applied by
/// `release_in_tx` in ascending SKU order).
#[derive(Default)]
struct TxCancels {
    outcomes: Vec<(OrderId, CancelOutcome)>,
    releases: BTreeMap<i64, i64>,
}

fn batch_of(claimed: usize, outcomes: &[(OrderId, CancelOutcome)]) -> ScanBatch {
    ScanBatch {
        claimed,
        next_pending: None,
        cancelled: outcomes
            .iter()
            .filter(|(_, o)| *o == CancelOutcome::Cancelled)
            .map(|(id, _)| *id)
            .collect(),
    }
}
