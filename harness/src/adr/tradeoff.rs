//! The trade-off among the options that meet the objective: every
//! criterion ([`Criterion`]) read for every one of them from one run, and
//! the pick the user's priority allows under [`separation`]'s rule.
//!
//! Which run a criterion is read from: among the runs that measure it, the
//! one that ran the most of these options (then the highest offered rate:
//! a figure is worth most near a strategy's knee). An option that run did
//! not have is "not measured" there, never given another run's figure.
//! Lateness and CPU come from the same run without faults; capacity from
//! one rate sweep; faults from one fault run; recovery from one backlog
//! sweep.

use super::evidence::{ms_text, Body, FaultTally, Figure, Source};
use super::objective::{Objective, Origin};
use super::reading::samples_needed;
use super::separation::{self, Column, Criterion, Material, Measured, Pick, Reading};
use super::sla::{pct_name, Condition};
use super::study::Eval;
use crate::model::lateness::Pct;
use crate::model::records::Recovery;
use crate::model::summary::Summary;
use std::path::Path;

/// The options that meet the objective, each criterion read from one run,
/// and what the priority made of them.
pub struct Tradeoff<'a> {
    pub options: Vec<&'a Eval>,
    pub columns: Vec<Column>,
    pub priority: Vec<Criterion>,
    /// The priority is the tool's example, not the user's.
    pub example_priority: bool,
    pub pick: Pick,
    /// The run without faults lateness and CPU are read from (its label).
    pub normal_run: Option<String>,
}

impl<'a> Tradeoff<'a> {
    pub fn new(
        sources: &[Source],
        options: Vec<&'a Eval>,
        objective: &Objective,
        base: &Path,
    ) -> Tradeoff<'a> {
        let normal = widest(sources, Condition::Normal, &options);
        let mut columns = vec![
            services(&options),
            lateness(normal, &options, base),
            capacity(
                widest(sources, Condition::Capacity, &options),
                &options,
                base,
            ),
            cpu(normal, &options, base, Scope::All),
            cpu(normal, &options, base, Scope::Database),
            faults(widest(sources, Condition::Faults, &options), &options, base),
            recovery(
                widest(sources, Condition::Backlog, &options),
                &options,
                base,
            ),
        ];
        for c in &mut columns {
            c.material = objective.material(c.criterion);
        }
        let pick = separation::pick(&columns, options.len(), &objective.prefer);
        Tradeoff {
            options,
            columns,
            priority: objective.prefer.clone(),
            example_priority: objective.prefer_from == Origin::Example,
            pick,
            normal_run: normal.map(|s| s.label.clone()),
        }
    }

    pub fn column(&self, c: Criterion) -> &Column {
        self.columns
            .iter()
            .find(|col| col.criterion == c)
            .expect("every criterion has a column")
    }

    /// The options, those the pick left (or chose) first.
    pub fn in_order(&self) -> Vec<&'a Eval> {
        let mut order: Vec<usize> = self.pick.remaining.clone();
        order.extend((0..self.options.len()).filter(|i| !self.pick.remaining.contains(i)));
        order.into_iter().map(|i| self.options[i]).collect()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.options[i].name
    }
}

/// Whether `source` has option `e` (ran ok).
fn has(source: &Source, e: &Eval) -> bool {
    match &source.body {
        Body::Run(_) => source.summary(e.variant).is_some(),
        Body::Sweep(_) => source.sweep(e.variant).is_some(),
    }
}

/// The run of `condition` that ran the most of `options`, then the one
/// with the highest offered rate.
fn widest<'s>(
    sources: &'s [Source],
    condition: Condition,
    options: &[&Eval],
) -> Option<&'s Source> {
    sources
        .iter()
        .filter(|s| s.condition == condition)
        .map(|s| (s, options.iter().filter(|e| has(s, e)).count()))
        .filter(|(_, n)| *n > 0)
        .max_by(|(a, n), (b, m)| {
            n.cmp(m)
                .then(a.info.scenario.rate.total_cmp(&b.info.scenario.rate))
        })
        .map(|(s, _)| s)
}

fn not_run(source: &Source) -> Reading {
    Reading::NotMeasured(format!("it did not run in {}", source.label))
}

/// A column no option could be read on: `from` says why, and each
/// option's reading is `why`.
fn unread(criterion: Criterion, from: String, options: &[&Eval], why: &str) -> Column {
    Column {
        material: Material::Any,
        criterion,
        from,
        readings: options
            .iter()
            .map(|_| Reading::NotMeasured(why.to_string()))
            .collect(),
    }
}

