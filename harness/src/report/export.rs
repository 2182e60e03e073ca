//! `--export-csv`, `--export-json` and `--export-markdown` (as hyperfine
//! has them): one table built once, from the same JSON the reports read,
//! and each format only renders it ([`Exporter`]).
//!
//! A run's table has a row per strategy and a column per figure of
//! `summary.json`, in the figure's own unit (lateness in µs, as the JSON
//! has it: `p99_us`); a repeated run adds each figure's `_min` and `_max`
//! over the repetitions beside its median. A sweep's has a row per step.
//! Numbers are numbers (no unit, no rounding, empty where there is none),
//! so a spreadsheet or a script reads them as they are.

use super::table::{shown, Shown};
use crate::model::summary::{figures, Status, Summary};
use crate::model::sweep::SweepResult;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The export flags of `run`, `sweep`, `report` and `compare`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ExportArgs {
    /// Write the results table as CSV to FILE (a row per strategy, or per sweep step).
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Write the results table as JSON to FILE (`columns` and `rows`, numbers as numbers).
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Write the results table as a Markdown table to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
}

/// The table every format renders: column names, and rows of cells that
/// are a string, a number or null.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportTable {
    /// What the rows are (`run 20261206-…` or `sweep …`), for JSON.
    pub source: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

/// One output format.
pub trait Exporter {
    fn render(&self, table: &ExportTable) -> String;
}

pub struct Csv;
pub struct Json;
pub struct Markdown;

/// A cell as text: numbers in full, null as empty.
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Exporter for Csv {
    /// RFC 4180: a cell with a comma, quote or line break is quoted, its
    /// quotes doubled.
    fn render(&self, table: &ExportTable) -> String {
        let cell = |s: String| {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s
            }
        };
        let mut out = String::new();
        let line = |cells: Vec<String>| cells.into_iter().map(cell).collect::<Vec<_>>().join(",");
        out.push_str(&line(table.columns.clone()));
        out.push_str("\r\n");
        for row in &table.rows {
            out.push_str(&line(row.iter().map(text).collect()));
            out.push_str("\r\n");
        }
        out
    }
}

impl Exporter for Json {
    fn render(&self, table: &ExportTable) -> String {
        let rows: Vec<Value> = table
            .rows
            .iter()
            .map(|row| {
                Value::Object(
                    table
                        .columns
                        .iter()
                        .cloned()
                        .zip(row.iter().cloned())
                        .collect(),
                )
            })
            .collect();
        let doc = json!({
            "export_version": 1,
            "source": table.source,
            "columns": table.columns,
            "rows": rows,
        });
        serde_json::to_string_pretty(&doc).expect("JSON of JSON values") + "\n"
    }
}

impl Exporter for Markdown {
    fn render(&self, table: &ExportTable) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "| {} |", table.columns.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(table.columns.len()));
        for row in &table.rows {
            let cells: Vec<String> = row.iter().map(|v| text(v).replace('|', "\\|")).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }
}

/// A figure's column name: its unit where the JSON keeps one (`p99_us`).
fn column(key: &str) -> String {
    const IN_US: [&str; 8] = [
        "p50",
        "p90",
        "p99",
        "p999",
        "max",
        "commit_p99",
        "lag_p99",
        "schedule_p99",
    ];
    if IN_US.contains(&key) {
        format!("{key}_us")
    } else {
        key.to_string()
    }
}

/// The figures' names, in [`figures`]' order (the same for every summary).
fn figure_keys(summaries: &[Summary]) -> Vec<&'static str> {
    summaries
        .first()
        .map(|s| figures(s).into_iter().map(|(k, _)| k).collect())
        .unwrap_or_default()
}

/// A figure as shown, of a strategy that ran (a skipped or failed one has
/// none, whatever its summary holds).
fn measured(s: &Summary, key: &str) -> Option<Shown> {
    (s.status == Status::Ok).then(|| shown(s, key)).flatten()
}

fn number(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |v| json!(v))
}

/// A run's table: a row per strategy, its status, and every figure.
pub fn run_table(run_id: &str, summaries: &[Summary]) -> ExportTable {
    let keys = figure_keys(summaries);
    let repeated = summaries.iter().any(|s| s.repeats.is_some());
    let mut columns: Vec<String> = vec!["strategy".into(), "status".into(), "reason".into()];
    for key in &keys {
        columns.push(column(key));
        if repeated {
            columns.push(format!("{}_min", column(key)));
            columns.push(format!("{}_max", column(key)));
        }
    }
    let rows = summaries
        .iter()
        .map(|s| {
            let mut row = vec![
                json!(s.strategy.name()),
                json!(s.status.as_str()),
                s.reason.as_ref().map_or(Value::Null, |r| json!(r)),
            ];
            for key in &keys {
                let figure = measured(s, key);
                row.push(number(figure.as_ref().map(|f| f.value)));
                if repeated {
                    let spread = figure.and_then(|f| f.spread);
                    row.push(number(spread.map(|(min, _)| min)));
                    row.push(number(spread.map(|(_, max)| max)));
                }
            }
            row
        })
        .collect();
    ExportTable {
        source: format!("run {run_id}"),
        columns,
        rows,
    }
}

