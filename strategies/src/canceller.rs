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
//! 3. [`Canceller::teardown`] once, by the harness, after every instance
//!    stopped, on every exit path: also when the run failed, panicked or
//!    was cut short after (or during) `setup` (see
//!    [`crate::leftovers::TeardownGuard`]); a failed teardown is logged and
//!    recorded, never hides the run's own error.
//!
//! What a strategy run keeps, and what it must not leave behind:
//! - **kept**: its database namespace with the orders (a PostgreSQL schema
//!   or MariaDB database named `dlb_<run id>_<strategy>`, or the SQLite file
//!   `<strategy>/dlb_<run id>_<strategy>.sqlite` in the run's folder), read
//!   by the checker and by outside checkers after the run; `summary.json`
//!   records where it is. `delaybench clean` lists and removes old ones.
//! - **removed by `teardown`**: everything on the broker and in Redis. The
//!   names all derive from the namespace's
//!   [`resource_prefix`](crate::store::DbLocation::resource_prefix) `<p>`:
//!   queues and exchanges `dlb.<p>.*`, Redis keys `dlb:{<p>:<shard>}:*` and
//!   `dlb:{<p>}:*` (see [`crate::leftovers`]). A server-wide setting a
//!   strategy changed in `setup` is restored.
//! - tests name their namespaces `t_<strategy>_<pid>_<nanos>_<n>` and remove
//!   all of it, namespace included, even when they fail
//!   ([`crate::conformance::Fixture`]).
//!
//! Contract:
//! - Every cancel goes through [`OrderStore::cancel_if_due`] (or its batch
//!   form); a strategy never changes order state any other way, and never
//!   trusts a message: the conditional UPDATE decides.
//! - Nothing is cancelled before its deadline, and a paid order never is.
//! - Duplicate `schedule` calls and duplicate deliveries release stock once.
//! - What a strategy cannot do is declared in [`Capabilities`], never hidden.
//!
//! What [`crate::conformance`] checks of it, on real backends: no early
//! cancel, no paid order cancelled, every due order cancelled, stock
//! conserved (the [`checker`](crate::checker) invariants), duplicate
//! `schedule` calls releasing once, a lateness bound, and what each
//! capability declared `true` promises (see [`Capabilities`]). What it does
//! *not* check: that cancels go through `cancel_if_due` (it sees only their
//! effects in the database); the strategy's handling of redelivered,
//! malformed or early messages (its duplicate-delivery step calls
//! `cancel_if_due` itself; the broker strategies' own tests in
//! `tests/rabbit.rs` and `tests/redis_zset.rs` inject such messages); and
//! that a capability declared `false` is really missing (only the timing
//! wheel's `durable_across_restart` is shown to fail when forced).
//!
//! [`OrderStore::cancel_if_due`]: crate::store::OrderStore::cancel_if_due

use crate::crash::CrashPoint;
use crate::domain::{Micros, OrderId};
use crate::error::Result;
use crate::store::StoreStats;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// An instance's part among its strategy's instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceRole {
    /// Every instance does the same work (claims, consumes, holds its own
    /// orders).
    #[default]
    Peer,
    /// It does the strategy's work while the others wait (db-timer's lead).
    Leader,
    /// It waits to take over from the leader, doing little meanwhile.
    Standby,
}

impl InstanceRole {
    /// The word reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceRole::Peer => "peer",
            InstanceRole::Leader => "leader",
            InstanceRole::Standby => "standby",
        }
    }
}

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
/// ([`crate::conformance::checks_for`]) and is printed in every report next
/// to the strategy's numbers. Each field names the check it triggers; a
/// check that does not apply is reported `not applicable: <field>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// The schedule is held outside the canceller processes (the database,
    /// the broker, Redis), so no order waits for a particular instance to
    /// come back: a dead instance's orders are cancelled by the instances
    /// still running, and when every instance died, by a fresh one that was
    /// never told about them. Checked by `kill_every_instance_then_restart`
    /// (instances stopped and dropped in-process; the services keep running).
    ///
    /// For a strategy whose schedule lives in a service it also means the
    /// schedule survives a restart of that service (`redis-zset` declares it
    /// only with appendonly persistence); the suite does not restart
    /// services: `tests/redis_restart.rs` and `tests/rabbit.rs` do, for
    /// their strategies.
    ///
    /// The timing wheel declares `false` although a fresh instance reloads
    /// every PENDING order from the database: until some instance starts,
    /// a dead instance's orders wait, even while other instances run.
    /// Where it is `false`, `kill_every_instance_then_restart_with_fallback`
    /// checks the same scenario with `fallback-scan` on.
    pub durable_across_restart: bool,
    /// Any per-order delay works without declaring it up front, cancelled
    /// within the suite's lateness bound. Checked by
    /// `undeclared_delays_on_time`. Where it is `false` (`rabbit-ttl`), the
    /// suite's other checks use only delays made of the declared ones.
    pub arbitrary_delay: bool,
    /// It can lose scheduled work, so guarantees need `fallback-scan`.
    /// Checked only for coherence (`capabilities_are_coherent`: required
    /// where a strategy is not durable or instances own their orders) and,
    /// where not durable, by the kill-and-restart check with the fallback.
    /// A strategy declaring `false` is not faulted (broker or Redis
    /// restarts, partitions) by the suite to show it loses nothing.
    pub needs_fallback: bool,
    /// Several instances at once stay correct and split the work: each due
    /// order is cancelled once, and attempts absorbed as already cancelled
    /// stay under a tenth of the cancels (instances that each try every
    /// order are correct, but multiply the database load by their number).
    /// Checked by `several_instances_stay_correct` (three instances).
    /// `false` means: run one instance; several may break invariants (the
    /// wheel's teaching variants) or repeat each other's work (`db-scan` on
    /// SQLite, which has no row locks to claim with).
    pub multi_instance_safe: bool,
    /// Each instance only cancels the orders it was given by `schedule`
    /// (in-process schedulers); otherwise any instance may cancel any order.
    /// Where `false`, checked by `any_instance_cancels_any_order`.
    pub instance_owns_its_orders: bool,
    /// Services needed besides the order database. Checked against the
    /// registry's entry (`capabilities_are_coherent`).
    pub requires: Vec<Service>,
    /// Plain-words caveats for the report (e.g. "classic-queue
    /// dead-lettering is at-most-once"). Not checked.
    pub notes: Vec<String>,
}

