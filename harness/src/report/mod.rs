//! Reports rendered from `run.json` and every `<strategy>/summary.json` on
//! disk (the JSON is the source of truth, so reports can be regenerated with
//! `delaybench report DIR`): `report.md`, `report.html` with plots, the plots
//! as SVG and PNG files in `plots/`, and the terminal table. The tables
//! both reports share are built once, in `table`.

mod backlog_table;
mod compare;
pub mod export;
mod fault_table;
mod figures;
mod folder;
mod html;
pub mod index;
mod markdown;
mod palette;
mod plots;
mod storm_table;
pub mod sweep;
mod table;
mod text_table;
pub(crate) use markdown::table as markdown_table;

use crate::model::summary::{Status, Summary};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;
use table::rows;

pub(crate) use backlog_table::bytes_text;
pub use compare::{compare, CompareOptions, Regressed};
pub(crate) use fault_table::fault_rows;
pub use folder::{copy_folder, load, load_twins};
pub(crate) use storm_table::{storm_drain_text, STORM_NOTES};
pub(crate) use table::{as_count, as_ms, fig, rows_read_text, shown, RunTables};

/// Writes `report.md`, `report.html` and the plot files in `plots/` for the
/// run in `run_dir` (for a sweep folder, its `report.md` and plots).
pub fn write(run_dir: &Path) -> Result<()> {
    if run_dir.join("sweep.json").exists() {
        let result = crate::model::sweep::SweepResult::read(run_dir)?;
        return sweep::write(run_dir, &result);
    }
    let (info, summaries) = load(run_dir)?;
    let twins = load_twins(run_dir, &info)?;
    let tables = RunTables::build(&info, &summaries, &twins);
    let figures = figures::figures(run_dir, &info, &summaries);
    let drawn = plots::write_files(run_dir, &figures)?;
    let path = run_dir.join("report.md");
    std::fs::write(
        &path,
        markdown::markdown(&info, &summaries, &tables, &figures),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    let path = run_dir.join("report.html");
    std::fs::write(&path, html::html(&info, &summaries, &tables, &drawn))
        .with_context(|| format!("writing {}", path.display()))
}

/// The line that tells the user where a run folder's report went.
pub fn written_to(run_dir: &Path) -> String {
    format!(
        "report: {} (and report.html; plots as SVG and PNG in {})",
        run_dir.join("report.md").display(),
        run_dir.join("plots").display()
    )
}

/// The columns of the narrow terminal table (the default): what fits an
/// 80-column terminal and answers "how late, and did anything break".
/// `--wide` shows every column of [`rows`], warnings included.
const NARROW: [&str; 9] = [
    "strategy",
    "status",
    "created",
    "cancelled",
    "n",
    "p50 ms",
    "p99 ms",
    "max ms",
    "anomalies",
];

/// The table for the terminal: figures right-aligned, text left; the
/// narrow columns unless `wide`, then a strategy's warnings (a wide
/// table's last column) as lines under it.
pub fn terminal_table(summaries: &[Summary], wide: bool) -> String {
    let mut table = rows(summaries);
    if !wide {
        let keep: Vec<usize> = table[0]
            .iter()
            .enumerate()
            .filter(|(_, name)| NARROW.contains(&name.as_str()))
            .map(|(i, _)| i)
            .collect();
        table = table
            .into_iter()
            .map(|row| keep.iter().map(|&i| row[i].clone()).collect())
            .collect();
    }
    let mut out = text_table::render(&table[0], &table[1..]);
    if !wide {
        for s in summaries.iter().filter(|s| !s.warnings.is_empty()) {
            for warning in &s.warnings {
                let _ = writeln!(out, "{} warning: {warning}", s.strategy);
            }
        }
        let _ = writeln!(
            out,
            "(--wide for every column: paid, pending, paid late, p90, p99.9, p99 at commit, \
             statements and attempts per cancel)"
        );
    }
    for s in summaries.iter().filter(|s| s.status != Status::Ok) {
        let _ = writeln!(
            out,
            "{} {}: {}",
            s.strategy,
            s.status.as_str(),
            s.reason.as_deref().unwrap_or("")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    /// "Rendered from the JSON alone" holds by construction: the report
    /// modules import the data model, the scenario it embeds and the
    /// faults' records (`FaultRecord`, read by the rules of each fault's
    /// kind, which live with the kind), nothing of the runtime side
    /// (driver, instances, fault injection, services).
    #[test]
    fn reports_read_only_the_data_model() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report");
        let mut files = 0;
        // The report's files, those of its folders (`plots/`) included.
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap().flatten() {
                if entry.path().is_dir() {
                    dirs.push(entry.path());
                    continue;
                }
                let text = std::fs::read_to_string(entry.path()).unwrap();
                files += 1;
                for (n, line) in text.lines().enumerate() {
                    for (at, _) in line.match_indices("crate::") {
                        let used = &line[at + "crate::".len()..];
                        assert!(
                            used.starts_with('"') // this test's own pattern
                            || used.starts_with("model")
                            || used.starts_with("scenario")
                            || used.starts_with("exit::") // what an error means, a leaf
                            || used.starts_with("faults::Fault"),
                            "{}:{}: a report uses the runtime side: {line}",
                            entry.path().display(),
                            n + 1
                        );
                    }
                }
            }
        }
        assert!(files >= 5);
    }
}
