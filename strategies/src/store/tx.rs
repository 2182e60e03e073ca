//! Running a store transaction: [`in_tx!`] begins it, runs the body,
//! commits, and retries the whole transaction (a few times, with backoff)
//! after a deadlock, serialization failure or busy SQLite file; where the
//! probe samples a transaction it also reads the server's row statistics
//! before and after the body, so the transaction's own reads are counted.

use super::handle::OrderStore;
use crate::error::{DbContext, Result};
use sqlx::{AnyConnection, Row};
use std::time::Duration;

/// How often a transaction is retried after a retryable failure.
pub(super) const MAX_RETRIES: u32 = 8;

/// Runs `$body` (an async block using `$conn: &mut AnyConnection`) in a
/// transaction, retrying the whole transaction on retryable errors. It
/// expands in the store's other files, so it names what it uses in full.
macro_rules! in_tx {
    ($store:expr, $context:literal, |$conn:ident| $body:expr) => {{
        use $crate::error::DbContext as _;
        let mut attempt = 0u32;
        loop {
            let result: $crate::error::Result<_> = async {
                // Decided before BEGIN, from the time only, so which
                // transactions are read never depends on what they read.
                let draw = $store.probe_draw();
                let mut tx = $store.pool.begin().await.ctx($context)?;
                let reads_before = match draw {
                    $crate::store::probe::Draw::Read { .. } => {
                        $store.read_server_rows(&mut tx).await?
                    }
                    _ => None,
                };
                let value = {
                    let $conn: &mut sqlx::AnyConnection = &mut tx;
                    $body.await?
                };
                // Read or not, a transaction that got this far counts
                // among those the estimate stands for.
                match (draw, reads_before) {
                    ($crate::store::probe::Draw::Read { weight }, Some((before, spent))) => {
                        if let Some((after, spent_after)) = $store.read_server_rows(&mut tx).await?
                        {
                            let rows = after.saturating_sub(before);
                            $store.count_probe(weight, rows, spent + spent_after);
                        }
                    }
                    ($crate::store::probe::Draw::Unread, _) => $store.count_unread(),
                    _ => {}
                }
                tx.commit().await.ctx($context)?;
                Ok(value)
            }
            .await;
            $store.count(&$store.counters.transactions, 1);
            $store.count(&$store.counters.statements, 2); // BEGIN + COMMIT/ROLLBACK
            match result {
                Err(e) if e.is_retryable() && attempt < $crate::store::tx::MAX_RETRIES => {
                    attempt += 1;
                    $store.count(&$store.counters.retries, 1);
                    tokio::time::sleep(std::time::Duration::from_millis(2u64 << attempt.min(6)))
                        .await;
                }
                other => break other,
            }
        }
    }};
}

pub(super) use in_tx;

impl OrderStore {
    /// The rows this backend has read on the namespace's tables and not
    /// yet published, and how long asking took. That count spans earlier
    /// transactions too (PostgreSQL 15 publishes only when a backend goes
    /// idle), but never moves by a publication inside a transaction, so a
    /// transaction's own reads are the difference between a reading after
    /// BEGIN and one before COMMIT. The statement names the namespace's
    /// relations, read at the first probe (see [`super::probe`]).
    pub(super) async fn read_server_rows(
        &self,
        conn: &mut AnyConnection,
    ) -> Result<Option<(u64, Duration)>> {
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
}
