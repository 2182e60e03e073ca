//! `delaybench compare BASE OTHER`: two runs side by side, strategy by
//! strategy, with the ratio OTHER / BASE of every figure, and a warning when
//! the runs did not use the same scenario, database or machine (then the
//! numbers are not like for like). It lists every figure that got worse
//! beyond the spread ([`regression`]), which `--fail-on-regression` turns
//! into an exit status. Only run folders compare; a sweep folder, or a run
//! folder beside one, is refused with both kinds named.
//!
//! The rooms: `regression` (what counts as worse beyond the spread, and
//! the exit status for it), `setup` (the warnings when the runs are not
//! like for like); this file refuses folders it cannot compare and writes
//! the table.

mod regression;
mod setup;
#[cfg(test)]
mod tests;

pub use regression::{CompareOptions, Regressed, Regression};

use super::folder::load;
use super::table::shown;
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use crate::model::sweep::SweepAxis;
use anyhow::{bail, Context, Result};
use regression::regressions_of;
use setup::differences;
use std::fmt::Write as _;
use std::path::Path;

/// Two runs compared: the markdown, the strategies that show an anomaly
/// OTHER has and BASE had not (`compare` exits non-zero on them), and the
/// figures that got worse beyond the spread.
#[derive(Debug)]
pub struct Comparison {
    pub text: String,
    pub new_anomalies: Vec<String>,
    pub regressions: Vec<Regression>,
}

/// What a results folder holds, as the error names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Run,
    Sweep(SweepAxis),
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
        #[derive(serde::Deserialize)]
        struct Axis {
            #[serde(default)]
            axis: SweepAxis,
        }
        let sweep: Axis =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(Kind::Sweep(sweep.axis))
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Run => "a run folder",
            Kind::Sweep(SweepAxis::Rate) => "a sweep of rates",
            Kind::Sweep(SweepAxis::Pending) => "a sweep of backlogs",
            Kind::Sweep(SweepAxis::Storm) => "a sweep of deadline storms",
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
    // Folders of the wrong kind are a wrong command line, not a failure.
    check_kinds(base_dir, other_dir).map_err(crate::exit::usage)?;
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
        "| strategy | p50 ms | p90 ms | p99 ms | max ms | anomalies | stmts/cancel | CPU µs/cancel: services + workers |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let mut names: Vec<&str> = base.iter().map(|s| s.strategy.name()).collect();
    for s in &other {
        if !names.contains(&s.strategy.name()) {
            names.push(s.strategy.name());
        }
    }
    for name in names {
        let find = |list: &'_ [Summary]| -> Option<Summary> {
            list.iter()
                .find(|s| s.strategy.name() == name && s.status == Status::Ok)
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
            figure_cell(&b, &o, "cpu_all_us_per_cancel", false),
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
            let flag = match (b.spread, o.spread) {
                (Some(_), Some(_)) => match b.separated_from(&o) {
                    Ok(true) => " **beyond spread**".to_string(),
                    Ok(false) => " (within spread)".to_string(),
                    Err(why) => format!(" ({why})"),
                },
                _ => String::new(),
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
