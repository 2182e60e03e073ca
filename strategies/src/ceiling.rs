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
//! can pass it by batching more coarsely: everything due goes in one
//! `cancel_those_pending`, at most one batch per [`WINDOW`] unless a batch
//! fills [`MAX_BATCH`] (full batches go at once, one per free connection).
//! That transaction reads the batch by id, keeps the orders still pending
//! and cancels those through the one cancel function: a paid order costs a
//! row of the read, as it costs db-scan nothing (its scan never sees it),
//! where a refused UPDATE and the read classifying it would cost two
//! statements. That read is bounded by the batch's latest deadline, so on
//! PostgreSQL it walks the `(status, expire_at_us)` index over the due
//! PENDING entries only, as db-scan's scan does. Unbounded, it walked every
//! pending order's entry and fetched each row to test its id: 31.9 server
//! rows read per cancel at its maximum in results/sweep/20261204-200616-sweep
//! (db-scan 4.3 at its own), 5.3 bounded in results/sweep/20261204-225943-sweep
//! (db-scan 4.2). Its maximum did not rise with it: what limits it at the
//! top is in the README's sweep section.
//!
//! The first order after a quiet spell is cancelled the moment it is due;
//! the ones behind it wait for the window to close, as db-scan's wait for
//! its next scan. That window is db-scan's default interval, the coarsest
//! batching of any shipped default: db-scan does the same per interval with
//! a range scan for the read, the wheel its UPDATEs per tick or more often
//! (paid orders included), the per-order strategies one transaction per
//! delivery or batch. Two ceilings were beaten before this one, which is
//! why it is built so:
//! - one `cancel_if_due` per order: it held 1300 orders/s where db-scan held
//!   2600 (PostgreSQL, 2 cores);
//! - a batch per free connection, growing only under load (until issue 22):
//!   in the reference sweep 20261202-152826-sweep it held 1800 orders/s and
//!   db-scan 2400 (133 %), the wheel 2200 (122 %), at 331 µs of worker CPU
//!   per cancel against db-scan's 112.
//!
//! Its lateness (up to a window) is not what it is for: the sweep compares
//! only its maximum rate.
//!
//! Like the timing wheel it keeps its schedule in the process, and unlike
//! the wheel it does not reload PENDING orders on start: a dead instance's
//! orders are lost unless a `fallback-scan` runs beside it. It is never
//! selected by default; `delaybench sweep` runs it first.

use crate::canceller::{Canceller, Capabilities, StrategyCounters};
use crate::crash::CrashPoint;
use crate::domain::{now_us, CancelOutcome, Micros, OrderId};
use crate::error::Result;
use crate::store::{OrderStore, StoreStats};
use crate::wake::{DeadlineWaker, Heed};
use async_trait::async_trait;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How long to wait before retrying an order whose cancel failed.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// How long the driver sleeps with an empty list (a schedule wakes it).
const IDLE_SLEEP: Duration = Duration::from_secs(3600);

/// The most orders one cancel transaction takes (db-scan's default
/// `batch-size`). A full batch does not wait for the window: the next goes
/// at once.
pub const MAX_BATCH: usize = 500;

/// At most one batch that is not full per window (db-scan's default
/// `interval`): see the module docs.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The ceiling (one instance).
#[derive(Debug)]
pub struct Ceiling {
    store: OrderStore,
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Wakes the driver when a deadline earlier than its sleep arrives.
    waker: DeadlineWaker,
    counters: Counters,
}

#[derive(Debug, Default)]
struct State {
    /// `(when to try, order, its deadline)`, earliest first; `when` is the
    /// deadline, or a retry time after a failed attempt.
    due: BinaryHeap<Reverse<(Micros, OrderId, Micros)>>,
    /// Orders in `due` or being cancelled: a duplicate `schedule` is dropped.
    held: HashSet<OrderId>,
}

crate::canceller::counters! {
    struct Counters {
        scheduled,
        duplicate_schedules,
        fired,
        batches,
        not_due_retries,
        errors,
    }
}

impl Ceiling {
    pub fn new(store: OrderStore) -> Self {
        Ceiling {
            store,
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                waker: DeadlineWaker::default(),
                counters: Counters::default(),
            }),
        }
    }
}

impl Inner {
    /// Puts `order` (id, deadline) in the list to be tried at `at_us`, and
    /// wakes the driver if it sleeps past that.
    fn push(&self, (order_id, deadline_us): (OrderId, Micros), at_us: Micros) {
        self.state
            .lock()
            .expect("ceiling lock")
            .due
            .push(Reverse((at_us, order_id, deadline_us)));
        self.waker.wake_for(at_us);
    }

