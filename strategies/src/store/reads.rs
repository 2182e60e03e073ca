//! Reading orders back: every PENDING order with its deadline (what an
//! in-process strategy reloads on start) and one order as stored.

use super::handle::OrderStore;
use crate::domain::{Micros, OrderId, OrderStatus, Share};
use crate::error::{DbContext, Error, Result};
use futures_util::TryStreamExt;
use sqlx::Row;

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
    /// Every PENDING order with its deadline, in no particular order,
    /// handed to `each` a chunk of at most `chunk` at a time as the rows
    /// stream in; returns how many. An in-process strategy reloads these
    /// on start: streamed, it never holds every row at once (read whole,
    /// ten million rows left a wheel worker at 1.8 GB, five times what the
    /// same orders took through `schedule`). A read that fails midway has
    /// handed on what came before it.
    ///
    /// With a `share`, only that share's orders (`id % of = index`), read
    /// as such by the database.
    pub async fn pending_orders_in_chunks(
        &self,
        chunk: usize,
        share: Option<Share>,
        mut each: impl FnMut(&[(OrderId, Micros)]),
    ) -> Result<u64> {
        self.count(&self.counters.statements, 1);
        let query = match share {
            None => sqlx::query(self.sql.pending_orders.clone()),
            Some(share) => sqlx::query(self.sql.pending_orders_of_share.clone())
                .bind(i64::from(share.of.max(1)))
                .bind(i64::from(share.index)),
        };
        let mut rows = query.fetch(&self.pool);
        let mut batch = Vec::with_capacity(chunk);
        let mut read = 0u64;
        let result = async {
            while let Some(row) = rows.try_next().await.ctx("loading pending orders")? {
                batch.push((
                    row.try_get(0).ctx("loading")?,
                    row.try_get(1).ctx("loading")?,
                ));
                if batch.len() >= chunk {
                    each(&batch);
                    read += batch.len() as u64;
                    batch.clear();
                }
            }
            if !batch.is_empty() {
                each(&batch);
                read += batch.len() as u64;
            }
            Ok(read)
        }
        .await;
        self.count(&self.counters.rows_read, read);
        result
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
}
