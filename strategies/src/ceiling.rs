//! `ceiling`: the yardstick, not a way to build a shop.
//!
//! It cancels orders from an in-process list (a min-heap by deadline), with
//! no delay mechanism at all: no tick rounding, no scan, no broker or Redis
//! round trip. What remains is the work every strategy has to do anyway:
//! the harness's create and pay transactions and the conditional cancel. So
//! the highest rate at which the ceiling keeps its promise is what the
//! database and the harness allow on this machine, and a sweep reports each
//! strategy's maximum rate as a share of it.
//!
//! Its cancels are as cheap as any strategy's can be, so that no strategy
//! can pass it by batching more coarsely or by sharing the work better. The
//! in-process list only times the wake: when one of this instance's orders
//! falls due, the instance runs db-scan's claim, the cheapest read there is
//! (the `(status, expire_at_us)` range of due PENDING orders, `FOR UPDATE
//! SKIP LOCKED`, [`MAX_BATCH`] at a time until a batch comes back short),
//! and cancels what it claimed in the same transaction. It takes every
//! due order, its own and the other instances', so two instances share the
//! work as two db-scan instances do, and a paid order costs nothing (the
//! claim never sees it). At most one claim per [`WINDOW`] per instance,
//! the db-scan interval the sweep, storm and backlog presets set (db-scan's
//! own default, 250 ms, batches more coarsely: a sweep of db-scan at its
//! default would not be bounded by this); a full batch does not wait.
//!
//! So under load it does db-scan's work, every window, and when little is
//! due it claims only when something is: never more work than db-scan's, and
//! its orders wait for a claim no longer than db-scan's wait for a scan. The
//! first order after a quiet spell is cancelled the moment it is due.
//!
//! Three ceilings were beaten before this one, which is why it is built so:
//! - one `cancel_if_due` per order: it held 1300 orders/s where db-scan held
//!   2600 (PostgreSQL, 2 cores);
//! - a batch per free connection, growing only under load (until issue 22):
//!   in the reference sweep 20261202-152826-sweep it held 1800 orders/s and
//!   db-scan 2400 (133 %), the wheel 2200 (122 %), at 331 µs of worker CPU
//!   per cancel against db-scan's 112;
//! - one transaction per window of this instance's own due orders, read by
//!   id (bounded by the batch's latest deadline, as db-scan's scan is): in
//!   results/sweep/20261204-225943-sweep it held 2000 and db-scan 2200
//!   (110 %), and at 2000 orders/s its lateness p50 was about 28 ms above
//!   db-scan's with two instances, the same with one (hand runs): each of
//!   its instances waited a window for its own orders, where two db-scan
//!   instances 100 ms apart take turns about every 50 ms.
//!
//! Its lateness (up to a window) is not what it is for: the sweep compares
//! only its maximum rate.
//!
//! Like the timing wheel it keeps its schedule in the process, and unlike
//! the wheel it does not reload PENDING orders on start: a dead instance's
//! orders wait until another instance claims (any instance takes every
//! due order), or for a `fallback-scan`. It is never selected by default;
//! `delaybench sweep` runs it first.

use crate::canceller::{Canceller, Capabilities, StrategyCounters};
use crate::crash::CrashPoint;
use crate::db_scan::{cancel_until_short, claiming_capabilities, Claim};
use crate::domain::{now_us, Micros, OrderId};
use crate::error::Result;
use crate::store::{OrderStore, StoreStats};
use crate::wake::{DeadlineWaker, Heed};
use async_trait::async_trait;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long to wait before claiming again after a claim failed.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// How long the driver sleeps with an empty list (a schedule wakes it).
const IDLE_SLEEP: Duration = Duration::from_secs(3600);

/// The most orders one claim takes (db-scan's default `batch-size`). A
/// full batch does not wait for the window: the next goes at once.
pub const MAX_BATCH: usize = 500;

/// At most one claim per window per instance, unless a batch comes back
/// full (db-scan's default `interval`): see the module docs.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The ceiling (one instance).
#[derive(Debug)]
pub struct Ceiling {
    store: OrderStore,
    list: Mutex<DueList>,
    /// Wakes the driver when a deadline earlier than its sleep arrives.
    waker: DeadlineWaker,
    counters: Counters,
}

