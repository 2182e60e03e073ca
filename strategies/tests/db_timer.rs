//! db-timer's own behaviour on PostgreSQL, beyond the conformance suite:
//! the creating transaction's NOTIFY wakes a sleeping instance long before
//! its maximum sleep, a lost listening connection loses no order, a
//! rolled-back order's notification never arrives, one instance of two
//! leads and the other takes over when it stops, and the leader reads each
//! order once before cancelling it.
//!
//! Both sleeps are set to 60 s, far beyond each test's own patience
//! ([`PATIENCE`]): an order cancelled within it can only have been woken
//! for. The assertions are on what happened (the order's status, the
//! instance's counters), not on how fast.

mod common;

use common::test_options;
use std::sync::Arc;
use std::time::Duration;
use strategies::conformance::{Fixture, Running, LATENESS_BOUND};
use strategies::db_timer::DbTimer;
use strategies::{Canceller, OrderStatus, OrderStore};

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
            .scan_and_cancel_due_then_peek(200, "test", None)
            .await
            .unwrap();
        assert_eq!(batch.claimed, 0, "nothing is due");
        assert!(batch.next_pending.is_some(), "orders are pending");
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

/// Two running instances, `a` started (and listening) first: `a` leads
/// and `b` stands by, which this checks. Sleeps of 60 s, so any cancel is
/// a wake; the standby retries the lead and claims overdue orders every
/// 200 ms, so a new leader comes well before an order due in 400 ms.
async fn a_leader_and_a_standby() -> (Fixture, [Arc<dyn Canceller>; 2], [Running; 2]) {
    let mut options = test_options();
    options.db_timer.max_sleep = Duration::from_secs(60);
    options.db_timer.poll_max_sleep = Duration::from_millis(200);
    let f = Fixture::new(&common::postgres_url(), "db-timer", options).await;
    let a = f.instance().await;
    let b = f.instance().await;
    let running_a = Running::start(Arc::clone(&a));
    wait_listening(&a, 1).await;
    let running_b = Running::start(Arc::clone(&b));
    wait_listening(&b, 1).await;
    assert_eq!(
        (counter(&*a, "leads"), counter(&*b, "leads")),
        (1, 0),
        "the first to listen leads, alone: a {:?}, b {:?}",
        a.counters(),
        b.counters()
    );
    (f, [a, b], [running_a, running_b])
}

/// Two instances: exactly one takes the lead and wakes for deadlines; the
/// other only stands by. When the leader stops, the standby leads and
/// cancels a new order by notification, long before its 60 s sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_leads_and_a_standby_takes_over_when_it_stops() {
    let (f, [_a, b], [running_a, running_b]) = a_leader_and_a_standby().await;
    let first = f.create(1, 400).await;
    wait_for("the first order to be cancelled", async || {
        f.status(first.id).await == OrderStatus::Cancelled
    })
    .await;
    f.cancelled_within(&[first], LATENESS_BOUND).await.unwrap();
    assert_eq!(
        b.store_stats().cancelled,
        0,
        "the standby cancelled an order the leader was awake for"
    );
    assert!(counter(&*b, "standby_rounds") >= 1, "{:?}", b.counters());

    running_a.stop().await;
    wait_for("the standby to take the lead", async || {
        counter(&*b, "leads") == 1
    })
    .await;
    let woken_before = counter(&*b, "woken_by_notify");
    let second = f.create(2, 400).await;
    wait_for("the second order to be cancelled", async || {
        f.status(second.id).await == OrderStatus::Cancelled
    })
    .await;
    f.cancelled_within(&[second], LATENESS_BOUND).await.unwrap();
    assert_eq!(b.store_stats().cancelled, 1, "{:?}", b.counters());
    // Cancelled as a leader, woken for it, not by the overdue claim.
    assert!(
        counter(&*b, "woken_by_notify") > woken_before,
        "{:?}",
        b.counters()
    );
    running_b.stop().await;
    f.assert_clean().await;
    f.cleanup().await;
}