fn services(options: &[&Eval]) -> Column {
    Column {
        material: Material::Any,
        criterion: Criterion::Services,
        from: "what each option needs (exact: no noise)".into(),
        readings: options
            .iter()
            .map(|e| {
                let beside = e.needs.len() - 1;
                Reading::Measured(Measured::exact(
                    beside as f64,
                    match beside {
                        0 => "the database only".into(),
                        _ => format!("the database and {}", e.needs[1..].join(" and ")),
                    },
                ))
            })
            .collect(),
    }
}

/// The highest of p99, p90, p50 that every repetition of every option in
/// `source` has enough samples for.
fn common_percentile(source: &Source, options: &[&Eval]) -> Option<(Pct, u64)> {
    let fewest = options
        .iter()
        .filter_map(|e| source.summary(e.variant))
        .map(|s| match &s.repeats {
            Some(r) => r.figures.get("n").map_or(0, |n| n.min as u64),
            None => s.lateness_us.count,
        })
        .min()?;
    [Pct::P99, Pct::P90, Pct::P50]
        .into_iter()
        .find(|p| fewest >= samples_needed(*p))
        .map(|p| (p, fewest))
}

/// A figure of `s` as a range over its repetitions (`repeats.figures.KEY`),
/// or its single value (`single`: the value and its key) with one
/// repetition; linked relative to `base`.
fn range_of(
    s: &Summary,
    file: &Path,
    key: &str,
    single: Option<(f64, String)>,
    fmt: impl Fn(f64) -> String,
    base: &Path,
) -> Option<Measured> {
    let spread = s
        .repeats
        .as_ref()
        .and_then(|r| Some((r.count, r.figures.get(key)?)));
    let (low, median, high, n, figure) = match spread {
        Some((n, sp)) => {
            let k = format!("repeats.figures.{key}");
            let figure = Figure::new(
                format!(
                    "{} ({}–{}, {n} repetitions)",
                    fmt(sp.median),
                    fmt(sp.min),
                    fmt(sp.max)
                ),
                file.to_path_buf(),
                &format!("{k}.median"),
                sp.median,
            )
            .with(&format!("{k}.min"), sp.min)
            .with(&format!("{k}.max"), sp.max);
            (sp.min, sp.median, sp.max, n, figure)
        }
        None => {
            let (value, key) = single?;
            let figure = Figure::new(
                format!("{} (one repetition)", fmt(value)),
                file.to_path_buf(),
                &key,
                value,
            );
            (value, value, value, 1, figure)
        }
    };
    Some(Measured {
        bracket: false,
        low,
        median,
        high,
        repetitions: Some(n),
        text: figure.render(base),
    })
}

fn lateness(source: Option<&Source>, options: &[&Eval], base: &Path) -> Column {
    let Some(source) = source else {
        return unread(
            Criterion::Lateness,
            "no run without faults ran these options".into(),
            options,
            "no run without faults",
        );
    };
    let Some((pct, fewest)) = common_percentile(source, options) else {
        return unread(
            Criterion::Lateness,
            format!(
                "{}: too few cancels a repetition for any percentile",
                source.label
            ),
            options,
            "too few samples",
        );
    };
    let name = pct_name(pct);
    let readings = options
        .iter()
        .map(|e| {
            let Some(s) = source.summary(e.variant) else {
                return not_run(source);
            };
            let file = source.summary_file(e.name.as_str());
            let single = s
                .lateness_us
                .shown(pct)
                .map(|v| (v as f64, format!("lateness_us.{name}")));
            match range_of(s, &file, name, single, ms_text, base) {
                Some(m) => Reading::Measured(m),
                None => Reading::NotMeasured(format!("no {name} in {}", source.label)),
            }
        })
        .collect();
    Column {
        material: Material::Any,
        criterion: Criterion::Lateness,
        from: format!(
            "{name} lateness of each repetition in {} ({} orders/s; at least {fewest} cancels a \
             repetition, {} needed for a {name})",
            source.label,
            source.info.scenario.rate,
            samples_needed(pct)
        ),
        readings,
    }
}

fn us_text(v: f64) -> String {
    format!("{v:.0} µs")
}

/// Which CPU a column sums.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    /// Every service and the workers.
    All,
    /// The database server alone.
    Database,
}

const DATABASES: [&str; 2] = ["postgresql", "mariadb"];

