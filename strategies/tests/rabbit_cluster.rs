//! The conformance suite for rabbit-ttl on quorum queues and for
//! rabbit-delayed, on the local three-node RabbitMQ cluster
//! (`scripts/services.sh rabbitmq-cluster`, AMQP on 127.0.0.1:5681-5683),
//! with all three nodes' URLs given to the strategy. The first test that
//! finds a node down starts the cluster with that command (it leaves a
//! running one alone) and fails naming it when it cannot. The orders live
//! in SQLite: the broker is what these tests are about. Override the URLs
//! with `DELAYBENCH_AMQP_CLUSTER_URL` (comma-separated).

#[macro_use]
mod common;

use common::test_options;
use std::time::Duration;
use strategies::conformance::{self, Check, Fixture};
use strategies::rabbit::QueueType;
use strategies::StrategyOptions;

const CLUSTER_PORTS: [u16; 3] = [5681, 5682, 5683];

fn cluster_url() -> String {
    std::env::var("DELAYBENCH_AMQP_CLUSTER_URL").unwrap_or_else(|_| {
        CLUSTER_PORTS
            .map(|port| format!("amqp://guest:guest@127.0.0.1:{port}/%2f"))
            .join(",")
    })
}

fn all_nodes_listen() -> bool {
    CLUSTER_PORTS.iter().all(|port| {
        std::net::TcpStream::connect_timeout(
            &([127, 0, 0, 1], *port).into(),
            Duration::from_secs(2),
        )
        .is_ok()
    })
}

/// Starts the local cluster once per test binary when a node does not
/// listen (tests run in parallel: the others wait for the first).
fn ensure_cluster() {
    static STARTED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    if std::env::var("DELAYBENCH_AMQP_CLUSTER_URL").is_ok() {
        return;
    }
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if *started || all_nodes_listen() {
        *started = true;
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services.sh");
    let status = std::process::Command::new("bash")
        .args([script, "rabbitmq-cluster"])
        .status();
    match status {
        Ok(s) if s.success() && all_nodes_listen() => *started = true,
        other => panic!(
            "the RabbitMQ cluster is not up on 127.0.0.1:5681-5683 and \
             `scripts/services.sh rabbitmq-cluster` did not start it ({other:?}); \
             run that command (as root) and see its output"
        ),
    }
}

/// Lateness the checks allow on top of their bound here: the three broker
/// nodes, the test process and SQLite share two cores, and a quorum queue's
/// publish and dead-letter wait for a majority of nodes to write. A CI run
/// saw an order cancelled 669 ms late against the 600 ms bound (rabbit-ttl,
/// `long_delay_does_not_hold_back_short_ones`, 2026-12-04) with this
/// process's own timers on time; head-of-line blocking, which that check
/// exists for, costs its shortest orders seconds.
const CLUSTER_SLACK: Duration = Duration::from_millis(600);
const CLUSTER_SLACK_WHY: &str = "a three-node broker cluster sharing two cores with the test";

fn cluster_options(queue_type: QueueType) -> StrategyOptions {
    let mut options = test_options();
    options.rabbit.url = cluster_url();
    options.rabbit.queue_type = queue_type;
    options
}

macro_rules! cluster_checks {
    ($strategy:expr, $queue_type:expr; $($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $check() {
            ensure_cluster();
            let fixture = Fixture::new(
                &common::sqlite_url(),
                $strategy,
                cluster_options($queue_type),
            )
            .await
            .with_service_slack(CLUSTER_SLACK, CLUSTER_SLACK_WHY);
            conformance::run_check(&fixture, Check::named(stringify!($check)))
                .await
                .assert_passed();
            fixture.cleanup().await;
        }
    )*};
}

mod rabbit_ttl_quorum {
    use super::*;
    with_every_check!(cluster_checks!("rabbit-ttl", QueueType::Quorum));
}

mod rabbit_delayed_quorum {
    use super::*;
    with_every_check!(cluster_checks!("rabbit-delayed", QueueType::Quorum));
}

#[test]
fn every_check_is_listed() {
    common::assert_every_check_listed(&with_every_check!(check_names!()));
}

/// The queues rabbit-ttl declares on the cluster are quorum queues with
/// at-least-once dead-lettering, and each has a member on all three nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_wait_queues_are_replicated_on_three_nodes() {
    ensure_cluster();
    let fixture = Fixture::new(
        &common::sqlite_url(),
        "rabbit-ttl",
        cluster_options(QueueType::Quorum),
    )
    .await;
    let instance = fixture.instance().await;
    instance.setup().await.expect("declaring the queues");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/rabbitmq-cluster.sh"
    );
    let out = std::process::Command::new("bash")
        .args([
            script,
            "ctl",
            "1",
            "-q",
            "--no-table-headers",
            "list_queues",
            "name",
            "type",
            "arguments",
            "members",
        ])
        .output()
        .expect("running rabbitmqctl list_queues");
    assert!(
        out.status.success(),
        "list_queues failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing = String::from_utf8_lossy(&out.stdout);
    let wait_prefix = format!(
        "{}wait.",
        strategies::leftovers::broker_prefix(&fixture.resource_prefix())
    );
    let wait_queues: Vec<&str> = listing
        .lines()
        .filter(|l| l.starts_with(&wait_prefix))
        .collect();
    assert_eq!(wait_queues.len(), 4, "one per TTL in:\n{listing}");
    for line in wait_queues {
        assert!(line.contains("\tquorum\t"), "{line}");
        assert!(line.contains("at-least-once"), "{line}");
        assert!(line.contains("reject-publish"), "{line}");
        for node in ["dlb1@localhost", "dlb2@localhost", "dlb3@localhost"] {
            assert!(line.contains(node), "no member on {node}: {line}");
        }
    }
    instance.teardown().await.expect("deleting the queues");
    fixture.cleanup().await;
}
