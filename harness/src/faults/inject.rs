//! Running a scenario's faults in one strategy's run, each at its time on
//! a task of its own (the proxies the network faults act on are started
//! with the run's links, `session/links.rs`).

use super::context::FaultContext;
use super::fault::Fault;
use super::record::{FaultReach, FaultRecord};
use strategies::InstanceRole;

/// Runs every fault at its time after `t0`, each on its own task so a slow
/// restart never delays the next fault, and returns the records in
/// scenario order once all are done.
pub async fn inject(faults: Vec<Fault>, context: FaultContext) -> Vec<FaultRecord> {
    let tasks: Vec<_> = faults
        .into_iter()
        .map(|fault| tokio::spawn(inject_one(fault, context.clone())))
        .collect();
    let mut records = Vec::new();
    for task in tasks {
        match task.await {
            Ok(record) => records.push(record),
            Err(e) => tracing::error!(error = %e, "a fault task panicked"),
        }
    }
    records
}

async fn inject_one(fault: Fault, cx: FaultContext) -> FaultRecord {
    let mut record = fault.planned();
    tokio::time::sleep_until(cx.t0 + fault.at).await;
    if let Some(index) = fault.instance() {
        if let Some(why) = missed_leader(&cx.pool.roles(), index as usize) {
            record.reach = FaultReach::MissedTarget(why);
        }
    }
    fault.inject(&cx, &mut record).await;
    record
}

/// Why an instance fault aimed at `index` misses what matters, when the
/// strategy elects a leader and `index` is not it.
fn missed_leader(roles: &[Option<InstanceRole>], index: usize) -> Option<String> {
    let leader = roles.iter().position(|r| *r == Some(InstanceRole::Leader));
    match roles.get(index).copied().flatten() {
        // Roles as of each instance's last flush, at most FLUSH_EVERY old.
        Some(InstanceRole::Standby) => Some(match leader {
            Some(l) => format!(
                "instance {index} was a standby; instance {l} held the lead (as of their last \
                 reports, at most 1 s before the fault)"
            ),
            None => format!("instance {index} was a standby; no instance reported the lead"),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use strategies::InstanceRole::{self, Leader, Peer, Standby};

    #[test]
    fn an_instance_fault_misses_only_when_it_hits_a_standby() {
        let missed = |roles: &[Option<InstanceRole>], i| super::missed_leader(roles, i);
        let why = missed(&[Some(Standby), Some(Leader)], 0).unwrap();
        assert!(
            why.contains("instance 0 was a standby; instance 1 held the lead"),
            "{why}"
        );
        assert_eq!(missed(&[Some(Standby), Some(Leader)], 1), None);
        assert_eq!(missed(&[Some(Peer), Some(Peer)], 0), None);
        // A down instance has no role: the fault's own record says it was down.
        assert_eq!(missed(&[None, Some(Leader)], 0), None);
        let why = missed(&[Some(Standby), None], 0).unwrap();
        assert!(why.contains("no instance reported the lead"), "{why}");
    }
}