/// CPU per cancel (every service and the workers, or the database
/// server's), per repetition, from each repetition's own summary.
fn cpu(source: Option<&Source>, options: &[&Eval], base: &Path, scope: Scope) -> Column {
    let criterion = match scope {
        Scope::All => Criterion::Cpu,
        Scope::Database => Criterion::DatabaseCpu,
    };
    let Some(source) = source else {
        return unread(
            criterion,
            "no run without faults ran these options".into(),
            options,
            "no run without faults",
        );
    };
    let readings = options
        .iter()
        .map(|e| {
            let Some(s) = source.summary(e.variant) else {
                return not_run(source);
            };
            let reps = s.repetitions(&source.dir.join(e.name.as_str()));
            let in_scope = |k: &str| scope == Scope::All || DATABASES.contains(&k);
            if scope == Scope::Database
                && !reps.iter().any(|r| {
                    r.cpu.as_ref().is_some_and(|c| {
                        c.by_service.keys().any(|k| DATABASES.contains(&k.as_str()))
                    })
                })
            {
                return Reading::NotMeasured(format!(
                    "{}: no database server's CPU was read (SQLite runs inside the workers: \
                     its CPU is theirs)",
                    source.label
                ));
            }
            let Some(cpu) = Summary::cpu_spread(&reps, in_scope) else {
                return Reading::NotMeasured(format!(
                    "{}: a repetition lacks the CPU of the services or of the workers",
                    source.label
                ));
            };
            let (low, mid, high, n) = (cpu.sum.min, cpu.sum.median, cpu.sum.max, cpu.repetitions);
            let breakdown = cpu.breakdown(", ");
            let range = if n > 1 {
                format!("{}–{}, {n} repetitions", us_text(low), us_text(high))
            } else {
                "one repetition".into()
            };
            // Where the runtime wrote the sum, it is linked; older runs
            // (before `cpu_all_us_per_cancel`) are computed here from each
            // repetition's `cpu.by_service` and `cost.cpu_us_per_cancel`,
            // and link the file without a key.
            let file = source.summary_file(e.name.as_str());
            let written = s
                .repeats
                .as_ref()
                .filter(|r| !r.derived.iter().any(|d| d == "cpu_all_us_per_cancel"))
                .and_then(|r| r.figures.get("cpu_all_us_per_cancel"));
            let text = match written.filter(|_| scope == Scope::All) {
                Some(sp) if (sp.median - mid).abs() < 0.5 => Figure::new(
                    format!("{} ({range}: {breakdown})", us_text(sp.median)),
                    file.clone(),
                    "repeats.figures.cpu_all_us_per_cancel.median",
                    sp.median,
                )
                .render(base),
                _ => format!(
                    "{} ({range}: {breakdown}; [computed from each repetition's \
                     cpu.by_service and cost]({}))",
                    us_text(mid),
                    super::evidence::relative(base, &file).replace(' ', "%20")
                ),
            };
            Reading::Measured(Measured {
                bracket: false,
                low,
                median: mid,
                high,
                repetitions: Some(n),
                text,
            })
        })
        .collect();
    Column {
        material: Material::Any,
        criterion,
        from: format!(
            "µs of CPU per cancel in {} ({} orders/s), each repetition: {}",
            source.label,
            source.info.scenario.rate,
            match scope {
                Scope::All =>
                    "every service (the harness, load generator and checker, left out) \
                               and the workers",
                Scope::Database =>
                    "the database server alone (the workload's own statements \
                                    included, the same for every option)",
            }
        ),
        readings,
    }
}

/// The range a rate sweep puts the maximum in: from the highest rate at
/// which every repetition held to the lowest at which one did not.
fn capacity(source: Option<&Source>, options: &[&Eval], base: &Path) -> Column {
    let Some(source) = source else {
        return unread(
            Criterion::Capacity,
            "no rate sweep ran these options".into(),
            options,
            "no rate sweep",
        );
    };
    let file = source.sweep_file();
    let readings = options
        .iter()
        .map(|e| {
            let Some(sw) = source.sweep(e.variant) else {
                return not_run(source);
            };
            let Some(max) = sw.max_rate else {
                return Reading::NotMeasured(format!("no step held in {}", source.label));
            };
            let reps = sw
                .steps
                .iter()
                .map(|s| s.repeats.len().max(1) as u32)
                .min()
                .unwrap_or(1);
            let key = format!("strategies[strategy={}]", e.name);
            // Every rate offered held: the maximum is open-ended.
            let high = sw.first_failed_rate.unwrap_or(f64::INFINITY);
            let mut figure = Figure::new(
                format!("{max:.0} orders/s"),
                file.clone(),
                &format!("{key}.max_rate"),
                max,
            );
            let mut text_tail = match sw.first_failed_rate {
                Some(f) => format!("held at every repetition; {f:.0} did not"),
                None => "held at every rate offered".into(),
            };
            if let Some(f) = sw.first_failed_rate {
                figure = figure.with(&format!("{key}.first_failed_rate"), f);
            }
            text_tail += &format!(", {reps} repetitions a step");
            Reading::Measured(Measured {
                bracket: true,
                low: max,
                median: max,
                high,
                repetitions: Some(reps),
                text: format!("{} ({text_tail})", figure.render(base)),
            })
        })
        .collect();
    Column {
        material: Material::Any,
        criterion: Criterion::Capacity,
        from: format!(
            "{} (a rate sweep): the maximum lies between the highest rate every repetition held \
             and the lowest one did not",
            source.label
        ),
        readings,
    }
}

