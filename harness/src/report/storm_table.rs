//! The deadline storm's table: per strategy, how fast it drained N orders
//! due in one instant, what that cost beyond the regular load, and what
//! the regular orders falling due meanwhile saw. Built once, like the
//! other tables in `table`.

use crate::model::cpu::HARNESS_SERVICE;
use crate::model::lateness::{LatenessStats, Pct};
use crate::model::records::{Holdings, StormRecord};
use crate::model::summary::{Status, Summary};
use crate::model::sweep::SweepResult;

/// The storm table (`None` when no strategy ran one).
pub(crate) fn storm_rows(summaries: &[Summary]) -> Option<Vec<Vec<String>>> {
    let ran: Vec<(&Summary, &StormRecord)> = summaries
        .iter()
        .filter(|s| s.status == Status::Ok)
        .filter_map(|s| Some((s, s.storm.as_ref()?)))
        .collect();
    if ran.is_empty() {
        return None;
    }
    let mut out = vec![HEADER.map(String::from).to_vec()];
    for (s, r) in ran {
        let mut row = vec![s.strategy.name().to_string()];
        row.extend(storm_cells(r));
        out.push(row);
    }
    Some(out)
}

/// A storm sweep's table: per strategy and storm size, whether the step
/// held (linked to its summary) and the storm table's cells; `None` when
/// no step ran a storm.
pub(crate) fn storm_sweep_rows(result: &SweepResult) -> Option<Vec<Vec<String>>> {
    let mut header = HEADER.map(String::from).to_vec();
    header.insert(1, "holds".into());
    let mut out = vec![header];
    for s in &result.strategies {
        if s.status != Status::Ok {
            let mut row = vec![s.strategy.name().to_string(), s.status.as_str().to_string()];
            row.push(s.reason.clone().unwrap_or_default().replace('|', "\\|"));
            row.resize(out[0].len(), String::new());
            out.push(row);
            continue;
        }
        for st in &s.steps {
            let mut row = vec![
                s.strategy.name().to_string(),
                format!(
                    "[{}]({})",
                    if st.holds { "yes" } else { "**no**" },
                    st.link()
                ),
            ];
            match &st.storm {
                Some(r) => row.extend(storm_cells(r)),
                // Never dropped: a step that ended before its storm was
                // read still says so, with its size.
                None => {
                    row.push(format!(
                        "{} (**no storm record**: the step ended before its drain was read)",
                        st.storm_orders.map_or("-".into(), |n| n.to_string())
                    ));
                    row.resize(out[0].len(), String::new());
                }
            }
            out.push(row);
        }
    }
    (out.len() > 1).then_some(out)
}

const HEADER: [&str; 10] = [
    "strategy",
    "storm orders, due at",
    "drained in",
    "cancels/s",
    "storm lateness p50 / p99 / max",
    "storm CPU per cancel",
    "cancels per core-second",
    "regular orders' p99 (or max): before / during / after",
    "regular back to normal",
    "held before the storm",
];

/// Every cell of a storm's row past the strategy's name.
fn storm_cells(r: &StormRecord) -> Vec<String> {
    vec![
        due_cell(r),
        match r.drain_s {
            Some(d) => format!("{d:.2} s"),
            None => format!(
                "**not drained**: {} of {} cancelled, {} left PENDING",
                r.cancelled, r.orders, r.pending_left
            ),
        },
        r.cancels_per_s.map_or("-".into(), |c| format!("{c:.0}")),
        format!(
            "{} / {} / {} ms (n={})",
            ms(r.lateness_us.p50),
            r.lateness_us
                .shown(Pct::P99)
                .map_or_else(|| "-".to_string(), ms),
            ms(r.lateness_us.max),
            r.lateness_us.count
        ),
        cpu_cell(r),
        r.cancels_per_core_s()
            .map_or("-".into(), |c| format!("{c:.0}")),
        format!(
            "{} / {} / {}",
            p99_cell(&r.regular_before_us),
            p99_cell(&r.regular_during_us),
            p99_cell(&r.regular_after_us)
        ),
        match r.recovery_s {
            Some(s) => format!("{s:.0} s after the instant"),
            None => "**not within the run**".into(),
        },
        held_cell(&r.held),
    ]
}

/// A storm in a few words, for the README's answer table: "2854/s (1210
/// per core-s); regular orders p99 5.1 ms (n=1800) → max 48.0 ms (n=600,
/// too few for a p99)", or how far
/// it got when it did not drain.
pub(crate) fn storm_drain_text(r: &StormRecord) -> String {
    let drain = match (r.drain_s, r.cancels_per_s) {
        (Some(_), Some(rate)) => format!(
            "{rate:.0}/s ({} per core-s)",
            r.cancels_per_core_s()
                .map_or("-".into(), |c| format!("{c:.0}"))
        ),
        _ => format!("**not drained**: {} of {} cancelled", r.cancelled, r.orders),
    };
    format!(
        "{drain}; regular orders {} → {}",
        p99_cell(&r.regular_before_us),
        p99_cell(&r.regular_during_us)
    )
}

