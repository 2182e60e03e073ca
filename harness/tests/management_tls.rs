//! The RabbitMQ management API over HTTPS, against a live broker (issue
//! 23): `delaybench clean --amqp amqps://…` lists a run's queue and
//! exchange through the API, removes them over AMQPS, and a URL without
//! the CA is refused with a hint naming `cacertfile=`. `delaybench doctor`
//! says rabbit-delayed cannot run on it (it has no delayed-message plugin)
//! and names the fix. A backlog's holdings are read through the API and
//! AMQPS, not with `rabbitmqctl` (which would read the host broker).
//!
//! The broker is a node of the project's own
//! (`scripts/rabbitmq-cluster.sh management-start`: AMQPS on 5699, the API
//! on https://localhost:15699 and no plain HTTP, the certificates of
//! `scripts/tls.sh`), because the host broker is measured without the
//! management plugin. Its API is not on the default port, so the URL names
//! it with `management=`, as a managed broker's would. The test starts the
//! node and stops it when it ends, pass or fail.

mod common;

use common::{delaybench, stderr};
use std::process::{Command, Output};
use strategies::leftovers::{broker_holdings, broker_prefix, list_broker};
use strategies::now_us;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../scripts/rabbitmq-cluster.sh"
);

fn tls_dir() -> String {
    std::env::var("DELAYBENCH_TLS_DIR").unwrap_or_else(|_| "/var/lib/delaybench/tls".into())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The management node, stopped on drop.
struct ManagementNode;

impl ManagementNode {
    fn start() -> ManagementNode {
        let out = Command::new("bash")
            .args([SCRIPT, "management-start"])
            .output()
            .expect("bash runs scripts/rabbitmq-cluster.sh");
        assert!(
            out.status.success(),
            "`scripts/rabbitmq-cluster.sh management-start` failed (it needs root and \
             `scripts/tls.sh setup`):\n{}{}",
            stdout(&out),
            stderr(&out)
        );
        ManagementNode
    }
}

impl Drop for ManagementNode {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .args([SCRIPT, "management-stop"])
            .output();
    }
}

fn clean(amqp: &str, ns: &str, yes: bool) -> Output {
    let mut args = vec!["clean", "--amqp", amqp, "--prefix", ns];
    if yes {
        args.push("--yes");
    }
    delaybench(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_lists_and_removes_through_the_management_api_over_https() {
    let _node = ManagementNode::start();
    let ca = format!("{}/ca.pem", tls_dir());
    let amqp = format!(
        "amqps://guest:guest@localhost:5699/%2f?cacertfile={ca}&management=https://localhost:15699"
    );
    let ns = format!("t_mgmt_{}_{}", std::process::id(), now_us() % 1_000_000_000);
    let prefix = broker_prefix(&ns);
    let (queue, exchange) = (format!("{prefix}work"), format!("{prefix}delayed"));

    // A queue holding a message and an exchange, as a killed run leaves them.
    let conn = strategies::tls::amqp_connect(&amqp, Default::default())
        .await
        .unwrap_or_else(|e| panic!("AMQPS to the management node: {e}"));
    let ch = conn.create_channel().await.unwrap();
    let durable = lapin::options::QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare(queue.as_str().into(), durable, Default::default())
        .await
        .unwrap();
    ch.exchange_declare(
        exchange.as_str().into(),
        lapin::ExchangeKind::Direct,
        Default::default(),
        Default::default(),
    )
    .await
    .unwrap();
    ch.basic_publish(
        "".into(),
        queue.as_str().into(),
        Default::default(),
        b"1",
        Default::default(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    conn.close(200, "set up".into()).await.unwrap();

    // Listed through the API over HTTPS, with the message count it gives
    // (the API counts a new queue's messages at its next statistics
    // collection, every 5 s by default: until then it gives none).
    let mut counted = None;
    for _ in 0..30 {
        let (objects, _) = list_broker(&amqp).await.unwrap_or_else(|e| panic!("{e}"));
        counted = objects
            .iter()
            .find(|o| o.name == queue)
            .and_then(|o| o.messages);
        if counted.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(counted, Some(1), "the API's message count of {queue}");

    // A backlog's holdings on this broker, which is not this host's
    // default node: the run's queues named by the API and counted by a
    // passive declare over AMQPS, the nodes' memory from the API, and no
    // reading of the delayed store (rabbitmqctl would read the host
    // broker's, so it is not asked).
    let held = broker_holdings(&amqp, &ns)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(held.queued, 1, "{held:?}");
    assert!(held.memory > 0, "{held:?}");
    assert_eq!(held.delayed, None, "{held:?}");
    assert!(
        held.source
            .contains("management API https://localhost:15699/api"),
        "{held:?}"
    );
    let listed = clean(&amqp, &ns, false);
    let text = stdout(&listed);
    assert!(listed.status.success(), "{text}{}", stderr(&listed));
    for expected in [
        "listed with management API https://localhost:15699/api".to_string(),
        format!("queue {queue} "),
        format!("exchange {exchange} "),
        "1 messages".into(),
        "run again with --yes to remove these".into(),
    ] {
        assert!(text.contains(&expected), "no `{expected}` in:\n{text}");
    }
    assert!(!text.contains("guest:guest"), "a password printed:\n{text}");

    // Removed, and the API no longer lists them.
    let removed = clean(&amqp, &ns, true);
    assert!(removed.status.success(), "{}", stderr(&removed));
    let (left, source) = list_broker(&amqp).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(source, "management API https://localhost:15699/api");
    let ours: Vec<_> = left
        .iter()
        .filter(|o| o.name.starts_with(&prefix))
        .collect();
    assert!(ours.is_empty(), "left after --yes: {ours:?}");

    // `doctor` on this broker, which lacks the delayed-message plugin:
    // rabbit-delayed cannot run, and the fix names the plugin's install.
    let o = delaybench(&["doctor", "-S", "rabbit-delayed", "--amqp", &amqp]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    for expected in [
        "ok    rabbitmq reachable",
        "RabbitMQ ",
        "(TLS)",
        "FAIL  rabbitmq x-delayed-message",
        "bash rabbitmq-plugin/install.sh",
        "blocks: rabbit-delayed",
        "`clean` lists queues with management API https://localhost:15699/api",
    ] {
        assert!(text.contains(expected), "no `{expected}` in:\n{text}");
    }

    // Without the CA the API's certificate is refused, and the error says
    // which parameter fixes it (and does not fall back to rabbitmqctl,
    // which would answer for the host broker).
    let no_ca = amqp.replace(&format!("cacertfile={ca}&"), "");
    let err = list_broker(&no_ca)
        .await
        .expect_err("an untrusted CA")
        .to_string();
    for expected in [
        "https://localhost:15699/api",
        "cacertfile=",
        "UnknownIssuer",
    ] {
        assert!(err.contains(expected), "no `{expected}` in: {err}");
    }
    assert!(!err.contains("guest:guest"), "{err}");
    let refused = clean(&no_ca, &ns, false);
    assert!(
        stdout(&refused).contains("cacertfile=") || stderr(&refused).contains("cacertfile="),
        "{}{}",
        stdout(&refused),
        stderr(&refused)
    );
}
