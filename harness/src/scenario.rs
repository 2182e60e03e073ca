//! Scenario files: the workload, as TOML with humantime durations.
//!
//! Every field is documented here, with its default; `scenarios/quick.toml`
//! is the bundled example and `delaybench scenario init` writes a commented
//! starting file. Errors name the file, the field and the accepted values.

use crate::faults::Target;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;
use strategies::{CrashPoint, StrategyOptions};

/// The bundled quick scenario, used when no `--scenario` is given.
#[cfg(test)]
pub const QUICK: &str = include_str!("../scenarios/quick.toml");

/// One workload, identical for every strategy of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Scenario {
    /// Short name, used in the run id.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Seeds the generator: the same seed gives the same orders, payments
    /// and fault times for every strategy.
    pub seed: u64,
    /// Orders arrive during `warmup + duration`; only orders created after
    /// the warm-up count in the lateness figures (default `0s`).
    #[serde(default, with = "humantime_serde")]
    pub warmup: Duration,
    /// The measured arrival window.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// How long after its deadline an order may still be PENDING before it
    /// counts as a missed cancel; the run waits this long after the last deadline.
    #[serde(with = "humantime_serde")]
    pub drain: Duration,
    /// Orders per second, open loop: order i is due at t0 + i/rate whatever
    /// the backend does.
    pub rate: f64,
    /// Canceller instances per strategy, each its own OS process (default 1).
    #[serde(default = "one")]
    pub instances: u32,
    /// When a worker process dies by itself (not by a scenario fault), start
    /// a fresh one this long after; omitted, the instance stays down and
    /// its orders go to the live ones. Either way the death is reported and
    /// its measurements are kept.
    #[serde(default, with = "humantime_serde")]
    pub restart_dead_instances: Option<Duration>,
    /// Share of checkouts that fail after the order row is written, so
    /// the order's transaction rolls back (a fraud check or a coupon
    /// failed); default 0. A correct strategy never hears of them; one that
    /// schedules before the commit is left with phantom schedules.
    #[serde(default)]
    pub checkout_abort_ratio: f64,
    /// The timeout mix: each order draws one, weighted.
    pub timeouts: Vec<Timeout>,
    #[serde(default)]
    pub stock: Stock,
    #[serde(default)]
    pub payments: Payments,
    /// Per-strategy options (`[strategies.db-scan]`, `[strategies.fallback-scan]`, ...).
    #[serde(default)]
    pub strategies: StrategyOptions,
    /// Faults injected at the same times into every strategy's run
    /// (`[[faults]]`; default none).
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// What a worker does when `schedule` fails without an outbox
    /// (`[schedule-retry]`).
    #[serde(default)]
    pub schedule_retry: ScheduleRetry,
    /// What the workers measure on the strategy's path (`[measure]`).
    #[serde(default)]
    pub measure: Measure,
    /// How `delaybench sweep` varies `rate` (`[sweep]`; ignored by `run`).
    #[serde(default)]
    pub sweep: Sweep,
    /// Far-future PENDING orders preloaded before the warm-up (`[backlog]`;
    /// default none).
    #[serde(default)]
    pub backlog: Option<Backlog>,
    /// A command run before every strategy's run (`[before-each-strategy]`;
    /// default none), e.g. one that makes a cluster whole again after the
    /// previous strategy's fault took a node down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_each_strategy: Option<BeforeEachStrategy>,
}

/// `[before-each-strategy]`: a command run before each strategy's run (each
/// strategy of `delaybench run` and each of its repetitions, each step of
/// `delaybench sweep`), before its namespace and `setup`. It runs without a
/// shell, like a `run-command` fault, in the folder delaybench was started
/// from, its output written to `before-each-strategy.stdout.log` and
/// `.stderr.log` in the strategy's folder. A non-zero exit, a command that
/// cannot start or one still running after `timeout` (then killed, with
/// every process of its process group: what it started and did not detach)
/// fails that strategy, with the command and the end of its stderr as the
/// reason; the next strategy runs it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BeforeEachStrategy {
    /// The program and its arguments, run without a shell (use
    /// `["sh", "-c", "..."]` for one). Required.
    #[serde(deserialize_with = "argv")]
    pub command: Vec<String>,
    /// Longest the command may take (default 180s).
    #[serde(default = "three_minutes", with = "humantime_serde")]
    pub timeout: Duration,
}

fn three_minutes() -> Duration {
    Duration::from_secs(180)
}

/// `before-each-strategy.command`: an array of strings, with an error that
/// names the field when it is anything else (a single string, say).
fn argv<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    let value = toml::Value::deserialize(d)?;
    let strings = value.as_array().and_then(|items| {
        items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
    });
    strings.ok_or_else(|| {
        serde::de::Error::custom(format!(
            "field `before-each-strategy.command` = {value} is invalid; accepted values: the \
             program and its arguments as an array of strings, run without a shell, e.g. \
             [\"scripts/services.sh\", \"rabbitmq-cluster\"] or [\"sh\", \"-c\", \"...\"]"
        ))
    })
}

