//! `[network]` end to end, on the real PostgreSQL: a run under
//! `--network cross-zone` holds the round trip on the order service's and
//! the instances' links, says so in its report and `summary.json`, stays
//! correct, and its backlog's recovery (instances started again after the
//! run, through the same proxies) still cancels.

mod common;

use common::{delaybench, pg, run_dir_of, stderr};

#[test]
fn a_cross_zone_run_holds_its_links_and_recovers_through_them() {
    let scratch = common::Scratch::new();
    let scenario = scratch.path().join("backlog-network.toml");
    let preset = delaybench(&["scenario", "show", "backlog"]);
    assert!(preset.status.success(), "{}", stderr(&preset));
    let text = String::from_utf8(preset.stdout)
        .unwrap()
        .replace("pending = [0, 10000, 100000]", "pending = [500]")
        .replace("duration = \"6s\"", "duration = \"3s\"");
    assert!(
        text.contains("pending = [500]"),
        "the backlog preset changed: {text}"
    );
    std::fs::write(&scenario, text).unwrap();
    let out = scratch.path().join("results");
    let o = delaybench(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--network",
        "cross-zone",
        "--strategies",
        "timing-wheel",
        "--db",
        &pg(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = run_dir_of(&o);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("timing-wheel/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["status"], "ok", "{summary:#}");
    for (anomaly, n) in summary["anomalies"].as_object().unwrap() {
        assert_eq!(n, 0, "{anomaly}");
    }
    // Both sides of the database link were held, at the preset's round trip.
    let links = summary["network"].as_array().expect("network records");
    let sides: Vec<(&str, &str)> = links
        .iter()
        .map(|l| (l["side"].as_str().unwrap(), l["target"].as_str().unwrap()))
        .collect();
    assert!(sides.contains(&("order service", "database")), "{sides:?}");
    assert!(sides.contains(&("instances", "database")), "{sides:?}");
    for link in links {
        assert_eq!(link["link"]["rtt"], "2ms", "{link}");
        assert!(link["chunks"].as_u64().unwrap() > 0, "{link}");
    }
    // The recovery's instances reach the database through the proxies too.
    let recovery = &summary["backlog"]["recovery"][0];
    assert!(recovery["probes"].as_u64().unwrap() > 0, "{recovery}");
    assert_eq!(
        recovery["probes_cancelled"], recovery["probes"],
        "{recovery}"
    );
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains("Network ([network]): cross-zone: every service rtt 2 ms ± 0.2 ms"),
        "{report}"
    );
    assert!(
        report.contains("the instances' link to database: rtt 2 ms"),
        "{report}"
    );
}
