//! Bytes per pending order net of noise, in a backlog sweep: what holding
//! the backlog cost each backend beyond the same run's baseline with no
//! backlog, and the noise floor that figure is read against.
//!
//! Each step reads the backends just before its backlog goes in and once
//! every instance has it ([`BacklogRecord::held_before`], `held`). The
//! step of 0 pending does the same with nothing to hand over: what its two
//! readings differ by is what the readings move by on their own (the
//! allocator, a server's other work). So, for a strategy and a backend:
//!
//! - **net** = (growth of the step of N − growth of the step of 0) / N;
//! - **noise floor** at N, per backend, the largest of what the run shows
//!   of that backend's noise, each over N or already per order:
//!   1. the growth of any strategy's step of 0 (two readings with no
//!      backlog);
//!   2. the workers' net figure of a strategy that holds nothing there
//!      (its schedule does nothing: the orders table is its schedule);
//!   3. the difference between the net figures of a strategy and its
//!      `+fallback` form, which hold the same schedule in the same place.
//!
//! A figure within its floor is no measured holding (≈ 0). A floor is only
//! as good as the readings behind it: with one strategy and no baseline
//! step there is none ([`NetBytes::floor`] `None`, said so).

use super::records::{BacklogRecord, BytesPerOrder};
use super::summary::Status;
use super::sweep::{StrategySweep, SweepResult};

/// One backend's bytes per pending order, with its noise floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetBytes {
    pub bytes: f64,
    /// The noise floor, bytes per order; `None` when nothing in the run
    /// estimates it.
    pub floor: Option<f64>,
}

impl NetBytes {
    /// The figure is no larger than the noise: no measured holding.
    pub fn within_noise(&self) -> bool {
        self.floor.is_some_and(|f| self.bytes.abs() <= f)
    }
}

/// What a step's figures were compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// The readings just before the backlog went in, less what the same
    /// strategy's step of 0 moved by between its two readings.
    NetOfBaseline,
    /// The readings just before it; no step of 0 to take the drift from.
    JustBefore,
    /// The step of 0's readings (runs from before the reading just before
    /// the backlog was taken).
    StepOfZero,
}

impl Against {
    pub fn text(self) -> &'static str {
        match self {
            Against::NetOfBaseline => "just before it, net of the step of 0",
            Against::JustBefore => "just before it (no step of 0)",
            Against::StepOfZero => "the step of 0",
        }
    }
}

/// A backend's noise floor at one backlog size, and which reading set it.
#[derive(Debug, Clone, PartialEq)]
pub struct Floor {
    pub backend: &'static str,
    pub pending: u64,
    pub bytes: f64,
    /// Which reading set it, in words.
    pub from: String,
}

/// One strategy's step with a backlog: its bytes per order by backend.
#[derive(Debug, Clone, PartialEq)]
pub struct StepBytes {
    pub strategy: String,
    pub pending: u64,
    /// `(backend, figure)` in [`BytesPerOrder::parts`]' order.
    pub parts: Vec<(&'static str, NetBytes)>,
    pub against: Against,
}

impl StepBytes {
    pub fn part(&self, backend: &str) -> Option<NetBytes> {
        self.parts
            .iter()
            .find(|(b, _)| *b == backend)
            .map(|(_, v)| *v)
    }
}

/// Every backlog step's bytes per order, net of the baseline, with the
/// floors they were read against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeldBytes {
    pub steps: Vec<StepBytes>,
    pub floors: Vec<Floor>,
}

impl HeldBytes {
    /// The figures of a backlog sweep (none for another axis).
    pub fn of(result: &SweepResult) -> HeldBytes {
        let ok: Vec<&StrategySweep> = result
            .strategies
            .iter()
            .filter(|s| s.status == Status::Ok)
            .collect();
        // Raw net figures, before any floor.
        let mut raw: Vec<(usize, u64, BytesPerOrder, Against)> = Vec::new();
        for (i, s) in ok.iter().enumerate() {
            let baseline = baseline_of(s);
            for st in &s.steps {
                let (Some(n), Some(b)) = (st.pending.filter(|n| *n > 0), st.backlog.as_ref())
                else {
                    continue;
                };
                if let Some((bytes, against)) = net(b, n, baseline) {
                    raw.push((i, n, bytes, against));
                }
            }
        }
        let mut sizes: Vec<u64> = raw.iter().map(|(_, n, ..)| *n).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut floors = Vec::new();
        for &n in &sizes {
            for backend in BACKENDS {
                if let Some(floor) = floor_at(&ok, &raw, n, backend) {
                    floors.push(floor);
                }
            }
        }
        let steps = raw
            .iter()
            .map(|(i, n, bytes, against)| StepBytes {
                strategy: ok[*i].strategy.name().to_string(),
                pending: *n,
                parts: bytes
                    .parts()
                    .into_iter()
                    .map(|(backend, v)| {
                        let floor = floors
                            .iter()
                            .find(|f| f.pending == *n && f.backend == backend)
                            .map(|f| f.bytes);
                        (backend, NetBytes { bytes: v, floor })
                    })
                    .collect(),
                against: *against,
            })
            .collect();
        HeldBytes { steps, floors }
    }

