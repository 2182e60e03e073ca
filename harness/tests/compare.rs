//! `delaybench compare` end to end, on run folders made here from JSON: a
//! copy of the committed quick reference's `run.json` and db-scan
//! `summary.json`, with the figures under test set by each test. No
//! service is needed.

mod common;

use common::{delaybench, stderr};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;

/// The committed reference quick run the fixtures start from (any run
/// folder would do: only its format matters, every compared figure is
/// set below).
fn reference() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/reference");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("-quick"))
                && p.join("db-scan/summary.json").exists()
        })
        .unwrap_or_else(|| panic!("no quick run in {}", dir.display()))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Writes a run folder `dir` holding db-scan alone: repeated 3 times with
/// `p90_us` as `(min, median, max)` of the repetitions, or, with `repeats`
/// false, a single run whose p90 is the median.
fn run_folder(dir: &Path, repeats: bool, p90_us: (f64, f64, f64)) -> PathBuf {
    let reference = reference();
    let mut info = read_json(&reference.join("run.json"));
    info["strategies"] = json!(["db-scan"]);
    info["repeat"] = json!(if repeats { 3 } else { 1 });
    let mut summary = read_json(&reference.join("db-scan/summary.json"));
    let (min, median, max) = p90_us;
    summary["lateness_us"]["count"] = json!(2_000);
    summary["lateness_us"]["p90"] = json!(median as u64);
    if repeats {
        summary["repeats"]["figures"]["p90"] = json!({"min": min, "median": median, "max": max});
    } else {
        summary["repeats"] = Value::Null;
    }
    std::fs::create_dir_all(dir.join("db-scan")).unwrap();
    std::fs::write(dir.join("run.json"), info.to_string()).unwrap();
    std::fs::write(dir.join("db-scan/summary.json"), summary.to_string()).unwrap();
    dir.to_path_buf()
}

