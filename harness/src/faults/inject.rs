//! Running a scenario's faults in one strategy's run, each at its time on
//! a task of its own (the proxies the network faults act on are started
//! with the run's links, `session/links.rs`).

use super::context::FaultContext;
use super::fault::Fault;
use super::record::{FaultReach, FaultRecord};
use super::role::{InstanceTarget, Role};
use crate::instance::Said;
use std::time::Duration;
use strategies::InstanceRole;

/// How long the instances have to say their role when a fault aimed at
/// one fires: a live worker answers within milliseconds; one that does
/// not (stopped by another fault) cannot hold the role usefully.
const ANSWER_WITHIN: Duration = Duration::from_millis(500);
/// The same for a fault aimed at an instance number, which acts on it
/// whatever it says: the question only tells whether it was a standby, so
/// the fault waits for it no longer than this.
const NUMBER_ANSWER_WITHIN: Duration = Duration::from_millis(100);

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
    match fault.instance() {
        Some(InstanceTarget::Index(index)) => {
            // Whether it lands on a standby: the roles the instances say
            // now, or, for one that does not answer at once, its last report.
            let said = cx.pool.ask_roles(NUMBER_ANSWER_WITHIN).await;
            let roles: Vec<Option<InstanceRole>> = said
                .iter()
                .zip(cx.pool.roles())
                .map(|(said, reported)| match said {
                    Said::Role(role) => Some(*role),
                    Said::Silent => reported,
                    Said::Down => None,
                })
                .collect();
            if let Some(why) = missed_leader(&roles, index as usize) {
                record.reach = FaultReach::MissedTarget(why);
            }
        }
        // Whoever leads now, as the instances themselves say.
        Some(InstanceTarget::Role(Role::Leader)) => {
            let said = cx.pool.ask_roles(ANSWER_WITHIN).await;
            match leader_of(&said, &cx.pool.roles()) {
                Ok(index) => record.instance = index as u32,
                Err(Ok(why)) => {
                    record.not_applicable(why);
                    return record;
                }
                // Aimed at a leader nobody held: it acts on nobody else.
                Err(Err(why)) => {
                    record.reach = FaultReach::MissedTarget(why);
                    return record;
                }
            }
        }
        // The kind finds it: the first instance to reach its point (or,
        // for a node's role, which `instance` never takes, the node).
        Some(InstanceTarget::Role(Role::ClaimHolder | Role::NextDeadline | Role::QueueHost))
        | None => {}
    }
    fault.inject(&cx, &mut record).await;
    record
}

/// Why an instance fault aimed at `index` misses what matters, when the
/// strategy elects a leader and `index` is not it.
fn missed_leader(roles: &[Option<InstanceRole>], index: usize) -> Option<String> {
    let leader = roles.iter().position(|r| *r == Some(InstanceRole::Leader));
    match roles.get(index).copied().flatten() {
        // Roles as the instances said them when the fault fired (one
        // that did not answer at once: its last flush, at most FLUSH_EVERY old).
        Some(InstanceRole::Standby) => Some(match leader {
            Some(l) => format!(
                "instance {index} was a standby; instance {l} held the lead (as they said when \
                 the fault fired); aim it at instance = \"leader\" to hit the leader"
            ),
            None => format!("instance {index} was a standby; no instance reported the lead"),
        }),
        _ => None,
    }
}

/// The leader among `answers` (one per instance, in order): `Ok(index)`,
/// or why the fault cannot aim at one: `Err(Ok(why))` when the strategy
/// has no leader at all (not applicable), `Err(Err(why))` when it elects
/// one but none held the lead (missed its target). Only an instance that
/// answers now can be the leader; one that does not (busy, stopped) is
/// known by its last report (`reported`) only to tell peers apart, as a
/// strategy's instances are peers or not whatever the moment.
fn leader_of(
    answers: &[Said],
    reported: &[Option<InstanceRole>],
) -> Result<usize, Result<String, String>> {
    if let Some(i) = answers
        .iter()
        .position(|a| *a == Said::Role(InstanceRole::Leader))
    {
        return Ok(i);
    }
    let known: Vec<InstanceRole> = answers
        .iter()
        .zip(reported.iter().chain(std::iter::repeat(&None)))
        .filter_map(|(said, reported)| match said {
            Said::Role(r) => Some(*r),
            _ => *reported,
        })
        .collect();
    if !known.is_empty() && known.iter().all(|r| *r == InstanceRole::Peer) {
        return Err(Ok(
            "this strategy's instances are peers (each said \"peer\"): none leads".to_string(),
        ));
    }
    let each: Vec<String> = answers
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            Said::Down => format!("instance {i} was down"),
            Said::Silent => format!("instance {i} did not answer"),
            Said::Role(r) => format!("instance {i} said \"{}\"", r.as_str()),
        })
        .collect();
    Err(Err(format!(
        "no instance held the lead when the fault fired ({})",
        each.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::{leader_of, Said};
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

    #[test]
    fn the_leader_is_who_says_so_and_peers_have_none() {
        use Said::{Down, Role as As, Silent};
        let none = [None, None];
        assert_eq!(leader_of(&[As(Standby), As(Leader)], &none), Ok(1));
        assert_eq!(leader_of(&[Silent, As(Leader)], &none), Ok(1));
        // A leader by its last report only is not one now.
        assert!(leader_of(&[Silent, As(Standby)], &[Some(Leader), None]).is_err());
        let Err(Ok(why)) = leader_of(&[As(Peer), As(Peer)], &none) else {
            panic!("peers have no leader");
        };
        assert!(why.contains("peers"), "{why}");
        // Peers busy with their schedules are still peers.
        let busy_peers = leader_of(&[Silent, Silent], &[Some(Peer), Some(Peer)]);
        assert!(matches!(busy_peers, Err(Ok(_))), "{busy_peers:?}");
        let Err(Err(why)) = leader_of(&[As(Standby), Silent], &[None, Some(Leader)]) else {
            panic!("standbys without a leader miss");
        };
        assert!(
            why.contains("instance 0 said \"standby\", instance 1 did not answer"),
            "{why}"
        );
        // Nobody answered: nothing says the strategy has no leader.
        assert!(matches!(leader_of(&[Down, Silent], &none), Err(Err(_))));
        assert!(matches!(leader_of(&[], &[]), Err(Err(_))));
    }
}
