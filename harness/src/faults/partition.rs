//! `kind = "partition"`: cut the link between the strategy's instances and
//! one backend, through the harness's TCP proxy.

use super::context::{FaultContext, RECONNECT_WINDOW};
use super::kind::{check_lasts, human, Kind};
use super::record::FaultRecord;
use super::target::Target;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Cut the link between the strategy's instances and `target` for `for`:
/// open connections are dropped, new ones refused (each instance's
/// connections go through the harness's TCP proxy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Partition {
    /// Which link of the strategy's instances.
    pub target: Target,
    /// How long it lasts.
    #[serde(rename = "for", with = "humantime_serde")]
    pub lasts: Duration,
}

impl Kind for Partition {
    const NEEDS: &'static [(&'static str, &'static str)] = &[
        ("target", "\"rabbitmq\" (or \"redis\", \"database\")"),
        ("for", "\"3s\""),
    ];

    fn lasts(&self) -> Duration {
        self.lasts
    }

    fn link(&self) -> Option<Target> {
        Some(self.target)
    }

    fn check(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        check_lasts(self.lasts, field)
    }

    fn label(&self, at: &str) -> String {
        format!(
            "partition {} for {} at {at}",
            self.target.as_str(),
            human(self.lasts)
        )
    }

    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        let lasts = self.lasts;
        let Some(link) = cx
            .on_link(self.target, lasts, record, |proxy| proxy.partition(lasts))
            .await
        else {
            return;
        };
        record.detail = Some(format!(
            "{} open connections dropped, {} new ones refused; {} connections opened in the \
             {} s after it healed",
            link.after.dropped - link.before.dropped,
            link.after.refused - link.before.refused,
            link.reconnected,
            RECONNECT_WINDOW.as_secs()
        ));
    }
}
