//! `[hosts]`: canceller instances on other hosts, each started by a
//! `delaybench agent` listening there (`crate::agent`).

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// `[hosts]`: where the parts of the application run. Omitted: every
/// instance is a child process of the harness, on this host.
///
/// ```toml
/// [hosts]
/// agents = ["10.0.0.2:7710", "10.0.0.3:7710"]
/// generator = "agents"
/// ```
///
/// Instance `i` runs on agent `i % agents`. Every service URL must be
/// reachable from those hosts as written (no `localhost`), and the agents
/// share the secret in `DELAYBENCH_AGENT_TOKEN` with the harness. Each
/// agent's clock offset is measured and corrected (see `crate::agent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Hosts {
    /// `host:port` of each `delaybench agent`.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Where the generator (the order service making the orders and
    /// applying the payment callbacks) runs: `here` (default), or `agents`,
    /// one shard per agent, each making the orders whose id falls in its
    /// slot (`crate::shard`).
    #[serde(default, skip_serializing_if = "Generator::is_here")]
    pub generator: Generator,
}

/// Where `[hosts] generator` runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generator {
    /// In the harness.
    #[default]
    Here,
    /// A shard on each agent.
    Agents,
}

impl Generator {
    fn is_here(&self) -> bool {
        *self == Generator::Here
    }
}

impl Hosts {
    /// Whether everything runs on this host.
    pub fn is_local(&self) -> bool {
        self.agents.is_empty()
    }

    /// Whether the generator runs as shards on the agents.
    pub fn sharded_generator(&self) -> bool {
        self.generator == Generator::Agents && !self.agents.is_empty()
    }

    pub(super) fn validate(&self) -> Result<()> {
        if self.generator == Generator::Agents && self.agents.is_empty() {
            bail!(
                "field `hosts.generator` = \"agents\" needs `hosts.agents`: the hosts its shards \
                 run on"
            );
        }
        for (i, agent) in self.agents.iter().enumerate() {
            let port = agent
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<u16>()));
            match port {
                Some((host, Ok(port))) if !host.is_empty() && port != 0 => {}
                _ => bail!(
                    "field `hosts.agents[{i}]` = {agent:?} is not an agent's address; accepted \
                     values: `host:port` where a `delaybench agent --listen` runs, e.g. \
                     \"10.0.0.2:7710\""
                ),
            }
            if self.agents[..i].contains(agent) {
                bail!("field `hosts.agents[{i}]` = {agent:?} is listed twice");
            }
        }
        Ok(())
    }
}