/// This instance's orders, by deadline: only when to claim, not what.
#[derive(Debug, Default)]
struct DueList {
    /// `(deadline, order)`, earliest first.
    due: BinaryHeap<Reverse<(Micros, OrderId)>>,
    /// Orders in `due` or taken by a claim still running: a duplicate
    /// `schedule` is dropped.
    held: HashSet<OrderId>,
}

impl DueList {
    /// Adds `order` due at `at`; false (and nothing added) if it is held.
    fn insert(&mut self, order: OrderId, at: Micros) -> bool {
        let new = self.held.insert(order);
        if new {
            self.due.push(Reverse((at, order)));
        }
        new
    }

    /// The earliest deadline in the list.
    fn next(&self) -> Option<Micros> {
        self.due.peek().map(|Reverse((at, _))| *at)
    }

    /// Takes the orders due by `bound` out of the list, before the claim
    /// that covers them starts. Each was scheduled after its order
    /// committed, so the claim's reads see it: it cancels it, or it is no
    /// longer PENDING, or another claim holds it (that claim cancels it or,
    /// failing, claims again). An order scheduled while the claim runs
    /// stays in the list for the next, even if already due: under a lagging
    /// generator orders arrive overdue, and the claim may have read past
    /// them. (Dropping every order due by the bound after the claim instead
    /// left 222 PENDING after a step at 3 200 orders/s in
    /// results/sweep/20261205-025337-sweep, when no claim came after.)
    fn take_due_by(&mut self, bound: Micros) -> Vec<(Micros, OrderId)> {
        let mut taken = Vec::new();
        while let Some(Reverse((at, order))) = self.due.peek().copied() {
            if at > bound {
                break;
            }
            self.due.pop();
            taken.push((at, order));
        }
        taken
    }

    /// After the claim that covered `taken`: done with them or, when it
    /// failed, they go back in the list.
    fn settle(&mut self, taken: Vec<(Micros, OrderId)>, claimed: bool) {
        for (at, order) in taken {
            if claimed {
                self.held.remove(&order);
            } else {
                self.due.push(Reverse((at, order)));
            }
        }
    }
}

crate::canceller::counters! {
    struct Counters {
        scheduled,
        duplicate_schedules,
        /// Claims run because one of this instance's orders fell due.
        claims,
        /// Claim transactions (a full batch is followed by another).
        batches,
        /// Orders this instance's claims cancelled, its own or others'.
        cancelled,
        /// Claimed orders this instance did not cancel: not due at their
        /// UPDATE (the wall clock stepped back) or, where claims take no row
        /// locks (SQLite), cancelled by another instance first. Another
        /// claim follows shortly.
        claimed_not_cancelled,
        errors,
    }
}

impl Ceiling {
    pub fn new(store: OrderStore) -> Self {
        Ceiling {
            store,
            list: Mutex::new(DueList::default()),
            waker: DeadlineWaker::default(),
            counters: Counters::default(),
        }
    }

    fn list(&self) -> std::sync::MutexGuard<'_, DueList> {
        self.list.lock().expect("ceiling lock")
    }
}

#[async_trait]
impl Canceller for Ceiling {
    fn name(&self) -> &str {
        "ceiling"
    }

    fn capabilities(&self) -> Capabilities {
        let mut capabilities = claiming_capabilities(
            &self.store,
            vec![
                "a yardstick, not a design: an in-process list times the wake, and each wake \
                 runs db-scan's claim of every due order (at most one per 100 ms per \
                 instance), so its limits are the database's and the harness's"
                    .into(),
                "keeps its schedule in memory and reloads nothing on start: a dead \
                 instance's orders wait for another instance's claim or a fallback-scan"
                    .into(),
            ],
        );
        capabilities.durable_across_restart = false;
        capabilities.needs_fallback = true;
        capabilities.instance_owns_its_orders = true;
        capabilities
    }

