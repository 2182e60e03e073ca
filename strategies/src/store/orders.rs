//! The state transitions: create, pay, and the one cancel function.
//!
//! Every transition is a conditional UPDATE naming the old state; the
//! affected-row count decides who won. Every transaction is retried (a few
//! times, with backoff) after a deadlock, serialization failure or busy
//! SQLite file, and stock rows are always updated in ascending SKU order so
//! two cancellers cannot deadlock on them.

use super::handle::OrderStore;
use super::probe::Draw;
use crate::domain::{
    CancelOutcome, CreateOutcome, Micros, NewOrder, OrderId, OrderStatus, PaymentOutcome,
};
use crate::error::{DbContext, Error, Result};
use sqlx::{AnyConnection, Row, SqlStr};
use std::collections::BTreeMap;
use std::time::Duration;

/// Orders per multi-row INSERT of [`OrderStore::preload_pending`].
pub const PRELOAD_ROWS: u64 = 1000;

/// How often a transaction is retried after a retryable failure.
const MAX_RETRIES: u32 = 8;

/// Runs `$body` (an async block using `$conn: &mut AnyConnection`) in a
/// transaction, retrying the whole transaction on retryable errors.
macro_rules! in_tx {
    ($store:expr, $context:literal, |$conn:ident| $body:expr) => {{
        let mut attempt = 0u32;
        loop {
            let result: Result<_> = async {
                // Decided before BEGIN, from the time only, so which
                // transactions are read never depends on what they read.
                let draw = $store.probe_draw();
                let mut tx = $store.pool.begin().await.ctx($context)?;
                let reads_before = match draw {
                    Draw::Read { .. } => $store.read_server_rows(&mut tx).await?,
                    Draw::Off | Draw::Unread => None,
                };
                let value = {
                    let $conn: &mut AnyConnection = &mut tx;
                    $body.await?
                };
                // Read or not, a transaction that got this far counts
                // among those the estimate stands for.
                match (draw, reads_before) {
                    (Draw::Read { weight }, Some((before, spent))) => {
                        if let Some((after, spent_after)) = $store.read_server_rows(&mut tx).await?
                        {
                            let rows = after.saturating_sub(before);
                            $store.count_probe(weight, rows, spent + spent_after);
                        }
                    }
                    (Draw::Unread, _) => $store.count_unread(),
                    (Draw::Off, _) | (Draw::Read { .. }, None) => {}
                }
                tx.commit().await.ctx($context)?;
                Ok(value)
            }
            .await;
            $store.count(&$store.counters.transactions, 1);
            $store.count(&$store.counters.statements, 2); // BEGIN + COMMIT/ROLLBACK
            match result {
                Err(e) if e.is_retryable() && attempt < MAX_RETRIES => {
                    attempt += 1;
                    $store.count(&$store.counters.retries, 1);
                    tokio::time::sleep(Duration::from_millis(2u64 << attempt.min(6))).await;
                }
                other => break other,
            }
        }
    }};
}

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

/// One order as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRow {
    pub id: OrderId,
    pub status: OrderStatus,
    pub expire_at_us: Micros,
    pub cancelled_at_us: Option<Micros>,
    pub cancelled_by: Option<String>,
}

impl OrderStore {
    /// The rows this backend has read on the namespace's tables and not
    /// yet published, and how long asking took. That count spans earlier
    /// transactions too (PostgreSQL 15 publishes only when a backend goes
    /// idle), but never moves by a publication inside a transaction, so a
    /// transaction's own reads are the difference between a reading after
    /// BEGIN and one before COMMIT. The statement names the namespace's
    /// relations, read at the first probe (see [`super::probe`]).
    async fn read_server_rows(&self, conn: &mut AnyConnection) -> Result<Option<(u64, Duration)>> {
        let started = std::time::Instant::now();
        let sql = match self.probe.reading.get() {
            Some(sql) => sql.clone(),
            None => {
                let rows = sqlx::query(super::probe::RELATIONS_SQL)
                    .fetch_all(&mut *conn)
                    .await
                    .ctx("listing the namespace's relations for the row statistics")?;
                let relations = rows
                    .iter()
                    .map(|r| {
                        let oid: i64 = r.try_get(0)?;
                        let index: i32 = r.try_get(1)?;
                        let orders: i32 = r.try_get(2)?;
                        Ok((oid as u32, index == 1, orders == 1))
                    })
                    .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
                    .ctx("listing the namespace's relations for the row statistics")?;
                if !relations.iter().any(|r| r.2) {
                    // No schema yet: this transaction goes unread, and the
                    // list is read again next time rather than kept empty.
                    return Ok(None);
                }
                let pairs: Vec<(u32, bool)> = relations.iter().map(|r| (r.0, r.1)).collect();
                let sql = super::sql::audited(super::probe::reading_sql(&pairs));
                let _ = self.probe.reading.set(sql.clone());
                sql
            }
        };
        let read: i64 = sqlx::query(sql)
            .fetch_one(&mut *conn)
            .await
            .ctx("reading the transaction's row statistics")?
            .try_get(0)
            .ctx("reading the transaction's row statistics")?;
        Ok(Some((read.max(0) as u64, started.elapsed())))
    }

