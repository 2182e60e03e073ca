//! When a cancel is stamped: `cancelled_at_us` is read right before each
//! order's UPDATE (never shared across a batch), and the store notes when
//! the COMMIT returned. A cancel transaction slowed on purpose must show the
//! slowdown in both figures, by the amount it was slowed, on every database.

mod common;

use sqlx::{Connection, Executor};
use std::time::Duration;
use strategies::conformance::Fixture;
use strategies::{DbKind, OrderStore, StrategyOptions};

/// How long the slowed cancel waits.
const SLOW_MS: i64 = 150;

/// Makes every cancel UPDATE on `store`'s namespace sleep `SLOW_MS` inside
/// the transaction (a trigger on the real server: nothing in the store
/// knows). Not available on SQLite, which has no sleep.
async fn slow_down_cancel_updates(store: &OrderStore) {
    let sleep = SLOW_MS as f64 / 1000.0;
    let ddl: Vec<String> = match store.location().kind {
        DbKind::Postgres => vec![
            format!(
                "CREATE FUNCTION slow_cancel() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN IF NEW.status = 'CANCELLED' THEN PERFORM pg_sleep({sleep}); END IF; \
                 RETURN NEW; END $$"
            ),
            "CREATE TRIGGER slow_cancel BEFORE UPDATE ON orders FOR EACH ROW \
             EXECUTE FUNCTION slow_cancel()"
                .to_string(),
        ],
        DbKind::Mysql => vec![format!(
            "CREATE TRIGGER slow_cancel BEFORE UPDATE ON orders FOR EACH ROW \
             BEGIN IF NEW.status = 'CANCELLED' THEN SET @slept = SLEEP({sleep}); END IF; END"
        )],
        DbKind::Sqlite => unreachable!("SQLite has no sleep; see the busy-lock test"),
    };
    for statement in ddl {
        store.execute_unchecked(&statement).await.unwrap();
    }
}

