//! The conformance suite fails on every teaching variant, and each test
//! names the check that catches it: a suite that cannot fail proves
//! nothing. The check must apply to the variant by its own declared
//! capabilities (`run_check` gates it), so a variant cannot escape by
//! declaring less, and the failure message must name the symptom.
//!
//! | variant | caught by | why |
//! | --- | --- | --- |
//! | `timing-wheel-unconditional` | `paid_order_never_cancelled` | the UPDATE ignores the status: paid orders are cancelled |
//! | `timing-wheel-release-first` | `paid_order_never_cancelled` | stock is released before the conditional UPDATE loses to the payment |
//! | `rabbit-ttl-single-queue` | `long_delay_does_not_hold_back_short_ones` | RabbitMQ expires only the head: short delays wait behind a long one |
//! | `redis-zset-nonatomic` | `several_instances_stay_correct` | instances read the same due ids and all try to cancel them |
//! | `redis-keyspace-expiry` | `several_instances_stay_correct` | every instance receives every expiry event and tries every cancel |
//!
//! `redis-zset-publish-first` is not here: its canceller is redis-zset
//! itself, and the mistake is the order service's (it schedules inside the
//! creating transaction), which this suite does not play: it schedules
//! after each commit, as a correct order service does. Its damage, phantom
//! schedules of rolled-back checkouts, is shown end to end by
//! `harness/tests/chaos.rs`.
//!
//! `redis-keyspace-expiry` also loses every cancel whose key expires while
//! no instance listens; it declares `durable_across_restart: false`, so
//! the kill-and-restart check it gets runs with `fallback-scan`, which
//! recovers them (that loss is what `needs_fallback` declares).

mod common;

use common::{test_options, url_for};
use strategies::conformance::{self, Check, CheckStatus, Fixture};

/// Runs `check` (gated by the strategy's capabilities) and asserts it
/// failed with a message containing `symptom`.
async fn assert_caught(strategy: &str, db: &str, check: &str, symptom: &str) {
    let f = Fixture::new(&url_for(db), strategy, test_options()).await;
    let outcome = conformance::run_check(&f, Check::named(check)).await;
    f.cleanup().await;
    match &outcome.status {
        CheckStatus::Failed(what) => assert!(
            what.contains(symptom),
            "{strategy} on {db}: {check} failed, but not with `{symptom}`: {what}"
        ),
        other => panic!("{strategy} on {db}: {check} should have failed: {other:?}"),
    }
    println!("{strategy} on {db}: caught: {outcome}");
}

/// One line per variant: the check that catches it, a word of its failure
/// message, and the databases it is shown on.
macro_rules! caught_by {
    ($module:ident, $strategy:expr, $check:ident, $symptom:expr, [$($db:ident),*]) => {
        mod $module {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $db() {
                    assert_caught($strategy, stringify!($db), stringify!($check), $symptom).await;
                }
            )*
        }
    };
}

caught_by!(
    timing_wheel_unconditional,
    "timing-wheel-unconditional",
    paid_order_never_cancelled,
    "paid_then_cancelled",
    [sqlite, postgres, mariadb]
);
caught_by!(
    timing_wheel_release_first,
    "timing-wheel-release-first",
    paid_order_never_cancelled,
    "broke invariants",
    [sqlite, postgres, mariadb]
);
caught_by!(
    rabbit_ttl_single_queue,
    "rabbit-ttl-single-queue",
    long_delay_does_not_hold_back_short_ones,
    "lateness bound",
    [sqlite, postgres, mariadb]
);
caught_by!(
    redis_zset_nonatomic,
    "redis-zset-nonatomic",
    several_instances_stay_correct,
    "repeat each other's work",
    [sqlite, postgres, mariadb]
);
caught_by!(
    redis_keyspace_expiry,
    "redis-keyspace-expiry",
    several_instances_stay_correct,
    "repeat each other's work",
    [sqlite, postgres, mariadb]
);

/// A capability declared false is honest: the check it rules out fails when
/// forced. The timing wheel keeps its schedule in the process, so orders
/// scheduled on a stopped instance wait for a restart while another runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timing_wheel_is_not_durable_as_declared() {
    let f = Fixture::new(&common::postgres_url(), "timing-wheel", test_options()).await;
    let caps = f.capabilities().await;
    assert!(!caps.durable_across_restart);
    let result = Check::KillEveryInstanceThenRestart
        .run_unconditionally(&f)
        .await;
    f.cleanup().await;
    let what = result.expect_err("the wheel passed the durable check it does not declare");
    assert!(what.contains("instance A was stopped"), "{what}");
}

/// `run_all` reports every check once: the capabilities' exclusions as not
/// applicable (naming the capability), and the failure that catches the
/// variant, without panicking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_all_reports_each_check_for_a_teaching_variant() {
    let f = Fixture::new(
        &common::sqlite_url(),
        "timing-wheel-unconditional",
        test_options(),
    )
    .await;
    let caps = f.capabilities().await;
    let outcomes = conformance::run_all(&f).await;
    f.cleanup().await;
    for o in &outcomes {
        println!("{o}");
    }
    let checks: Vec<Check> = outcomes.iter().map(|o| o.check).collect();
    assert_eq!(checks, Check::ALL);
    for (o, (check, applies)) in outcomes.iter().zip(conformance::checks_for(&caps)) {
        assert_eq!(o.check, check);
        match applies {
            Err(why) => assert_eq!(o.status, CheckStatus::NotApplicable(why)),
            Ok(()) => assert!(!matches!(o.status, CheckStatus::NotApplicable(_)), "{o}"),
        }
    }
    let paid = outcomes
        .iter()
        .find(|o| o.check == Check::PaidOrderNeverCancelled)
        .unwrap();
    assert!(paid.failed(), "{paid}");
}
