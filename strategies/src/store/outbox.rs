//! The transactional outbox: a schedule request written in the order's own
//! creating transaction, so it exists exactly when the order does, and a
//! relay ([`crate::outbox`]) that hands it to the strategy afterwards.
//!
//! `outbox (order_id, expire_at_us, created_at_us, leased_until_us)`: a
//! relay claims rows whose lease has passed by pushing their lease forward,
//! schedules them, and deletes the ones that went through. A relay that
//! dies or stalls mid-way leaves its rows to come back when the lease ends,
//! so a request is scheduled at least once, never lost; the strategies
//! already absorb a duplicate `schedule`. The table is not part of the
//! schema contract outside checkers read: it is empty unless a strategy
//! runs with `+outbox`.

use super::handle::OrderStore;
use super::location::DbKind;
use super::sql::{audited, render};
use crate::domain::{Micros, OrderId};
use crate::error::{DbContext, Result};
use sqlx::{AssertSqlSafe, Executor, Row, SqlSafeStr, SqlStr};
use std::time::Duration;

/// One schedule request waiting in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxRow {
    pub order_id: OrderId,
    pub expire_at_us: Micros,
    /// When the order was created (its transaction committed just after).
    pub created_at_us: Micros,
}

/// The rows left in the outbox when a run stops. A row leaves only once a
/// relay deleted it after its schedule went through, so a row can be left
/// with its schedule made: its relay crashed, or its delete failed (a
/// connection killed), between the two; it is then under that relay's
/// lease until another relay schedules it again (a duplicate the strategy
/// absorbs) and deletes it. The rows that matter are those whose order is
/// still pending: nothing may cancel them but such a schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxLeft {
    pub rows: u64,
    /// Rows held back from the relays: under a relay's lease (claimed, not
    /// deleted), or handed back after a failed schedule for a retry in
    /// [`crate::outbox::RELAY_RETRY`].
    pub leased: u64,
    /// Rows whose order is still pending.
    pub of_pending_orders: u64,
}

impl OrderStore {
    /// From now on, [`OrderStore::create_order`] on this handle (and its
    /// clones made after this call) also writes the order's schedule request
    /// into the outbox, in the same transaction.
    pub fn with_outbox(mut self) -> OrderStore {
        self.writes_outbox = true;
        self
    }

    /// Whether `create_order` writes outbox rows (see [`OrderStore::with_outbox`]).
    pub fn writes_outbox(&self) -> bool {
        self.writes_outbox
    }

