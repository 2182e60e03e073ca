//! `sweep.json`, the source of truth of a `delaybench sweep`: every step
//! of every strategy (one offered rate each), whether it held and why not,
//! each strategy's maximum sustainable rate and its share of the ceiling's,
//! and the generator's own check. Also the one definition of a step that
//! holds ([`judge`]) and of the rate a strategy sustains ([`max_sustainable`]).

use super::cpu::{CpuUse, DISTURBED_CORES, SATURATED};
use super::lateness::Pct;
use super::summary::{Status, Summary};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use strategies::registry::Variant;

/// The whole sweep.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SweepResult {
    pub run_id: String,
    /// What the steps vary (sweeps from before the axis existed: rates).
    #[serde(default)]
    pub axis: SweepAxis,
    /// `discover` (double, then bisect) or `list` (`[sweep] rates`).
    pub mode: String,
    /// A step holds only with p99 lateness at commit within this.
    pub bound_ms: f64,
    /// ... and generator lag and schedule path p99 within this.
    pub keep_up_ms: f64,
    /// Discovery's ceiling on offered rates.
    pub max_offered_rate: f64,
    /// In run order: the ceiling first.
    pub strategies: Vec<StrategySweep>,
    /// The generator alone at twice the highest rate a strategy sustained.
    pub generator: Option<GeneratorProbe>,
    /// The ceiling's batch window in ms (`strategies::ceiling::WINDOW`).
    /// Absent in sweeps from before it had one (before issue 22): their
    /// ceiling cancelled each order at its deadline, batching only under
    /// load, and strategies that batch by waiting passed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_window_ms: Option<f64>,
    /// Whether each of the ceiling's claims took every due order (db-scan's
    /// claim, timed by the instance's own deadlines). Absent (false) in
    /// sweeps from before: each ceiling instance then cancelled only its own
    /// due orders, read by id, once per window.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ceiling_claims_every_due_order: bool,
}

/// What a sweep's steps vary; written as `rate`, `pending` or `storm`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SweepAxis {
    /// The offered orders/s; the ceiling runs first and bounds them.
    #[default]
    Rate,
    /// The `[backlog]` size, at the scenario's rate.
    Pending,
    /// The `[storm]` size, at the scenario's rate.
    Storm,
}

/// One strategy's steps and what they add up to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StrategySweep {
    /// Written as its name, as in `summary.json`.
    pub strategy: Variant,
    /// `skipped` or `failed` when no step could run (then `reason` says why).
    pub status: Status,
    pub reason: Option<String>,
    /// In the order they ran.
    pub steps: Vec<SweepStep>,
    /// See [`max_sustainable`]; `None` when no step held.
    pub max_rate: Option<f64>,
    /// The lowest offered rate that did not hold, if any did not.
    pub first_failed_rate: Option<f64>,
    /// `max_rate` / the ceiling's `max_rate`.
    pub share_of_ceiling: Option<f64>,
    /// What ran out at `first_failed_rate` (see [`limited_by`]).
    pub limited_by: Option<String>,
}

impl StrategySweep {
    /// How many runs the maximum stands on were run again after a harness
    /// stall ([`harness_stalled`]): every report that prints the maximum
    /// says so beside it.
    pub fn reruns_behind_max(&self) -> usize {
        self.steps
            .iter()
            .filter(|st| self.max_rate.is_some_and(|m| st.rate <= m))
            .map(|st| st.stalled.len())
            .sum()
    }
}

