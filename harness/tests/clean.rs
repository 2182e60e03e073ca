//! `delaybench clean` on the real services: a leftover of each kind, in a
//! namespace of this test's own, is listed, kept without `--yes`, and
//! removed with it. `--prefix` scopes every call to that namespace, so
//! other people's objects are never touched.

mod common;

use common::{delaybench, mysql, pg, stderr};
use std::process::Output;
use strategies::leftovers::{broker_prefix, list_broker, redis_keys, redis_patterns};
use strategies::{now_us, registry, DbServer, OrderStore, StrategyOptions};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What the broker and Redis hold under `ns`.
async fn on_services(options: &StrategyOptions, ns: &str) -> Vec<String> {
    let (objects, _) = list_broker(&options.rabbit.url)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut left: Vec<String> = objects
        .into_iter()
        .filter(|o| o.name.starts_with(&broker_prefix(ns)))
        .map(|o| o.name)
        .collect();
    for pattern in redis_patterns(ns) {
        left.extend(
            redis_keys(&options.redis_zset.url, &pattern)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_lists_then_removes_what_runs_left() {
    let ns = format!(
        "t_clean_{}_{}_0",
        std::process::id(),
        now_us() % 1_000_000_000
    );
    let out = common::Scratch::new();
    let mut options = StrategyOptions::default();
    options.rabbit.ttls = vec![std::time::Duration::from_secs(3600)];
    // A kept namespace on each database server, and a SQLite file.
    let mut locations = Vec::new();
    for url in [pg(), mysql(), "sqlite://".to_string()] {
        out.track(&url, &ns);
        let server = DbServer::parse(&url).unwrap();
        let location = server
            .create_namespace(&ns, &out.path().join("run/db-scan"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        locations.push((server, location));
    }
    // Queues with a message, an exchange, Redis keys: strategies set up
    // and given an order, as a run killed before its teardown leaves them.
    let sqlite = &locations[2].1;
    let store = OrderStore::connect(sqlite, 2).await.unwrap();
    store.install_schema(1, 10).await.unwrap();
    for strategy in ["rabbit-ttl", "rabbit-delayed", "redis-zset"] {
        let instance =
            registry::Deployment::new(registry::Variant::parse(strategy).unwrap(), &options)
                .instance(store.clone())
                .unwrap();
        instance.setup().await.unwrap_or_else(|e| panic!("{e}"));
        instance
            .schedule(1, now_us() + 3_600_000_000)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    store.close().await;
    let before = on_services(&options, &ns).await;

    let args = |yes: bool| {
        let mut args = vec![
            "clean".to_string(),
            "--db".into(),
            pg(),
            "--db".into(),
            mysql(),
            "--out".into(),
            out.path().display().to_string(),
            "--prefix".into(),
            ns.clone(),
        ];
        if yes {
            args.push("--yes".into());
        }
        args
    };
    let run = |yes: bool| {
        let args = args(yes);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        delaybench(&refs)
    };

    let listed = run(false);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    for expected in [
        format!("schema {ns} "),
        format!("database {ns} "),
        format!("{ns}.sqlite ("),
        format!("queue dlb.{ns}.work "),
        format!("queue dlb.{ns}.wait."),
        format!("exchange dlb.{ns}.delayed "),
        format!("key dlb:{{{ns}:"),
        "run again with --yes to remove these".into(),
        "listed with".into(),
    ] {
        assert!(text.contains(&expected), "no `{expected}` in:\n{text}");
    }
    assert!(text.contains("age unknown"), "{text}");
    assert_eq!(
        on_services(&options, &ns).await,
        before,
        "listing removed something"
    );
    assert!(before.len() >= 5, "{before:?}");

    // Nothing here is a day old.
    let mut old = args(true);
    old.extend(["--older-than".into(), "1d".into()]);
    let refs: Vec<&str> = old.iter().map(String::as_str).collect();
    let none = delaybench(&refs);
    assert!(none.status.success(), "{}", stderr(&none));
    assert!(
        stdout(&none).contains("nothing to remove"),
        "{}",
        stdout(&none)
    );
    assert_eq!(on_services(&options, &ns).await, before);

    let removed = run(true);
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert!(stdout(&removed).contains("removed"), "{}", stdout(&removed));
    let again = run(false);
    assert!(
        stdout(&again).contains("nothing to remove"),
        "{}",
        stdout(&again)
    );
    assert!(on_services(&options, &ns).await.is_empty());
    assert!(!std::path::Path::new(&locations[2].1.namespace).exists());
}

/// A run interrupted (SIGINT) while a broker strategy is measured tears
/// that strategy down before exiting: no queue of the run is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_leaves_no_queue() {
    let out = common::Scratch::new();
    let scenario = out.path().join("long.toml");
    std::fs::write(
        &scenario,
        "name = \"interrupted\"\nseed = 1\nwarmup = \"0s\"\nduration = \"60s\"\ndrain = \"1s\"\n\
         rate = 20.0\ninstances = 1\n[[timeouts]]\nafter = \"30s\"\n",
    )
    .unwrap();
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_delaybench"))
        .args(["run", "--strategies", "rabbit-ttl", "--scenario"])
        .arg(&scenario)
        .arg("--out")
        .arg(out.path().join("results"))
        .env("CI", "true")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start delaybench run");
    let options = StrategyOptions::default();
    // The run's namespace, once its folder exists; then its queues.
    let mut ns = None;
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let run_id = std::fs::read_dir(out.path().join("results"))
            .into_iter()
            .flatten()
            .flatten()
            .next()
            .map(|e| e.file_name().to_string_lossy().into_owned());
        if let Some(run_id) = run_id {
            let prefix = strategies::store::identifier(&format!("dlb_{run_id}_rabbit_ttl"));
            if !on_services(&options, &prefix).await.is_empty() {
                ns = Some(prefix);
                break;
            }
        }
    }
    let ns = ns.expect("the run declared its queues within 30s");
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let output = tokio::task::spawn_blocking(move || {
        let status = run.wait().unwrap();
        let mut err = String::new();
        use std::io::Read;
        run.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status, err)
    })
    .await
    .unwrap();
    assert!(
        !output.0.success(),
        "an interrupted run fails: {}",
        output.1
    );
    assert!(output.1.contains("interrupted"), "{}", output.1);
    assert_eq!(on_services(&options, &ns).await, Vec::<String>::new());
}

/// A service that cannot be reached is named, and never reported as holding
/// nothing; with `--yes` the command fails, saying how to start it, after
/// doing what it could elsewhere.
#[test]
fn an_unreachable_service_is_named_and_fails_a_removal() {
    let out = common::Scratch::new();
    let run = |yes: bool| {
        let mut args = vec![
            "clean".to_string(),
            "--db".into(),
            pg(),
            "--amqp".into(),
            "amqp://guest:guest@127.0.0.1:1/%2f".into(),
            "--redis".into(),
            "redis://127.0.0.1:1".into(),
            "--out".into(),
            out.path().display().to_string(),
            "--prefix".into(),
            "t_nobody_has_this_prefix".into(),
        ];
        if yes {
            args.push("--yes".into());
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        delaybench(&refs)
    };

    let listed = run(false);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(
        text.contains("RabbitMQ amqp://guest:***@127.0.0.1:1/%2f: not looked at")
            && text.contains("Redis redis://127.0.0.1:1: not looked at"),
        "{text}"
    );
    assert!(
        text.contains("nothing to remove where it looked; not looked at: RabbitMQ")
            && !text.lines().any(|l| l == "nothing to remove"),
        "{text}"
    );

    let removed = run(true);
    assert!(!removed.status.success(), "{}", stdout(&removed));
    let err = stderr(&removed);
    assert!(
        err.contains("could not look at RabbitMQ") && err.contains("scripts/services.sh"),
        "{err}"
    );
}