impl BeforeEachStrategy {
    /// The command as one would type it, e.g. `scripts/services.sh
    /// rabbitmq-cluster`, with any URL's password replaced by `***`.
    pub fn label(&self) -> String {
        strategies::redact::text(&self.command.join(" "))
    }

    fn validate(&self) -> Result<()> {
        if self
            .command
            .first()
            .is_none_or(|program| program.is_empty())
        {
            bail!(
                "field `before-each-strategy.command` = {:?} has no program; accepted values: \
                 the program and its arguments, e.g. [\"scripts/services.sh\", \"rabbitmq-cluster\"]",
                self.command
            );
        }
        if self.timeout.is_zero() || self.timeout > Duration::from_secs(86_400) {
            bail!(
                "field `before-each-strategy.timeout` = {:?} is out of range; accepted values: \
                 1ms to 24h",
                self.timeout
            );
        }
        Ok(())
    }
}

/// `[backlog]`: a pile of far-future PENDING orders that every strategy
/// holds while the scenario's load runs, as a shop with millions of unpaid
/// orders does. They go into the database in multi-row INSERTs, then to the
/// strategy through its own `schedule` (pipelined, as orders are), and both
/// steps are timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Backlog {
    /// Pending orders to preload. `delaybench sweep` runs one step per
    /// size (the backlog sweep, at the scenario's `rate`); `delaybench
    /// run` takes exactly one.
    pub pending: Vec<u64>,
    /// Their deadline, this long after the preload starts: beyond the run,
    /// so none falls due while it is measured (default 1h).
    #[serde(default = "an_hour", with = "humantime_serde")]
    pub after: Duration,
    /// After the drain, with the backlog in place, restart what holds it
    /// and time until a fresh, already-due order is cancelled again: each
    /// strategy's instance 0 (a wheel reloads every pending order), and
    /// the commands here for the services the strategy uses. Empty: that
    /// service is not restarted.
    #[serde(default)]
    pub restart_redis: Vec<String>,
    #[serde(default)]
    pub restart_rabbitmq: Vec<String>,
}

fn an_hour() -> Duration {
    Duration::from_secs(3600)
}

/// `[sweep]`: how `delaybench sweep` looks for each strategy's highest
/// rate. Every step is a whole run of the scenario at one offered rate,
/// with its own warm-up, measured window and namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Sweep {
    /// Offered rates to run, each one (default empty: discover them, from
    /// `start-rate` doubling until a step fails, then bisecting).
    pub rates: Vec<f64>,
    /// Discovery's first rate, orders/s (default 100).
    pub start_rate: f64,
    /// Discovery never offers more than this, orders/s (default 20000).
    pub max_rate: f64,
    /// Discovery halves the gap between the highest rate that held and the
    /// lowest that failed this many times (default 3).
    pub bisect: u32,
    /// A step holds only if p99 lateness at commit is at most this (default 500ms).
    #[serde(with = "humantime_serde")]
    pub bound: Duration,
    /// ... and the harness keeps up: p99 of its lag to commit and of the
    /// schedule path at most this (default 100ms).
    #[serde(with = "humantime_serde")]
    pub keep_up: Duration,
}

impl Default for Sweep {
    fn default() -> Self {
        Sweep {
            rates: Vec::new(),
            start_rate: 100.0,
            max_rate: 20_000.0,
            bisect: 3,
            bound: Duration::from_millis(500),
            keep_up: Duration::from_millis(100),
        }
    }
}

/// `[measure]`: the probes and recorders on a strategy's path. Each costs
/// something where it runs; the report states that cost per cancel
/// (`cost.measurement`), and `unmeasured-twin` measures it against a run
/// without them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Measure {
    /// The rows the database server read inside the canceller's own
    /// transactions (PostgreSQL): "sampled" (default: at most
    /// `server-reads-per-second` transactions read per instance and second,
    /// the rest estimated from them), "every-transaction" (exact, two extra
    /// round trips per transaction: it taxes a per-order strategy per
    /// order and a batch strategy per batch) or "off".
    pub server_reads: ServerReadsMode,
    /// With `server-reads = "sampled"`: readings per second per instance
    /// (default 1: at 50 orders/s a reading of each of db-scan's few
    /// transactions cost it 9 % of its CPU per cancel; one a second keeps
    /// every strategy under 5 % and still gives tens of readings a run).
    pub server_reads_per_second: u32,
    /// Workers note when each cancel's COMMIT returned (lateness at
    /// commit, which sweeps judge steps by, and the duplicates absorbed
    /// after a pause), default true.
    pub commit_times: bool,
    /// Workers note each order's schedule path (its commit to `schedule()`
    /// returning), default true.
    pub schedule_times: bool,
    /// `delaybench run`: also run each strategy, interleaved, with every
    /// probe and recorder above off (folder `<strategy>.unmeasured`), so
    /// the report shows what the measurement costs (default false).
    pub unmeasured_twin: bool,
}

