//! Scenario files: the workload, as TOML with humantime durations.
//!
//! Every field is documented here, with its default; `scenarios/quick.toml`
//! is the bundled example and `delaybench scenario init` writes a commented
//! starting file. Errors name the file, the field and the accepted values.
//!
//! The [`Scenario`] here, loaded and checked as a whole; each table of it
//! in a file of its own: [`orders`] (`[[timeouts]]`, `[stock]`,
//! `[payments]`, `[schedule-retry]`), [`measure`], [`sweep`], [`backlog`],
//! [`storm`], [`network`], [`hosts`] and [`before_each`] (`[before-each-strategy]`). `[[faults]]` are read
//! by the fault kinds, each from its own fields (`crate::faults`).

mod backlog;
mod before_each;
mod hosts;
mod measure;
mod network;
mod orders;
pub mod overrides;
mod storm;
mod sweep;
#[cfg(test)]
mod tests;

pub use backlog::Backlog;
pub use before_each::BeforeEachStrategy;
pub use hosts::Hosts;
pub use measure::Measure;
pub use network::{Network, TARGETS as NETWORK_TARGETS};
pub use orders::{Payments, ScheduleRetry};
pub use storm::Storm;
pub use sweep::Sweep;

use crate::faults::{read_faults, Fault};
use anyhow::{bail, Context, Result};
use orders::{one, Stock, Timeout};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;
use strategies::StrategyOptions;

