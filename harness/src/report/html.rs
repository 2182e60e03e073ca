//! `report.html`: one self-contained page (inline CSS and SVG, no scripts,
//! nothing fetched) with the tables of `report.md` plus the plots (see
//! `figures.rs`), the same drawings as the files in `plots/`.

use super::fault_table::FAULT_NOTES;
use super::plots::{DrawnFigure, Section};
use super::storm_table::STORM_NOTES;
use super::table::{anomaly_counts, RunTables, MEASUREMENT_NOTES, TRADEOFF_NOTES};
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use std::fmt::Write as _;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}td.bad{background:#fbd5d5;font-weight:bold}
.skipped{color:#666}.plots svg{max-width:100%;height:auto}.bars{display:flex;flex-wrap:wrap}
code{background:#f3f3f3;padding:0 3px}p.note{font-size:13px;color:#444}
.wide{overflow-x:auto}td{white-space:nowrap}td.text{white-space:normal;min-width:24em;text-align:left}";

pub fn html(
    info: &RunInfo,
    summaries: &[Summary],
    tables: &RunTables,
    plots: &[DrawnFigure],
) -> String {
    let ran: Vec<(usize, &Summary)> = summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.status == Status::Ok)
        .collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>delaybench {id}</title><style>{STYLE}</style></head><body>\n\
         <h1>delaybench run <code>{id}</code></h1>\n",
        id = esc(&info.run_id)
    );
    header(&mut out, &tables.facts);

    let warned = |header: &[String], col: usize, cell: &str| {
        header.get(col).is_some_and(|h| h == "warnings") && cell != "-"
    };
    let _ = writeln!(out, "<h2>Results</h2>");
    let results = &tables.results;
    table(&mut out, results, |col, cell| {
        warned(&results[0], col, cell)
    });
    if let Some(wrong) = &tables.teaching {
        let _ = writeln!(
            out,
            "<h2>Deliberately wrong (teaching variants)</h2>\n<p class=\"note\">Known mistakes \
             reproduced on purpose so the checker can show their damage. Not options: never \
             choose one. Their lines in the plots are marked \u{2716}.</p>"
        );
        table(&mut out, wrong, |col, cell| warned(&wrong[0], col, cell));
    }
    for s in summaries.iter().filter(|s| s.status != Status::Ok) {
        let _ = writeln!(
            out,
            "<p class=\"skipped\"><b>{}</b> {}: {}</p>",
            esc(s.strategy.name()),
            s.status.as_str(),
            esc(s.reason.as_deref().unwrap_or("no reason recorded"))
        );
    }

    if !ran.is_empty() {
        let _ = writeln!(out, "<h2>Trade-offs, measured</h2>");
        let tradeoffs = &tables.tradeoffs;
        table(&mut out, tradeoffs, |col, cell| {
            (tradeoffs[0][col] == "anomalies" && cell != "0") || warned(&tradeoffs[0], col, cell)
        });
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(TRADEOFF_NOTES));
        if let Some(rows) = &tables.measurement {
            let _ = writeln!(out, "<h2>The measurement's own cost</h2>");
            table(&mut out, rows, |col, cell| {
                rows[0][col].starts_with("p99: apart") && cell.contains("yes")
            });
            let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(MEASUREMENT_NOTES));
        }
        if let Some(faults) = &tables.faults {
            let _ = writeln!(out, "<h2>Faults: what each strategy lost, and where</h2>");
            let last = faults[0].len() - 1;
            table(&mut out, faults, |col, cell| {
                col > 0 && col != last - 1 && cell != "0" && cell != "n/a" && cell != "-"
            });
            let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(FAULT_NOTES));
        }
        if let Some(storm) = &tables.storm {
            let _ = writeln!(
                out,
                "<h2>Deadline storm: draining orders due in one instant</h2>"
            );
            // The markdown's emphasis becomes the cell's warning class.
            let plain: Vec<Vec<String>> = storm
                .iter()
                .map(|row| row.iter().map(|c| c.replace("**", "")).collect())
                .collect();
            table(&mut out, &plain, |col, cell| {
                storm.iter().skip(1).any(|row| {
                    row.get(col)
                        .is_some_and(|c| c.contains("**") && c.replace("**", "") == cell)
                })
            });
            let _ = writeln!(
                out,
                "<p class=\"note\">{}</p>",
                esc(&STORM_NOTES.replace("**", ""))
            );
        }
        warnings(&mut out, &ran);
        anomalies(&mut out, &ran);
        plots_section(&mut out, plots);
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">Per-strategy details (cancels by path, payments, generator health, \
         capabilities and their notes) are in <code>report.md</code>; the raw numbers in \
         <code>run.json</code> and <code>&lt;strategy&gt;/summary.json</code>; full lateness \
         distributions in <code>&lt;strategy&gt;/lateness.hgrm</code>; every plot as SVG and PNG in \
         <code>plots/</code>.</p>\n</body></html>"
    );
    out
}

