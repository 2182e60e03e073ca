//! Runs every conformance check for every strategy on every real backend.
//! Adding a strategy is one `conformance_suite!` line at the bottom.

mod common;

use std::time::Duration;
use strategies::conformance::{self, Fixture};
use strategies::StrategyOptions;

/// Options tuned for tests: short intervals so checks finish quickly.
fn test_options() -> StrategyOptions {
    let mut options = StrategyOptions::default();
    options.db_scan.interval = Duration::from_millis(50);
    // rabbit-ttl: wait queues that cover the checks' 50 ms - 1.2 s delays.
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

macro_rules! conformance_checks {
    ($strategy:expr, $url:expr; $($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $check() {
            let fixture = Fixture::new(&$url, $strategy, test_options()).await;
            conformance::$check(&fixture).await;
            fixture.cleanup().await;
        }
    )*};
}

/// One line per strategy: runs every check on SQLite, PostgreSQL and MariaDB.
macro_rules! conformance_suite {
    ($module:ident, $strategy:expr) => {
        mod $module {
            use super::*;
            mod sqlite {
                use super::*;
                conformance_checks!($strategy, common::sqlite_url(); fires_after_deadline_never_before,
                    paid_order_never_cancelled, duplicates_release_once,
                    several_instances_stay_correct, overdue_while_down_is_cancelled_on_start);
            }
            mod postgres {
                use super::*;
                conformance_checks!($strategy, common::postgres_url(); fires_after_deadline_never_before,
                    paid_order_never_cancelled, duplicates_release_once,
                    several_instances_stay_correct, overdue_while_down_is_cancelled_on_start);
            }
            mod mariadb {
                use super::*;
                conformance_checks!($strategy, common::mysql_url(); fires_after_deadline_never_before,
                    paid_order_never_cancelled, duplicates_release_once,
                    several_instances_stay_correct, overdue_while_down_is_cancelled_on_start);
            }
        }
    };
}

conformance_suite!(db_scan, "db-scan");
conformance_suite!(timing_wheel, "timing-wheel");
conformance_suite!(redis_zset, "redis-zset");
conformance_suite!(rabbit_ttl, "rabbit-ttl");
conformance_suite!(rabbit_delayed, "rabbit-delayed");
