//! The open-loop driver: performs every planned event at its intended time,
//! whatever the backend does, and records how late each one took effect:
//! from the intended time until its transaction committed, so waiting for
//! one of the harness's own connections counts (no coordinated omission: a
//! slow database makes the lag grow, it never slows the schedule).

use crate::instance::Pool;
use crate::model::lateness;
pub use crate::model::GeneratorHealth;
use crate::workload::{Action, Plan};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use std::sync::Arc;
use std::time::Duration;
use strategies::{now_us, CreateOutcome, Micros, NewOrder, OrderId, OrderStore, PaymentOutcome};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Lag above which the harness warns that it fell behind its own schedule.
pub const LAG_WARNING: Duration = Duration::from_millis(20);

enum Done {
    Created(CreateOutcome),
    CreatedUnscheduled,
    Paid(PaymentOutcome),
    Failed { create: bool, error: String },
}

/// Where the driver hands what it did: the canceller instances (the
/// [`Pool`]), or, in a generator shard on another host, the line back to
/// the harness that holds them (`crate::shard`).
pub trait Instances: Send + Sync + 'static {
    /// The warm-up is over.
    fn start_measuring(&self);
    /// Whether the order service schedules inside its open transaction
    /// (the `-publish-first` teaching variant).
    fn publishes_before_commit(&self) -> bool;
    /// Schedules order `id`; false when it could not be handed to anyone.
    fn schedule(&self, id: OrderId, expire_at_us: Micros, committed_at_us: Micros) -> bool;
    /// Order `id` was paid.
    fn paid(&self, id: OrderId);
}

impl Instances for Pool {
    fn start_measuring(&self) {
        Pool::start_measuring(self)
    }
    fn publishes_before_commit(&self) -> bool {
        Pool::publishes_before_commit(self)
    }
    fn schedule(&self, id: OrderId, expire_at_us: Micros, committed_at_us: Micros) -> bool {
        Pool::schedule(self, id, expire_at_us, committed_at_us)
    }
    fn paid(&self, id: OrderId) {
        Pool::paid(self, id)
    }
}

/// Runs `plan` from `t0`, scheduling each created
/// order on the pool's instances by order id. Returns once every event
/// has been performed. Tells the instances when the warm-up ends.
pub async fn drive<I: Instances>(
    plan: &Plan,
    store: &OrderStore,
    instances: &Arc<I>,
    t0: Instant,
    progress: &ProgressBar,
    pool_connections: u32,
) -> GeneratorHealth {
    let mut health = GeneratorHealth {
        orders_planned: plan.orders as u64,
        pool_connections,
        ..GeneratorHealth::default()
    };
    let mut lag = lag_histogram();
    let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Done)>();
    let mut measuring = false;
    for event in &plan.events {
        let intended = t0 + Duration::from_micros(event.at_us as u64);
        tokio::time::sleep_until(intended).await;
        // At the first measured event's time, not before it: a generator
        // shard's events are a sparse part of the plan, and its previous
        // event can be long before the warm-up's end.
        if !measuring && event.at_us >= plan.measured_from_us {
            measuring = true;
            instances.start_measuring();
        }
        let (store, instances, tx, action) = (
            store.clone(),
            Arc::clone(instances),
            tx.clone(),
            event.action.clone(),
        );
        tokio::spawn(async move {
            let paying = match &action {
                Action::Pay { id, .. } => Some(*id),
                Action::Create { .. } => None,
            };
            let done = match action {
                Action::Create {
                    id,
                    sku,
                    qty,
                    timeout_us,
                    abort,
                } => {
                    let created_at_us = now_us();
                    let order = NewOrder {
                        id,
                        sku,
                        qty,
                        created_at_us,
                        expire_at_us: created_at_us + timeout_us,
                    };
                    let publish_first = instances.publishes_before_commit();
                    let created = if abort || publish_first {
                        // The teaching variant's order service schedules
                        // inside the open transaction, before it commits
                        // (or rolls back).
                        let scheduled_early = std::sync::atomic::AtomicBool::new(false);
                        let early = async {
                            if publish_first {
                                let sent = instances.schedule(id, order.expire_at_us, now_us());
                                scheduled_early.store(sent, std::sync::atomic::Ordering::Relaxed);
                            }
                        };
                        let outcome = store.create_order_with(&order, abort, early).await;
                        if publish_first {
                            let sent = scheduled_early.load(std::sync::atomic::Ordering::Relaxed);
                            outcome.map(|o| match o {
                                CreateOutcome::Created if !sent => None,
                                o => Some(o),
                            })
                        } else {
                            outcome.map(Some)
                        }
                    } else {
                        store.create_order(&order).await.map(Some)
                    };
                    match created {
                        Ok(None) => Done::CreatedUnscheduled,
                        Ok(Some(CreateOutcome::Created)) if publish_first => {
                            Done::Created(CreateOutcome::Created)
                        }
                        Ok(Some(CreateOutcome::RolledBack)) => {
                            Done::Created(CreateOutcome::RolledBack)
                        }
                        Ok(Some(CreateOutcome::Created)) => {
                            // Scheduled only after the creating transaction
                            // committed; with an outbox, the transaction
                            // wrote the request and a relay schedules it.
                            if store.writes_outbox()
                                || instances.schedule(id, order.expire_at_us, now_us())
                            {
                                Done::Created(CreateOutcome::Created)
                            } else {
                                Done::CreatedUnscheduled
                            }
                        }
                        Ok(Some(other)) => Done::Created(other),
                        Err(e) => Done::Failed {
                            create: true,
                            error: e.to_string(),
                        },
                    }
                }
                Action::Pay { id, callback_id } => {
                    match store.pay(id, &callback_id, now_us()).await {
                        Ok(outcome) => Done::Paid(outcome),
                        Err(e) => Done::Failed {
                            create: false,
                            error: e.to_string(),
                        },
                    }
                }
            };
            // Until the transaction committed (or failed): connection waits count.
            let lag_us = Instant::now()
                .saturating_duration_since(intended)
                .as_micros() as u64;
            // Committed: the order's timer may go (after the lag's reading:
            // the notice follows the payment, it is not part of it).
            if let (Done::Paid(PaymentOutcome::Applied), Some(id)) = (&done, paying) {
                instances.paid(id);
            }
            let _ = tx.send((lag_us, done));
        });
        while let Ok((lag_us, done)) = rx.try_recv() {
            record(&mut health, &mut lag, lag_us, done, progress);
        }
    }
    drop(tx);
    while let Some((lag_us, done)) = rx.recv().await {
        record(&mut health, &mut lag, lag_us, done, progress);
    }
    finish(health, lag)
}

