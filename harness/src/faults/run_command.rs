//! `kind = "run-command"`: run a command (a service restart, a node
//! stopped) as it is, for every strategy alike.

use super::context::{tail, FaultContext};
use super::kind::{check_lasts, human, Kind};
use super::record::{secs, FaultReach, FaultRecord, Span};
use super::role::Role;
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
    /// With `target = "redis"`, the Redis Cluster node the command acts on
    /// (optional): a `host:port`, or [`NEXT_DEADLINE`], the master serving
    /// the strategy's shard whose deadline comes first when the fault
    /// fires (its weak point: the cancels due next). A strategy none of
    /// whose shards the node served reports the fault as having missed its
    /// target. With `target = "rabbitmq"`, the broker node (`name@host`),
    /// or [`QUEUE_HOST`], the node hosting most of the strategy's queues
    /// when the fault fires (a quorum queue's leader, a classic queue's
    /// home; asked of the management API its first URL names); a strategy
    /// none of whose queues the node hosted missed its target. `{node}`
    /// (`host:port` or `name@host`) and `{port}` in `command` are replaced
    /// by the node the fault acts on.
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

/// `node = "next-deadline"`: the master serving the shard of the next
/// deadline, resolved when the fault fires.
pub const NEXT_DEADLINE: &str = "next-deadline";

/// `node = "queue-host"`: the broker node hosting the strategy's queues,
/// resolved when the fault fires.
pub const QUEUE_HOST: &str = "queue-host";