/// One offered rate, run as a whole scenario of its own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SweepStep {
    pub rate: f64,
    /// The backlog held during the step (the `pending` axis).
    #[serde(default)]
    pub pending: Option<u64>,
    #[serde(default)]
    pub backlog: Option<super::records::BacklogRecord>,
    /// The storm's size (the `storm` axis), and what draining it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm_orders: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm: Option<super::records::StormRecord>,
    pub holds: bool,
    /// Why it does not hold, one criterion each; empty when it holds.
    pub reasons: Vec<String>,
    /// The step's folder under the run folder (its `summary.json`).
    pub folder: String,
    /// Cancelled measured orders behind the lateness figures.
    pub cancels: u64,
    /// Lateness at commit (the row's stamp where no commit time was sent).
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub max_us: Option<u64>,
    /// Orders created per second over the arrival window, as they
    /// committed (the offered `rate` is what was planned).
    pub achieved_rate: f64,
    pub generator_lag_p99_us: u64,
    pub schedule_path_p99_us: Option<u64>,
    /// Overdue and still PENDING: medians of the window's first and last quarter.
    pub overdue_first: Option<u64>,
    pub overdue_last: Option<u64>,
    pub anomalies: u64,
    /// Of `anomalies`, orders still PENDING `drain` past their deadline:
    /// what a strategy that falls behind shows; every other kind is a bug
    /// at any rate.
    pub missed_cancels: u64,
    pub server_rows_read_per_cancel: Option<f64>,
    pub cpu_us_per_cancel: Option<f64>,
    /// CPU over the arrival window (warm-up end to last arrival).
    pub cpu: Option<CpuUse>,
    pub elapsed_s: f64,
    /// With `--repeat N`, every repetition of this step (the fields above
    /// are then the median repetition's, `holds` is all of them holding).
    #[serde(default)]
    pub repeats: Vec<SweepStep>,
    /// Attempts run again because the harness stalled (see
    /// [`harness_stalled`]), each naming its lag, the machine's load and
    /// the folder it was kept in; the figures above are the last attempt's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalled: Vec<String>,
}

impl SweepStep {
    /// Where a report links the step: its summary, or the folder of its
    /// repetitions.
    pub fn link(&self) -> String {
        if self.repeats.is_empty() {
            format!("{}/summary.json", self.folder)
        } else {
            self.folder.clone()
        }
    }

    /// What one order cost the machine in this step, by service, in CPU
    /// µs: each service's cores busy over the arrival window divided by
    /// the orders created per second in it (a core busy all the time at
    /// 1 000 orders/s is 1 000 µs an order). Creating, paying and
    /// cancelling are all in it: it is the whole order's cost on this host,
    /// where every service shares the cores. `None` without a CPU reading
    /// or orders.
    pub fn cpu_us_per_order(&self) -> Option<std::collections::BTreeMap<String, f64>> {
        let cpu = self.cpu.as_ref()?;
        (self.achieved_rate > 0.0).then(|| {
            cpu.by_service
                .iter()
                .map(|(service, cores)| (service.clone(), cores * 1e6 / self.achieved_rate))
                .collect()
        })
    }

    /// Whether the step ran at a rate alone, without a backlog or a storm
    /// beside it.
    pub fn is_rate_only(&self) -> bool {
        self.pending.is_none() && self.storm_orders.is_none()
    }

    /// `min–max` of the repetitions' p99 in ms, when repeated.
    pub fn p99_spread_ms(&self) -> Option<(f64, f64)> {
        let p99s: Vec<f64> = self
            .repeats
            .iter()
            .filter_map(|r| r.p99_us)
            .map(|us| us as f64 / 1000.0)
            .collect();
        (p99s.len() > 1).then(|| {
            (
                p99s.iter().copied().fold(f64::MAX, f64::min),
                p99s.iter().copied().fold(0.0, f64::max),
            )
        })
    }
}

/// One step out of its repetitions: the median repetition (by p99, a
/// repetition without cancels counting as the worst) stands for it; it
/// holds only if every repetition held, and every repetition's reasons are
/// kept, each naming its repetition.
pub fn fold_repeats(mut repeats: Vec<SweepStep>) -> SweepStep {
    assert!(!repeats.is_empty(), "a step has at least one repetition");
    if repeats.len() == 1 {
        return repeats.pop().expect("one");
    }
    let mut by_p99: Vec<&SweepStep> = repeats.iter().collect();
    by_p99.sort_by_key(|r| r.p99_us.unwrap_or(u64::MAX));
    let mut folded = by_p99[by_p99.len() / 2].clone();
    folded.holds = repeats.iter().all(|r| r.holds);
    // Every repetition's lines, each naming its repetition.
    let by_repeat = |lines: fn(&SweepStep) -> &[String]| -> Vec<String> {
        repeats
            .iter()
            .enumerate()
            .flat_map(|(k, r)| {
                lines(r)
                    .iter()
                    .map(move |line| format!("repeat {}: {line}", k + 1))
            })
            .collect()
    };
    folded.reasons = by_repeat(|r| &r.reasons);
    folded.stalled = by_repeat(|r| &r.stalled);
    folded.anomalies = repeats.iter().map(|r| r.anomalies).max().unwrap_or(0);
    folded.missed_cancels = repeats.iter().map(|r| r.missed_cancels).max().unwrap_or(0);
    folded.folder = folded
        .folder
        .rsplit_once("/repeat-")
        .map(|(base, _)| base.to_string())
        .unwrap_or(folded.folder);
    folded.repeats = repeats;
    folded
}

