//! What a run's plots show, from its JSON and `lateness.hgrm` files: the
//! lateness CDF, lateness over time with the warm-up and the faults
//! shaded, lateness by timeout, and the cost per cancel. `report.html`
//! embeds them, `report.md` links them, both from `plots/`.

use super::palette::style;
use super::plots::{self, Band, BandKind, Bar, Chart, ClassLateness, Figure, Line, Section};
use super::table::{rows_read_figure, shown, Shown};
use crate::faults::FaultRecord;
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use crate::model::WorkerEventKind;
use std::path::Path;

/// The run's figures, in the order the page shows them. Each strategy is
/// drawn in its own style ([`style`] of its name), the same in every run.
pub fn figures(run_dir: &Path, info: &RunInfo, summaries: &[Summary]) -> Vec<Figure> {
    let ran: Vec<&Summary> = summaries
        .iter()
        .filter(|s| s.status == Status::Ok)
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
            title: "Slowest cancel over time".into(),
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
        // The figure the tables print beside the chart: over repetitions
        // their median, with min–max as an error bar.
        let bars: Vec<Bar> = ran
            .iter()
            .filter_map(|s| {
                let Shown { value, spread, .. } = shown(s, (cost.figure)(s)?)?;
                Some(Bar {
                    name: plot_name(s),
                    style: style(s.strategy),
                    value,
                    spread,
                })
            })
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
    if s.strategy.info.is_teaching() {
        format!("\u{2716} {}", s.strategy)
    } else {
        s.strategy.name().to_string()
    }
}

/// Lateness by percentile from each strategy's `lateness.hgrm`; `None`
/// when no strategy has one.
fn lateness_cdf(run_dir: &Path, ran: &[&Summary]) -> Option<Chart> {
    let mut lines = Vec::new();
    let mut max_nines = 1f64;
    for &s in ran {
        let path = run_dir.join(s.strategy.name()).join("lateness.hgrm");
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
            style: style(s.strategy),
            points: plots::parse_hgrm(&text)
                .into_iter()
                .map(|(q, ms)| (plots::nines(q.min(cap)), ms))
                .collect(),
        });
    }
    (!lines.is_empty()).then(|| plots::lateness_cdf(lines, max_nines))
}