/// The storm's CPU per cancel, and where it went: "193 µs (postgresql 76
/// · harness + workers 60 · rabbitmq 56)".
fn cpu_cell(r: &StormRecord) -> String {
    let Some(us) = r.us_per_cancel() else {
        return "-".into();
    };
    let split: Vec<String> = r
        .us_per_cancel_by_service()
        .iter()
        .map(|(service, us)| {
            let service = if service == HARNESS_SERVICE {
                "harness + workers"
            } else {
                service.as_str()
            };
            format!("{service} {us:.0}")
        })
        .collect();
    if split.is_empty() {
        format!("{us:.0} µs")
    } else {
        format!("{us:.0} µs ({})", split.join(" · "))
    }
}

/// The storm's size and instant, with how long its insert and hand-off
/// took (rabbit-ttl's drain includes the hand-off's spread); stressed when
/// they overran their lead and the instant fell earlier than planned.
fn due_cell(r: &StormRecord) -> String {
    let at = format!(
        "{} at {:.1} s (insert {:.1} s, hand-off {:.1} s)",
        r.orders,
        r.due_ms as f64 / 1000.0,
        r.insert_s,
        r.handoff_s
    );
    if r.overran_lead() {
        format!(
            "{at}, **planned at {:.1} s**: the preparation overran its lead",
            r.planned_ms as f64 / 1000.0
        )
    } else {
        at
    }
}

/// The regular orders' p99, or, from fewer samples than a p99 needs,
/// their max (never a p99 below the sample rule), each with its n.
fn p99_cell(stats: &LatenessStats) -> String {
    if stats.count == 0 {
        return "- (n=0)".into();
    }
    match stats.shown(Pct::P99) {
        Some(p99) => format!("p99 {} ms (n={})", ms(p99), stats.count),
        None => format!(
            "max {} ms (n={}, too few for a p99)",
            ms(stats.max),
            stats.count
        ),
    }
}

fn held_cell(held: &Holdings) -> String {
    let mib = |b: u64| format!("{:.0} MiB", b as f64 / (1 << 20) as f64);
    let mut parts = Vec::new();
    if !held.worker_rss_kib.is_empty() {
        let rss: Vec<String> = held.worker_rss_kib.iter().map(|k| mib(k * 1024)).collect();
        parts.push(format!("workers {}", rss.join(" + ")));
    }
    if let Some(b) = held.redis_used_memory {
        parts.push(format!("Redis {}", mib(b)));
    }
    if let Some(b) = held.broker_memory {
        parts.push(format!("broker {}", mib(b)));
    }
    if let Some(b) = held.database_bytes {
        parts.push(format!("database {}", mib(b)));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// Microseconds as the other tables print milliseconds (`table` builds on
/// this module, so it cannot be imported from there).
fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

/// What the storm table's words mean.
pub(crate) const STORM_NOTES: &str = "\
The storm's orders were written and handed to the strategy before the load, all due in one \
instant; none is paid. **drained in**: from the instant to the last storm order's cancel \
(the rows' own stamps). **storm CPU per cancel** and **cancels per core-second**: the CPU every \
service and the workers used over the drain, less what they used at the regular load's rate \
before the instant, over the storm's cancels; so the figure travels to a machine with more \
cores. In brackets, that CPU per cancel by service. A drain shorter than a second reads that CPU coarsely. **regular p99**: the regular \
measured orders by deadline, before the instant, during the drain and after it (n each); from \
fewer than 1 000 of them, their max instead (a p99 needs 1 000). \
**back to normal**: from that second on, every second of regular deadlines had its p99 within \
twice the p99 before plus 5 ms. **held before the storm**: what the backends held once the \
hand-off ended (worker RSS each, Redis and broker memory server-wide, the namespace's tables). \
rabbit-ttl's wait queues have fixed TTLs: its storm orders each fire one TTL after their own \
hand-off, so its drain includes the hand-off's spread. With `--repeat`, a row is the repetition \
of median p99; the trade-off table's storm column gives the median and min–max of all.";

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(count: u64, p99_us: u64) -> LatenessStats {
        LatenessStats {
            count,
            p99: p99_us,
            max: p99_us * 2,
            ..LatenessStats::default()
        }
    }

    #[test]
    fn a_drained_storm_reads_as_its_rate_and_the_regular_p99s_with_their_counts_never_below_the_rule(
    ) {
        let r = StormRecord {
            orders: 100_000,
            cancelled: 100_000,
            drain_s: Some(35.0),
            cancels_per_s: Some(2857.1),
            storm_core_s: Some(50.0),
            regular_before_us: stats(1800, 5_100),
            regular_during_us: stats(600, 48_000),
            ..StormRecord::default()
        };
        assert_eq!(
            storm_drain_text(&r),
            "2857/s (2000 per core-s); regular orders p99 5.1 ms (n=1800) → max 96.0 ms (n=600, \
             too few for a p99)"
        );
    }

    #[test]
    fn a_storm_that_did_not_drain_never_reads_as_a_rate() {
        let r = StormRecord {
            orders: 100_000,
            cancelled: 99_000,
            pending_left: 1_000,
            drain_s: None,
            cancels_per_s: Some(2800.0),
            regular_before_us: stats(1800, 5_100),
            ..StormRecord::default()
        };
        assert_eq!(
            storm_drain_text(&r),
            "**not drained**: 99000 of 100000 cancelled; regular orders p99 5.1 ms (n=1800) → - \
             (n=0)"
        );
    }
}
