//! The checker: every business invariant, computed from the database itself.
//!
//! This is the product. Each anomaly is a row of one table ([`Anomaly`],
//! in `anomaly.rs`): most are one SQL query over the schema contract (in
//! [`queries`]), each a count plus up to [`MAX_EXAMPLES`] example ids, in
//! the style of Jepsen's checkers; a row the database cannot see is counted
//! by the harness from the instances' outcomes. It lives in the library
//! (not only in the harness) so the conformance suite and the harness judge
//! with the very same queries. `counts.rs` stores the counts and examples
//! per row and writes them as `summary.json` has them.

mod anomaly;
mod counts;
pub mod queries;

pub use anomaly::{Anomaly, Binds, Source};
pub use counts::{Anomalies, AnomalyExamples};

use crate::domain::Micros;
use crate::error::Result;
use crate::store::OrderStore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many example ids each anomaly keeps.
pub const MAX_EXAMPLES: usize = 10;

/// Orders by final state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderCounts {
    pub created: u64,
    pub paid: u64,
    pub cancelled: u64,
    pub pending: u64,
    /// Paid after their deadline while still PENDING: the canceller was
    /// late at least by `paid_at_us - expire_at_us` (censored lateness: a
    /// timeliness figure, not an invariant breach).
    #[serde(default)]
    pub paid_after_deadline: u64,
}

/// Everything the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub orders: OrderCounts,
    pub anomalies: Anomalies,
    pub anomaly_examples: AnomalyExamples,
    /// Cancels per `cancelled_by` (which path cancelled: strategy or fallback).
    pub cancelled_by: BTreeMap<String, u64>,
    /// Payment rows per outcome (APPLIED, REFUNDED, DUPLICATE).
    pub payments: BTreeMap<String, u64>,
    /// RELEASE moves in total (equals `orders.cancelled` when all is well).
    pub releases: u64,
}

impl Verdict {
    pub fn is_clean(&self) -> bool {
        self.anomalies.total() == 0
    }
}

/// Runs every invariant query against `store`'s namespace: each row of the
/// table the checker counts (the instances' rows stay 0 for the harness).
///
/// `drain_us`: how long after its deadline an order may still be PENDING
/// before it counts as a missed cancel; `check_time_us`: now.
pub async fn check(store: &OrderStore, drain_us: Micros, check_time_us: Micros) -> Result<Verdict> {
    check_within(store, drain_us, check_time_us, 0).await
}

/// [`check`] for a run whose parts ran on several hosts: a payment counts a
/// cancel as early only when it saw it cancelled more than
/// `clock_tolerance_us` before the deadline, the most the payer's and the
/// canceller's corrected clocks may be apart (so the tool's own clock
/// error is never reported as an anomaly).
pub async fn check_within(
    store: &OrderStore,
    drain_us: Micros,
    check_time_us: Micros,
    clock_tolerance_us: Micros,
) -> Result<Verdict> {
    let mut v = Verdict::default();
    for anomaly in Anomaly::ALL {
        let Source::Query { sql, binds } = anomaly.source() else {
            continue;
        };
        let ids = store
            .query_i64s(
                sql,
                &binds.values(drain_us, check_time_us, clock_tolerance_us),
            )
            .await?;
        v.anomalies.set(anomaly, ids.len() as u64);
        v.anomaly_examples
            .set(anomaly, ids.into_iter().take(MAX_EXAMPLES).collect());
    }

    for (status, n) in store
        .query_text_counts("SELECT status, COUNT(*) FROM orders GROUP BY status")
        .await?
    {
        let n = n as u64;
        v.orders.created += n;
        match status.as_str() {
            "PAID" => v.orders.paid = n,
            "CANCELLED" => v.orders.cancelled = n,
            "PENDING" => v.orders.pending = n,
            _ => {}
        }
    }
    v.orders.paid_after_deadline = store
        .query_i64s(queries::PAID_AFTER_DEADLINE, &[])
        .await?
        .len() as u64;
    v.cancelled_by = store
        .query_text_counts(
            "SELECT cancelled_by, COUNT(*) FROM orders WHERE status = 'CANCELLED' GROUP BY cancelled_by",
        )
        .await?
        .into_iter()
        .map(|(k, n)| (k, n as u64))
        .collect();
    v.payments = store
        .query_text_counts("SELECT outcome, COUNT(*) FROM payments GROUP BY outcome")
        .await?
        .into_iter()
        .map(|(k, n)| (k, n as u64))
        .collect();
    v.releases = store
        .query_i64s(
            "SELECT COUNT(*) FROM stock_moves WHERE kind = 'RELEASE'",
            &[],
        )
        .await?
        .first()
        .copied()
        .unwrap_or(0) as u64;
    Ok(v)
}

/// One order's timing: for a cancelled order `at_us` is `cancelled_at_us`;
/// for one paid after its deadline, `paid_at_us` (a lower bound on when the
/// canceller would have acted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CancelTiming {
    pub id: i64,
    pub created_at_us: Micros,
    pub expire_at_us: Micros,
    pub at_us: Micros,
}

async fn timings(store: &OrderStore, sql: &str) -> Result<Vec<CancelTiming>> {
    let rows = store.query_i64_rows(sql, &[]).await?;
    Ok(rows
        .into_iter()
        .map(|r| CancelTiming {
            id: r[0],
            created_at_us: r[1],
            expire_at_us: r[2],
            at_us: r[3],
        })
        .collect())
}

/// Every cancelled order's timing, by deadline.
pub async fn cancel_timings(store: &OrderStore) -> Result<Vec<CancelTiming>> {
    timings(
        store,
        "SELECT id, created_at_us, expire_at_us, cancelled_at_us FROM orders \
         WHERE status = 'CANCELLED' ORDER BY expire_at_us, id",
    )
    .await
}

/// Every order paid after its deadline (see [`queries::PAID_AFTER_DEADLINE`]),
/// with `paid_at_us` as its time, by deadline.
pub async fn paid_after_deadline_timings(store: &OrderStore) -> Result<Vec<CancelTiming>> {
    timings(
        store,
        "SELECT id, created_at_us, expire_at_us, paid_at_us FROM orders \
         WHERE status = 'PAID' AND paid_at_us > expire_at_us ORDER BY expire_at_us, id",
    )
    .await
}

/// Every order still PENDING, by deadline; `at_us` is `Micros::MAX` (not
/// resolved when the checker looked).
pub async fn pending_timings(store: &OrderStore) -> Result<Vec<CancelTiming>> {
    let mut pending = timings(
        store,
        "SELECT id, created_at_us, expire_at_us, 0 FROM orders \
         WHERE status = 'PENDING' ORDER BY expire_at_us, id",
    )
    .await?;
    for t in &mut pending {
        t.at_us = Micros::MAX;
    }
    Ok(pending)
}
