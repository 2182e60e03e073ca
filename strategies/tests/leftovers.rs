//! A test that fails still leaves nothing behind: its fixture's drop
//! removes the strategy's queues, exchanges and Redis keys (and the
//! namespace) on the real broker and Redis.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;
use strategies::conformance::Fixture;
use strategies::leftovers::{broker_prefix, list_broker, redis_keys, redis_patterns};
use strategies::now_us;

/// What is on the services under `prefix`: broker object names, Redis keys.
async fn left(options: &strategies::StrategyOptions, prefix: &str) -> (Vec<String>, Vec<String>) {
    let (objects, _) = list_broker(&options.rabbit.url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let queues = objects
        .into_iter()
        .filter(|o| o.name.starts_with(&broker_prefix(prefix)))
        .map(|o| o.name)
        .collect();
    let mut keys = Vec::new();
    for pattern in redis_patterns(prefix) {
        keys.extend(
            redis_keys(&options.redis_zset.url, &pattern)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    (queues, keys)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_test_that_panics_leaves_no_queue_and_no_key() {
    let options = common::test_options();
    for strategy in ["rabbit-ttl", "redis-zset"] {
        let prefix = Arc::new(Mutex::new(None));
        let seen = Arc::new(Mutex::new(None));
        let failed = std::thread::spawn({
            let (prefix, seen, options) = (prefix.clone(), seen.clone(), options.clone());
            move || {
                runtime().block_on(async {
                    let f = Fixture::new(&common::sqlite_url(), strategy, options.clone()).await;
                    *prefix.lock().unwrap() = Some(f.resource_prefix());
                    let instance = f.instance().await;
                    instance
                        .schedule(1, now_us() + Duration::from_secs(60).as_micros() as i64)
                        .await
                        .expect("schedule");
                    *seen.lock().unwrap() = Some(left(&options, &f.resource_prefix()).await);
                    panic!("{strategy}: a test failing with its objects in place (on purpose)");
                })
            }
        })
        .join();
        assert!(failed.is_err(), "{strategy}: the inner test should panic");
        let prefix = prefix.lock().unwrap().clone().expect("fixture made");
        let (queues, keys) = seen.lock().unwrap().clone().expect("objects listed");
        assert!(
            !queues.is_empty() || !keys.is_empty(),
            "{strategy}: the test made nothing to clean up"
        );
        let (queues, keys) = runtime().block_on(left(&options, &prefix));
        assert!(queues.is_empty(), "{strategy}: queues left: {queues:?}");
        assert!(keys.is_empty(), "{strategy}: Redis keys left: {keys:?}");
    }
}