/// `measure.server-reads`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerReadsMode {
    #[default]
    Sampled,
    EveryTransaction,
    Off,
}

impl Default for Measure {
    fn default() -> Self {
        Measure {
            server_reads: ServerReadsMode::Sampled,
            server_reads_per_second: 1,
            commit_times: true,
            schedule_times: true,
            unmeasured_twin: false,
        }
    }
}

impl Measure {
    /// Every probe and recorder off: the twin's settings.
    pub fn nothing() -> Measure {
        Measure {
            server_reads: ServerReadsMode::Off,
            commit_times: false,
            schedule_times: false,
            unmeasured_twin: false,
            ..Measure::default()
        }
    }

    /// What the store's probe is set to.
    pub fn server_reads(&self) -> strategies::store::ServerReads {
        use strategies::store::ServerReads;
        match self.server_reads {
            ServerReadsMode::Sampled => ServerReads::Sampled {
                per_second: self.server_reads_per_second,
            },
            ServerReadsMode::EveryTransaction => ServerReads::Every,
            ServerReadsMode::Off => ServerReads::Off,
        }
    }

    /// Whether anything is measured on the path at all.
    pub fn is_nothing(&self) -> bool {
        self.server_reads == ServerReadsMode::Off && !self.commit_times && !self.schedule_times
    }

    fn validate(&self) -> Result<()> {
        if !(1..=1000).contains(&self.server_reads_per_second) {
            bail!(
                "field `measure.server-reads-per-second` = {} is out of range; accepted values: 1 to 1000",
                self.server_reads_per_second
            );
        }
        Ok(())
    }
}

/// `[schedule-retry]`: without an outbox, the order service calls
/// `schedule` after its commit; when that fails (the broker or Redis is
/// away) the worker retries it from a bounded buffer, and what it finally
/// gives up on is counted as dropped: those orders are then cancelled only
/// by a fallback, or never.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ScheduleRetry {
    /// Give up on a schedule this long after its first failure (default 2s).
    #[serde(with = "humantime_serde")]
    pub give_up_after: Duration,
    /// Failed schedules held for retry at once per instance; one that fails
    /// while the buffer is full is dropped at once (default 1000).
    pub buffer: u32,
}

impl Default for ScheduleRetry {
    fn default() -> Self {
        ScheduleRetry {
            give_up_after: Duration::from_secs(2),
            buffer: 1000,
        }
    }
}

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
    fn validate(&self, i: usize) -> Result<()> {
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

fn one() -> u32 {
    1
}

impl Sweep {
    fn validate(&self) -> Result<()> {
        let rate_ok = |r: f64| r > 0.0 && r <= 100_000.0;
        for (i, r) in self.rates.iter().enumerate() {
            if !rate_ok(*r) {
                bail!("field `sweep.rates[{i}]` = {r} is out of range; accepted values: more than 0 up to 100000 orders/s");
            }
        }
        if !rate_ok(self.start_rate) {
            bail!("field `sweep.start-rate` = {} is out of range; accepted values: more than 0 up to 100000 orders/s", self.start_rate);
        }
        if !(self.max_rate >= self.start_rate && self.max_rate <= 100_000.0) {
            bail!("field `sweep.max-rate` = {} is out of range; accepted values: `sweep.start-rate` ({}) up to 100000 orders/s", self.max_rate, self.start_rate);
        }
        if self.bisect > 10 {
            bail!(
                "field `sweep.bisect` = {} is out of range; accepted values: 0 to 10",
                self.bisect
            );
        }
        if self.bound.is_zero() || self.keep_up.is_zero() {
            bail!("fields `sweep.bound` and `sweep.keep-up` accept 1ms or more");
        }
        Ok(())
    }
}

/// `[[timeouts]]`: how long an order may stay unpaid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Timeout {
    #[serde(with = "humantime_serde")]
    pub after: Duration,
    /// Relative weight (default 1).
    #[serde(default = "one")]
    pub weight: u32,
}

/// `[stock]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Stock {
    /// Number of SKUs; orders pick one uniformly (default 50).
    pub skus: u32,
    /// Units per SKU at the start (default 1000000). Creation is refused
    /// when a SKU runs short, and the report counts refusals.
    pub initial: i64,
    /// Orders take 1..=max-qty units (default 3).
    pub max_qty: u32,
}

impl Default for Stock {
    fn default() -> Self {
        Stock {
            skus: 50,
            initial: 1_000_000,
            max_qty: 3,
        }
    }
}

/// `[payments]`: how the simulated payment gateway behaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Payments {
    /// Share of orders that are paid at all (default 0.5).
    pub pay_ratio: f64,
    /// Share of payers paying within +-epsilon of the deadline, racing the
    /// canceller (default 0.1).
    pub near_deadline_share: f64,
    #[serde(with = "humantime_serde")]
    pub near_deadline_epsilon: Duration,
    /// Share of payers whose callback arrives after the deadline, when the
    /// order should already be cancelled: exactly one refund each (default 0.05).
    pub late_share: f64,
    /// Late callbacks arrive between late-by/2 and late-by after the deadline.
    #[serde(with = "humantime_serde")]
    pub late_by: Duration,
    /// Added to every callback (gateway-to-shop delay; default 0).
    #[serde(with = "humantime_serde")]
    pub callback_delay: Duration,
    /// Share of callbacks the gateway delivers twice (default 0.1).
    pub duplicate_ratio: f64,
    /// The retry comes this long after the first copy (default 100ms).
    #[serde(with = "humantime_serde")]
    pub duplicate_after: Duration,
}

