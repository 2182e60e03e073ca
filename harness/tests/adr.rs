//! `delaybench adr` on the committed reference folders: every number in
//! the draft links to a JSON file, and the link's title names the key and
//! raw value; this test reads every one back and checks the value and the
//! number shown.

mod common;

use common::delaybench;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn reference_folders() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/reference");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("run.json").exists())
        .collect();
    dirs.sort();
    dirs
}

/// Follows `a.b[field=value].c`; a last segment `*` sums an object's numbers.
fn lookup(json: &Value, key: &str) -> Value {
    let mut at = json.clone();
    for seg in key.split('.') {
        if seg == "*" {
            let sum: f64 = at
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_f64().unwrap())
                .sum();
            return Value::from(sum);
        }
        let (name, select) = match seg.split_once('[') {
            Some((n, rest)) => (n, Some(rest.trim_end_matches(']'))),
            None => (seg, None),
        };
        at = at
            .get(name)
            .unwrap_or_else(|| panic!("no `{name}` in {key}"))
            .clone();
        if let Some(select) = select {
            let (field, want) = select.split_once('=').unwrap();
            at = at
                .as_array()
                .unwrap()
                .iter()
                .find(|item| match &item[field] {
                    Value::String(s) => s == want,
                    Value::Number(n) => n.as_f64() == want.parse::<f64>().ok(),
                    _ => false,
                })
                .unwrap_or_else(|| panic!("no element with {field}={want} in {key}"))
                .clone();
        }
    }
    at
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap(),
        other => panic!("not a number: {other}"),
    }
}

/// The first number in `text` that starts a word ("p99 9.7 ms" -> 9.7), and
/// how many decimals it was printed with.
fn shown(text: &str) -> (f64, usize) {
    let word = text
        .split([' ', '(', '['])
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or_else(|| panic!("no number in {text}"));
    let digits: String = word
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let decimals = digits.split_once('.').map(|(_, d)| d.len()).unwrap_or(0);
    (digits.parse().unwrap(), decimals)
}

#[test]
fn every_number_of_the_draft_matches_the_summaries_it_links() {
    let out = common::Scratch::new();
    let file = out.path().join("decision/adr.md");
    let dirs = reference_folders();
    assert!(dirs.len() >= 4, "{dirs:?}");
    let mut args = vec!["adr".to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend([
        "--sla".into(),
        "p99<=2s,missed=0,paid-after-deadline<=1%,max-rate>=500".into(),
        "--out".into(),
        file.display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = delaybench(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let draft = std::fs::read_to_string(&file).unwrap();
    for section in [
        "## Context",
        "## Options considered",
        "## Measured consequences",
        "## Which options meet the SLA",
        "## Recommendation",
    ] {
        assert!(draft.contains(section), "{section} missing");
    }
    // Teaching variants and the ceiling are no options.
    assert!(!draft.contains("**db-scan-noindex**") && !draft.contains("**ceiling**"));
    let mut checked = 0;
    let mut rest = draft.as_str();
    while let Some(open) = rest.find("](") {
        let text_start = rest[..open].rfind('[').unwrap();
        let text = &rest[text_start + 1..open];
        let close = rest[open..].find(')').unwrap() + open;
        let target = &rest[open + 2..close];
        rest = &rest[close..];
        let Some((path, title)) = target.split_once(" \"") else {
            continue; // a link to a folder or a section, no figure
        };
        let title = title.trim_end_matches('"');
        let path = file.parent().unwrap().join(path.replace("%20", " "));
        let json: Value = serde_json::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
        .unwrap();
        let mut raws = Vec::new();
        for pair in title.split("; ") {
            let (key, raw) = pair.split_once(" = ").unwrap();
            let value = lookup(&json, key);
            let raw: f64 = raw.parse().unwrap_or_else(|_| panic!("{pair}"));
            assert!(
                (number(&value) - raw).abs() <= 1e-9 * raw.abs().max(1.0),
                "{text}: {pair} but {} holds {value}",
                path.display()
            );
            raws.push(raw);
        }
        let expected = if text.contains('%') {
            raws[0] / raws[1] * 100.0
        } else if text.contains(" ms") {
            raws[0] / 1000.0
        } else {
            raws[0]
        };
        let (value, decimals) = shown(text);
        let tolerance = 0.5 * 10f64.powi(-(decimals as i32)) + 1e-9;
        assert!(
            (value - expected).abs() <= tolerance,
            "`{text}` shows {value}, the file holds {expected} ({title})"
        );
        checked += 1;
    }
    assert!(checked > 100, "only {checked} figures checked");
    // A recommendation, resting on figures.
    let recommendation = draft.split("## Recommendation").nth(1).unwrap();
    assert!(
        recommendation.contains("**Choose ") && recommendation.contains("summary.json \""),
        "{recommendation}"
    );
}

#[test]
fn what_no_run_measured_reads_not_measured_with_the_preset_that_would() {
    let out = common::Scratch::new();
    let file = out.path().join("adr.md");
    let quick = reference_folders()
        .into_iter()
        .find(|d| d.to_string_lossy().ends_with("-quick"))
        .unwrap();
    let o = delaybench(&[
        "adr",
        quick.to_str().unwrap(),
        "--sla",
        "p50<=1s,max-rate>=500",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let draft = std::fs::read_to_string(&file).unwrap();
    assert!(draft.contains("not measured (no rate sweep ran redis-zset: `delaybench sweep --strategies redis-zset`)"), "{draft}");
    assert!(
        draft.contains("not measured (`--scenario chaos`)"),
        "{draft}"
    );
    assert!(
        draft.contains("No option is shown to meet every term yet"),
        "{draft}"
    );
    let o = delaybench(&[
        "adr",
        quick.to_str().unwrap(),
        "--sla",
        "latency<2s",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown metric `latency`"));
}
