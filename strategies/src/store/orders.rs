//! Creating orders and paying them: the creating transaction (reserve
//! stock, insert the order, record the move, the outbox row), preloading
//! a backlog, and the payment callback (`PENDING -> PAID`, or a refund
//! recorded once per callback). The one cancel function is in
//! [`cancel`](super::cancel); transactions run through
//! [`in_tx!`](super::tx).
//!
//! Every transition is a conditional UPDATE naming the old state; the
//! affected-row count decides who won.

use super::handle::OrderStore;
use super::tx::{in_tx, MAX_RETRIES};
use crate::domain::{CreateOutcome, Micros, NewOrder, OrderId, OrderStatus, PaymentOutcome};
use crate::error::{DbContext, Error, Result};
use sqlx::{AnyConnection, Row};
use std::time::Duration;

/// Orders per multi-row INSERT of [`OrderStore::preload_pending`].
pub const PRELOAD_ROWS: u64 = 1000;

impl OrderStore {
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
            // When this callback found the order already CANCELLED, on the
            // payer's clock: that cancel had committed by then, so if this
            // is before the deadline the cancel was early, whatever its
            // own stamp says (the checker's second clock on early cancels).
            let mut seen_cancelled_at_us = None;
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
                    if status == OrderStatus::Cancelled.as_str() {
                        seen_cancelled_at_us = Some(crate::domain::now_us());
                    }
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
                .bind(seen_cancelled_at_us)
                .execute(&mut *conn)
                .await
                .ctx("recording a payment")?;
            Ok(outcome)
        })
    }
}
