//! Runs every conformance check for every strategy on every real backend.
//! Which checks apply comes from the strategy's capabilities; the others
//! pass as `not applicable: <capability>` (printed with `--nocapture`).
//! Adding a strategy is one `conformance_suite!` line at the bottom.

mod common;

use common::test_options;
use strategies::conformance::{self, Check, Fixture};

/// Every check, once; `every_check_is_listed` keeps it equal to `Check::ALL`.
macro_rules! with_every_check {
    ($callback:ident!($($args:tt)*)) => {
        $callback! {$($args)*; capabilities_are_coherent, fires_after_deadline_never_before,
            paid_order_never_cancelled, duplicates_release_once,
            long_delay_does_not_hold_back_short_ones, undeclared_delays_on_time,
            several_instances_stay_correct, any_instance_cancels_any_order,
            kill_every_instance_then_restart, kill_every_instance_then_restart_with_fallback}
    };
}

macro_rules! conformance_checks {
    ($strategy:expr, $url:expr; $($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $check() {
            let fixture = Fixture::new(&$url, $strategy, test_options()).await;
            conformance::run_check(&fixture, Check::named(stringify!($check)))
                .await
                .assert_passed();
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
                with_every_check!(conformance_checks!($strategy, common::sqlite_url()));
            }
            mod postgres {
                use super::*;
                with_every_check!(conformance_checks!($strategy, common::postgres_url()));
            }
            mod mariadb {
                use super::*;
                with_every_check!(conformance_checks!($strategy, common::mysql_url()));
            }
        }
    };
}

conformance_suite!(db_scan, "db-scan");
conformance_suite!(db_timer, "db-timer");
conformance_suite!(timing_wheel, "timing-wheel");
conformance_suite!(redis_zset, "redis-zset");
conformance_suite!(rabbit_ttl, "rabbit-ttl");
conformance_suite!(rabbit_delayed, "rabbit-delayed");
conformance_suite!(ceiling, "ceiling");

macro_rules! names {
    (; $($check:ident),* $(,)?) => {
        [$(stringify!($check)),*]
    };
}

#[test]
fn every_check_is_listed() {
    let listed = with_every_check!(names!());
    let all: Vec<&str> = Check::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(listed.to_vec(), all);
}
