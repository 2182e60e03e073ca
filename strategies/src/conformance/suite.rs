//! Which checks apply to a strategy, derived from its [`Capabilities`], and
//! the runner that reports each as passed, failed or not applicable.
//!
//! | capability | triggers |
//! | --- | --- |
//! | (always) | `capabilities_are_coherent`, `fires_after_deadline_never_before`, `paid_order_never_cancelled`, `duplicates_release_once`, `long_delay_does_not_hold_back_short_ones` |
//! | `arbitrary_delay` | `undeclared_delays_on_time` |
//! | `multi_instance_safe` | `several_instances_stay_correct` (correct *and* splitting the work) |
//! | `instance_owns_its_orders` false | `any_instance_cancels_any_order` |
//! | `durable_across_restart` | `kill_every_instance_then_restart` (no fallback) |
//! | `durable_across_restart` false, `needs_fallback` | `kill_every_instance_then_restart_with_fallback` |
//!
//! `requires` and `needs_fallback` are checked for coherence only
//! (`capabilities_are_coherent`); `notes` are not checked.

use super::checks;
use super::fixture::{CheckResult, Fixture};
use crate::canceller::Capabilities;
use crate::registry::Variant;
use std::time::{Duration, Instant};

/// One conformance check, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Check {
    CapabilitiesAreCoherent,
    FiresAfterDeadlineNeverBefore,
    PaidOrderNeverCancelled,
    DuplicatesReleaseOnce,
    LongDelayDoesNotHoldBackShortOnes,
    UndeclaredDelaysOnTime,
    SeveralInstancesStayCorrect,
    AnyInstanceCancelsAnyOrder,
    KillEveryInstanceThenRestart,
    KillEveryInstanceThenRestartWithFallback,
}

impl Check {
    /// Every check, in the order [`run_all`] runs them (cheapest first).
    pub const ALL: [Check; 10] = [
        Check::CapabilitiesAreCoherent,
        Check::FiresAfterDeadlineNeverBefore,
        Check::PaidOrderNeverCancelled,
        Check::DuplicatesReleaseOnce,
        Check::LongDelayDoesNotHoldBackShortOnes,
        Check::UndeclaredDelaysOnTime,
        Check::SeveralInstancesStayCorrect,
        Check::AnyInstanceCancelsAnyOrder,
        Check::KillEveryInstanceThenRestart,
        Check::KillEveryInstanceThenRestartWithFallback,
    ];

