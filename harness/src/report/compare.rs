//! `delaybench compare BASE OTHER`: two runs side by side, strategy by
//! strategy, with the ratio OTHER / BASE of every figure, and a warning when
//! the runs did not use the same scenario, database or machine (then the
//! numbers are not like for like). It lists every figure that got worse
//! beyond the spread ([`regression`]), which `--fail-on-regression` turns
//! into an exit status. Only run folders compare; a sweep folder, or a run
//! folder beside one, is refused with both kinds named.

use super::folder::load;
use super::table::{shown, Shown};
use crate::model::run_info::RunInfo;
use crate::model::summary::Spread;
use crate::model::summary::{Status, Summary};
use anyhow::{bail, Context, Result};
use std::fmt::Write as _;
use std::path::Path;

/// How `compare` judges a difference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// When either run was not repeated (no spread to judge by), a figure
    /// counts as worse only when it grew by more than this share of the
    /// base's value (0.25: more than 25 %).
    pub single_run_threshold: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            single_run_threshold: 0.25,
        }
    }
}

/// Two runs compared: the markdown, the strategies that show an anomaly
/// OTHER has and BASE had not (`compare` exits non-zero on them), and the
/// figures that got worse beyond the spread.
#[derive(Debug)]
pub struct Comparison {
    pub text: String,
    pub new_anomalies: Vec<String>,
    pub regressions: Vec<Regression>,
}

/// A figure of one strategy that got worse beyond the spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    pub strategy: String,
    /// What the figure is, in words (`lateness p90 ms`).
    pub figure: &'static str,
    /// Base → other, formatted, and by which rule it counts as worse.
    pub detail: String,
}

/// The exit status of `compare --fail-on-regression` when a figure got
/// worse beyond the spread: apart from 1 (an error, or a new anomaly) and
/// clap's 2 (bad usage), so a script can tell a regression from a failure.
pub const REGRESSION_EXIT: u8 = 3;

/// How `compare --fail-on-regression` ends when a figure got worse;
/// `main` exits with [`REGRESSION_EXIT`] on it.
#[derive(Debug)]
pub struct Regressed(pub Vec<Regression>);

impl std::fmt::Display for Regressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self
            .0
            .iter()
            .map(|r| format!("{} {}", r.strategy, r.figure))
            .collect();
        write!(
            f,
            "{} figure(s) worse beyond the spread: {}",
            self.0.len(),
            list.join(", ")
        )
    }
}

impl std::error::Error for Regressed {}

/// The figures that are worse when they go up, by their name in
/// `summary::figures`, with what the regression list calls them. Both rows
/// figures are listed: a run has the one its database measures.
const WORSE_WHEN_UP: [(&str, &str); 14] = [
    ("p50", "lateness p50 ms"),
    ("p90", "lateness p90 ms"),
    ("p99", "lateness p99 ms"),
    ("p999", "lateness p99.9 ms"),
    ("max", "lateness max ms"),
    ("commit_p99", "lateness at commit p99 ms"),
    ("anomalies", "anomalies"),
    ("stmts_per_cancel", "DB statements per cancel"),
    ("attempts_per_cancel", "cancel attempts per cancel"),
    ("canceller_rows_per_cancel", "DB rows read per cancel"),
    (
        "server_rows_per_cancel",
        "DB rows read per cancel (whole run)",
    ),
    ("broker_msgs_per_cancel", "broker messages per cancel"),
    ("redis_cmds_per_cancel", "Redis commands per cancel"),
    ("cpu_us_per_cancel", "CPU µs per cancel"),
];

/// What a results folder holds, as the error names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Run,
    RateSweep,
    BacklogSweep,
}

impl Kind {
    fn of(dir: &Path) -> Result<Kind> {
        if !dir.join("sweep.json").exists() {
            return Ok(Kind::Run);
        }
        // Only the axis decides, so that a sweep of any version is named.
        let path = dir.join("sweep.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let sweep: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(if sweep["axis"] == "pending" {
            Kind::BacklogSweep
        } else {
            Kind::RateSweep
        })
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Run => "a run folder",
            Kind::RateSweep => "a sweep of rates",
            Kind::BacklogSweep => "a sweep of backlogs",
        }
    }
}

/// Refuses folders `compare` cannot set side by side: two of different
/// kinds, whose strategies would all read "did not run", and sweeps, whose
/// steps are not runs of their own.
fn check_kinds(base_dir: &Path, other_dir: &Path) -> Result<()> {
    let (base, other) = (Kind::of(base_dir)?, Kind::of(other_dir)?);
    if base != other {
        bail!(
            "cannot compare {} ({}) with {} ({}): compare two run folders",
            base_dir.display(),
            base.describe(),
            other_dir.display(),
            other.describe()
        );
    }
    if base != Kind::Run {
        bail!(
            "{} and {} are both {}: compare reads run folders only; set the sweeps' \
             report.md tables side by side",
            base_dir.display(),
            other_dir.display(),
            base.describe()
        );
    }
    Ok(())
}

