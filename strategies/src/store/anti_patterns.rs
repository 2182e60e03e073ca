//! Teaching variants of the cancel function: the known mistakes, reproduced
//! on purpose so the checker can show their damage. Off by default; nothing
//! correct calls them. The checker's own tests use them to prove that every
//! anomaly they cause is counted.

use super::handle::OrderStore;
use crate::domain::{Micros, OrderId};
use crate::error::{DbContext, Result};
use serde::{Deserialize, Serialize};
use sqlx::Row;

/// A broken way to cancel an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AntiPattern {
    /// `UPDATE orders SET status='CANCELLED' WHERE id=?` without naming the
    /// old state: cancels paid orders and releases stock again on every call.
    UnconditionalUpdate,
    /// Releases the stock first, then runs the conditional UPDATE and commits
    /// whatever it returned: a lost race still releases.
    ReleaseBeforeUpdate,
    /// The conditional UPDATE without `expire_at_us <= now`: cancels early.
    CancelBeforeDeadline,
    /// The correct cancel on a clock that runs ahead: the caller's `now` is
    /// later than the real time, so it cancels early and stamps the cancel
    /// on time (a worker on a host whose offset went uncorrected).
    ClockAhead,
}

impl OrderStore {
    /// Cancels `order_id` the broken way `pattern` describes, in one
    /// transaction. Returns whether the UPDATE changed the order.
    pub async fn cancel_with_anti_pattern(
        &self,
        pattern: AntiPattern,
        order_id: OrderId,
        now_us: Micros,
        by: &str,
    ) -> Result<bool> {
        let kind = self.location.kind;
        let update = match pattern {
            AntiPattern::UnconditionalUpdate => {
                "UPDATE orders SET status = 'CANCELLED', cancelled_at_us = ?, cancelled_by = ? \
                 WHERE id = ? AND ? = ?"
            }
            AntiPattern::CancelBeforeDeadline => {
                "UPDATE orders SET status = 'CANCELLED', cancelled_at_us = ?, cancelled_by = ? \
                 WHERE id = ? AND status = 'PENDING' AND ? = ?"
            }
            AntiPattern::ReleaseBeforeUpdate | AntiPattern::ClockAhead => {
                "UPDATE orders SET status = 'CANCELLED', cancelled_at_us = ?, cancelled_by = ? \
                 WHERE id = ? AND status = 'PENDING' AND expire_at_us <= ?"
            }
        };
        let update = super::sql::render(kind, update);
        let mut tx = self.pool.begin().await.ctx("cancelling (anti-pattern)")?;
        let row = sqlx::query(self.sql.select_sku_qty.clone())
            .bind(order_id)
            .fetch_one(&mut *tx)
            .await
            .ctx("cancelling (anti-pattern)")?;
        let (sku, qty): (i64, i32) = (
            row.try_get(0).ctx("cancelling (anti-pattern)")?,
            row.try_get(1).ctx("cancelling (anti-pattern)")?,
        );
        let release_first = pattern == AntiPattern::ReleaseBeforeUpdate;
        if release_first {
            self.release_raw(&mut tx, order_id, sku, qty, now_us, by)
                .await?;
        }
        let mut query = sqlx::query(super::sql::audited(update))
            .bind(now_us)
            .bind(by)
            .bind(order_id);
        // The always-true `? = ?` keeps the bind count equal across variants.
        query = match pattern {
            AntiPattern::ReleaseBeforeUpdate | AntiPattern::ClockAhead => query.bind(now_us),
            _ => query.bind(1_i64).bind(1_i64),
        };
        let changed = query
            .execute(&mut *tx)
            .await
            .ctx("cancelling (anti-pattern)")?
            .rows_affected()
            == 1;
        if changed && !release_first {
            self.release_raw(&mut tx, order_id, sku, qty, now_us, by)
                .await?;
        }
        tx.commit().await.ctx("cancelling (anti-pattern)")?;
        Ok(changed)
    }

    async fn release_raw(
        &self,
        conn: &mut sqlx::AnyConnection,
        order_id: OrderId,
        sku: i64,
        qty: i32,
        now_us: Micros,
        by: &str,
    ) -> Result<()> {
        sqlx::query(self.sql.insert_move.clone())
            .bind(order_id)
            .bind("RELEASE")
            .bind(qty)
            .bind(now_us)
            .bind(by)
            .execute(&mut *conn)
            .await
            .ctx("releasing (anti-pattern)")?;
        sqlx::query(self.sql.release_stock.clone())
            .bind(i64::from(qty))
            .bind(sku)
            .execute(&mut *conn)
            .await
            .ctx("releasing (anti-pattern)")?;
        Ok(())
    }
}