impl Default for Payments {
    fn default() -> Self {
        Payments {
            pay_ratio: 0.5,
            near_deadline_share: 0.1,
            near_deadline_epsilon: Duration::from_millis(20),
            late_share: 0.05,
            late_by: Duration::from_secs(1),
            callback_delay: Duration::ZERO,
            duplicate_ratio: 0.1,
            duplicate_after: Duration::from_millis(100),
        }
    }
}

impl Scenario {
    /// Loads and validates the scenario `arg` names: a file when one
    /// exists at that path, otherwise a bundled preset (`busy`,
    /// `busy.toml` or `scenarios/busy.toml`); `None` loads `default_preset`.
    /// Returns the scenario and where it came from.
    pub fn load(arg: Option<&str>, default_preset: &str) -> Result<(Scenario, String)> {
        let arg = arg.unwrap_or(default_preset);
        let path = Path::new(arg);
        if path.is_file() && path.extension().is_some_and(|e| e == "json") {
            return Scenario::from_run_json(path);
        }
        let (text, origin) = if path.is_file() {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read scenario file {}", path.display()))?;
            (text, path.display().to_string())
        } else if let Some(preset) = crate::presets::find(arg) {
            (
                preset.text.to_string(),
                format!("{} (bundled preset)", preset.name),
            )
        } else {
            bail!(
                "scenario {arg}: no such file, and no bundled preset of that name; presets: {} \
                 (`delaybench scenario list` describes them, `delaybench scenario init FILE` \
                 writes a starting file)",
                crate::presets::names()
            );
        };
        let scenario = Scenario::parse(&text, &origin)?;
        Ok((scenario, origin))
    }

