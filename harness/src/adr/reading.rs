//! How one sample reads against an SLA term: a run's summary, a backlog
//! step or a rate sweep gives a figure (linked to its JSON key) that holds,
//! fails, or cannot decide the term. A lateness percentile with too few
//! samples is bounded by the lower percentiles and the max; a restart that
//! lost a probe order fails; a sweep that held at every rate offered is
//! undecided for a `≥` bound.

use super::evidence::{ms_text, FaultTally, Figure, Sample, SampleKind, Source};
use super::sla::{pct_name, trim, Metric, Op, Term};
use crate::model::lateness::{LatenessStats, Pct, SAMPLES_BEYOND_A_PERCENTILE};
use crate::model::records::Recovery;
use crate::model::summary::Summary;
use crate::model::sweep::{StrategySweep, SweepStep};
use std::path::PathBuf;
use strategies::checker::Anomaly;

/// One sample's reading of a term.
pub(super) enum Reading {
    Holds(Figure, f64, String),
    Fails(Figure, f64, String),
    /// Too few samples to tell, and what is known.
    Undecided(Figure, String),
}

/// A lateness distribution from a summary or a sweep step, with where
/// each percentile's key is.
struct Pcts {
    count: u64,
    values: [Option<u64>; 5],
    file: PathBuf,
    /// Key of percentile `name`.
    key: Box<dyn Fn(&str) -> String>,
    /// `quick`, `1000000 pending`: said in the figure.
    label: String,
}

const ORDER: [Pct; 5] = [Pct::P50, Pct::P90, Pct::P99, Pct::P999, Pct::Max];

fn quantile(p: Pct) -> f64 {
    match p {
        Pct::P50 => 0.5,
        Pct::P90 => 0.9,
        Pct::P99 => 0.99,
        Pct::P999 => 0.999,
        Pct::Max => 1.0,
    }
}

/// Samples a percentile needs before it is shown (p99: 1 000).
pub fn samples_needed(p: Pct) -> u64 {
    (SAMPLES_BEYOND_A_PERCENTILE / (1.0 - quantile(p))).round() as u64
}

impl Pcts {
    fn of_summary(s: &Summary, file: PathBuf, label: String) -> Pcts {
        let l: &LatenessStats = &s.lateness_us;
        Pcts {
            count: l.count,
            values: ORDER.map(|p| l.shown(p)),
            file,
            key: Box::new(|p| format!("lateness_us.{p}")),
            label,
        }
    }

    fn of_step(sweep: &StrategySweep, step: &SweepStep, file: PathBuf) -> Pcts {
        let l = LatenessStats {
            count: step.cancels,
            p50: step.p50_us.unwrap_or(0),
            p99: step.p99_us.unwrap_or(0),
            max: step.max_us.unwrap_or(0),
            ..LatenessStats::default()
        };
        let has = [
            step.p50_us.is_some(),
            false,
            step.p99_us.is_some(),
            false,
            step.max_us.is_some(),
        ];
        let at = step_key(sweep, step);
        Pcts {
            count: step.cancels,
            values: std::array::from_fn(|i| has[i].then(|| l.shown(ORDER[i])).flatten()),
            file,
            key: Box::new(move |p| format!("{at}.{p}_us")),
            label: format!("{} pending", step.pending.unwrap_or(0)),
        }
    }

    fn get(&self, p: Pct) -> Option<u64> {
        self.values[ORDER.iter().position(|o| *o == p).expect("listed")]
    }

    fn figure(&self, p: Pct, v: u64) -> Figure {
        Figure::new(
            format!(
                "{} {} ({}, n={})",
                pct_name(p),
                ms_text(v as f64),
                self.label,
                self.count
            ),
            self.file.clone(),
            &(self.key)(pct_name(p)),
            v,
        )
    }
}