    /// Creates a PENDING order and reserves its stock, in one transaction
    /// (with its outbox row, on a store made [`OrderStore::with_outbox`]).
    /// Refused (nothing written) when the SKU has fewer than `qty` units.
    pub async fn create_order(&self, order: &NewOrder) -> Result<CreateOutcome> {
        in_tx!(self, "creating an order", |conn| self
            .write_order(conn, order))
    }

    /// [`OrderStore::create_order`] with a step between writing the order
    /// and committing: `before_commit` runs inside the open transaction
    /// (what a service that publishes before it commits does), then the
    /// transaction commits, or rolls back when `roll_back` (the checkout
    /// failed after the order was written). Retried, like every
    /// transaction, up to `before_commit`, and not after: a retry would run
    /// it again.
    pub async fn create_order_with<F>(
        &self,
        order: &NewOrder,
        roll_back: bool,
        before_commit: F,
    ) -> Result<CreateOutcome>
    where
        F: std::future::Future<Output = ()>,
    {
        // Retried like every transaction, but only up to `before_commit`:
        // once that ran, a retry would run it again.
        let mut attempt = 0u32;
        let (tx, outcome) = loop {
            let mut tx = self.pool.begin().await.ctx("creating an order")?;
            self.count(&self.counters.transactions, 1);
            self.count(&self.counters.statements, 2);
            match self.write_order(&mut tx, order).await {
                Ok(outcome) => break (tx, outcome),
                Err(e) if e.is_retryable() && attempt < MAX_RETRIES => {
                    let _ = tx.rollback().await;
                    attempt += 1;
                    self.count(&self.counters.retries, 1);
                    tokio::time::sleep(Duration::from_millis(2u64 << attempt.min(6))).await;
                }
                Err(e) => return Err(e),
            }
        };
        if outcome != CreateOutcome::Created {
            tx.rollback().await.ctx("creating an order")?;
            return Ok(outcome);
        }
        before_commit.await;
        if roll_back {
            tx.rollback().await.ctx("rolling back an order")?;
            return Ok(CreateOutcome::RolledBack);
        }
        tx.commit().await.ctx("creating an order")?;
        Ok(CreateOutcome::Created)
    }

    /// The creating transaction's statements: reserve, insert, record the
    /// move, and the outbox row where the store writes one.
    async fn write_order(
        &self,
        conn: &mut AnyConnection,
        order: &NewOrder,
    ) -> Result<CreateOutcome> {
        self.count(&self.counters.statements, 1);
        let reserved = sqlx::query(self.sql.reserve_stock.clone())
            .bind(i64::from(order.qty))
            .bind(order.sku)
            .bind(i64::from(order.qty))
            .execute(&mut *conn)
            .await
            .ctx("reserving stock")?
            .rows_affected();
        if reserved == 0 {
            return Ok(CreateOutcome::OutOfStock);
        }
        self.count(&self.counters.statements, 2);
        sqlx::query(self.sql.insert_order.clone())
            .bind(order.id)
            .bind(order.sku)
            .bind(order.qty)
            .bind(order.created_at_us)
            .bind(order.expire_at_us)
            .execute(&mut *conn)
            .await
            .ctx("inserting an order")?;
        sqlx::query(self.sql.insert_move.clone())
            .bind(order.id)
            .bind("RESERVE")
            .bind(order.qty)
            .bind(order.created_at_us)
            .bind("order-service")
            .execute(&mut *conn)
            .await
            .ctx("recording a stock reservation")?;
        if self.notifies_deadlines {
            self.notify_deadline(conn, order.expire_at_us).await?;
        }
        if self.writes_outbox {
            self.count(&self.counters.statements, 1);
            sqlx::query(self.sql.insert_outbox.clone())
                .bind(order.id)
                .bind(order.expire_at_us)
                .bind(order.created_at_us)
                .execute(&mut *conn)
                .await
                .ctx("writing the order's outbox row")?;
        }
        Ok(CreateOutcome::Created)
    }

