//! `compare` on run folders written here: the table, new anomalies,
//! missing strategies, setup warnings, refused folder kinds, and cells
//! flagged beyond the spread.

use super::*;
use crate::model::run_info::Machine;
use crate::model::summary::{DatabaseInfo, Spread};
use crate::scenario::{Scenario, QUICK};
use strategies::checker::Anomaly;

fn write_run(dir: &Path, seed: u64, runs: &[(&str, u64, u64)]) {
    let mut scenario = Scenario::parse(QUICK, "quick").unwrap();
    scenario.seed = seed;
    let info = RunInfo {
        run_id: dir.file_name().unwrap().to_string_lossy().into(),
        started_at: String::new(),
        delaybench_version: String::new(),
        git_commit: String::new(),
        build_profile: None,
        command: Vec::new(),
        repeat: 1,
        scenario_source: String::new(),
        scenario,
        seed,
        strategies: runs.iter().map(|r| r.0.to_string()).collect(),
        database_kind: "postgres".into(),
        database_url: String::new(),
        database_version: "15".into(),
        services: Default::default(),
        plugin: None,
        machine: Machine::default(),
    };
    std::fs::create_dir_all(dir).unwrap();
    info.write(dir).unwrap();
    for &(name, p99_us, missed) in runs {
        let mut s = Summary::not_run(
            name.parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        s.lateness_us.p99 = p99_us;
        s.lateness_us.count = 2_000;
        s.anomalies.set(Anomaly::MissedCancels, missed);
        s.cost.statements_per_cancel = Some(5.0);
        s.write(&dir.join(name)).unwrap();
    }
}

#[test]
fn ratios_new_anomalies_and_missing_strategies_are_shown() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    write_run(
        &a,
        42,
        &[("db-scan", 240_000, 0), ("timing-wheel", 2_000, 0)],
    );
    write_run(&b, 42, &[("db-scan", 120_000, 0), ("redis-zset", 2_000, 3)]);
    let comparison = compare(&a, &b, CompareOptions::default()).unwrap();
    let text = &comparison.text;
    assert!(!text.contains("warning"), "{text}");
    assert!(
        text.contains("| db-scan | 0.0 → 0.0 | 0.0 → 0.0 | 240.0 → 120.0 (×0.50) |"),
        "{text}"
    );
    assert!(text.contains("5.0 → 5.0 (×1.00)"), "{text}");
    assert!(
        text.contains("| timing-wheel | base ran, other did not run |"),
        "{text}"
    );
    assert!(
        text.contains("| redis-zset | base did not run, other ran |"),
        "{text}"
    );

    write_run(&b.join("x"), 7, &[("db-scan", 1_000, 2)]);
    assert!(comparison.new_anomalies.is_empty());
    let comparison = compare(&a, &b.join("x"), CompareOptions::default()).unwrap();
    let text = &comparison.text;
    assert!(text.contains("the scenarios differ"), "{text}");
    assert!(
        text.contains("in `seed`:"),
        "the differing field is named: {text}"
    );
    assert!(text.contains("0 → **2 (new)**"), "{text}");
    assert_eq!(comparison.new_anomalies, ["db-scan"]);
    // Single runs: a rise from no anomaly counts as worse, the lower
    // p99 does not.
    assert_eq!(
        comparison
            .regressions
            .iter()
            .map(|r| r.figure)
            .collect::<Vec<_>>(),
        ["anomalies"]
    );
}

#[test]
fn folders_of_different_kinds_are_refused_with_both_kinds_named() {
    let root = tempfile::tempdir().unwrap();
    let run = root.path().join("run");
    write_run(&run, 42, &[("db-scan", 1_000, 0)]);
    let sweep = |name: &str, axis: &str| {
        let dir = root.path().join(name);
        write_run(&dir, 42, &[]);
        let json = format!("{{\"run_id\": \"{name}\", \"axis\": \"{axis}\"}}");
        std::fs::write(dir.join("sweep.json"), json).unwrap();
        dir
    };
    let (rates, backlogs) = (sweep("rates", "rate"), sweep("backlogs", "pending"));
    let refused = |a: &Path, b: &Path| {
        compare(a, b, CompareOptions::default())
            .unwrap_err()
            .to_string()
    };
    let msg = refused(&run, &rates);
    assert!(
        msg.contains("(a run folder)") && msg.contains("(a sweep of rates)"),
        "{msg}"
    );
    let msg = refused(&rates, &backlogs);
    assert!(
        msg.contains("(a sweep of rates)") && msg.contains("(a sweep of backlogs)"),
        "{msg}"
    );
    let msg = refused(&rates, &rates);
    assert!(msg.contains("both a sweep of rates"), "{msg}");
    assert!(compare(&run, &run, CompareOptions::default()).is_ok());
}

#[test]
fn only_differences_beyond_the_spread_are_flagged() {
    let with_p99 = |min: f64, median: f64, max: f64| {
        let mut s = Summary::not_run(
            "db-scan".parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        let mut r = crate::model::summary::Repeats {
            count: 3,
            ..Default::default()
        };
        r.figures.insert("p99".into(), Spread { median, min, max });
        s.repeats = Some(r);
        // The pooled p99 is the summary's own (here the median).
        s.lateness_us.count = 3_000;
        s.lateness_us.p99 = median as u64;
        s
    };
    let base = with_p99(90_000.0, 100_000.0, 110_000.0);
    let overlapping = with_p99(105_000.0, 120_000.0, 130_000.0);
    let apart = with_p99(150_000.0, 160_000.0, 170_000.0);
    let cell = figure_cell(&base, &overlapping, "p99", true);
    assert_eq!(cell, "100.0 → 120.0 (×1.20) (within spread)");
    let cell = figure_cell(&base, &apart, "p99", true);
    assert_eq!(cell, "100.0 → 160.0 (×1.60) **beyond spread**");
    // Two repetitions a side never separate, however far apart.
    let two = |mut s: Summary| {
        s.repeats.as_mut().unwrap().count = 2;
        s
    };
    let cell = figure_cell(&two(base.clone()), &two(apart.clone()), "p99", true);
    assert_eq!(
        cell,
        "100.0 → 160.0 (×1.60) (ranges apart, but 2 and 2 repetitions are too few to separate \
         them (by chance alone 1 in 3))"
    );
}
