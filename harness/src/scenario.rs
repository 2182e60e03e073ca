//! Scenario files: the workload, as TOML with humantime durations.
//!
//! Every field is documented here, with its default; `scenarios/quick.toml`
//! is the bundled example. Errors name the file, the field and the accepted
//! values.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;
use strategies::StrategyOptions;

/// The bundled quick scenario, used when no `--scenario` is given.
pub const QUICK: &str = include_str!("../../scenarios/quick.toml");

/// The bundled sweep scenario, used by `delaybench sweep` with no `--scenario`.
pub const SWEEP: &str = include_str!("../../scenarios/sweep.toml");

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
    /// How `delaybench sweep` varies `rate` (`[sweep]`; ignored by `run`).
    #[serde(default)]
    pub sweep: Sweep,
    /// Far-future PENDING orders preloaded before the warm-up (`[backlog]`;
    /// default none).
    #[serde(default)]
    pub backlog: Option<Backlog>,
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

/// `[[faults]]`: something that goes wrong during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Fault {
    pub kind: FaultKind,
    /// When, counted from the first order (warm-up included).
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// Which canceller instance, 0-based (default 0).
    #[serde(default)]
    pub instance: u32,
    /// Start a fresh process for the instance this long after the kill;
    /// omitted, it stays down for the rest of the run.
    #[serde(default, with = "humantime_serde")]
    pub restart_after: Option<Duration>,
    /// `run-command` only: the program and its arguments, run without a
    /// shell (use `["sh", "-c", "..."]` for one), e.g. a service restart.
    #[serde(default)]
    pub command: Vec<String>,
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
    /// Loads and validates a scenario; `None` loads the bundled quick one.
    pub fn load(path: Option<&Path>) -> Result<(Scenario, String)> {
        Self::load_or(path, ("quick", QUICK))
    }

    /// Loads and validates a scenario; `None` loads `bundled` (its name
    /// and text).
    pub fn load_or(path: Option<&Path>, bundled: (&str, &str)) -> Result<(Scenario, String)> {
        let (text, origin) = match path {
            Some(p) => (
                std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read scenario file {}", p.display()))?,
                p.display().to_string(),
            ),
            None => (
                bundled.1.to_string(),
                format!("scenarios/{}.toml (bundled)", bundled.0),
            ),
        };
        let scenario = Scenario::parse(&text, &origin)?;
        Ok((scenario, origin))
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
            if f.instance >= self.instances {
                bail!(
                    "field `faults[{i}].instance` = {} is out of range; accepted values: 0 to instances - 1 ({})",
                    f.instance,
                    self.instances - 1
                );
            }
            if f.restart_after.is_some_and(|d| d > day) {
                bail!(
                    "field `faults[{i}].restart-after` is out of range; accepted values: 0s to 24h"
                );
            }
            match f.kind {
                FaultKind::KillInstance if !f.command.is_empty() => bail!(
                    "field `faults[{i}].command` applies to kind = \"run-command\" only"
                ),
                FaultKind::RunCommand if f.command.is_empty() => bail!(
                    "field `faults[{i}].command` is missing or empty; accepted values: a program \
                     and its arguments, e.g. [\"sh\", \"-c\", \"rabbitmqctl stop_app && rabbitmqctl start_app\"]"
                ),
                FaultKind::RunCommand if f.restart_after.is_some() => bail!(
                    "field `faults[{i}].restart-after` applies to kind = \"kill-instance\" only"
                ),
                _ => {}
            }
        }
        self.sweep.validate()?;
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
                .map(|f| {
                    if f.kind == FaultKind::RunCommand {
                        return format!(
                            "run `{}` at {}",
                            f.command.join(" "),
                            humantime::format_duration(f.at)
                        );
                    }
                    let mut text = format!(
                        "kill instance {} at {}",
                        f.instance,
                        humantime::format_duration(f.at)
                    );
                    match f.restart_after {
                        Some(d) => {
                            text += &format!(", restart {} later", humantime::format_duration(d))
                        }
                        None => text += ", no restart",
                    }
                    text
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_scenario_is_valid() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            Scenario::load(Some(&path)).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        }
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
                instance: 1,
                restart_after: Some(Duration::from_secs(3)),
                command: Vec::new(),
            }]
        );
        let s = Scenario::parse(&with("kind = \"kill-instance\"\nat = \"8s\""), "f.toml").unwrap();
        assert_eq!((s.faults[0].instance, s.faults[0].restart_after), (0, None));
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
        let msg = err("kind = \"pull-the-plug\"\nat = \"1s\"");
        assert!(
            msg.contains("pull-the-plug") && msg.contains("kill-instance"),
            "{msg}"
        );
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