/// The comparison as markdown (readable on a terminal too).
pub fn compare(base_dir: &Path, other_dir: &Path, options: CompareOptions) -> Result<Comparison> {
    check_kinds(base_dir, other_dir)?;
    let mut new_anomalies = Vec::new();
    let mut regressions = Vec::new();
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
             a figure counts as worse only when it grew by more than {:.0} % \
             (`--single-run-threshold`); run both with `--repeat 3` and only differences \
             beyond the spread are flagged",
            match (single(&base_info), single(&other_info)) {
                (true, true) => "both are",
                (true, false) => "the base is",
                _ => "the other is",
            },
            options.single_run_threshold * 100.0
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
        "| strategy | p50 ms | p90 ms | p99 ms | max ms | anomalies | stmts/cancel | CPU µs/cancel |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |"
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
                    "| {name} | base {}, other {} | | | | | | |",
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
            "| {name} | {} | {} | {} | {} | {anomalies} | {} | {} |",
            figure_cell(&b, &o, "p50", true),
            figure_cell(&b, &o, "p90", true),
            figure_cell(&b, &o, "p99", true),
            figure_cell(&b, &o, "max", true),
            figure_cell(&b, &o, "stmts_per_cancel", false),
            figure_cell(&b, &o, "cpu_us_per_cancel", false),
        );
        regressions.extend(regressions_of(&b, &o, options));
    }
    if regressions.is_empty() {
        let _ = writeln!(out, "\nNo figure got worse beyond the spread.");
    } else {
        let _ = writeln!(out, "\n## Worse beyond the spread\n");
        for r in &regressions {
            let _ = writeln!(out, "- {}: {} {}", r.strategy, r.figure, r.detail);
        }
    }
    Ok(Comparison {
        text: out,
        new_anomalies,
        regressions,
    })
}

/// Every figure of [`WORSE_WHEN_UP`] that went up from `base` to `other`
/// beyond the spread.
fn regressions_of(base: &Summary, other: &Summary, options: CompareOptions) -> Vec<Regression> {
    WORSE_WHEN_UP
        .iter()
        .filter_map(|&(key, figure)| {
            let (b, o) = (shown(base, key)?, shown(other, key)?);
            let why = regression(b, o, options)?;
            let show = |v: f64| {
                if key.starts_with('p') || key == "max" || key == "commit_p99" {
                    format!("{:.1}", v / 1000.0)
                } else {
                    format!("{v:.1}")
                }
            };
            Some(Regression {
                strategy: base.strategy.clone(),
                figure,
                detail: format!("{} → {}: {why}", show(b.value), show(o.value)),
            })
        })
        .collect()
}

/// Why `other` is worse than `base` beyond the spread, for a figure that
/// is worse when it goes up; `None` when it is not. With repetitions on
/// both sides: the other's min–max range lies wholly above the base's.
/// Otherwise there is no spread to judge by, and the rule is a relative
/// threshold: the other's value exceeds the base's by more than
/// `single_run_threshold` of it (any rise from 0 counts).
pub fn regression(base: Shown, other: Shown, options: CompareOptions) -> Option<String> {
    match (base.spread, other.spread) {
        (Some((_, base_max)), Some((other_min, _))) => (other_min > base_max)
            .then(|| "the repetitions' min–max ranges do not overlap".to_string()),
        _ => {
            let limit = base.value * (1.0 + options.single_run_threshold);
            (other.value > limit).then(|| {
                format!(
                    "more than {:.0} % up, with no spread to judge by",
                    options.single_run_threshold * 100.0
                )
            })
        }
    }
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
    let show = |v: f64| {
        if is_us {
            format!("{:.1}", v / 1000.0)
        } else {
            format!("{v:.1}")
        }
    };
    match (shown(base, key), shown(other, key)) {
        (Some(b), Some(o)) => {
            let spread = |s: Shown| {
                s.spread.map(|(min, max)| Spread {
                    median: s.value,
                    min,
                    max,
                })
            };
            let flag = match (spread(b), spread(o)) {
                (Some(bs), Some(os)) if bs.differs_from(&os) => " **beyond spread**",
                (Some(_), Some(_)) => " (within spread)",
                _ => "",
            };
            format!(
                "{} → {}{}{flag}",
                show(b.value),
                show(o.value),
                ratio(b.value, o.value)
            )
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
            machine: Machine::default(),
        };
        std::fs::create_dir_all(dir).unwrap();
        info.write(dir).unwrap();
        for &(name, p99_us, missed) in runs {
            let mut s = Summary::not_run(name, Status::Ok, String::new(), DatabaseInfo::default());
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

    fn single(value: f64) -> Shown {
        Shown {
            value,
            spread: None,
        }
    }

    fn repeated(min: f64, median: f64, max: f64) -> Shown {
        Shown {
            value: median,
            spread: Some((min, max)),
        }
    }

    #[test]
    fn repeated_runs_regress_only_when_the_ranges_part_upwards() {
        let options = CompareOptions::default();
        let base = repeated(90.0, 100.0, 110.0);
        assert!(regression(base, repeated(111.0, 115.0, 120.0), options).is_some());
        // Overlapping ranges: noise, however far the medians moved.
        assert!(regression(base, repeated(105.0, 200.0, 300.0), options).is_none());
        // Better beyond the spread is no regression.
        assert!(regression(base, repeated(50.0, 60.0, 70.0), options).is_none());
        // The single-run threshold plays no part where both have a spread.
        let strict = CompareOptions {
            single_run_threshold: 0.0,
        };
        assert!(regression(base, repeated(100.0, 109.0, 110.0), strict).is_none());
    }

    #[test]
    fn without_a_spread_the_relative_threshold_decides() {
        let default = CompareOptions::default();
        assert_eq!(default.single_run_threshold, 0.25);
        assert!(regression(single(100.0), single(126.0), default).is_some());
        assert!(regression(single(100.0), single(124.0), default).is_none());
        let loose = CompareOptions {
            single_run_threshold: 0.5,
        };
        assert!(regression(single(100.0), single(126.0), loose).is_none());
        // Any rise from 0 counts (a first anomaly); staying at 0 does not.
        assert!(regression(single(0.0), single(1.0), default).is_some());
        assert!(regression(single(0.0), single(0.0), default).is_none());
        // One side repeated, the other not: still no spread to compare.
        let base = repeated(90.0, 100.0, 200.0);
        assert!(regression(base, single(130.0), default).is_some());
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
    }
}
