//! `redis-zset` and its teaching variants on a real Redis (never a mock): a
//! worker killed between claim and ack, duplicate schedules, malformed
//! members, the non-atomic claim's duplicate attempts and the keyspace
//! notification variant's lost cancels. A Redis that is down fails these
//! tests with the URL and how to start it.
//!
//! Every test takes [`REDIS`], so the tests of this binary never share the
//! server's global state (notify-keyspace-events) at the same time.

mod common;

use redis::aio::MultiplexedConnection;
use std::time::Duration;
use strategies::conformance::{Fixture, Running};
use strategies::redis_zset::teaching::RedisKeyspaceExpiry;
use strategies::redis_zset::{ClaimMode, RedisZset};
use strategies::{checker, now_us, CancelOutcome, Canceller, OrderStatus, StrategyOptions};
use tokio::sync::Mutex;

static REDIS: Mutex<()> = Mutex::const_new(());

fn redis_url() -> String {
    std::env::var("DELAYBENCH_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A plain connection for inspecting Redis; panics (fails the test) with
/// the start command when Redis is down.
async fn redis_conn() -> MultiplexedConnection {
    let url = redis_url();
    let connect = async {
        redis::Client::open(url.as_str())?
            .get_multiplexed_async_connection()
            .await
    };
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => panic!(
            "Redis is not reachable at {url}: {e}\n  start it: `docker compose up -d --wait redis`, \
             or `redis-server --daemonize yes --port 6379 --save \"\" --appendonly no`"
        ),
        Err(_) => panic!("Redis at {url} did not answer within 5s"),
    }
}

fn options() -> StrategyOptions {
    let mut options = StrategyOptions::default();
    options.redis_zset.url = redis_url();
    options.redis_zset.max_sleep = Duration::from_millis(200);
    options.redis_zset.reclaim_interval = Duration::from_millis(100);
    options.redis_zset.visibility_timeout = Duration::from_secs(1);
    options
}

async fn zcard(conn: &mut MultiplexedConnection, key: &str) -> u64 {
    redis::cmd("ZCARD")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

async fn zscore(conn: &mut MultiplexedConnection, key: &str, member: i64) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query_async(conn)
        .await
        .unwrap()
}

async fn wait_until_cancelled(
    f: &Fixture,
    ids: impl Iterator<Item = i64> + Clone,
    within: Duration,
) {
    let give_up = tokio::time::Instant::now() + within;
    loop {
        let mut pending = Vec::new();
        for id in ids.clone() {
            if f.status(id).await != OrderStatus::Cancelled {
                pending.push(id);
            }
        }
        if pending.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "orders {pending:?} not cancelled within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A worker claims due orders and dies before acking: the claims sit in
/// processing until their visibility deadline, then a live worker's
/// reclaimer returns them and they are cancelled, each released once, even
/// when the dead worker comes back and acks late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_without_ack_is_reclaimed_and_released_once() {
    let _redis = REDIS.lock().await;
    let mut conn = redis_conn().await;
    let options = options();
    let f = Fixture::new(&common::postgres_url(), "redis-zset", options.clone()).await;
    let scheduler = f.instance().await;
    // Shards are hashed from ids: use ids of one shard so one claim takes them all.
    let zombie = RedisZset::new(f.orders.clone(), &options.redis_zset, ClaimMode::Atomic).unwrap();
    let ids: Vec<i64> = (1..200)
        .filter(|id| zombie.delay_key(*id) == zombie.delay_key(1))
        .take(5)
        .collect();
    for &id in &ids {
        let order = f.create(id, 100).await;
        scheduler.schedule(id, order.expire_at_us).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let claimed_at = now_us();
    let claimed = zombie.claim_without_ack(ids[0]).await.unwrap();
    assert_eq!(
        claimed.len(),
        ids.len(),
        "the zombie claims all: {claimed:?}"
    );
    let processing = zombie.processing_key(ids[0]).to_string();
    assert_eq!(zcard(&mut conn, zombie.delay_key(ids[0])).await, 0);
    assert_eq!(zcard(&mut conn, &processing).await, ids.len() as u64);

    // A live worker cannot see the claims before the visibility timeout.
    let running = Running::start(f.instance().await);
    tokio::time::sleep(Duration::from_millis(400)).await;
    for &id in &ids {
        assert_eq!(
            f.status(id).await,
            OrderStatus::Pending,
            "order {id} taken while claimed"
        );
    }
    wait_until_cancelled(&f, ids.iter().copied(), Duration::from_secs(10)).await;
    let reclaimed_after = now_us() - claimed_at;
    assert!(
        reclaimed_after >= 1_000_000,
        "reclaimed after {reclaimed_after}us, before the 1s visibility timeout"
    );
    let counters = running.instance.counters();
    assert!(counters["reclaimed"] >= ids.len() as u64, "{counters:?}");
    assert_eq!(counters["errors"], 0, "{counters:?}");

    // The zombie wakes up: its cancel is absorbed, its late ack harmless.
    let late = f
        .orders
        .cancel_batch_if_due(&ids, "redis-zset")
        .await
        .unwrap();
    assert!(
        late.iter()
            .all(|(_, o)| *o == CancelOutcome::AlreadyCancelled),
        "{late:?}"
    );
    let _: u64 = redis::cmd("ZREM")
        .arg(&processing)
        .arg(&ids)
        .query_async(&mut conn)
        .await
        .unwrap();
    running.stop().await;
    assert_eq!(zcard(&mut conn, &processing).await, 0);
    let verdict = checker::check(&f.orders, 0, now_us()).await.unwrap();
    assert!(verdict.is_clean(), "{verdict:#?}");
    assert_eq!(verdict.orders.cancelled, ids.len() as u64);
    assert_eq!(verdict.releases, verdict.orders.cancelled);
    scheduler.teardown().await.unwrap();
    f.cleanup().await;
}

/// Scheduling an order three times keeps one member with one score, gives
/// one cancel attempt and one release; a schedule after the cancel only
/// adds an absorbed attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_schedules_are_harmless() {
    let _redis = REDIS.lock().await;
    let mut conn = redis_conn().await;
    let f = Fixture::new(&common::sqlite_url(), "redis-zset", options()).await;
    let zset = RedisZset::new(f.orders.clone(), &options().redis_zset, ClaimMode::Atomic).unwrap();
    let instance = f.instance().await;
    let mut last = 0;
    for id in 1..=10 {
        let order = f.create(id, 300 + 10 * id).await;
        for _ in 0..3 {
            instance.schedule(id, order.expire_at_us).await.unwrap();
        }
        assert_eq!(
            zscore(&mut conn, zset.delay_key(id), id).await,
            Some(order.expire_at_us as f64)
        );
        last = order.expire_at_us;
    }
    let counters = instance.counters();
    assert_eq!(counters["scheduled"], 30);
    assert_eq!(counters["duplicate_schedules"], 20);
    let running = Running::start(instance);
    f.wait_for_due_cancels(last).await;
    assert_eq!(running.instance.store_stats().cancel_attempts, 10);
    // Once more after the cancel: re-added, claimed, absorbed.
    running.instance.schedule(1, now_us()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = running.instance.store_stats();
    assert_eq!(
        (stats.cancel_attempts, stats.already_cancelled),
        (11, 1),
        "{stats:?}"
    );
    let counters = running.instance.counters();
    assert!(counters["redis_commands"] >= 30, "{counters:?}");
    running.stop().await;
    let verdict = f.assert_clean().await;
    assert_eq!((verdict.orders.cancelled, verdict.releases), (10, 10));
    assert_eq!(zcard(&mut conn, zset.delay_key(1)).await, 0);
    f.cleanup().await;
}

/// A member that is not an order id goes to the dead set once, is counted,
/// and does not stop the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_member_goes_to_the_dead_set() {
    let _redis = REDIS.lock().await;
    let mut conn = redis_conn().await;
    let f = Fixture::new(&common::sqlite_url(), "redis-zset", options()).await;
    let zset = RedisZset::new(f.orders.clone(), &options().redis_zset, ClaimMode::Atomic).unwrap();
    let running = Running::start(f.instance().await);
    let delay = zset.delay_key(1).to_string();
    let _: u64 = redis::cmd("ZADD")
        .arg(&delay)
        .arg(now_us())
        .arg("not-an-order")
        .query_async(&mut conn)
        .await
        .unwrap();
    let order = f.create(1, 300).await;
    running
        .instance
        .schedule(1, order.expire_at_us)
        .await
        .unwrap();
    f.wait_for_due_cancels(order.expire_at_us).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counters = running.instance.counters();
    assert_eq!(counters["malformed"], 1, "{counters:?}");
    let dead: Vec<String> = redis::cmd("ZRANGE")
        .arg(zset.dead_key(1))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(dead, vec!["not-an-order".to_string()]);
    assert_eq!(zcard(&mut conn, zset.processing_key(1)).await, 0);
    running.stop().await;
    f.assert_clean().await;
    zset.teardown().await.unwrap();
    assert_eq!(
        zcard(&mut conn, zset.dead_key(1)).await,
        0,
        "teardown deletes the keys"
    );
    f.cleanup().await;
}

/// Three instances of each claim style on orders all due at once: the
/// non-atomic one makes extra cancel attempts (absorbed as
/// already_cancelled), the atomic claim makes none; both end clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonatomic_claim_duplicates_attempts_atomic_does_not() {
    let _redis = REDIS.lock().await;
    let mut extra = Vec::new();
    for strategy in ["redis-zset-nonatomic", "redis-zset"] {
        let mut options = options();
        options.redis_zset.claim_batch = 1000;
        options.redis_zset.visibility_timeout = Duration::from_secs(30);
        let f = Fixture::new(&common::postgres_url(), strategy, options).await;
        let mut instances = Vec::new();
        for _ in 0..3 {
            instances.push(Running::start(f.instance().await));
        }
        let due = 300;
        let mut last = 0;
        for id in 1..=due {
            let order = f.create(id, 600).await;
            instances[id as usize % 3]
                .instance
                .schedule(id, order.expire_at_us)
                .await
                .unwrap();
            last = last.max(order.expire_at_us);
        }
        f.wait_for_due_cancels(last).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (mut attempts, mut already) = (0, 0);
        for running in instances {
            let stats = running.instance.store_stats();
            attempts += stats.cancel_attempts;
            already += stats.already_cancelled;
            running.stop().await;
        }
        let verdict = f.assert_clean().await;
        assert_eq!(verdict.orders.cancelled, due as u64, "{strategy}");
        assert_eq!(verdict.releases, due as u64, "{strategy}");
        assert_eq!(attempts, due as u64 + already, "{strategy}");
        extra.push((strategy, already));
        f.cleanup().await;
    }
    eprintln!("already_cancelled attempts for 300 orders, 3 instances: {extra:?}");
    assert!(
        extra[0].1 > 0,
        "non-atomic claim made no duplicate attempt: {extra:?}"
    );
    assert_eq!(
        extra[1].1, 0,
        "atomic claim made duplicate attempts: {extra:?}"
    );
}

/// Keyspace notifications are fire-and-forget: keys that expire while no
/// subscriber listens lose their cancels; with the subscriber running the
/// orders are cancelled. Teardown restores notify-keyspace-events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspace_expiry_loses_cancels_without_a_subscriber() {
    let _redis = REDIS.lock().await;
    let mut conn = redis_conn().await;
    let get_events = |conn: &mut MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let v: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("notify-keyspace-events")
                .query_async(&mut conn)
                .await
                .unwrap();
            v[1].clone()
        }
    };
    let before = get_events(&mut conn).await;
    let f = Fixture::new(&common::sqlite_url(), "redis-keyspace-expiry", options()).await;
    let control = f.instance().await;
    let during = get_events(&mut conn).await;
    assert!(
        during.contains('E') && (during.contains('x') || during.contains('A')),
        "{during}"
    );

    // Deadlines pass while nobody listens.
    let mut missed = Vec::new();
    for id in 1..=5 {
        let order = f.create(id, 100).await;
        control.schedule(id, order.expire_at_us).await.unwrap();
        missed.push(id);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let keys = RedisKeyspaceExpiry::new(f.orders.clone(), &options().redis_zset).unwrap();
    for &id in &missed {
        let exists: u64 = redis::cmd("EXISTS")
            .arg(keys.expire_key(id))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 0, "the key of order {id} should have expired");
    }

    // With the subscriber running, new orders are cancelled.
    let running = Running::start(f.instance().await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    for id in 6..=10 {
        let order = f.create(id, 200).await;
        running
            .instance
            .schedule(id, order.expire_at_us)
            .await
            .unwrap();
    }
    wait_until_cancelled(&f, 6..=10, Duration::from_secs(10)).await;
    running.stop().await;
    for &id in &missed {
        assert_eq!(f.status(id).await, OrderStatus::Pending, "order {id}");
    }
    let verdict = checker::check(&f.orders, 0, now_us()).await.unwrap();
    assert_eq!(
        verdict.anomalies.get(checker::Anomaly::MissedCancels),
        5,
        "{verdict:#?}"
    );
    assert_eq!(
        verdict.anomalies.total(),
        5,
        "only missed cancels: {verdict:#?}"
    );
    assert_eq!(verdict.releases, 5);
    assert!(!control.capabilities().durable_across_restart);
    assert!(control.capabilities().needs_fallback);

    control.teardown().await.unwrap();
    assert_eq!(
        get_events(&mut conn).await,
        before,
        "teardown restores the setting"
    );
    f.cleanup().await;
}

/// An unreachable Redis fails setup with the redacted URL and how to start it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_redis_names_url_and_hint() {
    let _redis = REDIS.lock().await;
    let mut options = options();
    options.redis_zset.url = "redis://:hunter2@127.0.0.1:1/0".into();
    let f = Fixture::new(
        &common::sqlite_url(),
        "redis-zset",
        StrategyOptions::default(),
    )
    .await;
    let instance = common::deploy("redis-zset", &options)
        .instance(f.orders.clone())
        .unwrap();
    let err = instance.setup().await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            strategies::Error::Unreachable {
                service: "Redis",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("docker compose up -d --wait redis"), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
    f.cleanup().await;
}
