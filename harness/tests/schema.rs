//! The JSON Schemas in `schema/` (version 1) against the files they
//! describe: every committed `run.json`, `summary.json` and `sweep.json`
//! under `results/`, and a run made now, whose files say
//! `"schema_version": 1`. A file with a contract key removed or of the
//! wrong type is refused, so the check can fail.

mod common;

use common::{delaybench, run_dir_of, stderr};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator(name: &str) -> jsonschema::Validator {
    let schema = read(&root().join(format!("schema/{name}.schema.json")));
    jsonschema::meta::validate(&schema).unwrap_or_else(|e| panic!("{name}: not a schema: {e}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Every file named `name` under `dir`.
fn files(dir: &Path, name: &str, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, name, found);
        } else if path.file_name().is_some_and(|n| n == name) {
            found.push(path);
        }
    }
}

#[test]
fn every_committed_results_file_follows_its_schema() {
    for (name, file) in [
        ("run", "run.json"),
        ("summary", "summary.json"),
        ("sweep", "sweep.json"),
    ] {
        let v = validator(name);
        let mut found = Vec::new();
        files(&root().join("results"), file, &mut found);
        assert!(found.len() >= 3, "{file}: {found:?}");
        for path in &found {
            let e = errors(&v, &read(path));
            assert!(e.is_empty(), "{}: {e:#?}", path.display());
        }
    }
}

#[test]
fn a_run_made_now_says_its_schema_version_and_follows_it() {
    let out = common::Scratch::new();
    let o = delaybench(&[
        "run",
        "-S",
        "db-scan",
        "--db",
        "sqlite://",
        "-o",
        out.path().to_str().unwrap(),
        "-d",
        "1s",
        "-w",
        "0s",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = run_dir_of(&o);
    for (name, path) in [
        ("run", run.join("run.json")),
        ("summary", run.join("db-scan/summary.json")),
    ] {
        let doc = read(&path);
        assert_eq!(doc["schema_version"], 1, "{}", path.display());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.trim_start().starts_with("{\n  \"schema_version\": 1,"),
            "the version comes first: {}",
            &text[..80.min(text.len())]
        );
        let e = errors(&validator(name), &doc);
        assert!(e.is_empty(), "{}: {e:#?}", path.display());
    }
}

#[test]
fn a_file_missing_a_contract_key_or_of_the_wrong_type_is_refused() {
    let v = validator("summary");
    let mut found = Vec::new();
    files(
        &root().join("results/reference"),
        "summary.json",
        &mut found,
    );
    let good = read(&found[0]);
    assert!(errors(&v, &good).is_empty());
    let mut no_anomalies = good.clone();
    no_anomalies.as_object_mut().unwrap().remove("anomalies");
    assert!(!errors(&v, &no_anomalies).is_empty());
    let mut negative = good.clone();
    negative["anomalies"]["missed_cancels"] = serde_json::json!(-1);
    assert!(!errors(&v, &negative).is_empty());
    let mut bad_status = good;
    bad_status["status"] = serde_json::json!("fine");
    assert!(!errors(&v, &bad_status).is_empty());
}
