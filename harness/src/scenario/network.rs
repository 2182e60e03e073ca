//! `[network]`: a steady link between the application side (the order
//! service and every canceller instance) and each service, for the whole
//! run.

use crate::faults::Target;
use crate::proxy::{parse_bandwidth, Link};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The named profiles, `(name, round trip, jitter, what it stands for)`.
/// The jitter is a tenth of the round trip: our choice, not a measurement
/// of any provider.
pub const PRESETS: &[(&str, Duration, Duration, &str)] = &[
    (
        "loopback",
        Duration::ZERO,
        Duration::ZERO,
        "nothing added: the services' own loopback",
    ),
    (
        "same-zone",
        Duration::from_micros(500),
        Duration::from_micros(50),
        "application and services in one availability zone",
    ),
    (
        "cross-zone",
        Duration::from_millis(2),
        Duration::from_micros(200),
        "services in another zone of the same region",
    ),
];

/// `[network]`: every connection the order service and the canceller
/// instances make to a service goes through the harness's proxy (see
/// `crate::proxy`), which holds each chunk for half the round trip in
/// each direction; the checker and the harness's probes connect directly.
/// Faults act on the instances' links as before, the latency fault adding
/// to the steady round trip. A table of its own per service
/// (`[network.database]`, `[network.redis]`, `[network.rabbitmq]`) sets
/// that link apart from the rest. Omitted: loopback, no proxy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Network {
    /// `loopback`, `same-zone` (0.5 ms ± 0.05 ms) or `cross-zone` (2 ms ±
    /// 0.2 ms); the fields below change it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    // The three fields below are `LinkSpec`'s, spelled out again: serde's
    // `flatten` would turn `deny_unknown_fields` off, and a misspelt key
    // must name itself.
    /// Every link's round trip, e.g. `"0.5ms"`.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub rtt: Option<Duration>,
    /// Every link's jitter: the round trip varies uniformly within `rtt ± jitter`.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub jitter: Option<Duration>,
    /// Every link's rate in each direction, as tc writes it (`"1gbit"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<LinkSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<LinkSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rabbitmq: Option<LinkSpec>,
}

/// One link's fields, each changing what the preset (or the table above)
/// says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LinkSpec {
    /// The round trip added to every request/response, e.g. `"0.5ms"`.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub rtt: Option<Duration>,
    /// The round trip varies uniformly within `rtt ± jitter`.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub jitter: Option<Duration>,
    /// Each direction's rate as tc writes it (`"1gbit"`, `"100mbit"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<String>,
}

impl Network {
    /// Whether the scenario has no `[network]` at all.
    pub fn is_unset(&self) -> bool {
        *self == Network::default()
    }

    /// The link between the application side and `target`.
    pub fn link(&self, target: Target) -> Link {
        let mut link = self.preset_link();
        self.all().apply(&mut link);
        if let Some(spec) = self.service(target) {
            spec.apply(&mut link);
        }
        link
    }

    /// Whether any link adds anything.
    pub fn adds_anything(&self) -> bool {
        TARGETS.iter().any(|t| !self.link(*t).is_loopback())
    }

    /// `same-zone: database rtt 0.5 ms ± 0.05 ms, …`, or `loopback` when
    /// nothing is added.
    pub fn label(&self) -> String {
        if !self.adds_anything() {
            return "loopback".into();
        }
        let first = self.link(TARGETS[0]);
        let body = if TARGETS.iter().all(|t| self.link(*t) == first) {
            format!("every service {}", first.label())
        } else {
            TARGETS
                .iter()
                .map(|t| format!("{t} {}", self.link(*t).label()))
                .collect::<Vec<_>>()
                .join("; ")
        };
        match &self.preset {
            Some(p) => format!("{p}: {body}"),
            None => body,
        }
    }

    fn preset_link(&self) -> Link {
        let name = self.preset.as_deref().unwrap_or("loopback");
        PRESETS
            .iter()
            .find(|(n, ..)| *n == name)
            .map(|(_, rtt, jitter, _)| Link {
                rtt: *rtt,
                jitter: *jitter,
                bandwidth_bps: None,
            })
            .unwrap_or(Link::LOOPBACK)
    }

    /// The fields of `[network]` itself, for every link.
    fn all(&self) -> LinkSpec {
        LinkSpec {
            rtt: self.rtt,
            jitter: self.jitter,
            bandwidth: self.bandwidth.clone(),
        }
    }

    fn service(&self, target: Target) -> Option<&LinkSpec> {
        match target {
            Target::Database => self.database.as_ref(),
            Target::Redis => self.redis.as_ref(),
            Target::Rabbitmq => self.rabbitmq.as_ref(),
        }
    }