/// The generator driving creates and payments with no canceller at all:
/// first at twice the best strategy's rate (`steps[0]`), then, if it could
/// not, bisected down.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GeneratorProbe {
    /// Twice the best strategy's maximum.
    pub rate: f64,
    /// Whether the generator kept up at `rate`.
    pub holds: bool,
    /// The highest rate at which the generator alone kept up (`rate` when
    /// it did there); `None` when no step held.
    pub max_rate: Option<f64>,
    /// One sentence for the report.
    pub verdict: String,
    pub steps: Vec<GeneratorStep>,
}

/// One rate of the generator alone.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GeneratorStep {
    pub rate: f64,
    pub holds: bool,
    pub created: u64,
    pub planned: u64,
    pub errors: u64,
    pub lag_p50_us: u64,
    pub lag_p99_us: u64,
    pub cpu: Option<CpuUse>,
}

/// Why a step's run does not hold, one reason per failed criterion (empty:
/// it holds). The criteria, all required:
/// - the strategy ran (`ok`) and no worker process died by itself;
/// - no anomaly;
/// - p99 lateness at commit (row stamp where commits were not sent) at
///   most `bound_us`;
/// - the overdue backlog did not grow over the window (and was measured);
/// - the generator kept up: no create or payment errors, p99 lag to commit
///   at most `keep_up_us`;
/// - the schedule path kept up: p99 at most `keep_up_us`.
pub fn judge(s: &Summary, bound_us: u64, keep_up_us: u64) -> Vec<String> {
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    if s.status != Status::Ok {
        return vec![format!(
            "{}: {}",
            s.status.as_str(),
            s.reason.as_deref().unwrap_or("no reason given")
        )];
    }
    let mut reasons = Vec::new();
    if s.anomalies.total() > 0 {
        reasons.push(format!("{} anomalies", s.anomalies.total()));
    }
    if !s.worker_events.is_empty() {
        reasons.push(format!(
            "{} worker process events (deaths or restarts)",
            s.worker_events.len()
        ));
    }
    let lateness = s.committed_lateness_us.as_ref().unwrap_or(&s.lateness_us);
    if lateness.count > 0 && lateness.p99 > bound_us {
        // From fewer samples than a p99 needs, the same fact without
        // printing a p99: more than 1 % of the cancels over the bound.
        reasons.push(match lateness.shown(Pct::P99) {
            Some(p99) => format!(
                "p99 lateness {} > bound {} (n={})",
                ms(p99),
                ms(bound_us),
                lateness.count
            ),
            None => format!(
                "more than 1 % of the {} cancels later than the bound {} (max {}; too few for a \
                 p99)",
                lateness.count,
                ms(bound_us),
                ms(lateness.max)
            ),
        });
    }
    match &s.overdue {
        Some(o) if o.growing => reasons.push(format!(
            "overdue backlog grew from {} to {} orders over the window",
            o.first_quarter, o.last_quarter
        )),
        Some(_) => {}
        None => reasons.push(
            "overdue backlog not measured (window under 0.4 s): cannot tell whether it grew".into(),
        ),
    }
    let g = &s.generator;
    if g.create_errors + g.payment_errors > 0 {
        reasons.push(format!(
            "generator errors: {} creates, {} payments failed",
            g.create_errors, g.payment_errors
        ));
    }
    if g.lag_us_p99 > keep_up_us {
        reasons.push(format!(
            "generator behind: p99 lag to commit {} > {}",
            ms(g.lag_us_p99),
            ms(keep_up_us)
        ));
    }
    if let Some(p) = s.schedule_path_us.as_ref().filter(|p| p.p99 > keep_up_us) {
        reasons.push(match p.shown(Pct::P99) {
            Some(p99) => format!("schedule path behind: p99 {} > {}", ms(p99), ms(keep_up_us)),
            None => format!(
                "schedule path behind: more than 1 % of its {} orders over {} (max {}; too few \
                 for a p99)",
                p.count,
                ms(keep_up_us),
                ms(p.max)
            ),
        });
    }
    reasons
}

