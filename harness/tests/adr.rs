//! `delaybench adr`: on the committed reference folders (read only), every
//! number in the draft and its evidence file links to a JSON file whose
//! key holds it, and the draft has the MADR form; on small fixture folders
//! the tests write, the rules of judgement: an option only from its own
//! runs, a fault that does not apply is never survived, SLA terms per
//! condition, lower bounds from lower percentiles, and a backlog restart
//! that lost a probe order is no recovery.

mod common;

use common::delaybench;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The reference set's run folders, `adr`'s input: all but the deadline
/// storm's, which `adr` refuses ([`a_storm_run_is_refused_by_name`]).
fn reference_folders() -> Vec<PathBuf> {
    let (storms, dirs): (Vec<PathBuf>, Vec<PathBuf>) = all_reference_folders()
        .into_iter()
        .partition(|d| is_storm(d));
    assert!(!storms.is_empty(), "the reference set has its storm entry");
    dirs
}

fn all_reference_folders() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/reference");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("run.json").exists())
        .collect();
    dirs.sort();
    dirs
}

fn is_storm(dir: &Path) -> bool {
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    !run["scenario"]["storm"].is_null()
}

/// A storm run's p99 is its drain: read as a normal run's it would fail
/// every option the storm ran and none it did not, so `adr` names it and
/// stops rather than judge on it; so too a sweep of storms (one check
/// serves both, before the folder is read as a run or a sweep).
#[test]
fn a_storm_run_is_refused_by_name() {
    let storm_run = all_reference_folders()
        .into_iter()
        .find(|d| is_storm(d))
        .expect("a storm run in the reference set");
    let storm_sweep =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/storm/20261205-185418-storm-sweep");
    assert!(storm_sweep.join("sweep.json").exists());
    for storm in [storm_run, storm_sweep] {
        let out = tempfile::tempdir().unwrap();
        let err = adr(
            std::slice::from_ref(&storm),
            REFERENCE_SLA,
            &out.path().join("adr.md"),
        )
        .unwrap_err();
        assert!(err.contains("is a deadline storm"), "{err}");
        assert!(err.contains(&storm.display().to_string()), "{err}");
    }
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

/// Reads back every figure link of the Markdown file `file` (a link with
/// a title) from the JSON it names, checks the key's value and the number
/// shown, and returns how many it checked.
fn check_figures(file: &Path) -> usize {
    let text = std::fs::read_to_string(file).unwrap();
    let mut checked = 0;
    let mut rest = text.as_str();
    while let Some(open) = rest.find("](") {
        let text_start = rest[..open].rfind('[').unwrap();
        let text = &rest[text_start + 1..open];
        let close = rest[open..].find(')').unwrap() + open;
        let target = &rest[open + 2..close];
        rest = &rest[close..];
        let Some((path, title)) = target.split_once(" \"") else {
            continue; // a link to a file or a section, no figure
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
    checked
}

/// Runs `delaybench adr` over `dirs`; returns the draft and its evidence
/// file's text, or the error output.
fn adr<P: AsRef<Path>>(dirs: &[P], sla: &str, out: &Path) -> Result<(String, String), String> {
    let mut args = vec!["adr".to_string()];
    args.extend(dirs.iter().map(|d| d.as_ref().display().to_string()));
    args.extend([
        "--sla".into(),
        sla.into(),
        "--out".into(),
        out.display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = delaybench(&args);
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    let evidence = out.with_file_name(format!(
        "{}-evidence.md",
        out.file_stem().unwrap().to_string_lossy()
    ));
    Ok((
        std::fs::read_to_string(out).unwrap(),
        std::fs::read_to_string(evidence).unwrap(),
    ))
}

/// The row of `option` in the first Markdown table of `text` after
/// `heading` that has one.
fn row<'a>(text: &'a str, heading: &str, option: &str) -> &'a str {
    let at = text
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading}: {text}"));
    text[at..]
        .lines()
        .find(|l| l.starts_with(&format!("| **{option}** |")))
        .unwrap_or_else(|| panic!("no row for {option} after {heading}: {text}"))
}

const REFERENCE_SLA: &str = "p99<=2s,missed=0,paid-after-deadline<=1%,max-rate>=500,\
     recovery<=30s; faults: p99<=10s,missed=0; cluster: p99<=10s,missed=0";

#[test]
fn the_reference_draft_is_madr_shaped_short_and_every_figure_links_its_json() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("decision/adr.md");
    let dirs = reference_folders();
    assert!(dirs.len() >= 4, "{dirs:?}");
    let (draft, evidence) = adr(&dirs, REFERENCE_SLA, &file).unwrap();
    // MADR 4's sections, in order.
    let mut at = 0;
    for section in [
        "## Context and Problem Statement",
        "## Decision Drivers",
        "## Considered Options",
        "## Decision Outcome",
        "### Consequences",
        "## Pros and Cons of the Options",
        "## More Information",
        "### Limits of this evidence",
    ] {
        let found = draft[at..]
            .find(section)
            .unwrap_or_else(|| panic!("{section} missing or out of order:\n{draft}"));
        at += found;
    }
    assert!(draft.starts_with("---\nstatus: proposed\n"), "{draft}");
    // Every option that meets the objective is on the shortlist, with
    // the trade-off among them: short, not tiny.
    let lines = draft.lines().count();
    assert!(lines < 300, "{lines} lines");
    let outcome = &draft[draft.find("## Decision Outcome").unwrap()..];
    assert!(outcome.contains("Chosen option: "), "{outcome}");
    assert!(
        outcome.contains("summary.json \"") && outcome.contains("| **"),
        "no shortlist with figures: {outcome}"
    );
    // The limits come from run.json.
    let limits = &draft[draft.find("### Limits of this evidence").unwrap()..];
    for words in [
        "2 cores",
        "one trial",
        "append-only",
        "back to back",
        "PostgreSQL",
    ] {
        assert!(limits.contains(words), "{words}: {limits}");
    }
    assert!(!draft.contains("interleaved (figures are medians)"));
    // Every input reruns from its own folder, scenario.toml or not.
    let rerun = &draft[draft.find("### Rerun the evidence").unwrap()..];
    for dir in &dirs {
        let scenario = if dir.join("scenario.toml").exists() {
            dir.join("scenario.toml")
        } else {
            dir.join("run.json")
        };
        assert!(
            rerun.contains(&format!("--scenario {}", scenario.display())),
            "{}: {rerun}",
            dir.display()
        );
    }
    // Teaching variants and the ceiling are no options.
    for text in [&draft, &evidence] {
        assert!(!text.contains("**db-scan-noindex**") && !text.contains("**ceiling**"));
        assert!(
            !text.contains("measured as"),
            "a variant borrowed its base's figure"
        );
    }
    assert!(draft.contains("-evidence.md](adr-evidence.md)"), "{draft}");
    let checked = check_figures(&file) + check_figures(&file.with_file_name("adr-evidence.md"));
    assert!(checked > 200, "only {checked} figures checked");
}

#[test]
fn what_no_run_measured_reads_not_measured_with_the_command_that_would() {
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("adr.md");
    let quick = reference_folders()
        .into_iter()
        .find(|d| d.to_string_lossy().ends_with("-quick"))
        .unwrap();
    let (draft, evidence) = adr(&[&quick], "p50<=1s,max-rate>=500", &file).unwrap();
    assert!(
        evidence.contains(
            "not measured (no rate sweep ran redis-zset: `delaybench sweep --strategies redis-zset`)"
        ),
        "{evidence}"
    );
    assert!(
        evidence.contains("no fault run ran redis-zset: `delaybench run --scenario chaos"),
        "{evidence}"
    );
    assert!(draft.contains("Chosen option: none yet"), "{draft}");
    let e = adr(&[&quick], "latency<2s", &file).unwrap_err();
    assert!(e.contains("unknown metric `latency`"), "{e}");
}

// ----------------------------------------------------------- fixtures --

/// A `run.json` and `summary.json` of the reference runs, as templates
/// whose figures the fixtures replace.
fn templates() -> (Value, Value) {
    let run = reference_folders()
        .into_iter()
        .find(|d| !d.join("sweep.json").exists())
        .unwrap();
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let name = info["strategies"][0].as_str().unwrap().to_string();
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(run.join(&name).join("summary.json")).unwrap(),
    )
    .unwrap();
    (info, summary)
}

