//! The transactional outbox and the session kill, on the real databases:
//! an outbox row exists exactly when its order committed, a lease keeps a
//! row from a second relay until it lapses, the relay schedules every row
//! through a real strategy (redis-zset) so the orders are cancelled, and
//! `kill_sessions` ends exactly the labelled sessions, which reconnect.

mod common;

use common::{all_databases, mysql_url, postgres_url, sqlite_url, test_options};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use strategies::conformance::{Fixture, Running};
use strategies::outbox::{self, RelayCounters};
use strategies::{now_us, CreateOutcome, NewOrder, OrderStatus, OrderStore};
use tokio_util::sync::CancellationToken;

fn order(id: i64, due_in_ms: i64) -> NewOrder {
    let now = now_us();
    NewOrder {
        id,
        sku: 1,
        qty: 1,
        created_at_us: now,
        expire_at_us: now + due_in_ms * 1000,
    }
}

#[tokio::test]
async fn an_outbox_row_exists_exactly_when_its_order_committed() {
    for url in all_databases() {
        let f = Fixture::new(&url, "db-scan", test_options()).await;
        let store = f.orders.clone().with_outbox();
        assert!(store.writes_outbox() && !f.orders.writes_outbox());
        assert_eq!(
            store.create_order(&order(1, 60_000)).await.unwrap(),
            CreateOutcome::Created
        );
        // Written, then rolled back: neither the order nor its row exists.
        let rolled = store
            .create_order_with(&order(2, 60_000), true, async {})
            .await
            .unwrap();
        assert_eq!(rolled, CreateOutcome::RolledBack, "{url}");
        // A plain store writes no row.
        f.orders.create_order(&order(3, 60_000)).await.unwrap();
        assert_eq!(store.outbox_len().await.unwrap(), 1, "{url}");
        assert_eq!(
            f.orders.order(2).await.unwrap().map(|r| r.status),
            None,
            "{url}"
        );

        let claimed = store
            .claim_outbox(10, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(claimed.iter().map(|r| r.order_id).collect::<Vec<_>>(), [1]);
        // Leased: a second relay gets nothing until the lease lapses.
        assert!(store
            .claim_outbox(10, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty());
        store.delete_outbox(&[1]).await.unwrap();
        assert_eq!(store.outbox_len().await.unwrap(), 0, "{url}");
        f.cleanup().await;
    }
}

#[tokio::test]
async fn a_lapsed_lease_gives_the_row_to_the_next_relay() {
    for url in all_databases() {
        let f = Fixture::new(&url, "db-scan", test_options()).await;
        let store = f.orders.clone().with_outbox();
        store.create_order(&order(1, 60_000)).await.unwrap();
        let first = store
            .claim_outbox(10, Duration::from_millis(1))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let again = store
            .claim_outbox(10, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!((first.len(), again.len()), (1, 1), "{url}");
        assert_eq!(first[0], again[0], "{url}");
        f.cleanup().await;
    }
}

/// What is left at a run's end is told apart: a row under a relay's lease
/// (maybe scheduled already), and a row whose order is still pending.
#[tokio::test]
async fn the_rows_left_tell_leased_ones_and_pending_orders_apart() {
    for url in all_databases() {
        let f = Fixture::new(&url, "db-scan", test_options()).await;
        let store = f.orders.clone().with_outbox();
        for id in 1..=3 {
            store.create_order(&order(id, 60_000)).await.unwrap();
        }
        // Order 1 claimed (and leased); order 2 paid; order 3 untouched.
        let claimed = store
            .claim_outbox(1, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1, "{url}");
        store.pay(2, "cb-2", now_us()).await.unwrap();
        let left = store.outbox_left().await.unwrap();
        assert_eq!(
            (left.rows, left.leased, left.of_pending_orders),
            (3, 1, 2),
            "{url}"
        );
        f.cleanup().await;
    }
}

/// Orders whose creating transactions wrote outbox rows are cancelled at
/// their deadline once a relay hands the rows to redis-zset; the rows go.
#[tokio::test]
async fn the_relay_schedules_every_row_through_the_strategy() {
    let f = Fixture::new(&postgres_url(), "redis-zset", test_options()).await;
    let store = f.orders.clone().with_outbox();
    for id in 1..=20 {
        store.create_order(&order(id, 300)).await.unwrap();
    }
    let running = Running::start(f.instance().await);
    let counters = Arc::new(RelayCounters::default());
    let shutdown = CancellationToken::new();
    let relay = tokio::spawn(outbox::relay(
        f.orders.clone(),
        Arc::clone(&running.instance),
        Arc::clone(&counters),
        shutdown.clone(),
        |_, _| {},
    ));
    f.wait_for_due_cancels(now_us() + 300_000).await;
    shutdown.cancel();
    relay.await.unwrap();
    running.stop().await;
    assert_eq!(counters.relayed.load(Ordering::Relaxed), 20);
    assert_eq!(store.outbox_len().await.unwrap(), 0);
    for id in 1..=20 {
        assert_eq!(
            f.orders.order(id).await.unwrap().map(|r| r.status),
            Some(OrderStatus::Cancelled)
        );
    }
    f.cleanup().await;
}

#[tokio::test]
async fn kill_sessions_ends_the_labelled_sessions_and_they_reconnect() {
    for url in [postgres_url(), mysql_url()] {
        let f = Fixture::new(&url, "db-scan", test_options()).await;
        let location = f.orders.location().clone();
        let label = format!("{}_w", location.resource_prefix());
        let labelled = OrderStore::connect_as(&location, 3, Some(&label))
            .await
            .unwrap();
        // Open the pool's connections: three queries at once.
        let (a, b, c) = tokio::join!(
            labelled.query_i64s("SELECT 1", &[]),
            labelled.query_i64s("SELECT 1", &[]),
            labelled.query_i64s("SELECT 1", &[])
        );
        for opened in [a, b, c] {
            opened.unwrap();
        }
        let killed = f.orders.kill_sessions(&label).await.unwrap();
        assert!(killed >= 1, "{url}: no labelled session was terminated");
        // The harness's own (unlabelled) store is untouched.
        f.orders.query_i64s("SELECT 1", &[]).await.unwrap();
        // The labelled pool notices and reconnects (a query may fail once).
        let mut ok = false;
        for _ in 0..5 {
            if labelled.query_i64s("SELECT 1", &[]).await.is_ok() {
                ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(ok, "{url}: the labelled pool did not reconnect");
        labelled.close().await;
        f.cleanup().await;
    }
    let f = Fixture::new(&sqlite_url(), "db-scan", test_options()).await;
    let msg = f.orders.kill_sessions("x").await.unwrap_err().to_string();
    assert!(msg.contains("SQLite has no server sessions"), "{msg}");
    f.cleanup().await;
}