/// Two runs side by side (`compare`): a row per strategy in both, and for
/// each figure the base's value, the other's and their ratio (other / base;
/// empty where either has none or the base is 0).
pub fn compare_table(
    (base_id, base): (&str, &[Summary]),
    (other_id, other): (&str, &[Summary]),
) -> ExportTable {
    let keys = figure_keys(base);
    let mut columns = vec!["strategy".to_string()];
    for key in &keys {
        let c = column(key);
        columns.extend([
            format!("base_{c}"),
            format!("other_{c}"),
            format!("ratio_{c}"),
        ]);
    }
    let value = |s: &Summary, key: &str| measured(s, key).map(|f| f.value);
    let rows = base
        .iter()
        .filter_map(|b| {
            let o = other.iter().find(|o| o.strategy == b.strategy)?;
            let mut row = vec![json!(b.strategy.name())];
            for key in &keys {
                let (x, y) = (value(b, key), value(o, key));
                let ratio = match (x, y) {
                    (Some(x), Some(y)) if x != 0.0 => Some(y / x),
                    _ => None,
                };
                row.extend([number(x), number(y), number(ratio)]);
            }
            Some(row)
        })
        .collect();
    ExportTable {
        source: format!("compare {base_id} (base) with {other_id}"),
        columns,
        rows,
    }
}

/// A sweep's table: a row per step of each strategy.
pub fn sweep_table(result: &SweepResult) -> ExportTable {
    let columns = [
        "strategy",
        "rate",
        "pending",
        "storm_orders",
        "holds",
        "achieved_rate",
        "cancels",
        "p50_us",
        "p99_us",
        "max_us",
        "generator_lag_p99_us",
        "schedule_path_p99_us",
        "anomalies",
        "missed_cancels",
        "server_rows_read_per_cancel",
        "cpu_us_per_cancel",
        "reasons",
        "folder",
    ];
    let mut rows = Vec::new();
    for s in &result.strategies {
        for st in &s.steps {
            rows.push(vec![
                json!(s.strategy.name()),
                json!(st.rate),
                json!(st.pending),
                json!(st.storm_orders),
                json!(st.holds),
                json!(st.achieved_rate),
                json!(st.cancels),
                json!(st.p50_us),
                json!(st.p99_us),
                json!(st.max_us),
                json!(st.generator_lag_p99_us),
                json!(st.schedule_path_p99_us),
                json!(st.anomalies),
                json!(st.missed_cancels),
                json!(st.server_rows_read_per_cancel),
                json!(st.cpu_us_per_cancel),
                json!(st.reasons.join("; ")),
                json!(st.folder),
            ]);
        }
    }
    ExportTable {
        source: format!("sweep {}", result.run_id),
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows,
    }
}

/// Writes `table` in every format `args` asks for; returns the files.
pub fn write(args: &ExportArgs, table: &ExportTable) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let formats: [(&Option<PathBuf>, &dyn Exporter); 3] = [
        (&args.export_csv, &Csv),
        (&args.export_json, &Json),
        (&args.export_markdown, &Markdown),
    ];
    for (path, exporter) in formats {
        if let Some(path) = path {
            write_file(path, &exporter.render(table))?;
            written.push(path.clone());
        }
    }
    Ok(written)
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing the export {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> ExportTable {
        ExportTable {
            source: "run x".into(),
            columns: vec!["strategy".into(), "p99_us".into(), "reason".into()],
            rows: vec![
                vec![json!("db-scan"), json!(245000.5), Value::Null],
                vec![
                    json!("redis-zset"),
                    Value::Null,
                    json!("needs \"Redis\", a, b"),
                ],
            ],
        }
    }

    #[test]
    fn csv_quotes_what_needs_it_and_leaves_numbers_whole() {
        let csv = Csv.render(&table());
        assert_eq!(
            csv,
            "strategy,p99_us,reason\r\ndb-scan,245000.5,\r\nredis-zset,,\"needs \"\"Redis\"\", a, b\"\r\n"
        );
    }

    #[test]
    fn json_keeps_numbers_and_nulls() {
        let doc: Value = serde_json::from_str(&Json.render(&table())).unwrap();
        assert_eq!(doc["export_version"], 1);
        assert_eq!(doc["rows"][0]["p99_us"], 245000.5);
        assert!(doc["rows"][1]["p99_us"].is_null());
        assert_eq!(doc["columns"][2], "reason");
    }

    #[test]
    fn markdown_has_a_row_per_strategy() {
        let md = Markdown.render(&table());
        assert_eq!(md.lines().count(), 4, "{md}");
        assert!(md.starts_with("| strategy | p99_us | reason |\n|---|---|---|\n"));
    }
}
