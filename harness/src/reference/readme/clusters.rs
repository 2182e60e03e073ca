//! README.md's cluster sections (Redis Cluster, RabbitMQ cluster): each
//! cluster run's cancelled, missed and lateness per strategy, or that the
//! set has none and nothing is claimed.

use super::loaded::Set;
use crate::faults::FaultReach;
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
/// named one (a role resolves to a node per strategy), or why it missed.
fn node_label(s: &Summary, label: &str) -> String {
    let Some(fault) = s
        .faults
        .iter()
        .find(|f| f.node.is_some() || f.aimed_at.is_some())
    else {
        return label.to_string();
    };
    match (fault.reach(), &fault.node) {
        (FaultReach::Hit, Some(node)) => format!("{label}, {node} killed"),
        (reach, _) => format!(
            "{label}, {}",
            reach
                .why()
                .map_or("its fault missed".to_string(), |why| format!(
                    "no node killed: {why}"
                ))
        ),
    }
}

fn cluster_table(set: &Set, reference: &str, entries: &[(&str, &str)], what: &str) -> String {
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
         `+fallback` rows include its scan interval.\n"
    );
    out
}

pub(super) fn redis_cluster_section(set: &Set, reference: &str) -> Result<String> {
    Ok(cluster_table(
        set,
        reference,
        &[("redis-cluster", "3 masters")],
        "Redis Cluster",
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
    ))
}
