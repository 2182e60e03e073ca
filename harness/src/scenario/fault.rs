//! `[[faults]]`: something that goes wrong during the run.

use super::orders::one;
use crate::faults::Target;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use strategies::CrashPoint;

/// `[[faults]]`: something that goes wrong during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Fault {
    pub kind: FaultKind,
    /// When, counted from the first order (warm-up included).
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// Which canceller instance, 0-based (default 0): `kill-instance`,
    /// `pause-instance`, `crash-at`. Read it with [`Fault::instance`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<u32>,
    /// `kill-instance` and `crash-at`: start a fresh process for the
    /// instance this long after it died; omitted, `kill-instance` leaves
    /// it down for the rest of the run and `crash-at` restarts it after 1s.
    #[serde(default, with = "humantime_serde")]
    pub restart_after: Option<Duration>,
    /// `run-command` only: the program and its arguments, run without a
    /// shell (use `["sh", "-c", "..."]` for one), e.g. a service restart.
    #[serde(default)]
    pub command: Vec<String>,
    /// `partition` and `latency`: which link of the strategy's instances.
    /// `run-command` (optional): the service the command acts on, so that
    /// a strategy that does not use it reports the fault `n/a` rather than
    /// "survived" (the command runs for every strategy alike).
    #[serde(default)]
    pub target: Option<Target>,
    /// `run-command` on a Redis Cluster node (optional, with
    /// `target = "redis"`): the node's `host:port`. A strategy none of
    /// whose shards that node served when the fault came reports it as
    /// having missed its target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `partition`, `latency`, `pause-instance`: how long it lasts.
    /// `run-command` (optional): how long what the command did lasts,
    /// from its start (a node it stopped stays down), so missed cancels in
    /// that time are put down to it; omitted, only while the command runs.
    #[serde(default, rename = "for", with = "humantime_serde")]
    pub lasts: Option<Duration>,
    /// `latency`: added to every chunk forwarded in either direction.
    #[serde(default, with = "humantime_serde")]
    pub add: Option<Duration>,
    /// `crash-at`: where in its path the instance aborts.
    /// `pause-instance` (optional): where in its path it stops itself, so
    /// the pause lands while it holds claimed work; omitted, it is stopped
    /// wherever it is.
    #[serde(default)]
    pub point: Option<CrashPoint>,
    /// `crash-at`: how many crashes, one per fresh process (default 1).
    #[serde(default = "one")]
    pub times: u32,
}

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// SIGKILL the instance's process: whatever it held only in memory is
    /// gone, and it acks nothing more. New orders go to the live instances.
    KillInstance,
    /// Run `command` (say, restart Redis or the broker the way this machine
    /// runs it) and record its exit status and duration. The strategies
    /// keep running meanwhile.
    RunCommand,
    /// Cut the link between the strategy's instances and `target` for
    /// `for`: open connections are dropped, new ones refused (each
    /// instance's connections go through the harness's TCP proxy).
    Partition,
    /// Add `add` to the link to `target` for `for`.
    Latency,
    /// SIGSTOP the instance for `for`, then SIGCONT: a GC pause or a
    /// stalled VM. Its leases and visibility timeouts expire while it
    /// still holds the work, so others take the work again.
    PauseInstance,
    /// Terminate the strategy's database sessions (every instance's), as
    /// an operator or a failover does; the pools reconnect.
    KillDbConnections,
    /// Arm `point` in the instance: it aborts the next time its path gets
    /// there, `times` times over fresh processes.
    CrashAt,
}

impl FaultKind {
    /// The scenario name, e.g. `pause-instance`.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::KillInstance => "kill-instance",
            FaultKind::RunCommand => "run-command",
            FaultKind::Partition => "partition",
            FaultKind::Latency => "latency",
            FaultKind::PauseInstance => "pause-instance",
            FaultKind::KillDbConnections => "kill-db-connections",
            FaultKind::CrashAt => "crash-at",
        }
    }
}

impl Fault {
    /// The instance a `kill-instance`, `pause-instance` or `crash-at`
    /// hits (0 when the scenario does not say).
    pub fn instance(&self) -> u32 {
        self.instance.unwrap_or(0)
    }

    /// How long the fault itself lasts (0 for the instantaneous ones).
    pub fn window(&self) -> Duration {
        self.lasts.unwrap_or_default()
    }