/// The bundled quick scenario, used when no `--scenario` is given.
#[cfg(test)]
pub const QUICK: &str = include_str!("../../scenarios/quick.toml");

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
    #[serde(default, deserialize_with = "read_faults")]
    pub faults: Vec<Fault>,
    /// What a worker does when `schedule` fails without an outbox
    /// (`[schedule-retry]`).
    #[serde(default)]
    pub schedule_retry: ScheduleRetry,
    /// A steady round trip between the application side and each service,
    /// held by the harness's proxy for the whole run (`[network]`; default
    /// none: loopback).
    #[serde(default, skip_serializing_if = "Network::is_unset")]
    pub network: Network,
    /// Canceller instances on other hosts, each started by a `delaybench
    /// agent` there (`[hosts]`; default none: every instance on this host).
    #[serde(default, skip_serializing_if = "Hosts::is_local")]
    pub hosts: Hosts,
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
    /// Orders all due in one instant during the load (`[storm]`; default
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm: Option<Storm>,
    /// A command run before every strategy's run (`[before-each-strategy]`;
    /// default none), e.g. one that makes a cluster whole again after the
    /// previous strategy's fault took a node down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_each_strategy: Option<BeforeEachStrategy>,
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

    /// This scenario with every `--set` of `sets` made, in order, read back
    /// and validated exactly as a scenario file is: errors name the `--set`
    /// and the field ([`overrides`]).
    pub fn with_sets(&self, sets: &[overrides::Set]) -> Result<Scenario> {
        if sets.is_empty() {
            return Ok(self.clone());
        }
        let mut root = toml::Value::try_from(self).context("the scenario as TOML, for --set")?;
        overrides::put_all(&mut root, sets)?;
        let listed = strategies::redact::text(&overrides::listed(sets));
        let changed: Scenario = root
            .try_into()
            .map_err(|e| anyhow::anyhow!("--set {listed}: {}", overrides::field_error(e)))?;
        changed
            .validate()
            .map_err(|e| anyhow::anyhow!("--set {listed}: {e}"))?;
        Ok(changed)
    }

    /// What one strategy's run should take by the scenario's times: the
    /// arrivals, the longest timeout and the drain (set-up, a backlog or
    /// storm preload and the checks come on top). An estimate for progress
    /// lines, until a strategy has finished.
    pub fn nominal_run_time(&self) -> Duration {
        self.warmup + self.duration + self.longest_timeout() + self.drain
    }

    /// The longest timeout of the mix.
    fn longest_timeout(&self) -> Duration {
        self.timeouts
            .iter()
            .map(|t| t.after)
            .max()
            .unwrap_or_default()
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
            if let Some(instance) = f
                .instance()
                .and_then(crate::faults::InstanceTarget::index)
                .filter(|i| *i >= self.instances)
            {
                let roles: Vec<String> = crate::faults::Role::ALL
                    .iter()
                    .map(|r| format!("\"{r}\""))
                    .collect();
                bail!(
                    "field `faults[{i}].instance` = {instance} is out of range; accepted values: 0 to instances - 1 ({}), or a role ({})",
                    self.instances - 1,
                    roles.join(", ")
                );
            }
            f.check(i)?;
            // The run waits for every fault before it stops its instances.
            if f.at + f.lasts() > arrivals + self.drain {
                bail!(
                    "field `faults[{i}].for` = {:?} runs past the run's end; accepted values: \
                     `at` + `for` up to warmup + duration + drain ({:?})",
                    f.lasts(),
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
        self.network.validate()?;
        self.hosts.validate()?;
        if !self.hosts.is_local() {
            // The harness's proxies listen on this host's loopback, and a
            // pause reads the process's state in this host's /proc.
            if self.network.adds_anything() {
                bail!(
                    "`[network]` and `[hosts]` do not go together: the network profile is held                      by proxies on this host's loopback, which instances on agents cannot reach                      (between real hosts, the network is real)"
                );
            }
            for (i, f) in self.faults.iter().enumerate() {
                if let Some(target) = f.link() {
                    bail!(
                        "field `faults[{i}]` ({}) acts on the instances' link to {target} through a                          proxy on this host's loopback, which instances on `[hosts]` agents cannot                          reach; run it without `[hosts]`",
                        f.label()
                    );
                }
                if f.kind() == crate::faults::FaultKind::PauseInstance {
                    bail!(
                        "field `faults[{i}]` ({}) stops a process with SIGSTOP and watches it in                          this host's /proc, which an instance on a `[hosts]` agent is not; run it                          without `[hosts]`",
                        f.label()
                    );
                }
            }
        }
        if let Some(b) = &self.backlog {
            if b.pending.is_empty() || b.pending.iter().any(|n| *n > 100_000_000) {
                bail!("field `backlog.pending` = {:?} is out of range; accepted values: a list of 1 to many sizes, each 0 to 100000000 orders", b.pending);
            }
            let arrivals = self.warmup + self.duration + self.drain;
            let longest = self.longest_timeout();
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
        if let Some(storm) = &self.storm {
            if storm.orders.is_empty() || storm.orders.iter().any(|n| !(1..=10_000_000).contains(n))
            {
                bail!("field `storm.orders` = {:?} is out of range; accepted values: a list of 1 to many sizes, each 1 to 10000000 orders", storm.orders);
            }
            if storm.at <= self.warmup || storm.at >= self.warmup + self.duration {
                bail!(
                    "field `storm.at` = {:?} is out of range; accepted values: after the warm-up \
                     ({:?}) and before the last arrival ({:?}), so the regular orders are \
                     measured before, during and after the storm",
                    storm.at,
                    self.warmup,
                    self.warmup + self.duration
                );
            }
            let held = storm.orders.iter().max().copied().unwrap_or(0)
                + self
                    .backlog
                    .as_ref()
                    .and_then(|b| b.pending.iter().max().copied())
                    .unwrap_or(0);
            let needed = held / u64::from(self.stock.skus) + 1;
            if needed as i64 > self.stock.initial / 2 {
                bail!(
                    "field `stock.initial` = {} is too small for a storm (and backlog) of {held} \
                     orders over {} SKUs (each needs {needed} units, and the load its share); \
                     accepted values: at least {}",
                    self.stock.initial,
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
            // So are the storm's: one wait queue as long as its lead, which
            // each fires that long after its hand-off (a fixed TTL cannot
            // name an instant; the report shows the spread).
            if let Some(storm) = &self.storm {
                let size = storm.orders.first().copied().unwrap_or(0);
                options.rabbit.ttls.push(storm.lead(size));
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

/// Whether `url` is RabbitMQ's factory default as a run folder keeps it,
/// its published password (`guest`, accepted only over loopback) removed
/// like any other: such a URL reads back as the default
/// (`CommonArgs::scenario`), so a local run's folder runs again as it is.
pub fn is_redacted_default_broker(url: &str) -> bool {
    url == strategies::redact::url(&strategies::StrategyOptions::default().rabbit.url)
}
