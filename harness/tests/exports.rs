//! `--export-csv`, `--export-json` and `--export-markdown` on copies of
//! committed reference folders (`delaybench report` re-renders a folder
//! and exports its table; `run` and `sweep` take the same flags, and
//! `cli.rs` runs one with them): every format parses, holds a row per
//! strategy (per step for a sweep) and the numbers of summary.json in
//! their own units. No service is needed.

mod common;

use common::{delaybench, stderr};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn reference(suffix: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/reference");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(suffix))
        })
        .collect();
    found.sort();
    found
        .pop()
        .unwrap_or_else(|| panic!("no *{suffix} in {}", dir.display()))
}

/// A copy of `from` in `to` (report writes into the folder it reads).
fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn exported(folder: &Path, out: &Path) -> (String, Value, String) {
    let (csv, json, md) = (out.join("t.csv"), out.join("t.json"), out.join("t.md"));
    let o = delaybench(&[
        "report",
        folder.to_str().unwrap(),
        "--export-csv",
        csv.to_str().unwrap(),
        "--export-json",
        json.to_str().unwrap(),
        "--export-markdown",
        md.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    (
        std::fs::read_to_string(csv).unwrap(),
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap(),
        std::fs::read_to_string(md).unwrap(),
    )
}

#[test]
fn a_runs_table_exports_its_figures_in_every_format() {
    let scratch = tempfile::tempdir().unwrap();
    let run = scratch.path().join("quick");
    copy(&reference("-quick"), &run);
    let (csv, json, md) = exported(&run, scratch.path());
    let strategies: Vec<String> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("summary.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with("-unmeasured"))
        .collect();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + strategies.len(), "{csv}");
    assert!(
        lines[0].starts_with("strategy,status,reason,created,"),
        "{}",
        lines[0]
    );
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), strategies.len());
    assert_eq!(md.lines().count(), 2 + strategies.len(), "{md}");
    // The numbers are summary.json's, unrounded, lateness in µs.
    for row in rows {
        let name = row["strategy"].as_str().unwrap();
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(run.join(name).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(row["status"], summary["status"], "{name}");
        assert_eq!(
            row["created"],
            summary["orders"]["created"].as_f64().unwrap(),
            "{name}"
        );
        if summary["repeats"].is_null() {
            assert_eq!(
                row["p99_us"],
                summary["lateness_us"]["p99"].as_f64().unwrap(),
                "{name}"
            );
        } else {
            let spread = &summary["repeats"]["figures"]["p99"];
            if !spread.is_null() {
                assert!(
                    row["p99_us_min"].as_f64() <= row["p99_us_max"].as_f64(),
                    "{name}"
                );
            }
        }
        let csv_row = lines
            .iter()
            .find(|l| l.starts_with(&format!("{name},")))
            .unwrap();
        assert!(
            !csv_row.contains(" ms"),
            "units stay out of the cells: {csv_row}"
        );
    }
}

#[test]
fn a_sweeps_table_exports_a_row_per_step() {
    let scratch = tempfile::tempdir().unwrap();
    let sweep = scratch.path().join("sweep");
    copy(&reference("-sweep"), &sweep);
    let (csv, json, _) = exported(&sweep, scratch.path());
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(sweep.join("sweep.json")).unwrap()).unwrap();
    let steps: usize = result["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["steps"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(steps > 5, "{steps}");
    assert_eq!(csv.lines().count(), 1 + steps, "{csv}");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), steps);
    assert!(rows.iter().any(|r| r["holds"] == true) && rows.iter().any(|r| r["holds"] == false));
    assert!(rows
        .iter()
        .all(|r| r["rate"].as_f64().is_some_and(|v| v > 0.0)));
}

/// `report DIR --out OUT` writes the reports into OUT, with a copy of what
/// they link, and leaves DIR (here a committed reference folder) as it was.
#[test]
fn report_out_leaves_the_run_folder_as_it_was() {
    let scratch = tempfile::tempdir().unwrap();
    let committed = reference("-quick");
    let before = std::fs::metadata(committed.join("report.md"))
        .unwrap()
        .modified()
        .unwrap();
    let out = scratch.path().join("rendered");
    let o = delaybench(&[
        "report",
        committed.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for file in [
        "report.md",
        "report.html",
        "run.json",
        "db-scan/summary.json",
    ] {
        assert!(out.join(file).exists(), "{file}");
    }
    assert!(out.join("plots").read_dir().unwrap().count() > 0);
    let after = std::fs::metadata(committed.join("report.md"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "the committed report was rewritten");
    // Its own folder as --out is refused (leave --out out for that).
    let o = delaybench(&[
        "report",
        committed.to_str().unwrap(),
        "--out",
        committed.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("the run folder itself"),
        "{}",
        stderr(&o)
    );
    // And so is a folder inside it (the copy would copy itself), given by a
    // relative path through `..`; nothing is made there.
    let inside = out.join("db-scan/../rendered-again");
    let o = delaybench(&[
        "report",
        out.to_str().unwrap(),
        "--out",
        inside.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("inside the run folder"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("rendered-again").exists());
}
