//! The sweep's report, rendered from `run.json` and `sweep.json` alone:
//! `report.md` with the trade-off table (maximum sustainable rate, share of
//! the ceiling, what limited it) and every step, and `plots/sweep.svg` and
//! `.png`, lateness against offered rate (a backlog sweep: against the
//! backlog held, and its cost).

use super::plots::{self, markdown_links, Chart, Figure, RateLine, Section, SweepChart};
use super::table::{self, run_facts};
use crate::model::lateness::Pct;
use crate::model::run_info::RunInfo;
use crate::model::summary::Status;
use crate::model::sweep::{SweepAxis, SweepResult, SweepStep};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;
use strategies::registry::Role;

/// Below this share of the ceiling a strategy misses the goal the report
/// checks it against.
pub const CEILING_GOAL: f64 = 0.8;

/// Plot files that sweeps of earlier versions wrote at the folder's root;
/// the plots are in `plots/` now, and the copies here would be stale.
const OLD_PLOT_FILES: [&str; 3] = ["sweep.svg", "backlog.svg", "backlog-cost.svg"];

/// Writes `report.md` and the plots (`plots/sweep.*`; for a backlog sweep
/// `plots/backlog.*` and `plots/backlog-cost.*`) into `run_dir`.
pub fn write(run_dir: &Path, result: &SweepResult) -> Result<()> {
    let info = RunInfo::read(run_dir)?;
    let figures = figures(result);
    plots::write_files(run_dir, &figures)?;
    for old in OLD_PLOT_FILES {
        let path = run_dir.join(old);
        if path.exists() {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    let path = run_dir.join("report.md");
    std::fs::write(&path, markdown(&info, result, &figures))
        .with_context(|| format!("writing {}", path.display()))
}

/// The sweep's plots.
fn figures(result: &SweepResult) -> Vec<Figure> {
    let x_of = |st: &SweepStep| {
        st.pending
            .or(st.storm_orders)
            .map(|n| n as f64)
            .unwrap_or(st.rate)
    };
    let lateness = lines(result, |st| {
        (st.cancels > 0).then(|| {
            (
                x_of(st),
                st.p50_us.unwrap_or(0) as f64 / 1000.0,
                st.p99_us.unwrap_or(0) as f64 / 1000.0,
            )
        })
    });
    let bound = Some((result.bound_ms, format!("bound {} ms", result.bound_ms)));
    if result.axis == SweepAxis::Storm {
        // A storm whose hand-off overran its lead fell due during the
        // hand-off: its rate is not the drain's alone, so it is left out
        // (the table says so beside it).
        let drain = lines(result, |st| {
            let storm = st.storm.as_ref().filter(|r| !r.overran_lead())?;
            let rate = storm.cancels_per_s?;
            Some((x_of(st), rate, rate))
        });
        return vec![
            Figure {
                name: "storm-drain",
                title: "storm drain rate against storm size".into(),
                section: Section::Sweep,
                chart: Chart::Sweep(SweepChart {
                    caption: "Storm orders cancelled per second of the drain, against the storm's size (log scales; a storm whose hand-off overran its lead is left out)",
                    x_desc: "orders due in the one instant (x: a step that did not hold)",
                    y_desc: "storm cancels/s",
                    bound: None,
                    lines: drain,
                }),
            },
            Figure {
                name: "storm",
                title: "p50 and p99 lateness against storm size".into(),
                section: Section::Sweep,
                chart: Chart::Sweep(SweepChart {
                    caption: "The regular orders' lateness at commit against the storm's size (p99 solid, p50 thin; log scales)",
                    x_desc: "orders due in the one instant (x: a step that did not hold)",
                    y_desc: "lateness (ms)",
                    bound,
                    lines: lateness,
                }),
            },
        ];
    }
    if result.axis != SweepAxis::Pending {
        return vec![Figure {
            name: "sweep",
            title: "p50 and p99 lateness against offered rate".into(),
            section: Section::Sweep,
            chart: Chart::Sweep(SweepChart {
                caption:
                    "Lateness at commit against offered rate (p99 solid, p50 thin; log scales)",
                x_desc: "offered orders/s (x: a step that did not hold)",
                y_desc: "lateness (ms)",
                bound,
                lines: lateness,
            }),
        }];
    }
    let cost = lines(result, |st| {
        st.server_rows_read_per_cancel.map(|r| (x_of(st), r, r))
    });
    vec![
        Figure {
            name: "backlog",
            title: "p50 and p99 lateness against backlog".into(),
            section: Section::Sweep,
            chart: Chart::Sweep(SweepChart {
                caption:
                    "Lateness at commit against backlog held (p99 solid, p50 thin; log scales)",
                x_desc: "pending backlog orders (x: a step that did not hold)",
                y_desc: "lateness (ms)",
                bound,
                lines: lateness,
            }),
        },
        Figure {
            name: "backlog-cost",
            title: "rows read per cancel against backlog".into(),
            section: Section::Sweep,
            chart: Chart::Sweep(SweepChart {
                caption: "Database rows read per cancel against backlog held (log scales)",
                x_desc: "pending backlog orders (x: a step that did not hold)",
                y_desc: "rows read per cancel",
                bound: None,
                lines: cost,
            }),
        },
    ]
}

/// One line per strategy of `(x, low, high)` points from its steps.
fn lines(
    result: &SweepResult,
    point: impl Fn(&SweepStep) -> Option<(f64, f64, f64)>,
) -> Vec<RateLine> {
    result
        .strategies
        .iter()
        .map(|s| RateLine {
            name: s.strategy.name().to_string(),
            style: super::palette::style(s.strategy),
            points: s
                .steps
                .iter()
                .filter_map(|st| point(st).map(|(x, lo, hi)| (x, lo, hi, st.holds)))
                .collect::<Vec<_>>(),
        })
        .map(|mut l| {
            l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            l
        })
        .collect()
}

/// Text safe inside a Markdown table cell: one line, no column breaks.
fn cell(text: &str) -> String {
    text.replace('\n', " ").replace('|', "\\|")
}

fn rate(r: f64) -> String {
    format!("{r:.0}")
}

/// Microseconds as ms (the report's one format), or `-` when absent.
fn ms(us: Option<u64>) -> String {
    us.map(table::ms).unwrap_or_else(|| "-".into())
}

/// p99 in ms, flagged `*` when fewer than 1 000 samples stand behind it,
/// with the repetitions' `(min–max)` when the step was repeated.
fn p99(step: &SweepStep) -> String {
    let flag = if step.cancels > 0 && step.cancels < 1000 {
        "*"
    } else {
        ""
    };
    let spread = step
        .p99_spread_ms()
        .map(|(lo, hi)| format!(" ({lo:.1}–{hi:.1})"))
        .unwrap_or_default();
    format!("{}{flag}{spread}", ms(step.p99_us))
}

/// The step the maximum stands on: the one that held at that rate (the
/// ceiling's re-measure may hold at a rate its discovery failed at), else
/// any at it.
pub(crate) fn at_max(s: &crate::model::sweep::StrategySweep) -> Option<&SweepStep> {
    let m = s.max_rate?;
    let at = |st: &&SweepStep| st.rate == m;
    s.steps
        .iter()
        .filter(at)
        .find(|st| st.holds)
        .or_else(|| s.steps.iter().find(at))
}

/// The report; `figures` are the plots, linked under the main table.
pub fn markdown(info: &RunInfo, result: &SweepResult, figures: &[Figure]) -> String {
    let mut out = String::new();
    let sc = &info.scenario;
    let _ = writeln!(out, "# delaybench sweep {}\n", result.run_id);
    let _ = writeln!(
        out,
        "- Scenario {} ({}), seed {}: every step is its own run, \
         {} warm-up then {} measured, drain {}, {} instance(s) per strategy; {}.",
        sc.name,
        info.scenario_source,
        sc.seed,
        humantime::format_duration(sc.warmup),
        humantime::format_duration(sc.duration),
        humantime::format_duration(sc.drain),
        sc.instances,
        if let Some(b) = sc
            .backlog
            .as_ref()
            .filter(|_| result.axis == SweepAxis::Pending)
        {
            format!(
                "at {} orders/s, each step holding a backlog of pending orders due {} later: {} \
                 (inserted in multi-row INSERTs, then handed to the strategy through its own \
                 `schedule`, both timed)",
                rate(sc.rate),
                humantime::format_duration(b.after),
                b.pending
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else if let Some(st) = sc
            .storm
            .as_ref()
            .filter(|_| result.axis == SweepAxis::Storm)
        {
            format!(
                "at {} orders/s, each step with a deadline storm of {} orders (one step each), \
                 all due in one instant {} after the load's first order",
                rate(sc.rate),
                st.orders
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                humantime::format_duration(st.at)
            )
        } else if result.mode == "discover" {
            format!(
                "rates discovered: from {} orders/s doubling until a step fails (at most {}), then {} bisections",
                rate(sc.sweep.start_rate),
                rate(sc.sweep.max_rate),
                sc.sweep.bisect
            )
        } else {
            format!(
                "rates listed: {}",
                sc.sweep
                    .rates
                    .iter()
                    .map(|r| rate(*r))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    if info.repeat > 1 {
        let _ = writeln!(
            out,
            "- Every step ran {} times back to back: it holds only if every repetition held; \
             its figures are the median repetition's (by p99), p99 cells add the repetitions' \
             (min–max), and each repetition is in `repeat-<k>/`.",
            info.repeat
        );
    }
    // Past the run's own lines on repetitions and its single rate.
    let own_lines = if info.repeat > 1 { 2 } else { 1 };
    for (line, _) in run_facts(info).into_iter().skip(own_lines) {
        let _ = writeln!(out, "- {line}");
    }
    let _ = writeln!(
        out,
        "- A step **holds** when: p99 lateness at commit ≤ {} ms; the overdue-and-pending \
         count does not grow over the window; the generator's p99 lag to commit and the \
         schedule path's p99 ≤ {} ms (n/a for a strategy whose schedule does nothing: the \
         harness calls none), with no errors; no anomaly; no worker died. The \
         **max sustainable rate** is the highest rate that held with every lower step holding.",
        result.bound_ms, result.keep_up_ms
    );
    if result.axis == SweepAxis::Storm {
        let _ = writeln!(
            out,
            "- In a storm step these judge the **regular** orders only (the storm's own orders \
             are in neither the p99 nor the overdue count): a step holds when the regular orders \
             kept their bound while the storm drained. The storm's drain is the table below."
        );
    }
    match result.axis {
        SweepAxis::Pending => backlog_tables(&mut out, result),
        SweepAxis::Storm => storm_tables(&mut out, result),
        SweepAxis::Rate => {
            let _ = writeln!(out, "- {}", ceiling_line(result));
            rate_tables(&mut out, result);
        }
    }
    let _ = writeln!(out, "\n{}", markdown_links(figures, Section::Sweep));
    step_tables(&mut out, result);
    out
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1_048_576.0)
}

/// The storm sweep's table: per strategy and storm size, the drain and
/// what the regular orders saw (see `storm_table`).
pub(crate) fn storm_tables(out: &mut String, result: &SweepResult) {
    let _ = writeln!(out, "\n## Draining a deadline storm, by its size\n");
    match super::storm_table::storm_sweep_rows(result) {
        Some(rows) => {
            super::markdown::table(out, &rows);
            let _ = writeln!(out, "{}", super::storm_table::STORM_NOTES);
        }
        None => {
            let _ = writeln!(out, "No step ran its storm.");
        }
    }
}

/// The backlog sweep's table: per strategy and size, what the preload
/// took, what holding it cost, lateness, and each restart's recovery.
pub(crate) fn backlog_tables(out: &mut String, result: &SweepResult) {
    let _ = writeln!(out, "\n## Holding a backlog\n");
    let _ = writeln!(
        out,
        "| strategy | pending | holds | insert s | hand-off s (errors) | worker RSS MiB | Redis used MiB (members) | broker MiB (queued, delayed) | database MiB | rows read / cancel | p50 / p99 ms (n) | recovery s: what (probes cancelled) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for s in &result.strategies {
        if s.status != Status::Ok {
            let _ = writeln!(
                out,
                "| {} | {}: {} | | | | | | | | | | |",
                s.strategy,
                s.status.as_str(),
                cell(s.reason.as_deref().unwrap_or(""))
            );
            continue;
        }
        for st in &s.steps {
            let b = st.backlog.as_ref();
            let held = b.map(|b| &b.held);
            let recovery = b
                .map(|b| {
                    b.recovery
                        .iter()
                        .map(|r| {
                            format!(
                                "{}: {}{}",
                                r.what,
                                super::backlog_table::recovery_text(r),
                                if r.notes.is_empty() {
                                    String::new()
                                } else {
                                    format!(" — {}", r.notes.join("; "))
                                }
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("<br>")
                })
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "| {} | [{}]({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} ({}) | {} |",
                s.strategy,
                st.pending.unwrap_or(0),
                st.link(),
                if st.holds { "yes" } else { "**no**" },
                opt(b.map(|b| format!("{:.2}", b.insert_s))),
                opt(b.map(|b| format!("{:.2} ({})", b.handoff_s, b.handoff_errors))),
                opt(held.map(|h| {
                    h.worker_rss_kib
                        .iter()
                        .map(|k| format!("{:.0}", *k as f64 / 1024.0))
                        .collect::<Vec<_>>()
                        .join(" + ")
                })),
                opt(held.and_then(|h| {
                    h.redis_used_memory
                        .map(|m| format!("{} ({})", mib(m), h.redis_members.unwrap_or(0)))
                })),
                opt(held.and_then(|h| {
                    h.broker_memory.map(|m| {
                        format!(
                            "{} ({}, {})",
                            mib(m),
                            h.queued_messages.unwrap_or(0),
                            h.delayed_stored
                                .map(|d| d.to_string())
                                .unwrap_or_else(|| "-".into())
                        )
                    })
                })),
                opt(held.and_then(|h| h.database_bytes.map(mib))),
                opt(st.server_rows_read_per_cancel.map(|v| format!("{v:.2}"))),
                ms(st.p50_us),
                p99(st),
                st.cancels,
                cell(&recovery),
            );
        }
    }
    let _ = writeln!(
        out,
        "\nEmpty cells (`-`): the strategy does not use that backend, or there was no backlog. \
         Redis and broker memory are server-wide; the delayed count covers every \
         delayed exchange of the node. Recovery: seconds from the restart's start until the \
         strategy held its backlog again and a fresh, already-due order was cancelled (or the \
         latest an order in flight through a service's restart was cancelled past its \
         deadline, when longer; one never cancelled: not recovered); `instances` starts every \
         instance afresh, `redis` and `rabbitmq` run the scenario's planned restart command, \
         `redis-sigkill` and `rabbitmq-sigkill` its unplanned one (SIGKILL, nothing saved)."
    );
    super::backlog_table::restarts_table(out, result);
    super::backlog_table::bytes_per_pending_table(out, result);
}

/// What the ceiling of this sweep was, in words.
fn ceiling_line(result: &SweepResult) -> String {
    // The ceiling's window is the db-scan interval the sweep, storm and
    // backlog presets set, not db-scan's default (250 ms, coarser).
    const SCAN_WINDOW: &str = "the db-scan interval the sweep, storm and backlog presets \
         set; db-scan's own default, 250 ms, batches more coarsely";
    const MAXIMUM: &str = "Its maximum is the highest rate it held in any step; when a \
         strategy held more, the ceiling was run again at that rate after every strategy, so \
         one slow moment of a shared machine does not stand as the bound. % of ceiling is a \
         strategy's maximum over it.";
    match result.ceiling_window_ms {
        Some(window) if result.ceiling_claims_every_due_order => format!(
            "The **ceiling** is meant to bound every strategy's rate, by construction and by \
             measure. It does what every strategy must and little more: the generator's \
             creates and payments, then, when one of an instance's orders falls due (an \
             in-process list times it: no broker, no Redis, no scan on a clock), db-scan's \
             claim of every due order, its own and the other instances', with the one \
             conditional cancel in the same transaction; at most one claim per {window:.0} ms \
             per instance ({SCAN_WINDOW}). So it never does more work than db-scan, and paid \
             orders cost it nothing. {MAXIMUM}"
        ),
        Some(window) => format!(
            "The **ceiling** is meant to bound every strategy's rate, by construction and by \
             measure. It does what every strategy must and little more: the generator's \
             creates and payments, then, from an in-process list (no broker, no Redis), one \
             transaction per {window:.0} ms at most per instance ({SCAN_WINDOW}) that reads \
             that instance's due \
             orders by id, keeps the pending ones and cancels them with the one conditional \
             cancel, so paid orders cost no refused UPDATE. {MAXIMUM}"
        ),
        None => "The **ceiling** of this sweep predates the bounding one (issue 22): it \
                 cancelled each order at its deadline, batching only under load, and was \
                 measured once, so strategies that batch by waiting could pass it. Read % of \
                 ceiling here as a comparison, not a share of a bound."
            .to_string(),
    }
}

/// Whether the ceiling ran at `rate` and failed there.
fn ceiling_failed_at(result: &SweepResult, rate: Option<f64>) -> bool {
    result
        .strategies
        .iter()
        .filter(|c| c.strategy.info.role == Role::Baseline)
        .flat_map(|c| &c.steps)
        .any(|st| Some(st.rate) == rate && !st.holds)
}

/// The rate sweep's table: each strategy's maximum sustainable rate.
pub(crate) fn rate_tables(out: &mut String, result: &SweepResult) {
    let _ = writeln!(out, "\n## Maximum sustainable rate\n");
    let _ = writeln!(
        out,
        "| strategy | max sustainable rate (orders/s) | % of ceiling | first rate that failed | \
         lateness p50 / p99 ms at max (n) | server rows read / cancel at max | worker CPU µs / cancel at max | limited by |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for s in &result.strategies {
        if s.status != Status::Ok {
            let _ = writeln!(
                out,
                "| {} | {}: {} | | | | | | |",
                s.strategy,
                s.status.as_str(),
                cell(s.reason.as_deref().unwrap_or(""))
            );
            continue;
        }
        let max = match (s.max_rate, s.first_failed_rate) {
            (Some(m), None) if m >= result.max_offered_rate => {
                format!("≥ {} (held at the highest rate offered)", rate(m))
            }
            (Some(m), _) => rate(m),
            (None, Some(f)) => format!("< {} (the first step failed)", rate(f)),
            (None, None) => "-".into(),
        };
        // A maximum that stands on a run run again says so beside it.
        let max = match s.reruns_behind_max() {
            0 => max,
            n => format!(
                "{max} ({n} run{} at or below it run again after a harness or host stall: see Every step)",
                if n == 1 { "" } else { "s" }
            ),
        };
        // So does one that owes something to a weaker promise.
        let max = match s.strategy.info.rate_caveat {
            Some(caveat) if s.max_rate.is_some() => format!("{max} ({caveat})"),
            _ => max,
        };
        let share = match s.share_of_ceiling {
            Some(x) if s.strategy.info.role != Role::Baseline && x < CEILING_GOAL => {
                format!("**{:.0}%** (below the 80% goal)", x * 100.0)
            }
            Some(x) if x > 1.0 => format!(
                "**{:.0}%** (above the ceiling, {})",
                x * 100.0,
                if result.ceiling_window_ms.is_none() {
                    "of a sweep from before the ceiling bounded: read it as a comparison, \
                     not a share of a bound"
                } else if ceiling_failed_at(result, s.max_rate) {
                    "which failed at this rate, run again after every strategy: within this \
                     machine's noise, or the ceiling does not bound here"
                } else {
                    "which was not run at this rate"
                }
            ),
            Some(x) => format!("{:.0}%", x * 100.0),
            None => "-".into(),
        };
        let at = at_max(s);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            s.strategy,
            max,
            share,
            s.first_failed_rate.map(rate).unwrap_or_else(|| "-".into()),
            at.map(|st| format!("{} / {} ({})", ms(st.p50_us), p99(st), st.cancels))
                .unwrap_or_else(|| "-".into()),
            at.and_then(|st| st.server_rows_read_per_cancel)
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "-".into()),
            at.and_then(|st| st.cpu_us_per_cancel)
                .map(|v| format!("{v:.0}"))
                .unwrap_or_else(|| "-".into()),
            cell(s.limited_by.as_deref().unwrap_or("-")),
        );
    }
    let _ = writeln!(
        out,
        "\n`*`: fewer than 1 000 cancels behind this p99, so it sits near the maximum; the \
         step was judged on it all the same."
    );
    cpu_per_order_table(out, result);
    match &result.generator {
        Some(g) => {
            let steps = g
                .steps
                .iter()
                .map(|st| {
                    format!(
                        "{} orders/s {} (lag p99 {:.1} ms)",
                        rate(st.rate),
                        if st.holds { "kept up" } else { "fell behind" },
                        st.lag_p99_us as f64 / 1000.0
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            let _ = writeln!(
                out,
                "\n**Generator check** (creates and payments alone, no canceller): {}. Steps: {steps}.{}",
                g.verdict,
                g.steps
                    .first()
                    .and_then(|st| st.cpu.as_ref())
                    .map(|c| format!(" At {} orders/s: {}.", rate(g.rate), c.describe()))
                    .unwrap_or_default()
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\n**Generator check**: not run (no strategy sustained any rate, or the sweep \
                 stopped before the end), so nothing here shows that the generator was not the limit."
            );
        }
    }
}

/// The highest offered rate at which every strategy that ran held a step
/// of rate alone; `None` when there is none.
fn highest_rate_all_held(result: &SweepResult) -> Option<f64> {
    let ran: Vec<_> = result
        .strategies
        .iter()
        .filter(|s| s.status == Status::Ok)
        .collect();
    ran.first()?
        .steps
        .iter()
        .filter(|st| st.holds && st.is_rate_only())
        .map(|st| st.rate)
        .filter(|r| ran.iter().all(|s| held_at(s, *r).is_some()))
        .max_by(f64::total_cmp)
}

/// `s`'s step of rate alone at offered rate `rate` that held, if any.
fn held_at(s: &crate::model::sweep::StrategySweep, rate: f64) -> Option<&SweepStep> {
    s.steps
        .iter()
        .find(|st| st.holds && st.is_rate_only() && (st.rate - rate).abs() < 0.5)
}

/// Why the maxima differ: what one order cost the machine, by service, at
/// the highest rate every strategy held. On one host the services and the
/// harness share the cores, so a strategy whose orders cost more CPU runs
/// out of machine at a lower rate; the last column is that rate at this
/// cost. Rendered from each step's CPU reading alone.
fn cpu_per_order_table(out: &mut String, result: &SweepResult) {
    let Some(at) = highest_rate_all_held(result) else {
        return;
    };
    // Each strategy's step at that rate and its CPU per order, read once.
    let steps: Vec<_> = result
        .strategies
        .iter()
        .filter(|s| s.status == Status::Ok)
        .filter_map(|s| {
            let st = held_at(s, at)?;
            Some((s, st, st.cpu_us_per_order()?))
        })
        .collect();
    // Every service any of them used, in name order (the harness last).
    let mut services: Vec<String> = steps
        .iter()
        .flat_map(|(_, _, per)| per.keys().cloned())
        .collect();
    services.sort_by_key(|s| (s == crate::model::cpu::HARNESS_SERVICE, s.clone()));
    services.dedup();
    // A service no strategy used (an idle database of another kind) has no
    // column; one that idled beside some strategies keeps its small figures.
    services.retain(|sv| {
        steps
            .iter()
            .any(|(_, _, per)| per.get(sv).is_some_and(|us| *us >= 0.5))
    });
    if services.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n### Why the maxima differ: CPU per order at {} orders/s\n",
        rate(at)
    );
    let mut header = vec!["strategy".to_string(), "created/s".into()];
    header.extend(services.iter().map(|s| format!("{s} µs")));
    header.extend([
        "all services µs".into(),
        "every core at this cost, orders/s".into(),
        "max sustainable rate".into(),
    ]);
    let mut rows = vec![header];
    for (s, st, per) in steps {
        let total: f64 = per.values().sum();
        let cores = st.cpu.as_ref().map_or(0, |c| c.cores);
        let mut row = vec![s.strategy.to_string(), format!("{:.0}", st.achieved_rate)];
        row.extend(
            services
                .iter()
                .map(|sv| per.get(sv).map_or("-".into(), |us| format!("{us:.0}"))),
        );
        row.push(format!("{total:.0}"));
        row.push(if total > 0.0 && cores > 0 {
            format!("{:.0}", f64::from(cores) * 1e6 / total)
        } else {
            "-".into()
        });
        row.push(s.max_rate.map(rate).unwrap_or_else(|| "-".into()));
        rows.push(row);
    }
    super::markdown::table(out, &rows);
    let _ = writeln!(
        out,
        "Each service's cores busy over the step's arrival window, over the orders created per \
         second: the whole order (create, pay or cancel) as this host paid for it, the \
         strategy's services and the harness's generator and workers alike. The step is the \
         median repetition's. A strategy whose order costs more runs out of cores at a lower \
         rate: \"every core at this cost\" is the machine's cores over that cost. It is the size \
         of the cause, not a prediction: costs per order change with the rate (batches fill, \
         locks contend), and CPU outside these services (the kernel, other processes) is not \
         in it."
    );
}

/// Every step of every strategy.
fn step_tables(out: &mut String, result: &SweepResult) {
    let _ = writeln!(out, "## Every step\n");
    for s in &result.strategies {
        let _ = writeln!(out, "### {}\n", s.strategy);
        if s.status != Status::Ok {
            let _ = writeln!(
                out,
                "{}: {}\n",
                s.status.as_str(),
                s.reason.as_deref().unwrap_or("")
            );
            continue;
        }
        let _ = writeln!(
            out,
            "| offered/s | holds | created/s | n | p50 ms | p99 ms | max ms | lag p99 ms | schedule p99 ms | overdue first → last | anomalies | CPU | why not |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for st in &s.steps {
            let _ = writeln!(
                out,
                "| [{}{}]({}) | {} | {:.0} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} |",
                rate(st.rate),
                st.pending
                    .map(|n| format!(" + {n} pending"))
                    .or(st.storm_orders.map(|n| format!(" + storm of {n}")))
                    .unwrap_or_default(),
                st.link(),
                if st.holds { "yes" } else { "**no**" },
                st.achieved_rate,
                st.cancels,
                ms(st.p50_us),
                p99(st),
                ms(st.max_us),
                st.generator_lag_p99_us as f64 / 1000.0,
                if s.strategy.info.schedule_does_nothing {
                    "n/a".into()
                } else {
                    ms(st.schedule_path_p99_us)
                },
                match (st.overdue_first, st.overdue_last) {
                    (Some(a), Some(b)) => format!("{a} → {b}"),
                    _ => "-".into(),
                },
                st.anomalies,
                st.cpu
                    .as_ref()
                    .map(|c| c.describe())
                    .unwrap_or_else(|| "unknown".into()),
                cell(
                    &st.reasons
                        .iter()
                        .chain(&st.stalled)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            );
        }
        let _ = writeln!(out);
    }
}

/// A terminal table of one row per step (a strategy that did not run: one
/// row with its status), each after the strategy's name.
fn step_rows(
    result: &SweepResult,
    header: &[&str],
    row_of: impl Fn(&SweepStep) -> Vec<String>,
) -> String {
    let mut rows = Vec::new();
    for s in &result.strategies {
        let name = s.strategy.name().to_string();
        if s.status != Status::Ok {
            rows.push(vec![name.clone(), s.status.as_str().to_string()]);
        }
        for st in &s.steps {
            let mut row = vec![name.clone()];
            row.extend(row_of(st));
            rows.push(row);
        }
    }
    let header: Vec<String> = header.iter().map(|c| c.to_string()).collect();
    super::text_table::render(&header, &rows)
}

/// The maximum-rate table for the terminal (for a backlog sweep: each
/// step's hand-off and recovery times).
pub fn terminal_table(result: &SweepResult) -> String {
    let strings = |cells: &[&str]| cells.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    match result.axis {
        SweepAxis::Storm => {
            return step_rows(
                result,
                &[
                    "strategy",
                    "storm",
                    "holds",
                    "drained s",
                    "cancels/s",
                    "regular p99 during ms",
                ],
                |st| {
                    let r = st.storm.as_ref();
                    vec![
                        st.storm_orders.unwrap_or(0).to_string(),
                        if st.holds { "yes" } else { "NO" }.to_string(),
                        match r {
                            None => "no storm record".into(),
                            Some(r) => {
                                let drained = r
                                    .drain_s
                                    .map_or("not drained".into(), |d| format!("{d:.2}"));
                                if r.overran_lead() {
                                    format!("{drained} (hand-off overran its lead)")
                                } else {
                                    drained
                                }
                            }
                        },
                        r.and_then(|r| r.cancels_per_s)
                            .map_or("-".into(), |c| format!("{c:.0}")),
                        r.filter(|r| r.regular_during_us.count > 0)
                            .map_or("-".into(), |r| {
                                let l = &r.regular_during_us;
                                match l.shown(Pct::P99) {
                                    Some(p99) => table::ms(p99),
                                    None => format!("max {} (n={})", table::ms(l.max), l.count),
                                }
                            }),
                    ]
                },
            )
        }
        SweepAxis::Pending => {
            return step_rows(
                result,
                &[
                    "strategy",
                    "pending",
                    "holds",
                    "hand-off s",
                    "p99 ms",
                    "recovery s",
                ],
                |st| {
                    let b = st.backlog.as_ref();
                    vec![
                        st.pending.unwrap_or(0).to_string(),
                        if st.holds { "yes" } else { "NO" }.to_string(),
                        b.map(|b| format!("{:.2}", b.handoff_s))
                            .unwrap_or_else(|| "-".into()),
                        ms(st.p99_us),
                        b.map(|b| {
                            b.recovery
                                .iter()
                                .map(|r| {
                                    format!(
                                        "{} {}",
                                        r.what,
                                        r.cancelling_again_s
                                            .filter(|_| r.recovered())
                                            .map(|v| format!("{v:.2}"))
                                            .unwrap_or_else(|| format!(
                                                "NOT RECOVERED ({} probes lost)",
                                                r.lost_probes()
                                            ))
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default(),
                    ]
                },
            )
        }
        SweepAxis::Rate => {}
    }
    let header = strings(&[
        "strategy",
        "max rate/s",
        "% ceiling",
        "failed at/s",
        "limited by",
    ]);
    let rows: Vec<Vec<String>> = result
        .strategies
        .iter()
        .map(|s| {
            vec![
                s.strategy.name().to_string(),
                match s.status {
                    Status::Ok => s.max_rate.map(rate).unwrap_or_else(|| "none".into()),
                    other => other.as_str().to_string(),
                },
                s.share_of_ceiling
                    .map(|x| format!("{:.0}%", x * 100.0))
                    .unwrap_or_else(|| "-".into()),
                s.first_failed_rate.map(rate).unwrap_or_else(|| "-".into()),
                s.limited_by
                    .as_deref()
                    .or(s.reason.as_deref())
                    .unwrap_or("-")
                    .to_string(),
            ]
        })
        .collect();
    let mut out = super::text_table::render(&header, &rows);
    if let Some(g) = &result.generator {
        let _ = writeln!(out, "generator: {}", g.verdict);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu::{CpuUse, HARNESS_SERVICE};
    use crate::model::sweep::StrategySweep;
    use std::collections::BTreeMap;
    use strategies::registry::{Variant, STRATEGIES};

    fn step(rate: f64, holds: bool, postgres: f64, harness: f64) -> SweepStep {
        SweepStep {
            rate,
            holds,
            achieved_rate: rate,
            cpu: Some(CpuUse {
                wall_s: 6.0,
                cores: 2,
                machine_busy: 0.5,
                by_service: BTreeMap::from([
                    ("postgresql".to_string(), postgres),
                    ("mariadb".to_string(), 0.0),
                    (HARNESS_SERVICE.to_string(), harness),
                ]),
            }),
            ..SweepStep::default()
        }
    }

    fn strategy(name: &str, max: f64, steps: Vec<SweepStep>) -> StrategySweep {
        let info = STRATEGIES.iter().find(|s| s.name == name).expect("listed");
        StrategySweep {
            strategy: Variant::plain(info),
            status: Status::Ok,
            reason: None,
            steps,
            max_rate: Some(max),
            first_failed_rate: None,
            share_of_ceiling: None,
            limited_by: None,
        }
    }

    #[test]
    fn the_cpu_table_compares_every_strategy_at_the_highest_rate_all_held() {
        let result = SweepResult::rate_sweep_for_test(vec![
            strategy(
                "db-scan",
                1600.0,
                vec![step(800.0, true, 0.4, 0.2), step(1600.0, true, 0.8, 0.4)],
            ),
            strategy(
                "rabbit-ttl",
                800.0,
                vec![step(800.0, true, 0.4, 0.6), step(1600.0, false, 0.9, 1.0)],
            ),
        ]);
        assert_eq!(highest_rate_all_held(&result), Some(800.0));
        let mut out = String::new();
        cpu_per_order_table(&mut out, &result);
        assert!(out.contains("CPU per order at 800 orders/s"), "{out}");
        assert!(
            !out.contains("mariadb"),
            "no column for a service none used: {out}"
        );
        // postgresql 500 + harness 250 = 750 µs: 2 cores carry 2667/s.
        assert!(
            out.contains("| db-scan | 800 | 500 | 250 | 750 | 2667 | 1600 |"),
            "{out}"
        );
        // postgresql 500 + harness 750 = 1250 µs: 1600/s.
        assert!(
            out.contains("| rabbit-ttl | 800 | 500 | 750 | 1250 | 1600 | 800 |"),
            "{out}"
        );
        // Nothing all held: no table.
        let mut none = result.clone();
        none.strategies[1].steps = vec![step(1600.0, false, 0.9, 1.0)];
        let mut out = String::new();
        cpu_per_order_table(&mut out, &none);
        assert!(out.is_empty(), "{out}");
    }
}