fn compare(base: &Path, other: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["compare", base.to_str().unwrap(), other.to_str().unwrap()];
    args.extend(extra);
    delaybench(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The exit status `--fail-on-regression` documents for a regression.
const REGRESSION_EXIT: i32 = 3;

#[test]
fn the_table_has_a_p90_column_and_reads_the_repeats_median() {
    let root = tempfile::tempdir().unwrap();
    let base = run_folder(&root.path().join("a"), true, (190e3, 200e3, 210e3));
    let other = run_folder(&root.path().join("b"), true, (195e3, 205e3, 215e3));
    let o = compare(&base, &other, &["--fail-on-regression"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let header = text.lines().find(|l| l.starts_with("| strategy")).unwrap();
    let columns: Vec<&str> = header.split('|').map(str::trim).collect();
    assert_eq!(columns[2..5], ["p50 ms", "p90 ms", "p99 ms"], "{header}");
    let row = text.lines().find(|l| l.starts_with("| db-scan")).unwrap();
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(cells[3], "200.0 → 205.0 (×1.02) (within spread)", "{row}");
    assert!(
        text.contains("No figure got worse beyond the spread."),
        "{text}"
    );
}

#[test]
fn a_p90_beyond_the_spread_fails_only_with_the_flag() {
    let root = tempfile::tempdir().unwrap();
    let base = run_folder(&root.path().join("a"), true, (190e3, 200e3, 210e3));
    let worse = run_folder(&root.path().join("b"), true, (211e3, 230e3, 240e3));
    let o = compare(&base, &worse, &[]);
    assert!(
        o.status.success(),
        "the list is shown, the exit is 0: {}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("- db-scan: lateness p90 ms 200.0 → 230.0: the repetitions' min–max ranges do not overlap"),
        "{}",
        stdout(&o)
    );
    let o = compare(&base, &worse, &["--fail-on-regression"]);
    assert_eq!(o.status.code(), Some(REGRESSION_EXIT), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 figure(s) worse beyond the spread: db-scan lateness p90 ms"),
        "{}",
        stderr(&o)
    );
    // Better beyond the spread is no regression.
    let o = compare(&worse, &base, &["--fail-on-regression"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn single_runs_are_judged_by_the_threshold_the_user_sets() {
    let root = tempfile::tempdir().unwrap();
    let base = run_folder(&root.path().join("a"), false, (0.0, 200e3, 0.0));
    let other = run_folder(&root.path().join("b"), false, (0.0, 260e3, 0.0));
    // +30 %: over the default 25 %.
    let o = compare(&base, &other, &["--fail-on-regression"]);
    assert_eq!(o.status.code(), Some(REGRESSION_EXIT), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("more than 25 % up, with no spread to judge by"),
        "{}",
        stdout(&o)
    );
    let o = compare(
        &base,
        &other,
        &["--fail-on-regression", "--single-run-threshold", "50%"],
    );
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("more than 50 %"),
        "the note states the rule: {}",
        stdout(&o)
    );
    let o = compare(&base, &other, &["--single-run-threshold=-5"]);
    assert_eq!(o.status.code(), Some(2), "a usage error: {}", stderr(&o));
    assert!(stderr(&o).contains("is not a percentage"), "{}", stderr(&o));
}

#[test]
fn a_run_folder_and_a_sweep_folder_are_refused_by_kind() {
    let root = tempfile::tempdir().unwrap();
    let run = run_folder(&root.path().join("run"), true, (190e3, 200e3, 210e3));
    let sweep = |name: &str, axis: &str| {
        let dir = root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(run.join("run.json"), dir.join("run.json")).unwrap();
        let result = json!({"run_id": name, "axis": axis, "strategies": []});
        std::fs::write(dir.join("sweep.json"), result.to_string()).unwrap();
        dir
    };
    let (rates, backlogs) = (sweep("rates", "rate"), sweep("backlogs", "pending"));
    for (a, b, kinds) in [
        (&run, &rates, ["a run folder", "a sweep of rates"]),
        (&rates, &run, ["a sweep of rates", "a run folder"]),
        (
            &rates,
            &backlogs,
            ["a sweep of rates", "a sweep of backlogs"],
        ),
    ] {
        let o = compare(a, b, &["--fail-on-regression"]);
        assert_eq!(o.status.code(), Some(2), "a usage error: {}", stdout(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("({})", kinds[0])) && err.contains(&format!("({})", kinds[1])),
            "{err}"
        );
        assert!(!stdout(&o).contains("did not run"), "{}", stdout(&o));
    }
}

/// A new anomaly ends `compare` with 4, ahead of a regression's 3: a
/// script checking for broken invariants never reads it as a slowdown.
#[test]
fn a_new_anomaly_exits_4_even_with_a_regression() {
    let root = tempfile::tempdir().unwrap();
    let base = run_folder(&root.path().join("a"), false, (0.0, 200e3, 0.0));
    let other = run_folder(&root.path().join("b"), false, (0.0, 400e3, 0.0));
    let path = other.join("db-scan/summary.json");
    let mut summary = read_json(&path);
    summary["anomalies"]["missed_cancels"] = json!(2);
    std::fs::write(&path, summary.to_string()).unwrap();
    let o = compare(
        &base,
        &other,
        &[
            "--fail-on-regression",
            // An export that cannot be written does not hide them either.
            "--export-json",
            "/nonexistent-delaybench-dir/c.json",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("new anomalies in db-scan"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("also writing the export /nonexistent-delaybench-dir/c.json"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("0 → **2 (new)**"), "{}", stdout(&o));
}

/// `--export-csv` and `--export-json` set each figure of both runs side by
/// side with its ratio.
#[test]
fn the_comparison_exports_both_runs_figures_and_their_ratio() {
    let root = tempfile::tempdir().unwrap();
    let base = run_folder(&root.path().join("a"), false, (0.0, 200e3, 0.0));
    let other = run_folder(&root.path().join("b"), false, (0.0, 260e3, 0.0));
    let (csv, json) = (root.path().join("c.csv"), root.path().join("c.json"));
    let o = compare(
        &base,
        &other,
        &[
            "--export-csv",
            csv.to_str().unwrap(),
            "--export-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(csv).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(
        csv.starts_with("strategy,base_created,other_created,ratio_created,"),
        "{csv}"
    );
    let doc = read_json(&json);
    let row = &doc["rows"][0];
    assert_eq!(row["strategy"], "db-scan");
    assert_eq!(row["base_p90_us"], 200e3);
    assert_eq!(row["other_p90_us"], 260e3);
    assert!(
        (row["ratio_p90_us"].as_f64().unwrap() - 1.3).abs() < 1e-9,
        "{row}"
    );
}
