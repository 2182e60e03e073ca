//! Which backend link a fault acts on: scenario configuration (a
//! `partition`'s or `latency`'s `target`, a `run-command`'s service),
//! which the proxy also uses to name itself.

use serde::{Deserialize, Serialize};

/// Which backend a proxy stands in front of: names the proxy in logs, stats
/// and the fault records, so a scenario can say which link to cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Rabbitmq,
    Redis,
    Database,
}

impl Target {
    /// The scenario's and the report's spelling, the same as serde's.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Rabbitmq => "rabbitmq",
            Target::Redis => "redis",
            Target::Database => "database",
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn target_names() -> anyhow::Result<()> {
        for (target, name) in [
            (Target::Rabbitmq, "rabbitmq"),
            (Target::Redis, "redis"),
            (Target::Database, "database"),
        ] {
            assert_eq!(target.as_str(), name);
            assert_eq!(serde_json::to_string(&target)?, format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<Target>(&format!("\"{name}\""))?,
                target
            );
        }
        Ok(())
    }
}