    /// Checks every field; the message names it and what is accepted.
    pub fn validate(&self) -> Result<()> {
        if let Some(p) = &self.preset {
            if !PRESETS.iter().any(|(n, ..)| n == p) {
                bail!(
                    "field `network.preset` = {p:?} is not a preset; accepted values: {}",
                    PRESETS
                        .iter()
                        .map(|(n, ..)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        self.all().validate("network")?;
        for target in TARGETS {
            if let Some(spec) = self.service(target) {
                spec.validate(&format!("network.{target}"))?;
            }
            let link = self.link(target);
            if link.jitter > link.rtt {
                bail!(
                    "field `network.jitter` (or `network.{target}.jitter`) = {:?} is above the \
                     round trip {:?}; accepted values: 0s up to `rtt`",
                    link.jitter,
                    link.rtt
                );
            }
        }
        Ok(())
    }
}

/// The links `[network]` can set, in the order reports list them.
pub const TARGETS: [Target; 3] = [Target::Database, Target::Redis, Target::Rabbitmq];

impl LinkSpec {
    fn apply(&self, link: &mut Link) {
        if let Some(rtt) = self.rtt {
            link.rtt = rtt;
        }
        if let Some(jitter) = self.jitter {
            link.jitter = jitter;
        }
        if let Some(text) = &self.bandwidth {
            // Checked by `validate` before any link is asked for.
            link.bandwidth_bps = parse_bandwidth(text).ok();
        }
    }

    fn validate(&self, table: &str) -> Result<()> {
        let ten_s = Duration::from_secs(10);
        for (field, value) in [("rtt", self.rtt), ("jitter", self.jitter)] {
            if let Some(v) = value.filter(|v| *v > ten_s) {
                bail!(
                    "field `{table}.{field}` = {v:?} is out of range; accepted values: 0s to 10s"
                );
            }
        }
        if let Some(text) = &self.bandwidth {
            if let Err(e) = parse_bandwidth(text) {
                bail!("field `{table}.bandwidth`: {e}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Network> {
        let network: Network = toml::from_str(text)?;
        network.validate()?;
        Ok(network)
    }

    #[test]
    fn presets_and_overrides() -> Result<()> {
        let none = Network::default();
        assert!(none.is_unset() && !none.adds_anything());
        assert_eq!(none.label(), "loopback");

        let same = parse("preset = \"same-zone\"")?;
        assert_eq!(same.link(Target::Redis).rtt, Duration::from_micros(500));
        assert_eq!(
            same.label(),
            "same-zone: every service rtt 0.5 ms ± 0.05 ms"
        );

        let mixed = parse(
            "preset = \"cross-zone\"\nbandwidth = \"1gbit\"\n[database]\nrtt = \"1ms\"\njitter = \"0s\"",
        )?;
        assert_eq!(
            mixed.link(Target::Database),
            Link {
                rtt: Duration::from_millis(1),
                jitter: Duration::ZERO,
                bandwidth_bps: Some(1_000_000_000)
            }
        );
        assert_eq!(mixed.link(Target::Rabbitmq).rtt, Duration::from_millis(2));
        assert_eq!(
            mixed.label(),
            "cross-zone: database rtt 1 ms, 1 Gbit/s; redis rtt 2 ms ± 0.2 ms, 1 Gbit/s; \
             rabbitmq rtt 2 ms ± 0.2 ms, 1 Gbit/s"
        );
        // A round trip of its own without a preset.
        let own = parse("rtt = \"3ms\"")?;
        assert_eq!(own.link(Target::Database).rtt, Duration::from_millis(3));
        assert_eq!(own.link(Target::Database).jitter, Duration::ZERO);
        Ok(())
    }

    /// A run folder keeps its scenario as TOML and in `run.json`: both must
    /// give the same links back.
    #[test]
    fn a_scenario_keeps_its_network_through_toml_and_json() -> Result<()> {
        let text = format!(
            "{}\n[network]\npreset = \"same-zone\"\nbandwidth = \"100mbit\"\n[network.redis]\nrtt = \"3ms\"\n",
            crate::scenario::QUICK
        );
        let scenario = crate::scenario::Scenario::parse(&text, "test")?;
        let again = crate::scenario::Scenario::parse(&scenario.to_toml()?, "again")?;
        assert_eq!(again.network, scenario.network);
        let json: crate::scenario::Scenario =
            serde_json::from_str(&serde_json::to_string(&scenario)?)?;
        assert_eq!(json.network, scenario.network);
        assert_eq!(
            json.network.link(Target::Redis).rtt,
            Duration::from_millis(3)
        );
        // Without a [network], none is written.
        let quick = crate::scenario::Scenario::parse(crate::scenario::QUICK, "quick")?;
        assert!(!quick.to_toml()?.contains("network"));
        Ok(())
    }

    #[test]
    fn errors_name_the_field() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert!(err("preset = \"moon\"").contains("`network.preset` = \"moon\""));
        assert!(err("rtt = \"11s\"").contains("`network.rtt`"));
        assert!(err("[redis]\nbandwidth = \"fast\"").contains("`network.redis.bandwidth`"));
        assert!(err("rtt = \"1ms\"\njitter = \"2ms\"").contains("above the round trip"));
        assert!(err("latency = \"1ms\"").contains("latency"));
    }
}