/// One fixture strategy: its name, lateness (count, p50, p90, p99, max in
/// ms), missed cancels, statements per cancel and fault records.
struct Strategy {
    name: &'static str,
    lateness: (u64, f64, f64, f64, f64),
    missed: u64,
    statements: f64,
    faults: Vec<Value>,
}

/// Writes run folder `root/id` with `run.json` (faults from `faults`,
/// Redis as a cluster when `cluster`) and a `summary.json` per strategy.
fn fixture_run(
    root: &Path,
    id: &str,
    faults: Vec<Value>,
    cluster: bool,
    strategies: &[Strategy],
) -> PathBuf {
    let (mut info, template) = templates();
    let dir = root.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    info["run_id"] = json!(id);
    info["repeat"] = json!(1);
    info["command"] = json!(["delaybench", "run", "--scenario", "/gone/scenario.toml"]);
    info["strategies"] = json!(strategies.iter().map(|s| s.name).collect::<Vec<_>>());
    info["scenario"]["faults"] = json!(faults);
    if cluster {
        info["scenario"]["strategies"]["redis-zset"]["url"] =
            json!("redis+cluster://127.0.0.1:7000");
    }
    std::fs::write(dir.join("run.json"), info.to_string()).unwrap();
    for s in strategies {
        let mut summary = template.clone();
        let ms = |v: f64| (v * 1000.0) as u64;
        let (count, p50, p90, p99, max) = s.lateness;
        summary["strategy"] = json!(s.name);
        summary["repeats"] = Value::Null;
        summary["database"]["namespace"] = Value::Null;
        summary["lateness_us"] = json!({
            "count": count, "p50": ms(p50), "p90": ms(p90), "p99": ms(p99),
            "p999": ms(max), "max": ms(max), "mean": ms(p50),
        });
        for (_, v) in summary["anomalies"].as_object_mut().unwrap() {
            *v = json!(0);
        }
        summary["anomalies"]["missed_cancels"] = json!(s.missed);
        summary["orders"]["paid_after_deadline"] = json!(0);
        summary["cost"]["statements_per_cancel"] = json!(s.statements);
        summary["faults"] = json!(s.faults);
        summary["missed_by_fault"] = json!([]);
        let sdir = dir.join(s.name);
        std::fs::create_dir_all(&sdir).unwrap();
        std::fs::write(sdir.join("summary.json"), summary.to_string()).unwrap();
    }
    dir
}

