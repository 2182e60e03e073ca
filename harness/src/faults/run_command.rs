//! `kind = "run-command"`: run a command (a service restart, a node
//! stopped) as it is, for every strategy alike.

use super::context::{tail, FaultContext};
use super::kind::{check_lasts, human, Kind};
use super::record::{secs, FaultReach, FaultRecord, Span};
use super::target::Target;
use crate::model::records::redact_command;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use strategies::Service;

/// Run `command` (say, restart Redis or the broker the way this machine
/// runs it) and record its exit status and duration. The strategies keep
/// running meanwhile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RunCommand {
    /// The program and its arguments, run without a shell (use `["sh",
    /// "-c", "..."]` for one), e.g. a service restart.
    pub command: Vec<String>,
    /// The service the command acts on (optional), so that a strategy that
    /// does not use it reports the fault `n/a` rather than "survived".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// With `target = "redis"`, a Redis Cluster node's `host:port`
    /// (optional): a strategy none of whose shards that node served when
    /// the fault came reports it as having missed its target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How long what the command did lasts, from its start (a node it
    /// stopped stays down), so missed cancels in that time are put down to
    /// it (optional; omitted, only while the command runs).
    #[serde(
        default,
        rename = "for",
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub lasts: Option<Duration>,
}

impl Kind for RunCommand {
    const NEEDS: &'static [(&'static str, &'static str)] = &[(
        "command",
        "[\"sh\", \"-c\", \"rabbitmqctl stop_app && rabbitmqctl start_app\"]",
    )];

    fn lasts(&self) -> Duration {
        self.lasts.unwrap_or_default()
    }

    fn check(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        if self.command.is_empty() {
            let (name, example) = Self::NEEDS[0];
            bail!(
                "{} is missing; kind = \"run-command\" needs it, e.g. {name} = {example}",
                field(name)
            );
        }
        if self.node.is_some() && self.target != Some(Target::Redis) {
            bail!(
                "{} applies to kind = \"run-command\" with target = \"redis\" only",
                field("node")
            );
        }
        match self.lasts {
            Some(lasts) => check_lasts(lasts, field),
            None => Ok(()),
        }
    }

    fn label(&self, at: &str) -> String {
        let command = strategies::redact::text(&self.command.join(" "));
        match self.lasts {
            Some(lasts) => format!("run `{command}` at {at}, in effect {}", human(lasts)),
            None => format!("run `{command}` at {at}"),
        }
    }

    fn redact(&mut self) {
        self.command = redact_command(&self.command);
    }

    fn plan(&self, record: &mut FaultRecord) {
        // Reports and summary.json never hold a password.
        record.command = redact_command(&self.command);
    }

    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        // The command runs for every strategy alike; whether it could
        // touch this one is decided first, from what it uses.
        let service = match self.target {
            Some(Target::Redis) => Some(Service::Redis),
            Some(Target::Rabbitmq) => Some(Service::RabbitMq),
            _ => None,
        };
        match service {
            Some(service) if !cx.requires.contains(&service) => {
                record.not_applicable(format!("this strategy does not use {}", service.name()));
            }
            _ => {
                if let (Some(node), Some(redis)) = (&self.node, &cx.redis) {
                    match missed_shards(node, redis).await {
                        Ok(Some(why)) => record.reach = FaultReach::MissedTarget(why),
                        Ok(None) => {}
                        Err(why) => {
                            record.detail = Some(format!(
                                "whether it hit the strategy's shards is unknown: {why}"
                            ))
                        }
                    }
                }
            }
        }
        let start = cx.since_t0();
        let output = tokio::process::Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await;
        let finished = cx.since_t0();
        record.finished_at_ms = Some(finished);
        if let Some(lasts) = self.lasts {
            // What it did (a stopped node) outlasts the command.
            let until = start + lasts.as_millis() as u64;
            record.window_ms = Some((start, until.max(finished)));
        }
        match output {
            Ok(out) => {
                record.exit_status = Some(out.status.to_string());
                if !out.status.success() {
                    record.error = Some(format!("the command failed: {}", tail(&out.stderr)));
                }
            }
            Err(e) => record.error = Some(format!("could not run `{}`: {e}", self.command[0])),
        }
    }

    /// Over its `for` where it has one, otherwise while the command ran.
    fn span(record: &FaultRecord) -> Option<Span> {
        record.window_ms.map(Span::of).or_else(|| Self::band(record))
    }

    /// While the command ran, even with a `for`: the figure shades what
    /// the harness saw happen, and the label beside it says how long the
    /// scenario counts the effect.
    fn band(record: &FaultRecord) -> Option<Span> {
        record.finished_at_ms.map(|end| Span {
            from: record.planned_at_ms,
            to: Some(end),
        })
    }

    /// A command that could not run, or failed, did not act.
    fn took_effect(record: &FaultRecord) -> bool {
        record.error.is_none()
    }

    fn describe(record: &FaultRecord) -> String {
        let mut text = format!(
            "ran `{}` at {}",
            record.command.join(" "),
            secs(record.planned_at_ms)
        );
        if let (Some(end), Some(status)) = (record.finished_at_ms, &record.exit_status) {
            text += &format!(", {status} at {}", secs(end));
        }
        if let Some((_, until)) = record.window_ms {
            text += &format!("; counted in effect until {}", secs(until));
        }
        if let Some(detail) = &record.detail {
            text += &format!("; {detail}");
        }
        if let Some(e) = &record.error {
            text += &format!("; error: {e}");
        }
        text
    }
}

/// Why a `run-command` fault on Redis Cluster node `node` misses this
/// strategy: that node served none of its shards' slots when it came.
/// `Err` says why that could not be told (the record then keeps `hit`).
async fn missed_shards(
    node: &str,
    (url, prefix, shards): &(String, String, u32),
) -> Result<Option<String>, String> {
    if !strategies::redis_cluster::is_cluster(url) {
        return Ok(Some(format!(
            "node {node} is a Redis Cluster node, and this strategy's Redis is not a cluster"
        )));
    }
    let masters = strategies::redis_cluster::masters(url)
        .await
        .map_err(|e| format!("could not list the cluster's masters: {e}"))?;
    let Some(master) = masters.iter().find(|m| m.addr == node) else {
        return Err(format!(
            "node {node} is not among the masters the cluster lists ({})",
            masters
                .iter()
                .map(|m| m.addr.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    let slots = strategies::redis_zset::cluster_shard_slots(prefix, *shards);
    let held = slots.iter().filter(|s| master.serves(**s)).count();
    Ok((held == 0).then(|| format!("node {node} served none of this strategy's {shards} shards")))
}