/// Whether `node` names a role rather than a node.
fn is_role(node: &str) -> bool {
    node == NEXT_DEADLINE || node == QUEUE_HOST
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
        match (self.node.as_deref(), self.target) {
            (None, _) => {}
            (Some(NEXT_DEADLINE), Some(Target::Redis)) | (Some(QUEUE_HOST), Some(Target::Rabbitmq)) => {}
            (Some(role @ (NEXT_DEADLINE | QUEUE_HOST)), _) => bail!(
                "{} = \"{role}\" is a role of a {} node; give target = \"{}\"",
                field("node"),
                if role == NEXT_DEADLINE { "Redis Cluster" } else { "RabbitMQ" },
                if role == NEXT_DEADLINE { "redis" } else { "rabbitmq" }
            ),
            (Some(node), Some(Target::Redis)) if node.contains(':') => {}
            (Some(node), Some(Target::Rabbitmq)) if node.contains('@') => {}
            (Some(node), Some(target @ (Target::Redis | Target::Rabbitmq))) => bail!(
                "{} = \"{node}\" is not a {} node: with target = \"{}\" it applies to {}",
                field("node"),
                if target == Target::Redis { "Redis Cluster" } else { "RabbitMQ" },
                if target == Target::Redis { "redis" } else { "rabbitmq" },
                if target == Target::Redis {
                    format!("a master's host:port or \"{NEXT_DEADLINE}\"")
                } else {
                    format!("a node's name@host or \"{QUEUE_HOST}\"")
                }
            ),
            (Some(_), _) => bail!(
                "{} applies to kind = \"run-command\" with target = \"redis\" (a node's \
                 host:port or \"{NEXT_DEADLINE}\") or target = \"rabbitmq\" (a node's \
                 name@host or \"{QUEUE_HOST}\") only",
                field("node")
            ),
        }
        self.check_placeholders(field)?;
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
        let mut acts_on: Option<String> = None;
        let service = match self.target {
            Some(Target::Redis) => Some(Service::Redis),
            Some(Target::Rabbitmq) => Some(Service::RabbitMq),
            _ => None,
        };
        match service {
            Some(service) if !cx.requires.contains(&service) => {
                record.not_applicable(format!("this strategy does not use {}", service.name()));
            }
            _ if self.target == Some(Target::Rabbitmq) => {
                if let (Some(node), Some(rabbit)) = (self.node.as_deref(), &cx.rabbit) {
                    if node == QUEUE_HOST {
                        record.aimed_at = Some(Role::QueueHost);
                        match queue_host(rabbit).await {
                            Ok(Ok((host, why))) => {
                                record.detail = Some(why);
                                acts_on = Some(host);
                            }
                            Ok(Err(why)) => {
                                // Aimed at a role nothing held: it does nothing.
                                record.reach = FaultReach::MissedTarget(why);
                                return;
                            }
                            Err(why) => {
                                record.error = Some(format!(
                                    "could not find the node hosting the strategy's queues, \
                                     so the command did not run: {why}"
                                ));
                                return;
                            }
                        }
                    } else {
                        match strategies::leftovers::queue_nodes(&rabbit.0, &rabbit.1).await {
                            Ok(queues) if queues.iter().any(|(_, host)| host == node) => {}
                            Ok(_) => {
                                record.reach = FaultReach::MissedTarget(format!(
                                    "node {node} hosted none of the strategy's queues"
                                ))
                            }
                            Err(why) => {
                                record.detail = Some(format!(
                                    "whether it hit the strategy's queues is unknown: {why}"
                                ))
                            }
                        }
                    }
                }
            }
            _ => {
                if let (Some(node), Some(redis)) = (&self.node, &cx.redis) {
                    if node == NEXT_DEADLINE {
                        record.aimed_at = Some(Role::NextDeadline);
                        match next_deadline_master(redis).await {
                            Ok(Ok((master, why))) => {
                                record.detail = Some(why);
                                acts_on = Some(master);
                            }
                            Ok(Err(why)) => {
                                // Aimed at a role nothing held: the fault
                                // does nothing, as an instance role's does.
                                record.reach = FaultReach::MissedTarget(why);
                                return;
                            }
                            Err(why) => {
                                record.error = Some(format!(
                                    "could not find the shard of the next deadline, so the \
                                     command did not run: {why}"
                                ));
                                return;
                            }
                        }
                    } else {
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
        }
        let node = acts_on.or_else(|| self.node.clone().filter(|n| !is_role(n)));
        if node.is_none() && self.node.is_some() {
            // Aimed at a role this strategy has no part in (it uses no
            // Redis: recorded n/a above): there is no node to act on.
            return;
        }
        let command = with_node(&self.command, node.as_deref());
        record.node = node;
        record.command = redact_command(&command);
        let start = cx.since_t0();
        let output = tokio::process::Command::new(&command[0])
            .args(&command[1..])
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

    /// A command that could not run, or failed, did not act; nor did one
    /// that never ran (aimed at a role nothing held, or at a service the
    /// strategy does not use), which has no exit status.
    fn took_effect(record: &FaultRecord) -> bool {
        record.error.is_none() && record.exit_status.is_some()
    }

    fn describe(record: &FaultRecord) -> String {
        let ran = record.exit_status.is_some();
        let mut text = format!(
            "{} `{}` at {}",
            if ran { "ran" } else { "did not run" },
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

impl RunCommand {
    /// `{node}` and `{port}` name the node the fault acts on, so they need
    /// one, `{port}` needs a Redis node (a RabbitMQ node is `name@host`),
    /// and a role, which is a different node per strategy, needs the
    /// command to say which: otherwise the same command would run for
    /// every strategy whatever its role resolved to, and the record would
    /// name a node the command never touched.
    fn check_placeholders(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        let uses = |p: &str| self.command.iter().any(|a| a.contains(p));
        match self.node.as_deref() {
            None if uses("{node}") || uses("{port}") => bail!(
                "{} uses {{node}} or {{port}}, which stand for the node the fault acts on, but \
                 no {} is given",
                field("command"),
                field("node")
            ),
            Some(_) if self.target == Some(Target::Rabbitmq) && uses("{port}") => bail!(
                "{} uses {{port}}, but a RabbitMQ node is name@host and has none: put {{node}} there",
                field("command")
            ),
            Some(role) if is_role(role) && !uses("{node}") && !uses("{port}") => bail!(
                "{} = \"{role}\" is a different node for each strategy, but {} never says \
                 which: put {{node}}{} in it",
                field("node"),
                field("command"),
                if role == NEXT_DEADLINE { " or {port}" } else { "" }
            ),
            _ => Ok(()),
        }
    }
}

/// `command` with `{node}` and `{port}` replaced by `node` (`host:port`),
/// as it is when no node is named.
fn with_node(command: &[String], node: Option<&str>) -> Vec<String> {
    let Some(node) = node else {
        return command.to_vec();
    };
    let port = node.rsplit_once(':').map_or("", |(_, p)| p);
    command
        .iter()
        .map(|arg| arg.replace("{node}", node).replace("{port}", port))
        .collect()
}

/// The master (`host:port`) serving the strategy's shard whose earliest
/// deadline comes first, with a sentence saying which and when; the inner
/// `Err` says why there was none (no shard held a deadline), the outer one
/// why it could not be told.
async fn next_deadline_master(
    (url, prefix, shards): &(String, String, u32),
) -> Result<Result<(String, String), String>, String> {
    if !strategies::redis_cluster::is_cluster(url) {
        return Ok(Err(
            "this strategy's Redis is not a cluster: it has no node to aim at".into(),
        ));
    }
    let masters = strategies::redis_cluster::masters(url)
        .await
        .map_err(|e| format!("could not list the cluster's masters: {e}"))?;
    let mut first: Option<(u64, usize, &strategies::redis_cluster::Master)> = None;
    for (k, key) in strategies::redis_zset::cluster_delay_keys(prefix, *shards)
        .iter()
        .enumerate()
    {
        let slot = strategies::redis_cluster::key_slot(key);
        let master = masters
            .iter()
            .find(|m| m.serves(slot))
            .ok_or_else(|| format!("no master serves slot {slot} (shard {k})"))?;
        let mut conn = strategies::redis_cluster::connect_node(&master.url, url)
            .await
            .map_err(|e| e.to_string())?;
        let earliest: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(0)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("reading shard {k}'s earliest deadline on {}: {e}", master.addr))?;
        if let Some((_, score)) = earliest.first() {
            let due_us = *score as u64;
            if first.is_none_or(|(best, _, _)| due_us < best) {
                first = Some((due_us, k, master));
            }
        }
    }
    Ok(match first {
        Some((due_us, k, master)) => {
            let in_ms = (due_us as i64 - strategies::domain::now_us() as i64) / 1000;
            // A deadline already past is one the strategy has yet to cancel.
            let due = if in_ms < 0 {
                format!("{} ms overdue", -in_ms)
            } else {
                format!("due in {in_ms} ms")
            };
            Ok((
                master.addr.clone(),
                format!(
                    "aimed at {}, the master serving shard {k}, whose earliest deadline was {due} \
                     when the fault fired",
                    master.addr
                ),
            ))
        }
        None => Err(format!(
            "none of the strategy's {shards} shards held a deadline when the fault fired"
        )),
    })
}

/// The broker node hosting most of the strategy's queues (ties: the
/// first in name order), with a sentence naming them; the inner `Err` says
/// why there was none (no queue yet), the outer one why it could not be
/// told.
async fn queue_host(
    (url, prefix): &(String, String),
) -> Result<Result<(String, String), String>, String> {
    let queues = strategies::leftovers::queue_nodes(url, prefix).await?;
    let own = format!("dlb.{prefix}.");
    let mut count: Vec<(&str, Vec<&str>)> = Vec::new();
    for (queue, node) in &queues {
        // `work`, `wait.2000ms`: the run's prefix is the same for all.
        let queue = queue.strip_prefix(&own).unwrap_or(queue);
        match count.iter_mut().find(|(n, _)| n == node) {
            Some((_, held)) => held.push(queue),
            None => count.push((node, vec![queue])),
        }
    }
    // The most queues; among equals, the node listed first.
    let Some((node, held)) = count
        .iter()
        .rev()
        .max_by_key(|(_, held)| held.len())
    else {
        return Ok(Err(format!(
            "the broker listed none of the strategy's queues (dlb.{prefix}.*) when the fault fired"
        )));
    };
    Ok(Ok((
        node.to_string(),
        format!(
            "aimed at {node}, which hosted {} of the strategy's {} queues ({}) when the fault fired",
            held.len(),
            queues.len(),
            held.join(", ")
        ),
    )))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(target: Option<Target>, node: Option<&str>) -> RunCommand {
        // A RabbitMQ node has no port to put in.
        let stop = match target {
            Some(Target::Rabbitmq) => "stop -n {node}",
            _ => "stop -p {port} -n {node}",
        };
        RunCommand {
            command: vec!["sh".into(), "-c".into(), stop.into()],
            target,
            node: node.map(String::from),
            lasts: None,
        }
    }

    fn checked(f: &RunCommand) -> Result<()> {
        f.check(&|name| format!("faults[0].{name}"))
    }

    #[test]
    fn a_role_of_a_node_needs_its_service_and_names_the_field() {
        assert!(checked(&fault(Some(Target::Redis), Some(NEXT_DEADLINE))).is_ok());
        assert!(checked(&fault(Some(Target::Rabbitmq), Some(QUEUE_HOST))).is_ok());
        assert!(checked(&fault(Some(Target::Redis), Some("127.0.0.1:7001"))).is_ok());
        assert!(checked(&fault(Some(Target::Rabbitmq), Some("dlb1@localhost"))).is_ok());
        let wrong = checked(&fault(Some(Target::Rabbitmq), Some(NEXT_DEADLINE)))
            .unwrap_err()
            .to_string();
        assert!(
            wrong.contains("faults[0].node") && wrong.contains("target = \"redis\""),
            "{wrong}"
        );
        let none = checked(&fault(None, Some("127.0.0.1:7001")))
            .unwrap_err()
            .to_string();
        assert!(none.contains("faults[0].node"), "{none}");
    }

    #[test]
    fn the_command_gets_the_node_it_acts_on() {
        let f = fault(Some(Target::Redis), Some(NEXT_DEADLINE));
        assert_eq!(
            with_node(&f.command, Some("127.0.0.1:7002"))[2],
            "stop -p 7002 -n 127.0.0.1:7002"
        );
        assert_eq!(with_node(&f.command, None), f.command);
    }

    #[test]
    fn a_placeholder_needs_a_node_and_a_role_needs_a_placeholder() {
        let mut f = fault(None, None);
        let said = checked(&f).unwrap_err().to_string();
        assert!(
            said.contains("faults[0].command") && said.contains("no faults[0].node"),
            "{said}"
        );
        f = fault(Some(Target::Rabbitmq), Some(QUEUE_HOST));
        f.command[2] = "stop -p {port}".into();
        let said = checked(&f).unwrap_err().to_string();
        assert!(said.contains("{port}") && said.contains("put {node} there"), "{said}");
        for (target, role) in [(Target::Redis, NEXT_DEADLINE), (Target::Rabbitmq, QUEUE_HOST)] {
            f = fault(Some(target), Some(role));
            f.command[2] = "restart the cluster".into();
            let said = checked(&f).unwrap_err().to_string();
            assert!(
                said.contains("faults[0].node") && said.contains("never says which"),
                "{said}"
            );
        }
        // A fixed node may be written into the command by hand.
        f = fault(Some(Target::Redis), Some("127.0.0.1:7001"));
        f.command[2] = "redis-cli -p 7001 shutdown".into();
        assert!(checked(&f).is_ok());
    }

    #[test]
    fn a_command_that_never_ran_did_not_act_and_says_so() {
        let mut r = FaultRecord::planned(
            crate::faults::FaultKind::RunCommand,
            0,
            Duration::from_secs(6),
            "run `x` at 6s".into(),
        );
        r.command = vec!["x".into()];
        r.reach = FaultReach::MissedTarget("no shard held a deadline".into());
        assert!(!RunCommand::took_effect(&r));
        assert!(RunCommand::describe(&r).starts_with("did not run `x` at "));
        r.exit_status = Some("exit status: 0".into());
        assert!(RunCommand::took_effect(&r));
        assert!(RunCommand::describe(&r).starts_with("ran `x` at "));
    }
}
