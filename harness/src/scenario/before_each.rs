//! `[before-each-strategy]`: a command run before each strategy's run.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

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

    pub(super) fn validate(&self) -> Result<()> {
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
