//! Every fault kind against the real services (PostgreSQL, Redis), through
//! `delaybench run --scenario scenarios/chaos-short.toml`: the faults take
//! effect, each loss is put down to the fault that caused it and to no
//! other, the remedies lose nothing, the teaching variant shows its damage,
//! and the pause's duplicate attempts are counted with no duplicate effect.

mod common;

use common::{assert_plot_files, delaybench, pg, run_dir_of, stderr};
use serde_json::Value;

fn summary(dir: &std::path::Path, strategy: &str) -> Value {
    let path = dir.join(strategy).join("summary.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn u(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{pointer} missing in {v:#}"))
}

fn other_anomalies(s: &Value) -> u64 {
    let a = s["anomalies"].as_object().unwrap();
    a.iter()
        .filter(|(k, _)| *k != "missed_cancels")
        .map(|(_, v)| v.as_u64().unwrap())
        .sum()
}

/// The missed cancels the summary puts down to fault `i`, to several
/// faults, and to none.
fn losses(s: &Value) -> (Vec<u64>, u64, u64) {
    let (mut by_fault, mut several, mut none) = (vec![0; 7], 0, 0);
    for l in s["missed_by_fault"].as_array().into_iter().flatten() {
        let missed = l["missed"].as_u64().unwrap();
        match l["fault"].as_u64() {
            Some(i) => by_fault[i as usize] += missed,
            None if l["several"].as_array().is_some_and(|a| !a.is_empty()) => several += missed,
            None => none += missed,
        }
    }
    (by_fault, several, none)
}

/// Asserts `s` missed cancels, every one put down to fault `fault` alone,
/// and broke no other invariant; returns how many it missed.
fn assert_lost_only_under(s: &Value, fault: usize) -> u64 {
    let missed = u(s, "/anomalies/missed_cancels");
    let (by_fault, several, none) = losses(s);
    assert!(
        missed > 0,
        "{}: fault #{} should cost orders",
        s["strategy"],
        fault + 1
    );
    assert_eq!(by_fault[fault], missed, "{:#}", s["missed_by_fault"]);
    assert_eq!((several, none), (0, 0), "{:#}", s["missed_by_fault"]);
    assert_eq!(other_anomalies(s), 0, "{:#}", s["anomalies"]);
    missed
}