/// A fault of the scenario and its record for one strategy: a partition
/// of `target`, hit or not applicable.
fn partition(target: &str) -> Value {
    json!({"kind": "partition", "at": "3s", "target": target, "for": "2s"})
}

fn partition_record(target: &str, applies: bool) -> Value {
    let reach = if applies {
        json!({"kind": "hit"})
    } else {
        json!({"kind": "not-applicable", "why": format!("its instances do not use {target}")})
    };
    json!({
        "kind": "partition", "instance": 0, "planned_at_ms": 3000,
        "label": format!("partition {target} for 2s at 3s"),
        "window_ms": if applies { json!([3000, 5000]) } else { Value::Null },
        "reach": reach,
    })
}

fn quiet(name: &'static str, lateness: (u64, f64, f64, f64, f64)) -> Strategy {
    Strategy {
        name,
        lateness,
        missed: 0,
        statements: 9.3,
        faults: Vec::new(),
    }
}

#[test]
fn an_option_is_judged_only_from_its_own_runs() {
    let root = tempfile::tempdir().unwrap();
    let normal = fixture_run(
        root.path(),
        "20261201-100000-quick",
        vec![],
        false,
        &[quiet("rabbit-ttl", (1500, 3.0, 4.0, 6.0, 9.0))],
    );
    let chaos = fixture_run(
        root.path(),
        "20261201-110000-chaos",
        vec![partition("rabbitmq")],
        false,
        &[Strategy {
            name: "rabbit-ttl+outbox",
            lateness: (1500, 20.0, 2000.0, 4500.0, 5900.0),
            missed: 0,
            statements: 28.0,
            faults: vec![partition_record("rabbitmq", true)],
        }],
    );
    let file = root.path().join("adr.md");
    let (draft, evidence) = adr(
        &[normal.clone(), chaos.clone()],
        "p99<=2s,missed=0; faults: p99<=10s,missed=0; cluster: none; backlog: none",
        &file,
    )
    .unwrap();
    // Without faults, only rabbit-ttl ran: the variant is not measured there.
    let outbox = row(&evidence, "### normal", "rabbit-ttl+outbox");
    assert!(
        outbox.contains("not measured (no run without faults ran rabbit-ttl+outbox"),
        "{outbox}"
    );
    // Under faults, only the variant ran: its own figures, and its base's
    // cell says not measured.
    let outbox = row(&evidence, "### faults", "rabbit-ttl+outbox");
    assert!(
        outbox.contains("meets: [p99 4500 ms (chaos, n=1500)]"),
        "{outbox}"
    );
    let base = row(&evidence, "### faults", "rabbit-ttl");
    assert!(
        base.contains("not measured (no fault run ran rabbit-ttl"),
        "{base}"
    );
    // Its cost is its own, under faults, never rabbit-ttl's 9.3.
    let cost = row(
        &evidence,
        "### Runs with and without faults",
        "rabbit-ttl+outbox",
    );
    assert!(
        cost.contains("28.0 DB statements") && !cost.contains("9.3 DB statements"),
        "{cost}"
    );
    for text in [&draft, &evidence] {
        assert!(!text.contains("measured as"), "{text}");
    }
    // Neither meets everything: each lacks a condition the other has.
    assert!(draft.contains("Chosen option: none yet"), "{draft}");
    // The rerun takes the scenario from run.json: this folder has no scenario.toml.
    assert!(
        draft.contains(&format!(
            "delaybench run --scenario {}",
            chaos.join("run.json").display()
        )),
        "{draft}"
    );
    assert!(check_figures(&file) > 0);
}

