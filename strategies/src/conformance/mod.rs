//! The conformance suite: plain async checks that every strategy must pass
//! on every real backend (PostgreSQL, MariaDB, SQLite, and the strategy's
//! broker). Each check builds on a fresh namespace, runs real instances of
//! the strategy, and judges with the same [`checker`](crate::checker) the
//! harness uses.
//!
//! Which checks apply is derived from the strategy's
//! [`Capabilities`](crate::canceller::Capabilities), opendal-style: see
//! [`Check`] and [`checks_for`]. A check that does not apply is reported as
//! `not applicable: <capability>`, never silently skipped. A check returns a
//! [`CheckResult`]: `Err` carries what it saw, so a test can assert that a
//! broken strategy (a teaching variant) fails, and [`CheckOutcome::assert_passed`]
//! makes the normal suite fail loudly.
//!
//! `tests/conformance.rs` runs every check for every strategy (one line per
//! strategy); `tests/conformance_teaching.rs` shows that the suite fails on
//! each teaching variant, naming the check that catches it.

mod checks;
mod fixture;
mod suite;

pub use checks::*;
pub use fixture::{start_instances, CheckResult, Fixture, Running, LATENESS_BOUND};
pub use suite::{checks_for, run_all, run_check, Check, CheckOutcome, CheckStatus};