/// An empty lag histogram: 1 µs to an hour, 3 significant digits.
pub fn lag_histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// The health with its lag figures (and the warning they call for) read
/// from `lag`: one generator's, or every shard's merged.
pub fn finish(mut health: GeneratorHealth, lag: Histogram<u64>) -> GeneratorHealth {
    health.lag_us = lateness::stats(&lag);
    health.lag_histogram = Some(lag.clone());
    health.lag_us_p50 = lag.value_at_quantile(0.5);
    health.lag_us_p99 = lag.value_at_quantile(0.99);
    health.lag_us_max = lag.max();
    if health.lag_us_p99 > LAG_WARNING.as_micros() as u64 {
        health.warning = Some(format!(
            "the harness fell behind its schedule: p99 lag to commit {:.1} ms, max {:.1} ms \
             (bound {} ms; includes waiting for one of its {} connections), so orders and \
             payments did not arrive as planned and this row's workload differs from the \
             others'. Lower `rate`, or give the machine fewer other jobs",
            health.lag_us_p99 as f64 / 1000.0,
            health.lag_us_max as f64 / 1000.0,
            LAG_WARNING.as_millis(),
            health.pool_connections
        ));
    }
    health
}

fn record(
    health: &mut GeneratorHealth,
    lag: &mut Histogram<u64>,
    lag_us: u64,
    done: Done,
    progress: &ProgressBar,
) {
    let _ = lag.record(lag_us.max(1));
    progress.inc(1);
    match done {
        Done::Created(CreateOutcome::Created) => health.created += 1,
        Done::Created(CreateOutcome::OutOfStock) => health.refused += 1,
        Done::Created(CreateOutcome::RolledBack) => health.rolled_back += 1,
        Done::CreatedUnscheduled => {
            health.created += 1;
            health.unscheduled += 1;
        }
        Done::Paid(outcome) => {
            health.callbacks_delivered += 1;
            *health
                .payment_outcomes
                .entry(outcome.as_str().to_string())
                .or_default() += 1;
        }
        Done::Failed { create, error } => {
            if create {
                health.create_errors += 1;
            } else {
                health.payment_errors += 1;
            }
            health.first_error.get_or_insert(error);
        }
    }
}
