//! Backends used by the integration tests. They are real servers; a test
//! never skips one silently: an unreachable server fails the test with the
//! URL and how to start it. Override with `DELAYBENCH_PG_URL` and
//! `DELAYBENCH_MYSQL_URL`.
#![allow(dead_code, unused_macros)]

/// Every conformance check, once: `with_every_check!(m!(args))` expands to
/// `m! { args; check_a, check_b, ... }`. Each suite's
/// `every_check_is_listed` test keeps it equal to `Check::ALL`.
macro_rules! with_every_check {
    ($callback:ident!($($args:tt)*)) => {
        $callback! {$($args)*; capabilities_are_coherent, fires_after_deadline_never_before,
            paid_order_never_cancelled, duplicates_release_once,
            long_delay_does_not_hold_back_short_ones, undeclared_delays_on_time,
            several_instances_stay_correct, any_instance_cancels_any_order,
            kill_every_instance_then_restart, kill_every_instance_then_restart_with_fallback}
    };
}

/// `with_every_check!(check_names!())`: the names as strings.
macro_rules! check_names {
    (; $($check:ident),* $(,)?) => {
        [$(stringify!($check)),*]
    };
}

/// Asserts that `listed` (from `with_every_check!(check_names!())`) is
/// every conformance check, in `Check::ALL`'s order.
pub fn assert_every_check_listed(listed: &[&str]) {
    let all: Vec<&str> = strategies::conformance::Check::ALL
        .iter()
        .map(|c| c.name())
        .collect();
    assert_eq!(listed.to_vec(), all);
}

pub fn postgres_url() -> String {
    std::env::var("DELAYBENCH_PG_URL")
        .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".into())
}

pub fn mysql_url() -> String {
    std::env::var("DELAYBENCH_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

pub fn sqlite_url() -> String {
    "sqlite://".into()
}

/// Every database backend, for tests that loop over all three.
pub fn all_databases() -> Vec<String> {
    vec![sqlite_url(), postgres_url(), mysql_url()]
}

/// Strategy options tuned for the conformance tests: short intervals so
/// checks finish quickly.
pub fn test_options() -> strategies::StrategyOptions {
    use std::time::Duration;
    let mut options = strategies::StrategyOptions::default();
    options.db_scan.interval = Duration::from_millis(50);
    // db-timer: polls as often as the test db-scan where it cannot listen;
    // max-sleep stays at its default, so on PostgreSQL NOTIFY must wake it.
    options.db_timer.poll_max_sleep = Duration::from_millis(50);
    // rabbit-ttl: wait queues for the delays the suite uses where a
    // strategy does not declare arbitrary_delay (see conformance::checks).
    options.rabbit.ttls = [100, 250, 500, 1000].map(Duration::from_millis).to_vec();
    if let Ok(url) = std::env::var("DELAYBENCH_AMQP_URL") {
        options.rabbit.url = url;
    }
    // Redis: DELAYBENCH_REDIS_URL overrides the default server; short
    // sleeps and reclaims so a lost wake or a dead claim costs little time.
    if let Ok(url) = std::env::var("DELAYBENCH_REDIS_URL") {
        options.redis_zset.url = url;
    }
    options.redis_zset.max_sleep = Duration::from_millis(200);
    options.redis_zset.reclaim_interval = Duration::from_millis(200);
    options.redis_zset.visibility_timeout = Duration::from_secs(2);
    options
}

/// The URL of database `name` (`sqlite`, `postgres` or `mariadb`).
pub fn url_for(name: &str) -> String {
    match name {
        "sqlite" => sqlite_url(),
        "postgres" => postgres_url(),
        "mariadb" => mysql_url(),
        other => panic!("unknown database `{other}`"),
    }
}

/// `name` as the harness deploys it with `options` (a test names its
/// strategy; a bad name is the test's own mistake).
pub fn deploy(
    name: &str,
    options: &strategies::StrategyOptions,
) -> strategies::registry::Deployment {
    let variant = strategies::registry::Variant::parse(name).unwrap_or_else(|e| panic!("{e}"));
    strategies::registry::Deployment::new(variant, options)
}