    /// The fault in a few words, e.g. `partition redis 4s at 10s`.
    pub fn label(&self) -> String {
        let at = humantime::format_duration(self.at);
        let d = |d: Option<Duration>| humantime::format_duration(d.unwrap_or_default()).to_string();
        match self.kind {
            FaultKind::RunCommand => {
                let command = strategies::redact::text(&self.command.join(" "));
                match self.lasts {
                    Some(lasts) => format!(
                        "run `{command}` at {at}, in effect {}",
                        humantime::format_duration(lasts)
                    ),
                    None => format!("run `{command}` at {at}"),
                }
            }
            FaultKind::KillInstance => format!(
                "kill instance {} at {at}, {}",
                self.instance(),
                match self.restart_after {
                    Some(r) => format!("restart {} later", humantime::format_duration(r)),
                    None => "no restart".to_string(),
                }
            ),
            FaultKind::Partition => format!(
                "partition {} for {} at {at}",
                self.target.map(Target::as_str).unwrap_or("?"),
                d(self.lasts)
            ),
            FaultKind::Latency => format!(
                "+{} latency to {} for {} at {at}",
                d(self.add),
                self.target.map(Target::as_str).unwrap_or("?"),
                d(self.lasts)
            ),
            FaultKind::PauseInstance => format!(
                "pause instance {} for {}{} from {at}",
                self.instance(),
                d(self.lasts),
                self.point
                    .map(|p| format!(" at {}", p.as_str()))
                    .unwrap_or_default()
            ),
            FaultKind::KillDbConnections => format!("kill database sessions at {at}"),
            FaultKind::CrashAt => format!(
                "crash instance {} at {} x{} from {at}",
                self.instance(),
                self.point.map(CrashPoint::as_str).unwrap_or("?"),
                self.times
            ),
        }
    }

    /// Checks the fields `kind` needs and refuses the ones it ignores;
    /// messages name the field.
    pub(super) fn validate(&self, i: usize) -> Result<()> {
        let field = |name: &str| format!("field `faults[{i}].{name}`");
        let kind = self.kind.as_str();
        let needs = |present: bool, name: &str, example: &str| -> Result<()> {
            if present {
                Ok(())
            } else {
                bail!(
                    "{} is missing; kind = \"{kind}\" needs it, e.g. {name} = {example}",
                    field(name)
                )
            }
        };
        let ignores = |present: bool, name: &str, applies: &str| -> Result<()> {
            if present {
                bail!("{} applies to {applies} only", field(name))
            } else {
                Ok(())
            }
        };
        let k = self.kind;
        use FaultKind::*;
        ignores(
            !self.command.is_empty() && k != RunCommand,
            "command",
            "kind = \"run-command\"",
        )?;
        ignores(
            self.instance.is_some() && !matches!(k, KillInstance | PauseInstance | CrashAt),
            "instance",
            "kind = \"kill-instance\", \"pause-instance\" and \"crash-at\" (the others hit every instance)",
        )?;
        ignores(
            self.restart_after.is_some() && !matches!(k, KillInstance | CrashAt),
            "restart-after",
            "kind = \"kill-instance\" and \"crash-at\"",
        )?;
        ignores(
            self.target.is_some() && !matches!(k, Partition | Latency | RunCommand),
            "target",
            "kind = \"partition\", \"latency\" and \"run-command\"",
        )?;
        ignores(
            self.node.is_some() && !(k == RunCommand && self.target == Some(Target::Redis)),
            "node",
            "kind = \"run-command\" with target = \"redis\"",
        )?;
        ignores(
            self.lasts.is_some() && !matches!(k, Partition | Latency | PauseInstance | RunCommand),
            "for",
            "kind = \"partition\", \"latency\", \"pause-instance\" and \"run-command\"",
        )?;
        ignores(
            self.add.is_some() && k != Latency,
            "add",
            "kind = \"latency\"",
        )?;
        ignores(
            self.point.is_some() && !matches!(k, CrashAt | PauseInstance),
            "point",
            "kind = \"crash-at\" and \"pause-instance\"",
        )?;
        ignores(
            self.times != 1 && k != CrashAt,
            "times",
            "kind = \"crash-at\"",
        )?;
        match k {
            RunCommand => needs(
                !self.command.is_empty(),
                "command",
                "[\"sh\", \"-c\", \"rabbitmqctl stop_app && rabbitmqctl start_app\"]",
            )?,
            Partition | Latency => {
                needs(
                    self.target.is_some(),
                    "target",
                    "\"rabbitmq\" (or \"redis\", \"database\")",
                )?;
                needs(self.lasts.is_some(), "for", "\"3s\"")?;
                if k == Latency {
                    needs(self.add.is_some(), "add", "\"50ms\"")?;
                }
            }
            PauseInstance => needs(self.lasts.is_some(), "for", "\"6s\"")?,
            CrashAt => {
                needs(
                    self.point.is_some(),
                    "point",
                    "\"after-claim\" (or \"after-commit-before-ack\")",
                )?;
                if !(1..=100).contains(&self.times) {
                    bail!(
                        "{} = {} is out of range; accepted values: 1 to 100",
                        field("times"),
                        self.times
                    );
                }
            }
            KillInstance | KillDbConnections => {}
        }
        let hour = Duration::from_secs(3600);
        if self.lasts.is_some_and(|d| d.is_zero() || d > hour) {
            bail!(
                "{} is out of range; accepted values: 1ms to 1h",
                field("for")
            );
        }
        if self
            .add
            .is_some_and(|d| d.is_zero() || d > Duration::from_secs(60))
        {
            bail!(
                "{} is out of range; accepted values: 1ms to 60s",
                field("add")
            );
        }
        Ok(())
    }
}
