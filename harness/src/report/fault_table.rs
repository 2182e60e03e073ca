//! The faults table: what each strategy lost to the faults a scenario
//! injected, a strategy beside its remedied variants, and what the table's
//! words mean. Built once, like the other tables in `table`.

use crate::faults::FaultReach;
use crate::model::summary::{Status, Summary};
use strategies::checker::Anomaly;

/// The faults table (`None` when the run had none): one row per strategy,
/// each followed by its remedied variants (`+fallback`, `+outbox`, ...), so
/// a strategy and its remedy read side by side; one column per fault with
/// the missed cancels it explains, then what the faults did besides.
pub(crate) fn fault_rows(summaries: &[Summary]) -> Option<Vec<Vec<String>>> {
    let ran: Vec<&Summary> = summaries
        .iter()
        .filter(|s| s.status == Status::Ok && !s.faults.is_empty())
        .collect();
    let first = ran.first()?;
    let mut ordered = ran.clone();
    let base_of = |s: &Summary| {
        let v = s.strategy;
        (v.info.name, u8::from(v.outbox) * 2 + u8::from(v.fallback))
    };
    let first_seen = |base: &str| ran.iter().position(|s| base_of(s).0 == base).unwrap_or(0);
    ordered.sort_by_key(|s| {
        let (base, remedies) = base_of(s);
        (first_seen(base), remedies)
    });
    let mut header = vec!["strategy".to_string()];
    header.extend(
        first
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| format!("#{} {}", i + 1, f.label)),
    );
    header.extend(
        [
            "missed, several faults in effect",
            "missed, no fault in effect",
            "missed (all)",
            "schedules dropped",
            "duplicates absorbed after pause",
            "other anomalies",
        ]
        .map(String::from),
    );
    let mut out = vec![header];
    for s in ordered {
        let missed = |fault: Option<usize>, several: bool| -> u64 {
            s.missed_by_fault
                .iter()
                .filter(|l| l.fault == fault && l.several.is_empty() != several)
                .map(|l| l.missed)
                .sum()
        };
        let mut row = vec![s.strategy.name().to_string()];
        for (i, f) in s.faults.iter().enumerate() {
            let n = missed(Some(i), false);
            let reach = f.reach();
            row.push(match reach {
                FaultReach::NotApplicable(_) => reach.word().into(),
                FaultReach::MissedTarget(_) => format!("{n} ({})", reach.word()),
                FaultReach::Hit => n.to_string(),
            });
        }
        let dropped: u64 = s
            .cost
            .instances
            .iter()
            .map(|i| i.schedules_dropped + i.schedules_lost_with_process)
            .sum();
        let duplicates: Option<u64> = s
            .faults
            .iter()
            .filter_map(|f| f.duplicates_absorbed)
            .reduce(|a, b| a + b);
        let others = s.anomalies.total() - s.anomalies.get(Anomaly::MissedCancels);
        row.extend([
            missed(None, true).to_string(),
            missed(None, false).to_string(),
            s.anomalies.get(Anomaly::MissedCancels).to_string(),
            dropped.to_string(),
            duplicates.map_or("-".into(), |d| d.to_string()),
            others.to_string(),
        ]);
        out.push(row);
    }
    Some(out)
}

/// What the faults table means, under it.
pub(crate) const FAULT_NOTES: &str = "Each missed cancel (an order still PENDING `drain` after its \
     deadline) is put down to the fault in effect during the order's life, from its creation to a \
     second past its deadline; when several were, the run cannot tell which and counts it apart. `n/a`: the fault does not touch this strategy \
     (a link, service, crash point or role it does not have), so it proves nothing about it; \
     `missed target`: the fault acted, but not on the part that matters (a standby instead of the \
     leader, a Redis master serving none of the strategy's shards), or it was aimed at a role \
     (`instance = \"leader\"`) that no instance held when it fired, and did nothing; never counted \
     as hit. `schedules dropped`: \
     schedule calls given up on after `[schedule-retry]`, plus those sent to a process that died \
     before it made them (an upper bound); only a fallback cancels those orders. \
     `duplicates absorbed`: attempts on an order an earlier attempt had already decided \
     (cancelled, or found paid), made from each pause until 2 s after it, by any instance and \
     for any cause in that window; `other anomalies` at 0 proves they had no effect (no double \
     release).";

#[cfg(test)]
mod tests {
    use crate::model::summary::{DatabaseInfo, Status, Summary};

    /// A fault aimed at the leader that found none reads `missed target`
    /// in the faults table, never a plain count that would pass for hit.
    #[test]
    fn a_role_nobody_held_is_missed_in_the_table() {
        let mut s = Summary::not_run(
            "db-timer".parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        s.faults = crate::faults::FaultRecord::role_examples();
        let rows = super::fault_rows(&[s]).unwrap();
        assert_eq!(rows[1][1..4], ["0", "0 (missed target)", "n/a"], "{rows:?}");
    }
}
