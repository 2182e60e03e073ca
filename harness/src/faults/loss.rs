//! Missed cancels put down to the faults in effect while the lost orders
//! lived.

use super::record::FaultRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Missed cancels put down to one fault, to several at once, or to none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultLoss {
    /// The fault's position in the scenario's `[[faults]]` when exactly one
    /// was in effect during the lost orders' lives.
    pub fault: Option<usize>,
    /// When several were (the row cannot tell which): their positions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub several: Vec<usize>,
    pub label: String,
    pub missed: u64,
}

/// After its deadline, how long an order's cancel is still the strategy's
/// business (a claim in progress, a retry) when attributing a loss.
const LOSS_SLACK_MS: u64 = 1_000;

/// Attributes each missed order (`(created, deadline)`, ms after the first
/// order) to the faults in effect during its life, from creation to its
/// deadline plus a second. One fault: that fault's loss. Several: a row of
/// their own, since the run cannot tell which one lost it (space the faults
/// further apart than an order lives to avoid it). None: a loss the faults
/// do not explain, which a correct strategy should never have. A fault in
/// effect to the end of the run is counted until `run_end_ms`.
pub fn missed_by_fault(
    missed: &[(u64, u64)],
    faults: &[FaultRecord],
    run_end_ms: u64,
) -> Vec<FaultLoss> {
    // A fault that never acted explains nothing.
    let spans: Vec<Option<(u64, u64)>> = faults
        .iter()
        .map(|f| {
            f.took_effect()
                .then(|| f.span())
                .flatten()
                .map(|span| (span.from, span.to.unwrap_or(run_end_ms)))
        })
        .collect();
    let mut by_cause: BTreeMap<Vec<usize>, u64> = BTreeMap::new();
    for &(created, deadline) in missed {
        let life_end = deadline + LOSS_SLACK_MS;
        let in_effect: Vec<usize> = spans
            .iter()
            .enumerate()
            .filter_map(|(i, span)| span.map(|span| (i, span)))
            .filter(|(_, (from, to))| *from <= life_end && *to >= created)
            .map(|(i, _)| i)
            .collect();
        *by_cause.entry(in_effect).or_default() += 1;
    }
    let mut losses: Vec<FaultLoss> = faults
        .iter()
        .enumerate()
        .map(|(i, f)| FaultLoss {
            fault: Some(i),
            several: Vec::new(),
            label: f.label.clone(),
            missed: by_cause.get(&vec![i]).copied().unwrap_or(0),
        })
        .collect();
    for (cause, missed) in by_cause.into_iter().filter(|(c, _)| c.len() != 1) {
        losses.push(FaultLoss {
            fault: None,
            label: if cause.is_empty() {
                "no fault in effect".into()
            } else {
                format!(
                    "several faults in effect ({})",
                    cause
                        .iter()
                        .map(|i| format!("#{}", i + 1))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            several: cause,
            missed,
        });
    }
    losses
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{FaultKind, FaultReach};
    use std::time::Duration;

    #[test]
    fn records_written_before_reach_existed_read_their_detail() {
        let mut f = fault(FaultKind::Partition, 1, 1);
        f.detail = Some("not applicable: this strategy's instances do not use redis".into());
        assert_eq!(
            f.reach(),
            FaultReach::NotApplicable("this strategy's instances do not use redis".into())
        );
        assert!(!f.took_effect());
        let mut g = fault(FaultKind::PauseInstance, 1, 1);
        g.reach = FaultReach::MissedTarget("instance 0 was a standby".into());
        // It acted (on the standby): losses meanwhile are still its own.
        assert!(g.took_effect());
        assert!(g
            .describe()
            .contains("**missed its target**: instance 0 was a standby"));
        g.not_applicable("no Redis here".into());
        assert_eq!(g.reach().word(), "n/a");
    }

    fn fault(kind: FaultKind, at_s: u64, lasts_s: u64) -> FaultRecord {
        let mut f = FaultRecord::planned(kind, 0, Duration::from_secs(at_s), String::new());
        f.window_ms = Some((at_s * 1000, (at_s + lasts_s) * 1000));
        f
    }

    #[test]
    fn a_loss_goes_to_the_fault_in_effect_during_the_orders_life() {
        let faults = [
            fault(FaultKind::Partition, 3, 4),
            fault(FaultKind::PauseInstance, 10, 3),
        ];
        let missed = [
            (4_000, 6_000),   // created during the partition
            (1_500, 3_500),   // due during it
            (9_000, 11_000),  // during the pause
            (20_000, 22_000), // nothing in effect
        ];
        let losses = missed_by_fault(&missed, &faults, 30_000);
        let counts: Vec<(Option<usize>, u64)> =
            losses.iter().map(|l| (l.fault, l.missed)).collect();
        assert_eq!(counts, vec![(Some(0), 2), (Some(1), 1), (None, 1)]);
        assert_eq!(losses[2].label, "no fault in effect");
    }

    #[test]
    fn a_fault_that_did_not_act_explains_no_loss() {
        let mut faults = [
            fault(FaultKind::Partition, 3, 4),
            fault(FaultKind::Partition, 3, 4),
        ];
        faults[0].window_ms = None;
        faults[0].detail = Some("not applicable: no Redis here".into());
        let losses = missed_by_fault(&[(4_000, 6_000)], &faults, 30_000);
        assert_eq!((losses[0].missed, losses[1].missed), (0, 1));
        assert_eq!(losses.len(), 2);
    }

    #[test]
    fn an_order_spanning_two_faults_is_put_down_to_neither() {
        let faults = [
            fault(FaultKind::Partition, 3, 1),
            fault(FaultKind::KillDbConnections, 5, 0),
        ];
        let losses = missed_by_fault(&[(3_500, 5_500), (6_000, 8_000)], &faults, 30_000);
        assert_eq!((losses[0].missed, losses[1].missed), (0, 0));
        let row = |several: &[usize]| {
            losses
                .iter()
                .find(|l| l.fault.is_none() && l.several == several)
                .map(|l| (l.label.clone(), l.missed))
        };
        assert_eq!(
            row(&[0, 1]),
            Some(("several faults in effect (#1, #2)".to_string(), 1))
        );
        assert_eq!(row(&[]), Some(("no fault in effect".to_string(), 1)));
        assert_eq!(losses.len(), 4);
    }
}