#[test]
fn a_fault_that_does_not_apply_is_never_survived() {
    let root = tempfile::tempdir().unwrap();
    let normal = fixture_run(
        root.path(),
        "20261201-100000-busy",
        vec![],
        false,
        &[
            quiet("db-scan", (1500, 100.0, 200.0, 240.0, 245.0)),
            quiet("redis-zset", (1500, 2.0, 3.0, 4.0, 8.0)),
        ],
    );
    // One fault, a Redis partition: n/a to db-scan, a hit on redis-zset.
    let chaos = fixture_run(
        root.path(),
        "20261201-110000-chaos",
        vec![partition("redis")],
        false,
        &[
            Strategy {
                faults: vec![partition_record("redis", false)],
                ..quiet("db-scan", (1500, 100.0, 200.0, 240.0, 245.0))
            },
            Strategy {
                faults: vec![partition_record("redis", true)],
                ..quiet("redis-zset", (1500, 2.0, 500.0, 2100.0, 2500.0))
            },
        ],
    );
    let file = root.path().join("adr.md");
    let (draft, evidence) = adr(
        &[normal, chaos],
        "p99<=2s,missed=0; faults: p99<=10s,missed=0; cluster: none; backlog: none",
        &file,
    )
    .unwrap();
    let scan = row(&evidence, "### faults", "db-scan");
    assert!(
        scan.contains("not measured (no fault run reached db-scan (chaos: no fault reached it (0 of 1 fault hit, 1 n/a))"),
        "{scan}"
    );
    assert!(!scan.contains("meets"), "{scan}");
    let zset = row(&evidence, "### faults", "redis-zset");
    assert!(
        zset.contains("meets") && zset.contains("(1 of 1 fault hit)"),
        "{zset}"
    );
    // redis-zset meets every condition it ran in; db-scan is not shown to.
    assert!(draft.contains("Chosen option: **redis-zset**"), "{draft}");
    assert!(
        draft.contains("- **db-scan** (database): meets normal; not measured: faults."),
        "{draft}"
    );
}

#[test]
fn sla_terms_apply_per_condition_and_a_bad_term_is_named() {
    let root = tempfile::tempdir().unwrap();
    let chaos = fixture_run(
        root.path(),
        "20261201-110000-chaos",
        vec![partition("redis")],
        false,
        &[Strategy {
            faults: vec![partition_record("redis", true)],
            ..quiet("redis-zset", (1500, 2.0, 500.0, 5000.0, 6000.0))
        }],
    );
    let file = root.path().join("adr.md");
    // The defaults hold under faults too, unless faults has its own terms.
    let (_, strict) = adr(&[&chaos], "p99<=2s", &file).unwrap();
    let cell = row(&strict, "### faults", "redis-zset");
    assert!(cell.contains("**fails**: [p99 5000 ms"), "{cell}");
    let (draft, relaxed) = adr(&[&chaos], "p99<=2s; faults: p99<=10s", &file).unwrap();
    let cell = row(&relaxed, "### faults", "redis-zset");
    assert!(
        cell.starts_with("| **redis-zset** | meets: [p99 5000 ms"),
        "{cell}"
    );
    assert!(
        draft.contains("- **faults** (runs with faults):\n  - p99 lateness ≤ 10 s: "),
        "{draft}"
    );
    assert!(
        draft.contains("- **normal** (runs without faults; the defaults):\n  - p99 lateness ≤ 2 s"),
        "{draft}"
    );
    for (sla, says) in [
        (
            "p99<=2s; faults: max-rate>=5",
            "`max-rate>=5` under `faults:`",
        ),
        ("p99<=2s; chaos: missed=0", "unknown condition `chaos`"),
        ("p99<=2s; faults: missed=zero", "`missed=zero`"),
    ] {
        let e = adr(&[&chaos], sla, &file).unwrap_err();
        assert!(e.contains(says), "{sla}: {e}");
    }
}

