//! `timing-wheel`: an in-process hierarchical timing wheel per instance.
//!
//! `schedule` puts the order in this process's wheel; a driver task owns the
//! clock, sleeps until the wheel's next deadline (or until an earlier one is
//! scheduled), advances the wheel and sends what fired through
//! `cancel_batch_if_due`. On start it reloads its share of the PENDING
//! orders from the database (`id % instances = its index`, the orders the
//! harness sends it; all of them with `reload-all`), so orders created
//! while it was down are still cancelled.
//!
//! What it cannot do, and says so in its capabilities: scheduled work lives
//! only in the process. If an instance dies, the orders it owned wait until
//! some instance starts again (and reloads them) or a `fallback-scan` takes
//! them. With several instances, each owns the orders it was given, and a
//! restarted instance reloads its own share. An order sent to another
//! instance while its owner was down is held there, and reloaded by the
//! owner when it starts again; the conditional UPDATE absorbs the duplicate
//! attempt. Should the holder restart before the owner, such an order
//! waits for the owner (or a fallback scan): the price of not holding every
//! order in every instance (`reload-all` pays that instead).

mod config;
mod info;
pub mod wheel;

pub use config::TimingWheelConfig;
pub use info::{TIMING_WHEEL, TIMING_WHEEL_RELEASE_FIRST, TIMING_WHEEL_UNCONDITIONAL};

use crate::canceller::{Canceller, Capabilities, StrategyCounters};
use crate::crash::{self, CrashPoint};
use crate::domain::{now_us, CancelOutcome, Micros, OrderId};
use crate::error::Result;
use crate::store::{AntiPattern, OrderStore, StoreStats};
use crate::wake::{DeadlineWaker, Heed};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use wheel::{ticks_ceil, TimerKey, TimingWheel, WheelConfig};

/// How long to wait before retrying a batch whose cancel failed.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// Orders a reload puts in the wheel under one lock.
const RELOAD_CHUNK: usize = 10_000;
/// How long the driver sleeps with an empty wheel (a schedule wakes it).
const IDLE_SLEEP: Duration = Duration::from_secs(3600);

/// The timing-wheel strategy (one instance).
#[derive(Debug)]
pub struct TimingWheelStrategy {
    /// `timing-wheel`, or the teaching variant's name.
    name: &'static str,
    /// Teaching variants cancel the broken way; `None` is the real strategy.
    anti_pattern: Option<AntiPattern>,
    store: OrderStore,
    config: TimingWheelConfig,
    /// Wall-clock microseconds of tick 0.
    origin_us: Micros,
    tick_us: u64,
    state: Mutex<State>,
    /// Wakes the driver when a deadline earlier than its sleep arrives.
    waker: DeadlineWaker,
    counters: Counters,
    /// Set once the reload of PENDING orders is in the wheel.
    started: AtomicBool,
}

#[derive(Debug)]
struct State {
    wheel: TimingWheel<(OrderId, Micros)>,
    /// One timer per order: a duplicate `schedule` is dropped here.
    keys: HashMap<OrderId, TimerKey>,
    /// Orders due when scheduled (deadline already passed): fire at once.
    due_now: Vec<(OrderId, Micros)>,
}

crate::canceller::counters! {
    struct Counters {
        scheduled,
        duplicate_schedules,
        reloaded,
        dropped_paid,
        fired,
        wakeups,
        errors,
    }
}

impl TimingWheelStrategy {
    pub fn new(store: OrderStore, config: &TimingWheelConfig) -> Self {
        Self::with_cancel(store, config, "timing-wheel", None)
    }

    /// A teaching variant: the same wheel, whose fired orders are cancelled
    /// the broken way `pattern` describes (`timing-wheel-unconditional`,
    /// `timing-wheel-release-first`). The wheel fires for paid orders too,
    /// so the damage shows in every run.
    pub fn teaching(
        store: OrderStore,
        config: &TimingWheelConfig,
        name: &'static str,
        pattern: AntiPattern,
    ) -> Self {
        Self::with_cancel(store, config, name, Some(pattern))
    }