    /// The snake_case name, which is also the check function's name.
    pub fn name(self) -> &'static str {
        match self {
            Check::CapabilitiesAreCoherent => "capabilities_are_coherent",
            Check::FiresAfterDeadlineNeverBefore => "fires_after_deadline_never_before",
            Check::PaidOrderNeverCancelled => "paid_order_never_cancelled",
            Check::DuplicatesReleaseOnce => "duplicates_release_once",
            Check::LongDelayDoesNotHoldBackShortOnes => "long_delay_does_not_hold_back_short_ones",
            Check::UndeclaredDelaysOnTime => "undeclared_delays_on_time",
            Check::SeveralInstancesStayCorrect => "several_instances_stay_correct",
            Check::AnyInstanceCancelsAnyOrder => "any_instance_cancels_any_order",
            Check::KillEveryInstanceThenRestart => "kill_every_instance_then_restart",
            Check::KillEveryInstanceThenRestartWithFallback => {
                "kill_every_instance_then_restart_with_fallback"
            }
        }
    }

    /// The check called `name`; panics on an unknown name (a typo in a test).
    pub fn named(name: &str) -> Check {
        Check::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .unwrap_or_else(|| panic!("no conformance check is called `{name}`"))
    }

    /// `Ok` when the check applies to a strategy declaring `caps`; `Err`
    /// names the capability that rules it out.
    pub fn applies_to(self, caps: &Capabilities) -> Result<(), String> {
        let need = |declared: bool, why: &str| {
            if declared {
                Ok(())
            } else {
                Err(why.to_string())
            }
        };
        match self {
            Check::CapabilitiesAreCoherent
            | Check::FiresAfterDeadlineNeverBefore
            | Check::PaidOrderNeverCancelled
            | Check::DuplicatesReleaseOnce
            | Check::LongDelayDoesNotHoldBackShortOnes => Ok(()),
            Check::UndeclaredDelaysOnTime => need(caps.arbitrary_delay, "arbitrary_delay is false"),
            Check::SeveralInstancesStayCorrect => {
                need(caps.multi_instance_safe, "multi_instance_safe is false")
            }
            Check::AnyInstanceCancelsAnyOrder => need(
                !caps.instance_owns_its_orders,
                "instance_owns_its_orders is true",
            ),
            Check::KillEveryInstanceThenRestart => need(
                caps.durable_across_restart,
                "durable_across_restart is false",
            ),
            Check::KillEveryInstanceThenRestartWithFallback => {
                need(
                    !caps.durable_across_restart,
                    "durable_across_restart is true (checked without a fallback)",
                )?;
                need(caps.needs_fallback, "needs_fallback is false")
            }
        }
    }

    /// Runs the check on `f` whether or not it applies (tests use this to
    /// show what a capability declared false would cost).
    pub async fn run_unconditionally(self, f: &Fixture) -> CheckResult {
        match self {
            Check::CapabilitiesAreCoherent => {
                capabilities_are_coherent(f.variant(), &f.capabilities().await)
            }
            Check::FiresAfterDeadlineNeverBefore => {
                checks::fires_after_deadline_never_before(f).await
            }
            Check::PaidOrderNeverCancelled => checks::paid_order_never_cancelled(f).await,
            Check::DuplicatesReleaseOnce => checks::duplicates_release_once(f).await,
            Check::LongDelayDoesNotHoldBackShortOnes => {
                checks::long_delay_does_not_hold_back_short_ones(f).await
            }
            Check::UndeclaredDelaysOnTime => checks::undeclared_delays_on_time(f).await,
            Check::SeveralInstancesStayCorrect => checks::several_instances_stay_correct(f).await,
            Check::AnyInstanceCancelsAnyOrder => checks::any_instance_cancels_any_order(f).await,
            Check::KillEveryInstanceThenRestart => {
                checks::kill_every_instance_then_restart(f).await
            }
            Check::KillEveryInstanceThenRestartWithFallback => {
                checks::kill_every_instance_then_restart_with_fallback(f).await
            }
        }
    }
}

/// What happened to one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckStatus {
    Passed,
    /// What the check saw.
    Failed(String),
    /// The capability that rules the check out.
    NotApplicable(String),
}

/// One check's result for one strategy on one database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutcome {
    pub check: Check,
    pub status: CheckStatus,
    pub elapsed: Duration,
}

impl CheckOutcome {
    pub fn failed(&self) -> bool {
        matches!(self.status, CheckStatus::Failed(_))
    }

    /// Panics with what the check saw unless it passed or did not apply;
    /// prints `not applicable: <capability>` for the latter.
    pub fn assert_passed(&self) {
        match &self.status {
            CheckStatus::Passed => {}
            CheckStatus::NotApplicable(why) => {
                println!("{}: not applicable: {why}", self.check.name())
            }
            CheckStatus::Failed(what) => panic!("{} failed: {what}", self.check.name()),
        }
    }
}

impl std::fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.status {
            CheckStatus::Passed => write!(f, "{}: passed ({:?})", self.check.name(), self.elapsed),
            CheckStatus::Failed(what) => write!(f, "{}: FAILED: {what}", self.check.name()),
            CheckStatus::NotApplicable(why) => {
                write!(f, "{}: not applicable: {why}", self.check.name())
            }
        }
    }
}

/// Every check with whether it applies to `caps` (`Err`: why not).
pub fn checks_for(caps: &Capabilities) -> Vec<(Check, Result<(), String>)> {
    Check::ALL
        .into_iter()
        .map(|c| (c, c.applies_to(caps)))
        .collect()
}

/// Runs `check` on `f` if the strategy's declared capabilities say it
/// applies; otherwise reports it not applicable, naming the capability.
pub async fn run_check(f: &Fixture, check: Check) -> CheckOutcome {
    let started = Instant::now();
    let status = match check.applies_to(&f.capabilities().await) {
        Err(why) => CheckStatus::NotApplicable(why),
        Ok(()) => match check.run_unconditionally(f).await {
            Ok(()) => CheckStatus::Passed,
            Err(what) => CheckStatus::Failed(what),
        },
    };
    CheckOutcome {
        check,
        status,
        elapsed: started.elapsed(),
    }
}

