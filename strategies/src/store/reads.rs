//! Reading orders back: every PENDING order with its deadline (what an
//! in-process strategy reloads on start) and one order as stored.

use super::handle::OrderStore;
use crate::domain::{Micros, OrderId, OrderStatus};
use crate::error::{DbContext, Error, Result};
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
}