    fn with_cancel(
        store: OrderStore,
        config: &TimingWheelConfig,
        name: &'static str,
        anti_pattern: Option<AntiPattern>,
    ) -> Self {
        let tick_us = config.tick.as_micros().max(1) as u64;
        let origin_us = now_us();
        let geometry = WheelConfig::new(config.slot_bits, config.levels);
        TimingWheelStrategy {
            name,
            anti_pattern,
            store,
            config: config.clone(),
            origin_us,
            tick_us,
            state: Mutex::new(State {
                wheel: TimingWheel::new(geometry, 0),
                keys: HashMap::new(),
                due_now: Vec::new(),
            }),
            waker: DeadlineWaker::default(),
            counters: Counters::default(),
            started: AtomicBool::new(false),
        }
    }

    /// The tick at whose start `deadline_us` has passed (rounded up, so a
    /// timer never fires before its deadline).
    fn deadline_tick(&self, deadline_us: Micros) -> u64 {
        ticks_ceil((deadline_us - self.origin_us).max(0) as u64, self.tick_us)
    }

    /// Wall-clock microseconds at which `tick` starts (and its timers fire).
    fn tick_start_us(&self, tick: u64) -> Micros {
        self.origin_us + (tick * self.tick_us) as i64
    }

    /// The current tick (rounded down).
    fn now_tick(&self) -> u64 {
        (now_us() - self.origin_us).max(0) as u64 / self.tick_us
    }

    /// Puts one order in the wheel (or in `due_now`), then wakes the
    /// driver if it sleeps past the start of the order's tick (a tick that
    /// has begun is in the past: it wakes a sleeping driver at once).
    fn insert(&self, order_id: OrderId, expire_at_us: Micros) {
        self.insert_all(&[(order_id, expire_at_us)]);
    }

    /// Puts orders in the wheel under one lock, then wakes the driver for
    /// the earliest of them (see [`Self::insert`]).
    fn insert_all(&self, orders: &[(OrderId, Micros)]) {
        let mut earliest: Option<u64> = None;
        {
            let mut state = self.state.lock().expect("wheel lock");
            for &(order_id, expire_at_us) in orders {
                if state.keys.contains_key(&order_id) {
                    self.counters
                        .duplicate_schedules
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let tick = self.deadline_tick(expire_at_us);
                match state.wheel.insert(tick, (order_id, expire_at_us)) {
                    Ok(key) => {
                        state.keys.insert(order_id, key);
                    }
                    Err(value) => state.due_now.push(value),
                }
                earliest = Some(earliest.map_or(tick, |e| e.min(tick)));
            }
        }
        if let Some(tick) = earliest {
            self.waker.wake_for(self.tick_start_us(tick));
        }
    }

    /// Advances the wheel to now and takes everything due.
    fn take_due(&self) -> (Vec<(OrderId, Micros)>, Option<u64>) {
        let now_tick = self.now_tick();
        let mut state = self.state.lock().expect("wheel lock");
        let mut due = std::mem::take(&mut state.due_now);
        let State { wheel, keys, .. } = &mut *state;
        wheel.advance(now_tick, |_, (id, expire)| {
            keys.remove(&id);
            due.push((id, expire));
        });
        (due, state.wheel.next_deadline())
    }

    /// Cancels fired orders in batches. An order the database says is not
    /// due yet (the wall clock stepped back) goes back in the wheel; a batch
    /// that failed is retried shortly, so nothing fired is ever dropped.
    async fn cancel_fired(&self, due: Vec<(OrderId, Micros)>) {
        self.counters
            .fired
            .fetch_add(due.len() as u64, Ordering::Relaxed);
        if let Some(pattern) = self.anti_pattern {
            for (id, _) in due {
                let cancelled = self
                    .store
                    .cancel_with_anti_pattern(pattern, id, now_us(), self.name)
                    .await;
                if let Err(e) = cancelled {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, order = id, "teaching cancel failed");
                }
            }
            return;
        }
        for chunk in due.chunks(self.config.batch_size as usize) {
            let ids: Vec<OrderId> = chunk.iter().map(|(id, _)| *id).collect();
            match self.store.cancel_batch_if_due(&ids, "timing-wheel").await {
                Ok(outcomes) => {
                    for ((_, outcome), (id, expire)) in outcomes.iter().zip(chunk) {
                        if *outcome == CancelOutcome::NotDue {
                            self.insert(*id, *expire);
                        }
                    }
                }
                Err(e) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, orders = ids.len(), "cancel failed; retrying");
                    let retry_at = now_us() + RETRY_AFTER.as_micros() as i64;
                    for (id, expire) in chunk {
                        self.insert(*id, (*expire).max(retry_at));
                    }
                }
            }
        }
    }

    /// Loads its share of the PENDING orders (every one with `reload-all`
    /// or without a share) into the wheel as the rows stream in,
    /// retrying until it works or shutdown: an instance that cannot reload
    /// must not run half-blind. A retry reads them all again; what the
    /// failed read had put in is dropped as a duplicate.
    async fn reload(&self, shutdown: &CancellationToken) -> bool {
        loop {
            let loaded = self
                .store
                .pending_orders_in_chunks(RELOAD_CHUNK, self.config.reload_share(), |orders| {
                    self.insert_all(orders)
                })
                .await;
            match loaded {
                Ok(reloaded) => {
                    // Counted once in the wheel: `reloaded` reaching a
                    // backlog's size means the wheel holds it.
                    self.counters
                        .reloaded
                        .fetch_add(reloaded, Ordering::Relaxed);
                    self.started.store(true, Ordering::Release);
                    return true;
                }
                Err(e) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, "reloading PENDING orders failed; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return false,
                        _ = tokio::time::sleep(RETRY_AFTER) => {}
                    }
                }
            }
        }
    }
}