pub fn step_key(sweep: &StrategySweep, step: &SweepStep) -> String {
    match step.pending {
        Some(pending) => format!(
            "strategies[strategy={}].steps[pending={pending}]",
            sweep.strategy
        ),
        None => format!(
            "strategies[strategy={}].steps[rate={}]",
            sweep.strategy,
            trim(step.rate)
        ),
    }
}

/// A lateness percentile term on one distribution, with the lower
/// percentiles and the max standing in where the percentile itself has
/// too few samples.
fn read_lateness(pcts: &Pcts, p: Pct, term: &Term) -> Reading {
    let holds = |v: u64| term.op.holds(v as f64, term.bound);
    if let Some(v) = pcts.get(p) {
        let f = pcts.figure(p, v);
        return if holds(v) {
            Reading::Holds(f, v as f64, String::new())
        } else {
            Reading::Fails(f, v as f64, String::new())
        };
    }
    let rank = ORDER.iter().position(|o| *o == p).expect("listed");
    let few = format!("too few samples for a {}", pct_name(p));
    // Lower percentiles shown, highest first: each is at most the one asked.
    let lower: Vec<(Pct, u64)> = ORDER[..rank]
        .iter()
        .rev()
        .filter_map(|&q| pcts.get(q).map(|v| (q, v)))
        .collect();
    let max = pcts.get(Pct::Max);
    if term.op.is_upper() {
        if let Some(&(q, v)) = lower.iter().find(|(_, v)| !holds(*v)) {
            return Reading::Fails(
                pcts.figure(q, v),
                v as f64,
                format!(
                    " ({few}; the {} is already over the bound, so the {} is too)",
                    pct_name(q),
                    pct_name(p)
                ),
            );
        }
        if let Some(m) = max.filter(|m| holds(*m)) {
            return Reading::Holds(
                pcts.figure(Pct::Max, m),
                m as f64,
                format!(" ({few}: the max bounds it)"),
            );
        }
    } else if matches!(term.op, Op::Ge | Op::Gt) {
        if let Some(&(q, v)) = lower.iter().find(|(_, v)| holds(*v)) {
            return Reading::Holds(
                pcts.figure(q, v),
                v as f64,
                format!(" ({few}; the {} already reaches the bound)", pct_name(q)),
            );
        }
        if let Some(m) = max.filter(|m| !holds(*m)) {
            return Reading::Fails(
                pcts.figure(Pct::Max, m),
                m as f64,
                format!(" ({few}; the max is below the bound)"),
            );
        }
    }
    let known = match (lower.first(), max) {
        (_, None) => pcts.figure(Pct::Max, 0),
        (Some(&(q, v)), Some(_)) => pcts.figure(q, v),
        (None, Some(m)) => pcts.figure(Pct::Max, m),
    };
    Reading::Undecided(
        known,
        format!("{few} (n={}, needs {})", pcts.count, samples_needed(p)),
    )
}

/// How one sample (a run, a backlog step, a rate sweep) reads against
/// `term`.
pub(super) fn read(sample: &Sample, term: &Term) -> Reading {
    let source = sample.source;
    match (&sample.what, term.metric) {
        (SampleKind::Run(s, tally), metric) => read_run(source, s, *tally, metric, term),
        (SampleKind::Step(sweep, step), metric) => read_step(source, sweep, step, metric, term),
        (SampleKind::Rate(sweep), _) => read_rate(sweep, source.sweep_file(), term),
    }
}