    /// Preloads a backlog: `count` PENDING orders with ids from `first_id`,
    /// one unit each of SKUs 1..=`skus` in turn, all due at `expire_at_us`,
    /// reserved as [`OrderStore::create_order`] reserves (stock taken and a
    /// RESERVE move each, so the checker's stock balance holds). The stock
    /// is taken first, in one transaction, refused whole when short; the
    /// orders follow in multi-row INSERTs of [`PRELOAD_ROWS`], one
    /// transaction each. Ids and times are integers written inline.
    pub async fn preload_pending(
        &self,
        first_id: OrderId,
        count: u64,
        created_at_us: Micros,
        expire_at_us: Micros,
        skus: u32,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let skus = u64::from(skus.max(1));
        let sku_of = |k: u64| (k % skus + 1) as i64;
        // Units per SKU: every SKU gets count / skus, the first count % skus one more.
        let units = |sku: u64| (count / skus + u64::from(sku <= count % skus)) as i64;
        in_tx!(self, "reserving stock for a backlog", |conn| async {
            for sku in 1..=skus {
                let taken = sqlx::query(self.sql.reserve_stock.clone())
                    .bind(units(sku))
                    .bind(sku as i64)
                    .bind(units(sku))
                    .execute(&mut *conn)
                    .await
                    .ctx("reserving stock for a backlog")?
                    .rows_affected();
                if taken == 0 {
                    return Err(Error::Config(format!(
                        "a backlog of {count} orders needs {} units of SKU {sku}, more than \
                         `stock.initial` leaves; raise `stock.initial`",
                        units(sku)
                    )));
                }
            }
            Ok::<_, Error>(())
        })?;
        let by = match self.location.kind {
            super::DbKind::Mysql => "`by`",
            _ => "\"by\"",
        };
        let mut k = 0;
        while k < count {
            let rows = (count - k).min(PRELOAD_ROWS);
            let (mut orders, mut moves) = (String::new(), String::new());
            for j in k..k + rows {
                let sep = if j == k { "" } else { "," };
                let id = first_id + j as OrderId;
                let sku = sku_of(j);
                orders += &format!("{sep}({id},{sku},1,'PENDING',{created_at_us},{expire_at_us})");
                moves += &format!("{sep}({id},'RESERVE',1,{created_at_us},'backlog')");
            }
            let orders = format!(
                "INSERT INTO orders (id, sku, qty, status, created_at_us, expire_at_us) VALUES {orders}"
            );
            let moves = format!(
                "INSERT INTO stock_moves (order_id, kind, qty, at_us, {by}) VALUES {moves}"
            );
            // Every value in these literals is an integer or a constant
            // string this function wrote, so the text is safe to send as is.
            let (orders, moves) = (super::sql::audited(orders), super::sql::audited(moves));
            in_tx!(self, "preloading backlog orders", |conn| async {
                sqlx::query(orders.clone())
                    .execute(&mut *conn)
                    .await
                    .ctx("inserting backlog orders")?;
                sqlx::query(moves.clone())
                    .execute(&mut *conn)
                    .await
                    .ctx("recording backlog reservations")?;
                Ok::<_, Error>(())
            })?;
            k += rows;
        }
        Ok(())
    }

