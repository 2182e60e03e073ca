//! The checker: every business invariant, computed from the database itself.
//!
//! This is the product. Each anomaly below is one SQL query over the schema
//! contract; each is a count plus up to [`MAX_EXAMPLES`] example ids, in the
//! style of Jepsen's checkers. It lives in the library (not only in the
//! harness) so the conformance suite and the harness judge with the very
//! same queries.

use crate::domain::Micros;
use crate::error::Result;
use crate::store::OrderStore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many example ids each anomaly keeps.
pub const MAX_EXAMPLES: usize = 10;

pub mod queries;

/// Anomaly counts. Every field must be zero for a correct strategy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomalies {
    pub early_cancels: u64,
    pub paid_then_cancelled: u64,
    pub duplicate_releases: u64,
    pub missed_cancels: u64,
    pub refund_errors: u64,
    pub stock_mismatches: u64,
    /// Cancelled orders with no RELEASE move.
    pub unreleased_cancels: u64,
    /// RELEASE moves for orders that are not cancelled.
    pub orphan_releases: u64,
    /// Cancel attempts on orders that did not exist: scheduled by a
    /// transaction that then rolled back, or delivered before its commit.
    /// Not in the database, so the checker cannot see them: the harness
    /// fills this in from the instances' `missing` outcomes.
    #[serde(default)]
    pub phantom_schedules: u64,
}

impl Anomalies {
    /// Field by field, the larger of `self` and `other`: the worst of
    /// several repetitions, so a repeated run never reads cleaner than its
    /// worst repetition.
    pub fn worst(&self, other: &Anomalies) -> Anomalies {
        Anomalies {
            early_cancels: self.early_cancels.max(other.early_cancels),
            paid_then_cancelled: self.paid_then_cancelled.max(other.paid_then_cancelled),
            duplicate_releases: self.duplicate_releases.max(other.duplicate_releases),
            missed_cancels: self.missed_cancels.max(other.missed_cancels),
            refund_errors: self.refund_errors.max(other.refund_errors),
            stock_mismatches: self.stock_mismatches.max(other.stock_mismatches),
            unreleased_cancels: self.unreleased_cancels.max(other.unreleased_cancels),
            orphan_releases: self.orphan_releases.max(other.orphan_releases),
            phantom_schedules: self.phantom_schedules.max(other.phantom_schedules),
        }
    }

    pub fn total(&self) -> u64 {
        self.early_cancels
            + self.paid_then_cancelled
            + self.duplicate_releases
            + self.missed_cancels
            + self.refund_errors
            + self.stock_mismatches
            + self.unreleased_cancels
            + self.orphan_releases
            + self.phantom_schedules
    }
}

/// Up to [`MAX_EXAMPLES`] ids per anomaly (order ids; SKUs for stock).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnomalyExamples {
    pub early_cancels: Vec<i64>,
    pub paid_then_cancelled: Vec<i64>,
    pub duplicate_releases: Vec<i64>,
    pub missed_cancels: Vec<i64>,
    pub refund_errors: Vec<i64>,
    pub stock_mismatches: Vec<i64>,
    pub unreleased_cancels: Vec<i64>,
    pub orphan_releases: Vec<i64>,
}

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

fn find(ids: Vec<i64>, count: &mut u64, examples: &mut Vec<i64>) {
    *count = ids.len() as u64;
    *examples = ids.into_iter().take(MAX_EXAMPLES).collect();
}

/// Runs every invariant query against `store`'s namespace.
///
/// `drain_us`: how long after its deadline an order may still be PENDING
/// before it counts as a missed cancel; `check_time_us`: now.
pub async fn check(store: &OrderStore, drain_us: Micros, check_time_us: Micros) -> Result<Verdict> {
    let mut v = Verdict::default();
    let (a, e) = (&mut v.anomalies, &mut v.anomaly_examples);
    find(
        store.query_i64s(queries::EARLY_CANCELS, &[]).await?,
        &mut a.early_cancels,
        &mut e.early_cancels,
    );
    find(
        store.query_i64s(queries::PAID_THEN_CANCELLED, &[]).await?,
        &mut a.paid_then_cancelled,
        &mut e.paid_then_cancelled,
    );
    find(
        store.query_i64s(queries::DUPLICATE_RELEASES, &[]).await?,
        &mut a.duplicate_releases,
        &mut e.duplicate_releases,
    );
    find(
        store.query_i64s(queries::UNRELEASED_CANCELS, &[]).await?,
        &mut a.unreleased_cancels,
        &mut e.unreleased_cancels,
    );
    find(
        store.query_i64s(queries::ORPHAN_RELEASES, &[]).await?,
        &mut a.orphan_releases,
        &mut e.orphan_releases,
    );
    find(
        store
            .query_i64s(queries::MISSED_CANCELS, &[drain_us, check_time_us])
            .await?,
        &mut a.missed_cancels,
        &mut e.missed_cancels,
    );
    find(
        store.query_i64s(queries::REFUND_ERRORS, &[]).await?,
        &mut a.refund_errors,
        &mut e.refund_errors,
    );
    find(
        store.query_i64s(queries::STOCK_MISMATCHES, &[]).await?,
        &mut a.stock_mismatches,
        &mut e.stock_mismatches,
    );

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
