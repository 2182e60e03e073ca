//! What `run` and `sweep` are asked on the command line: the scenario, the
//! strategies (parsed here, once, into [`Variant`]s), the services and
//! where results go.

use crate::scenario::overrides::Set;
use crate::scenario::Scenario;
use crate::service_args::ServiceArgs;
use anyhow::Result;
use std::path::PathBuf;
use strategies::registry::{Role, Variant, STRATEGIES};
use strategies::Service;

/// What `run` and `sweep` share on the command line. Each service URL
/// comes from its flag, else its environment variable, else the scenario
/// (whose defaults are this machine's services).
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Scenario: a TOML file, or a bundled preset by name (quick, busy, chaos, ...;
    /// `delaybench scenario list`). Default: quick for `run`, sweep for `sweep`.
    #[arg(short = 's', long)]
    pub scenario: Option<String>,
    /// Comma-separated strategies, variants such as redis-zset+fallback, or `all` (every
    /// strategy, teaching variants left out). Default for `run`: those needing only the
    /// database (the others are listed as skipped); for `sweep`: `all`.
    #[arg(short = 'S', long)]
    pub strategies: Option<String>,
    /// Scenario fields changed for this run (recorded in its scenario.toml).
    #[command(flatten)]
    pub overrides: Overrides,
    #[command(flatten)]
    pub services: ServiceArgs,
    /// Hold a steady round trip between the services and the order service and canceller
    /// instances for the whole run, by the harness's proxy: loopback, same-zone
    /// (0.5 ms ± 0.05 ms) or cross-zone (2 ms ± 0.2 ms). Replaces the scenario's [network].
    #[arg(long, value_name = "PRESET")]
    pub network: Option<String>,
    /// Folder that receives <run-id>/.
    #[arg(short = 'o', long, default_value = "results")]
    pub out: PathBuf,
}

/// Scenario fields set on the command line, over the scenario's own: each
/// flag is `--set <field>=<value>` under a short name, and all are read and
/// checked as the scenario file is ([`crate::scenario::overrides`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// Orders per second (the scenario's `rate`).
    #[arg(short = 'r', long, value_name = "ORDERS_PER_S")]
    pub rate: Option<String>,
    /// The measured arrival window, e.g. 30s (`duration`).
    #[arg(short = 'd', long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Arrivals before the measured window, e.g. 5s (`warmup`).
    #[arg(short = 'w', long, value_name = "DURATION")]
    pub warmup: Option<String>,
    /// The generator's seed (`seed`).
    #[arg(long, value_name = "N")]
    pub seed: Option<String>,
    /// Canceller instances per strategy (`instances`).
    #[arg(short = 'i', long, value_name = "N")]
    pub instances: Option<String>,
    /// Any scenario field, as its path in the file: `payments.pay-ratio=0.8`,
    /// `timeouts[0].after=5s`, `strategies.db-scan.interval=200ms`; repeatable, applied
    /// after the flags above, in order.
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    pub sets: Vec<Set>,
}

impl Overrides {
    /// Every change, the named flags first, as `--set`s.
    pub fn sets(&self) -> Vec<Set> {
        let named = [
            ("rate", &self.rate),
            ("duration", &self.duration),
            ("warmup", &self.warmup),
            ("seed", &self.seed),
            ("instances", &self.instances),
        ];
        named
            .into_iter()
            .filter_map(|(key, value)| {
                value.as_ref().map(|v| Set {
                    key: key.into(),
                    value: v.clone(),
                })
            })
            .chain(self.sets.iter().cloned())
            .collect()
    }
}

impl CommonArgs {
    /// The scenario named by `--scenario` (or `default_preset`), with the
    /// service URLs of the flags and environment put in, and where it came from.
    /// Every error is a [`crate::exit::Usage`] one: what was asked is wrong.
    pub fn scenario(&self, default_preset: &str) -> Result<(Scenario, String)> {
        self.resolve_scenario(default_preset)
            .map_err(crate::exit::usage)
    }

    fn resolve_scenario(&self, default_preset: &str) -> Result<(Scenario, String)> {
        let (scenario, origin) = Scenario::load(self.scenario.as_deref(), default_preset)?;
        let sets = self.overrides.sets();
        let mut scenario = scenario.with_sets(&sets)?;
        let origin = if sets.is_empty() {
            origin
        } else {
            // A value may be a URL with its password (a broker's).
            let listed: Vec<String> = sets
                .iter()
                .map(|s| strategies::redact::text(&format!("--set {s}")))
                .collect();
            format!("{origin} with {}", listed.join(" "))
        };
        restore_default_broker(&mut scenario);
        self.services.apply(&mut scenario.strategies);
        if let Some(preset) = &self.network {
            scenario.network = crate::scenario::Network {
                preset: Some(preset.clone()),
                ..Default::default()
            };
            scenario.network.validate().map_err(|e| {
                anyhow::anyhow!(
                    "--network {preset}: {e}; a scenario's [network] sets round trips of its own"
                )
            })?;
        }
        scenario.validate()?;
        Ok((scenario, origin))
    }

