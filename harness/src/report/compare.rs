//! `delaybench compare BASE OTHER`: two runs side by side, strategy by
//! strategy, with the ratio OTHER / BASE of every figure, and a warning when
//! the runs did not use the same scenario, database or machine (then the
//! numbers are not like for like).

use super::{load, ms, Status, Summary};
use crate::runinfo::RunInfo;
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
    let _ = writeln!(
        out,
        "\nEach cell is `base → other (other/base)`; lateness in ms.\n"
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
        let (lb, lo) = (&b.lateness_us, &o.lateness_us);
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
            cell_ms(lb.p50, lo.p50),
            cell_ms(lb.p99, lo.p99),
            cell_ms(lb.max, lo.max),
            cell(b.cost.statements_per_cancel, o.cost.statements_per_cancel),
            cell(b.cost.cpu_us_per_cancel, o.cost.cpu_us_per_cancel),
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
    if base.scenario != other.scenario {
        out.push(format!(
            "the scenarios differ (`{}` seed {} vs `{}` seed {}): the figures are not like for like",
            base.scenario.name, base.scenario.seed, other.scenario.name, other.scenario.seed
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

fn cell_ms(base_us: u64, other_us: u64) -> String {
    format!(
        "{} → {}{}",
        ms(base_us),
        ms(other_us),
        ratio(base_us as f64, other_us as f64)
    )
}

fn cell(base: Option<f64>, other: Option<f64>) -> String {
    match (base, other) {
        (Some(b), Some(o)) => format!("{b:.1} → {o:.1}{}", ratio(b, o)),
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
    use crate::runinfo::Machine;
    use crate::scenario::{Scenario, QUICK};
    use crate::summary::DatabaseInfo;

    fn write_run(dir: &Path, seed: u64, runs: &[(&str, u64, u64)]) {
        let mut scenario = Scenario::parse(QUICK, "quick").unwrap();
        scenario.seed = seed;
        let info = RunInfo {
            run_id: dir.file_name().unwrap().to_string_lossy().into(),
            started_at: String::new(),
            delaybench_version: String::new(),
            git_commit: String::new(),
            command: Vec::new(),
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
        assert!(text.contains("0 → **2 (new)**"), "{text}");
        assert_eq!(comparison.new_anomalies, ["db-scan"]);
    }
}