#[test]
fn a_lower_percentile_over_the_bound_fails_a_p99_with_too_few_samples() {
    let root = tempfile::tempdir().unwrap();
    // 400 cancels: too few for a p99, enough for a p90.
    let quick = fixture_run(
        root.path(),
        "20261201-100000-quick",
        vec![],
        false,
        &[
            quiet("db-scan", (400, 110.0, 210.0, 238.0, 241.0)),
            quiet("db-timer", (400, 2.0, 2.5, 3.0, 4.0)),
            quiet("timing-wheel", (400, 2.0, 30.0, 60.0, 80.0)),
        ],
    );
    let file = root.path().join("adr.md");
    let (draft, evidence) = adr(&[&quick], "normal: p99<=50ms", &file).unwrap();
    let scan = row(&evidence, "### normal", "db-scan");
    assert!(
        scan.contains("**fails**: [p90 210 ms (quick, n=400)]")
            && scan.contains("the p90 is already over the bound, so the p99 is too"),
        "{scan}"
    );
    // The max bounds it from above.
    let timer = row(&evidence, "### normal", "db-timer");
    assert!(
        timer.contains("meets: [max 4.0 ms (quick, n=400)]") && timer.contains("the max bounds it"),
        "{timer}"
    );
    // p90 within, max over: undecided, with what would decide it.
    let wheel = row(&evidence, "### normal", "timing-wheel");
    assert!(
        wheel.contains("too few samples for a p99 (n=400, needs 1000)")
            && wheel.contains("`--repeat 3`"),
        "{wheel}"
    );
    assert!(draft.contains("Chosen option: **db-timer**"), "{draft}");
}

#[test]
fn a_backlog_restart_that_lost_a_probe_order_is_no_recovery() {
    let root = tempfile::tempdir().unwrap();
    let (mut info, _) = templates();
    let dir = root.path().join("20261201-120000-backlog");
    std::fs::create_dir_all(&dir).unwrap();
    info["run_id"] = json!("20261201-120000-backlog");
    info["repeat"] = json!(1);
    info["strategies"] = json!(["redis-zset", "db-scan"]);
    info["command"] = json!(["delaybench", "sweep", "--scenario", "backlog"]);
    info["scenario"]["faults"] = json!([]);
    std::fs::write(dir.join("run.json"), info.to_string()).unwrap();
    let step = |strategy: &str, what: &str, probes: u64, cancelled: u64, again: f64| {
        json!({
            "rate": 200.0, "pending": 1000000, "holds": true, "reasons": [],
            "folder": format!("{strategy}/pending-1000000"), "cancels": 640,
            "p50_us": 1800, "p99_us": 3000, "max_us": 6400, "achieved_rate": 200.0,
            "generator_lag_p99_us": 1000, "anomalies": 0, "missed_cancels": 0,
            "elapsed_s": 10.0,
            "backlog": {
                "pending": 1000000, "insert_s": 8.0, "handoff_s": 5.6, "handoff_errors": 0,
                "held": {"worker_rss_kib": []},
                "recovery": [{
                    "what": what, "how": "restart", "restart_s": 0.5,
                    "cancelling_again_s": again, "probes": probes,
                    "probes_cancelled": cancelled, "held_after": {"worker_rss_kib": []},
                }],
            },
        })
    };
    let strategy = |name: &str, s: Value| {
        json!({
            "strategy": name, "status": "ok", "reason": null, "steps": [s],
            "max_rate": null, "first_failed_rate": null, "share_of_ceiling": null,
            "limited_by": null,
        })
    };
    let sweep = json!({
        "run_id": "20261201-120000-backlog", "axis": "pending", "mode": "list",
        "bound_ms": 500.0, "keep_up_ms": 100.0, "max_offered_rate": 20000.0,
        "strategies": [
            strategy("redis-zset", step("redis-zset", "redis", 2, 1, 0.83)),
            strategy("db-scan", step("db-scan", "instances", 1, 1, 0.11)),
        ],
        "generator": null,
    });
    std::fs::write(dir.join("sweep.json"), sweep.to_string()).unwrap();
    let file = root.path().join("adr.md");
    let (draft, evidence) = adr(&[dir], "backlog: recovery<=30s", &file).unwrap();
    let zset = row(&evidence, "### backlog", "redis-zset");
    assert!(
        zset.contains(
            "**fails**: [1 of 2 probe orders cancelled after the redis restart (1000000 pending)]"
        ) && zset.contains("no recovery"),
        "{zset}"
    );
    assert!(!zset.contains("0.8 s"), "{zset}");
    let scan = row(&evidence, "### backlog", "db-scan");
    assert!(
        scan.contains("meets: [0.1 s after the instances restart"),
        "{scan}"
    );
    assert!(draft.contains("Chosen option: **db-scan**"), "{draft}");
    // A sweep is back to back, never "interleaved".
    assert!(!draft.contains("interleaved"), "{draft}");
    assert!(check_figures(&file.with_file_name("adr-evidence.md")) >= 4);
}