/// Every warning and worker event of every strategy, in full.
fn warnings(out: &mut String, ran: &[(usize, &Summary)]) {
    let mut items = Vec::new();
    for (_, s) in ran {
        for w in &s.warnings {
            items.push(format!("<b>{}</b>: {}", esc(s.strategy.name()), esc(w)));
        }
        if let Some(w) = &s.generator.warning {
            items.push(format!(
                "<b>{}</b> generator: {}",
                esc(s.strategy.name()),
                esc(w)
            ));
        }
        for e in &s.worker_events {
            items.push(format!(
                "<b>{}</b>: {}",
                esc(s.strategy.name()),
                esc(&e.describe())
            ));
        }
        for f in s.faults.iter().filter(|f| f.error.is_some()) {
            items.push(format!(
                "<b>{}</b> fault failed: {}",
                esc(s.strategy.name()),
                esc(&f.describe())
            ));
        }
    }
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>Warnings</h2>\n<ul class=\"warnings\">");
    for item in items {
        let _ = writeln!(out, "<li>{item}</li>");
    }
    let _ = writeln!(out, "</ul>");
}

fn header(out: &mut String, facts: &[(String, bool)]) {
    let lines: Vec<String> = facts
        .iter()
        .map(|(line, stressed)| {
            if *stressed {
                format!("<b>{}</b>", esc(line))
            } else {
                esc(line)
            }
        })
        .collect();
    let _ = writeln!(out, "<p>{}</p>", lines.join("<br>\n"));
}

/// Each anomaly per strategy, non-zero cells marked, with example ids.
fn anomalies(out: &mut String, ran: &[(usize, &Summary)]) {
    let _ = writeln!(out, "<h2>Anomalies</h2>");
    let mut rows = vec![std::iter::once("strategy".to_string())
        .chain(
            anomaly_counts(&Default::default())
                .iter()
                .map(|(name, _)| name.to_string()),
        )
        .collect::<Vec<_>>()];
    for (_, s) in ran {
        rows.push(
            std::iter::once(s.strategy.name().to_string())
                .chain(
                    anomaly_counts(&s.anomalies)
                        .iter()
                        .map(|(_, n)| n.to_string()),
                )
                .collect(),
        );
    }
    table(out, &rows, |col, cell| col > 0 && cell != "0");
    for (_, s) in ran.iter().filter(|(_, s)| s.anomalies.total() > 0) {
        let _ = writeln!(
            out,
            "<p class=\"note\"><b>{}</b> examples (order ids; SKUs for stock): <code>{}</code></p>",
            esc(s.strategy.name()),
            esc(&serde_json::to_string(&s.anomaly_examples).unwrap_or_default())
        );
    }
}

/// The plots, embedded: lateness first, then the cost charts side by side.
fn plots_section(out: &mut String, plots: &[DrawnFigure]) {
    if plots.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>Plots</h2><div class=\"plots\">");
    let of = |section: Section| {
        plots
            .iter()
            .filter(move |p| p.figure.section == section)
            .map(|p| p.svg.as_str())
    };
    out.extend(of(Section::Lateness));
    let _ = writeln!(out, "<div class=\"bars\">");
    out.extend(of(Section::Cost));
    let _ = writeln!(out, "</div></div>");
}

