//! db-timer's own behaviour on PostgreSQL, beyond the conformance suite:
//! the creating transaction's NOTIFY wakes a sleeping instance long before
//! its maximum sleep, a lost listening connection loses no order, and a
//! rolled-back order's notification never arrives.
//!
//! Both sleeps are set to 60 s, far beyond each test's own patience
//! ([`PATIENCE`]): an order cancelled within it can only have been woken
//! for. The assertions are on what happened (the order's status, the
//! instance's counters), not on how fast.

mod common;

use common::test_options;
use std::sync::Arc;
use std::time::Duration;
use strategies::conformance::{Fixture, Running};
use strategies::db_timer::DbTimer;
use strategies::{Canceller, OrderStatus};

/// How long a test waits for something it expects; well under the 60 s sleeps.
const PATIENCE: Duration = Duration::from_secs(20);

async fn sleepy_fixture() -> Fixture {
    let mut options = test_options();
    options.db_timer.max_sleep = Duration::from_secs(60);
    options.db_timer.poll_max_sleep = Duration::from_secs(60);
    Fixture::new(&common::postgres_url(), "db-timer", options).await
}

fn counter(instance: &dyn Canceller, name: &str) -> u64 {
    *instance
        .counters()
        .get(name)
        .unwrap_or_else(|| panic!("db-timer has no counter `{name}`"))
}

/// Polls `cond` every 20 ms; panics with `what` after [`PATIENCE`].
async fn wait_for(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + PATIENCE;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < give_up,
            "{what}: not within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `instance` has started listening `n` times, then lets the
/// re-read every LISTEN triggers (immediate, one claim transaction) finish,
/// so an order created next is found by its notification, not by that read.
async fn wait_listening(instance: &Arc<dyn Canceller>, n: u64) {
    wait_for("the listener to LISTEN", async || {
        counter(&**instance, "listens") >= n
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_wakes_a_sleeping_instance_before_max_sleep() {
    let f = sleepy_fixture().await;
    assert!(
        f.orders.notifies_deadlines(),
        "the fixture's order service must notify"
    );
    let instance = f.instance().await;
    let running = Running::start(Arc::clone(&instance));
    wait_listening(&instance, 1).await;
    // Nothing is pending: the instance sleeps its 60 s max.
    let woken_before = counter(&*instance, "woken_by_notify");
    let order = f.create(1, 300).await;
    wait_for("the order to be cancelled", async || {
        f.status(order.id).await == OrderStatus::Cancelled
    })
    .await;
    assert!(
        counter(&*instance, "woken_by_notify") > woken_before,
        "cancelled, but not after a wake by notification: {:?}",
        instance.counters()
    );
    assert!(counter(&*instance, "notifications") >= 1);
    f.cancelled_within(&[order], PATIENCE).await.unwrap();
    running.stop().await;
    f.assert_clean().await;
    f.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listener_loses_no_order() {
    let f = sleepy_fixture().await;
    let instance = f.instance().await;
    let running = Running::start(Arc::clone(&instance));
    wait_listening(&instance, 1).await;
    // An order far in the future keeps the instance's planned wake late.
    let far = f.create(1, 3_600_000).await;

    // End the listening session as an operator or a failover would; the
    // order created right after may be notified to nobody.
    let killed = f
        .orders
        .kill_sessions(&DbTimer::listener_name(&f.orders))
        .await
        .unwrap();
    assert_eq!(killed, 1, "one listener session to end");
    let lost = f.create(2, 300).await;
    wait_for("the listener loss to be noticed", async || {
        counter(&*instance, "listener_losses") >= 1
    })
    .await;
    wait_for("the order created while listening was lost", async || {
        f.status(lost.id).await == OrderStatus::Cancelled
    })
    .await;

    // Listening again: a new order is woken for, not polled for (the
    // poll is 60 s).
    wait_listening(&instance, 2).await;
    let woken_before = counter(&*instance, "woken_by_notify");
    let after = f.create(3, 300).await;
    wait_for("the order created after re-listening", async || {
        f.status(after.id).await == OrderStatus::Cancelled
    })
    .await;
    assert!(
        counter(&*instance, "woken_by_notify") > woken_before,
        "{:?}",
        instance.counters()
    );
    assert_eq!(f.status(far.id).await, OrderStatus::Pending);
    running.stop().await;
    f.assert_clean().await;
    f.cleanup().await;
}

/// The NOTIFY is part of the creating transaction: a checkout that rolls
/// back notifies nobody, and one that commits does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_order_is_never_notified() {
    let f = sleepy_fixture().await;
    let instance = f.instance().await;
    let running = Running::start(Arc::clone(&instance));
    wait_listening(&instance, 1).await;
    let now = strategies::now_us();
    let order = |id| strategies::NewOrder {
        id,
        sku: 1,
        qty: 1,
        created_at_us: now,
        expire_at_us: now + 300_000,
    };
    let rolled_back = f
        .orders
        .create_order_with(&order(1), true, async {})
        .await
        .unwrap();
    assert_eq!(rolled_back, strategies::CreateOutcome::RolledBack);
    let committed = order(2);
    f.orders.create_order(&committed).await.unwrap();
    wait_for("the committed order to be cancelled", async || {
        f.status(committed.id).await == OrderStatus::Cancelled
    })
    .await;
    // Notifications arrive in commit order: the committed order's came,
    // and the rolled-back one's would have come before it.
    assert_eq!(counter(&*instance, "notifications"), 1);
    running.stop().await;
    f.assert_clean().await;
    f.cleanup().await;
}

/// The round's read of the next deadline takes one index entry however
/// many orders are pending after it: the server's rows read per round stay
/// flat with 600 orders pending an hour out. The schema is analysed while
/// empty, as a run's fresh schema is, and the round runs more than five
/// times, so PostgreSQL's prepared statement moves to its generic plan;
/// `MIN(expire_at_us)` got a plan there that read every pending entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_deadline_read_takes_one_entry_however_many_are_pending() {
    const PENDING: i64 = 600;
    const ROUNDS: u64 = 12;
    let f = sleepy_fixture().await;
    f.orders.execute_unchecked("ANALYZE orders").await.unwrap();
    for id in 1..=PENDING {
        f.create(id, 3_600_000).await;
    }
    assert!(
        f.orders.measure_server_reads(),
        "PostgreSQL counts server reads"
    );
    let before = f.orders.stats();
    for _ in 0..ROUNDS {
        let batch = f
            .orders
            .scan_and_cancel_due_then_peek(200, "test")
            .await
            .unwrap();
        assert_eq!(batch.claimed, 0, "nothing is due");
        assert!(batch.next_deadline_us.is_some(), "orders are pending");
    }
    let reads = f.orders.stats().since(&before).server_rows_read;
    // A claim that finds nothing due reads nothing; the peek reads one
    // entry (two heap fetches allowed, in case of a page in flux).
    assert!(
        reads <= ROUNDS * 2,
        "{reads} rows read in {ROUNDS} rounds with {PENDING} orders pending: \
         the next-deadline read walks the pending entries"
    );
    f.cleanup().await;
}
