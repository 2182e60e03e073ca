//! `[storm]`: N PENDING orders all due in one instant while the regular
//! load runs, and what draining them took.
//!
//! - once the instances run and before the load, the orders go into the
//!   database and to the instances through `schedule`, with a backlog's
//!   helpers ([`backlog::insert`], [`backlog::hand_off`]), due `lead` after
//!   the insert began; the load then starts `at` before that instant
//!   (late, and said so, when the preparation overran);
//! - [`watch`]: from the instant on, the watch waits until none of the
//!   storm's orders is PENDING (or [`give_up_after`] passed), reading each
//!   service's CPU over the regular load before the storm and over the drain;
//! - [`analyse`]: from the checked rows, the time to cancel them all, the
//!   rate of the drain, the storm's own CPU per cancel (the drain's CPU less
//!   the regular load's, at the rate it ran before), and the regular
//!   orders' lateness before, during and after, with the time until each
//!   second of deadlines was back to normal.
//!
//! The watch polls one COUNT over the storm's id range every
//! [`poll_every`]; only the wait depends on it, never a figure (the drain
//! is read from the rows' own cancel stamps).

use crate::model::cpu::CpuUse;
use crate::model::lateness::{self, LatenessStats};
use crate::model::records::{Holdings, StormRecord};
use crate::resources;
use std::collections::BTreeMap;
use std::time::Duration;
use strategies::checker::CancelTiming;
use strategies::{now_us, Micros, OrderId, OrderStore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Storm orders take ids from here up (above any backlog, below the probes).
pub const STORM_FIRST_ID: OrderId = 1 << 37;

/// A storm in the database and in the instances, before the load.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub orders: u64,
    /// The one deadline, on the wall clock the rows are stamped with.
    pub expire_at_us: Micros,
    pub insert_s: f64,
    pub handoff_s: f64,
    pub handoff_errors: u64,
    /// What the backends held once the hand-off ended, and just before
    /// the storm's orders went in.
    pub held: Holdings,
    pub held_before: Holdings,
}

/// What the watch saw from the storm's instant on.
#[derive(Debug, Default)]
pub struct Drain {
    /// Storm orders still PENDING when the watch stopped (0: drained).
    pub pending_left: i64,
    /// CPU over the regular load from the warm-up's end to the instant.
    pub cpu_before: Option<CpuUse>,
    /// CPU from the instant until the watch saw no storm order pending.
    pub cpu_during: Option<CpuUse>,
}

/// How long the watch waits past the instant before it gives up (the
/// orders left are then the checker's missed cancels): a minute, plus a
/// millisecond per order (a drain slower than 1 000 cancels/s).
pub fn give_up_after(orders: u64) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(orders)
}

/// Between two counts of the storm's pending orders: at least 250 ms, and
/// a second per 100k orders, so the count (an index range over the storm)
/// stays a small share of the database while it drains.
pub fn poll_every(orders: u64) -> Duration {
    Duration::from_millis(250).max(Duration::from_millis(orders / 100))
}

/// Watches the drain of `storm`, due at `due` (the same instant as its
/// `expire_at_us`); the CPU before it is read from `measured_from`.
pub fn watch(
    store: OrderStore,
    storm: &Prepared,
    measured_from: Instant,
    due: Instant,
) -> JoinHandle<Drain> {
    let orders = storm.orders;
    let last = STORM_FIRST_ID + orders as OrderId;
    tokio::spawn(async move {
        tokio::time::sleep_until(measured_from).await;
        let before = resources::snapshot();
        tokio::time::sleep_until(due).await;
        let cpu_before = before.map(|b| b.until_now());
        let during = resources::snapshot();
        let give_up = due + give_up_after(orders);
        // Unknown until a count succeeds: a failed count is said, and
        // never read as drained.
        let mut pending_left = -1;
        loop {
            match store
                .query_i64s(
                    "SELECT COUNT(*) FROM orders WHERE id >= ? AND id < ? AND status = 'PENDING'",
                    &[STORM_FIRST_ID, last],
                )
                .await
            {
                Ok(count) => pending_left = count[0],
                Err(e) => eprintln!("delaybench: storm: counting its pending orders failed: {e}"),
            }
            if pending_left == 0 || Instant::now() >= give_up {
                break;
            }
            if pending_left > 0 {
                eprintln!("delaybench: storm: {pending_left} of {orders} orders still pending");
            }
            tokio::time::sleep(poll_every(orders)).await;
        }
        Drain {
            pending_left,
            cpu_before,
            cpu_during: during.map(|d| d.until_now()),
        }
    })
}

/// Whether a second of deadlines is as good as before the storm: its p99
/// at most twice the p99 before, plus 5 ms for the coarse strategies whose
/// p99 is a few ms.
fn back_to_normal(p99_us: u64, before_p99_us: u64) -> bool {
    p99_us <= 2 * before_p99_us + 5_000
}

