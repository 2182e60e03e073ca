//! The warnings a summary's row carries: everything that makes one of its
//! figures mean less than it reads.

use super::cost::MEASUREMENT_BUDGET;
use super::result::{Status, Summary};
use crate::model::lateness::Pct;
use crate::model::records::WorkerEventKind;

/// p99 of order commit -> `schedule()` returned above which a row is
/// flagged: for strategies whose delay starts at publish (rabbit-ttl), all
/// of it is lateness.
pub const SCHEDULE_PATH_BOUND_US: u64 = 20_000;

/// Short warnings for the row of `s`: everything that makes one of its
/// figures mean less than it reads. The sections of the reports give the
/// details.
pub fn warnings(s: &Summary) -> Vec<String> {
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    let mut w = Vec::new();
    let g = &s.generator;
    if g.warning.is_some() {
        w.push(format!(
            "harness behind: lag to commit p99 {}",
            ms(g.lag_us_p99)
        ));
    }
    if g.create_errors + g.payment_errors > 0 {
        w.push(format!(
            "{} order and {} payment transactions failed",
            g.create_errors, g.payment_errors
        ));
    }
    if g.unscheduled > 0 {
        w.push(format!(
            "{} orders created while every instance was down",
            g.unscheduled
        ));
    }
    w.extend(s.network.iter().flatten().filter_map(|l| l.warning()));
    w.extend(s.hosts.iter().flatten().filter_map(|h| h.warning()));
    let schedule_errors: u64 = s.cost.instances.iter().map(|i| i.schedule_errors).sum();
    let dropped: u64 = s.cost.instances.iter().map(|i| i.schedules_dropped).sum();
    if dropped > 0 {
        w.push(format!("{dropped} schedules dropped after retries"));
    } else if schedule_errors > 0 {
        w.push(format!(
            "{schedule_errors} schedule calls failed, all retried"
        ));
    }
    if let Some(p) = &s.schedule_path_us {
        if p.count > 0 && p.p99 > SCHEDULE_PATH_BOUND_US {
            // Never a p99 from fewer samples than the rule allows: the
            // max (and the p90 where it has enough), with n.
            w.push(match p.shown(Pct::P99) {
                Some(p99) => format!(
                    "schedule path p99 {} (bound {})",
                    ms(p99),
                    ms(SCHEDULE_PATH_BOUND_US)
                ),
                None => format!(
                    "schedule path slow: {}max {} (n={}, too few for a p99; bound {})",
                    p.shown(Pct::P90)
                        .map(|v| format!("p90 {}, ", ms(v)))
                        .unwrap_or_default(),
                    ms(p.max),
                    p.count,
                    ms(SCHEDULE_PATH_BOUND_US)
                ),
            });
        }
    }
    for e in &s.worker_events {
        if e.kind != WorkerEventKind::Restarted {
            w.push(format!(
                "instance {} {} at {:.1} s",
                e.instance,
                match e.kind {
                    WorkerEventKind::Died => "died",
                    _ => "failed to restart",
                },
                e.at_ms as f64 / 1000.0
            ));
        }
    }
    for r in &s.cost.instances {
        if let Some(e) = &r.run_error {
            w.push(format!("instance {} failed: {e}", r.instance));
        }
    }
    for f in &s.faults {
        if f.error.is_some() {
            w.push(format!(
                "fault at {:.1} s failed",
                f.planned_at_ms as f64 / 1000.0
            ));
        }
    }
    // Orders paid after their deadline have their own column (`paid late`)
    // in every table that shows lateness, so they are not repeated here.
    if let Some(note) = &s.cost.redis_note {
        w.push(format!("Redis commands {note}"));
    }
    if s.teardown_error.is_some() {
        w.push("teardown failed".into());
    }
    if let Some(share) = s
        .cost
        .measurement
        .as_ref()
        .and_then(|m| m.share_of_cpu)
        .filter(|share| *share > MEASUREMENT_BUDGET)
    {
        w.push(format!(
            "the measurement's own probes and flushes took {:.1} % of the CPU per cancel (budget {:.0} %)",
            share * 100.0,
            MEASUREMENT_BUDGET * 100.0
        ));
    }
    if s.status == Status::Ok && s.lateness_us.count == 0 {
        w.push("no cancels measured".into());
    }
    w
}
