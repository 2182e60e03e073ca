//! `cancel_path`: one `cancel_if_due` round trip (conditional UPDATE, stock
//! release, RELEASE move, in one transaction) on SQLite and PostgreSQL —
//! the floor every strategy pays per cancelled order, whatever schedules it.
//!
//! Orders are created outside the timed region; each timed iteration
//! cancels one distinct overdue order.

use criterion::{criterion_group, criterion_main, Criterion};
use delaybench_bench::{fresh_store, postgres_url};
use std::time::{Duration, Instant};
use strategies::{now_us, CancelOutcome, NewOrder, OrderStore};

async fn create_overdue(store: &OrderStore, first_id: i64, n: u64) {
    let now = now_us();
    for id in first_id..first_id + n as i64 {
        let order = NewOrder {
            id,
            sku: 1 + id % 16,
            qty: 1,
            created_at_us: now - 2_000_000,
            expire_at_us: now - 1_000_000,
        };
        store.create_order(&order).await.expect("create order");
    }
}

fn cancel_path(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group("cancel_path");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    let tag = std::process::id();
    for (label, url) in [
        ("sqlite", "sqlite://".to_string()),
        ("postgres", postgres_url()),
    ] {
        let (server, store) =
            rt.block_on(fresh_store(&url, &format!("bench_cancel_{label}_{tag}")));
        let mut next_id = 1_i64;
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    create_overdue(&store, next_id, iters).await;
                    let start = Instant::now();
                    for id in next_id..next_id + iters as i64 {
                        let outcome = store.cancel_if_due(id, "bench").await.expect("cancel");
                        assert_eq!(outcome, CancelOutcome::Cancelled);
                    }
                    next_id += iters as i64;
                    start.elapsed()
                })
            })
        });
        rt.block_on(async {
            store.close().await;
            let _ = server.drop_namespace(store.location()).await;
        });
    }
    group.finish();
}

criterion_group!(benches, cancel_path);
criterion_main!(benches);