/// The slowest cancel per second of deadline, over the warm-up, the faults
/// and the deaths from outside, each shaded.
fn lateness_over_time(info: &RunInfo, ran: &[&Summary]) -> Option<Chart> {
    let lines: Vec<Line> = ran
        .iter()
        .filter(|s| !s.lateness_over_time.is_empty())
        .map(|&s| Line {
            name: plot_name(s),
            style: style(s.strategy),
            points: s
                .lateness_over_time
                .iter()
                .map(|b| (b.second as f64, b.max_us as f64 / 1000.0))
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
fn fault_bands(ran: &[&Summary]) -> Vec<Band> {
    let Some(first) = ran.iter().find(|s| !s.faults.is_empty()) else {
        return Vec::new();
    };
    (0..first.faults.len())
        .map(|i| {
            let records = ran.iter().filter_map(|s| s.faults.get(i));
            let (record, (from_ms, to_ms)) = records
                .clone()
                .find_map(|f| {
                    f.band()
                        .map(|span| (f, (span.from, span.to.unwrap_or(u64::MAX))))
                })
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
fn death_bands(ran: &[&Summary], faults: &[Band]) -> Vec<Band> {
    let explained = |at: f64| {
        faults
            .iter()
            .any(|b| b.kind == BandKind::Fault && b.from <= at && at <= b.to + 1.0)
    };
    let mut bands = Vec::new();
    for s in ran {
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
fn lateness_by_timeout(ran: &[&Summary]) -> Option<Chart> {
    let strategies: Vec<(String, super::palette::Style, Vec<ClassLateness>)> = ran
        .iter()
        .filter(|s| s.lateness_by_timeout.len() > 1)
        .map(|s| {
            let classes = s
                .lateness_by_timeout
                .iter()
                .filter(|t| t.count > 0)
                .map(|t| ClassLateness {
                    timeout_ms: t.timeout_ms,
                    p50_ms: t.p50_us as f64 / 1000.0,
                    max_ms: t.max_us as f64 / 1000.0,
                })
                .collect();
            (plot_name(s), style(s.strategy), classes)
        })
        .collect();
    (!strategies.is_empty()).then(|| plots::lateness_by_timeout(strategies))
}

/// A per-cancel cost chart: file name, caption, unit and the name of the
/// figure it draws for a summary (see `summary::figures`), the one the
/// trade-off table prints; `None` where the strategy has none.
struct Cost {
    name: &'static str,
    caption: &'static str,
    unit: &'static str,
    figure: fn(&Summary) -> Option<&'static str>,
}

const COSTS: [Cost; 5] = [
    Cost {
        name: "cost-statements",
        caption: "DB statements per cancel",
        unit: "statements",
        figure: |_| Some("stmts_per_cancel"),
    },
    Cost {
        name: "cost-rows-read",
        caption: "DB rows read per cancel (server; canceller only on PostgreSQL)",
        unit: "rows",
        figure: rows_read_figure,
    },
    Cost {
        name: "cost-cpu",
        caption: "CPU per cancel: every service and the workers",
        unit: "µs",
        figure: |_| Some("cpu_all_us_per_cancel"),
    },
    Cost {
        name: "cost-broker-messages",
        caption: "RabbitMQ messages per cancel",
        unit: "messages",
        figure: |_| Some("broker_msgs_per_cancel"),
    },
    Cost {
        name: "cost-redis-commands",
        caption: "Redis commands per cancel",
        unit: "commands",
        figure: |_| Some("redis_cmds_per_cancel"),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lateness::LatenessBucket;
    use crate::model::run_info::Machine;
    use crate::model::summary::{DatabaseInfo, Repeats, Spread};
    use crate::scenario::{Scenario, QUICK};

    fn run_info(strategies: &[&str], repeat: u32) -> RunInfo {
        RunInfo {
            run_id: "test-run".into(),
            started_at: String::new(),
            delaybench_version: String::new(),
            git_commit: String::new(),
            build_profile: None,
            command: Vec::new(),
            repeat,
            scenario_source: "quick".into(),
            scenario: Scenario::parse(QUICK, "quick").unwrap(),
            seed: 42,
            strategies: strategies.iter().map(|s| s.to_string()).collect(),
            database_kind: "postgres".into(),
            database_url: String::new(),
            database_version: "15".into(),
            services: Default::default(),
            plugin: None,
            machine: Machine::default(),
        }
    }

    /// A strategy that ran once, with a line over time and every cost.
    fn ran(name: &str, cost: f64) -> Summary {
        let mut s = Summary::not_run(
            name.parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        s.lateness_over_time = vec![LatenessBucket {
            second: 3,
            count: 10,
            p50_us: 1_000,
            p99_us: 2_000,
            max_us: 3_000,
            histogram: None,
        }];
        let c = &mut s.cost;
        c.statements_per_cancel = Some(cost);
        c.canceller_server_rows_read_per_cancel = Some(cost + 1.0);
        c.cpu_us_per_cancel = Some(cost * 100.0);
        // The services' share: none, so every service and the workers
        // read the workers' own.
        s.lateness_us.count = 10;
        s.cpu = Some(crate::model::cpu::CpuUse {
            wall_s: 1.0,
            cores: 2,
            machine_busy: 0.5,
            by_service: [("postgresql".to_string(), 0.0)].into(),
        });
        let c = &mut s.cost;
        c.broker_messages_per_cancel = Some(cost + 2.0);
        c.redis_commands_per_cancel = Some(cost + 3.0);
        s
    }

    /// Every strategy drawn in `run`'s figures, with its style, from every chart.
    fn styles_drawn(run: &[Summary]) -> Vec<(String, super::super::palette::Style)> {
        let info = run_info(&[], 1);
        let dir = tempfile::tempdir().unwrap();
        let figures = figures(dir.path(), &info, run);
        assert!(figures.len() >= 6, "over time and five costs");
        figures
            .iter()
            .flat_map(|f| f.chart.strategy_styles())
            .collect()
    }

    #[test]
    fn a_strategy_keeps_its_colour_whatever_ran_beside_it() {
        let a = styles_drawn(&[
            ran("db-scan", 1.0),
            ran("db-timer", 2.0),
            ran("redis-zset+fallback", 3.0),
        ]);
        // Another subset, in another order, with the ceiling first as in a sweep.
        let b = styles_drawn(&[
            ran("ceiling", 1.0),
            ran("redis-zset+fallback", 3.0),
            ran("rabbit-ttl", 2.0),
            ran("db-scan", 4.0),
        ]);
        for name in ["db-scan", "redis-zset+fallback"] {
            let in_a: Vec<_> = a.iter().filter(|(n, _)| n == name).collect();
            let in_b: Vec<_> = b.iter().filter(|(n, _)| n == name).collect();
            assert!(!in_a.is_empty() && !in_b.is_empty(), "{name} drawn in both");
            for (_, style) in in_a.iter().chain(&in_b) {
                assert_eq!(*style, in_a[0].1, "{name}: {a:?} vs {b:?}");
            }
        }
        // And within a run, the strategies are apart.
        let style_of = |name: &str| a.iter().find(|(n, _)| n == name).unwrap().1;
        assert_ne!(style_of("db-scan"), style_of("db-timer"));
    }

    /// Figures of a repeated strategy whose median repetition's own costs
    /// (in `cost`) differ from the repetitions' medians, as they do in
    /// results/reference/20261201-200959-quick (rabbit-delayed: 1 951 µs
    /// CPU in the median-lateness repetition, 1 619 the median).
    fn repeated(name: &str, own: f64) -> Summary {
        let mut s = ran(name, own);
        let spread = |median: f64| Spread {
            median,
            min: median * 0.9,
            max: own.max(median * 1.2),
        };
        let mut r = Repeats {
            count: 3,
            ..Repeats::default()
        };
        for (key, median) in [
            ("stmts_per_cancel", own / 2.0),
            ("canceller_rows_per_cancel", own / 3.0),
            ("cpu_all_us_per_cancel", own * 60.0),
            ("broker_msgs_per_cancel", own / 4.0),
            ("redis_cmds_per_cancel", own / 5.0),
        ] {
            r.figures.insert(key.into(), spread(median));
        }
        s.repeats = Some(r);
        s
    }

    #[test]
    fn cost_bars_show_the_figures_the_tradeoff_table_prints() {
        let run = [repeated("db-scan", 10.0), repeated("rabbit-delayed", 19.5)];
        let dir = tempfile::tempdir().unwrap();
        let figures = figures(dir.path(), &run_info(&[], 3), &run);
        let table = super::super::table::tradeoff_rows(&run);
        let column = |header: &str| table[0].iter().position(|h| h == header).unwrap();
        let charts = [
            ("cost-statements", "DB stmts/cancel", "stmts_per_cancel"),
            (
                "cost-rows-read",
                "DB rows read/cancel",
                "canceller_rows_per_cancel",
            ),
            (
                "cost-cpu",
                "CPU µs/cancel: services + workers",
                "cpu_all_us_per_cancel",
            ),
            (
                "cost-broker-messages",
                "broker msgs/cancel",
                "broker_msgs_per_cancel",
            ),
            (
                "cost-redis-commands",
                "Redis cmds/cancel",
                "redis_cmds_per_cancel",
            ),
        ];
        for (chart, header, key) in charts {
            let bars = figures
                .iter()
                .find(|f| f.name == chart)
                .unwrap_or_else(|| panic!("no {chart}"))
                .chart
                .bar_list();
            assert_eq!(bars.len(), run.len(), "{chart}");
            let format = if key == "cpu_all_us_per_cancel" {
                super::super::table::as_count
            } else {
                super::super::table::as_ratio
            };
            for (bar, (s, row)) in bars.iter().zip(run.iter().zip(&table[1..])) {
                let spread = s.repeats.as_ref().unwrap().figures[key];
                // Not the median repetition's own cost: the repetitions' median.
                assert_eq!(bar.value, spread.median, "{chart} {}", s.strategy);
                assert_eq!(bar.spread, Some((spread.min, spread.max)));
                let (min, max) = bar.spread.unwrap();
                let printed = format!("{} ({}–{})", format(bar.value), format(min), format(max));
                assert_eq!(row[column(header)], printed, "{chart} {}", s.strategy);
            }
        }
    }

    #[test]
    fn a_single_run_bar_is_its_own_figure_without_an_error_bar() {
        let run = [ran("db-scan", 4.0)];
        let dir = tempfile::tempdir().unwrap();
        let figures = figures(dir.path(), &run_info(&[], 1), &run);
        let cpu = figures.iter().find(|f| f.name == "cost-cpu").unwrap();
        assert_eq!(
            cpu.chart.bar_list(),
            [Bar {
                name: "db-scan".into(),
                style: style("db-scan".parse().unwrap()),
                value: 400.0,
                spread: None,
            }]
        );
    }
}
