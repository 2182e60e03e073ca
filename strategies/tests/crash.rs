//! Crash points on the real services (PostgreSQL, Redis, RabbitMQ).
//!
//! Two kinds of test:
//! - in this process, with [`CrashAction::Count`]: every point a strategy
//!   declares is reached on a real run (one due order, every point armed),
//!   and a point it does not declare never is;
//! - a real crash: a child process (`src/bin/delaybench-crash-child.rs`) arms one point with the default
//!   [`CrashAction::Abort`] and runs the strategy until it aborts; this
//!   process then checks what the crash left (the order PENDING or
//!   CANCELLED, a claim still in processing) and that a fresh instance
//!   finishes the work with one stock release.
//!
//! The crash statics are process-global and the tests of this file run on
//! parallel threads, so every test takes [`CRASH`].

mod common;

use common::test_options;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;
use strategies::conformance::{Fixture, Running};
use strategies::crash::{self, CrashAction, CrashPoint};
use strategies::redis_zset::{ClaimMode, RedisZset};
use strategies::registry::{self, Role};
use strategies::{Canceller, NewOrder, OrderStatus};
use tokio::sync::Mutex;

static CRASH: Mutex<()> = Mutex::const_new(());

/// What each registry strategy declares. `every_registry_strategy_is_listed`
/// keeps it complete, so a new strategy must say where its points are.
const DECLARED: &[(&str, &[CrashPoint])] = &[
    ("db-scan", &[]),
    ("db-scan-noindex", &[]),
    ("db-timer", &[]),
    ("timing-wheel", &[CrashPoint::AfterClaim]),
    ("timing-wheel-unconditional", &[CrashPoint::AfterClaim]),
    ("timing-wheel-release-first", &[CrashPoint::AfterClaim]),
    ("rabbit-ttl", &CrashPoint::ALL),
    ("rabbit-delayed", &CrashPoint::ALL),
    ("rabbit-ttl-single-queue", &CrashPoint::ALL),
    ("rabbit-ttl-per-delivery", &CrashPoint::ALL),
    ("redis-zset", &CrashPoint::ALL),
    ("redis-zset-nonatomic", &[CrashPoint::AfterCommitBeforeAck]),
    ("redis-keyspace-expiry", &[CrashPoint::AfterClaim]),
    ("redis-zset-publish-first", &CrashPoint::ALL),
    ("ceiling", &[]),
];

fn declared(strategy: &str) -> &'static [CrashPoint] {
    DECLARED
        .iter()
        .find(|(name, _)| *name == strategy)
        .unwrap_or_else(|| panic!("`{strategy}` missing from DECLARED"))
        .1
}

/// How long after creation the tests' orders fall due: one of the
/// `rabbit-ttl` TTLs of [`test_options`], so it waits exactly that long.
const DUE_IN_MS: i64 = 250;