/// A run's summary against `term`; a fault run's figures say how its
/// faults met the strategy (`tally`).
fn read_run(
    source: &Source,
    s: &Summary,
    tally: Option<FaultTally>,
    metric: Metric,
    term: &Term,
) -> Reading {
    let file = source.summary_file(s.strategy.name());
    let faults = tally
        .map(|t| format!(" ({})", t.words()))
        .unwrap_or_default();
    match metric {
        Metric::Lateness(p) => {
            let pcts = Pcts::of_summary(s, file, source.label.clone());
            match read_lateness(&pcts, p, term) {
                Reading::Holds(f, v, n) => Reading::Holds(f, v, n + &faults),
                Reading::Fails(f, v, n) => Reading::Fails(f, v, n + &faults),
                Reading::Undecided(f, why) => Reading::Undecided(f, why + &more_samples_hint(s, p)),
            }
        }
        Metric::Missed | Metric::Anomalies => {
            let (value, key, what) = if metric == Metric::Missed {
                (
                    s.anomalies.get(Anomaly::MissedCancels),
                    "anomalies.missed_cancels",
                    "missed",
                )
            } else {
                (s.anomalies.total(), "anomalies.*", "anomalies")
            };
            let f = Figure::new(
                format!("{value} {what} ({})", source.label),
                file,
                key,
                value,
            );
            count_reading(f, value as f64, term, faults)
        }
        Metric::PaidAfterDeadline => {
            let (f, share) = paid_late_figure(s, file, &source.label);
            count_reading(f, share, term, faults)
        }
        Metric::MaxRate | Metric::Recovery => unreachable!("not a run's metric"),
    }
}

/// A backlog sweep's step against `term`.
fn read_step(
    source: &Source,
    sweep: &StrategySweep,
    step: &SweepStep,
    metric: Metric,
    term: &Term,
) -> Reading {
    let file = source.sweep_file();
    let at = step_key(sweep, step);
    match metric {
        Metric::Lateness(p) => read_lateness(&Pcts::of_step(sweep, step, file), p, term),
        Metric::Missed | Metric::Anomalies => {
            let (value, field, what) = if metric == Metric::Missed {
                (step.missed_cancels, "missed_cancels", "missed")
            } else {
                (step.anomalies, "anomalies", "anomalies")
            };
            let f = Figure::new(
                format!("{value} {what} ({} pending)", step.pending.unwrap_or(0)),
                file,
                &format!("{at}.{field}"),
                value,
            );
            count_reading(f, value as f64, term, String::new())
        }
        Metric::Recovery => read_recovery(step, &at, file, term),
        _ => unreachable!("not a backlog step's metric"),
    }
}

fn count_reading(f: Figure, value: f64, term: &Term, note: String) -> Reading {
    if term.op.holds(value, term.bound) {
        Reading::Holds(f, value, note)
    } else {
        Reading::Fails(f, value, note)
    }
}

/// What would give the percentile enough samples. Repetitions pool their
/// samples for percentiles, so `--repeat K` multiplies them by K.
fn more_samples_hint(s: &Summary, p: Pct) -> String {
    let needed = samples_needed(p);
    let per_run = s
        .repeats
        .as_ref()
        .and_then(|r| r.figures.get("n"))
        .map(|n| n.min)
        .unwrap_or(s.lateness_us.count as f64)
        .max(1.0);
    let repeats = (needed as f64 / per_run).ceil() as u64;
    if let Some(r) = s.repeats.as_ref().filter(|r| r.count as u64 >= repeats) {
        // Enough repetitions ran, but this summary did not pool them.
        return format!(
            "; its {} repetitions hold about {:.0} samples together, which a rerun with this \
             build pools",
            r.count,
            per_run * r.count as f64
        );
    }
    format!(
        "; run longer (`--scenario busy`) or `--repeat {repeats}`, whose repetitions pool their \
         samples"
    )
}

