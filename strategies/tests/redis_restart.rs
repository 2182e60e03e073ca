//! A real Redis restart without persistence: the schedule is lost, the
//! running worker survives (its errors counted), and `fallback-scan`
//! cancels every order whose schedule was lost.
//!
//! This binary restarts the shared Redis on 127.0.0.1:6379 with the
//! project's own command (`scripts/services.sh`), so it is its own test
//! file: cargo runs test binaries one after another, so the conformance
//! binary's Redis checks never see the restart. Its tests take [`REDIS`].

mod common;

use std::process::Command;
use std::time::Duration;
use strategies::conformance::{Fixture, Running};
use strategies::redis_zset::{ClaimMode, RedisZset};
use strategies::{now_us, StrategyOptions};
use tokio::sync::Mutex;

static REDIS: Mutex<()> = Mutex::const_new(());

const PORT: &str = "6379";

fn ping() -> bool {
    Command::new("redis-cli")
        .args(["-p", PORT, "ping"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "PONG")
}

/// Starts Redis the way the test command does, with `scripts/services.sh`
/// (no persistence), so every test run also exercises its start path.
fn start_redis() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services.sh");
    let out = Command::new("bash")
        .args([script, "redis"])
        .output()
        .expect("run scripts/services.sh");
    assert!(
        out.status.success(),
        "scripts/services.sh redis failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `ping()` equals `up`, or panics.
async fn wait_for(up: bool, within: Duration) {
    let give_up = tokio::time::Instant::now() + within;
    while ping() != up {
        assert!(
            tokio::time::Instant::now() < give_up,
            "Redis did not {} within {within:?}",
            if up { "answer PING" } else { "stop" }
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Brings Redis back if the test fails half-way through a restart.
struct RestartGuard;

impl Drop for RestartGuard {
    fn drop(&mut self) {
        if !ping() {
            start_redis();
            for _ in 0..100 {
                if ping() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_without_persistence_loses_schedule_fallback_recovers() {
    let _redis = REDIS.lock().await;
    assert!(
        ping(),
        "Redis is not answering on 127.0.0.1:{PORT}; start it: `redis-server --daemonize yes \
         --port {PORT} --save \"\" --appendonly no` (and redis-cli must be installed)"
    );
    let mut options = StrategyOptions::default();
    options.redis_zset.max_sleep = Duration::from_millis(200);
    options.redis_zset.reclaim_interval = Duration::from_millis(200);
    options.fallback_scan.enabled = true;
    options.fallback_scan.interval = Duration::from_millis(200);
    options.fallback_scan.grace = Duration::from_secs(1);
    let f = Fixture::new(&common::postgres_url(), "redis-zset", options.clone()).await;
    let keys = RedisZset::new(f.orders.clone(), &options.redis_zset, ClaimMode::Atomic).unwrap();
    let running = Running::start(f.instance().await);
    let caps = running.instance.capabilities();
    assert!(
        caps.needs_fallback && !caps.durable_across_restart,
        "{caps:?}"
    );
    assert!(
        caps.notes.iter().any(|n| n.contains("without persistence")),
        "{:?}",
        caps.notes
    );

    let lost: Vec<i64> = (1..=20).collect();
    let mut last = 0;
    for &id in &lost {
        let order = f.create(id, 4000 + 10 * id).await;
        running
            .instance
            .schedule(id, order.expire_at_us)
            .await
            .unwrap();
        last = order.expire_at_us;
    }
    let first_deadline = last - 19 * 10_000;

    // The real thing: shut down without saving, start again the CI way.
    let guard = RestartGuard;
    let _ = Command::new("redis-cli")
        .args(["-p", PORT, "shutdown", "nosave"])
        .output();
    wait_for(false, Duration::from_secs(10)).await;
    start_redis();
    wait_for(true, Duration::from_secs(10)).await;
    drop(guard);
    assert!(
        now_us() < first_deadline,
        "the restart took too long; the first deadline passed before Redis was back"
    );
    let mut conn = redis::Client::open("redis://127.0.0.1:6379")
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let left: u64 = redis::cmd("EXISTS")
        .arg(keys.delay_key(1))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "without persistence the schedule is gone");

    // The worker survived and schedules again once Redis is back.
    let after: Vec<i64> = (21..=25).collect();
    for &id in &after {
        let order = f.create(id, 300).await;
        let mut scheduled = false;
        for _ in 0..50 {
            if running
                .instance
                .schedule(id, order.expire_at_us)
                .await
                .is_ok()
            {
                scheduled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(scheduled, "schedule kept failing after the restart");
        last = last.max(order.expire_at_us);
    }
    f.wait_for_due_cancels(last).await;
    let counters = running.instance.counters();
    running.stop().await;

    let verdict = f.assert_clean().await;
    assert_eq!(verdict.orders.cancelled, 25);
    assert_eq!(verdict.releases, 25);
    let by = |name: &str| verdict.cancelled_by.get(name).copied().unwrap_or(0);
    assert_eq!(by("fallback-scan"), 20, "{:?}", verdict.cancelled_by);
    assert_eq!(by("redis-zset"), 5, "{:?}", verdict.cancelled_by);
    assert!(
        counters["errors"] > 0,
        "the restart was noticed: {counters:?}"
    );
    f.cleanup().await;
}