    async fn setup(&self) -> Result<()> {
        Ok(())
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        if !self.list().insert(order_id, expire_at_us) {
            self.counters
                .duplicate_schedules
                .fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.counters.scheduled.fetch_add(1, Ordering::Relaxed);
        self.waker.wake_for(expire_at_us);
        Ok(())
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        let window = WINDOW.as_micros() as Micros;
        // When the next claim may go (see WINDOW).
        let mut next_claim_at: Micros = Micros::MIN;
        // A claim owed whatever the list says: the last one failed (what
        // it held is pending again) or found a claimed order not yet due.
        let mut retry_at: Option<Micros> = None;
        loop {
            let now = now_us();
            if now < next_claim_at {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_micros((next_claim_at - now) as u64)) => {}
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
            // What was scheduled before is in the list read next; later
            // schedules stay heard for the sleep.
            self.waker.take();
            let wake_at = [self.list().next(), retry_at]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or_else(|| now_us() + IDLE_SLEEP.as_micros() as i64);
            let bound = now_us();
            if wake_at > bound {
                self.waker
                    .sleep_until(wake_at, Heed::Deadlines, &shutdown)
                    .await;
                if shutdown.is_cancelled() {
                    return Ok(());
                }
                continue;
            }
            next_claim_at = bound + window;
            retry_at = None;
            self.counters.claims.fetch_add(1, Ordering::Relaxed);
            let taken = self.list().take_due_by(bound);
            // db-scan's claim, batch after batch until one comes back short.
            let claim = cancel_until_short(
                &self.store,
                Claim::Due { grace_us: 0 },
                MAX_BATCH as u32,
                "ceiling",
                &shutdown,
                &self.counters.batches,
            )
            .await;
            self.list().settle(taken, claim.is_ok());
            match claim {
                Ok(drained) => {
                    self.counters
                        .cancelled
                        .fetch_add(drained.cancelled as u64, Ordering::Relaxed);
                    let refused = drained.claimed.saturating_sub(drained.cancelled);
                    if refused > 0 {
                        // One not due at its UPDATE is still PENDING: claim
                        // again shortly (after the window).
                        self.counters
                            .claimed_not_cancelled
                            .fetch_add(refused as u64, Ordering::Relaxed);
                        retry_at = Some(now_us() + 1_000);
                    }
                }
                Err(e) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, "claim failed; claiming again");
                    retry_at = Some(now_us() + RETRY_AFTER.as_micros() as i64);
                }
            }
        }
    }

    async fn teardown(&self) -> Result<()> {
        Ok(())
    }

    fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn counters(&self) -> StrategyCounters {
        self.counters.snapshot()
    }

    /// None: the ceiling is a yardstick for the others' rates, not a design
    /// whose crash behaviour a scenario compares. (It keeps its schedule in
    /// memory and reloads nothing, so any crash loses every order it held.)
    fn crash_points(&self) -> &'static [CrashPoint] {
        &[]
    }
}

/// The ceiling, as the registry lists it.
pub const CEILING: crate::strategy_info::StrategyInfo = crate::strategy_info::StrategyInfo {
    name: "ceiling",
    summary: "BASELINE: an in-process list times the wake, and each wake runs db-scan's claim \
              of every due order, at most one per 100 ms per instance; no delay mechanism: \
              what the database and harness allow",
    role: crate::strategy_info::Role::Baseline,
    ..crate::strategy_info::StrategyInfo::BASE
};

#[cfg(test)]
mod tests {
    use super::DueList;

    #[test]
    fn an_order_scheduled_during_a_claim_stays_for_the_next_even_if_already_due() {
        let mut list = DueList::default();
        assert!(list.insert(1, 100));
        assert!(list.insert(2, 500));
        let taken = list.take_due_by(200);
        assert_eq!(taken, [(100, 1)]);
        // Arrives overdue while the claim runs: the claim may have read past it.
        assert!(list.insert(3, 150));
        list.settle(taken, true);
        assert_eq!(list.next(), Some(150));
        assert_eq!(list.take_due_by(200), [(150, 3)]);
    }

    #[test]
    fn a_failed_claim_puts_its_orders_back_and_a_held_order_is_not_scheduled_twice() {
        let mut list = DueList::default();
        assert!(list.insert(1, 100));
        let taken = list.take_due_by(100);
        // Held while its claim runs: a duplicate schedule is dropped.
        assert!(!list.insert(1, 100));
        list.settle(taken, false);
        assert_eq!(list.next(), Some(100));
        let taken = list.take_due_by(100);
        list.settle(taken, true);
        assert_eq!(list.next(), None);
        // Once its claim is done, the order may be scheduled again.
        assert!(list.insert(1, 100));
    }
}
