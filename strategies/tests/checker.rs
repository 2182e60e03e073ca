//! The checker is itself tested: runs built to break each invariant must be
//! caught with the exact counts, and correct runs must report zero. Every
//! test runs on SQLite, PostgreSQL and MariaDB. Between them the breaking
//! runs exercise every row of the table the checker queries, which
//! `every_row_the_checker_queries_is_broken_by_a_run` holds to.

mod common;

use strategies::checker::{self, Anomalies, Anomaly, Source};
use strategies::conformance::Fixture;
use strategies::store::AntiPattern;
use strategies::{now_us, CancelOutcome, OrderStatus, PaymentOutcome, StrategyOptions};

/// Orders 1..=10 are overdue (1..=3 paid), 11..=15 are due in a minute.
/// SKU = 1 + id % 4, so ids 1..=10 touch all four SKUs.
async fn fixture(url: &str) -> Fixture {
    let f = Fixture::new(url, "db-scan", StrategyOptions::default()).await;
    for id in 1..=10 {
        f.create(id, -1_000).await;
    }
    for id in 11..=15 {
        f.create(id, 60_000).await;
    }
    for id in 1..=3 {
        assert_eq!(
            f.orders
                .pay(id, &format!("cb-{id}"), now_us())
                .await
                .unwrap(),
            PaymentOutcome::Applied
        );
    }
    f
}

async fn verdict(f: &Fixture) -> checker::Verdict {
    checker::check(&f.orders, 0, now_us()).await.unwrap()
}

/// What a breaking run must find: these counts, every other one 0.
type Expected = &'static [(Anomaly, u64)];

fn counts(expected: Expected) -> Anomalies {
    expected
        .iter()
        .fold(Anomalies::default(), |a, &(anomaly, n)| a.with(anomaly, n))
}

const UNCONDITIONAL_UPDATE: Expected = &[
    (Anomaly::PaidThenCancelled, 3),
    (Anomaly::DuplicateReleases, 10),
    (Anomaly::StockMismatches, 4),
];
const RELEASE_BEFORE_UPDATE: Expected = &[
    (Anomaly::DuplicateReleases, 10),
    (Anomaly::OrphanReleases, 3),
    (Anomaly::StockMismatches, 4),
];
/// Orders 4..=10 are never cancelled at all: missed.
const CANCEL_BEFORE_DEADLINE: Expected = &[(Anomaly::EarlyCancels, 5), (Anomaly::MissedCancels, 7)];
const SECOND_REFUND: Expected = &[(Anomaly::RefundErrors, 1)];
const UNRELEASED_CANCEL: Expected = &[
    (Anomaly::UnreleasedCancels, 1),
    (Anomaly::StockMismatches, 1),
];

/// Every breaking run below, by what it must find.
const BREAKING_RUNS: &[Expected] = &[
    UNCONDITIONAL_UPDATE,
    RELEASE_BEFORE_UPDATE,
    CANCEL_BEFORE_DEADLINE,
    SECOND_REFUND,
    UNRELEASED_CANCEL,
];

