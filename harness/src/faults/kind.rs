//! What every fault kind says and does: the [`Kind`] trait each kind's
//! configuration implements in its own file, with the checks several
//! kinds share.

use super::context::FaultContext;
use super::record::{FaultRecord, Span};
use super::role::InstanceTarget;
use super::target::Target;
use anyhow::{bail, Result};
use std::time::Duration;

/// One fault kind: its `[[faults]]` fields (the type itself, read with
/// serde), what it checks, how it reads, what it does, and how its record
/// is read. The defaults fit a fault known by its window (`window_ms`):
/// in effect over it, having acted if it has one.
pub(super) trait Kind {
    /// The fields it cannot do without, each with an example, for the
    /// message naming one that is missing.
    const NEEDS: &'static [(&'static str, &'static str)];

    /// The instance it is aimed at, a number or a role; `None`: it hits
    /// every instance.
    fn instance(&self) -> Option<InstanceTarget> {
        None
    }

    /// How long it lasts (`for`); zero for the instantaneous ones.
    fn lasts(&self) -> Duration {
        Duration::ZERO
    }

    /// The link it needs the harness's proxy in front of.
    fn link(&self) -> Option<Target> {
        None
    }

    /// Checks its values' ranges and how its fields go together;
    /// `field(name)` names a field in the message.
    fn check(&self, _field: &dyn Fn(&str) -> String) -> Result<()> {
        Ok(())
    }

    /// The fault in a few words, planned at `at`, e.g. `partition redis
    /// for 4s at 10s`.
    fn label(&self, at: &str) -> String;

    /// Removes passwords from its settings (what `run.json` keeps).
    fn redact(&mut self) {}

    /// Fills in the parts of its record known before it is injected.
    fn plan(&self, _record: &mut FaultRecord) {}

    /// Does it, now, to the run `cx` is about, recording what happened.
    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord);

    /// When it was in effect, as `record` tells; `None` if it never was.
    /// Missed cancels are put down to the faults in effect meanwhile.
    fn span(record: &FaultRecord) -> Option<Span> {
        record.window_ms.map(Span::of)
    }

    /// What the lateness-over-time figure shades for it: its span.
    fn band(record: &FaultRecord) -> Option<Span> {
        Self::span(record)
    }

    /// Whether it acted (a fault that does not apply, or that no
    /// strategy reached, is ruled out before).
    fn took_effect(record: &FaultRecord) -> bool {
        record.window_ms.is_some()
    }

    /// Its record in words, for the reports.
    fn describe(record: &FaultRecord) -> String {
        record.describe_window()
    }
}

/// Checks `for`: 1ms to 1h.
pub(super) fn check_lasts(lasts: Duration, field: &dyn Fn(&str) -> String) -> Result<()> {
    if lasts.is_zero() || lasts > Duration::from_secs(3600) {
        bail!(
            "{} is out of range; accepted values: 1ms to 1h",
            field("for")
        );
    }
    Ok(())
}

/// Checks `restart-after`: at most a day.
pub(super) fn check_restart_after(
    restart_after: Option<Duration>,
    field: &dyn Fn(&str) -> String,
) -> Result<()> {
    if restart_after.is_some_and(|d| d > Duration::from_secs(86_400)) {
        bail!(
            "{} is out of range; accepted values: 0s to 24h",
            field("restart-after")
        );
    }
    Ok(())
}

/// `d` as scenarios write it, e.g. `4s`.
pub(super) fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}