/// Polls `cond` every 20 ms; panics with `what` after `within`.
async fn wait_for(what: &str, within: Duration, mut cond: impl AsyncFnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + within;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < give_up,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `strategy` with every crash point armed under
/// [`CrashAction::Count`] on one due order: each declared point is hit
/// once, no other point is ever hit, and the order is cancelled.
async fn declared_points_reached(strategy: &str) {
    let expected = declared(strategy);
    let f = Fixture::new(&common::postgres_url(), strategy, test_options()).await;
    let instance = f.instance().await;
    assert_eq!(
        instance.crash_points(),
        expected,
        "{strategy}: declared points"
    );

    crash::set_action(CrashAction::Count);
    crash::reset();
    for point in CrashPoint::ALL {
        crash::arm(point);
    }
    let running = Running::start(instance.clone());
    let order = f.create_scheduled(1, DUE_IN_MS, &*instance).await;
    for &point in expected {
        wait_for(
            &format!("{strategy}: {point} reached"),
            Duration::from_secs(15),
            async || crash::hits(point) == 1,
        )
        .await;
    }
    f.wait_for_due_cancels(order.expire_at_us).await;
    // Room for a late undeclared point to show up before judging.
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.stop().await;
    crash::disarm_all();
    for point in CrashPoint::ALL {
        let want = u64::from(expected.contains(&point));
        assert_eq!(crash::hits(point), want, "{strategy}: hits of {point}");
    }
    assert_eq!(f.status(1).await, OrderStatus::Cancelled, "{strategy}");
    if registry::Variant::parse(strategy).unwrap().info.role != Role::Teaching {
        f.assert_clean().await;
    }
    crash::reset();
    instance.teardown().await.expect("teardown");
    f.cleanup().await;
}

#[test]
fn every_registry_strategy_is_listed() {
    for info in registry::STRATEGIES {
        declared(info.name);
    }
    assert_eq!(DECLARED.len(), registry::STRATEGIES.len());
}

#[test]
fn crash_point_names_parse_and_unknown_ones_list_the_known() {
    for point in CrashPoint::ALL {
        assert_eq!(point.as_str().parse::<CrashPoint>().unwrap(), point);
    }
    let err = "before-claim"
        .parse::<CrashPoint>()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("after-claim") && err.contains("after-commit-before-ack"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_scan_and_ceiling_declare_and_reach_no_point() {
    let _crash = CRASH.lock().await;
    for strategy in ["db-scan", "db-scan-noindex", "db-timer", "ceiling"] {
        declared_points_reached(strategy).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_wheel_reaches_after_claim_only() {
    let _crash = CRASH.lock().await;
    for strategy in [
        "timing-wheel",
        "timing-wheel-unconditional",
        "timing-wheel-release-first",
    ] {
        declared_points_reached(strategy).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbit_ttl_modes_reach_both_points() {
    let _crash = CRASH.lock().await;
    for strategy in ["rabbit-ttl", "rabbit-ttl-single-queue"] {
        declared_points_reached(strategy).await;
    }
}

/// Apart from the TTL modes: it needs the broker's `x-delayed-message`
/// exchange type (`bash rabbitmq-plugin/install.sh`), and fails with that
/// hint where it is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbit_delayed_reaches_both_points() {
    let _crash = CRASH.lock().await;
    declared_points_reached("rabbit-delayed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_strategies_reach_their_declared_points() {
    let _crash = CRASH.lock().await;
    for strategy in [
        "redis-zset",
        "redis-zset-nonatomic",
        "redis-keyspace-expiry",
    ] {
        declared_points_reached(strategy).await;
    }
}

// ---- real crashes, in a child process ----

/// Set in the child's environment: what to run and where.
const CHILD_ENV: &str = "DELAYBENCH_CRASH_CHILD";

/// Runs `delaybench-crash-child` for `strategy` at `point` on `f`'s
/// namespace and asserts it died of the injected abort.
async fn crash_in_child(f: &Fixture, strategy: &str, point: CrashPoint) {
    let spec = serde_json::json!({
        "strategy": strategy,
        "point": point,
        "location": f.orders.location(),
        "options": test_options(),
    });
    let exe = env!("CARGO_BIN_EXE_delaybench-crash-child");
    // `ulimit -c 0`: the abort must not leave a core file behind.
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -c 0; exec \"$0\" \"$@\"")
        .arg(exe)
        .env(CHILD_ENV, spec.to_string())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), child)
        .await
        .expect("the child ends")
        .expect("the child runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(6),
        "{strategy}: the child should die of SIGABRT at {point}; {:?}\nstdout: {}\nstderr: {stderr}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
    );
    assert!(
        stderr.contains(&format!("injected crash at {point}")),
        "{stderr}"
    );
}

/// A fixture, a set-up instance (kept for teardown) and order 1 scheduled
/// on it, due in [`DUE_IN_MS`]; nothing runs yet.
async fn scheduled(strategy: &str) -> (Fixture, std::sync::Arc<dyn Canceller>, NewOrder) {
    let f = Fixture::new(&common::postgres_url(), strategy, test_options()).await;
    let instance = f.instance().await;
    let order = f.create_scheduled(1, DUE_IN_MS, &*instance).await;
    (f, instance, order)
}

/// A fresh instance finishes what the crash left: order 1 is CANCELLED,
/// released once. Returns the fresh instance's absorbed attempts.
async fn recovered(f: &Fixture, strategy: &str) -> u64 {
    let running = Running::start(f.instance().await);
    wait_for(
        &format!("{strategy}: the fresh instance cancels or absorbs order 1"),
        Duration::from_secs(20),
        async || {
            let stats = running.instance.store_stats();
            stats.cancelled + stats.already_cancelled >= 1
        },
    )
    .await;
    let absorbed = running.instance.store_stats().already_cancelled;
    running.stop().await;
    let verdict = f.assert_clean().await;
    assert_eq!(
        (verdict.orders.cancelled, verdict.releases),
        (1, 1),
        "{strategy}: cancelled once, released once"
    );
    absorbed
}

async fn redis_processing_score(f: &Fixture, order_id: i64) -> Option<f64> {
    let options = test_options();
    let keys = RedisZset::new(f.orders.clone(), &options.redis_zset, ClaimMode::Atomic).unwrap();
    let mut conn = redis::Client::open(options.redis_zset.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("ZSCORE")
        .arg(keys.processing_key(order_id))
        .arg(order_id)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// redis-zset, after-claim: the member sits in processing and the order is
/// PENDING; the reclaimer gives it back after the visibility timeout.
/// After-commit-before-ack: the order is CANCELLED and the member still in
/// processing; a fresh worker reclaims it and absorbs the second attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_zset_real_crash_at_each_point_is_recovered() {
    let _crash = CRASH.lock().await;
    for (point, left) in [
        (CrashPoint::AfterClaim, OrderStatus::Pending),
        (CrashPoint::AfterCommitBeforeAck, OrderStatus::Cancelled),
    ] {
        let (f, instance, _) = scheduled("redis-zset").await;
        crash_in_child(&f, "redis-zset", point).await;
        assert_eq!(f.status(1).await, left, "redis-zset at {point}");
        assert!(
            redis_processing_score(&f, 1).await.is_some(),
            "redis-zset at {point}: the claim stays in processing"
        );
        let absorbed = recovered(&f, "redis-zset").await;
        assert_eq!(
            absorbed,
            u64::from(point == CrashPoint::AfterCommitBeforeAck),
            "redis-zset at {point}: absorbed attempts"
        );
        assert!(redis_processing_score(&f, 1).await.is_none());
        instance.teardown().await.expect("teardown");
        f.cleanup().await;
    }
}

/// rabbit-ttl: the unacked delivery goes back to the queue when the
/// process dies; the next consumer cancels it (after-claim) or absorbs it
/// (after-commit-before-ack).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbit_real_crash_at_each_point_is_redelivered() {
    let _crash = CRASH.lock().await;
    for (point, left) in [
        (CrashPoint::AfterClaim, OrderStatus::Pending),
        (CrashPoint::AfterCommitBeforeAck, OrderStatus::Cancelled),
    ] {
        let (f, _instance, _) = scheduled("rabbit-ttl").await;
        crash_in_child(&f, "rabbit-ttl", point).await;
        assert_eq!(f.status(1).await, left, "rabbit-ttl at {point}");
        let absorbed = recovered(&f, "rabbit-ttl").await;
        assert_eq!(
            absorbed,
            u64::from(point == CrashPoint::AfterCommitBeforeAck),
            "rabbit-ttl at {point}: absorbed attempts"
        );
        f.cleanup().await;
    }
}

/// timing-wheel, after-claim: the popped entry dies with the process; the
/// order stays PENDING until a fresh instance reloads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_wheel_real_crash_after_claim_is_reloaded() {
    let _crash = CRASH.lock().await;
    let f = Fixture::new(&common::postgres_url(), "timing-wheel", test_options()).await;
    f.create(1, DUE_IN_MS).await;
    crash_in_child(&f, "timing-wheel", CrashPoint::AfterClaim).await;
    assert_eq!(f.status(1).await, OrderStatus::Pending);
    assert_eq!(recovered(&f, "timing-wheel").await, 0);
    f.cleanup().await;
}