/// The share of orders paid after their deadline: over repetitions, the
/// worst one (a share must not read better than any repetition did).
pub fn paid_late_figure(s: &Summary, file: PathBuf, label: &str) -> (Figure, f64) {
    let worst = s.repeats.as_ref().and_then(|r| {
        let late = r.figures.get("paid_late")?;
        let created = r.figures.get("created")?;
        Some((r.count, late.max, created.min))
    });
    match worst {
        Some((count, late, created)) => {
            let share = late / created.max(1.0);
            (
                Figure::new(
                    format!(
                        "{:.2}% paid late ({label}, {late:.0} of {created:.0}, the worst of {count})",
                        share * 100.0,
                    ),
                    file,
                    "repeats.figures.paid_late.max",
                    late,
                )
                .with("repeats.figures.created.min", created),
                share,
            )
        }
        None => {
            let share = s.orders.paid_after_deadline as f64 / s.orders.created.max(1) as f64;
            (
                Figure::new(
                    format!(
                        "{:.2}% paid late ({label}, {} of {})",
                        share * 100.0,
                        s.orders.paid_after_deadline,
                        s.orders.created
                    ),
                    file,
                    "orders.paid_after_deadline",
                    s.orders.paid_after_deadline,
                )
                .with("orders.created", s.orders.created),
                share,
            )
        }
    }
}

/// Every restart of a backlog step: a restart that lost a probe order, or
/// did not cancel again within the harness's limit, fails whatever its
/// time. The worst restart decides: a failure, else an undecided one,
/// else the slowest.
fn read_recovery(step: &SweepStep, at: &str, file: PathBuf, term: &Term) -> Reading {
    let pending = step.pending.unwrap_or(0);
    let Some(backlog) = &step.backlog else {
        return no_restart(pending, at, file, "the step kept no backlog record");
    };
    let mut worst: Option<Reading> = None;
    for r in &backlog.recovery {
        let reading = read_restart(r, pending, at, file.clone(), term);
        let rank = |r: &Reading| match r {
            Reading::Fails(_, v, _) => (2, *v),
            Reading::Undecided(..) => (1, 0.0),
            Reading::Holds(_, v, _) => (0, *v),
        };
        if worst.as_ref().is_none_or(|w| {
            rank(&reading).partial_cmp(&rank(w)) == Some(std::cmp::Ordering::Greater)
        }) {
            worst = Some(reading);
        }
    }
    worst.unwrap_or_else(|| {
        no_restart(
            pending,
            at,
            file,
            "no restart was made with the backlog in place",
        )
    })
}

/// A backlog step with no restart to read, and why.
fn no_restart(pending: u64, at: &str, file: PathBuf, why: &str) -> Reading {
    Reading::Undecided(
        Figure::new(
            format!("{pending} pending, no restart recorded"),
            file,
            &format!("{at}.pending"),
            pending,
        ),
        why.into(),
    )
}

/// One restart of a backlog step (`pending` orders) against `term`.
fn read_restart(r: &Recovery, pending: u64, at: &str, file: PathBuf, term: &Term) -> Reading {
    let key = format!("{at}.backlog.recovery[what={}]", r.what);
    if let Some(f) = r.in_flight.as_ref().filter(|f| f.lost() > 0) {
        return Reading::Fails(
            Figure::new(
                // The figures the keys hold (cancelled of orders), so the
                // number shown is the one in the file.
                format!(
                    "only {} of {} orders in flight through the {} {} restart cancelled, the \
                     rest never ({pending} pending)",
                    f.cancelled,
                    f.orders,
                    r.kind.label(),
                    r.what
                ),
                file,
                &format!("{key}.in_flight.cancelled"),
                f.cancelled,
            )
            .with(&format!("{key}.in_flight.orders"), f.orders),
            f64::INFINITY,
            " (its schedule was lost: no recovery)".into(),
        );
    }
    if r.probes_cancelled < r.probes {
        Reading::Fails(
            Figure::new(
                format!(
                    "{} of {} probe orders cancelled after the {} restart ({pending} pending)",
                    r.probes_cancelled, r.probes, r.what
                ),
                file,
                &format!("{key}.probes_cancelled"),
                r.probes_cancelled,
            )
            .with(&format!("{key}.probes"), r.probes),
            f64::INFINITY,
            " (a probe order was never cancelled: no recovery)".into(),
        )
    } else {
        match r.cancelling_again_s {
            None => Reading::Fails(
                Figure::new(
                    format!(
                        "{:.1} s {} restart, then not cancelling again within the limit ({pending} pending)",
                        r.restart_s, r.what
                    ),
                    file,
                    &format!("{key}.restart_s"),
                    r.restart_s,
                ),
                f64::INFINITY,
                String::new(),
            ),
            Some(s) => count_reading(
                Figure::new(
                    format!("{s:.1} s after the {} restart ({pending} pending)", r.what),
                    file,
                    &format!("{key}.cancelling_again_s"),
                    s,
                ),
                s * 1e6,
                term,
                String::new(),
            ),
        }
    }
}

