//! The timing wheel's reload on start, on every database: an instance
//! reloads its own share of the PENDING orders (`id % instances = index`,
//! the orders the harness routes to it), so two instances hold a backlog
//! once between them, not twice; `reload-all` takes every order.

mod common;

use std::time::Duration;
use strategies::conformance::{Fixture, Running};
use strategies::{now_us, OrderStatus, Share};

const ORDERS: i64 = 10;
const DUE_IN_MS: i64 = 300;

/// Orders written while no instance runs (as after a restart of all):
/// instance 1 of 2 reloads and cancels the odd ones only, the even ones
/// wait for instance 0; with `reload-all` one instance takes all ten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wheel_instance_reloads_its_own_share_of_the_pending_orders() {
    for url in common::all_databases() {
        let mut options = common::test_options();
        let f = Fixture::new(&url, "timing-wheel", options.clone()).await;
        let mut last_deadline = 0;
        for id in 1..=ORDERS {
            last_deadline = f.create(id, DUE_IN_MS).await.expire_at_us;
        }
        let share = |index| Share { index, of: 2 };
        options.timing_wheel.share = Some(share(1));
        let odd = Running::start(f.instance_with(&options).await);
        tokio::time::sleep(Duration::from_millis(DUE_IN_MS as u64 + 700)).await;
        assert!(now_us() > last_deadline);
        let reloaded = odd.instance.counters()["reloaded"];
        assert_eq!(
            reloaded,
            ORDERS as u64 / 2,
            "{url}: instance 1 of 2 reloaded"
        );
        for id in 1..=ORDERS {
            let expected = if share(1).owns(id) {
                OrderStatus::Cancelled
            } else {
                OrderStatus::Pending
            };
            assert_eq!(f.status(id).await, expected, "{url}: order {id}");
        }
        // Its owner starts: the rest is cancelled.
        options.timing_wheel.share = Some(share(0));
        let even = Running::start(f.instance_with(&options).await);
        f.wait_for_due_cancels(last_deadline).await;
        assert_eq!(even.instance.counters()["reloaded"], ORDERS as u64 / 2);
        odd.stop().await;
        even.stop().await;
        f.assert_clean().await;
        f.cleanup().await;

        // reload-all: one instance of two takes every order.
        let mut options = common::test_options();
        let f = Fixture::new(&url, "timing-wheel", options.clone()).await;
        for id in 1..=ORDERS {
            last_deadline = f.create(id, DUE_IN_MS).await.expire_at_us;
        }
        options.timing_wheel.share = Some(share(1));
        options.timing_wheel.reload_all = true;
        let all = Running::start(f.instance_with(&options).await);
        f.wait_for_due_cancels(last_deadline).await;
        assert_eq!(all.instance.counters()["reloaded"], ORDERS as u64, "{url}");
        all.stop().await;
        f.assert_clean().await;
        f.cleanup().await;
    }
}