/// Faults that reached each option in one fault run (one trial: a count,
/// never separated).
fn faults(source: Option<&Source>, options: &[&Eval], base: &Path) -> Column {
    let Some(source) = source else {
        return unread(
            Criterion::Faults,
            "no fault run ran these options".into(),
            options,
            "no fault run",
        );
    };
    let readings = options
        .iter()
        .map(|e| {
            let Some(s) = source.summary(e.variant) else {
                return not_run(source);
            };
            let t = FaultTally::of(s);
            let file = source.summary_file(e.name.as_str());
            let anomalies = s.anomalies.total();
            // Faults survived: those that hit it, where nothing broke.
            let survived = if anomalies == 0 { t.hit as f64 } else { 0.0 };
            Reading::Measured(Measured {
                bracket: false,
                low: survived,
                median: survived,
                high: survived,
                repetitions: Some(1),
                text: format!(
                    "{}; {} anomal{} ([summary]({}))",
                    t.words(),
                    anomalies,
                    if anomalies == 1 { "y" } else { "ies" },
                    super::evidence::relative(base, &file).replace(' ', "%20")
                ),
            })
        })
        .collect();
    Column {
        material: Material::Any,
        criterion: Criterion::Faults,
        from: format!(
            "{} (a fault run), one trial: where a fault lands decides what it reaches, so a count \
             is shown, never ranked",
            source.label
        ),
        readings,
    }
}

/// Seconds to cancel again after a restart with the largest backlog held,
/// in one backlog sweep (one trial: never separated).
fn recovery(source: Option<&Source>, options: &[&Eval], base: &Path) -> Column {
    let Some(source) = source else {
        return unread(
            Criterion::Recovery,
            "no backlog sweep ran these options".into(),
            options,
            "no backlog sweep",
        );
    };
    let file = source.sweep_file();
    let readings = options
        .iter()
        .map(|e| {
            let Some(sw) = source.sweep(e.variant) else {
                return not_run(source);
            };
            let found = sw.steps.iter().rev().find_map(|step| {
                let b = step.backlog.as_ref()?;
                // The worst restart: one that lost a probe or never
                // cancelled again before any that merely took longer.
                let worst = |r: &Recovery| {
                    if r.lost_probes() > 0 {
                        f64::MAX
                    } else {
                        r.cancelling_again_s.unwrap_or(f64::MAX)
                    }
                };
                let r: &Recovery = b
                    .recovery
                    .iter()
                    .max_by(|a, b| worst(a).total_cmp(&worst(b)))?;
                Some((step, r))
            });
            let Some((step, r)) = found else {
                return Reading::NotMeasured(format!("no restart in {}", source.label));
            };
            // A restart that lost a probe order, or never cancelled again,
            // is no recovery, however fast: the worst value, said so.
            let lost = r.lost_probes();
            let (value, verdict) = match r.cancelling_again_s {
                _ if lost > 0 => (
                    f64::INFINITY,
                    format!(
                        "**no recovery**: {lost} of {} probe orders lost",
                        r.probes + r.in_flight.as_ref().map_or(0, |f| f.orders)
                    ),
                ),
                None => (
                    f64::INFINITY,
                    "**no recovery** within the limit".to_string(),
                ),
                Some(secs) => (secs, String::new()),
            };
            let key = format!(
                "{}.backlog.recovery[what={}].cancelling_again_s",
                super::reading::step_key(sw, step),
                r.what
            );
            let shown = match r.cancelling_again_s {
                Some(secs) => {
                    Figure::new(format!("{secs:.1} s"), file.clone(), &key, secs).render(base)
                }
                None => "-".into(),
            };
            Reading::Measured(Measured {
                bracket: false,
                low: value,
                median: value,
                high: value,
                repetitions: Some(1),
                text: format!(
                    "{shown}{} after the {} restart ({}), {} pending",
                    if verdict.is_empty() {
                        String::new()
                    } else {
                        format!(" {verdict}")
                    },
                    r.what,
                    r.restart_text(),
                    step.pending.unwrap_or(0)
                ),
            })
        })
        .collect();
    Column {
        material: Material::Any,
        criterion: Criterion::Recovery,
        from: format!(
            "{} (a backlog sweep), one trial, the slowest restart at the largest backlog",
            source.label
        ),
        readings,
    }
}
