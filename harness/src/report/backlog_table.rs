//! The backlog sweep's tables beside the main one: bytes per pending order
//! net of the same run's baseline, each with its noise floor
//! ([`HeldBytes`]), and each service's restarts, planned beside unplanned.

use crate::model::held_bytes::{HeldBytes, NetBytes, StepBytes};
use crate::model::records::{Recovery, RestartKind};
use crate::model::summary::Status;
use crate::model::sweep::SweepResult;
use std::fmt::Write as _;

/// A floor in bytes, with decimals when it is small.
fn floor_text(f: f64) -> String {
    if f == 0.0 {
        "0".into()
    } else if f < 1.0 {
        format!("{f:.2}")
    } else if f < 10.0 {
        format!("{f:.1}")
    } else {
        format!("{f:.0}")
    }
}

/// One backend's figure: `239 ± 12`, or `≈ 0 (within the noise of ±35)`
/// when it is no larger than its floor, or `96 (noise not estimated)`.
pub(crate) fn net_bytes_text(v: NetBytes) -> String {
    match v.floor {
        Some(f) if v.within_noise() => format!("≈ 0 (within the noise of ±{})", floor_text(f)),
        Some(f) => format!("{:.0} ± {}", v.bytes, floor_text(f)),
        None => format!("{:.0} (noise not estimated)", v.bytes),
    }
}

/// Every backend of a step: `database 239 ± 0 · workers ≈ 0 (...)`.
pub(crate) fn bytes_text(step: &StepBytes) -> String {
    step.parts
        .iter()
        .map(|(at, v)| format!("{at} {}", net_bytes_text(*v)))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// Bytes per pending order net of the baseline, with the floors under the
/// table; without a backlog step, no table.
pub(crate) fn bytes_per_pending_table(out: &mut String, result: &SweepResult) {
    let held = HeldBytes::of(result);
    if held.steps.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n### Bytes per pending order\n");
    let _ = writeln!(
        out,
        "| strategy | pending | workers (all instances) | Redis used_memory | broker memory | database tables + indexes | compared with |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    for s in &held.steps {
        let cell = |backend: &str| s.part(backend).map_or("-".into(), net_bytes_text);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            s.strategy,
            s.pending,
            cell("workers"),
            cell("Redis"),
            cell("broker"),
            cell("database"),
            s.against.text(),
        );
    }
    if !held.floors.is_empty() {
        let _ = writeln!(out, "\nNoise floors, bytes per pending order:\n");
        for f in &held.floors {
            let _ = writeln!(
                out,
                "- {} at {} pending: ±{}, from {}",
                f.backend,
                f.pending,
                floor_text(f.bytes),
                f.from
            );
        }
    }
    let _ = writeln!(
        out,
        "\nWhat the backend held with the backlog in place beyond what it held just before the \
         backlog went in, less what the same strategy's step of 0 moved by between the same two \
         readings (the same run's baseline with no backlog), over the backlog's size, in bytes \
         (in runs from before the reading just before, against the step of 0's reading). Each \
         figure is shown ± its backend's noise floor at that size: the largest of what the run \
         shows of that backend's noise — any strategy's two readings with no backlog, the \
         workers of a strategy that holds nothing there (its schedule does nothing: the orders \
         table is its schedule), and the difference between a strategy and its `+fallback` \
         form, which hold the same. A figure within its floor is `≈ 0`: no holding was \
         measured. Workers: the instances' resident memory summed, each order being scheduled \
         on one instance, as the allocator keeps it after the hand-off's burst. Redis and the \
         broker are read server-wide. Database: PostgreSQL's `pg_total_relation_size` of the \
         namespace's tables, MariaDB's InnoDB estimate after `ANALYZE TABLE`, SQLite's pages; \
         `-` when the strategy does not use the backend or a step predates the reading."
    );
}

/// A restart's outcome in a few words: seconds until cancelling again,
/// or **not recovered**, with its probes and what was lost.
pub(crate) fn recovery_text(r: &Recovery) -> String {
    let time = match r.cancelling_again_s {
        Some(s) if r.recovered() => format!("{s:.2} s"),
        _ => "**not recovered**".into(),
    };
    let in_flight = r
        .in_flight
        .as_ref()
        .map(|f| format!(", in flight {}/{}", f.cancelled, f.orders))
        .unwrap_or_default();
    let loss = r.loss_text().map(|l| format!(": {l}")).unwrap_or_default();
    format!(
        "{time} (probes {}/{}{in_flight}){loss}",
        r.probes_cancelled, r.probes
    )
}