/// The leader reads each order once before its cancel, as db-scan's claim
/// does: the round that cancels an order also reads the next one, and at
/// that one's deadline cancels it without claiming it again. Orders 150 ms
/// apart, so each has a wake of its own; the server's rows read are about
/// four per order (that read, the UPDATE, the SKU lookup, the stock row):
/// 40 for ten orders, 49 when every order is claimed again at its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_reads_each_order_once_before_cancelling_it() {
    const ORDERS: i64 = 10;
    let f = sleepy_fixture().await;
    let store = OrderStore::connect(f.location(), 4).await.unwrap();
    assert!(
        store.measure_server_reads(),
        "PostgreSQL counts server reads"
    );
    let instance = f.instance_on(f.options(), store).await;
    let running = Running::start(Arc::clone(&instance));
    wait_listening(&instance, 1).await;
    assert_eq!(counter(&*instance, "leads"), 1);
    let before = instance.store_stats();
    let mut orders = Vec::new();
    for id in 1..=ORDERS {
        orders.push(f.create(id, 600 + 150 * id).await);
    }
    let last = *orders.last().unwrap();
    wait_for("the last order to be cancelled", async || {
        f.status(last.id).await == OrderStatus::Cancelled
    })
    .await;
    let stats = instance.store_stats().since(&before);
    assert_eq!(stats.cancelled, ORDERS as u64);
    assert!(
        counter(&*instance, "direct_cancels") >= (ORDERS - 1) as u64 / 2,
        "the leader claimed what it had already read: {:?}",
        instance.counters()
    );
    // Slack of 4 for a round the machine's stalls split or merge; the
    // same run without the direct cancel reads 49.
    let allowed = 4 * ORDERS as u64 + 4;
    assert!(
        stats.server_rows_read <= allowed,
        "{} rows read for {ORDERS} cancels (at most {allowed}): {:?}",
        stats.server_rows_read,
        instance.counters()
    );
    running.stop().await;
    f.assert_clean().await;
    f.cleanup().await;
}

/// The lead ends with its session: when the leader's listening session is
/// terminated (as a failover or an operator would), the lead is taken
/// again, by the standby or by the old leader once it listens again, and
/// the new leader cancels a new order by its notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lead_is_taken_again_when_the_leaders_session_ends() {
    let (f, [a, b], [running_a, running_b]) = a_leader_and_a_standby().await;

    // The key is ours (an identifier's characters), so it is inlined.
    let key = f.orders.timer_lead_key();
    let killed = f
        .orders
        .query_i64s(
            &format!(
                "SELECT CAST(COUNT(pg_terminate_backend(l.pid)) AS BIGINT) FROM pg_locks l \
                 WHERE l.locktype = 'advisory' AND l.granted \
                 AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('{key}', 0)"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(killed, vec![1], "one session held the lead");
    wait_for("the leader to notice its lost session", async || {
        counter(&*a, "listener_losses") >= 1
    })
    .await;
    wait_for("the lead to be taken again", async || {
        counter(&*a, "leads") + counter(&*b, "leads") == 2
    })
    .await;
    let leader = if counter(&*b, "leads") == 1 { &b } else { &a };
    // The old leader re-reads once it listens again; let that pass.
    wait_listening(&a, 2).await;
    let woken_before = counter(&**leader, "woken_by_notify");
    let order = f.create(1, 400).await;
    wait_for("the order to be cancelled", async || {
        f.status(order.id).await == OrderStatus::Cancelled
    })
    .await;
    f.cancelled_within(&[order], LATENESS_BOUND).await.unwrap();
    assert!(
        counter(&**leader, "woken_by_notify") > woken_before,
        "the new leader was not woken for the order: a {:?}, b {:?}",
        a.counters(),
        b.counters()
    );
    running_a.stop().await;
    running_b.stop().await;
    f.assert_clean().await;
    f.cleanup().await;
}