    /// Up to `limit` orders (id, deadline) to try by `now`, earliest first,
    /// and the next time to look (now or earlier when more are due).
    fn take_due(&self, now: Micros, limit: usize) -> (Vec<(OrderId, Micros)>, Option<Micros>) {
        let mut state = self.state.lock().expect("ceiling lock");
        let mut due = Vec::new();
        while let Some(Reverse((at, id, deadline))) = state.due.peek().copied() {
            if at > now || due.len() == limit {
                return (due, Some(at));
            }
            state.due.pop();
            due.push((id, deadline));
        }
        (due, None)
    }

    fn release(&self, order_id: OrderId) {
        self.state
            .lock()
            .expect("ceiling lock")
            .held
            .remove(&order_id);
    }
}

#[async_trait]
impl Canceller for Ceiling {
    fn name(&self) -> &str {
        "ceiling"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            durable_across_restart: false,
            arbitrary_delay: true,
            needs_fallback: true,
            multi_instance_safe: true,
            instance_owns_its_orders: true,
            requires: Vec::new(),
            notes: vec![
                "a yardstick, not a design: orders cancelled from an in-process list, the \
                 pending ones of each 100 ms window in one transaction, so its limits are \
                 the database's and the harness's"
                    .into(),
                "keeps its schedule in memory and reloads nothing on start: a dead \
                 instance's orders wait for a fallback-scan"
                    .into(),
            ],
        }
    }

    async fn setup(&self) -> Result<()> {
        Ok(())
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        let inner = &self.inner;
        if !inner
            .state
            .lock()
            .expect("ceiling lock")
            .held
            .insert(order_id)
        {
            inner
                .counters
                .duplicate_schedules
                .fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        inner.counters.scheduled.fetch_add(1, Ordering::Relaxed);
        inner.push((order_id, expire_at_us), expire_at_us);
        Ok(())
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        // One cancel transaction per connection of this instance's store.
        let connections = Arc::new(Semaphore::new(self.store.max_connections() as usize));
        let window = WINDOW.as_micros() as Micros;
        // When the next batch that is not full may go (see WINDOW).
        let mut next_batch_at: Micros = Micros::MIN;
        loop {
            let now = now_us();
            if now < next_batch_at {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_micros((next_batch_at - now) as u64)) => {}
                    _ = shutdown.cancelled() => return Ok(()),
                }
            }
            let permit = tokio::select! {
                p = Arc::clone(&connections).acquire_owned() => p.expect("never closed"),
                _ = shutdown.cancelled() => return Ok(()),
            };
            // What was pushed before is in the list read next; later pushes
            // stay heard for the sleep.
            self.inner.waker.take();
            let now = now_us();
            let (due, next) = self.inner.take_due(now, MAX_BATCH);
            if due.is_empty() {
                drop(permit);
                let until = next.unwrap_or_else(|| now_us() + IDLE_SLEEP.as_micros() as i64);
                let waker = &self.inner.waker;
                waker.sleep_until(until, Heed::Deadlines, &shutdown).await;
                if shutdown.is_cancelled() {
                    return Ok(());
                }
                continue;
            }
            if due.len() < MAX_BATCH {
                next_batch_at = now + window;
            }
            self.inner
                .counters
                .fired
                .fetch_add(due.len() as u64, Ordering::Relaxed);
            self.inner.counters.batches.fetch_add(1, Ordering::Relaxed);
            let (store, inner) = (self.store.clone(), Arc::clone(&self.inner));
            tokio::spawn(async move {
                let ids: Vec<OrderId> = due.iter().map(|&(id, _)| id).collect();
                // The read is bounded by the latest deadline taken, which
                // every order of the batch is due by.
                let due_by = due.iter().map(|&(_, deadline)| deadline).max();
                let due_by = due_by.expect("a batch is never empty");
                match store.cancel_those_pending(&ids, due_by, "ceiling").await {
                    Ok(outcomes) => {
                        // Orders no longer pending have no outcome: done.
                        let tried: HashMap<OrderId, CancelOutcome> = outcomes.into_iter().collect();
                        for order in due {
                            match tried.get(&order.0) {
                                Some(CancelOutcome::NotDue) => {
                                    // The wall clock stepped back: try again shortly.
                                    inner
                                        .counters
                                        .not_due_retries
                                        .fetch_add(1, Ordering::Relaxed);
                                    inner.push(order, now_us() + 1_000);
                                }
                                _ => inner.release(order.0),
                            }
                        }
                    }
                    Err(e) => {
                        inner.counters.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, orders = due.len(), "cancel failed; retrying");
                        for order in due {
                            inner.push(order, now_us() + RETRY_AFTER.as_micros() as i64);
                        }
                    }
                }
                drop(permit);
            });
        }
    }

    async fn teardown(&self) -> Result<()> {
        Ok(())
    }

    fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn counters(&self) -> StrategyCounters {
        self.inner.counters.snapshot()
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
    summary: "BASELINE: orders cancelled from an in-process list, the pending ones of each \
              100 ms in one transaction, no delay mechanism: what the database and harness allow",
    role: crate::strategy_info::Role::Baseline,
    ..crate::strategy_info::StrategyInfo::BASE
};
