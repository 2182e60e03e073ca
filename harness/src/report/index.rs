//! `delaybench index DIR`: a static `DIR/index.html` over the run folders
//! under DIR (each folder holding a `run.json`, one or two levels down):
//! one row per run, oldest first, with links to its reports, its scenario,
//! commit and database, and each strategy's headline (p99 lateness and
//! anomalies for a run, the highest rate that held for a sweep); then, per
//! headline figure, a plot of every strategy across the runs. Read from the
//! JSON alone, like every report; no script, so it opens from the disk.

use super::palette;
use super::table::{shown, Shown};
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use crate::model::sweep::SweepResult;
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use strategies::registry::Variant;

/// One run folder as the index shows it.
struct Entry {
    /// The folder, relative to DIR (`20261205-141022-quick`).
    folder: String,
    info: RunInfo,
    kind: Kind,
    /// The reports the folder has (a sweep has no report.html).
    reports: Vec<&'static str>,
}

enum Kind {
    Run(Vec<Summary>),
    Sweep(SweepResult),
}

/// The run folders under `dir` (itself excluded), one or two levels down.
fn folders(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let children = |d: &Path| -> Result<Vec<PathBuf>> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .with_context(|| format!("reading {}", d.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        Ok(v)
    };
    for child in children(dir)? {
        if child.join("run.json").exists() {
            found.push(child);
        } else {
            found.extend(
                children(&child)?
                    .into_iter()
                    .filter(|g| g.join("run.json").exists()),
            );
        }
    }
    Ok(found)
}

fn entries(dir: &Path) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for path in folders(dir)? {
        let info = RunInfo::read(&path)?;
        let kind = if path.join("sweep.json").exists() {
            Kind::Sweep(SweepResult::read(&path)?)
        } else {
            Kind::Run(super::load(&path)?.1)
        };
        let folder = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        let reports = ["report.html", "report.md"]
            .into_iter()
            .filter(|r| path.join(r).exists())
            .collect();
        entries.push(Entry {
            folder,
            info,
            kind,
            reports,
        });
    }
    entries.sort_by(|a, b| (&a.info.started_at, &a.folder).cmp(&(&b.info.started_at, &b.folder)));
    Ok(entries)
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A headline figure of a run's strategies: its name, unit and reader.
struct Headline {
    title: &'static str,
    unit: &'static str,
    /// On a log scale (lateness spans µs to seconds).
    log: bool,
    value: fn(&Summary) -> Option<f64>,
}

const HEADLINES: [Headline; 2] = [
    Headline {
        title: "p99 lateness",
        unit: "ms",
        log: true,
        value: |s| shown(s, "p99").map(|Shown { value, .. }| value / 1000.0),
    },
    Headline {
        title: "anomalies",
        unit: "count",
        log: false,
        value: |s| shown(s, "anomalies").map(|Shown { value, .. }| value),
    },
];

/// The page over the runs in `dir`, which it names as `shown_as` (the
/// path a reader would type, wherever this process runs).
pub fn render(dir: &Path, shown_as: &str) -> Result<String> {
    let entries = entries(dir)?;
    let mut page = String::new();
    let title = format!("delaybench runs in {shown_as}");
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{t}</title><style>\
         body{{font-family:sans-serif;margin:2em;color:#222}}\
         table{{border-collapse:collapse;font-size:14px}}\
         td,th{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}}\
         td.n{{text-align:right}} .bad{{color:#b00;font-weight:bold}} .muted{{color:#777}}\
         svg{{background:#fff;border:1px solid #ddd;margin:1em 0}}\
         </style></head><body>\n<h1>{t}</h1>\n<p>{n} run folders, oldest first; written by \
         <code>delaybench index {d}</code> from their JSON. Each run's figures come from its \
         own scenario: compare strategies within a run, and a strategy across runs of one \
         scenario.</p>\n",
        t = esc(&title),
        n = entries.len(),
        d = esc(shown_as),
    );
    page.push_str(
        "<table>\n<tr><th>#</th><th>run</th><th>started</th><th>scenario</th><th>kind</th>\
         <th>commit</th><th>database</th><th>strategies: headline</th></tr>\n",
    );
    for (i, e) in entries.iter().enumerate() {
        let links = e
            .reports
            .iter()
            .map(|r| format!("<a href=\"{}/{r}\">{r}</a>", esc(&e.folder)))
            .collect::<Vec<_>>()
            .join(" · ");
        let (kind, headline) = match &e.kind {
            Kind::Run(summaries) => ("run", run_headline(summaries)),
            Kind::Sweep(result) => ("sweep", sweep_headline(result)),
        };
        let _ = writeln!(
            page,
            "<tr id=\"run-{n}\"><td class=\"n\">{n}</td><td><b>{id}</b><br>{links}</td>\
             <td>{started}</td><td>{scenario}</td><td>{kind}</td><td><code>{commit}</code></td>\
             <td>{db}</td><td>{headline}</td></tr>",
            n = i + 1,
            id = esc(&e.info.run_id),
            // `2026-12-05T14:10:22.22…+00:00` to the minute.
            started = esc(&e
                .info
                .started_at
                .replace('T', " ")
                .chars()
                .take(16)
                .collect::<String>()),
            scenario = esc(&e.info.scenario.name),
            commit = esc(&e.info.git_commit.chars().take(7).collect::<String>()),
            db = esc(&e.info.database_kind),
        );
    }
    page.push_str("</table>\n");
    let runs: Vec<(usize, &Vec<Summary>)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.kind {
            Kind::Run(s) => Some((i + 1, s)),
            Kind::Sweep(_) => None,
        })
        .collect();
    for headline in &HEADLINES {
        page.push_str(&trend(headline, &runs));
    }
    page.push_str("</body></html>\n");
    Ok(page)
}

fn run_headline(summaries: &[Summary]) -> String {
    summaries
        .iter()
        .map(|s| {
            let mut name = esc(s.strategy.name());
            if s.strategy.info.is_teaching() {
                name = format!("✖ {name} <span class=\"muted\">(teaching)</span>");
            }
            if s.status != Status::Ok {
                return format!("{name} <span class=\"muted\">{}</span>", s.status.as_str());
            }
            let p99 = shown(s, "p99").map_or("p99 -".into(), |f| {
                format!("p99 {:.1} ms", f.value / 1000.0)
            });
            let anomalies = s.anomalies.total();
            let flag = if anomalies > 0 {
                format!(" <span class=\"bad\">{anomalies} anomalies</span>")
            } else {
                String::new()
            };
            format!("{name} {p99}{flag}")
        })
        .collect::<Vec<_>>()
        .join("<br>")
}

fn sweep_headline(result: &SweepResult) -> String {
    result
        .strategies
        .iter()
        .map(|s| {
            let held = s
                .max_rate
                .map_or("no step held".into(), |r| format!("held {r:.0}/s"));
            format!("{} {held}", esc(s.strategy.name()))
        })
        .collect::<Vec<_>>()
        .join("<br>")
}

/// One headline across the runs: x = the run's number in the table, a
/// line per strategy, a point per run it ran in (its value in a tooltip).
fn trend(headline: &Headline, runs: &[(usize, &Vec<Summary>)]) -> String {
    let (w, left, right, top, bottom) = (1000.0, 70.0, 260.0, 30.0, 40.0);
    let mut series: Vec<(Variant, Vec<(usize, f64)>)> = Vec::new();
    for (n, summaries) in runs {
        for s in summaries.iter().filter(|s| s.status == Status::Ok) {
            let Some(v) = (headline.value)(s) else {
                continue;
            };
            match series.iter_mut().find(|(k, _)| *k == s.strategy) {
                Some((_, points)) => points.push((*n, v)),
                None => series.push((s.strategy, vec![(*n, v)])),
            }
        }
    }
    // Tall enough for a legend line per strategy.
    let h = (top + 16.0 * series.len() as f64 + bottom).max(320.0);
    let mut out = format!(
        "<h2>{} ({}) across the runs</h2>\n",
        headline.title, headline.unit
    );
    if series.is_empty() {
        out.push_str("<p class=\"muted\">no run with this figure</p>\n");
        return out;
    }
    let values = series.iter().flat_map(|(_, p)| p.iter().map(|(_, v)| *v));
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // The y range: whole powers of ten on a log scale, 0 up otherwise.
    let floor = |v: f64| v.max(0.01).log10();
    let (a, b) = if headline.log {
        let a = floor(lo).floor();
        (a, floor(hi).ceil().max(a + 1.0))
    } else {
        (0.0, hi.max(1.0))
    };
    let scale = |v: f64| {
        if headline.log {
            (floor(v) - a) / (b - a)
        } else {
            v / b
        }
    };
    let first = runs.first().map_or(1, |(n, _)| *n) as f64;
    let last = runs.last().map_or(1, |(n, _)| *n) as f64;
    let x = |n: usize| {
        left + (w - left - right)
            * if last > first {
                (n as f64 - first) / (last - first)
            } else {
                0.5
            }
    };
    let y = |v: f64| top + (h - top - bottom) * (1.0 - scale(v));
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-size=\"12\" role=\"img\" aria-label=\"{} across the runs\">",
        headline.title
    );
    // Axes, and the y ticks: powers of ten on a log scale, quarters otherwise.
    let _ = write!(
        out,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"#999\"/>\
         <line x1=\"{left}\" y1=\"{b}\" x2=\"{}\" y2=\"{b}\" stroke=\"#999\"/>",
        h - bottom,
        w - right,
        b = h - bottom
    );
    let ticks: Vec<f64> = if headline.log {
        (a as i32..=b as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        (0..=4).map(|q| b * q as f64 / 4.0).collect()
    };
    for t in ticks {
        let _ = write!(
            out,
            "<line x1=\"{}\" y1=\"{yy:.1}\" x2=\"{}\" y2=\"{yy:.1}\" stroke=\"#eee\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left,
            w - right,
            left - 6.0,
            y(t) + 4.0,
            if t < 1.0 {
                format!("{t}")
            } else {
                format!("{t:.0}")
            },
            yy = y(t)
        );
    }
    for (n, _) in runs {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">#{n}</text>",
            x(*n),
            h - bottom + 16.0
        );
    }
    for (i, (variant, points)) in series.iter().enumerate() {
        let name = variant.name();
        let style = palette::style(*variant);
        let color = format!("rgb({},{},{})", style.color.0, style.color.1, style.color.2);
        let dash = if style.dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let path: Vec<String> = points
            .iter()
            .map(|(n, v)| format!("{:.1},{:.1}", x(*n), y(*v)))
            .collect();
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            path.join(" ")
        );
        for (n, v) in points {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\">\
                 <title>{} run #{n}: {v:.2} {}</title></circle>",
                x(*n),
                y(*v),
                esc(name),
                headline.unit
            );
        }
        let ly = top + 16.0 * i as f64;
        let _ = write!(
            out,
            "<line x1=\"{}\" y1=\"{ly}\" x2=\"{}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            w - right + 10.0,
            w - right + 30.0,
            w - right + 36.0,
            ly + 4.0,
            esc(name)
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{left}\" y=\"18\">{} ({}{}); x: the run's # in the table</text></svg>",
        headline.title,
        headline.unit,
        if headline.log { ", log scale" } else { "" }
    );
    out
}

/// Writes `dir/index.html`; returns its path.
pub fn write(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("index.html");
    std::fs::write(&path, render(dir, &dir.display().to_string())?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