    /// Whether `--strategies` chose what runs (rather than the default).
    pub fn strategies_named(&self) -> bool {
        self.strategies.is_some()
    }

    /// The strategies `--strategies` names (see [`select`]), refused when
    /// one that will run needs a service whose URL in `scenario` lost its
    /// password to a run folder's redaction (see [`refuse_removed_passwords`]).
    /// With `skips_unnamed`, `run`'s default, a strategy [`skip_reason`]
    /// skips does not run, so its URL is not asked for.
    pub fn selected_for(&self, scenario: &Scenario, skips_unnamed: bool) -> Result<Vec<Variant>> {
        let variants = select(self.strategies.as_deref()).map_err(crate::exit::usage)?;
        let running: Vec<Variant> = variants
            .iter()
            .copied()
            .filter(|v| !skips_unnamed || skip_reason(*v, self.strategies_named()).is_none())
            .collect();
        refuse_removed_passwords(scenario, &running).map_err(crate::exit::usage)?;
        Ok(variants)
    }
}

/// Gives a run folder's redacted default broker URL its published
/// password back ([`crate::scenario::is_redacted_default_broker`]).
fn restore_default_broker(scenario: &mut Scenario) {
    let url = &mut scenario.strategies.rabbit.url;
    if crate::scenario::is_redacted_default_broker(url) {
        *url = strategies::StrategyOptions::default().rabbit.url;
    }
}

/// A run folder's `scenario.toml` holds its service URLs with the password
/// replaced by `***`. Run again as it is, a strategy would try to log in
/// with `***` and be skipped on an authentication error that names no
/// cause; this names the field and the flag that puts the URL back.
fn refuse_removed_passwords(scenario: &Scenario, variants: &[Variant]) -> Result<()> {
    let options = &scenario.strategies;
    for service in [Service::RabbitMq, Service::Redis] {
        let (url, field, flag, env) = match service {
            Service::RabbitMq => (
                &options.rabbit.url,
                "strategies.rabbit",
                "--amqp",
                "DELAYBENCH_AMQP",
            ),
            Service::Redis => (
                &options.redis_zset.url,
                "strategies.redis-zset",
                "--redis",
                "DELAYBENCH_REDIS",
            ),
        };
        let needing: Vec<&str> = variants
            .iter()
            .filter(|v| v.info.requires.contains(&service))
            .map(|v| v.name())
            .collect();
        if needing.is_empty() || !strategies::redact::was_redacted(url) {
            continue;
        }
        anyhow::bail!(
            "field `{field}` url {url} has its password removed (***), as a run folder's \
             scenario.toml keeps it, and {} need(s) {}: give the URL again with {flag} URL or \
             the environment variable {env}",
            needing.join(", "),
            service.name()
        );
    }
    Ok(())
}

/// What `delaybench run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunArgs {
    pub common: CommonArgs,
    /// Run each strategy this many times, interleaved (A B C A B C).
    pub repeat: u32,
    /// Every column in the terminal table.
    pub wide: bool,
}

/// Parses a `--strategies` list; every strategy (teaching variants and the
/// baseline left out) when absent or `all`. Each variant once, in the
/// order named.
pub fn select(list: Option<&str>) -> Result<Vec<Variant>> {
    let every_strategy = || {
        STRATEGIES
            .iter()
            .filter(|s| s.role == Role::Strategy)
            .map(Variant::plain)
            .collect()
    };
    let Some(list) = list else {
        return Ok(every_strategy());
    };
    if list.trim() == "all" {
        return Ok(every_strategy());
    }
    let mut variants = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let variant = Variant::parse(name)?;
        if !variants.contains(&variant) {
            variants.push(variant);
        }
    }
    anyhow::ensure!(
        !variants.is_empty(),
        "--strategies is empty; known strategies: {}",
        STRATEGIES
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(variants)
}

