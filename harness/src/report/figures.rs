//! What a run's plots show, from its JSON and `lateness.hgrm` files: the
//! lateness CDF, lateness over time with the warm-up and the faults
//! shaded, lateness by timeout, and the cost per cancel. `report.html`
//! embeds them, `report.md` links them, both from `plots/`.

use super::plots::{self, Band, BandKind, Chart, ClassLateness, Figure, Line, Section};
use super::{is_teaching, Status, Summary};
use crate::model::records::FaultRecord;
use crate::model::run_info::RunInfo;
use crate::model::WorkerEventKind;
use crate::scenario::FaultKind;
use std::path::Path;

/// The run's figures, in the order the page shows them. Colours follow
/// the strategies' order in the run, skipped ones included, so a strategy
/// keeps its colour from run to run.
pub fn figures(run_dir: &Path, info: &RunInfo, summaries: &[Summary]) -> Vec<Figure> {
    let ran: Vec<(usize, &Summary)> = summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.status == Status::Ok)
        .collect();
    let mut figures = Vec::new();
    if ran.is_empty() {
        return figures;
    }
    if let Some(chart) = lateness_cdf(run_dir, &ran) {
        figures.push(Figure {
            name: "lateness-cdf",
            title: "Lateness CDF".into(),
            section: Section::Lateness,
            chart,
        });
    }
    if let Some(chart) = lateness_over_time(info, &ran) {
        figures.push(Figure {
            name: "lateness-over-time",
            title: "p99 lateness over time".into(),
            section: Section::Lateness,
            chart,
        });
    }
    if let Some(chart) = lateness_by_timeout(&ran) {
        figures.push(Figure {
            name: "lateness-by-timeout",
            title: "Lateness by timeout".into(),
            section: Section::Lateness,
            chart,
        });
    }
    for cost in COSTS {
        let bars: Vec<(String, usize, f64)> = ran
            .iter()
            .filter_map(|&(color, s)| (cost.value)(s).map(|v| (plot_name(s), color, v)))
            .collect();
        if !bars.is_empty() {
            figures.push(Figure {
                name: cost.name,
                title: cost.caption.into(),
                section: Section::Cost,
                chart: plots::bars(cost.caption, cost.unit, bars),
            });
        }
    }
    figures
}

/// A strategy's name in plots; teaching variants are marked.
fn plot_name(s: &Summary) -> String {
    if is_teaching(&s.strategy) {
        format!("\u{2716} {}", s.strategy)
    } else {
        s.strategy.clone()
    }
}

/// Lateness by percentile from each strategy's `lateness.hgrm`; `None`
/// when no strategy has one.
fn lateness_cdf(run_dir: &Path, ran: &[(usize, &Summary)]) -> Option<Chart> {
    let mut lines = Vec::new();
    let mut max_nines = 1f64;
    for &(color, s) in ran {
        let path = run_dir.join(&s.strategy).join("lateness.hgrm");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let count = s.lateness_us.count;
        if count == 0 {
            continue;
        }
        // The last 1/count of the distribution is the max: cap the axis there.
        let cap = 1.0 - 1.0 / count as f64;
        max_nines = max_nines.max(plots::nines(cap));
        lines.push(Line {
            name: plot_name(s),
            color,
            points: plots::parse_hgrm(&text)
                .into_iter()
                .map(|(q, ms)| (plots::nines(q.min(cap)), ms))
                .collect(),
        });
    }
    (!lines.is_empty()).then(|| plots::lateness_cdf(lines, max_nines))
}

