//! README.md's chaos section: the reference chaos run's missed cancels
//! per fault as its report prints them, the faults' labels, and whether
//! every remedied variant (`+fallback`, `+outbox`) came through clean.

use super::loaded::Set;
use crate::model::summary::{Status, Summary};
use crate::report::{self, as_ms, fig, markdown_table};
use anyhow::Result;
use std::fmt::Write as _;

/// The chaos run's faults table, as its report prints it.
pub(super) fn chaos_section(set: &Set, reference: &str) -> Result<String> {
    let mut out = String::new();
    let Some((folder, loaded)) = set.get("chaos") else {
        let _ = writeln!(out, "\nThe reference set has no chaos run.\n");
        return Ok(out);
    };
    let summaries = loaded.summaries();
    let first = summaries
        .iter()
        .find(|s| s.status == Status::Ok && !s.faults.is_empty());
    let _ =
        writeln!(
        out,
        "\nMeasured in [the reference chaos run]({reference}/{folder}/report.md) ({}, one trial, \
         {} instances, {} orders/s): missed cancels per fault, then the totals.\n",
        loaded.info().database_version.split(" on ").next().unwrap_or(""),
        loaded.info().scenario.instances,
        loaded.info().scenario.rate
    );
    if let Some(mut rows) = report::fault_rows(summaries) {
        // `#k` heads the fault columns; the labels follow the table.
        for cell in rows[0].iter_mut().filter(|c| c.starts_with('#')) {
            *cell = cell.split(' ').next().unwrap_or_default().to_string();
        }
        rows[0].push("p99 ms (n)".into());
        for row in rows.iter_mut().skip(1) {
            let p99 = summaries
                .iter()
                .find(|s| s.strategy.name() == row[0])
                .map(|s| format!("{} ({})", fig(s, "p99", as_ms), s.lateness_us.count))
                .unwrap_or_else(|| "-".into());
            row.push(p99);
        }
        markdown_table(&mut out, &rows);
    }
    if let Some(first) = first {
        let labels: Vec<String> = first
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| format!("#{} {}", i + 1, f.label))
            .collect();
        let _ = writeln!(out, "Faults: {}.\n", labels.join("; "));
    }
    let remedied: Vec<&Summary> = summaries
        .iter()
        .filter(|s| s.strategy.is_remedied())
        .collect();
    let lost: Vec<String> = remedied
        .iter()
        .filter(|s| s.status != Status::Ok || s.anomalies.total() > 0)
        .map(|s| match s.status {
            Status::Ok => format!("{} ({})", s.strategy, s.anomalies.total()),
            other => format!("{} (did not run: {})", s.strategy, other.as_str()),
        })
        .collect();
    let _ = if lost.is_empty() {
        writeln!(
            out,
            "Every one of the {} variants with `+fallback` or `+outbox` had 0 anomalies.\n",
            remedied.len()
        )
    } else {
        writeln!(
            out,
            "**Remedied variants with anomalies, or not run**: {}.\n",
            lost.join(", ")
        )
    };
    Ok(out)
}