/// `--out` takes a folder too, as `run -o` does: the draft is
/// `adr-draft.md` in it, its evidence beside it.
#[test]
fn out_may_be_a_folder() {
    let scratch = tempfile::tempdir().unwrap();
    let folder = scratch.path().join("decisions/");
    let dirs = reference_folders();
    let mut args = vec!["adr".to_string()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend(["-o".into(), format!("{}/", folder.display())]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = delaybench(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(folder.join("adr-draft.md").exists());
    assert!(folder.join("adr-draft-evidence.md").exists());
}

// ------------------------------------------------- the judgment itself --

/// Gives `strategy` of run folder `dir` three repetitions whose p99s span
/// `p99` (min, median, max in ms), each with `n` cancels.
fn repeated(dir: &Path, strategy: &str, p99: (f64, f64, f64), n: u64) {
    let file = dir.join(strategy).join("summary.json");
    let mut summary: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let us = |ms: f64| (ms * 1000.0).round();
    summary["repeats"] = json!({
        "count": 3,
        "folders": [],
        "figures": {
            "p99": {"min": us(p99.0), "median": us(p99.1), "max": us(p99.2)},
            "n": {"min": n, "median": n, "max": n},
        },
        "not_measured": [],
    });
    std::fs::write(&file, summary.to_string()).unwrap();
}

/// The section of `draft` from `heading` to the next `## `.
fn section<'a>(draft: &'a str, heading: &str) -> &'a str {
    let at = draft
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading}"));
    let rest = &draft[at + heading.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

const NORMAL_ONLY: &str =
    "p99<=2s,missed=0; faults: none; cluster: none; capacity: none; backlog: none";

#[test]
fn a_difference_inside_the_spread_picks_none_and_says_so() {
    let root = tempfile::tempdir().unwrap();
    let busy = fixture_run(
        root.path(),
        "20261201-100000-busy",
        vec![],
        false,
        &[
            quiet("db-timer", (5000, 1.0, 2.0, 2.5, 9.0)),
            quiet("timing-wheel", (5000, 1.0, 2.0, 2.9, 9.0)),
        ],
    );
    // db-timer's repetitions reach from 2.2 to 23.4 ms: the wheel's 2.9 is
    // inside them.
    repeated(&busy, "db-timer", (2.2, 2.5, 23.4), 1665);
    repeated(&busy, "timing-wheel", (2.7, 2.9, 3.0), 1665);
    let file = root.path().join("adr.md");
    let mut args = vec!["adr".to_string(), busy.display().to_string()];
    args.extend(["--sla", NORMAL_ONLY, "--prefer", "services,lateness", "-o"].map(String::from));
    args.push(file.display().to_string());
    let o = common::delaybench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", common::stderr(&o));
    let draft = std::fs::read_to_string(&file).unwrap();
    assert!(
        draft.contains("no measured difference picks one"),
        "the title chose: {draft}"
    );
    let outcome = section(&draft, "## Decision Outcome");
    assert!(outcome.contains("Chosen option: none."), "{outcome}");
    assert!(
        outcome.contains("No measured difference separates **db-timer**, **timing-wheel**"),
        "{outcome}"
    );
    assert!(outcome.contains("choose by what you operate"), "{outcome}");
    assert!(outcome.contains("overlap"), "{outcome}");
    assert!(check_figures(&file) > 0);
}

#[test]
fn a_separated_difference_in_one_run_picks_and_the_draft_names_where_the_pick_is_worse() {
    let root = tempfile::tempdir().unwrap();
    let busy = fixture_run(
        root.path(),
        "20261201-100000-busy",
        vec![],
        false,
        &[
            quiet("db-timer", (5000, 1.0, 20.0, 55.0, 90.0)),
            quiet("redis-zset", (5000, 1.0, 2.0, 2.1, 9.0)),
        ],
    );
    // Separated, but 3.4 ms apart under a 2 s objective: not material.
    repeated(&busy, "db-timer", (5.0, 5.5, 6.0), 1665);
    repeated(&busy, "redis-zset", (2.0, 2.1, 2.2), 1665);
    let file = root.path().join("adr.md");
    let run = |prefer: &str| {
        let mut args = vec!["adr".to_string(), busy.display().to_string()];
        args.extend(["--sla", NORMAL_ONLY, "--prefer", prefer, "-o"].map(String::from));
        args.push(file.display().to_string());
        let o = common::delaybench(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", common::stderr(&o));
        std::fs::read_to_string(&file).unwrap()
    };
    // Lateness cannot part them, so db-timer, which needs no Redis,
    // dominates; its worse lateness is named as immaterial.
    let draft = run("lateness");
    let outcome = section(&draft, "## Decision Outcome");
    assert!(outcome.contains("Chosen option: **db-timer**"), "{outcome}");
    assert!(
        outcome.contains(
            "separated, but by less than the material difference (1 % of `p99<=2s`: 20 ms)"
        ),
        "{outcome}"
    );
    assert!(
        draft.contains("lateness 1 % of `p99<=2s`: 20 ms"),
        "the material difference is printed: {draft}"
    );
    // 50 ms apart: material. Lateness first: redis-zset, separated in the
    // same run; where it is worse (it needs Redis) is named.
    repeated(&busy, "db-timer", (50.0, 55.0, 60.0), 1665);
    let draft = run("lateness,services");
    assert!(
        draft.contains("# Cancel unpaid orders at their deadline with redis-zset"),
        "{draft}"
    );
    let outcome = section(&draft, "## Decision Outcome");
    assert!(outcome.contains("by chance alone 1 in 10"), "{outcome}");
    let worse = &outcome[outcome
        .find("Where **redis-zset** is worse, separated:")
        .unwrap_or_else(|| panic!("no worse: {outcome}"))..];
    assert!(
        worse.contains("services to operate") && worse.contains("the database and Redis"),
        "{worse}"
    );
    assert!(
        outcome.contains("Bad, because on services to operate"),
        "{outcome}"
    );
    // Services first: db-timer, and its worse lateness is named.
    let draft = run("services,lateness");
    assert!(draft.contains("with db-timer"), "{draft}");
    let outcome = section(&draft, "## Decision Outcome");
    assert!(
        outcome.contains("Where **db-timer** is worse, separated:\n- lateness without faults"),
        "{outcome}"
    );
    assert!(check_figures(&file) > 0);
}

#[test]
fn options_from_two_runs_are_never_compared() {
    let root = tempfile::tempdir().unwrap();
    let quick = fixture_run(
        root.path(),
        "20261201-100000-quick",
        vec![],
        false,
        &[quiet("db-timer", (5000, 1.0, 2.0, 2.1, 9.0))],
    );
    let busy = fixture_run(
        root.path(),
        "20261201-110000-busy",
        vec![],
        false,
        &[quiet("timing-wheel", (5000, 1.0, 2.0, 9.0, 19.0))],
    );
    repeated(&quick, "db-timer", (2.0, 2.1, 2.2), 1665);
    repeated(&busy, "timing-wheel", (8.0, 9.0, 10.0), 1665);
    let file = root.path().join("adr.md");
    let mut args = vec![
        "adr".to_string(),
        quick.display().to_string(),
        busy.display().to_string(),
    ];
    args.extend(["--sla", NORMAL_ONLY, "--prefer", "lateness", "-o"].map(String::from));
    args.push(file.display().to_string());
    let o = common::delaybench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", common::stderr(&o));
    let draft = std::fs::read_to_string(&file).unwrap();
    let outcome = section(&draft, "## Decision Outcome");
    assert!(outcome.contains("Chosen option: none."), "{outcome}");
    assert!(
        outcome.contains("was not measured (it did not run in"),
        "{outcome}"
    );
    assert!(
        outcome.contains("a missing figure separates nothing"),
        "{outcome}"
    );
}

#[test]
fn the_objective_is_printed_whole_in_words_before_anything_is_judged() {
    let root = tempfile::tempdir().unwrap();
    let quick = fixture_run(
        root.path(),
        "20261201-100000-quick",
        vec![],
        false,
        &[quiet("db-timer", (5000, 1.0, 2.0, 2.1, 9.0))],
    );
    let file = root.path().join("adr.md");
    // No objective given: the tool's example, called so.
    let o = common::delaybench(&["adr", quick.to_str().unwrap(), "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let draft = std::fs::read_to_string(&file).unwrap();
    let drivers = section(&draft, "## Decision Drivers");
    assert!(drivers.contains("the tool's example"), "{drivers}");
    // The near-deadline payment term says what it bounds.
    assert!(
        drivers.contains("2.5% of orders pay 0–20 ms after their deadline")
            && drivers.contains(
                "the mean lateness, each cancel counted up to 20 ms, stays under about 8 ms"
            ),
        "{drivers}"
    );
    assert!(draft.find("## Decision Drivers") < draft.find("## Decision Outcome"));
    // From a file, said so.
    let slo = root.path().join("slo.toml");
    std::fs::write(
        &slo,
        "objective = \"p99<=1s,missed=0\"\nprefer = [\"lateness\"]\n",
    )
    .unwrap();
    let o = common::delaybench(&[
        "adr",
        quick.to_str().unwrap(),
        "--slo",
        slo.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let draft = std::fs::read_to_string(&file).unwrap();
    let drivers = section(&draft, "## Decision Drivers");
    assert!(
        drivers.contains(&format!("from `{}`: `p99<=1s,missed=0`", slo.display())),
        "{drivers}"
    );
    assert!(!drivers.contains("tool's example"), "{drivers}");
}

/// A fault that acted on something else than its target (a standby, not
/// the leader) is no evidence that the option survives faults: the draft
/// says it missed, and a fault run whose only fault missed is no fault run
/// for that option.
#[test]
fn a_fault_that_missed_its_target_is_reported_missed_never_survived() {
    let root = tempfile::tempdir().unwrap();
    let missed = {
        let mut r = partition_record("redis", true);
        r["reach"] = json!({"kind": "missed-target", "why": "instance 1 was a standby"});
        r
    };
    let chaos = fixture_run(
        root.path(),
        "20261201-110000-chaos",
        vec![partition("redis")],
        false,
        &[
            Strategy {
                faults: vec![missed],
                ..quiet("db-timer", (1500, 2.0, 3.0, 4.0, 8.0))
            },
            Strategy {
                faults: vec![partition_record("redis", true)],
                ..quiet("redis-zset", (1500, 2.0, 500.0, 2100.0, 2500.0))
            },
        ],
    );
    let file = root.path().join("adr.md");
    let (draft, evidence) = adr(&[chaos], "faults: p99<=10s,missed=0", &file).unwrap();
    let timer = row(&evidence, "### faults", "db-timer");
    assert!(
        timer.contains("not measured") && timer.contains("1 missed its target"),
        "{timer}"
    );
    assert!(
        !timer.contains("meets"),
        "a missed fault was survived: {timer}"
    );
    let zset = row(&evidence, "### faults", "redis-zset");
    assert!(
        zset.contains("meets") && zset.contains("1 of 1 fault hit"),
        "{zset}"
    );
    assert!(!draft.contains("with db-timer"), "{draft}");
}

/// A fault aimed at an option's weak point (db-timer's leader) is read
/// beside that option in the draft: whether it reached it and the missed
/// cancels put down to it alone, with the run it comes from; one that
/// missed says so.
#[test]
fn a_fault_aimed_at_a_weak_point_is_read_beside_the_option() {
    let root = tempfile::tempdir().unwrap();
    let pause = |reach: Value| {
        json!({
            "kind": "pause-instance", "instance": 0, "aimed_at": "leader", "planned_at_ms": 3000,
            "label": "pause the leader for 2s at 3s", "window_ms": [3000, 5000], "reach": reach,
        })
    };
    let chaos = fixture_run(
        root.path(),
        "20261201-110000-chaos",
        vec![json!({"kind": "pause-instance", "instance": "leader", "at": "3s", "for": "2s"})],
        false,
        &[
            Strategy {
                missed: 3,
                faults: vec![pause(json!({"kind": "hit"}))],
                ..quiet("db-timer", (1500, 2.0, 3.0, 4.0, 8.0))
            },
            Strategy {
                faults: vec![pause(
                    json!({"kind": "missed-target", "why": "no instance led"}),
                )],
                ..quiet("db-scan", (1500, 40.0, 90.0, 200.0, 250.0))
            },
            Strategy {
                faults: vec![pause(
                    json!({"kind": "not-applicable", "why": "no instance leads"}),
                )],
                ..quiet("timing-wheel", (1500, 2.0, 3.0, 4.0, 8.0))
            },
        ],
    );
    let timer = chaos.join("db-timer").join("summary.json");
    let mut summary: Value =
        serde_json::from_str(&std::fs::read_to_string(&timer).unwrap()).unwrap();
    summary["missed_by_fault"] =
        json!([{"fault": 0, "label": "pause the leader for 2s at 3s", "missed": 3}]);
    std::fs::write(&timer, serde_json::to_string_pretty(&summary).unwrap()).unwrap();
    let file = root.path().join("adr.md");
    let (draft, _) = adr(&[chaos], "faults: p99<=10s,missed=0", &file).unwrap();
    let line = |option: &str| -> String {
        let section = draft
            .split(&format!("### {option}\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("no section for {option}: {draft}"));
        section
            .lines()
            .take_while(|l| !l.starts_with("### "))
            .find(|l| l.contains("Faults aimed at its weak points"))
            .unwrap_or_else(|| panic!("no weak-point line for {option}: {section}"))
            .to_string()
    };
    let timer = line("db-timer");
    assert!(
        timer.contains("#1 aimed at the leader (pause the leader for 2s at 3s): hit; 3 missed cancels put down to it alone")
            && timer.contains("20261201-110000-chaos/db-timer/summary.json"),
        "{timer}"
    );
    let scan = line("db-scan");
    assert!(
        scan.contains("**missed its target**: no instance led"),
        "{scan}"
    );
    // A fault that cannot touch an option says nothing of its weak
    // points: no line, where there was "not applicable" before.
    let wheel = draft
        .split("### timing-wheel\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no section for timing-wheel: {draft}"));
    assert!(
        !wheel
            .lines()
            .take_while(|l| !l.starts_with("### "))
            .any(|l| l.contains("Faults aimed at its weak points")),
        "{wheel}"
    );
}
