//! End-to-end tests of `delaybench sweep` on the real services: a tiny
//! rate sweep (discovery, the ceiling, a strategy that cannot hold, the
//! generator check) and a tiny backlog sweep (preload, holdings, restarts).

mod common;

use common::{assert_plot_files, delaybench, pg, run_dir_of};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Runs `delaybench sweep` on `scenario` and returns the folder; panics
/// with stderr when it fails.
fn sweep(scenario: &str, strategies: &str, out: &Path, extra: &[&str]) -> PathBuf {
    let _turn = ONE_SWEEP_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let file = out.join("scenario.toml");
    std::fs::write(&file, scenario).unwrap();
    let db = pg();
    let mut args = vec![
        "sweep",
        "--scenario",
        file.to_str().unwrap(),
        "--strategies",
        strategies,
        "--db",
        &db,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = delaybench(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "sweep failed: {stderr}");
    run_dir_of(&o)
}

/// The two sweeps take turns: the backlog sweep restarts Redis and
/// RabbitMQ, which would land in the middle of the rate sweep's steps.
static ONE_SWEEP_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn strategy<'a>(sweep: &'a Value, name: &str) -> &'a Value {
    sweep["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {sweep:#}"))
}

fn rates(s: &Value) -> Vec<f64> {
    s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| st["rate"].as_f64().unwrap())
        .collect()
}

/// Short steps; db-scan scans every 800 ms against a 400 ms bound, so it
/// cannot hold at any rate, while the ceiling and the wheel hold at both.
/// The bound and the keep-up leave room for a loaded two-core CI machine
/// (a 100 ms keep-up once failed the ceiling at 80/s there).
const RATE_SWEEP: &str = r#"
name = "tiny-sweep"
seed = 3
warmup = "500ms"
duration = "2s"
drain = "500ms"
rate = 40.0
instances = 2

[[timeouts]]
after = "500ms"

[strategies.db-scan]
interval = "800ms"

[sweep]
start-rate = 40
max-rate = 80
bound = "400ms"
keep-up = "1s"
"#;

#[test]
fn a_tiny_sweep_finds_the_ceiling_and_each_strategys_limit() {
    let out = common::Scratch::new();
    let dir = sweep(
        RATE_SWEEP,
        "db-scan,timing-wheel",
        out.path(),
        &["--repeat", "2"],
    );
    let result = read_json(&dir.join("sweep.json"));
    assert_eq!(result["axis"], "rate");
    let names: Vec<&str> = result["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ceiling", "db-scan", "timing-wheel"],
        "the ceiling runs first"
    );
    // Discovery doubles up to max-rate and stops there when everything held.
    for name in ["ceiling", "timing-wheel"] {
        let s = strategy(&result, name);
        assert_eq!(rates(s), [40.0, 80.0], "{s:#}");
        assert_eq!(s["max_rate"], 80.0, "{s:#}");
        assert!(s["first_failed_rate"].is_null());
        for step in s["steps"].as_array().unwrap() {
            assert_eq!(step["holds"], true, "{step:#}");
            assert!(step["cancels"].as_u64().unwrap() > 0);
            // Each repetition is a whole run with its own summary.
            let repeats = step["repeats"].as_array().unwrap();
            assert_eq!(repeats.len(), 2, "{step:#}");
            for (k, rep) in repeats.iter().enumerate() {
                let folder = rep["folder"].as_str().unwrap();
                assert!(folder.ends_with(&format!("/repeat-{}", k + 1)), "{folder}");
                let summary = read_json(&dir.join(folder).join("summary.json"));
                assert_eq!(summary["status"], "ok");
                assert!(summary["overdue"]["counts"].as_array().unwrap().len() >= 4);
            }
        }
    }
    assert_eq!(strategy(&result, "timing-wheel")["share_of_ceiling"], 1.0);
    // The first rate fails: nothing is bisected below it, and it says why.
    let scan = strategy(&result, "db-scan");
    assert_eq!(rates(scan), [40.0], "{scan:#}");
    assert!(scan["max_rate"].is_null());
    assert_eq!(scan["first_failed_rate"], 40.0);
    let reasons = scan["steps"][0]["reasons"].to_string();
    // A p99 where the step had the samples for one; else the same fact
    // without a p99 (never printed below the sample rule).
    assert!(
        (reasons.contains("p99 lateness") && reasons.contains("> bound 400.0 ms"))
            || (reasons.contains("later than the bound 400.0 ms")
                && reasons.contains("too few for a p99")),
        "{reasons}"
    );
    assert!(
        scan["limited_by"]
            .as_str()
            .unwrap()
            .contains("bound 400.0 ms"),
        "{scan:#}"
    );
    // The generator alone was driven at twice the best strategy's rate.
    let generator = &result["generator"];
    assert_eq!(generator["rate"], 160.0, "{generator:#}");
    assert!(generator["verdict"].as_str().unwrap().contains("160"));
    // The report: the table, the plot, and every step.
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("| ceiling | ≥ 80 (held at the highest rate offered) | 100% |"),
        "{report}"
    );
    assert!(
        report.contains("| db-scan | < 40 (the first step failed) |"),
        "{report}"
    );
    assert!(report.contains("**Generator check**"), "{report}");
    let svg = &assert_plot_files(&dir, &["sweep"])[0];
    assert!(svg.contains("timing-wheel") && svg.contains("bound 400 ms"));
    // `report` regenerates them from the JSON alone.
    std::fs::remove_file(dir.join("report.md")).unwrap();
    std::fs::remove_dir_all(dir.join("plots")).unwrap();
    let o = delaybench(&["report", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.join("report.md")).unwrap(),
        report
    );
    assert_eq!(&assert_plot_files(&dir, &["sweep"])[0], svg);
}

