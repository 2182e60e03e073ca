//! `delaybench compare BASE OTHER`: two runs side by side, strategy by
//! strategy, with the ratio OTHER / BASE of every figure, and a warning when
//! the runs did not use the same scenario, database or machine (then the
//! numbers are not like for like).

use super::{load, Status, Summary};
use crate::model::run_info::RunInfo;
use crate::model::summary::{self, Spread};
use anyhow::Result;
use std::fmt::Write as _;
use std::path::Path;

/// Two runs compared: the markdown, and the strategies that show an
/// anomaly OTHER has and BASE had not (`compare` exits non-zero on them).
#[derive(Debug)]
pub struct Comparison {
    pub text: String,
    pub new_anomalies: Vec<String>,
}

/// The comparison as markdown (readable on a terminal too).
pub fn compare(base_dir: &Path, other_dir: &Path) -> Result<Comparison> {
    let mut new_anomalies = Vec::new();
    let (base_info, base) = load(base_dir)?;
    let (other_info, other) = load(other_dir)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# delaybench: `{}` (base) vs `{}`\n",
        base_info.run_id, other_info.run_id
    );
    for warning in differences(&base_info, &other_info) {
        let _ = writeln!(out, "- **warning**: {warning}");
    }
    let single = |info: &RunInfo| info.repeat <= 1;
    if single(&base_info) || single(&other_info) {
        let _ = writeln!(
            out,
            "- **note**: {} a single run, so no difference can be told from run-to-run noise; \
             run both with `--repeat 3` and only differences beyond the spread are flagged",
            match (single(&base_info), single(&other_info)) {
                (true, true) => "both are",
                (true, false) => "the base is",
                _ => "the other is",
            }
        );
    }
    let _ = writeln!(
        out,
        "\nEach cell is `base → other (other/base)`; lateness in ms. With repetitions the \
         values are medians, and **beyond spread** marks a difference whose min–max ranges do \
         not overlap.\n"
    );
    let _ = writeln!(
        out,
        "| strategy | p50 ms | p99 ms | max ms | anomalies | stmts/cancel | CPU µs/cancel |\n\
         | --- | --- | --- | --- | --- | --- | --- |"
    );
    let mut names: Vec<&str> = base.iter().map(|s| s.strategy.as_str()).collect();
    for s in &other {
        if !names.contains(&s.strategy.as_str()) {
            names.push(&s.strategy);
        }
    }
    for name in names {
        let find = |list: &'_ [Summary]| -> Option<Summary> {
            list.iter()
                .find(|s| s.strategy == name && s.status == Status::Ok)
                .cloned()
        };
        let (b, o) = match (find(&base), find(&other)) {
            (Some(b), Some(o)) => (b, o),
            (b, o) => {
                let state = |s: &Option<Summary>| if s.is_some() { "ran" } else { "did not run" };
                let _ = writeln!(
                    out,
                    "| {name} | base {}, other {} | | | | | |",
                    state(&b),
                    state(&o)
                );
                continue;
            }
        };
        let anomalies = match (b.anomalies.total(), o.anomalies.total()) {
            (0, n) if n > 0 => {
                new_anomalies.push(name.to_string());
                format!("0 → **{n} (new)**")
            }
            (x, y) => format!("{x} → {y}"),
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {anomalies} | {} | {} |",
            figure_cell(&b, &o, "p50", true),
            figure_cell(&b, &o, "p99", true),
            figure_cell(&b, &o, "max", true),
            figure_cell(&b, &o, "stmts_per_cancel", false),
            figure_cell(&b, &o, "cpu_us_per_cancel", false),
        );
    }
    Ok(Comparison {
        text: out,
        new_anomalies,
    })
}

/// What differs between the runs' setups, as sentences.
fn differences(base: &RunInfo, other: &RunInfo) -> Vec<String> {
    let mut out = Vec::new();
    if base.repeat != other.repeat {
        out.push(format!(
            "the runs repeated each strategy {} and {} times",
            base.repeat, other.repeat
        ));
    }
    out.extend(setup_differences(base, other));
    out
}

/// The scenario fields (dotted paths, as in the TOML) whose values differ.
fn scenario_fields_that_differ(
    base: &crate::scenario::Scenario,
    other: &crate::scenario::Scenario,
) -> Vec<String> {
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let path = if prefix.is_empty() {
                        k.replace('_', "-")
                    } else {
                        format!("{prefix}.{}", k.replace('_', "-"))
                    };
                    flatten(&path, v, out);
                }
            }
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let fields = |s: &crate::scenario::Scenario| {
        let mut out = Vec::new();
        flatten("", &serde_json::to_value(s).unwrap_or_default(), &mut out);
        out
    };
    let (b, o) = (fields(base), fields(other));
    let mut differ: Vec<String> = b
        .iter()
        .filter(|f| !o.contains(f))
        .chain(o.iter().filter(|f| !b.contains(f)))
        .map(|(path, _)| format!("`{path}`"))
        .collect();
    differ.sort();
    differ.dedup();
    differ
}

