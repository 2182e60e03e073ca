//! End-to-end test of a deadline storm on the real services: every
//! strategy drains 2 000 orders due in one instant during a small load,
//! with no anomaly, and the report says how long it took.

mod common;

use common::{delaybench, pg, run_dir_of};
use serde_json::Value;

const STORM: &str = r#"
name = "tiny-storm"
seed = 11
warmup = "500ms"
duration = "3s"
drain = "1s"
rate = 40.0
instances = 2

[[timeouts]]
after = "500ms"

[stock]
skus = 10
initial = 100000

[strategies.db-scan]
interval = "50ms"

[storm]
orders = [2000]
at = "2s"
"#;

const STRATEGIES: [&str; 6] = [
    "db-scan",
    "db-timer",
    "timing-wheel",
    "redis-zset",
    "rabbit-ttl",
    "rabbit-delayed",
];

/// Runs `delaybench <command>` on `scenario` (written into a fresh scratch
/// folder, which is also `--out`) for `strategies` on PostgreSQL.
fn on_scenario(
    command: &str,
    scenario: &str,
    strategies: &[&str],
) -> (common::Scratch, std::process::Output) {
    let out = common::Scratch::new();
    let file = out.path().join("scenario.toml");
    std::fs::write(&file, scenario).unwrap();
    let o = delaybench(&[
        command,
        "--scenario",
        file.to_str().unwrap(),
        "--strategies",
        &strategies.join(","),
        "--db",
        &pg(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    (out, o)
}

#[test]
fn every_strategy_drains_a_tiny_storm_and_the_report_says_how_fast() {
    let (_out, o) = on_scenario("run", STORM, &STRATEGIES);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let dir = run_dir_of(&o);
    for name in STRATEGIES {
        let path = dir.join(name).join("summary.json");
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(s["status"], "ok", "{name}: {}", s["reason"]);
        let anomalies: u64 = s["anomalies"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(anomalies, 0, "{name}: {:#}", s["anomalies"]);
        let storm = &s["storm"];
        assert_eq!(storm["orders"], 2000, "{name}");
        assert_eq!(storm["cancelled"], 2000, "{name}: {storm:#}");
        assert_eq!(storm["pending_left"], 0, "{name}");
        assert_eq!(storm["handoff_errors"], 0, "{name}");
        assert_eq!(storm["lateness_us"]["count"], 2000, "{name}");
        let drain = storm["drain_s"].as_f64().unwrap();
        let rate = storm["cancels_per_s"].as_f64().unwrap();
        assert!(
            drain > 0.0 && (rate * drain - 2000.0).abs() < 1.0,
            "{name}: {storm:#}"
        );
        // The instant fell inside the measured load, with regular orders
        // falling due before it.
        let due = storm["due_ms"].as_u64().unwrap();
        // Printed whole: its insert_s and handoff_s say which part of the
        // preparation overran its lead (seen once in CI, not diagnosed).
        assert!(
            (500..=2000).contains(&due),
            "{name}: due at {due} ms: {storm:#}"
        );
        assert!(
            storm["regular_before_us"]["count"].as_u64().unwrap() > 0,
            "{name}"
        );
        assert_eq!(storm["planned_ms"], 2000, "{name}");
        assert!(storm["held"]["worker_rss_kib"].as_array().unwrap().len() == 2);
        // Each storm order reaches one instance, through `schedule`, as a
        // live order does: none is fired once per instance (a wheel that
        // reloaded the storm at its start would try each twice).
        let store = &s["cost"]["store"];
        let attempts = store["cancel_attempts"].as_f64().unwrap();
        let cancelled = store["cancelled"].as_f64().unwrap();
        assert!(
            attempts < 1.5 * cancelled,
            "{name}: {attempts} cancel attempts for {cancelled} cancels"
        );
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let section = report
        .split("## Deadline storm")
        .nth(1)
        .expect("the report has a storm section");
    for name in STRATEGIES {
        assert!(
            section.contains(&format!("| {name} | 2000 at ")),
            "{name}: {section}"
        );
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let section = html
        .split("Deadline storm")
        .nth(1)
        .expect("the page has a storm section");
    let section = section.split("</table>").take(2).collect::<String>();
    assert!(
        !section.contains("**"),
        "markdown emphasis in the page: {section}"
    );
}

#[test]
fn a_run_with_several_storm_sizes_and_a_sweep_of_storm_and_backlog_are_refused_naming_the_fields() {
    let out = common::Scratch::new();
    let file = out.path().join("storms.toml");
    std::fs::write(
        &file,
        STORM.replace("orders = [2000]", "orders = [2000, 4000]"),
    )
    .unwrap();
    let o = delaybench(&[
        "run",
        "--scenario",
        file.to_str().unwrap(),
        "--strategies",
        "db-scan",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let stderr = common::stderr(&o);
    assert!(
        !o.status.success() && stderr.contains("storm.orders") && stderr.contains("sweep"),
        "{stderr}"
    );
    // A sweep varies one thing: a storm and a backlog together are refused.
    let file = out.path().join("storm.toml");
    std::fs::write(
        &file,
        format!("{STORM}\n[backlog]\npending = [0, 100]\nafter = \"1h\"\n"),
    )
    .unwrap();
    let o = delaybench(&[
        "sweep",
        "--scenario",
        file.to_str().unwrap(),
        "--strategies",
        "db-scan",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let stderr = common::stderr(&o);
    assert!(
        !o.status.success() && stderr.contains("`storm`") && stderr.contains("`backlog`"),
        "{stderr}"
    );
    // Nothing was left behind: no run folder for either.
    assert!(std::fs::read_dir(out.path()).unwrap().all(|e| {
        let e = e.unwrap();
        e.file_type().unwrap().is_file()
    }));
}

#[test]
fn a_storm_sweep_runs_one_step_per_size_and_reports_each_drain() {
    let strategies = ["db-scan", "redis-zset"];
    let (_out, o) = on_scenario(
        "sweep",
        &STORM.replace("orders = [2000]", "orders = [300, 1200]"),
        &strategies,
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let dir = run_dir_of(&o);
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(result["axis"], "storm");
    let swept: Vec<&str> = result["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["strategy"].as_str().unwrap())
        .collect();
    // No ceiling in a storm sweep: it measures drains, not a rate to divide.
    assert_eq!(swept, strategies);
    for s in result["strategies"].as_array().unwrap() {
        let name = s["strategy"].as_str().unwrap();
        let steps = s["steps"].as_array().unwrap();
        let sizes: Vec<u64> = steps
            .iter()
            .map(|st| st["storm_orders"].as_u64().unwrap())
            .collect();
        assert_eq!(sizes, [300, 1200], "{name}");
        for (st, n) in steps.iter().zip([300u64, 1200]) {
            let storm = &st["storm"];
            assert_eq!(storm["orders"], n, "{name}");
            assert_eq!(storm["cancelled"], n, "{name}: {storm:#}");
            assert_eq!(st["anomalies"], 0, "{name}: {st:#}");
            assert!(st["folder"]
                .as_str()
                .unwrap()
                .ends_with(&format!("storm-{n}")));
        }
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let section = report
        .split("## Draining a deadline storm, by its size")
        .nth(1)
        .unwrap_or_else(|| panic!("no storm table: {report}"));
    for name in strategies {
        for n in [300, 1200] {
            assert!(
                section
                    .lines()
                    .any(|l| l.starts_with(&format!("| {name} | "))
                        && l.contains(&format!("| {n} at "))),
                "{name} {n}: {section}"
            );
        }
    }
    common::assert_plot_files(&dir, &["storm-drain", "storm"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("cancels/s"), "{stdout}");
}
