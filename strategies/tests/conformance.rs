//! Runs every conformance check for every strategy on every real backend.
//! Which checks apply comes from the strategy's capabilities; the others
//! pass as `not applicable: <capability>` (printed with `--nocapture`).
//! Adding a strategy is one `conformance_suite!` line at the bottom.

#[macro_use]
mod common;

use common::test_options;
use strategies::conformance::{self, Check, Fixture};

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
conformance_suite!(rabbit_ttl_per_delivery, "rabbit-ttl-per-delivery");
conformance_suite!(ceiling, "ceiling");

#[test]
fn every_check_is_listed() {
    common::assert_every_check_listed(&with_every_check!(check_names!()));
}