/// How many times a step's run is run again when the harness stalled in it.
pub const HARNESS_STALL_RETRIES: u32 = 2;

/// Whether a run failed its step because of the host rather than the
/// strategy, so that it says nothing about the strategy:
/// - only because the generator fell behind while the machine had CPU to
///   spare: the harness, or the host under it (a shared VM's steal, a disk
///   flush), stalled;
/// - for any reason while something outside the services and the harness
///   took [`DISTURBED_CORES`] or more (a process of someone else's, the
///   kernel's threads, steal): the strategy did not have the machine the
///   other steps had.
///
/// Such a run is run again, at most [`HARNESS_STALL_RETRIES`] times, and the
/// report names every attempt run again. A generator slowed by the
/// strategy's own load fails again; one behind on a saturated machine, or
/// with any other reason to fail on an undisturbed one, is the step's
/// result at once.
pub fn harness_stalled(s: &Summary, reasons: &[String], keep_up_us: u64) -> bool {
    let Some(cpu) = s.cpu.as_ref() else {
        return false;
    };
    // The one reason is the lag: generator errors would be a second.
    let stalled =
        reasons.len() == 1 && s.generator.lag_us_p99 > keep_up_us && cpu.machine_busy < SATURATED;
    let disturbed = !reasons.is_empty() && cpu.unattributed_cores() >= DISTURBED_CORES;
    stalled || disturbed
}

/// The highest offered rate that held with every lower rate holding too,
/// and the lowest that did not hold. A strategy that holds at 800 and 1600
/// but not at 1200 sustains 800: a hole below a rate makes it untrustworthy.
pub fn max_sustainable(steps: &[SweepStep]) -> (Option<f64>, Option<f64>) {
    let first_failed = steps
        .iter()
        .filter(|s| !s.holds)
        .map(|s| s.rate)
        .min_by(f64::total_cmp);
    let max = steps
        .iter()
        .filter(|s| s.holds && first_failed.is_none_or(|f| s.rate < f))
        .map(|s| s.rate)
        .max_by(f64::total_cmp);
    (max, first_failed)
}

/// What ran out at the first failing step, in words: the machine's CPUs
/// when they were saturated, one service's core when a single process used
/// about a whole one (Redis is single-threaded), otherwise no resource was
/// saturated and the limit is the strategy's own serial path or waiting.
pub fn limited_by(step: &SweepStep) -> String {
    let why = step.reasons.first().cloned().unwrap_or_default();
    let Some(cpu) = &step.cpu else {
        return format!("{why}; CPU use unknown (not measurable on this system)");
    };
    let resource = if cpu.machine_busy >= SATURATED {
        "CPU: the machine was saturated".to_string()
    } else {
        match cpu.busiest() {
            Some((service, cores)) if service == "redis" && cores >= 0.9 => {
                "Redis's single core".to_string()
            }
            _ => "no CPU saturated: the strategy's own serial path or waiting on a \
                  service (broker confirms, database locks, round trips)"
                .to_string(),
        }
    };
    format!("{resource} ({why}; {})", cpu.describe())
}

