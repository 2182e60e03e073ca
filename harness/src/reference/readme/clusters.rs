//! README.md's cluster sections (Redis Cluster, RabbitMQ cluster): each
//! cluster run's cancelled, missed and lateness per strategy, or that the
//! set has none and nothing is claimed.

use super::loaded::Set;
use crate::faults::Role;
use crate::model::summary::{Status, Summary};
use crate::report::{as_ms, fig, markdown_table};
use anyhow::Result;
use std::fmt::Write as _;
use strategies::checker::Anomaly;

/// Cancelled, missed and lateness of each strategy of a cluster run.
fn cluster_rows(summaries: &[Summary], label: &str) -> Vec<Vec<String>> {
    summaries
        .iter()
        .filter(|s| s.status == Status::Ok)
        .map(|s| {
            vec![
                s.strategy.name().to_string(),
                node_label(s, label),
                s.orders.cancelled.to_string(),
                s.anomalies.get(Anomaly::MissedCancels).to_string(),
                (s.anomalies.total() - s.anomalies.get(Anomaly::MissedCancels)).to_string(),
                fig(s, "p90", as_ms),
                fig(s, "max", as_ms),
            ]
        })
        .collect()
}

/// The row's cluster, and the node its fault acted on where the fault
/// named one (a role resolves to a node per strategy), or why it acted on
/// none. "Stopped" is what both cluster presets' commands do (Redis's
/// `SHUTDOWN NOSAVE`, RabbitMQ's `stop_app`), and is said only of a
/// command that ran and succeeded.
fn node_label(s: &Summary, label: &str) -> String {
    let Some(fault) = s.faults.iter().find(|f| {
        f.node.is_some() || matches!(f.aimed_at, Some(Role::NextDeadline | Role::QueueHost))
    }) else {
        return label.to_string();
    };
    let reach = fault.reach();
    match (&fault.node, fault.took_effect()) {
        (Some(node), true) => match reach.why() {
            None => format!("{label}, {node} stopped"),
            Some(why) => format!("{label}, {node} stopped, which missed the target: {why}"),
        },
        (Some(node), false) => format!(
            "{label}, the command on {node} did not act: {}",
            fault.error.as_deref().unwrap_or("it did not run")
        ),
        (None, _) => format!(
            "{label}, no node stopped: {}",
            reach
                .why()
                .or(fault.error.as_deref())
                .unwrap_or("the command did not run")
        ),
    }
}

/// `note`: what the reader must know beside the figures (empty: nothing).
fn cluster_table(
    set: &Set,
    reference: &str,
    entries: &[(&str, &str)],
    what: &str,
    note: &str,
) -> String {
    let mut out = String::new();
    let ran: Vec<&(&str, &str)> = entries
        .iter()
        .filter(|(e, _)| set.get(e).is_some())
        .collect();
    if ran.is_empty() {
        let _ = writeln!(
            out,
            "\nThis reference set has no {what} run (`delaybench reference --clusters` adds \
             them once the clusters are up); nothing is claimed here.\n"
        );
        return out;
    }
    let links: Vec<String> = ran
        .iter()
        .filter_map(|(e, _)| {
            set.get(e)
                .map(|(folder, _)| format!("[{e}]({reference}/{folder}/report.md)"))
        })
        .collect();
    let _ = writeln!(
        out,
        "\nMeasured in the reference set ({}):\n",
        links.join(", ")
    );
    let mut rows = vec![[
        "strategy",
        "queues or cluster",
        "cancelled",
        "missed",
        "other anomalies",
        "p90 ms",
        "max ms",
    ]
    .map(String::from)
    .to_vec()];
    for (e, label) in ran {
        if let Some((_, l)) = set.get(e) {
            rows.extend(cluster_rows(l.summaries(), label));
        }
    }
    markdown_table(&mut out, &rows);
    let _ = writeln!(
        out,
        "The lateness columns cover the cancels that happened (a missed order has none); \
         `+fallback` rows include its scan interval.{note}\n"
    );
    out
}

pub(super) fn redis_cluster_section(set: &Set, reference: &str) -> Result<String> {
    Ok(cluster_table(
        set,
        reference,
        &[("redis-cluster", "3 masters")],
        "Redis Cluster",
        "",
    ))
}

pub(super) fn rabbitmq_cluster_section(set: &Set, reference: &str) -> Result<String> {
    Ok(cluster_table(
        set,
        reference,
        &[
            ("rabbitmq-cluster", "quorum"),
            ("rabbitmq-cluster-classic", "classic"),
        ],
        "RabbitMQ cluster",
        " Every node runs the management plugin (the harness asks it which node hosts a \
         strategy's queues, to aim the fault there); its work shares the machine's cores with \
         the brokers' and is in every row alike.",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{FaultKind, FaultReach, FaultRecord};
    use crate::model::summary::DatabaseInfo;
    use std::time::Duration;

    /// A cluster row's summary whose one fault is `run-command` aimed at
    /// `role`, changed by `edit`.
    fn row(role: Option<Role>, edit: impl FnOnce(&mut FaultRecord)) -> Summary {
        let mut s = Summary::not_run(
            "redis-zset".parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        let mut f = FaultRecord::planned(
            FaultKind::RunCommand,
            0,
            Duration::from_secs(6),
            "run `redis-cli -p {port} shutdown nosave` at 6s".into(),
        );
        f.aimed_at = role;
        edit(&mut f);
        s.faults.push(f);
        s
    }

    #[test]
    fn a_node_reads_as_stopped_only_when_the_command_ran_and_succeeded() {
        let ran = row(Some(Role::NextDeadline), |f| {
            f.node = Some("127.0.0.1:7001".into());
            f.exit_status = Some("exit status: 0".into());
        });
        assert_eq!(
            node_label(&ran, "3 masters"),
            "3 masters, 127.0.0.1:7001 stopped"
        );
        // A fixed node that ran: named, never "no node".
        let fixed = row(None, |f| {
            f.node = Some("127.0.0.1:7000".into());
            f.exit_status = Some("exit status: 0".into());
        });
        assert_eq!(node_label(&fixed, "c"), "c, 127.0.0.1:7000 stopped");
        let failed = row(Some(Role::NextDeadline), |f| {
            f.node = Some("127.0.0.1:7001".into());
            f.exit_status = Some("exit status: 1".into());
            f.error = Some("the command failed: refused".into());
        });
        let said = node_label(&failed, "c");
        assert!(!said.contains("stopped"), "{said}");
        assert!(
            said.contains("did not act: the command failed: refused"),
            "{said}"
        );
        let nobody = row(Some(Role::NextDeadline), |f| {
            f.reach = FaultReach::MissedTarget("no shard held a deadline".into());
        });
        assert_eq!(
            node_label(&nobody, "c"),
            "c, no node stopped: no shard held a deadline"
        );
        // A fault aimed at an instance's role is not a node's.
        let leader = row(Some(Role::Leader), |_| {});
        assert_eq!(node_label(&leader, "c"), "c");
    }
}
