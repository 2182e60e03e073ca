//! What differs between the two runs' setups (repetitions, scenario
//! fields, database, machine), as the warnings above the table: where
//! they differ, the figures are not like for like.

use crate::model::run_info::RunInfo;

/// What differs between the runs' setups, as sentences.
pub(super) fn differences(base: &RunInfo, other: &RunInfo) -> Vec<String> {
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