    /// The figures of `strategy` at its largest backlog.
    pub fn largest(&self, strategy: &str) -> Option<&StepBytes> {
        self.steps
            .iter()
            .filter(|s| s.strategy == strategy)
            .max_by_key(|s| s.pending)
    }
}

const BACKENDS: [&str; 4] = ["database", "workers", "Redis", "broker"];

fn part(b: &BytesPerOrder, backend: &str) -> Option<f64> {
    b.parts()
        .into_iter()
        .find(|(at, _)| *at == backend)
        .map(|(_, v)| v)
}

/// The step of 0's record, when the strategy has one.
fn baseline_of(s: &StrategySweep) -> Option<&BacklogRecord> {
    s.steps
        .iter()
        .find(|st| st.pending == Some(0))
        .and_then(|st| st.backlog.as_ref())
}

/// What a record's two readings differ by, in bytes (`None` without the
/// reading just before).
fn growth(b: &BacklogRecord) -> Option<BytesPerOrder> {
    Some(b.held.bytes_per_order(b.held_before.as_ref()?, 1))
}

/// A step's bytes per order net of its strategy's baseline, and against what.
fn net(
    b: &BacklogRecord,
    n: u64,
    baseline: Option<&BacklogRecord>,
) -> Option<(BytesPerOrder, Against)> {
    let Some(grew) = growth(b) else {
        // From before the reading just before: the step of 0's reading.
        return Some((
            b.held.bytes_per_order(&baseline?.held, n),
            Against::StepOfZero,
        ));
    };
    let drift = baseline.and_then(growth);
    let per = |g: Option<f64>, d: Option<f64>| -> Option<f64> {
        let g = g?;
        Some((g - d.unwrap_or(0.0)) / n as f64)
    };
    let d = drift.unwrap_or_default();
    Some((
        BytesPerOrder {
            workers: per(grew.workers, d.workers),
            redis: per(grew.redis, d.redis),
            broker: per(grew.broker, d.broker),
            database: per(grew.database, d.database),
        },
        if drift.is_some() {
            Against::NetOfBaseline
        } else {
            Against::JustBefore
        },
    ))
}

