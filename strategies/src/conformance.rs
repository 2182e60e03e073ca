//! The conformance suite: plain async checks that every strategy must pass
//! on every real backend (PostgreSQL, MariaDB, SQLite, and the strategy's
//! broker). Each check builds a fresh namespace, runs real instances of the
//! strategy, and judges with the same [`checker`](crate::checker) the
//! harness uses. A failing check panics with what it saw.
//!
//! `tests/conformance.rs` runs every check for every strategy; adding a
//! strategy there is one line.

use crate::canceller::Canceller;
use crate::checker;
use crate::domain::{
    now_us, CancelOutcome, Micros, NewOrder, OrderId, OrderStatus, PaymentOutcome,
};
use crate::registry::{self, StrategyOptions};
use crate::store::{DbLocation, DbServer, OrderStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Stock per SKU in a fixture: plenty, so creation never fails for lack of it.
const STOCK: i64 = 1_000_000;
/// How long past the last deadline a check waits before judging.
const PATIENCE: Duration = Duration::from_secs(10);

/// A fresh namespace with the schema installed, plus how to build
/// instances of the strategy under test on it.
#[derive(Debug)]
pub struct Fixture {
    server: DbServer,
    location: DbLocation,
    /// The order service's store: creates and pays orders.
    pub orders: OrderStore,
    strategy: String,
    options: StrategyOptions,
    _tempdir: Option<TempDir>,
}

impl Fixture {
    /// Connects to `server_url`, creates a random namespace and installs
    /// the schema. For SQLite the file goes in a temporary folder.
    pub async fn new(server_url: &str, strategy: &str, options: StrategyOptions) -> Fixture {
        let server = DbServer::parse(server_url).expect("valid database URL");
        let namespace = random_namespace(strategy);
        let tempdir = TempDir::new(&namespace);
        let location = server
            .create_namespace(&namespace, &tempdir.0)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let orders = OrderStore::connect(&location, 8)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        orders
            .install_schema(4, STOCK)
            .await
            .expect("install schema");
        Fixture {
            server,
            location,
            orders,
            strategy: strategy.to_string(),
            options,
            _tempdir: Some(tempdir),
        }
    }

    /// A new instance of the strategy with its own connection pool, set up.
    pub async fn instance(&self) -> Arc<dyn Canceller> {
        let store = OrderStore::connect(&self.location, 4)
            .await
            .expect("connect instance");
        let instance: Arc<dyn Canceller> = registry::build(&self.strategy, &self.options, store)
            .expect("build strategy")
            .into();
        instance.setup().await.expect("setup");
        instance
    }

    /// Creates order `id` due `due_in` from now (negative: already overdue).
    pub async fn create(&self, id: OrderId, due_in_ms: i64) -> NewOrder {
        let now = now_us();
        let order = NewOrder {
            id,
            sku: 1 + id % 4,
            qty: 1 + (id % 3) as i32,
            created_at_us: now,
            expire_at_us: now + due_in_ms * 1000,
        };
        self.orders
            .create_order(&order)
            .await
            .expect("create order");
        order
    }

    /// Waits until no order is PENDING with a deadline in the past, or panics.
    pub async fn wait_for_due_cancels(&self, last_deadline: Micros) {
        let give_up = last_deadline + PATIENCE.as_micros() as i64;
        loop {
            let now = now_us();
            let overdue = self
                .orders
                .query_i64s(
                    "SELECT COUNT(*) FROM orders WHERE status = 'PENDING' AND expire_at_us <= ?",
                    &[now],
                )
                .await
                .expect("count overdue");
            if overdue[0] == 0 && now >= last_deadline {
                return;
            }
            assert!(
                now < give_up,
                "{} on {:?}: {} orders still PENDING {PATIENCE:?} after the last deadline",
                self.strategy,
                self.location.kind,
                overdue[0]
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs the checker and panics unless every invariant holds.
    pub async fn assert_clean(&self) -> checker::Verdict {
        let verdict = checker::check(&self.orders, 0, now_us())
            .await
            .expect("checker");
        assert!(
            verdict.is_clean(),
            "{} on {:?} broke invariants: {:#?}",
            self.strategy,
            self.location.kind,
            verdict
        );
        verdict
    }

    pub async fn status(&self, id: OrderId) -> OrderStatus {
        self.orders
            .order(id)
            .await
            .expect("read order")
            .expect("order exists")
            .status
    }

    /// Drops the namespace (runs keep theirs; tests clean up).
    pub async fn cleanup(self) {
        self.orders.close().await;
        let _ = self.server.drop_namespace(&self.location).await;
    }
}

/// A running instance: its task and the token that stops it.
#[derive(Debug)]
pub struct Running {
    pub instance: Arc<dyn Canceller>,
    token: CancellationToken,
    task: JoinHandle<crate::Result<()>>,
}

impl Running {
    pub fn start(instance: Arc<dyn Canceller>) -> Running {
        let token = CancellationToken::new();
        let task = tokio::spawn({
            let (instance, token) = (Arc::clone(&instance), token.clone());
            async move { instance.run(token).await }
        });
        Running {
            instance,
            token,
            task,
        }
    }

    /// Stops the instance and panics if `run` failed.
    pub async fn stop(self) {
        self.token.cancel();
        self.task
            .await
            .expect("instance task panicked")
            .expect("run failed");
    }
}

/// Orders fire after their deadline and never before.
pub async fn fires_after_deadline_never_before(f: &Fixture) {
    let running = Running::start(f.instance().await);
    let mut orders = Vec::new();
    for i in 0..20 {
        let order = f.create(i + 1, 400 + 40 * i).await;
        running
            .instance
            .schedule(order.id, order.expire_at_us)
            .await
            .expect("schedule");
        orders.push(order);
    }
    // Halfway to the first deadline nothing may have fired.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for o in &orders {
        if now_us() < o.expire_at_us {
            assert_eq!(
                f.status(o.id).await,
                OrderStatus::Pending,
                "order {} fired early",
                o.id
            );
        }
    }
    f.wait_for_due_cancels(orders.last().unwrap().expire_at_us)
        .await;
    running.stop().await;
    for o in &orders {
        let row = f.orders.order(o.id).await.unwrap().unwrap();
        assert_eq!(row.status, OrderStatus::Cancelled);
        assert!(
            row.cancelled_at_us.unwrap() >= o.expire_at_us,
            "order {} cancelled early",
            o.id
        );
    }
    f.assert_clean().await;
}

/// An order paid before its deadline is never cancelled; its unpaid
/// neighbours are.
pub async fn paid_order_never_cancelled(f: &Fixture) {
    let running = Running::start(f.instance().await);
    let mut last = 0;
    for i in 0..20 {
        // A second of headroom, so a loaded machine still pays in time.
        let order = f.create(i + 1, 1_000 + 10 * i).await;
        running
            .instance
            .schedule(order.id, order.expire_at_us)
            .await
            .expect("schedule");
        last = order.expire_at_us;
        if order.id % 2 == 1 {
            let paid_at = now_us();
            let outcome = f
                .orders
                .pay(order.id, &format!("cb-{}", order.id), paid_at)
                .await
                .unwrap();
            assert!(
                paid_at < order.expire_at_us,
                "the machine stalled past the deadline"
            );
            assert_eq!(outcome, PaymentOutcome::Applied, "order {}", order.id);
        }
    }
    f.wait_for_due_cancels(last).await;
    // Give a misbehaving strategy time to cancel a paid order anyway.
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.stop().await;
    for id in 1..=20 {
        let expected = if id % 2 == 1 {
            OrderStatus::Paid
        } else {
            OrderStatus::Cancelled
        };
        assert_eq!(f.status(id).await, expected, "order {id}");
    }
    f.assert_clean().await;
}

/// Scheduling one order three times, and delivering its cancel again after
/// it happened, release its stock once.
pub async fn duplicates_release_once(f: &Fixture) {
    let running = Running::start(f.instance().await);
    let mut last = 0;
    for i in 0..10 {
        let order = f.create(i + 1, 200 + 20 * i).await;
        for _ in 0..3 {
            running
                .instance
                .schedule(order.id, order.expire_at_us)
                .await
                .expect("schedule");
        }
        last = order.expire_at_us;
    }
    f.wait_for_due_cancels(last).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.stop().await;
    // A late duplicate delivery reaches the one cancel function: absorbed.
    let again = f.orders.cancel_if_due(1, "duplicate").await.unwrap();
    assert_eq!(again, CancelOutcome::AlreadyCancelled);
    let verdict = f.assert_clean().await;
    assert_eq!(verdict.orders.cancelled, 10);
    assert_eq!(verdict.releases, 10, "one release per cancelled order");
}

/// Three instances at once cancel every order exactly once.
pub async fn several_instances_stay_correct(f: &Fixture) {
    let instances: Vec<Running> = futures_join_all((0..3).map(|_| f.instance()))
        .await
        .into_iter()
        .map(Running::start)
        .collect();
    let mut last = 0;
    for i in 0..150 {
        let order = f.create(i + 1, 200 + 5 * i).await;
        // Round-robin, as the harness does: with instance-owned schedules
        // each order lives in exactly one instance.
        let owner = &instances[i as usize % instances.len()];
        owner
            .instance
            .schedule(order.id, order.expire_at_us)
            .await
            .expect("schedule");
        last = order.expire_at_us;
    }
    f.wait_for_due_cancels(last).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut attempts = 0;
    for running in instances {
        attempts += running.instance.store_stats().cancel_attempts;
        running.stop().await;
    }
    let verdict = f.assert_clean().await;
    assert_eq!(verdict.orders.cancelled, 150);
    assert_eq!(verdict.releases, 150);
    assert!(
        attempts >= 150,
        "instances reported {attempts} attempts for 150 cancels"
    );
}

/// An order whose deadline passed while no instance was running is
/// cancelled when the strategy starts: it was scheduled by an instance that
/// then went away without ever running.
pub async fn overdue_while_down_is_cancelled_on_start(f: &Fixture) {
    let departed = f.instance().await;
    let mut last = 0;
    for i in 0..10 {
        let order = f.create(i + 1, 50 + 10 * i).await;
        departed
            .schedule(order.id, order.expire_at_us)
            .await
            .expect("schedule");
        last = order.expire_at_us;
    }
    drop(departed);
    let wait = (last - now_us()).max(0) as u64 + 200_000;
    tokio::time::sleep(Duration::from_micros(wait)).await;
    assert_eq!(
        f.status(1).await,
        OrderStatus::Pending,
        "nothing was running to cancel it"
    );
    let running = Running::start(f.instance().await);
    f.wait_for_due_cancels(last).await;
    running.stop().await;
    let verdict = f.assert_clean().await;
    assert_eq!(verdict.orders.cancelled, 10);
}

async fn futures_join_all<F, T>(futures: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T>,
{
    let mut out = Vec::new();
    for fut in futures {
        out.push(fut.await);
    }
    out
}

/// A unique namespace per fixture, so concurrent tests never share tables.
fn random_namespace(strategy: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = now_us() % 1_000_000_000;
    let tag = crate::store::identifier(strategy);
    format!("t_{tag}_{}_{nanos}_{n}", std::process::id())
}

/// A temporary folder removed on drop (for SQLite files).
#[derive(Debug)]
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        TempDir(std::env::temp_dir().join(format!("delaybench-{name}")))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