/// An HTML table, header first; `bad(column, cell)` marks a cell.
fn table(out: &mut String, rows: &[Vec<String>], bad: impl Fn(usize, &str) -> bool) {
    // Figures stay on one line and a wide table scrolls sideways; a
    // column of prose (warnings, reasons) wraps in a readable width
    // instead of squeezing every row into a tall narrow cell.
    let prose: Vec<bool> = (0..rows[0].len())
        .map(|col| {
            rows[1..]
                .iter()
                .any(|r| r.get(col).is_some_and(|c| c.len() > 40))
        })
        .collect();
    let _ = write!(out, "<div class=\"wide\"><table><tr>");
    for cell in &rows[0] {
        let _ = write!(out, "<th>{}</th>", esc(cell));
    }
    let _ = writeln!(out, "</tr>");
    for row in &rows[1..] {
        let _ = write!(out, "<tr>");
        for (col, cell) in row.iter().enumerate() {
            let class = match (bad(col, cell), prose.get(col) == Some(&true)) {
                (true, true) => " class=\"bad text\"",
                (true, false) => " class=\"bad\"",
                (false, true) => " class=\"text\"",
                (false, false) => "",
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        let _ = writeln!(out, "</tr>");
    }
    let _ = writeln!(out, "</table></div>");
}

/// Escapes text for HTML element content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lateness::{hgrm, new_histogram, LatenessBucket};
    use crate::model::run_info::Machine;
    use crate::model::summary::DatabaseInfo;
    use crate::scenario::{Scenario, QUICK};
    use std::path::Path;
    use strategies::checker::Anomaly;

    fn run_info(strategies: &[&str]) -> RunInfo {
        RunInfo {
            run_id: "test-run".into(),
            started_at: String::new(),
            delaybench_version: String::new(),
            git_commit: "abc".into(),
            build_profile: None,
            command: Vec::new(),
            repeat: 1,
            scenario_source: "quick".into(),
            scenario: Scenario::parse(QUICK, "quick").unwrap(),
            seed: 42,
            strategies: strategies.iter().map(|s| s.to_string()).collect(),
            database_kind: "sqlite".into(),
            database_url: "sqlite://x".into(),
            database_version: "3".into(),
            services: Default::default(),
            plugin: None,
            machine: Machine::default(),
        }
    }

    /// A strategy that ran, with its `lateness.hgrm` written to `dir`.
    fn ran(dir: &Path, name: &str, late_ms: &[u64]) -> Summary {
        let mut s = Summary::not_run(
            name.parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        s.reason = None;
        let mut h = new_histogram();
        for ms in late_ms {
            h.record(ms * 1000).unwrap();
        }
        s.lateness_us = crate::model::lateness::stats(&h);
        s.lateness_over_time = vec![LatenessBucket {
            second: 3,
            count: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
            histogram: None,
        }];
        s.cost.statements_per_cancel = Some(5.0);
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("lateness.hgrm"), hgrm(&h)).unwrap();
        s
    }

    #[test]
    fn page_marks_every_anomaly_and_draws_each_strategy_that_ran() {
        let dir = tempfile::tempdir().unwrap();
        let clean = ran(dir.path(), "db-scan", &[100, 200, 240]);
        let mut broken = ran(dir.path(), "redis-zset", &[1, 2, 3]);
        broken.anomalies.set(Anomaly::DuplicateReleases, 7);
        broken
            .anomaly_examples
            .set(Anomaly::DuplicateReleases, vec![11, 12]);
        let skipped = Summary::not_run(
            "rabbit-ttl".parse().unwrap(),
            Status::Skipped,
            "RabbitMQ <unreachable> & down".into(),
            DatabaseInfo::default(),
        );
        let summaries = [clean, broken, skipped];
        let info = run_info(&["db-scan", "redis-zset", "rabbit-ttl"]);
        let figures = super::super::figures::figures(dir.path(), &info, &summaries);
        let drawn = super::super::plots::write_files(dir.path(), &figures).unwrap();
        let tables = RunTables::build(&info, &summaries, &[]);
        let page = html(&info, &summaries, &tables, &drawn);

        assert!(page.contains("Trade-offs, measured"));
        // Two lateness plots and one cost chart, each naming both strategies.
        assert_eq!(page.matches("<svg").count(), 3, "{page}");
        let cdf = &page[page.find("<svg").unwrap()..];
        assert!(cdf.contains("db-scan") && cdf.contains("redis-zset"));
        // The duplicate releases are marked in the anomaly table and in the
        // trade-off table's total, and their examples are listed.
        assert!(page.contains("<td class=\"bad\">7</td>"), "{page}");
        assert_eq!(page.matches("class=\"bad\"").count(), 2, "{page}");
        assert!(page.contains("&quot;duplicate_releases&quot;:[11,12]"));
        // The skipped strategy keeps its reason, escaped.
        assert!(page.contains("<b>rabbit-ttl</b> skipped: RabbitMQ &lt;unreachable&gt; &amp; down"));
        assert!(!page.contains("<unreachable>"));
    }
}