/// Why `variant` will not run, if it will not. With no `--strategies` the
/// embedded default runs only what needs no service besides the database.
pub fn skip_reason(variant: Variant, explicitly_selected: bool) -> Option<String> {
    let requires = variant.info.requires;
    if explicitly_selected || requires.is_empty() {
        return None;
    }
    let needs: Vec<&str> = requires.iter().map(|s| s.name()).collect();
    Some(format!(
        "needs {}, which the embedded default does not use; run it with \
         `delaybench run --strategies {variant}` once {} is up (`docker compose up -d --wait`)",
        needs.join(" and "),
        needs.join(" and ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_strategy_lists_known_ones() {
        let msg = format!("{:#}", select(Some("db-scan,nope")).unwrap_err());
        assert!(
            msg.contains("nope") && msg.contains("db-scan") && msg.contains("redis-zset"),
            "{msg}"
        );
        let once = select(Some("db-scan, db-scan")).unwrap();
        assert_eq!(once.len(), 1);
        assert_eq!(once[0].name(), "db-scan");
    }

    #[test]
    fn a_removed_password_is_refused_only_where_a_strategy_needs_it() {
        let (mut scenario, _) = Scenario::load(Some("quick"), "quick").unwrap();
        scenario.strategies.rabbit.url = "amqp://u:***@broker:5672/%2f".into();
        let db_only = select(Some("db-scan,db-timer")).unwrap();
        refuse_removed_passwords(&scenario, &db_only).unwrap();
        let rabbit = select(Some("db-scan,rabbit-ttl+outbox")).unwrap();
        let msg = format!(
            "{:#}",
            refuse_removed_passwords(&scenario, &rabbit).unwrap_err()
        );
        for part in [
            "strategies.rabbit",
            "rabbit-ttl+outbox",
            "--amqp",
            "DELAYBENCH_AMQP",
        ] {
            assert!(msg.contains(part), "{part} missing: {msg}");
        }
        assert!(!msg.contains("db-scan"), "{msg}");
        // The flag puts a URL back, and the run may go on.
        let flags = ServiceArgs {
            amqp: Some("amqp://u:secret@broker:5672/%2f".into()),
            ..ServiceArgs::default()
        };
        flags.apply(&mut scenario.strategies);
        refuse_removed_passwords(&scenario, &rabbit).unwrap();
        scenario.strategies.redis_zset.url = "redis://:***@cache:6379".into();
        let msg = format!(
            "{:#}",
            refuse_removed_passwords(&scenario, &select(Some("redis-zset")).unwrap()).unwrap_err()
        );
        assert!(
            msg.contains("--redis") && msg.contains("strategies.redis-zset"),
            "{msg}"
        );
        // `run` with no --strategies skips what needs a service, so a folder
        // whose broker URL lost its password still runs the others.
        let unnamed = CommonArgs {
            scenario: None,
            strategies: None,
            overrides: Overrides::default(),
            services: ServiceArgs::default(),
            network: None,
            out: PathBuf::from("results"),
        };
        assert!(unnamed.selected_for(&scenario, true).is_ok());
        assert!(unnamed.selected_for(&scenario, false).is_err());
    }

    #[test]
    fn network_flag_replaces_the_scenarios_network() {
        let args = |network: &str| CommonArgs {
            scenario: None,
            strategies: None,
            overrides: Overrides::default(),
            services: ServiceArgs::default(),
            network: Some(network.into()),
            out: PathBuf::from("results"),
        };
        let (scenario, _) = args("cross-zone").scenario("quick").unwrap();
        let rtt = scenario.network.link(crate::faults::Target::Redis).rtt;
        assert_eq!(rtt, std::time::Duration::from_millis(2));
        let e = args("mars").scenario("quick").unwrap_err().to_string();
        assert!(
            e.contains("--network mars") && e.contains("same-zone"),
            "{e}"
        );
    }

    #[test]
    fn a_run_folders_redacted_default_broker_reads_back_as_the_default() {
        let default = strategies::StrategyOptions::default().rabbit.url;
        let (mut scenario, _) = Scenario::load(Some("quick"), "quick").unwrap();
        scenario.strategies.rabbit.url = strategies::redact::url(&default);
        assert!(!scenario.strategies.rabbit.url.contains("guest:guest"));
        restore_default_broker(&mut scenario);
        assert_eq!(scenario.strategies.rabbit.url, default);
        // Any other redacted URL stays as it is, to be refused by name.
        scenario.strategies.rabbit.url = "amqp://guest:***@10.0.0.9:5672/%2f".into();
        restore_default_broker(&mut scenario);
        assert!(strategies::redact::was_redacted(
            &scenario.strategies.rabbit.url
        ));
    }
}
