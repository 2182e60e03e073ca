//! The child process of `tests/crash.rs`'s real-crash tests (cargo builds
//! it for them; not for running by hand): arms one crash point
//! with the default action (abort) and runs the strategy until it aborts.
//! Its spec comes in `DELAYBENCH_CRASH_CHILD` as JSON: `strategy`, `point`,
//! `location` and `options`.

use std::collections::BTreeMap;
use std::time::Duration;
use strategies::crash::{self, CrashAction, CrashPoint};
use strategies::registry::{Deployment, Variant};
use strategies::{DbLocation, OrderStore, StrategyOptions};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let spec = std::env::var("DELAYBENCH_CRASH_CHILD")
        .expect("run by tests/crash.rs with DELAYBENCH_CRASH_CHILD set");
    let spec: BTreeMap<String, serde_json::Value> = serde_json::from_str(&spec).unwrap();
    let strategy: Variant = serde_json::from_value(spec["strategy"].clone()).unwrap();
    let point: CrashPoint = serde_json::from_value(spec["point"].clone()).unwrap();
    let location: DbLocation = serde_json::from_value(spec["location"].clone()).unwrap();
    let options: StrategyOptions = serde_json::from_value(spec["options"].clone()).unwrap();
    let store = OrderStore::connect(&location, 4).await.unwrap();
    let instance = Deployment::new(strategy, &options).instance(store).unwrap();
    crash::set_action(CrashAction::Abort);
    crash::arm(point);
    let token = tokio_util::sync::CancellationToken::new();
    let ran = tokio::time::timeout(Duration::from_secs(20), instance.run(token)).await;
    panic!("{strategy} did not crash at {point} within 20 s: {ran:?}");
}