fn read_rate(sweep: &StrategySweep, file: PathBuf, term: &Term) -> Reading {
    let key = format!("strategies[strategy={}].max_rate", sweep.strategy);
    match sweep.max_rate {
        Some(rate) => {
            let ceiling = sweep.first_failed_rate.is_none();
            let fig = Figure::new(
                format!(
                    "{} orders/s{}",
                    trim(rate),
                    if ceiling {
                        " (the highest rate offered: at least this)"
                    } else {
                        ""
                    }
                ),
                file,
                &key,
                rate,
            );
            if term.op.holds(rate, term.bound) {
                Reading::Holds(fig, rate, String::new())
            } else if ceiling && matches!(term.op, Op::Ge | Op::Gt) {
                Reading::Undecided(
                    fig,
                    "held at every rate offered: raise `[sweep] max-rate`".into(),
                )
            } else {
                let limit = sweep
                    .limited_by
                    .as_deref()
                    .map(|l| format!(" (limited by {})", l.split(" (").next().unwrap_or(l)))
                    .unwrap_or_default();
                Reading::Fails(fig, rate, limit)
            }
        }
        None => Reading::Fails(
            Figure::new(
                format!(
                    "{} orders/s, the lowest rate offered, did not hold",
                    sweep.first_failed_rate.map(trim).unwrap_or_default()
                ),
                file,
                &format!("strategies[strategy={}].first_failed_rate", sweep.strategy),
                sweep.first_failed_rate.map(trim).unwrap_or_default(),
            ),
            0.0,
            String::new(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::records::{InFlight, RestartKind};

    fn recovery_term() -> Term {
        Term {
            metric: Metric::Recovery,
            op: Op::Le,
            bound: 30e6,
            text: "recovery<=30s".into(),
        }
    }

    #[test]
    fn a_restart_that_lost_orders_in_flight_fails_however_fast() {
        let term = recovery_term();
        let mut r = Recovery {
            what: "redis-sigkill".into(),
            kind: RestartKind::Unplanned,
            cancelling_again_s: Some(0.2),
            probes: 1,
            probes_cancelled: 1,
            in_flight: Some(InFlight {
                orders: 5,
                cancelled: 5,
                by_fallback: 5,
                ..InFlight::default()
            }),
            ..Recovery::default()
        };
        // Rescued by the fallback scan: a recovery, timed.
        let at = "strategies[strategy=redis-zset+fallback].steps[pending=2000]";
        assert!(matches!(
            read_restart(&r, 2000, at, PathBuf::from("sweep.json"), &term),
            Reading::Holds(..)
        ));
        // Lost with the schedule: no recovery, cited by its own key.
        r.in_flight = Some(InFlight {
            orders: 5,
            cancelled: 0,
            ..InFlight::default()
        });
        match read_restart(&r, 2000, at, PathBuf::from("sweep.json"), &term) {
            Reading::Fails(f, v, note) => {
                assert!(v.is_infinite());
                assert!(note.contains("no recovery"), "{note}");
                assert!(
                    f.text.starts_with("only 0 of 5 orders in flight"),
                    "{}",
                    f.text
                );
                assert!(f.keys[0]
                    .0
                    .ends_with("recovery[what=redis-sigkill].in_flight.cancelled"));
            }
            _ => panic!("a lost order in flight must fail"),
        }
    }
}
