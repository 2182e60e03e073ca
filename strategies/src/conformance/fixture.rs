//! What every check stands on: a fresh namespace on a real backend, the
//! strategy's running instances, the orders, and the verdict in words.

use crate::canceller::{Canceller, Capabilities};
use crate::checker;
use crate::domain::{now_us, Micros, NewOrder, OrderId, OrderStatus};
use crate::leftovers::TestNamespace;
use crate::registry::{Deployment, StrategyOptions, Variant};
use crate::store::{DbLocation, DbServer, OrderStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What a failed check saw, in words.
pub type CheckResult = std::result::Result<(), String>;

/// Returns `Err(message)` from the enclosing check unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}
pub(super) use ensure;

/// Stock per SKU in a fixture: plenty, so creation never fails for lack of it.
const STOCK: i64 = 1_000_000;
/// How long past the last deadline a check waits before judging.
const PATIENCE: Duration = Duration::from_secs(10);
/// How late after its deadline a check accepts a cancel, where it measures
/// lateness. Generous for a loaded two-core CI machine with the test
/// options (50 ms scans, 1 ms ticks, 200 ms Redis max-sleep); far below the
/// seconds a head-of-line-blocked queue or a dead owner costs. Checked
/// with this process's worst timer stall added ([`Fixture::cancelled_within`]).
pub const LATENESS_BOUND: Duration = Duration::from_millis(600);

/// Extra lateness allowed for services slower than the stall meter sees.
#[derive(Debug, Clone, Copy)]
struct ServiceSlack {
    slack: Duration,
    why: &'static str,
}

/// How late this process's own timers fire, worst case, since the meter
/// started: a task sleeps [`StallMeter::TICK`] over and over and keeps the
/// largest overshoot. The instances under test run in this process, so on a
/// starved machine they are that late too, through no fault of theirs;
/// lateness bounds add it, which keeps a bound about the strategy rather
/// than about the machine's load (on a quiet machine it is about a
/// millisecond, and the bound is as strict as written).
#[derive(Debug)]
struct StallMeter {
    worst_us: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl StallMeter {
    const TICK: Duration = Duration::from_millis(10);

    fn start() -> StallMeter {
        let worst_us = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let worst = Arc::clone(&worst_us);
        let task = tokio::spawn(async move {
            loop {
                let asked = tokio::time::Instant::now();
                tokio::time::sleep(Self::TICK).await;
                let over = asked.elapsed().saturating_sub(Self::TICK);
                worst.fetch_max(
                    over.as_micros() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
        });
        StallMeter { worst_us, task }
    }

    fn worst(&self) -> Duration {
        Duration::from_micros(self.worst_us.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl Drop for StallMeter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A fresh namespace with the schema installed, plus how to build
/// instances of the strategy under test on it.
#[derive(Debug)]
pub struct Fixture {
    pub(super) server_url: String,
    pub(super) location: DbLocation,
    /// The order service's store: creates and pays orders.
    pub orders: OrderStore,
    /// The strategy as the harness deploys it, with the fixture's options.
    deployment: Deployment,
    /// Removes the namespace and the strategy's broker objects and Redis
    /// keys, also when the test panics before [`Fixture::cleanup`].
    pub(super) leftovers: TestNamespace,
    /// This process's worst timer stall, added to lateness bounds.
    stall: StallMeter,
    /// Lateness a test declares for services slower than this process can
    /// see ([`Fixture::with_service_slack`]); none by default.
    service_slack: Option<ServiceSlack>,
    _tempdir: Option<TempDir>,
}

impl Fixture {
    /// Connects to `server_url`, creates a random namespace and installs
    /// the schema. For SQLite the file goes in a temporary folder.
    pub async fn new(server_url: &str, strategy: &str, options: StrategyOptions) -> Fixture {
        let variant = Variant::parse(strategy).unwrap_or_else(|e| panic!("{e}"));
        Fixture::of(server_url, Deployment::new(variant, &options)).await
    }

    /// A fixture for `deployment`, as [`Fixture::new`].
    async fn of(server_url: &str, deployment: Deployment) -> Fixture {
        let server = DbServer::parse(server_url).expect("valid database URL");
        let namespace = random_namespace(deployment.variant().name());
        let tempdir = TempDir::new(&namespace);
        let location = server
            .create_namespace(&namespace, &tempdir.0)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let orders = OrderStore::connect(&location, 8)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // As the harness's order service does for this strategy.
        let orders = deployment.order_service_store(orders);
        orders
            .install_schema(4, STOCK)
            .await
            .expect("install schema");
        Fixture {
            server_url: server_url.to_string(),
            leftovers: TestNamespace::new(&server, &location, &deployment),
            location,
            orders,
            deployment,
            stall: StallMeter::start(),
            service_slack: None,
            _tempdir: Some(tempdir),
        }
    }

    /// Another fixture for the same strategy, server and options, on a
    /// fresh namespace (each check starts from empty tables).
    pub async fn sibling(&self) -> Fixture {
        let mut fresh = Fixture::of(&self.server_url, self.deployment.clone()).await;
        fresh.service_slack = self.service_slack;
        fresh
    }

    /// Adds `slack` to every lateness bound, for a reason this process's
    /// stall meter cannot see: services under test that share the machine's
    /// cores with it and with each other (a three-node RabbitMQ cluster,
    /// whose quorum queues wait for a majority of nodes to write, on a
    /// two-core machine). The reason is printed next to the bound when a
    /// check fails. The checks whose bound it widens are built so that the
    /// defect they catch costs seconds, well above bound and slack.
    pub fn with_service_slack(mut self, slack: Duration, why: &'static str) -> Fixture {
        self.service_slack = Some(ServiceSlack { slack, why });
        self
    }

    /// The strategy under test.
    pub fn variant(&self) -> Variant {
        self.deployment.variant()
    }

    /// Whether the order service would tell instances of payments
    /// ([`crate::registry::Deployment::hears_payments`]).
    pub fn hears_payments(&self) -> bool {
        self.deployment.hears_payments()
    }

    /// The strategy under test, by registry name.
    pub fn strategy(&self) -> &'static str {
        self.deployment.variant().name()
    }

    /// The namespace's resource prefix: its queues are `dlb.<prefix>.*`,
    /// its Redis keys `dlb:{<prefix>...` (see [`crate::leftovers`]).
    pub fn resource_prefix(&self) -> String {
        self.location.resource_prefix()
    }

    /// The database kind and the strategy, for messages.
    pub fn describe(&self) -> String {
        format!("{} on {:?}", self.strategy(), self.location.kind)
    }

    /// A new instance of the strategy with its own connection pool, set up.
    pub async fn instance(&self) -> Arc<dyn Canceller> {
        self.instance_with(self.deployment.options()).await
    }

    /// A new instance built with `options` instead of the fixture's.
    pub async fn instance_with(&self, options: &StrategyOptions) -> Arc<dyn Canceller> {
        let store = OrderStore::connect(&self.location, 4)
            .await
            .expect("connect instance");
        self.instance_on(options, store).await
    }

    /// An instance on `store`, a connection of the caller's to the
    /// fixture's namespace ([`Fixture::location`]), set up; for a test that
    /// needs the store configured first (e.g. measuring server reads).
    pub async fn instance_on(
        &self,
        options: &StrategyOptions,
        store: OrderStore,
    ) -> Arc<dyn Canceller> {
        let instance: Arc<dyn Canceller> = Deployment::new(self.deployment.variant(), options)
            .instance(store)
            .expect("build strategy")
            .into();
        instance.setup().await.expect("setup");
        instance
    }

    /// The fixture's namespace, to connect more stores to.
    pub fn location(&self) -> &DbLocation {
        &self.location
    }

    /// The options instances are built with.
    pub fn options(&self) -> &StrategyOptions {
        self.deployment.options()
    }

    /// What the strategy declares, read from a set-up instance (some
    /// declarations depend on what `setup` found, e.g. Redis persistence).
    pub async fn capabilities(&self) -> Capabilities {
        self.instance().await.capabilities()
    }

    /// [`Fixture::create`], then schedules the order once on `on` (after
    /// its transaction committed, as the order service does). Not where
    /// the strategy's schedule does nothing
    /// ([`Deployment::takes_schedules`]): the harness calls none there, so
    /// every check built on this shows the strategy finds its orders by
    /// itself, as that declaration promises.
    pub async fn create_scheduled(
        &self,
        id: OrderId,
        due_in_ms: i64,
        on: &dyn Canceller,
    ) -> NewOrder {
        let order = self.create(id, due_in_ms).await;
        if self.deployment.takes_schedules() {
            on.schedule(order.id, order.expire_at_us)
                .await
                .expect("schedule");
        }
        order
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
        if let Err(e) = self.try_wait_for_due_cancels(last_deadline).await {
            panic!("{e}");
        }
    }

    /// Waits until no order is PENDING with a deadline in the past; `Err`
    /// when some still are [`PATIENCE`] after `last_deadline`.
    pub async fn try_wait_for_due_cancels(&self, last_deadline: Micros) -> CheckResult {
        self.wait_for_overdue_at_most(
            0,
            last_deadline + PATIENCE.as_micros() as i64,
            last_deadline,
        )
        .await
        .map_err(|n| {
            format!(
                "{}: {n} orders still PENDING {PATIENCE:?} after the last deadline",
                self.describe()
            )
        })
    }

    /// Polls until at most `allowed` orders are PENDING past their deadline
    /// and `now >= not_before`; `Err(overdue)` at `give_up_us`.
    pub(super) async fn wait_for_overdue_at_most(
        &self,
        allowed: i64,
        give_up_us: Micros,
        not_before: Micros,
    ) -> std::result::Result<(), i64> {
        loop {
            let now = now_us();
            let overdue = self.overdue(now).await;
            if overdue <= allowed && now >= not_before {
                return Ok(());
            }
            if now >= give_up_us {
                return Err(overdue);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many orders are PENDING with a deadline before `now`.
    pub(super) async fn overdue(&self, now: Micros) -> i64 {
        self.orders
            .query_i64s(
                "SELECT COUNT(*) FROM orders WHERE status = 'PENDING' AND expire_at_us <= ?",
                &[now],
            )
            .await
            .expect("count overdue")[0]
    }

    /// Runs the checker and panics unless every invariant holds.
    pub async fn assert_clean(&self) -> checker::Verdict {
        self.verdict_if_clean()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs the checker; `Err` with the verdict unless every invariant holds.
    pub async fn verdict_if_clean(&self) -> std::result::Result<checker::Verdict, String> {
        let verdict = checker::check(&self.orders, 0, now_us())
            .await
            .expect("checker");
        if verdict.is_clean() {
            Ok(verdict)
        } else {
            Err(format!(
                "{} broke invariants: {}; verdict: {:#?}",
                self.describe(),
                anomaly_summary(&verdict),
                verdict
            ))
        }
    }

    /// Order `id`, due in `due_in_ms` and scheduled through `via`, is
    /// cancelled by whatever instance runs, within [`PATIENCE`]: what a
    /// check does before the orders it times, when its subject is which
    /// instance cancels rather than how long one takes to start (connect,
    /// declare its queues, begin consuming), as the harness's warm-up does.
    pub async fn warm_up(&self, id: OrderId, due_in_ms: i64, via: &dyn Canceller) -> CheckResult {
        let order = self.create_scheduled(id, due_in_ms, via).await;
        let give_up = order.expire_at_us + PATIENCE.as_micros() as i64;
        while self.status(id).await == OrderStatus::Pending {
            if now_us() >= give_up {
                return Err(format!(
                    "{}: the warm-up order {id} was still PENDING {PATIENCE:?} after its \
                     deadline: no running instance cancels",
                    self.describe()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    pub async fn status(&self, id: OrderId) -> OrderStatus {
        self.orders
            .order(id)
            .await
            .expect("read order")
            .expect("order exists")
            .status
    }

    /// `Err` unless each of `orders` is CANCELLED, not before its deadline
    /// and at most `bound` after it.
    pub async fn cancelled_within(&self, orders: &[NewOrder], bound: Duration) -> CheckResult {
        // Plus how long this process's own timers were held up meanwhile
        // (see `StallMeter`): that much lateness is the machine's.
        let stall = self.stall.worst();
        let (slack, why) = match self.service_slack {
            Some(ServiceSlack { slack, why }) => (slack, format!(", + {slack:?} for {why}")),
            None => (Duration::ZERO, String::new()),
        };
        let allowed = bound + stall + slack;
        for o in orders {
            let row = self
                .orders
                .order(o.id)
                .await
                .expect("read order")
                .expect("order exists");
            let due_in = Duration::from_micros((o.expire_at_us - o.created_at_us).max(0) as u64);
            ensure!(
                row.status == OrderStatus::Cancelled,
                "{}: order {} (due {due_in:?} after creation) is {} instead of CANCELLED",
                self.describe(),
                o.id,
                row.status.as_str()
            );
            let late = row.cancelled_at_us.unwrap_or(0) - o.expire_at_us;
            ensure!(
                late >= 0,
                "{}: order {} cancelled {}us before its deadline",
                self.describe(),
                o.id,
                -late
            );
            ensure!(
                late <= allowed.as_micros() as i64,
                "{}: order {} (due {due_in:?} after creation) cancelled {:?} after its deadline, \
                 over the {bound:?} lateness bound (+ {stall:?}, this process's worst timer \
                 stall during the check{why})",
                self.describe(),
                o.id,
                Duration::from_micros(late as u64)
            );
        }
        Ok(())
    }

    /// Drops the namespace (runs keep theirs; tests clean up) and the
    /// strategy's queues, exchanges and Redis keys (left behind, hundreds of
    /// durable queues slow every later broker restart). A test that panics
    /// before calling this gets the same on drop ([`TestNamespace`]). A
    /// server-wide setting (the keyspace-expiry variant's) is its own tests'
    /// teardown to restore.
    pub async fn cleanup(self) {
        self.orders.close().await;
        self.leftovers.clean().await;
    }
}

/// The non-zero anomalies of `verdict` with their examples, e.g.
/// `paid_then_cancelled = 10 (e.g. [1, 3])`.
fn anomaly_summary(verdict: &checker::Verdict) -> String {
    verdict
        .anomalies
        .iter()
        .filter(|(_, n)| *n != 0)
        .map(|(anomaly, n)| {
            let examples = verdict.anomaly_examples.get(anomaly);
            format!("{} = {n} (e.g. {examples:?})", anomaly.key())
        })
        .collect::<Vec<_>>()
        .join(", ")
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

    /// Returns once the instance says it has [`Canceller::started`];
    /// panics after a minute, or if `run` ended first.
    pub async fn until_started(&self) {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
        while !self.instance.started() {
            assert!(
                !self.task.is_finished(),
                "{}: run ended before the instance started",
                self.instance.name()
            );
            assert!(
                tokio::time::Instant::now() < give_up,
                "{}: not started after 60 s",
                self.instance.name()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the instance and panics if `run` failed.
    pub async fn stop(self) {
        if let Err(e) = self.try_stop().await {
            panic!("{e}");
        }
    }

    /// Stops the instance; `Err` if `run` failed or panicked.
    pub async fn try_stop(self) -> CheckResult {
        self.token.cancel();
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("{}: run failed: {e}", self.instance.name())),
            Err(e) => Err(format!("{}: run panicked: {e}", self.instance.name())),
        }
    }
}

/// Starts `n` fresh instances, one after another.
/// `n` instances running, each [`Canceller::started`] (a wheel's reload
/// done) before the next starts, as the harness's workers report ready:
/// an order written while a wheel still reloads reaches it through the
/// reload too, and with several instances is cancelled twice. Over a slower
/// link (TLS to MariaDB) the reload overlapped the first orders and the
/// check counted up to 23 % of them attempted twice.
pub async fn start_instances(f: &Fixture, n: usize) -> Vec<Running> {
    let mut out = Vec::new();
    for _ in 0..n {
        let running = Running::start(f.instance().await);
        running.until_started().await;
        out.push(running);
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