/// The storm's figures from the checked rows: `timings` every cancelled
/// order, `measured_from_us` where the regular measured orders begin,
/// `end_us` the last regular deadline, `planned` the scenario's `at`.
pub fn analyse(
    storm: Prepared,
    planned: Duration,
    drain: Drain,
    timings: &[CancelTiming],
    t0_us: Micros,
    measured_from_us: Micros,
    end_us: Micros,
) -> StormRecord {
    let due = storm.expire_at_us;
    let in_storm =
        |id: OrderId| (STORM_FIRST_ID..STORM_FIRST_ID + storm.orders as OrderId).contains(&id);
    let stamps: Vec<Micros> = timings
        .iter()
        .filter(|t| in_storm(t.id))
        .map(|t| t.at_us)
        .collect();
    let cancelled = stamps.len() as u64;
    let last_us = stamps.iter().copied().max();
    let drain_s = (cancelled == storm.orders)
        .then(|| last_us.map(|l| (l - due).max(0) as f64 / 1e6))
        .flatten();
    let lateness_us = without_histogram(lateness::stats_of(
        stamps.iter().map(|at| (at - due).max(0) as u64),
    ));
    let storm_core_s = match (&drain.cpu_before, &drain.cpu_during) {
        (Some(before), Some(during)) => Some(marginal_core_s(before, during)),
        _ => None,
    };
    // The regular measured orders by deadline: before the instant, during
    // the drain, after it; and each second's p99 after the instant.
    let drain_end = last_us.unwrap_or(due).max(due);
    let regular: Vec<&CancelTiming> = timings
        .iter()
        .filter(|t| t.created_at_us >= measured_from_us && t.id < STORM_FIRST_ID)
        .filter(|t| t.at_us >= t.expire_at_us)
        .collect();
    let late = |t: &&CancelTiming| (t.at_us - t.expire_at_us) as u64;
    let window = |from: Micros, to: Micros| {
        without_histogram(lateness::stats_of(
            regular
                .iter()
                .filter(|t| t.expire_at_us >= from && t.expire_at_us < to)
                .map(late),
        ))
    };
    let regular_before_us = window(Micros::MIN, due);
    let regular_during_us = window(due, drain_end + 1);
    let regular_after_us = window(drain_end + 1, Micros::MAX);
    let mut per_second: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    for t in regular
        .iter()
        .filter(|t| t.expire_at_us >= due && t.expire_at_us <= end_us)
    {
        per_second
            .entry((t.expire_at_us - due) / 1_000_000)
            .or_default()
            .push(late(t));
    }
    let seconds: Vec<(i64, u64)> = per_second
        .into_iter()
        .map(|(s, v)| (s, lateness::stats_of(v).p99))
        .collect();
    // The first second from which every later one is back to normal.
    let recovery_s = (regular_before_us.count > 0)
        .then(|| {
            let mut first_good = None;
            for (s, p99) in seconds.iter().rev() {
                if !back_to_normal(*p99, regular_before_us.p99) {
                    break;
                }
                first_good = Some(*s);
            }
            first_good.map(|s| s as f64)
        })
        .flatten();
    StormRecord {
        orders: storm.orders,
        due_ms: ((due - t0_us).max(0) / 1000) as u64,
        planned_ms: planned.as_millis() as u64,
        insert_s: storm.insert_s,
        handoff_s: storm.handoff_s,
        handoff_errors: storm.handoff_errors,
        held: storm.held,
        held_before: Some(storm.held_before),
        cancelled,
        pending_left: drain.pending_left.max(0) as u64,
        drain_s,
        cancels_per_s: drain_s.map(|d| cancelled as f64 / d.max(1e-3)),
        lateness_us,
        cpu_before: drain.cpu_before,
        cpu_during: drain.cpu_during,
        storm_core_s,
        regular_before_us,
        regular_during_us,
        regular_after_us,
        recovery_s,
    }
}

/// Core-seconds the drain used beyond the regular load, every service
/// summed (`CpuUse::beyond`).
fn marginal_core_s(before: &CpuUse, during: &CpuUse) -> f64 {
    during.beyond(before).values().sum()
}

/// Small summaries: the distribution itself is kept for the run's own
/// lateness, which repetitions pool, not for these.
fn without_histogram(mut stats: LatenessStats) -> LatenessStats {
    stats.histogram = None;
    stats
}

/// When the storm's deadline falls: `expire_at_us`, as a tokio instant
/// given the load's `t0` and `t0_us`.
pub fn due_instant(expire_at_us: Micros, t0: Instant, t0_us: Micros) -> Instant {
    t0 + Duration::from_micros((expire_at_us - t0_us).max(0) as u64)
}