/// `(cancelled_at_us, expire_at_us)` of `ids`, in order.
async fn stamps(store: &OrderStore, ids: &[i64]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for &id in ids {
        let row = store.order(id).await.unwrap().unwrap();
        out.push((row.cancelled_at_us.unwrap(), row.expire_at_us));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowed_cancel_shows_in_row_and_commit_lateness() {
    for url in [common::postgres_url(), common::mysql_url()] {
        let f = Fixture::new(&url, "db-scan", StrategyOptions::default()).await;
        let ids = [1, 2, 3];
        for id in ids {
            f.create(id, -10).await;
        }
        slow_down_cancel_updates(&f.orders).await;
        f.orders.log_cancel_commits();
        let outcomes = f.orders.cancel_batch_if_due(&ids, "test").await.unwrap();
        assert_eq!(outcomes.len(), 3, "{url}");
        let stamps = stamps(&f.orders, &ids).await;
        let commits = f.orders.take_cancel_commits();
        assert_eq!(
            commits.iter().map(|c| c.0).collect::<Vec<_>>(),
            ids,
            "{url}: one commit time per effective cancel"
        );
        // Row lateness: each order is stamped after the previous order's
        // slowed UPDATE, so its stamp (and its lateness, beyond the spread
        // of the deadlines) grows by SLOW_MS per order of the batch.
        for pair in stamps.windows(2) {
            let grew = pair[1].0 - pair[0].0;
            assert!(
                grew >= SLOW_MS * 1000,
                "{url}: a batch shared one `now`: the stamp grew by {grew} us, \
                 not by the {SLOW_MS} ms the previous UPDATE slept ({stamps:?})"
            );
        }
        // Commit lateness: the last UPDATE's sleep comes after its stamp and
        // before the commit returned.
        let (last_stamp, _) = stamps[2];
        assert!(
            commits[2].1 - last_stamp >= SLOW_MS * 1000,
            "{url}: commit returned {} us after the last stamp, expected >= {SLOW_MS} ms",
            commits[2].1 - last_stamp
        );
        assert!(
            commits.iter().all(|c| c.1 == commits[0].1),
            "{url}: one commit"
        );
        f.cleanup().await;
    }
}

/// On SQLite a cancel waiting for another writer's lock (busy timeout)
/// shows the wait in its commit lateness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_waiting_for_a_sqlite_lock_shows_in_commit_lateness() {
    let f = Fixture::new(&common::sqlite_url(), "db-scan", StrategyOptions::default()).await;
    f.create(1, -10).await;
    f.orders.log_cancel_commits();
    let hold = Duration::from_millis(SLOW_MS as u64 * 2);
    // Another connection takes the write lock and keeps it for `hold`.
    let mut blocker = sqlx::AnyConnection::connect(&f.orders.location().url)
        .await
        .unwrap();
    blocker.execute("BEGIN IMMEDIATE").await.unwrap();
    let holder = tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        blocker.execute("COMMIT").await.unwrap();
        blocker.close().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    let started = strategies::now_us();
    f.orders.cancel_if_due(1, "test").await.unwrap();
    holder.await.unwrap();
    let commits = f.orders.take_cancel_commits();
    assert_eq!(commits.len(), 1);
    let waited = commits[0].1 - started;
    assert!(
        waited >= (hold.as_micros() as i64) - 40_000,
        "the commit came {waited} us after the cancel started; the lock was held {hold:?}"
    );
    f.cleanup().await;
}

/// On PostgreSQL a store can count the rows the server read inside its own
/// transactions, apart from everyone else's on the same tables: a scan on
/// the index reads the due orders, not the whole table. Elsewhere it says
/// it cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canceller_counts_its_own_server_reads_on_postgres() {
    let f = Fixture::new(
        &common::postgres_url(),
        "db-scan",
        StrategyOptions::default(),
    )
    .await;
    for id in 1..=3 {
        f.create(id, -10).await;
    }
    for id in 4..=203 {
        f.create(id, 60_000).await;
    }
    let canceller = OrderStore::connect(f.orders.location(), 2).await.unwrap();
    assert!(canceller.measure_server_reads());
    let batch = canceller.scan_and_cancel_due(0, 100, "test").await.unwrap();
    assert_eq!(batch.cancelled.len(), 3);
    let read = canceller.stats().server_rows_read;
    assert!(
        (3..=40).contains(&read),
        "the scan and 3 cancels read {read} rows; 200 not-due orders must not be read"
    );
    // Scans that find nothing due read (almost) nothing: the server's
    // count of earlier, unpublished transactions is not counted again.
    for _ in 0..3 {
        canceller.scan_and_cancel_due(0, 100, "test").await.unwrap();
    }
    let again = canceller.stats().server_rows_read - read;
    assert!(again <= 3, "three empty scans read {again} rows");
    // The order service's own transactions are not the canceller's.
    f.create(204, 60_000).await;
    assert_eq!(canceller.stats().server_rows_read, read);
    canceller.close().await;
    f.cleanup().await;
    for url in [common::sqlite_url(), common::mysql_url()] {
        let f = Fixture::new(&url, "db-scan", StrategyOptions::default()).await;
        assert!(!f.orders.measure_server_reads(), "{url}");
        f.cleanup().await;
    }
}

