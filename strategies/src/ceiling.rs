//! `ceiling`: the yardstick, not a way to build a shop.
//!
//! It cancels each order at its exact deadline from an in-process list (a
//! min-heap by deadline), with no delay mechanism at all: no tick rounding,
//! no scan interval, no broker or Redis round trip. What remains is the
//! work every strategy has to do anyway: the harness's create and pay
//! transactions and the conditional cancel, at the concurrency of the
//! instance's store (one transaction per pool connection at a time). So the
//! highest rate at which the ceiling keeps its promise is what the database
//! and the harness allow on this machine, and a sweep reports each
//! strategy's maximum rate as a share of it.
//!
//! Everything due when a connection comes free goes in one
//! `cancel_batch_if_due` (up to [`MAX_BATCH`]): at low load that is one
//! order per transaction, the moment it is due; under load orders queue up
//! behind busy connections and the batches grow, as group commit does. A
//! ceiling of one `cancel_if_due` per order would be beaten by db-scan,
//! which batches by waiting: measured here (PostgreSQL, 2 cores), such a
//! ceiling held 1300 orders/s and db-scan 2600.
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
use std::collections::{BinaryHeap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How long to wait before retrying an order whose cancel failed.
const RETRY_AFTER: Duration = Duration::from_millis(100);

/// How long the driver sleeps with an empty list (a schedule wakes it).
const IDLE_SLEEP: Duration = Duration::from_secs(3600);

/// The most orders one cancel transaction takes.
pub const MAX_BATCH: usize = 200;

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
    /// `(when to try, order)`, earliest first; `when` is the deadline, or
    /// a retry time after a failed attempt.
    due: BinaryHeap<Reverse<(Micros, OrderId)>>,
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
    /// Puts `order_id` in the list to be tried at `at_us`, and wakes the
    /// driver if it sleeps past that.
    fn push(&self, order_id: OrderId, at_us: Micros) {
        self.state
            .lock()
            .expect("ceiling lock")
            .due
            .push(Reverse((at_us, order_id)));
        self.waker.wake_for(at_us);
    }

    /// Up to `limit` orders due by `now`, earliest first, and the next
    /// time to look (now or earlier when more are due).
    fn take_due(&self, now: Micros, limit: usize) -> (Vec<OrderId>, Option<Micros>) {
        let mut state = self.state.lock().expect("ceiling lock");
        let mut due = Vec::new();
        while let Some(Reverse((at, id))) = state.due.peek().copied() {
            if at > now || due.len() == limit {
                return (due, Some(at));
            }
            state.due.pop();
            due.push(id);
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
                "a yardstick, not a design: each order cancelled at its exact deadline from \
                 an in-process list, so its limits are the database's and the harness's"
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
        inner.push(order_id, expire_at_us);
        Ok(())
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        // One cancel transaction per connection of this instance's store.
        let connections = Arc::new(Semaphore::new(self.store.max_connections() as usize));
        loop {
            let permit = tokio::select! {
                p = Arc::clone(&connections).acquire_owned() => p.expect("never closed"),
                _ = shutdown.cancelled() => return Ok(()),
            };
            // What was pushed before is in the list read next; later pushes
            // stay heard for the sleep.
            self.inner.waker.take();
            let (due, next) = self.inner.take_due(now_us(), MAX_BATCH);
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
            self.inner
                .counters
                .fired
                .fetch_add(due.len() as u64, Ordering::Relaxed);
            self.inner.counters.batches.fetch_add(1, Ordering::Relaxed);
            let (store, inner) = (self.store.clone(), Arc::clone(&self.inner));
            tokio::spawn(async move {
                match store.cancel_batch_if_due(&due, "ceiling").await {
                    Ok(outcomes) => {
                        for (id, outcome) in outcomes {
                            if outcome == CancelOutcome::NotDue {
                                // The wall clock stepped back: try again shortly.
                                inner
                                    .counters
                                    .not_due_retries
                                    .fetch_add(1, Ordering::Relaxed);
                                inner.push(id, now_us() + 1_000);
                            } else {
                                inner.release(id);
                            }
                        }
                    }
                    Err(e) => {
                        inner.counters.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, orders = due.len(), "cancel failed; retrying");
                        for id in due {
                            inner.push(id, now_us() + RETRY_AFTER.as_micros() as i64);
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
    summary: "BASELINE: each order cancelled at its exact deadline from an in-process \
              list, no delay mechanism: what the database and harness allow",
    role: crate::strategy_info::Role::Baseline,
    ..crate::strategy_info::StrategyInfo::BASE
};