/// The largest of the run's estimates of `backend`'s noise at `n` pending.
fn floor_at(
    ok: &[&StrategySweep],
    raw: &[(usize, u64, BytesPerOrder, Against)],
    n: u64,
    backend: &'static str,
) -> Option<Floor> {
    let mut best: Option<Floor> = None;
    let mut offer = |bytes: f64, from: String| {
        if best.as_ref().is_none_or(|b| bytes > b.bytes) {
            best = Some(Floor {
                backend,
                pending: n,
                bytes,
                from,
            });
        }
    };
    // 1. Two readings with no backlog.
    for s in ok {
        if let Some(d) = baseline_of(s)
            .and_then(growth)
            .and_then(|g| part(&g, backend))
        {
            offer(
                d.abs() / n as f64,
                format!(
                    "{}'s step of 0 (its two readings with no backlog differ by {:.0} kB)",
                    s.strategy.name(),
                    d.abs() / 1000.0
                ),
            );
        }
    }
    let at_n = |i: usize| {
        raw.iter()
            .find(|(j, m, ..)| *j == i && *m == n)
            .and_then(|(_, _, b, _)| part(b, backend))
    };
    for (i, s) in ok.iter().enumerate() {
        // 2. A strategy that holds nothing in its workers.
        if backend == "workers" && s.strategy.info.schedule_does_nothing {
            if let Some(v) = at_n(i) {
                offer(
                    v.abs(),
                    format!("{}, which holds nothing there", s.strategy.name()),
                );
            }
        }
        // 3. A strategy and its +fallback form hold the same.
        let Some(twin) = s.strategy.with_fallback() else {
            continue;
        };
        let Some(j) = ok.iter().position(|t| t.strategy.name() == twin.name()) else {
            continue;
        };
        if let (Some(a), Some(b)) = (at_n(i), at_n(j)) {
            offer(
                (a - b).abs(),
                format!(
                    "{} against {}, which hold the same",
                    s.strategy.name(),
                    twin.name()
                ),
            );
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::records::Holdings;
    use crate::model::sweep::SweepStep;
    use strategies::registry::Variant;

    fn held(rss_kib: u64, broker: Option<u64>, database: u64) -> Holdings {
        Holdings {
            worker_rss_kib: vec![rss_kib],
            broker_memory: broker,
            database_bytes: Some(database),
            ..Holdings::default()
        }
    }

    fn step(pending: u64, before: Holdings, after: Holdings) -> SweepStep {
        SweepStep {
            pending: Some(pending),
            backlog: Some(BacklogRecord {
                pending,
                held_before: Some(before),
                held: after,
                ..BacklogRecord::default()
            }),
            ..SweepStep::default()
        }
    }

    fn strategy(name: &str, steps: Vec<SweepStep>) -> StrategySweep {
        StrategySweep {
            strategy: Variant::parse(name).unwrap(),
            status: Status::Ok,
            reason: None,
            steps,
            max_rate: None,
            first_failed_rate: None,
            share_of_ceiling: None,
            limited_by: None,
        }
    }

    const N: u64 = 1_000_000;

    #[test]
    fn the_floor_is_the_largest_noise_the_run_shows_and_figures_are_net_of_the_baseline() {
        let result = SweepResult {
            strategies: vec![
                // Holds nothing in its workers, which grew 30 MB anyway
                // (2 MB of it with no backlog).
                strategy(
                    "db-scan",
                    vec![
                        step(0, held(20_000, None, 100), held(22_000, None, 100)),
                        step(
                            N,
                            held(20_000, None, 100),
                            held(50_000, None, 100 + 240 * N),
                        ),
                    ],
                ),
                // The same million messages read 460 and 700 bytes each.
                strategy(
                    "rabbit-ttl",
                    vec![
                        step(
                            0,
                            held(30_000, Some(80_000_000), 100),
                            held(30_000, Some(80_004_000), 100),
                        ),
                        step(
                            N,
                            held(30_000, Some(80_000_000), 100),
                            held(30_000, Some(80_004_000 + 460 * N), 100 + 240 * N),
                        ),
                    ],
                ),
                strategy(
                    "rabbit-ttl+fallback",
                    vec![
                        step(
                            0,
                            held(30_000, Some(80_000_000), 100),
                            held(30_000, Some(80_000_000), 100),
                        ),
                        step(
                            N,
                            held(30_000, Some(80_000_000), 100),
                            held(30_000, Some(80_000_000 + 700 * N), 100 + 240 * N),
                        ),
                    ],
                ),
            ],
            ..SweepResult::default()
        };
        let held = HeldBytes::of(&result);
        let floor = |backend: &str| {
            held.floors
                .iter()
                .find(|f| f.backend == backend)
                .unwrap_or_else(|| panic!("no {backend} floor: {:#?}", held.floors))
        };
        // Workers: db-scan's net 28 MB over the million (30 MB less the
        // baseline's 2 MB, in KiB): larger than any step of 0's 2 MB.
        let workers = floor("workers");
        assert!((workers.bytes - 28_000.0 * 1024.0 / N as f64).abs() < 1e-9);
        assert!(
            workers.from.contains("db-scan, which holds nothing"),
            "{workers:?}"
        );
        // Broker: the twins' 460 (net of its baseline's 4 kB) against 700.
        let broker = floor("broker");
        assert!((broker.bytes - 240.0).abs() < 1e-9, "{broker:?}");
        assert!(broker
            .from
            .contains("rabbit-ttl against rabbit-ttl+fallback"));
        // Database: nothing moved with no backlog, the twins agree.
        assert_eq!(floor("database").bytes, 0.0);
        let of = |name: &str| held.largest(name).unwrap();
        assert_eq!(of("db-scan").against, Against::NetOfBaseline);
        assert!(of("db-scan").part("workers").unwrap().within_noise());
        assert_eq!(of("db-scan").part("broker"), None);
        let ttl = of("rabbit-ttl").part("broker").unwrap();
        assert_eq!(ttl.bytes, 460.0);
        assert_eq!(ttl.floor, Some(240.0));
        assert!(!ttl.within_noise());
        let database = of("rabbit-ttl").part("database").unwrap();
        assert_eq!((database.bytes, database.within_noise()), (240.0, false));
        // A figure under the floor is within the noise, a negative one too.
        let small = NetBytes {
            bytes: -12.0,
            floor: Some(30.0),
        };
        assert!(small.within_noise());
        assert!(!NetBytes {
            bytes: 12.0,
            floor: None
        }
        .within_noise());
    }

    #[test]
    fn without_a_step_of_0_the_figure_is_against_just_before_and_a_lone_strategy_has_no_floor() {
        let result = SweepResult {
            strategies: vec![strategy(
                "timing-wheel",
                vec![step(N, held(20_000, None, 100), held(120_000, None, 100))],
            )],
            ..SweepResult::default()
        };
        let held = HeldBytes::of(&result);
        let s = held.largest("timing-wheel").unwrap();
        assert_eq!(s.against, Against::JustBefore);
        let workers = s.part("workers").unwrap();
        assert_eq!(workers.floor, None);
        assert!((workers.bytes - 100_000.0 * 1024.0 / N as f64).abs() < 1e-9);
        assert!(held.floors.iter().all(|f| f.backend != "workers"));
    }
}