/// A cancel reads its own order, however many overdue orders are PENDING.
/// The cancel UPDATE is a prepared statement: after five runs PostgreSQL
/// may cache a generic plan for the connection, planned while the run's
/// fresh schema was (nearly) empty. With the status and deadline test
/// written plainly, that plan took the (status, expire_at_us) index and
/// read every overdue PENDING order on each later cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reads_one_order_however_many_are_overdue() {
    const OVERDUE: i64 = 300;
    const CANCELS: i64 = 12;
    let f = Fixture::new(
        &common::postgres_url(),
        "db-scan",
        StrategyOptions::default(),
    )
    .await;
    // One connection, used from the start, as a canceller's is: its first
    // cancels (of orders that are not there) run against an empty table.
    let canceller = OrderStore::connect(f.orders.location(), 1).await.unwrap();
    for id in 1..=8 {
        canceller
            .cancel_if_due(1_000_000 + id, "test")
            .await
            .unwrap();
    }
    for id in 1..=OVERDUE + CANCELS {
        f.create(id, -10).await;
    }
    assert!(canceller.measure_server_reads());
    for id in OVERDUE + 1..=OVERDUE + CANCELS {
        canceller.cancel_if_due(id, "test").await.unwrap();
    }
    let read = canceller.stats().server_rows_read;
    // Per cancel: the order (UPDATE, then its sku and qty) and its stock
    // row, a few fetches; never the overdue backlog.
    assert!(
        read <= CANCELS as u64 * 8,
        "{CANCELS} cancels read {read} rows with {OVERDUE} orders overdue"
    );
    canceller.close().await;
    f.cleanup().await;
}

/// The rows read in the namespace's tables since the server last published,
/// as `pg_stat_user_tables` shows them (what the harness reads per window).
async fn published_rows_read(store: &OrderStore) -> i64 {
    store.flush_statistics().await;
    store
        .query_i64_rows(
            "SELECT CAST(COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0) AS BIGINT) \
             FROM pg_stat_user_tables WHERE schemaname = current_schema()",
            &[],
        )
        .await
        .unwrap()[0][0]
}

/// The probe reads the rows the server counts for the namespace, exactly
/// when it reads every transaction, and a sampled probe estimates them
/// from a fraction of the transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_counts_what_the_server_publishes_and_sampling_estimates_it() {
    const ORDERS: i64 = 600;
    let f = Fixture::new(
        &common::postgres_url(),
        "db-scan",
        StrategyOptions::default(),
    )
    .await;
    for id in 1..=2 * ORDERS {
        f.create(id, 60_000).await;
    }
    // Every transaction read: the store's count is the server's own, for
    // this store's transactions, which are the only ones meanwhile.
    let exact = OrderStore::connect(f.orders.location(), 1).await.unwrap();
    assert!(exact.measure_server_reads());
    let before = published_rows_read(&f.orders).await;
    for id in 1..=ORDERS {
        // Not due: each attempt reads its order and changes nothing.
        exact.cancel_if_due(id, "test").await.unwrap();
    }
    exact.flush_statistics().await;
    let published = published_rows_read(&f.orders).await - before;
    let counted = exact.stats().server_rows_read;
    assert_eq!(
        counted as i64, published,
        "the probe counted {counted}, the server published {published}"
    );
    assert_eq!(exact.stats().server_reads_probes, ORDERS as u64);

    // Sampled: far fewer readings, and an estimate of the same reads.
    let sampled = OrderStore::connect(f.orders.location(), 1).await.unwrap();
    assert!(sampled.set_server_reads(strategies::store::ServerReads::Sampled { per_second: 20 }));
    for id in ORDERS + 1..=2 * ORDERS {
        sampled.cancel_if_due(id, "test").await.unwrap();
    }
    let stats = sampled.stats();
    assert!(
        stats.server_reads_probes < ORDERS as u64 / 2,
        "{} of {ORDERS} transactions read",
        stats.server_reads_probes
    );
    // Every transaction counted, read or not, and the readings scaled to
    // them: the estimate does not move with how many the readings stood
    // for, which it did by whole blocks before (one run in ten or so fell
    // outside 10 % where every attempt reads the same rows).
    assert_eq!(stats.server_reads_eligible, ORDERS as u64);
    let estimate = stats.server_rows_read_estimate().unwrap().total;
    assert!(
        (estimate - counted as f64).abs() <= 0.1 * counted as f64,
        "sampled estimate {estimate} against {counted} read by the same transactions"
    );
    exact.close().await;
    sampled.close().await;
    f.cleanup().await;
}