impl SweepResult {
    /// Why `sweep` exits non-zero: a strategy that failed to run, or a step
    /// with an anomaly other than missed cancels (a strategy past its knee
    /// misses cancels; it must never break the other invariants).
    pub fn problems(&self) -> crate::exit::Problems {
        let mut problems = crate::exit::Problems::default();
        for s in &self.strategies {
            if s.status == Status::Failed {
                problems.failures.push(format!("{} failed", s.strategy));
            }
            for st in &s.steps {
                let other = st.anomalies.saturating_sub(st.missed_cancels);
                if other > 0 {
                    problems.anomalies.push(format!(
                        "{} at {} orders/s{} has {other} anomalies besides missed cancels (see {}/summary.json)",
                        s.strategy,
                        st.rate,
                        st.pending
                            .map(|n| format!(" with {n} pending"))
                            .or(st.storm_orders.map(|n| format!(" with a storm of {n}")))
                            .unwrap_or_default(),
                        st.folder
                    ));
                }
            }
        }
        problems
    }

    /// Writes `sweep.json` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join("sweep.json");
        std::fs::write(&path, super::schema::versioned_json(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    pub fn read(dir: &Path) -> Result<SweepResult> {
        let path = dir.join("sweep.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (is this a sweep folder?)", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

#[cfg(test)]
impl SweepResult {
    /// A discover-mode rate sweep of `strategies` with the default bounds
    /// (p99 500 ms, keep-up 100 ms) and today's ceiling, for tests of what
    /// reads a sweep; its conclusions are not drawn.
    pub(crate) fn rate_sweep_for_test(strategies: Vec<StrategySweep>) -> SweepResult {
        SweepResult {
            run_id: "test".into(),
            axis: SweepAxis::Rate,
            mode: "discover".into(),
            bound_ms: 500.0,
            keep_up_ms: 100.0,
            max_offered_rate: 10_000.0,
            strategies,
            generator: None,
            ceiling_window_ms: Some(100.0),
            ceiling_claims_every_due_order: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lateness::{LatenessStats, OverdueTrend};
    use std::collections::BTreeMap;
    use strategies::checker::Anomaly;

    fn held(rate: f64, holds: bool) -> SweepStep {
        SweepStep {
            rate,
            holds,
            ..SweepStep::default()
        }
    }

    #[test]
    fn repeats_hold_only_together_and_keep_their_spread() {
        let rep = |k: u32, p99: u64, holds: bool| SweepStep {
            rate: 800.0,
            holds,
            reasons: if holds {
                vec![]
            } else {
                vec!["p99 lateness 900 ms".into()]
            },
            folder: format!("db-scan/rate-800/repeat-{k}"),
            p99_us: Some(p99),
            anomalies: u64::from(!holds),
            missed_cancels: u64::from(!holds),
            ..SweepStep::default()
        };
        let folded = fold_repeats(vec![
            rep(1, 30_000, true),
            rep(2, 900_000, false),
            rep(3, 50_000, true),
        ]);
        assert!(!folded.holds);
        assert_eq!(folded.reasons, ["repeat 2: p99 lateness 900 ms"]);
        assert_eq!(folded.p99_us, Some(50_000), "the median repetition");
        assert_eq!(folded.folder, "db-scan/rate-800");
        assert_eq!((folded.anomalies, folded.missed_cancels), (1, 1));
        assert_eq!(folded.p99_spread_ms(), Some((30.0, 900.0)));
        let one = fold_repeats(vec![rep(1, 30_000, true)]);
        assert!(one.holds && one.repeats.is_empty() && one.p99_spread_ms().is_none());
    }

    #[test]
    fn an_order_costs_each_service_its_cores_over_the_orders_per_second() {
        let step = SweepStep {
            rate: 800.0,
            achieved_rate: 800.0,
            cpu: Some(CpuUse {
                wall_s: 6.0,
                cores: 2,
                machine_busy: 0.5,
                by_service: BTreeMap::from([
                    ("postgresql".to_string(), 0.4),
                    ("rabbitmq".to_string(), 0.2),
                ]),
            }),
            ..SweepStep::default()
        };
        let per = step.cpu_us_per_order().expect("a reading");
        assert_eq!(per["postgresql"], 500.0);
        assert_eq!(per["rabbitmq"], 250.0);
        assert!(held(800.0, true).cpu_us_per_order().is_none(), "no reading");
        let idle = SweepStep {
            achieved_rate: 0.0,
            ..step
        };
        assert!(idle.cpu_us_per_order().is_none(), "no orders");
    }

    #[test]
    fn a_hole_below_a_rate_caps_the_sustainable_rate() {
        let steps = [
            held(100.0, true),
            held(200.0, true),
            held(400.0, false),
            held(300.0, true),
            held(350.0, false),
        ];
        assert_eq!(max_sustainable(&steps), (Some(300.0), Some(350.0)));
        let holed = [held(100.0, true), held(200.0, false), held(400.0, true)];
        assert_eq!(max_sustainable(&holed), (Some(100.0), Some(200.0)));
        assert_eq!(max_sustainable(&[held(100.0, false)]), (None, Some(100.0)));
        assert_eq!(max_sustainable(&[held(100.0, true)]), (Some(100.0), None));
    }

    fn ok_summary() -> Summary {
        let mut s = Summary::not_run(
            "db-scan".parse().unwrap(),
            Status::Ok,
            String::new(),
            Default::default(),
        );
        s.reason = None;
        s.committed_lateness_us = Some(LatenessStats {
            count: 2000,
            p99: 40_000,
            ..LatenessStats::default()
        });
        s.overdue = Some(OverdueTrend {
            first_quarter: 20,
            last_quarter: 22,
            ..OverdueTrend::default()
        });
        s
    }

    #[test]
    fn each_criterion_alone_fails_a_step() {
        let (bound, keep_up) = (500_000, 100_000);
        assert_eq!(judge(&ok_summary(), bound, keep_up), Vec::<String>::new());
        let fails = |edit: &dyn Fn(&mut Summary), needle: &str| {
            let mut s = ok_summary();
            edit(&mut s);
            let reasons = judge(&s, bound, keep_up);
            assert!(
                reasons.len() == 1 && reasons[0].contains(needle),
                "{needle}: {reasons:?}"
            );
        };
        fails(
            &|s| s.committed_lateness_us.as_mut().unwrap().p99 = 600_000,
            "p99 lateness 600.0 ms > bound 500.0 ms (n=2000)",
        );
        fails(
            &|s| s.overdue.as_mut().unwrap().growing = true,
            "grew from 20 to 22",
        );
        fails(&|s| s.overdue = None, "not measured");
        fails(
            &|s| s.anomalies.set(Anomaly::MissedCancels, 3),
            "3 anomalies",
        );
        fails(&|s| s.generator.lag_us_p99 = 150_000, "generator behind");
        fails(&|s| s.generator.create_errors = 1, "generator errors");
        fails(
            &|s| {
                s.schedule_path_us = Some(LatenessStats {
                    p99: 200_000,
                    ..LatenessStats::default()
                })
            },
            "schedule path behind",
        );
        fails(
            &|s| {
                s.status = Status::Failed;
                s.reason = Some("broker gone".into());
            },
            "failed: broker gone",
        );
        // Without commit times the row stamps are judged.
        fails(
            &|s| {
                s.committed_lateness_us = None;
                s.lateness_us.count = 1500;
                s.lateness_us.p99 = 700_000;
            },
            "p99 lateness 700.0 ms",
        );
        // From fewer samples than a p99 needs, the fact without a p99.
        fails(
            &|s| {
                s.committed_lateness_us = None;
                s.lateness_us.count = 10;
                s.lateness_us.p99 = 700_000;
                s.lateness_us.max = 900_000;
            },
            "more than 1 % of the 10 cancels later than the bound 500.0 ms (max 900.0 ms; too \
             few for a p99)",
        );
    }

    #[test]
    fn only_a_generator_behind_on_an_idle_machine_is_a_harness_stall() {
        let (bound, keep_up) = (500_000, 100_000);
        let with = |busy: Option<f64>, edit: &dyn Fn(&mut Summary)| {
            let mut s = ok_summary();
            s.generator.lag_us_p99 = 190_000;
            s.cpu = busy.map(|b| CpuUse {
                wall_s: 6.0,
                cores: 2,
                machine_busy: b,
                by_service: BTreeMap::new(),
            });
            edit(&mut s);
            let reasons = judge(&s, bound, keep_up);
            harness_stalled(&s, &reasons, keep_up)
        };
        assert!(with(Some(0.12), &|_| {}));
        // The machine saturated: the generator's lag is the machine's limit.
        assert!(!with(Some(0.95), &|_| {}));
        // CPU unknown: cannot tell it from a saturated machine.
        assert!(!with(None, &|_| {}));
        // Any other reason makes the run the step's result.
        assert!(!with(Some(0.12), &|s| s
            .overdue
            .as_mut()
            .unwrap()
            .growing = true));
        assert!(!with(Some(0.12), &|s| s
            .anomalies
            .set(Anomaly::MissedCancels, 1)));
        assert!(!with(Some(0.12), &|s| s.generator.create_errors = 1));
        // A generator that kept up is no stall, whatever else failed.
        assert!(!with(Some(0.12), &|s| {
            s.generator.lag_us_p99 = 5_000;
            s.committed_lateness_us.as_mut().unwrap().p99 = 900_000;
        }));
    }

    #[test]
    fn a_step_that_failed_while_something_else_took_the_host_is_run_again() {
        let (bound, keep_up) = (500_000, 100_000);
        // The ceiling's run again at 2 200 orders/s in
        // results/sweep/20261205-022130-sweep, repeat 2: 1.64 cores busy,
        // 1.07 of them the services' and the harness's.
        let with = |postgresql: f64, edit: &dyn Fn(&mut Summary)| {
            let mut s = ok_summary();
            s.cpu = Some(CpuUse {
                wall_s: 6.0,
                cores: 2,
                machine_busy: 0.82,
                by_service: BTreeMap::from([
                    ("postgresql".to_string(), postgresql),
                    ("delaybench (harness + workers)".to_string(), 0.37),
                    ("redis".to_string(), 0.0),
                ]),
            });
            edit(&mut s);
            let reasons = judge(&s, bound, keep_up);
            (harness_stalled(&s, &reasons, keep_up), s)
        };
        let late = |s: &mut Summary| s.committed_lateness_us.as_mut().unwrap().p99 = 900_000;
        let (again, s) = with(0.70, &late);
        assert!(again, "0.57 cores elsewhere");
        let line = s.cpu.unwrap().describe();
        assert!(line.contains("other processes or the host 0.57"), "{line}");
        // The same failure with the host's CPU all accounted for stands.
        let (again, s) = with(1.20, &late);
        assert!(!again, "0.07 cores elsewhere");
        let line = s.cpu.unwrap().describe();
        assert!(!line.contains("other processes"), "{line}");
        // A step that held is never run again, disturbed or not.
        assert!(!with(0.70, &|_| {}).0);
    }

    #[test]
    fn repetitions_keep_the_attempts_run_again() {
        let rep = |p99: u64, stalled: &[&str]| SweepStep {
            holds: true,
            p99_us: Some(p99),
            stalled: stalled.iter().map(|s| s.to_string()).collect(),
            folder: "x/rate-100/repeat-1".into(),
            ..SweepStep::default()
        };
        let folded = fold_repeats(vec![rep(10, &["lag 190 ms"]), rep(20, &[]), rep(30, &[])]);
        assert_eq!(folded.stalled, vec!["repeat 1: lag 190 ms".to_string()]);
        assert!(folded.holds);
    }

    #[test]
    fn the_limit_names_a_saturated_machine_or_a_busy_redis() {
        let step = |busy: f64, redis: f64| SweepStep {
            reasons: vec!["p99 lateness 900 ms > bound 500 ms".into()],
            cpu: Some(CpuUse {
                wall_s: 6.0,
                cores: 2,
                machine_busy: busy,
                by_service: BTreeMap::from([
                    ("redis".to_string(), redis),
                    ("postgresql".to_string(), 0.3),
                ]),
            }),
            ..SweepStep::default()
        };
        assert!(limited_by(&step(0.95, 0.2)).starts_with("CPU: the machine was saturated"));
        assert!(limited_by(&step(0.6, 0.97)).starts_with("Redis's single core"));
        let other = limited_by(&step(0.5, 0.2));
        assert!(other.starts_with("no CPU saturated"), "{other}");
        assert!(
            other.contains("p99 lateness 900 ms") && other.contains("redis 0.20"),
            "{other}"
        );
    }
}