    /// The scenario a run folder's `run.json` recorded, as the run resolved
    /// it: a run repeats from its folder even without a `scenario.toml`
    /// (folders made before it was written, or whose scenario file is gone).
    fn from_run_json(path: &Path) -> Result<(Scenario, String)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read run file {}", path.display()))?;
        let mut run: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("scenario {}: not JSON", path.display()))?;
        let scenario = run
            .get_mut("scenario")
            .map(serde_json::Value::take)
            .with_context(|| {
                format!(
                    "scenario {}: a .json scenario is a run folder's run.json, and this one has \
                     no `scenario`",
                    path.display()
                )
            })?;
        let scenario: Scenario = serde_json::from_value(scenario)
            .map_err(|e| anyhow::anyhow!("scenario {}: {e}", path.display()))?;
        scenario
            .validate()
            .map_err(|e| anyhow::anyhow!("scenario {}: {e}", path.display()))?;
        let id = run["run_id"].as_str().unwrap_or("?");
        Ok((
            scenario,
            format!("{} (the scenario of run {id})", path.display()),
        ))
    }

    /// The scenario as a TOML file that loads back to the same scenario:
    /// what a run folder keeps so the run can be repeated exactly.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self).context("writing the scenario as TOML")
    }

    /// Parses and validates scenario text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario> {
        let scenario: Scenario =
            toml::from_str(text).map_err(|e| anyhow::anyhow!("scenario {origin}: {e}"))?;
        scenario
            .validate()
            .map_err(|e| anyhow::anyhow!("scenario {origin}: {e}"))?;
        Ok(scenario)
    }

    /// Checks every range; the message names the field and what is accepted.
    pub fn validate(&self) -> Result<()> {
        let ratio = |field: &str, v: f64| -> Result<()> {
            if !(0.0..=1.0).contains(&v) {
                bail!("field `{field}` = {v} is out of range; accepted values: 0.0 to 1.0");
            }
            Ok(())
        };
        let day = Duration::from_secs(86_400);
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!(
                "field `name` = {:?} is invalid; accepted values: letters, digits, - and _",
                self.name
            );
        }
        if !(self.rate > 0.0 && self.rate <= 100_000.0) {
            bail!("field `rate` = {} is out of range; accepted values: more than 0 up to 100000 orders/s", self.rate);
        }
        if self.duration.is_zero() || self.duration > day {
            bail!(
                "field `duration` = {:?} is out of range; accepted values: 1ms to 24h",
                self.duration
            );
        }
        if self.warmup > day || self.drain > day {
            bail!("fields `warmup` and `drain` accept 0s to 24h");
        }
        if !(1..=64).contains(&self.instances) {
            bail!(
                "field `instances` = {} is out of range; accepted values: 1 to 64",
                self.instances
            );
        }
        if self.timeouts.is_empty() {
            bail!("field `timeouts` is empty; add at least one [[timeouts]] with `after` (e.g. \"2s\")");
        }
        for (i, t) in self.timeouts.iter().enumerate() {
            if t.after < Duration::from_millis(1) || t.after > day {
                bail!("field `timeouts[{i}].after` = {:?} is out of range; accepted values: 1ms to 24h", t.after);
            }
            if t.weight == 0 {
                bail!(
                    "field `timeouts[{i}].weight` = 0 is out of range; accepted values: 1 or more"
                );
            }
        }
        if !(1..=1_000_000).contains(&self.stock.skus) {
            bail!(
                "field `stock.skus` = {} is out of range; accepted values: 1 to 1000000",
                self.stock.skus
            );
        }
        if self.stock.initial < 0 {
            bail!(
                "field `stock.initial` = {} is out of range; accepted values: 0 or more",
                self.stock.initial
            );
        }
        if !(1..=1000).contains(&self.stock.max_qty) {
            bail!(
                "field `stock.max-qty` = {} is out of range; accepted values: 1 to 1000",
                self.stock.max_qty
            );
        }
        let p = &self.payments;
        ratio("payments.pay-ratio", p.pay_ratio)?;
        ratio("payments.near-deadline-share", p.near_deadline_share)?;
        ratio("payments.late-share", p.late_share)?;
        ratio("payments.duplicate-ratio", p.duplicate_ratio)?;
        if p.near_deadline_share + p.late_share > 1.0 {
            bail!(
                "fields `payments.near-deadline-share` + `payments.late-share` = {} exceed 1.0; \
                 accepted values: shares of the payers that sum to at most 1.0",
                p.near_deadline_share + p.late_share
            );
        }
        let arrivals = self.warmup + self.duration;
        for (i, f) in self.faults.iter().enumerate() {
            if f.at > arrivals {
                bail!(
                    "field `faults[{i}].at` = {:?} is out of range; accepted values: 0s to warmup + duration ({:?})",
                    f.at,
                    arrivals
                );
            }
            if f.instance() >= self.instances {
                bail!(
                    "field `faults[{i}].instance` = {} is out of range; accepted values: 0 to instances - 1 ({})",
                    f.instance(),
                    self.instances - 1
                );
            }
            if f.restart_after.is_some_and(|d| d > day) {
                bail!(
                    "field `faults[{i}].restart-after` is out of range; accepted values: 0s to 24h"
                );
            }
            f.validate(i)?;
            // The run waits for every fault before it stops its instances.
            if f.at + f.window() > arrivals + self.drain {
                bail!(
                    "field `faults[{i}].for` = {:?} runs past the run's end; accepted values: \
                     `at` + `for` up to warmup + duration + drain ({:?})",
                    f.window(),
                    arrivals + self.drain
                );
            }
        }
        if !(0.0..=0.5).contains(&self.checkout_abort_ratio) {
            bail!(
                "field `checkout-abort-ratio` = {} is out of range; accepted values: 0.0 to 0.5",
                self.checkout_abort_ratio
            );
        }
        let r = &self.schedule_retry;
        if r.give_up_after > day {
            bail!(
                "field `schedule-retry.give-up-after` = {:?} is out of range; accepted values: 0s \
                 (no retry) to 24h",
                r.give_up_after
            );
        }
        if r.buffer > 10_000_000 {
            bail!(
                "field `schedule-retry.buffer` = {} is out of range; accepted values: 0 (no retry) \
                 to 10000000 schedules",
                r.buffer
            );
        }
        self.sweep.validate()?;
        self.measure.validate()?;
        if let Some(b) = &self.backlog {
            if b.pending.is_empty() || b.pending.iter().any(|n| *n > 100_000_000) {
                bail!("field `backlog.pending` = {:?} is out of range; accepted values: a list of 1 to many sizes, each 0 to 100000000 orders", b.pending);
            }
            let arrivals = self.warmup + self.duration + self.drain;
            let longest = self
                .timeouts
                .iter()
                .map(|t| t.after)
                .max()
                .unwrap_or_default();
            if b.after <= arrivals + longest || b.after > day * 365 {
                bail!(
                    "field `backlog.after` = {:?} is out of range; accepted values: longer than \
                     warmup + duration + drain + the longest timeout ({:?}), so no backlog order \
                     falls due during the run, up to 365 days",
                    b.after,
                    arrivals + longest
                );
            }
            let needed =
                b.pending.iter().max().copied().unwrap_or(0) / u64::from(self.stock.skus) + 1;
            if needed as i64 > self.stock.initial / 2 {
                bail!(
                    "field `stock.initial` = {} is too small for a backlog of {} orders over {} SKUs \
                     (each needs {needed} units, and the load its share); accepted values: at least {}",
                    self.stock.initial,
                    b.pending.iter().max().unwrap_or(&0),
                    self.stock.skus,
                    needed * 2
                );
            }
        }
        if let Some(hook) = &self.before_each_strategy {
            hook.validate()?;
        }
        self.strategies
            .validate()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }

    /// The strategy options as the instances get them: where the scenario
    /// leaves `[strategies.rabbit] ttls` empty, rabbit-ttl gets one wait
    /// queue per distinct timeout of the mix.
    pub fn strategy_options(&self) -> StrategyOptions {
        let mut options = self.strategies.clone();
        if options.rabbit.ttls.is_empty() {
            options.rabbit.ttls = self.timeouts.iter().map(|t| t.after).collect();
            // The backlog's orders go through rabbit-ttl too.
            if let Some(b) = &self.backlog {
                options.rabbit.ttls.push(b.after);
            }
        }
        options
    }

    /// The timeouts as humans read them, e.g. `2s (x3), 4s (x1)`.
    pub fn timeouts_label(&self) -> String {
        self.timeouts
            .iter()
            .map(|t| format!("{} (x{})", humantime::format_duration(t.after), t.weight))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The faults in one line, or `None` when the scenario has none.
    pub fn faults_label(&self) -> Option<String> {
        (!self.faults.is_empty()).then(|| {
            self.faults
                .iter()
                .map(Fault::label)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_and_survives_being_saved() {
        for preset in crate::presets::PRESETS {
            let (s, origin) = Scenario::load(Some(preset.name), "quick")
                .unwrap_or_else(|e| panic!("{}: {e:#}", preset.name));
            assert_eq!(origin, format!("{} (bundled preset)", preset.name));
            // What a run folder keeps loads back to the same scenario.
            let saved = s.to_toml().unwrap();
            let again = Scenario::parse(&saved, "saved").unwrap();
            assert_eq!(again, s, "{}:\n{saved}", preset.name);
        }
    }

    #[test]
    fn an_unknown_scenario_names_the_presets() {
        let e = Scenario::load(Some("no-such-scenario"), "quick").unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("no-such-scenario")
                && text.contains("chaos")
                && text.contains("scenario list"),
            "{text}"
        );
    }

    #[test]
    fn a_file_wins_over_a_preset_of_the_same_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("quick.toml");
        std::fs::write(&file, QUICK.replace("name = \"quick\"", "name = \"mine\"")).unwrap();
        let (s, origin) = Scenario::load(file.to_str(), "quick").unwrap();
        assert_eq!(
            (s.name.as_str(), origin),
            ("mine", file.display().to_string())
        );
    }

    #[test]
    fn a_run_folders_run_json_is_a_scenario_too() {
        // An older backlog reference had no scenario.toml, and the file
        // it ran (/tmp/backlog-1m.toml) was gone: its run.json (this
        // fixture, trimmed to `run_id` and `scenario`) held it.
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/backlog-run.json");
        let (s, origin) = Scenario::load(file.to_str(), "quick").unwrap();
        assert_eq!(s.name, "backlog");
        assert_eq!(
            s.backlog.unwrap().pending,
            vec![0, 10_000, 100_000, 1_000_000]
        );
        assert!(
            origin.ends_with("(the scenario of run 20261130-124547-backlog)"),
            "{origin}"
        );
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("x.json");
        std::fs::write(&other, "{\"run_id\": \"r\"}").unwrap();
        let e = format!("{:#}", Scenario::load(other.to_str(), "quick").unwrap_err());
        assert!(e.contains("has no `scenario`"), "{e}");
    }

    #[test]
    fn rabbit_ttls_default_to_the_timeouts() {
        let s = Scenario::parse(QUICK, "quick").unwrap();
        let ttls = s.strategy_options().rabbit.ttls;
        assert_eq!(ttls, vec![Duration::from_secs(2), Duration::from_secs(4)]);
    }

    #[test]
    fn bundled_quick_scenario_is_valid() {
        let s = Scenario::parse(QUICK, "quick").unwrap();
        assert_eq!(s.name, "quick");
        assert_eq!(s.timeouts.len(), 2);
    }

    fn error_for(edit: (&str, &str)) -> String {
        let text = QUICK.replace(edit.0, edit.1);
        assert_ne!(text, QUICK, "edit {edit:?} did not apply");
        format!("{:#}", Scenario::parse(&text, "my.toml").unwrap_err())
    }

    #[test]
    fn out_of_range_names_file_field_and_accepted_values() {
        let msg = error_for(("pay-ratio = 0.5", "pay-ratio = 1.5"));
        assert!(
            msg.contains("my.toml")
                && msg.contains("payments.pay-ratio")
                && msg.contains("0.0 to 1.0"),
            "{msg}"
        );
        let msg = error_for(("rate = 50.0", "rate = 0.0"));
        assert!(msg.contains("`rate`") && msg.contains("accepted"), "{msg}");
        let msg = error_for(("batch-size = 200", "batch-size = 0"));
        assert!(msg.contains("strategies.db-scan.batch-size"), "{msg}");
    }

    #[test]
    fn faults_parse_and_out_of_range_ones_name_the_field() {
        let with = |fault: &str| format!("{QUICK}\n[[faults]]\n{fault}\n");
        let s = Scenario::parse(
            &with("kind = \"kill-instance\"\nat = \"8s\"\ninstance = 1\nrestart-after = \"3s\""),
            "f.toml",
        )
        .unwrap();
        assert_eq!(
            s.faults,
            vec![Fault {
                kind: FaultKind::KillInstance,
                at: Duration::from_secs(8),
                instance: Some(1),
                restart_after: Some(Duration::from_secs(3)),
                command: Vec::new(),
                target: None,
                node: None,
                lasts: None,
                add: None,
                point: None,
                times: 1,
            }]
        );
        let s = Scenario::parse(&with("kind = \"kill-instance\"\nat = \"8s\""), "f.toml").unwrap();
        assert_eq!(
            (s.faults[0].instance(), s.faults[0].restart_after),
            (0, None)
        );
        let err =
            |fault: &str| format!("{:#}", Scenario::parse(&with(fault), "f.toml").unwrap_err());
        let msg = err("kind = \"kill-instance\"\nat = \"8s\"\ninstance = 2");
        assert!(
            msg.contains("f.toml") && msg.contains("faults[0].instance") && msg.contains("0 to"),
            "{msg}"
        );
        let msg = err("kind = \"kill-instance\"\nat = \"1h\"");
        assert!(
            msg.contains("faults[0].at") && msg.contains("accepted"),
            "{msg}"
        );
        let msg = err("kind = \"run-command\"\nat = \"1s\"");
        assert!(
            msg.contains("faults[0].command") && msg.contains("sh"),
            "{msg}"
        );
        let msg = err("kind = \"kill-instance\"\nat = \"1s\"\ncommand = [\"true\"]");
        assert!(
            msg.contains("faults[0].command") && msg.contains("\"run-command\" only"),
            "{msg}"
        );
        let s = Scenario::parse(
            &with("kind = \"run-command\"\nat = \"1s\"\ncommand = [\"true\"]"),
            "f.toml",
        )
        .unwrap();
        assert_eq!(s.faults_label().unwrap(), "run `true` at 1s");
        // The new kinds: each names what it misses or what it does not take.
        for (fault, field, says) in [
            (
                "kind = \"partition\"\nat = \"1s\"\nfor = \"3s\"",
                "target",
                "rabbitmq",
            ),
            (
                "kind = \"partition\"\nat = \"1s\"\ntarget = \"redis\"",
                "for",
                "3s",
            ),
            (
                "kind = \"latency\"\nat = \"1s\"\ntarget = \"redis\"\nfor = \"1s\"",
                "add",
                "50ms",
            ),
            ("kind = \"pause-instance\"\nat = \"1s\"", "for", "6s"),
            ("kind = \"crash-at\"\nat = \"1s\"", "point", "after-claim"),
            (
                "kind = \"crash-at\"\nat = \"1s\"\npoint = \"after-claim\"\ntimes = 0",
                "times",
                "1 to 100",
            ),
            (
                "kind = \"kill-db-connections\"\nat = \"1s\"\nfor = \"1s\"",
                "for",
                "only",
            ),
            (
                "kind = \"kill-instance\"\nat = \"1s\"\ntarget = \"redis\"",
                "target",
                "only",
            ),
            (
                "kind = \"partition\"\nat = \"1s\"\ntarget = \"redis\"\nfor = \"0s\"",
                "for",
                "1ms to 1h",
            ),
        ] {
            let msg = err(fault);
            assert!(
                msg.contains(&format!("faults[0].{field}")) && msg.contains(says),
                "{fault}: {msg}"
            );
        }
        let msg = err("kind = \"crash-at\"\nat = \"1s\"\npoint = \"after-ack\"");
        assert!(
            msg.contains("after-ack") && msg.contains("after-commit-before-ack"),
            "{msg}"
        );
        let s = Scenario::parse(
            &with("kind = \"latency\"\nat = \"1s\"\ntarget = \"database\"\nadd = \"50ms\"\nfor = \"2s\""),
            "f.toml",
        )
        .unwrap();
        assert_eq!(
            s.faults_label().unwrap(),
            "+50ms latency to database for 2s at 1s"
        );
        assert_eq!(s.faults[0].window(), Duration::from_secs(2));
        let msg = err("kind = \"pull-the-plug\"\nat = \"1s\"");
        assert!(
            msg.contains("pull-the-plug") && msg.contains("kill-instance"),
            "{msg}"
        );
    }

    #[test]
    fn a_field_its_fault_kind_ignores_is_refused_by_name() {
        let err = |fault: &str| {
            let text = format!("{QUICK}\n[[faults]]\nat = \"8s\"\n{fault}\n");
            format!("{:#}", Scenario::parse(&text, "f.toml").unwrap_err())
        };
        for (fault, field) in [
            (
                "kind = \"partition\"\ntarget = \"redis\"\nfor = \"1s\"\ninstance = 1",
                "instance",
            ),
            ("kind = \"kill-db-connections\"\ninstance = 0", "instance"),
            ("kind = \"kill-instance\"\ncommand = [\"true\"]", "command"),
            (
                "kind = \"partition\"\ntarget = \"redis\"\nfor = \"1s\"\nrestart-after = \"1s\"",
                "restart-after",
            ),
            ("kind = \"kill-instance\"\ntarget = \"redis\"", "target"),
            ("kind = \"kill-instance\"\nfor = \"1s\"", "for"),
            (
                "kind = \"partition\"\ntarget = \"redis\"\nfor = \"1s\"\nadd = \"5ms\"",
                "add",
            ),
            ("kind = \"kill-instance\"\npoint = \"after-claim\"", "point"),
            ("kind = \"kill-instance\"\ntimes = 2", "times"),
            (
                "kind = \"run-command\"\ncommand = [\"true\"]\nnode = \"127.0.0.1:7001\"",
                "node",
            ),
            (
                "kind = \"run-command\"\ncommand = [\"true\"]\ntarget = \"rabbitmq\"\nnode = \"h:1\"",
                "node",
            ),
        ] {
            let msg = err(fault);
            assert!(
                msg.contains(&format!("faults[0].{field}`")) && msg.contains("applies to"),
                "{fault}: {msg}"
            );
        }
    }

    #[test]
    fn a_run_command_may_name_the_service_and_node_it_acts_on() {
        let text = format!(
            "{QUICK}\n[[faults]]\nkind = \"run-command\"\nat = \"8s\"\ncommand = [\"true\"]\n\
             target = \"redis\"\nnode = \"127.0.0.1:7001\"\n"
        );
        let s = Scenario::parse(&text, "f.toml").unwrap();
        assert_eq!(s.faults[0].target, Some(Target::Redis));
        assert_eq!(s.faults[0].node.as_deref(), Some("127.0.0.1:7001"));
    }

    #[test]
    fn before_each_strategy_parses_and_malformed_ones_name_the_field() {
        let with = |table: &str| format!("{QUICK}\n[before-each-strategy]\n{table}\n");
        let s = Scenario::parse(
            &with("command = [\"scripts/services.sh\", \"rabbitmq-cluster\"]"),
            "h.toml",
        )
        .unwrap();
        let hook = s.before_each_strategy.as_ref().unwrap();
        assert_eq!(hook.command, ["scripts/services.sh", "rabbitmq-cluster"]);
        assert_eq!(hook.timeout, Duration::from_secs(180));
        assert_eq!(hook.label(), "scripts/services.sh rabbitmq-cluster");
        // It survives being saved in the run folder; without it, nothing is written.
        let again = Scenario::parse(&s.to_toml().unwrap(), "saved").unwrap();
        assert_eq!(again, s);
        let quick = Scenario::parse(QUICK, "quick").unwrap();
        assert!(!quick.to_toml().unwrap().contains("before-each-strategy"));
        let s = Scenario::parse(&with("command = [\"true\"]\ntimeout = \"2s\""), "h.toml").unwrap();
        assert_eq!(
            s.before_each_strategy.unwrap().timeout,
            Duration::from_secs(2)
        );
        let err =
            |table: &str| format!("{:#}", Scenario::parse(&with(table), "h.toml").unwrap_err());
        // A command line as one string (the shell habit) is refused by name.
        let msg = err("command = \"scripts/services.sh rabbitmq-cluster\"");
        assert!(
            msg.contains("h.toml")
                && msg.contains("before-each-strategy.command")
                && msg.contains("array of strings"),
            "{msg}"
        );
        let msg = err("command = [\"sh\", 3]");
        assert!(msg.contains("before-each-strategy.command"), "{msg}");
        for table in ["command = []", "command = [\"\"]"] {
            let msg = err(table);
            assert!(
                msg.contains("before-each-strategy.command") && msg.contains("no program"),
                "{table}: {msg}"
            );
        }
        let msg = err("timeout = \"2s\"");
        assert!(msg.contains("command"), "{msg}");
        let msg = err("command = [\"true\"]\ntimeout = \"0s\"");
        assert!(
            msg.contains("before-each-strategy.timeout") && msg.contains("1ms to 24h"),
            "{msg}"
        );
        let msg = err("command = [\"true\"]\ntimeout = \"soon\"");
        assert!(msg.contains("timeout") && msg.contains("soon"), "{msg}");
        let msg = err("command = [\"true\"]\ntimout = \"2s\"");
        assert!(msg.contains("timout") && msg.contains("timeout"), "{msg}");
    }

    #[test]
    fn malformed_values_name_the_field() {
        let msg = error_for(("duration = \"15s\"", "duration = \"fifteen\""));
        assert!(msg.contains("my.toml") && msg.contains("duration"), "{msg}");
        let msg = error_for(("rate = 50.0", "rte = 50.0"));
        assert!(msg.contains("rte") && msg.contains("rate"), "{msg}");
        let msg = error_for(("[strategies.db-scan]", "[strategies.db-scna]"));
        assert!(msg.contains("db-scna") && msg.contains("db-scan"), "{msg}");
    }
}