/// Runs every check in [`Check::ALL`] for `f`'s strategy, one after another,
/// each on a fresh sibling namespace; checks that do not apply are reported
/// as such. Never panics on a check's failure: the outcomes say.
pub async fn run_all(f: &Fixture) -> Vec<CheckOutcome> {
    let mut out = Vec::new();
    for check in Check::ALL {
        let fresh = f.sibling().await;
        out.push(run_check(&fresh, check).await);
        fresh.cleanup().await;
    }
    out
}

/// The declarations agree with each other and with the registry:
/// - work lost when every instance dies (not durable) must be covered by a
///   fallback (`needs_fallback`);
/// - an instance that owns its orders leaves them waiting when it dies, so
///   it needs a fallback too;
/// - `requires` lists exactly the services the registry says the strategy
///   needs.
pub fn capabilities_are_coherent(variant: Variant, caps: &Capabilities) -> CheckResult {
    let strategy = variant.name();
    super::fixture::ensure!(
        caps.durable_across_restart || caps.needs_fallback,
        "{strategy}: declares neither durable_across_restart nor needs_fallback: work lost \
         when every instance dies would be covered by nothing"
    );
    super::fixture::ensure!(
        !caps.instance_owns_its_orders || caps.needs_fallback,
        "{strategy}: instances own their orders but needs_fallback is false: a dead \
         instance's orders would wait for it forever"
    );
    let info = variant.info;
    super::fixture::ensure!(
        caps.requires == info.requires,
        "{strategy}: capabilities require {:?} but the registry says {:?}",
        caps.requires,
        info.requires
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str) -> Variant {
        Variant::parse(name).unwrap()
    }

    fn caps() -> Capabilities {
        Capabilities {
            durable_across_restart: true,
            arbitrary_delay: true,
            needs_fallback: false,
            multi_instance_safe: true,
            instance_owns_its_orders: false,
            requires: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn not_applicable(caps: &Capabilities) -> Vec<(&'static str, String)> {
        checks_for(caps)
            .into_iter()
            .filter_map(|(c, a)| a.err().map(|why| (c.name(), why)))
            .collect()
    }

    #[test]
    fn names_round_trip() {
        for c in Check::ALL {
            assert_eq!(Check::named(c.name()), c);
        }
    }

    #[test]
    fn a_fully_capable_strategy_gets_every_check_but_the_fallback_restart() {
        assert_eq!(
            not_applicable(&caps()),
            [(
                "kill_every_instance_then_restart_with_fallback",
                "durable_across_restart is true (checked without a fallback)".to_string()
            )]
        );
    }

    #[test]
    fn each_capability_gates_its_checks() {
        let wheel = Capabilities {
            durable_across_restart: false,
            needs_fallback: true,
            multi_instance_safe: false,
            instance_owns_its_orders: true,
            arbitrary_delay: false,
            ..caps()
        };
        assert_eq!(
            not_applicable(&wheel),
            [
                (
                    "undeclared_delays_on_time",
                    "arbitrary_delay is false".into()
                ),
                (
                    "several_instances_stay_correct",
                    "multi_instance_safe is false".into()
                ),
                (
                    "any_instance_cancels_any_order",
                    "instance_owns_its_orders is true".into()
                ),
                (
                    "kill_every_instance_then_restart",
                    "durable_across_restart is false".into()
                ),
            ]
        );
    }

    #[test]
    fn incoherent_declarations_fail() {
        let lossy = Capabilities {
            durable_across_restart: false,
            ..caps()
        };
        assert!(capabilities_are_coherent(v("db-scan"), &lossy).is_err());
        let owner = Capabilities {
            instance_owns_its_orders: true,
            ..caps()
        };
        assert!(capabilities_are_coherent(v("db-scan"), &owner).is_err());
        assert!(capabilities_are_coherent(v("db-scan"), &caps()).is_ok());
        let redis = Capabilities {
            requires: vec![crate::canceller::Service::Redis],
            ..caps()
        };
        assert!(capabilities_are_coherent(v("db-scan"), &redis).is_err());
        assert!(capabilities_are_coherent(v("redis-zset"), &redis).is_ok());
    }
}