#[test]
fn chaos_short_applies_every_fault_kind_and_attributes_every_loss() {
    let out = common::Scratch::new();
    let run = delaybench(&[
        "run",
        "--scenario",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/chaos-short.toml"),
        "--db",
        &pg(),
        "--out",
        out.path().to_str().unwrap(),
        "--allow-anomalies",
        "--strategies",
        "redis-zset,redis-zset+fallback,redis-zset+outbox,redis-zset-publish-first,\
         rabbit-delayed,rabbit-delayed+outbox",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let dir = run_dir_of(&run);

    let plain = summary(&dir, "redis-zset");
    // Every fault took effect, without an error.
    let faults = plain["faults"].as_array().unwrap();
    let kinds: Vec<&str> = faults.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "partition",
            "latency",
            "pause-instance",
            "kill-db-connections",
            "crash-at",
            "partition",
            "partition"
        ]
    );
    for f in faults {
        assert!(f["error"].is_null(), "{f:#}");
        let applies = !f["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("not applicable"));
        // The broker partition (#7) does not touch redis-zset.
        assert_eq!(applies, f != &faults[6], "{f:#}");
        assert_eq!(f["window_ms"].is_array(), applies, "{f:#}");
    }
    let detail = |i: usize| faults[i]["detail"].as_str().unwrap().to_string();
    assert!(
        !detail(0).starts_with("0 open"),
        "the Redis partition cut nothing: {}",
        detail(0)
    );
    assert!(detail(2).contains("at after-claim"), "{}", detail(2));
    assert!(
        !detail(3).starts_with("0 "),
        "no session was terminated: {}",
        detail(3)
    );
    assert!(detail(4).starts_with("aborted 1 of 1"), "{}", detail(4));

    // Plain redis-zset loses the schedules dropped during the Redis
    // partition, and those are the only losses, all put down to it.
    let missed = assert_lost_only_under(&plain, 0);
    let dropped: u64 = plain["cost"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["schedules_dropped"].as_u64().unwrap())
        .sum();
    assert!(dropped >= missed, "{dropped} dropped < {missed} missed");
    assert_eq!(other_anomalies(&plain), 0, "{:#}", plain["anomalies"]);
    // The paused instance's reclaimed claims came back as duplicate
    // attempts, absorbed: no duplicate release (other anomalies are 0).
    assert!(
        faults[2]["duplicates_absorbed"].as_u64().unwrap() > 0,
        "{}",
        detail(2)
    );

    // Plain rabbit-delayed loses under the broker partition, and only there.
    let rabbit = summary(&dir, "rabbit-delayed");
    assert_lost_only_under(&rabbit, 6);

    // The remedies lose nothing.
    for remedied in [
        "redis-zset+fallback",
        "redis-zset+outbox",
        "rabbit-delayed+outbox",
    ] {
        let s = summary(&dir, remedied);
        assert_eq!(s["status"], "ok", "{remedied}: {}", s["reason"]);
        assert_eq!(u(&s, "/anomalies/missed_cancels"), 0, "{remedied}");
        assert_eq!(other_anomalies(&s), 0, "{remedied}: {:#}", s["anomalies"]);
    }
    let outbox = summary(&dir, "redis-zset+outbox");
    assert!(
        u(&outbox, "/outbox/max_rows") > 0,
        "the outbox never filled: {:#}",
        outbox["outbox"]
    );
    // Every row still there at the end is one a relay claimed and then
    // stopped over (the crash, the killed connections: it comes back when
    // the lease ends, possibly after the run), none is a pending order's.
    let o = &outbox["outbox"];
    assert_eq!(
        u(&outbox, "/outbox/left_at_end"),
        u(&outbox, "/outbox/left_leased"),
        "rows left unclaimed: {o:#}"
    );
    assert_eq!(u(&outbox, "/outbox/left_of_pending_orders"), 0, "{o:#}");

    // Publishing before the commit leaves phantoms of the rolled-back checkouts.
    let first = summary(&dir, "redis-zset-publish-first");
    assert!(
        u(&first, "/anomalies/phantom_schedules") > 0,
        "{:#}",
        first["anomalies"]
    );
    assert!(u(&first, "/generator/rolled_back") > 0);
    assert_eq!(u(&plain, "/anomalies/phantom_schedules"), 0);

    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("## Faults: what each strategy lost, and where"),
        "{report}"
    );
    // Each fault is a shaded band on the lateness-over-time plot, keyed
    // under it by its number in the faults table and its label (the key
    // cuts long labels, so their start is checked).
    let over_time = &assert_plot_files(&dir, &["lateness-over-time"])[0];
    for (i, f) in faults.iter().enumerate() {
        let key: String = format!("#{} {}", i + 1, f["label"].as_str().unwrap())
            .chars()
            .take(40)
            .collect();
        assert!(over_time.contains(&key), "no {key}: {over_time}");
    }
}

