//! A test that fails still leaves nothing behind: its fixture's drop
//! removes the strategy's queues, exchanges and Redis keys (and the
//! namespace) on the real broker and Redis.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;
use strategies::conformance::Fixture;
use strategies::leftovers::{
    broker_holdings, broker_prefix, delayed_plugin_build, list_broker, redis_keys, redis_patterns,
};
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
    for strategy in ["rabbit-ttl", "rabbit-delayed", "redis-zset"] {
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

/// The harness's guard: a run that sets up and then stops without its
/// teardown (an early error, a panic, a dropped future) still tears down.
#[test]
fn a_run_dropped_after_setup_still_tears_down() {
    use strategies::leftovers::TeardownGuard;
    use strategies::{DbServer, OrderStore};
    let options = common::test_options();
    let dir = std::env::temp_dir().join(format!("delaybench-guard-{}", std::process::id()));
    let rt = runtime();
    let (prefix, before) = rt.block_on(async {
        let server = DbServer::parse(&common::sqlite_url()).unwrap();
        let namespace = format!(
            "t_guard_{}_{}",
            std::process::id(),
            now_us() % 1_000_000_000
        );
        let location = server.create_namespace(&namespace, &dir).await.unwrap();
        let guard = TeardownGuard::new(&common::deploy("rabbit-ttl", &options), &location);
        let store = OrderStore::connect(&location, 1).await.unwrap();
        let instance = common::deploy("rabbit-ttl", &options)
            .instance(store)
            .unwrap();
        instance.setup().await.expect("setup");
        let before = left(&options, &location.resource_prefix()).await.0;
        // An error midway: the guard goes out of scope unfinished.
        drop(guard);
        (location.resource_prefix(), before)
    });
    assert!(!before.is_empty(), "setup declared no queue");
    let (queues, _) = rt.block_on(left(&options, &prefix));
    assert!(queues.is_empty(), "queues left: {queues:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A backlog's holdings on this host's default node, read in one
/// `rabbitmqctl eval`: the messages in the run's queues (rabbit-ttl holds
/// each schedule as a message in a TTL queue) and the delayed store's
/// count (rabbit-delayed's, node-wide). The API path is in the harness's
/// `tests/management_tls.rs`, on a node of its own.
#[test]
fn holdings_count_the_runs_messages_on_the_default_node() {
    let options = common::test_options();
    runtime().block_on(async {
        for (strategy, scheduled) in [("rabbit-ttl", 2), ("rabbit-delayed", 3)] {
            let f = Fixture::new(&common::sqlite_url(), strategy, options.clone()).await;
            let instance = f.instance().await;
            let due = now_us() + Duration::from_secs(120).as_micros() as i64;
            for order in 1..=scheduled {
                instance.schedule(order, due).await.expect("schedule");
            }
            let held = broker_holdings(&options.rabbit.url, &f.resource_prefix())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(held.source, "rabbitmqctl", "{held:?}");
            assert!(held.memory > 0, "{held:?}");
            match strategy {
                "rabbit-ttl" => assert_eq!(held.queued, scheduled as u64, "{held:?}"),
                _ => assert!(
                    held.delayed.is_some_and(|d| d >= scheduled as u64),
                    "{held:?}"
                ),
            }
            f.cleanup().await;
        }
    });
}

/// The delayed-message plugin's build as this host's default node ran it
/// (what run.json records): the project's plugin, the version
/// `rabbitmq-plugin/install.sh` builds, each module's MD5 as loaded equal
/// to `beam_lib:md5/1` of the `.beam` in the folder the node loaded it
/// from, and the code hash the same SHA-256 of those lines computed again
/// from the files by `erl`, apart from the node.
#[test]
fn the_plugin_build_is_the_code_the_node_loaded() {
    let options = common::test_options();
    let build = runtime().block_on(delayed_plugin_build(&options.rabbit.url));
    assert_eq!(build.name, "delaybench_delayed_exchange", "{build:?}");
    let install = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rabbitmq-plugin/install.sh"),
    )
    .unwrap();
    let vsn = install
        .lines()
        .find_map(|l| l.strip_prefix("VSN="))
        .expect("VSN= in install.sh");
    assert_eq!(build.version, vsn, "{build:?}");
    assert_eq!(
        build.source, "rabbitmqctl eval on this host's default node",
        "{build:?}"
    );
    assert!(
        build.modules.contains_key("delaybench_delayed_exchange")
            && build.modules.values().all(|m| m.len() == 32),
        "{build:?}"
    );
    let ebin = format!("{}/ebin", build.dir.as_deref().expect("dir"));
    // The same definition, from the files: `<module> <md5 hex>\n` in
    // module order, hashed with SHA-256.
    let eval = format!(
        "Hex = fun(B) -> lists:flatten([io_lib:format(\"~2.16.0b\", [X]) || <<X>> <= B]) end, \
         Beams = lists:sort(filelib:wildcard(\"{ebin}/*.beam\")), \
         Lines = [begin {{ok, {{M, Md5}}}} = beam_lib:md5(F), io_lib:format(\"~s ~s~n\", [M, Hex(Md5)]) end || F <- Beams], \
         io:format(\"~s~n~s\", [Hex(crypto:hash(sha256, Lines)), Lines]), halt()."
    );
    let out = std::process::Command::new("erl")
        .args(["-noshell", "-eval", &eval])
        .output()
        .expect("erl runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(build.code_sha256.as_str()), "{text}");
    let from_files: std::collections::BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(' '))
        .map(|(m, md5)| (m.to_string(), md5.to_string()))
        .collect();
    assert_eq!(from_files, build.modules);
}

/// A broker that cannot be read leaves every field `unknown`, and says why.
#[test]
fn an_unreadable_broker_gives_unknown_with_why() {
    let build = runtime().block_on(delayed_plugin_build("amqp://guest:guest@127.0.0.1:1/%2f"));
    assert_eq!(
        (
            build.name.as_str(),
            build.version.as_str(),
            build.code_sha256.as_str()
        ),
        ("unknown", "unknown", "unknown"),
        "{build:?}"
    );
    assert!(
        build.source.starts_with("not read: ") && build.source.contains("127.0.0.1:1"),
        "{build:?}"
    );
}