/// Scenario, database and machine differences.
fn setup_differences(base: &RunInfo, other: &RunInfo) -> Vec<String> {
    let mut out = Vec::new();
    if base.scenario != other.scenario {
        let fields = scenario_fields_that_differ(&base.scenario, &other.scenario);
        out.push(format!(
            "the scenarios differ (`{}` seed {} vs `{}` seed {}) in {}: the figures are not like for like",
            base.scenario.name,
            base.scenario.seed,
            other.scenario.name,
            other.scenario.seed,
            fields.join(", ")
        ));
    }
    if base.database_kind != other.database_kind || base.database_version != other.database_version
    {
        out.push(format!(
            "the databases differ: {} {} vs {} {}",
            base.database_kind, base.database_version, other.database_kind, other.database_version
        ));
    }
    let machine = |i: &RunInfo| i.machine.summary();
    if machine(base) != machine(other) {
        out.push(format!(
            "the machines differ: {} vs {}",
            machine(base),
            machine(other)
        ));
    }
    out
}

/// One figure of both runs: medians when repeated, with a flag when the
/// ranges of the repetitions do not overlap.
fn figure_cell(base: &Summary, other: &Summary, key: &str, is_us: bool) -> String {
    let value = |s: &Summary| -> (Option<f64>, Option<Spread>) {
        match &s.repeats {
            Some(r) => (
                r.figures.get(key).map(|sp| sp.median),
                r.figures.get(key).copied(),
            ),
            None => (
                summary::figures(s)
                    .into_iter()
                    .find(|(k, _)| *k == key)
                    .and_then(|(_, v)| v),
                None,
            ),
        }
    };
    let ((b, b_spread), (o, o_spread)) = (value(base), value(other));
    let show = |v: f64| {
        if is_us {
            format!("{:.1}", v / 1000.0)
        } else {
            format!("{v:.1}")
        }
    };
    match (b, o) {
        (Some(b), Some(o)) => {
            let flag = match (b_spread, o_spread) {
                (Some(bs), Some(os)) if bs.differs_from(&os) => " **beyond spread**",
                (Some(_), Some(_)) => " (within spread)",
                _ => "",
            };
            format!("{} → {}{}{flag}", show(b), show(o), ratio(b, o))
        }
        _ => "-".into(),
    }
}

/// ` (×1.23)`, or nothing when the base is 0.
fn ratio(base: f64, other: f64) -> String {
    if base > 0.0 {
        format!(" (×{:.2})", other / base)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::run_info::Machine;
    use crate::model::summary::DatabaseInfo;
    use crate::scenario::{Scenario, QUICK};

    fn write_run(dir: &Path, seed: u64, runs: &[(&str, u64, u64)]) {
        let mut scenario = Scenario::parse(QUICK, "quick").unwrap();
        scenario.seed = seed;
        let info = RunInfo {
            run_id: dir.file_name().unwrap().to_string_lossy().into(),
            started_at: String::new(),
            delaybench_version: String::new(),
            git_commit: String::new(),
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
            machine: Machine::default(),
        };
        std::fs::create_dir_all(dir).unwrap();
        info.write(dir).unwrap();
        for &(name, p99_us, missed) in runs {
            let mut s = Summary::not_run(name, Status::Ok, String::new(), DatabaseInfo::default());
            s.lateness_us.p99 = p99_us;
            s.lateness_us.count = 2_000;
            s.anomalies.missed_cancels = missed;
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
        let comparison = compare(&a, &b).unwrap();
        let text = &comparison.text;
        assert!(!text.contains("warning"), "{text}");
        assert!(
            text.contains("| db-scan | 0.0 → 0.0 | 240.0 → 120.0 (×0.50) |"),
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
        let comparison = compare(&a, &b.join("x")).unwrap();
        let text = &comparison.text;
        assert!(text.contains("the scenarios differ"), "{text}");
        assert!(
            text.contains("in `seed`:"),
            "the differing field is named: {text}"
        );
        assert!(text.contains("0 → **2 (new)**"), "{text}");
        assert_eq!(comparison.new_anomalies, ["db-scan"]);
    }

    #[test]
    fn only_differences_beyond_the_spread_are_flagged() {
        let with_p99 = |min: f64, median: f64, max: f64| {
            let mut s = Summary::not_run(
                "db-scan",
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
            s
        };
        let base = with_p99(90_000.0, 100_000.0, 110_000.0);
        let overlapping = with_p99(105_000.0, 120_000.0, 130_000.0);
        let apart = with_p99(150_000.0, 160_000.0, 170_000.0);
        let cell = figure_cell(&base, &overlapping, "p99", true);
        assert_eq!(cell, "100.0 → 120.0 (×1.20) (within spread)");
        let cell = figure_cell(&base, &apart, "p99", true);
        assert_eq!(cell, "100.0 → 160.0 (×1.60) **beyond spread**");
    }
}