    /// The payment callback: `PENDING -> PAID`, or, if the order was
    /// cancelled first, a refund recorded exactly once per `callback_id`
    /// however often the gateway retries it.
    pub async fn pay(
        &self,
        order_id: OrderId,
        callback_id: &str,
        now_us: Micros,
    ) -> Result<PaymentOutcome> {
        in_tx!(self, "applying a payment callback", |conn| async {
            self.count(&self.counters.statements, 1);
            let paid = sqlx::query(self.sql.pay_update.clone())
                .bind(now_us)
                .bind(order_id)
                .execute(&mut *conn)
                .await
                .ctx("marking an order paid")?
                .rows_affected();
            let outcome = if paid == 1 {
                PaymentOutcome::Applied
            } else {
                // Lock the order row so concurrent copies of one callback
                // serialise here and only the first records the refund.
                self.count(&self.counters.statements, 2);
                let status = sqlx::query(self.sql.select_status_for_update.clone())
                    .bind(order_id)
                    .fetch_optional(&mut *conn)
                    .await
                    .ctx("locking a paid or cancelled order")?;
                let Some(status) = status else {
                    return Ok::<_, Error>(PaymentOutcome::Missing);
                };
                let status: String = status.try_get(0).ctx("reading an order's status")?;
                if status == OrderStatus::Pending.as_str() {
                    // The order's creating transaction committed after the
                    // UPDATE above looked (a callback racing its order's
                    // commit): it is PENDING and locked now, so it is paid,
                    // never refunded.
                    self.count(&self.counters.statements, 1);
                    sqlx::query(self.sql.pay_update.clone())
                        .bind(now_us)
                        .bind(order_id)
                        .execute(&mut *conn)
                        .await
                        .ctx("marking an order paid")?;
                    PaymentOutcome::Applied
                } else {
                    let captures: i64 = sqlx::query(self.sql.count_captures.clone())
                        .bind(callback_id)
                        .fetch_one(&mut *conn)
                        .await
                        .ctx("looking up earlier callbacks")?
                        .try_get(0)
                        .ctx("looking up earlier callbacks")?;
                    if captures > 0 {
                        PaymentOutcome::Duplicate
                    } else {
                        PaymentOutcome::Refunded
                    }
                }
            };
            self.count(&self.counters.statements, 1);
            sqlx::query(self.sql.insert_payment.clone())
                .bind(order_id)
                .bind(callback_id)
                .bind(now_us)
                .bind(outcome.as_str())
                .execute(&mut *conn)
                .await
                .ctx("recording a payment")?;
            Ok(outcome)
        })
    }

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
        let outcomes = in_tx!(self, "cancelling orders", |conn| self
            .cancel_in_tx(conn, ids, by))?;
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

    /// Every PENDING order with its deadline, earliest first (an in-process
    /// strategy reloads these on start).
    pub async fn pending_orders(&self) -> Result<Vec<(OrderId, Micros)>> {
        self.count(&self.counters.statements, 1);
        let rows = sqlx::query(self.sql.pending_orders.clone())
            .fetch_all(&self.pool)
            .await
            .ctx("loading pending orders")?;
        self.count(&self.counters.rows_read, rows.len() as u64);
        rows.iter()
            .map(|r| Ok((r.try_get(0).ctx("loading")?, r.try_get(1).ctx("loading")?)))
            .collect()
    }

    /// One order as stored, or `None`.
    pub async fn order(&self, order_id: OrderId) -> Result<Option<OrderRow>> {
        let sql = super::sql::audited(super::sql::render(
            self.location.kind,
            "SELECT id, status, expire_at_us, cancelled_at_us, cancelled_by FROM orders WHERE id = ?",
        ));
        let row = sqlx::query(sql)
            .bind(order_id)
            .fetch_optional(&self.pool)
            .await
            .ctx("reading an order")?;
        row.map(|r| {
            let status: String = r.try_get(1).ctx("reading an order")?;
            Ok(OrderRow {
                id: r.try_get(0).ctx("reading an order")?,
                status: OrderStatus::parse(&status).ok_or_else(|| Error::Database {
                    context: "reading an order",
                    message: format!("unknown status `{status}`"),
                    retryable: false,
                })?,
                expire_at_us: r.try_get(2).ctx("reading an order")?,
                cancelled_at_us: r.try_get(3).ctx("reading an order")?,
                cancelled_by: r.try_get(4).ctx("reading an order")?,
            })
        })
        .transpose()
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
