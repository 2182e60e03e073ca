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

#[test]
fn every_strategy_drains_a_tiny_storm_and_the_report_says_how_fast() {
    let out = common::Scratch::new();
    let file = out.path().join("storm.toml");
    std::fs::write(&file, STORM).unwrap();
    let o = delaybench(&[
        "run",
        "--scenario",
        file.to_str().unwrap(),
        "--strategies",
        &STRATEGIES.join(","),
        "--db",
        &pg(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
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
        assert!((500..=2000).contains(&due), "{name}: due at {due} ms");
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
fn several_storm_sizes_and_a_storm_sweep_are_refused_naming_the_field() {
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
        !o.status.success() && stderr.contains("storm.orders"),
        "{stderr}"
    );
    let file = out.path().join("storm.toml");
    std::fs::write(&file, STORM).unwrap();
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
        !o.status.success() && stderr.contains("field `storm`"),
        "{stderr}"
    );
    // Nothing was left behind: no run folder for either.
    assert!(std::fs::read_dir(out.path()).unwrap().all(|e| {
        let e = e.unwrap();
        e.file_type().unwrap().is_file()
    }));
}