#[async_trait]
impl Canceller for TimingWheelStrategy {
    fn name(&self) -> &str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        let mut notes = match self.anti_pattern {
            Some(pattern) => vec![format!(
                "TEACHING VARIANT: fired orders are cancelled with the {pattern:?} mistake \
                 instead of cancel_if_due; its anomalies are the point"
            )],
            None => Vec::new(),
        };
        notes.extend([
            if self.config.reload_share().is_some() {
                "scheduled work lives only in the process: orders owned by a dead instance wait \
                 until it restarts (it reloads its share of the PENDING orders, id modulo the \
                 instances) or fallback-scan runs"
                    .to_string()
            } else {
                "scheduled work lives only in the process: orders owned by a dead instance wait \
                 until an instance restarts (it reloads every PENDING order) or fallback-scan runs"
                    .to_string()
            },
            format!(
                "deadlines are rounded up to the {:?} tick, so lateness includes up to one tick",
                self.config.tick
            ),
        ]);
        Capabilities {
            durable_across_restart: false,
            arbitrary_delay: true,
            needs_fallback: true,
            multi_instance_safe: self.anti_pattern.is_none(),
            instance_owns_its_orders: true,
            requires: Vec::new(),
            notes,
        }
    }

    async fn setup(&self) -> Result<()> {
        Ok(())
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        self.counters.scheduled.fetch_add(1, Ordering::Relaxed);
        self.insert(order_id, expire_at_us);
        Ok(())
    }

    fn started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Takes the paid order's timer out of the wheel (if this instance
    /// holds it and it has not fired).
    async fn paid(&self, order_id: OrderId) -> Result<()> {
        let mut state = self.state.lock().expect("wheel lock");
        if let Some(key) = state.keys.remove(&order_id) {
            state.wheel.cancel(key);
            self.counters.dropped_paid.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        if !self.reload(&shutdown).await {
            return Ok(());
        }
        loop {
            // What was inserted before is in the wheel read next; later
            // inserts stay heard for the sleep.
            self.waker.take();
            let (due, next_tick) = self.take_due();
            if !due.is_empty() {
                // Popped off the wheel (only this process held them), not cancelled yet.
                crash::reached(CrashPoint::AfterClaim);
                self.cancel_fired(due).await;
                continue;
            }
            // Sleep until the next deadline's tick starts (or a long while
            // when the wheel is empty); an earlier schedule wakes us.
            let until = match next_tick {
                Some(tick) => self.tick_start_us(tick),
                None => now_us() + IDLE_SLEEP.as_micros() as i64,
            };
            self.waker
                .sleep_until(until, Heed::Deadlines, &shutdown)
                .await;
            if shutdown.is_cancelled() {
                return Ok(());
            }
            self.counters.wakeups.fetch_add(1, Ordering::Relaxed);
        }
    }

    async fn teardown(&self) -> Result<()> {
        Ok(())
    }

    fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn counters(&self) -> StrategyCounters {
        let pending = self.state.lock().map(|s| s.wheel.len() as u64).unwrap_or(0);
        let mut counters = self.counters.snapshot();
        counters.insert("pending_at_stop".to_string(), pending);
        counters
    }

    /// `after-claim`: entries popped off the wheel, before their cancel
    /// (teaching variants too: same path). There is no queue to ack, so no
    /// `after-commit-before-ack`.
    fn crash_points(&self) -> &'static [CrashPoint] {
        &[CrashPoint::AfterClaim]
    }
}