#[test]
fn a_run_refuses_several_backlog_sizes_and_names_the_field() {
    let out = common::Scratch::new();
    let file = out.path().join("b.toml");
    let text = format!("{RATE_SWEEP}\n[backlog]\npending = [0, 100]\n");
    std::fs::write(&file, text).unwrap();
    let o = delaybench(&[
        "run",
        "--scenario",
        file.to_str().unwrap(),
        "--strategies",
        "db-scan",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("backlog.pending") && stderr.contains("delaybench sweep"),
        "{stderr}"
    );
}

/// Two sizes at a low rate; the services restart with the backlog in place.
fn backlog_scenario() -> String {
    let services = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services.sh");
    format!(
        r#"
name = "tiny-backlog"
seed = 5
warmup = "500ms"
duration = "2s"
drain = "1s"
rate = 40.0
instances = 2

[[timeouts]]
after = "500ms"

[strategies.db-scan]
interval = "50ms"

[backlog]
pending = [0, 3000]
after = "1h"
restart-redis = ["sh", "-c", "d=$(redis-cli -p 6379 config get dir | tail -n 1); redis-cli -p 6379 save >/dev/null && redis-cli -p 6379 shutdown nosave; {services} redis >/dev/null && rm -f \"$d/dump.rdb\""]
restart-rabbitmq = ["sh", "-c", "rabbitmqctl -q stop_app && rabbitmqctl -q start_app"]
"#
    )
}

#[test]
fn a_tiny_backlog_is_preloaded_held_and_survives_restarts() {
    let out = common::Scratch::new();
    let dir = sweep(
        &backlog_scenario(),
        "db-scan,db-scan-noindex,timing-wheel,redis-zset,rabbit-ttl,rabbit-delayed",
        out.path(),
        &[],
    );
    let result = read_json(&dir.join("sweep.json"));
    assert_eq!(result["axis"], "pending");
    for s in result["strategies"].as_array().unwrap() {
        let name = s["strategy"].as_str().unwrap();
        let steps = s["steps"].as_array().unwrap();
        let sizes: Vec<u64> = steps
            .iter()
            .map(|st| st["pending"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, [0, 3000], "{name}");
        // The empty backlog is measured too, as the baseline.
        assert_eq!(steps[0]["backlog"]["pending"], 0, "{name}");
        assert_eq!(
            steps[0]["backlog"]["recovery"][0]["what"], "instances",
            "{name}"
        );
        let summary = read_json(
            &dir.join(steps[1]["folder"].as_str().unwrap())
                .join("summary.json"),
        );
        // The backlog orders stay PENDING and are no anomaly.
        assert_eq!(
            summary["anomalies"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>(),
            0,
            "{name}: {:#}",
            summary["anomalies"]
        );
        let b = &steps[1]["backlog"];
        assert_eq!(b["pending"], 3000, "{name}");
        assert!(b["insert_s"].as_f64().unwrap() > 0.0 && b["handoff_s"].as_f64().unwrap() > 0.0);
        assert_eq!(b["handoff_errors"], 0, "{name}: {b:#}");
        let held = &b["held"];
        assert_eq!(
            held["worker_rss_kib"].as_array().unwrap().len(),
            2,
            "{name}"
        );
        // The database grows by the backlog's rows and index entries: an
        // order row alone is over 50 bytes on every kind.
        let database = |step: usize| {
            steps[step]["backlog"]["held"]["database_bytes"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: no database size at step {step}"))
        };
        assert!(
            database(1) >= database(0) + 3000 * 50,
            "{name}: database {} bytes at 0 pending, {} at 3000",
            database(0),
            database(1)
        );
        // Read just before the backlog went in too, the instances running.
        let before = &b["held_before"]["database_bytes"];
        assert!(
            before.as_u64().unwrap_or_else(|| panic!("{name}: {b:#}")) + 3000 * 50
                <= held["database_bytes"].as_u64().unwrap(),
            "{name}: {b:#}"
        );
        // Each backlog order reached one instance, through `schedule` only:
        // none was reloaded from the database and handed over again.
        if name == "timing-wheel" {
            let counters = &summary["cost"]["strategy_counters"];
            assert_eq!(counters["reloaded"], 0, "{counters:#}");
            assert_eq!(counters["duplicate_schedules"], 0, "{counters:#}");
        }
        match name {
            "redis-zset" => assert!(held["redis_members"].as_u64().unwrap() >= 3000, "{held:#}"),
            "rabbit-ttl" => assert!(
                held["queued_messages"].as_u64().unwrap() >= 3000,
                "{held:#}"
            ),
            "rabbit-delayed" => {
                assert!(held["delayed_stored"].as_u64().unwrap() >= 3000, "{held:#}")
            }
            _ => assert!(held["redis_members"].is_null() && held["broker_memory"].is_null()),
        }
        // Every restart ends with the strategy cancelling again, its
        // backlog still held.
        let recovery = b["recovery"].as_array().unwrap();
        let expected: &[&str] = match name {
            "redis-zset" => &["instances", "redis"],
            "rabbit-ttl" | "rabbit-delayed" => &["instances", "rabbitmq"],
            _ => &["instances"],
        };
        let whats: Vec<&str> = recovery
            .iter()
            .map(|r| r["what"].as_str().unwrap())
            .collect();
        assert_eq!(whats, expected, "{name}");
        for r in recovery {
            assert!(r["cancelling_again_s"].as_f64().is_some(), "{name}: {r:#}");
            assert!(
                r["probes_cancelled"].as_u64().unwrap() >= 1,
                "{name}: {r:#}"
            );
        }
        if name == "redis-zset" {
            let after = recovery[1]["held_after"]["redis_members"].as_u64().unwrap();
            assert!(after >= 3000, "the snapshot kept the backlog: {after}");
        }
    }
    // Without its index, db-scan reads the whole table on every scan: the
    // database's rows read per cancel grow with the backlog; with it, not.
    let rows = |name: &str, step: usize| {
        strategy(&result, name)["steps"][step]["server_rows_read_per_cancel"]
            .as_f64()
            .unwrap()
    };
    assert!(
        rows("db-scan-noindex", 1) > 10.0 * rows("db-scan", 1),
        "noindex {} vs indexed {} rows read per cancel with 3000 pending",
        rows("db-scan-noindex", 1),
        rows("db-scan", 1)
    );
    // A scan that read the backlog would add its 3 000 rows per scan, and
    // there are more scans than cancels here (two instances every 50 ms,
    // 40 orders/s): thousands of rows per cancel. The bound is 1 % of the
    // backlog per cancel. It is not a factor of the reading with none
    // (about 1.2): CI, with another sweep test on the same server, once read
    // 7.9 with 3 000 pending against 1.2 with none (at 880779b), far from
    // what reading the backlog costs but twice the reading plus one; its
    // cause is not known (a sample of few transactions, or a plan chosen
    // before the preloaded table was analyzed, are candidates).
    assert!(
        rows("db-scan", 1) < rows("db-scan", 0) + 3000.0 / 100.0,
        "db-scan's rows read per cancel grew with the backlog: {} with 3000 pending, {} with none",
        rows("db-scan", 1),
        rows("db-scan", 0)
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Holding a backlog"), "{report}");
    // Each strategy's bytes per pending order, against what it held just
    // before its backlog went in.
    let bytes = report
        .split("### Bytes per pending order")
        .nth(1)
        .unwrap_or_else(|| panic!("no bytes per pending order table: {report}"));
    for name in [
        "db-scan",
        "timing-wheel",
        "redis-zset",
        "rabbit-ttl",
        "rabbit-delayed",
    ] {
        assert!(
            bytes.contains(&format!("| {name} | 3000 |"))
                && bytes
                    .lines()
                    .any(|l| l.starts_with(&format!("| {name} | 3000 |"))
                        && l.contains("just before it")),
            "{name} has no row: {bytes}"
        );
    }
    let plots = assert_plot_files(&dir, &["backlog", "backlog-cost"]);
    assert!(plots.iter().all(|svg| svg.contains("db-scan-noindex")));
}

/// The bundled backlog preset's `[backlog]` command `key`, as TOML.
fn preset_command(key: &str) -> String {
    let preset: toml::Value = toml::from_str(include_str!("../scenarios/backlog.toml")).unwrap();
    let command = preset["backlog"][key].clone();
    assert!(
        command.as_array().is_some_and(|c| !c.is_empty()),
        "{key}: {command}"
    );
    toml::Value::Array(command.as_array().unwrap().clone()).to_string()
}

/// Redis's configuration as `CONFIG GET` says (its keys, in order).
fn redis_config() -> Vec<String> {
    ["dir", "bind", "save", "appendonly", "logfile", "port"]
        .iter()
        .map(|key| {
            let o = std::process::Command::new("redis-cli")
                .args(["-p", "6379", "config", "get", key])
                .output()
                .expect("redis-cli");
            String::from_utf8_lossy(&o.stdout).to_string()
        })
        .collect()
}

#[test]
fn an_unplanned_redis_kill_loses_what_redis_zset_held_and_the_fallback_scan_rescues_it() {
    let services = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services.sh");
    let scenario = format!(
        r#"
name = "tiny-backlog-kill"
seed = 7
warmup = "500ms"
duration = "2s"
drain = "1s"
rate = 40.0
instances = 2

[[timeouts]]
after = "500ms"

[backlog]
pending = [0, 2000]
after = "1h"
restart-redis = ["sh", "-c", "d=$(redis-cli -p 6379 config get dir | tail -n 1); redis-cli -p 6379 save >/dev/null && redis-cli -p 6379 shutdown nosave; {services} redis >/dev/null && rm -f \"$d/dump.rdb\""]
kill-redis = {kill}
recovery-limit = "15s"
"#,
        kill = preset_command("kill-redis")
    );
    let config_before = redis_config();
    let out = common::Scratch::new();
    let dir = sweep(&scenario, "redis-zset,redis-zset+fallback", out.path(), &[]);
    // Redis is back, with the configuration it had (no persistence).
    assert_eq!(redis_config(), config_before);
    let result = read_json(&dir.join("sweep.json"));
    for name in ["redis-zset", "redis-zset+fallback"] {
        for step in strategy(&result, name)["steps"].as_array().unwrap() {
            let pending = step["pending"].as_u64().unwrap();
            let recovery = step["backlog"]["recovery"].as_array().unwrap();
            let whats: Vec<(&str, &str)> = recovery
                .iter()
                .map(|r| (r["what"].as_str().unwrap(), r["kind"].as_str().unwrap()))
                .collect();
            assert_eq!(
                whats,
                [
                    ("instances", "planned"),
                    ("redis", "planned"),
                    ("redis-sigkill", "unplanned")
                ],
                "{name} at {pending}"
            );
            // The planned restart saved what Redis held: every order in
            // flight through it was cancelled by the strategy itself.
            let planned = &recovery[1];
            let f = &planned["in_flight"];
            assert_eq!(f["cancelled"], f["orders"], "{name}: {planned:#}");
            assert_eq!(f["by_fallback"], 0, "{name}: {planned:#}");
            assert!(planned["cancelling_again_s"].is_f64(), "{planned:#}");
            let killed = &recovery[2];
            let f = &killed["in_flight"];
            let orders = f["orders"].as_u64().unwrap();
            assert!(orders >= 1, "{killed:#}");
            if name == "redis-zset" {
                // Nothing saved: the schedule is gone, and no scan finds
                // the orders it held. No recovery, however fast Redis was.
                assert_eq!(f["cancelled"], 0, "{killed:#}");
                assert!(killed["cancelling_again_s"].is_null(), "{killed:#}");
                assert!(
                    killed["notes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|n| n.as_str().unwrap().contains("never cancelled")),
                    "{killed:#}"
                );
                if pending > 0 {
                    let members = killed["held_after"]["redis_members"].as_u64().unwrap();
                    assert!(members < pending, "the kill kept the backlog: {killed:#}");
                }
            } else {
                // The fallback scan cancels what Redis lost, late.
                assert_eq!(f["cancelled"], orders, "{killed:#}");
                assert_eq!(f["by_fallback"], orders, "{killed:#}");
                assert!(f["max_late_ms"].as_f64().unwrap() > 0.0, "{killed:#}");
                assert!(killed["cancelling_again_s"].is_f64(), "{killed:#}");
            }
        }
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let restarts = report
        .split("### Restarts: planned beside unplanned")
        .nth(1)
        .unwrap_or_else(|| panic!("no restarts table: {report}"));
    let row = |name: &str| {
        restarts
            .lines()
            .find(|l| l.starts_with(&format!("| {name} | 2000 | redis |")))
            .unwrap_or_else(|| panic!("no {name} row: {restarts}"))
            .to_string()
    };
    let plain = row("redis-zset");
    let cells: Vec<&str> = plain.split(" | ").collect();
    assert!(!cells[3].contains("not recovered"), "planned: {plain}");
    assert!(cells[4].contains("**not recovered**"), "unplanned: {plain}");
    let rescued = row("redis-zset+fallback");
    assert!(
        rescued.contains("cancelled only by the fallback scan")
            && !rescued.contains("not recovered"),
        "{rescued}"
    );
    // Bytes per pending order, net of the step of 0, each with its floor.
    let bytes = report
        .split("### Bytes per pending order")
        .nth(1)
        .unwrap_or_else(|| panic!("no bytes table: {report}"));
    assert!(bytes.contains("Noise floors"), "{bytes}");
    assert!(
        bytes
            .lines()
            .filter(|l| l.starts_with("| redis-zset"))
            .all(|l| l.contains("net of the step of 0") && (l.contains(" ± ") || l.contains("≈ 0"))),
        "{bytes}"
    );
}

/// The broker SIGKILLed mid-backlog (the preset's `kill-rabbitmq`): the
/// record says unplanned, the broker serves again with its plugins, and
/// each strategy's orders in flight through the kill are accounted for:
/// the fallback scan cancels every one, and the plain strategy either
/// cancels every one (its queues kept them) or reads "not recovered",
/// never a recovery time with an order lost.
#[test]
fn an_unplanned_broker_kill_is_recovered_only_where_every_order_in_flight_is_cancelled() {
    let scenario = format!(
        r#"
name = "tiny-backlog-broker-kill"
seed = 7
warmup = "500ms"
duration = "2s"
drain = "1s"
rate = 40.0
instances = 2

[[timeouts]]
after = "500ms"

[backlog]
pending = [0, 500]
after = "1h"
restart-rabbitmq = {restart}
kill-rabbitmq = {kill}
recovery-limit = "30s"
"#,
        restart = preset_command("restart-rabbitmq"),
        kill = preset_command("kill-rabbitmq")
    );
    let out = common::Scratch::new();
    let dir = sweep(&scenario, "rabbit-ttl,rabbit-ttl+fallback", out.path(), &[]);
    // The broker is back with the delayed-message plugin the other tests
    // need (its enabled-plugins file survives the kill).
    let enabled = std::process::Command::new("rabbitmq-plugins")
        .args(["is_enabled", "delaybench_delayed_exchange"])
        .status()
        .expect("rabbitmq-plugins");
    assert!(enabled.success(), "the plugin is off after the kill");
    let result = read_json(&dir.join("sweep.json"));
    for name in ["rabbit-ttl", "rabbit-ttl+fallback"] {
        for step in strategy(&result, name)["steps"].as_array().unwrap() {
            let pending = step["pending"].as_u64().unwrap();
            let recovery = step["backlog"]["recovery"].as_array().unwrap();
            let whats: Vec<(&str, &str)> = recovery
                .iter()
                .map(|r| (r["what"].as_str().unwrap(), r["kind"].as_str().unwrap()))
                .collect();
            assert_eq!(
                whats,
                [
                    ("instances", "planned"),
                    ("rabbitmq", "planned"),
                    ("rabbitmq-sigkill", "unplanned")
                ],
                "{name} at {pending}"
            );
            let killed = &recovery[2];
            let f = &killed["in_flight"];
            let orders = f["orders"].as_u64().unwrap();
            let cancelled = f["cancelled"].as_u64().unwrap();
            assert!(orders >= 1, "{killed:#}");
            assert_eq!(
                cancelled == orders,
                killed["cancelling_again_s"].is_f64(),
                "a recovery time only where every order in flight was cancelled: {killed:#}"
            );
            if name == "rabbit-ttl+fallback" {
                assert_eq!(
                    cancelled, orders,
                    "the scan rescues what the broker lost: {killed:#}"
                );
            }
        }
    }
}
