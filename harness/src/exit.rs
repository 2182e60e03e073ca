//! The exit status, by meaning, so a script can tell a wrong command from
//! a failed run from a broken invariant (README, "Exit status"):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done; every selected strategy ran, no anomaly, no regression |
//! | 1 | failed: a service unreachable, a strategy that failed, a file that cannot be written; `doctor` found a selected strategy that cannot run |
//! | 2 | usage: a flag, `--set` or scenario field that is wrong (clap's own code for a bad flag) |
//! | 3 | regression: `compare --fail-on-regression` found a figure worse beyond the spread |
//! | 4 | anomaly: an invariant broke (`run`, `sweep`), or `compare` found one the base had not |
//!
//! An anomaly outranks a failure and a regression: it is what the tool
//! exists to find, and a script that checks for it must never miss it
//! because something else went wrong too.

use std::process::ExitCode;

pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;
pub const REGRESSION: u8 = 3;
pub const ANOMALY: u8 = 4;

/// An error in what the user asked for: the command line, a `--set`, the
/// scenario. Its message is the inner error's.
#[derive(Debug)]
pub struct Usage(pub anyhow::Error);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Usage {}

/// Marks `e` as a usage error.
pub fn usage(e: anyhow::Error) -> anyhow::Error {
    anyhow::Error::new(Usage(e))
}

/// `compare --fail-on-regression` found figures worse beyond the spread:
/// the message lists them ([`crate::report::Regressed`] renders it).
#[derive(Debug)]
pub struct Regressed(pub String);

impl std::fmt::Display for Regressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Regressed {}

/// A run, sweep or comparison that is written but shows an anomaly: the
/// message says which strategies and where.
#[derive(Debug)]
pub struct Anomalous(pub String);

impl std::fmt::Display for Anomalous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Anomalous {}

/// What a written run or sweep found wrong: strategies that failed, and
/// anomalies.
#[derive(Debug, Default)]
pub struct Problems {
    pub failures: Vec<String>,
    pub anomalies: Vec<String>,
}

impl Problems {
    /// `Ok` when there is nothing; else the error naming everything, as an
    /// [`Anomalous`] one when an invariant broke. `what` is `run` or `sweep`.
    pub fn into_result(self, what: &str, dir: &std::path::Path) -> anyhow::Result<()> {
        let anomalous = !self.anomalies.is_empty();
        let all: Vec<String> = self.anomalies.into_iter().chain(self.failures).collect();
        if all.is_empty() {
            return Ok(());
        }
        let message = format!(
            "the {what} is written, but {}; results in {}",
            all.join("; "),
            dir.display()
        );
        Err(if anomalous {
            Anomalous(message).into()
        } else {
            anyhow::anyhow!(message)
        })
    }
}

/// The exit status an error ends the process with.
pub fn code_of(e: &anyhow::Error) -> ExitCode {
    let code = if e.downcast_ref::<Anomalous>().is_some() {
        ANOMALY
    } else if e.downcast_ref::<Regressed>().is_some() {
        REGRESSION
    } else if e.downcast_ref::<Usage>().is_some() {
        USAGE
    } else {
        FAILED
    };
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_code_through_added_context() {
        let code = |e: anyhow::Error| format!("{:?}", code_of(&e.context("while running")));
        assert_eq!(
            code(anyhow::anyhow!("x")),
            format!("{:?}", ExitCode::from(FAILED))
        );
        assert_eq!(
            code(usage(anyhow::anyhow!("bad"))),
            format!("{:?}", ExitCode::from(USAGE))
        );
        assert_eq!(
            code(Anomalous("db-scan has 1 anomalies".into()).into()),
            format!("{:?}", ExitCode::from(ANOMALY))
        );
        assert_eq!(
            code(Regressed("db-scan lateness p90 ms".into()).into()),
            format!("{:?}", ExitCode::from(REGRESSION))
        );
    }
}