/// Sleeps until the wall clock reads `us`.
pub async fn sleep_until_wall(us: Micros) {
    let left = us - now_us();
    if left > 0 {
        tokio::time::sleep(Duration::from_micros(left as u64)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Micros = 1_000_000;

    fn cancel(id: OrderId, created: Micros, expire: Micros, at: Micros) -> CancelTiming {
        CancelTiming {
            id,
            created_at_us: created,
            expire_at_us: expire,
            at_us: at,
        }
    }

    fn prepared(orders: u64, expire_at_us: Micros) -> Prepared {
        Prepared {
            orders,
            expire_at_us,
            insert_s: 0.1,
            handoff_s: 0.2,
            handoff_errors: 0,
            held: Holdings::default(),
            held_before: Holdings::default(),
        }
    }

    /// A storm of 4 due at 10 s, drained by 12 s; regular orders 5 ms
    /// late before, 900 ms late in the two seconds after the instant, then
    /// 5 ms again.
    fn run() -> Vec<CancelTiming> {
        let due = 10 * S;
        let mut timings: Vec<CancelTiming> = (0..4)
            .map(|k| cancel(STORM_FIRST_ID + k, 0, due, due + (k + 1) * S / 2))
            .collect();
        for second in 2..20 {
            let expire = second * S;
            let late = if (10..12).contains(&second) {
                900_000
            } else {
                5_000
            };
            timings.push(cancel(second, expire - S, expire, expire + late));
        }
        timings
    }

    #[test]
    fn the_drain_runs_from_the_instant_to_the_last_storm_cancel() {
        let r = analyse(
            prepared(4, 10 * S),
            Duration::from_secs(10),
            Drain::default(),
            &run(),
            0,
            2 * S,
            20 * S,
        );
        assert_eq!((r.cancelled, r.due_ms, r.planned_ms), (4, 10_000, 10_000));
        assert_eq!(r.drain_s, Some(2.0));
        assert_eq!(r.cancels_per_s, Some(2.0));
        assert_eq!(r.lateness_us.count, 4);
        assert!(r.lateness_us.max >= 2_000_000 - 2_000);
        // Regular deadlines 3..9 s before (the one due at 2 s was created
        // in the warm-up), 10..12 s during, 13..19 s after.
        assert_eq!(r.regular_before_us.count, 7);
        assert_eq!(r.regular_during_us.count, 3);
        assert_eq!(r.regular_after_us.count, 7);
        assert!(r.regular_during_us.p99 >= 5_000 && r.regular_before_us.p99 < 6_000);
        // 10 and 11 s were 900 ms late; from 2 s after the instant on, normal.
        assert_eq!(r.recovery_s, Some(2.0));
        assert!(r.regular_before_us.histogram.is_none());
    }

    #[test]
    fn a_storm_not_all_cancelled_has_no_drain_time_and_says_what_is_left() {
        let mut timings = run();
        timings.retain(|t| t.id != STORM_FIRST_ID + 3);
        let drain = Drain {
            pending_left: 1,
            ..Drain::default()
        };
        let r = analyse(
            prepared(4, 10 * S),
            Duration::from_secs(10),
            drain,
            &timings,
            0,
            2 * S,
            20 * S,
        );
        assert_eq!((r.cancelled, r.pending_left), (3, 1));
        assert_eq!((r.drain_s, r.cancels_per_s), (None, None));
    }

    #[test]
    fn regular_lateness_that_never_recovers_has_no_recovery_time() {
        let mut timings = run();
        // The last regular second stays late.
        timings.push(cancel(99, 18 * S, 19 * S, 19 * S + 900_000));
        let r = analyse(
            prepared(4, 10 * S),
            Duration::from_secs(10),
            Drain::default(),
            &timings,
            0,
            2 * S,
            20 * S,
        );
        assert_eq!(r.recovery_s, None);
    }

    #[test]
    fn the_storm_cpu_is_what_the_drain_used_beyond_the_regular_rate() {
        let cpu = |wall_s: f64, services: &[(&str, f64)]| CpuUse {
            wall_s,
            cores: 2,
            machine_busy: 0.5,
            by_service: services.iter().map(|(s, c)| (s.to_string(), *c)).collect(),
        };
        let before = cpu(8.0, &[("postgresql", 0.3), ("delaybench", 0.2)]);
        let during = cpu(
            2.0,
            &[("postgresql", 0.8), ("delaybench", 0.1), ("redis", 0.05)],
        );
        // (0.8 - 0.3) x 2 + 0 (quieter) + 0.05 x 2
        let core_s = marginal_core_s(&before, &during);
        assert!((core_s - 1.1).abs() < 1e-9, "{core_s}");

        // Split by service over 50 000 cancels: 20 µs and 2 µs, largest
        // first, the quieter service left out; they add up to the total.
        let record = StormRecord {
            cancelled: 50_000,
            cpu_before: Some(before),
            cpu_during: Some(during),
            storm_core_s: Some(core_s),
            ..StormRecord::default()
        };
        let split = record.us_per_cancel_by_service();
        let names: Vec<&str> = split.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(names, ["postgresql", "redis"], "{split:?}");
        assert!((split[0].1 - 20.0).abs() < 1e-6 && (split[1].1 - 2.0).abs() < 1e-6);
        let total: f64 = split.iter().map(|(_, us)| us).sum();
        assert!((total - record.us_per_cancel().unwrap()).abs() < 1e-6);
    }

    #[test]
    fn the_poll_and_the_patience_grow_with_the_storm() {
        assert_eq!(poll_every(10_000), Duration::from_millis(250));
        assert_eq!(poll_every(1_000_000), Duration::from_secs(10));
        assert_eq!(give_up_after(100_000), Duration::from_secs(160));
    }
}