/// A fault that cannot touch a strategy is `n/a`, and one that lands on
/// db-timer's standby instead of its leader says it missed its target:
/// neither may read as "survived". Each instance of db-timer and db-scan is
/// paused once; db-timer's lead stays put (a paused leader keeps its
/// session), so exactly one of its two pauses hit the standby, while
/// db-scan's instances are peers and both pauses hit.
#[test]
fn faults_that_do_not_apply_or_miss_the_leader_are_reported_so() {
    let out = common::Scratch::new();
    let scenario = out.path().join("reach.toml");
    std::fs::write(
        &scenario,
        r#"
name = "reach"
seed = 3
warmup = "1s"
duration = "6s"
drain = "2s"
rate = 20.0
instances = 2
[[timeouts]]
after = "1s"
[[faults]]
kind = "pause-instance"
instance = 0
at = "3s"
for = "300ms"
[[faults]]
kind = "pause-instance"
instance = 1
at = "5s"
for = "300ms"
[[faults]]
kind = "partition"
target = "redis"
at = "4s"
for = "1s"
[[faults]]
kind = "run-command"
target = "rabbitmq"
command = ["true"]
at = "4s"
"#,
    )
    .unwrap();
    let run = delaybench(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--db",
        &pg(),
        "--out",
        out.path().to_str().unwrap(),
        "--strategies",
        "db-timer,db-scan",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let dir = run_dir_of(&run);
    let reach = |s: &Value| -> Vec<String> {
        s["faults"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["reach"]["kind"].as_str().unwrap().to_string())
            .collect()
    };
    let timer = reach(&summary(&dir, "db-timer"));
    let pauses: Vec<&str> = timer[..2].iter().map(String::as_str).collect();
    assert!(
        pauses == ["hit", "missed-target"] || pauses == ["missed-target", "hit"],
        "db-timer's two pauses: {timer:?}"
    );
    assert_eq!(
        timer[2..],
        ["not-applicable", "not-applicable"],
        "{timer:?}"
    );
    let scan = reach(&summary(&dir, "db-scan"));
    assert_eq!(
        scan,
        ["hit", "hit", "not-applicable", "not-applicable"],
        "db-scan: {scan:?}"
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("(missed target)"), "{report}");
    assert!(report.contains("was a standby; instance"), "{report}");
    assert!(report.contains("| n/a |"), "{report}");
}

/// A paused instance of a strategy whose `schedule` does nothing
/// (db-timer) is not blamed for a schedule path: the harness hands it no
/// schedule to wait on, and the summary says why the figure is absent. A
/// strategy that does schedule (the wheel) still has its path measured,
/// and the same pause shows on it: its orders' timers were set late.
#[test]
fn a_paused_instance_whose_schedule_does_nothing_is_not_blamed_for_the_schedule_path() {
    let out = common::Scratch::new();
    let scenario = out.path().join("pause-noop-schedule.toml");
    std::fs::write(
        &scenario,
        r#"
name = "pause-noop-schedule"
seed = 5
warmup = "1s"
duration = "6s"
drain = "3s"
rate = 40.0
instances = 2
[[timeouts]]
after = "1s"
[[faults]]
kind = "pause-instance"
instance = 0
at = "3s"
for = "2s"
"#,
    )
    .unwrap();
    let run = delaybench(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--db",
        &pg(),
        "--out",
        out.path().to_str().unwrap(),
        "--strategies",
        "db-timer,timing-wheel",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let dir = run_dir_of(&run);

    let timer = summary(&dir, "db-timer");
    let pause = &timer["faults"][0];
    assert!(pause["error"].is_null(), "{pause:#}");
    assert!(
        pause["window_ms"].is_array(),
        "the pause never acted: {pause:#}"
    );
    assert!(
        timer["schedule_path_us"].is_null(),
        "db-timer's schedule does nothing, yet it has a schedule path: {:#}",
        timer["schedule_path_us"]
    );
    let why = timer["schedule_path_absent"].as_str().unwrap_or_default();
    assert!(
        why.contains("does nothing"),
        "{:#}",
        timer["schedule_path_absent"]
    );
    let warnings: Vec<&str> = timer["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !warnings.iter().any(|w| w.contains("schedule path")),
        "{warnings:?}"
    );
    // Nothing was lost either: the orders table is db-timer's schedule.
    assert_eq!(u(&timer, "/generator/unscheduled"), 0);
    assert_eq!(other_anomalies(&timer), 0, "{:#}", timer["anomalies"]);

    // The wheel schedules: its paused instance returned from `schedule`
    // only after the SIGCONT, and its path says so.
    let wheel = summary(&dir, "timing-wheel");
    assert!(wheel["schedule_path_absent"].is_null(), "{wheel:#}");
    assert!(u(&wheel, "/schedule_path_us/count") > 0, "{wheel:#}");
    assert!(
        u(&wheel, "/schedule_path_us/max") >= 1_000_000,
        "the pause does not show on the wheel's schedule path: {:#}",
        wheel["schedule_path_us"]
    );

    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("schedule path: not applicable"),
        "the report does not say why db-timer has no schedule path: {report}"
    );
}

/// A fault aimed at "the Redis node of the next deadline" acts on the
/// master serving the strategy's shard whose deadline comes first when it
/// fires, found by the harness then: the command gets that node (`{node}`,
/// `{port}`), and the record names it. A strategy that uses no Redis has
/// no such node: the fault is n/a to it and its command does not run.
#[test]
fn a_fault_aimed_at_the_next_deadline_acts_on_the_master_that_holds_it() {
    let services = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services.sh");
    let up = std::process::Command::new("bash")
        .args([services, "redis-cluster"])
        .status()
        .expect("run scripts/services.sh redis-cluster");
    assert!(
        up.success(),
        "scripts/services.sh redis-cluster failed: {up}"
    );
    let out = common::Scratch::new();
    let acted = out.path().join("acted-on");
    let scenario = out.path().join("next-deadline.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"
name = "next-deadline"
seed = 5
warmup = "1s"
duration = "6s"
drain = "3s"
rate = 30.0
instances = 2
[[timeouts]]
after = "2s"
[strategies.redis-zset]
url = "redis+cluster://127.0.0.1:7000"
shards = 4
[[faults]]
kind = "run-command"
target = "redis"
node = "next-deadline"
at = "4s"
command = ["sh", "-c", "echo {{node}} {{port}} >> {}"]
"#,
            acted.display()
        ),
    )
    .unwrap();
    let run = delaybench(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--db",
        &pg(),
        "--out",
        out.path().to_str().unwrap(),
        "--strategies",
        "redis-zset,db-scan",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let dir = run_dir_of(&run);
    let zset = &summary(&dir, "redis-zset")["faults"][0];
    assert_eq!(zset["aimed_at"], "next-deadline", "{zset:#}");
    assert_eq!(zset["reach"]["kind"], "hit", "{zset:#}");
    let node = zset["node"]
        .as_str()
        .unwrap_or_else(|| panic!("no node: {zset:#}"));
    assert!(
        ["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"].contains(&node),
        "{zset:#}"
    );
    let detail = zset["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(node) && detail.contains("shard"),
        "{zset:#}"
    );
    let port = node.rsplit_once(':').unwrap().1;
    assert!(
        zset["command"][2]
            .as_str()
            .unwrap()
            .contains(&format!("echo {node} {port} >>")),
        "{zset:#}"
    );
    let scan = &summary(&dir, "db-scan")["faults"][0];
    assert_eq!(scan["reach"]["kind"], "not-applicable", "{scan:#}");
    assert!(scan.get("node").is_none_or(Value::is_null), "{scan:#}");
    // The command ran once: for redis-zset, on its node; not for db-scan.
    let ran = std::fs::read_to_string(&acted).unwrap();
    assert_eq!(ran, format!("{node} {port}\n"));
}

/// A fault aimed at "the broker node hosting the queues" acts on the node
/// the management API names as hosting most of the strategy's queues when
/// it fires (on the local cluster, dlb1: its clients declare there first);
/// the command gets the node's name (`{node}`).
#[test]
fn a_fault_aimed_at_the_queue_host_acts_on_the_node_the_broker_names() {
    let cluster = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/rabbitmq-cluster.sh"
    );
    let up = std::process::Command::new("bash")
        .args([cluster, "start"])
        .status()
        .expect("run scripts/rabbitmq-cluster.sh start");
    assert!(
        up.success(),
        "scripts/rabbitmq-cluster.sh start failed: {up}"
    );
    let out = common::Scratch::new();
    let acted = out.path().join("acted-on");
    let scenario = out.path().join("queue-host.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"
name = "queue-host"
seed = 6
warmup = "1s"
duration = "5s"
drain = "3s"
rate = 30.0
instances = 2
[[timeouts]]
after = "2s"
[strategies.rabbit]
url = "amqp://guest:guest@127.0.0.1:5681/%2f?management=http://127.0.0.1:15691,amqp://guest:guest@127.0.0.1:5682/%2f,amqp://guest:guest@127.0.0.1:5683/%2f"
queue-type = "quorum"
[[faults]]
kind = "run-command"
target = "rabbitmq"
node = "queue-host"
at = "3s"
command = ["sh", "-c", "echo {{node}} >> {}"]
"#,
            acted.display()
        ),
    )
    .unwrap();
    let run = delaybench(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--db",
        &pg(),
        "--out",
        out.path().to_str().unwrap(),
        "--strategies",
        "rabbit-ttl",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let dir = run_dir_of(&run);
    let fault = &summary(&dir, "rabbit-ttl")["faults"][0];
    assert_eq!(fault["aimed_at"], "queue-host", "{fault:#}");
    assert_eq!(fault["reach"]["kind"], "hit", "{fault:#}");
    assert_eq!(fault["node"], "dlb1@localhost", "{fault:#}");
    let detail = fault["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("work") && detail.contains("wait.2000ms"),
        "{fault:#}"
    );
    assert_eq!(std::fs::read_to_string(&acted).unwrap(), "dlb1@localhost\n");
}
