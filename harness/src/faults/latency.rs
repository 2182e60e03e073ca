//! `kind = "latency"`: slow the link between the strategy's instances and
//! one backend, through the harness's TCP proxy.

use super::context::FaultContext;
use super::kind::{check_lasts, human, Kind};
use super::record::FaultRecord;
use super::target::Target;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Add `add` to the link to `target` for `for`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Latency {
    /// Which link of the strategy's instances.
    pub target: Target,
    /// How long it lasts.
    #[serde(rename = "for", with = "humantime_serde")]
    pub lasts: Duration,
    /// Added to every chunk forwarded in either direction.
    #[serde(with = "humantime_serde")]
    pub add: Duration,
}

impl Kind for Latency {
    const NEEDS: &'static [(&'static str, &'static str)] = &[
        ("target", "\"rabbitmq\" (or \"redis\", \"database\")"),
        ("for", "\"3s\""),
        ("add", "\"50ms\""),
    ];

    fn lasts(&self) -> Duration {
        self.lasts
    }

    fn link(&self) -> Option<Target> {
        Some(self.target)
    }

    fn check(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        check_lasts(self.lasts, field)?;
        if self.add.is_zero() || self.add > Duration::from_secs(60) {
            bail!(
                "{} is out of range; accepted values: 1ms to 60s",
                field("add")
            );
        }
        Ok(())
    }

    fn label(&self, at: &str) -> String {
        format!(
            "+{} latency to {} for {} at {at}",
            human(self.add),
            self.target.as_str(),
            human(self.lasts)
        )
    }

    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        let (add, lasts) = (self.add, self.lasts);
        let Some(link) = cx
            .on_link(self.target, lasts, record, |proxy| proxy.add_latency(add, lasts))
            .await
        else {
            return;
        };
        record.detail = Some(format!(
            "{} new connections meanwhile",
            link.after.connections - link.before.connections
        ));
    }
}