    /// Claims up to `limit` outbox rows nobody holds, for `lease`: others
    /// skip them until then. Oldest order first. One transaction, counted
    /// in this store's statements like any other; SQLite takes its write
    /// lock up front (`BEGIN IMMEDIATE`), since a read that turns into a
    /// write fails at once there when another writer committed meanwhile.
    pub async fn claim_outbox(&self, limit: u32, lease: Duration) -> Result<Vec<OutboxRow>> {
        let now = crate::now_us();
        let (begin, lock) = match self.location.kind {
            DbKind::Sqlite => ("BEGIN IMMEDIATE", ""),
            _ if self.claims_with_skip_locked() => ("BEGIN", " FOR UPDATE SKIP LOCKED"),
            _ => ("BEGIN", " FOR UPDATE"),
        };
        let select = audited(render(
            self.location.kind,
            &format!(
                "SELECT order_id, expire_at_us, created_at_us FROM outbox \
                 WHERE leased_until_us <= ? ORDER BY order_id LIMIT ?{lock}"
            ),
        ));
        let mut conn = self.pool.acquire().await.ctx("claiming outbox rows")?;
        self.count(&self.counters.transactions, 1);
        self.count(&self.counters.statements, 3); // BEGIN, SELECT, COMMIT
        conn.execute(begin).await.ctx("claiming outbox rows")?;
        let claimed = async {
            let rows = sqlx::query(select)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut *conn)
                .await
                .ctx("claiming outbox rows")?;
            let claimed: Vec<OutboxRow> = rows
                .iter()
                .map(|r| {
                    Ok(OutboxRow {
                        order_id: r.try_get(0).ctx("decoding an outbox row")?,
                        expire_at_us: r.try_get(1).ctx("decoding an outbox row")?,
                        created_at_us: r.try_get(2).ctx("decoding an outbox row")?,
                    })
                })
                .collect::<Result<_>>()?;
            if !claimed.is_empty() {
                self.count(&self.counters.statements, 1);
                conn.execute(lease_sql(
                    now + lease.as_micros() as i64,
                    claimed.iter().map(|r| r.order_id),
                ))
                .await
                .ctx("leasing outbox rows")?;
            }
            conn.execute("COMMIT").await.ctx("claiming outbox rows")?;
            Ok(claimed)
        }
        .await;
        if claimed.is_err() {
            let _ = conn.execute("ROLLBACK").await;
        }
        claimed
    }

    /// Hands rows back for a retry `after` from now (their schedule failed),
    /// instead of leaving them until their lease ends.
    pub async fn release_outbox(&self, ids: &[OrderId], after: Duration) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.count(&self.counters.statements, 1);
        let at = crate::now_us() + after.as_micros() as i64;
        self.pool
            .execute(lease_sql(at, ids.iter().copied()))
            .await
            .ctx("releasing outbox rows")?;
        Ok(())
    }

    /// Deletes the outbox rows of `ids`: their schedule went through.
    pub async fn delete_outbox(&self, ids: &[OrderId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        self.count(&self.counters.statements, 1);
        self.pool
            .execute(AssertSqlSafe(format!(
                "DELETE FROM outbox WHERE order_id IN ({})",
                id_list(ids.iter().copied())
            )))
            .await
            .ctx("deleting sent outbox rows")?;
        Ok(())
    }

    /// What is left in the outbox, for a run's end (see [`OutboxLeft`]): one
    /// statement, so the three counts are of the same rows even while
    /// relays still work.
    pub async fn outbox_left(&self) -> Result<OutboxLeft> {
        let sql = AssertSqlSafe(render(
            self.location.kind,
            &format!(
                "SELECT COUNT(*), COUNT(CASE WHEN b.leased_until_us > ? THEN 1 END), \
                 COUNT(CASE WHEN o.status = '{}' THEN 1 END) \
                 FROM outbox b LEFT JOIN orders o ON o.id = b.order_id",
                crate::domain::OrderStatus::Pending.as_str()
            ),
        ))
        .into_sql_str();
        let row = sqlx::query(sql)
            .bind(crate::now_us())
            .fetch_one(&self.pool)
            .await
            .ctx("counting outbox rows")?;
        let count = |i: usize| -> Result<u64> {
            let n: i64 = row.try_get(i).ctx("counting outbox rows")?;
            Ok(n.max(0) as u64)
        };
        Ok(OutboxLeft {
            rows: count(0)?,
            leased: count(1)?,
            of_pending_orders: count(2)?,
        })
    }

    /// Schedule requests still in the outbox (sent or not yet).
    pub async fn outbox_len(&self) -> Result<u64> {
        let n: i64 = sqlx::query("SELECT COUNT(*) FROM outbox")
            .fetch_one(&self.pool)
            .await
            .ctx("counting outbox rows")?
            .try_get(0)
            .ctx("counting outbox rows")?;
        Ok(n.max(0) as u64)
    }
}

/// Integers only, written inline (as the backlog preload does).
fn lease_sql(until_us: Micros, ids: impl Iterator<Item = OrderId>) -> SqlStr {
    AssertSqlSafe(format!(
        "UPDATE outbox SET leased_until_us = {until_us} WHERE order_id IN ({})",
        id_list(ids)
    ))
    .into_sql_str()
}

/// Integers only, so the list is safe inside the SQL text.
fn id_list(ids: impl Iterator<Item = OrderId>) -> String {
    ids.map(|id| id.to_string()).collect::<Vec<_>>().join(", ")
}