/// Counters a strategy keeps besides its store's (messages published,
/// Redis commands, wakeups, ...). Keys are stable snake_case names.
pub type StrategyCounters = BTreeMap<String, u64>;

/// Declares a struct of relaxed atomic counters, one `AtomicU64` field per
/// name, with `snapshot()` giving them as [`StrategyCounters`] keyed by the
/// field names: each strategy's counters are declared once, by name.
macro_rules! counters {
    ($(#[$meta:meta])* struct $name:ident { $($(#[$field_meta:meta])* $field:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        struct $name {
            $($(#[$field_meta])* $field: std::sync::atomic::AtomicU64,)*
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

    /// `order_id` was paid: its paying
    /// transaction committed. A strategy that
    /// [`drops_paid_timers`](crate::strategy_info::StrategyInfo::drops_paid_timers)
    /// drops the order's timer, so its deadline costs no cancel attempt.
    /// Best effort, never needed for correctness: a timer that fires anyway
    /// (the call raced it, reached another instance, or failed) meets the
    /// conditional UPDATE, which finds the order paid. Called at most once
    /// per payment, only where the strategy says it drops timers; the
    /// default does nothing (a broker cannot take a message back out of a
    /// queue; the database paths never hold a timer).
    async fn paid(&self, _order_id: OrderId) -> Result<()> {
        Ok(())
    }

    /// Cancels due orders until `shutdown` is cancelled, then returns.
    /// Transient backend errors are counted and retried, not returned.
    async fn run(&self, shutdown: CancellationToken) -> Result<()>;

    /// Removes shared resources that should not outlive the run: every
    /// queue, exchange and Redis key of this run's namespace (names under
    /// `dlb.<prefix>.` and `dlb:{<prefix>`), and any server-wide setting
    /// `setup` changed. Never touches the database namespace, which the run
    /// keeps. Called once by the harness after every instance stopped, also
    /// when the run failed midway, possibly on a fresh instance built for the
    /// purpose (so it must not depend on state held since `setup`, except
    /// to restore a setting), on an instance whose store may already be
    /// closed (it needs none), and possibly when `setup` itself failed
    /// halfway: deleting what does not exist is not an error. Idempotent.
    async fn teardown(&self) -> Result<()>;

    /// The store counters of this instance (statements, attempts, outcomes).
    fn store_stats(&self) -> StoreStats;

    /// Strategy-specific counters of this instance.
    fn counters(&self) -> StrategyCounters {
        StrategyCounters::new()
    }

    /// Whether the instance has finished starting and holds what it must
    /// before new work reaches it (a timing wheel: its PENDING orders,
    /// reloaded as `run` starts). A worker reports itself ready only then,
    /// so an order written after the report reaches the instance through
    /// `schedule` alone, never also through its reload.
    fn started(&self) -> bool {
        true
    }

    /// What this instance does among the strategy's instances right now.
    /// A fault aimed at "the instance that does the work" (a kill, a
    /// pause) that lands on a standby is reported as having missed its
    /// target, so a run never reads as "survived the leader's death" when
    /// the leader was never hit.
    fn role(&self) -> InstanceRole {
        InstanceRole::Peer
    }

    /// The [`CrashPoint`]s this strategy's path has: where it calls
    /// [`crate::crash::reached`]. The harness refuses to arm a point a
    /// strategy does not declare, and says so in the report. Declare only a
    /// point the path really passes through, at the place the point names.
    fn crash_points(&self) -> &'static [CrashPoint] {
        &[]
    }
}