/// A new row of the table fails here until a run below breaks it. The rows
/// the instances count (phantom schedules) are the harness's: the chaos
/// suite (harness/tests/chaos.rs) makes them with a rolled-back checkout.
#[test]
fn every_row_the_checker_queries_is_broken_by_a_run() {
    for anomaly in Anomaly::ALL {
        if let Source::Query { .. } = anomaly.source() {
            assert!(
                BREAKING_RUNS
                    .iter()
                    .any(|run| run.iter().any(|&(a, n)| a == anomaly && n > 0)),
                "no breaking run in this file finds {anomaly:?}: add one"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_cancels_report_zero() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        for _round in 0..2 {
            for id in 1..=15 {
                f.orders.cancel_if_due(id, "test").await.unwrap();
            }
        }
        let v = verdict(&f).await;
        assert_eq!(v.anomalies, Anomalies::default(), "{url}: {v:#?}");
        assert_eq!(
            (v.orders.paid, v.orders.cancelled, v.orders.pending),
            (3, 7, 5),
            "{url}"
        );
        assert_eq!(v.releases, 7, "{url}");
        f.cleanup().await;
    }
}

/// Cancels orders 1..=10 the broken way, twice over: a duplicate delivery.
async fn cancel_twice_over_the_fixture(f: &Fixture, pattern: AntiPattern) {
    for _round in 0..2 {
        for id in 1..=10 {
            f.orders
                .cancel_with_anti_pattern(pattern, id, now_us(), "broken")
                .await
                .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconditional_update_is_caught() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        cancel_twice_over_the_fixture(&f, AntiPattern::UnconditionalUpdate).await;
        let v = verdict(&f).await;
        assert_eq!(v.anomalies, counts(UNCONDITIONAL_UPDATE), "{url}: {v:#?}");
        assert_eq!(
            v.anomaly_examples.get(Anomaly::PaidThenCancelled),
            [1, 2, 3],
            "{url}"
        );
        f.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_before_update_is_caught() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        cancel_twice_over_the_fixture(&f, AntiPattern::ReleaseBeforeUpdate).await;
        let v = verdict(&f).await;
        assert_eq!(v.anomalies, counts(RELEASE_BEFORE_UPDATE), "{url}: {v:#?}");
        assert_eq!(
            v.anomaly_examples.get(Anomaly::OrphanReleases),
            [1, 2, 3],
            "{url}"
        );
        // The paid orders stay paid: the damage is the stock, not the state.
        assert_eq!(f.status(1).await, OrderStatus::Paid);
        f.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_before_deadline_is_caught() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        for id in 11..=15 {
            f.orders
                .cancel_with_anti_pattern(AntiPattern::CancelBeforeDeadline, id, now_us(), "broken")
                .await
                .unwrap();
        }
        let v = verdict(&f).await;
        assert_eq!(v.anomalies, counts(CANCEL_BEFORE_DEADLINE), "{url}: {v:#?}");
        assert_eq!(
            v.anomaly_examples.get(Anomaly::EarlyCancels),
            [11, 12, 13, 14, 15],
            "{url}"
        );
        assert_eq!(
            v.anomaly_examples.get(Anomaly::MissedCancels),
            [4, 5, 6, 7, 8, 9, 10],
            "{url}"
        );
        f.cleanup().await;
    }
}

/// Orders 11..=15 cancelled by a clock two minutes ahead (their deadlines
/// are a minute away): each stamp is past its deadline, so only a payment
/// that found the order cancelled shows the cancel was early; 11..=13 get
/// one, 14 and 15 none (early too, but nothing saw it).
const CLOCK_AHEAD: Expected = &[(Anomaly::EarlyCancels, 3), (Anomaly::MissedCancels, 7)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceller_whose_clock_runs_ahead_is_caught_by_the_payments_clock() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        let ahead = now_us() + 120_000_000;
        for id in 11..=15 {
            assert!(f
                .orders
                .cancel_with_anti_pattern(AntiPattern::ClockAhead, id, ahead, "clock-ahead")
                .await
                .unwrap());
        }
        // Its own stamps alone read on time.
        assert_eq!(
            verdict(&f).await.anomalies.get(Anomaly::EarlyCancels),
            0,
            "{url}"
        );
        for id in 11..=13 {
            assert_eq!(
                f.orders
                    .pay(id, &format!("cb-{id}"), now_us())
                    .await
                    .unwrap(),
                PaymentOutcome::Refunded
            );
        }
        let v = verdict(&f).await;
        assert_eq!(v.anomalies, counts(CLOCK_AHEAD), "{url}: {v:#?}");
        assert_eq!(
            v.anomaly_examples.get(Anomaly::EarlyCancels),
            [11, 12, 13],
            "{url}"
        );
        // Hosts whose clocks may be three minutes apart cannot tell a two
        // minutes early cancel from one on time: not an anomaly then.
        let lenient = checker::check_within(&f.orders, 0, now_us(), 180_000_000)
            .await
            .unwrap();
        assert_eq!(
            lenient.anomalies.get(Anomaly::EarlyCancels),
            0,
            "{url}: {lenient:#?}"
        );
        f.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_cancels_respect_the_drain() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        // Deadlines passed ~1s ago: within a 60s drain they are not missed yet.
        let lenient = checker::check(&f.orders, 60_000_000, now_us())
            .await
            .unwrap();
        assert_eq!(lenient.anomalies.get(Anomaly::MissedCancels), 0, "{url}");
        assert_eq!(
            verdict(&f).await.anomalies.get(Anomaly::MissedCancels),
            7,
            "{url}"
        );
        f.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refunds_are_exactly_once_even_under_concurrent_retries() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        assert_eq!(
            f.orders.cancel_if_due(4, "test").await.unwrap(),
            CancelOutcome::Cancelled
        );
        // Ten copies of one late callback arrive at once for a cancelled
        // order, and ten copies of another for a pending one.
        let late = pay_concurrently(&f, 4, "cb-late", 10).await;
        let fresh = pay_concurrently(&f, 12, "cb-fresh", 10).await;
        let count = |v: &[PaymentOutcome], o| v.iter().filter(|x| **x == o).count();
        assert_eq!(count(&late, PaymentOutcome::Refunded), 1, "{url}: {late:?}");
        assert_eq!(count(&late, PaymentOutcome::Duplicate), 9, "{url}");
        assert_eq!(
            count(&fresh, PaymentOutcome::Applied),
            1,
            "{url}: {fresh:?}"
        );
        assert_eq!(count(&fresh, PaymentOutcome::Duplicate), 9, "{url}");
        assert_eq!(
            f.orders.pay(99, "cb-none", now_us()).await.unwrap(),
            PaymentOutcome::Missing
        );
        let v = checker::check(&f.orders, 60_000_000, now_us())
            .await
            .unwrap();
        assert_eq!(v.anomalies, Anomalies::default(), "{url}: {v:#?}");
        assert_eq!(v.payments.get("REFUNDED"), Some(&1), "{url}");

        // A second refund for the same capture is a refund error.
        f.orders
            .execute_unchecked(&format!(
                "INSERT INTO payments (order_id, callback_id, at_us, outcome) VALUES (4, 'cb-late', {}, 'REFUNDED')",
                now_us()
            ))
            .await
            .unwrap();
        let v = checker::check(&f.orders, 60_000_000, now_us())
            .await
            .unwrap();
        assert_eq!(v.anomalies, counts(SECOND_REFUND), "{url}: {v:#?}");
        assert_eq!(v.anomaly_examples.get(Anomaly::RefundErrors), [4], "{url}");
        f.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreleased_cancel_is_caught() {
    for url in common::all_databases() {
        let f = fixture(&url).await;
        // A cancel that forgot its stock: state changed, no RELEASE move.
        f.orders
            .execute_unchecked(&format!(
                "UPDATE orders SET status = 'CANCELLED', cancelled_at_us = {}, cancelled_by = 'broken' WHERE id = 5",
                now_us()
            ))
            .await
            .unwrap();
        let v = checker::check(&f.orders, 60_000_000, now_us())
            .await
            .unwrap();
        assert_eq!(v.anomalies, counts(UNRELEASED_CANCEL), "{url}: {v:#?}");
        assert_eq!(
            v.anomaly_examples.get(Anomaly::StockMismatches),
            [2],
            "{url}: SKU of order 5"
        );
        f.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_uses_the_status_expire_index() {
    for url in common::all_databases() {
        let f = Fixture::new(&url, "db-scan", StrategyOptions::default()).await;
        for id in 1..=300 {
            f.create(id, 60_000 + id).await;
        }
        let analyze = if url.starts_with("mysql") {
            "ANALYZE TABLE orders"
        } else {
            "ANALYZE"
        };
        f.orders.execute_unchecked(analyze).await.unwrap();
        let plan = f.orders.explain_scan().await.unwrap();
        assert!(
            plan.contains("orders_status_expire"),
            "{url}: scan does not use the index:\n{plan}"
        );
        f.cleanup().await;
    }
}

/// Delivers `copies` copies of one callback at once, each on its own task.
async fn pay_concurrently(
    f: &Fixture,
    order_id: i64,
    callback: &str,
    copies: usize,
) -> Vec<PaymentOutcome> {
    let tasks: Vec<_> = (0..copies)
        .map(|_| {
            let (store, callback) = (f.orders.clone(), callback.to_string());
            tokio::spawn(async move { store.pay(order_id, &callback, now_us()).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap().unwrap());
    }
    outcomes
}

/// A payment callback that races its order's commit: the pay UPDATE looks
/// before the order's INSERT committed (0 rows), the order commits, and the
/// pay's next statement finds it PENDING. It must be paid, not refunded
/// (found by a sweep at 3200 orders/s on PostgreSQL, where a lagging
/// generator delivered callbacks before their orders committed: the
/// checker reported a refund error). A statement trigger on `orders` holds
/// the pay UPDATE for 500 ms after it looked, so the interleaving is certain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_racing_its_orders_commit_is_applied_not_refunded() {
    let f = Fixture::new(
        &common::postgres_url(),
        "db-scan",
        StrategyOptions::default(),
    )
    .await;
    f.orders
        .execute_unchecked(
            "CREATE FUNCTION hold_update() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$",
        )
        .await
        .unwrap();
    f.orders
        .execute_unchecked(
            "CREATE TRIGGER hold_pay AFTER UPDATE ON orders \
             FOR EACH STATEMENT EXECUTE FUNCTION hold_update()",
        )
        .await
        .unwrap();
    let store = f.orders.clone();
    let pay = tokio::spawn(async move { store.pay(77, "cb-77", now_us()).await });
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    f.create(77, 60_000).await;
    assert_eq!(pay.await.unwrap().unwrap(), PaymentOutcome::Applied);
    let v = verdict(&f).await;
    assert_eq!(v.anomalies, Anomalies::default(), "{v:#?}");
    assert_eq!(v.orders.paid, 1);
    f.cleanup().await;
}

/// `index = "partial-pending"` puts the scan on `(expire_at_us) WHERE
/// status = 'PENDING'` where the database has partial indexes, and names
/// the field where it has not; `none` leaves the scan no index at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_index_options_change_the_plan_or_name_the_field() {
    use strategies::store::ScanIndex;
    for url in common::all_databases() {
        let f = Fixture::new(&url, "db-scan", StrategyOptions::default()).await;
        for id in 1..=300 {
            f.create(id, 60_000 + id).await;
        }
        let analyze = if url.starts_with("mysql") {
            "ANALYZE TABLE orders"
        } else {
            "ANALYZE"
        };
        let partial = f.orders.set_scan_index(ScanIndex::PartialPending).await;
        if url.starts_with("mysql") {
            let msg = partial.unwrap_err().to_string();
            assert!(
                msg.contains("strategies.db-scan.index") && msg.contains("MariaDB"),
                "{msg}"
            );
        } else {
            partial.unwrap();
            // Idempotent, as setup must be.
            f.orders
                .set_scan_index(ScanIndex::PartialPending)
                .await
                .unwrap();
            f.orders.execute_unchecked(analyze).await.unwrap();
            let plan = fresh_plan(&f).await;
            assert!(plan.contains("orders_pending_expire"), "{url}:\n{plan}");
        }
        f.orders.set_scan_index(ScanIndex::None).await.unwrap();
        f.orders.execute_unchecked(analyze).await.unwrap();
        let plan = fresh_plan(&f).await;
        assert!(
            !plan.contains("orders_status_expire") && !plan.contains("orders_pending_expire"),
            "{url}:\n{plan}"
        );
        f.cleanup().await;
    }
}

/// The scan's plan on a new connection: a pooled SQLite connection may
/// still hold the schema from before an index changed.
async fn fresh_plan(f: &Fixture) -> String {
    let store = strategies::OrderStore::connect(f.orders.location(), 1)
        .await
        .unwrap();
    let plan = store.explain_scan().await.unwrap();
    store.close().await;
    plan
}
