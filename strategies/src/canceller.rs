//! The `Canceller` trait: what every delay strategy implements.
//!
//! The harness holds a `Box<dyn Canceller>` chosen at run time by name (see
//! [`crate::registry`]). Lifecycle, per strategy run:
//!
//! 1. [`Canceller::setup`] once, by the harness, before any instance runs:
//!    declare queues, scripts, exchanges. Idempotent.
//! 2. In every instance (a separate OS process in a harness run, a task in
//!    the conformance suite): [`Canceller::run`] until `shutdown` fires, while
//!    [`Canceller::schedule`] is called for each order *after* the order's
//!    creating transaction committed. Instances must be correct together.
//! 3. [`Canceller::teardown`] once, by the harness, after every instance stopped.
//!
//! Contract, checked by [`crate::conformance`] on real backends:
//! - Every cancel goes through [`OrderStore::cancel_if_due`] (or its batch
//!   form); a strategy never changes order state any other way, and never
//!   trusts a message: the conditional UPDATE decides.
//! - Nothing is cancelled before its deadline, and a paid order never is.
//! - Duplicate `schedule` calls and duplicate deliveries release stock once.
//! - What a strategy cannot do is declared in [`Capabilities`], never hidden.
//!
//! [`OrderStore::cancel_if_due`]: crate::store::OrderStore::cancel_if_due

use crate::domain::{Micros, OrderId};
use crate::error::Result;
use crate::store::StoreStats;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// A service a strategy needs besides the order database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Service {
    RabbitMq,
    Redis,
}

impl Service {
    /// The product name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Service::RabbitMq => "RabbitMQ",
            Service::Redis => "Redis",
        }
    }
}

/// What a strategy can honestly do. Gates which conformance checks apply
/// and is printed in every report next to the strategy's numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Scheduled work survives the death of every canceller process.
    pub durable_across_restart: bool,
    /// Any per-order delay works without declaring it up front.
    pub arbitrary_delay: bool,
    /// It can lose scheduled work, so guarantees need `fallback-scan`.
    pub needs_fallback: bool,
    /// Several instances at once stay correct.
    pub multi_instance_safe: bool,
    /// Each instance only cancels the orders it was given by `schedule`
    /// (in-process schedulers); otherwise any instance may cancel any order.
    pub instance_owns_its_orders: bool,
    /// Services needed besides the order database.
    pub requires: Vec<Service>,
    /// Plain-words caveats for the report (e.g. "classic-queue
    /// dead-lettering is at-most-once").
    pub notes: Vec<String>,
}

/// Counters a strategy keeps besides its store's (messages published,
/// Redis commands, wakeups, ...). Keys are stable snake_case names.
pub type StrategyCounters = BTreeMap<String, u64>;

/// Declares a struct of relaxed atomic counters, one `AtomicU64` field per
/// name, with `snapshot()` giving them as [`StrategyCounters`] keyed by the
/// field names: each strategy's counters are declared once, by name.
macro_rules! counters {
    ($(#[$meta:meta])* struct $name:ident { $($field:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        struct $name {
            $($field: std::sync::atomic::AtomicU64,)*
        }

        impl $name {
            fn snapshot(&self) -> $crate::canceller::StrategyCounters {
                $crate::canceller::StrategyCounters::from([$(
                    (
                        stringify!($field).to_string(),
                        self.$field.load(std::sync::atomic::Ordering::Relaxed),
                    ),
                )*])
            }
        }
    };
}
pub(crate) use counters;

/// A way of cancelling unpaid orders at their deadline.
#[async_trait]
pub trait Canceller: Send + Sync + std::fmt::Debug {
    /// The registry name, e.g. `db-scan`.
    fn name(&self) -> &str;

    /// What this strategy can honestly do.
    fn capabilities(&self) -> Capabilities;

    /// Prepares shared resources (queues, scripts). Called once per run by
    /// the harness before any instance runs; must be idempotent.
    async fn setup(&self) -> Result<()>;

    /// Arranges for `order_id` to be cancelled at `expire_at_us` unless it is
    /// paid first. Called after the order's creating transaction committed;
    /// may be called more than once for one order.
    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()>;

    /// Cancels due orders until `shutdown` is cancelled, then returns.
    /// Transient backend errors are counted and retried, not returned.
    async fn run(&self, shutdown: CancellationToken) -> Result<()>;

    /// Removes shared resources that should not outlive the run. Called once
    /// by the harness after every instance stopped.
    async fn teardown(&self) -> Result<()>;

    /// The store counters of this instance (statements, attempts, outcomes).
    fn store_stats(&self) -> StoreStats;

    /// Strategy-specific counters of this instance.
    fn counters(&self) -> StrategyCounters {
        StrategyCounters::new()
    }
}