/// p99 lateness per second of deadline, over the warm-up, the faults and
/// the deaths from outside, each shaded.
fn lateness_over_time(info: &RunInfo, ran: &[(usize, &Summary)]) -> Option<Chart> {
    let lines: Vec<Line> = ran
        .iter()
        .filter(|(_, s)| !s.lateness_over_time.is_empty())
        .map(|&(color, s)| Line {
            name: plot_name(s),
            color,
            points: s
                .lateness_over_time
                .iter()
                .map(|b| (b.second as f64, b.p99_us as f64 / 1000.0))
                .collect(),
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    let mut bands = vec![Band {
        from: 0.0,
        to: info.scenario.warmup.as_secs_f64(),
        kind: BandKind::WarmUp,
        tag: "warm-up".into(),
        label: None,
    }];
    bands.extend(fault_bands(ran));
    bands.extend(death_bands(ran, &bands));
    Some(plots::lateness_over_time(lines, bands))
}

/// One band per fault of the scenario, tagged `#1`, `#2`, ... as the
/// faults table's columns. Every strategy ran the same faults at the same
/// planned times; each band spans the fault as the first strategy it acted
/// on recorded it, or marks its planned time if it acted on none.
fn fault_bands(ran: &[(usize, &Summary)]) -> Vec<Band> {
    let Some(first) = ran.iter().map(|(_, s)| s).find(|s| !s.faults.is_empty()) else {
        return Vec::new();
    };
    (0..first.faults.len())
        .map(|i| {
            let records = ran.iter().filter_map(|(_, s)| s.faults.get(i));
            let (record, (from_ms, to_ms)) = records
                .clone()
                .find_map(|f| span_ms(f).map(|span| (f, span)))
                .unwrap_or_else(|| {
                    let f = &first.faults[i];
                    (f, (f.planned_at_ms, f.planned_at_ms))
                });
            let failed = records.clone().any(|f| f.error.is_some());
            Band {
                from: from_ms as f64 / 1000.0,
                to: to_ms as f64 / 1000.0,
                kind: BandKind::Fault,
                tag: format!("#{}", i + 1),
                // Said first: a long label is cut at its end in the key.
                label: Some(format!(
                    "{}{}",
                    if failed { "FAILED: " } else { "" },
                    fault_label(record)
                )),
            }
        })
        .collect()
}

/// When the fault was in effect, in ms since the run started: a killed
/// instance until it was back (to the end without a restart), a command
/// while it ran, any other fault over its window. `None` if it never acted.
fn span_ms(f: &FaultRecord) -> Option<(u64, u64)> {
    match f.kind {
        FaultKind::KillInstance => f
            .killed_at_ms
            .map(|killed| (killed, f.restarted_at_ms.unwrap_or(u64::MAX))),
        FaultKind::RunCommand => f.finished_at_ms.map(|end| (f.planned_at_ms, end)),
        _ => f.window_ms,
    }
}

/// The fault in a few words: the scenario's label; for a command, which.
fn fault_label(f: &FaultRecord) -> String {
    if !f.label.is_empty() {
        return f.label.clone();
    }
    match f.command.last() {
        Some(command) => format!("{} {command}", f.kind.as_str()),
        None => f.kind.as_str().to_string(),
    }
}

/// A thin band per worker that died outside every fault's band (a death
/// inside one is that fault's doing, and its band shows it already).
/// Deaths differ per strategy, so each names its strategy.
fn death_bands(ran: &[(usize, &Summary)], faults: &[Band]) -> Vec<Band> {
    let explained = |at: f64| {
        faults
            .iter()
            .any(|b| b.kind == BandKind::Fault && b.from <= at && at <= b.to + 1.0)
    };
    let mut bands = Vec::new();
    for (_, s) in ran {
        for e in s
            .worker_events
            .iter()
            .filter(|e| e.kind == WorkerEventKind::Died)
        {
            let at = e.at_ms as f64 / 1000.0;
            if explained(at) {
                continue;
            }
            bands.push(Band {
                from: at,
                to: at,
                kind: BandKind::Death,
                tag: format!("D{}", bands.len() + 1),
                label: Some(format!(
                    "{} instance {} died at {at:.1} s",
                    s.strategy, e.instance
                )),
            });
        }
    }
    bands
}

/// Per strategy with more than one timeout class, each class's p50 and p99.
fn lateness_by_timeout(ran: &[(usize, &Summary)]) -> Option<Chart> {
    let strategies: Vec<(String, Vec<ClassLateness>)> = ran
        .iter()
        .filter(|(_, s)| s.lateness_by_timeout.len() > 1)
        .map(|(_, s)| {
            let classes = s
                .lateness_by_timeout
                .iter()
                .filter(|t| t.count > 0)
                .map(|t| ClassLateness {
                    timeout_ms: t.timeout_ms,
                    p50_ms: t.p50_us as f64 / 1000.0,
                    p99_ms: t.p99_us as f64 / 1000.0,
                })
                .collect();
            (plot_name(s), classes)
        })
        .collect();
    (!strategies.is_empty()).then(|| plots::lateness_by_timeout(strategies))
}

/// A per-cancel cost chart: file name, caption, unit and where the figure
/// is in a summary.
struct Cost {
    name: &'static str,
    caption: &'static str,
    unit: &'static str,
    value: fn(&Summary) -> Option<f64>,
}

const COSTS: [Cost; 5] = [
    Cost {
        name: "cost-statements",
        caption: "DB statements per cancel",
        unit: "statements",
        value: |s| s.cost.statements_per_cancel,
    },
    Cost {
        name: "cost-rows-read",
        caption: "DB rows read per cancel (server; canceller only on PostgreSQL)",
        unit: "rows",
        value: |s| {
            s.cost
                .canceller_server_rows_read_per_cancel
                .or(s.cost.server_rows_read_per_cancel)
        },
    },
    Cost {
        name: "cost-cpu",
        caption: "CPU per cancel",
        unit: "µs",
        value: |s| s.cost.cpu_us_per_cancel,
    },
    Cost {
        name: "cost-broker-messages",
        caption: "RabbitMQ messages per cancel",
        unit: "messages",
        value: |s| s.cost.broker_messages_per_cancel,
    },
    Cost {
        name: "cost-redis-commands",
        caption: "Redis commands per cancel",
        unit: "commands",
        value: |s| s.cost.redis_commands_per_cancel,
    },
];