/// Each service's restarts with the backlog in place, planned beside
/// unplanned, per strategy and backlog size.
pub(crate) fn restarts_table(out: &mut String, result: &SweepResult) {
    let mut rows = Vec::new();
    for s in result.strategies.iter().filter(|s| s.status == Status::Ok) {
        for st in &s.steps {
            let Some(b) = &st.backlog else { continue };
            for service in ["redis", "rabbitmq"] {
                let of = |kind: RestartKind| {
                    b.recovery
                        .iter()
                        .find(|r| r.kind == kind && r.what.starts_with(service))
                };
                let (planned, unplanned) = (of(RestartKind::Planned), of(RestartKind::Unplanned));
                if planned.is_none() && unplanned.is_none() {
                    continue;
                }
                let cell = |r: Option<&Recovery>| r.map_or("not run".into(), recovery_text);
                rows.push(format!(
                    "| {} | {} | {service} | {} | {} |",
                    s.strategy,
                    st.pending.unwrap_or(0),
                    cell(planned),
                    cell(unplanned)
                ));
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n### Restarts: planned beside unplanned\n");
    let _ = writeln!(
        out,
        "| strategy | pending | service | planned (saved first / `stop_app`) | unplanned (SIGKILL, nothing saved) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for row in rows {
        let _ = writeln!(out, "{row}");
    }
    let _ = writeln!(
        out,
        "\nSeconds from the restart's start until the strategy held its backlog again and a \
         fresh, already-due probe order was cancelled, or, when longer, the latest an order in \
         flight through the restart (scheduled just before it, due 1.5 s after, or after the \
         strategy's shortest delay when it has no per-message delay: during the outage when \
         the restart takes longer) was cancelled past its deadline. An order in \
         flight never \
         cancelled within the recovery limit was lost with the schedule: **not recovered**, \
         however fast the service came back. One cancelled only by the fallback scan was \
         rescued, and how late is said. `not run`: the scenario has no command for that \
         restart."
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::records::InFlight;

    #[test]
    fn a_figure_under_its_floor_reads_as_zero_and_the_floor_is_always_shown() {
        let text = |bytes, floor| net_bytes_text(NetBytes { bytes, floor });
        assert_eq!(text(35.0, Some(41.0)), "≈ 0 (within the noise of ±41)");
        assert_eq!(text(-3.0, Some(4.5)), "≈ 0 (within the noise of ±4.5)");
        assert_eq!(text(467.0, Some(230.4)), "467 ± 230");
        assert_eq!(text(239.0, Some(0.0)), "239 ± 0");
        assert_eq!(text(110.0, Some(0.038)), "110 ± 0.04");
        assert_eq!(text(96.0, None), "96 (noise not estimated)");
    }

    #[test]
    fn a_restart_that_lost_orders_in_flight_is_not_recovered_and_a_rescue_says_how_late() {
        let lost = Recovery {
            what: "redis-sigkill".into(),
            kind: RestartKind::Unplanned,
            cancelling_again_s: None,
            probes: 1,
            probes_cancelled: 1,
            in_flight: Some(InFlight {
                orders: 5,
                cancelled: 0,
                watched_s: 20.0,
                ..InFlight::default()
            }),
            ..Recovery::default()
        };
        assert!(!lost.recovered());
        assert_eq!(
            recovery_text(&lost),
            "**not recovered** (probes 1/1, in flight 0/5): 5 of 5 orders in flight never \
             cancelled within 20 s"
        );
        let rescued = Recovery {
            cancelling_again_s: Some(3.4),
            in_flight: Some(InFlight {
                orders: 5,
                cancelled: 5,
                by_fallback: 5,
                max_late_ms: Some(2_100.0),
                ..InFlight::default()
            }),
            ..lost.clone()
        };
        assert!(rescued.recovered());
        assert_eq!(
            recovery_text(&rescued),
            "3.40 s (probes 1/1, in flight 5/5): 5 of 5 orders in flight cancelled only by the \
             fallback scan, the latest 2.1 s late"
        );
    }
}
