//! The run's data model: what the runner writes to `run.json` and
//! `<strategy>/summary.json` (with `lateness.hgrm`), and what the reports
//! read back. Nothing here drives a workload or talks to a service, so a
//! report rendered from the JSON alone needs nothing else: `report`
//! imports only this module, the scenario it embeds and the faults'
//! records (`crate::faults::FaultRecord`, kept beside the fault kinds
//! whose rules read them).
//!
//! - [`run_info`]: `run.json` (scenario, seed, commit, machine, versions);
//! - [`summary`]: one strategy's `summary.json`, its lateness statistics,
//!   spreads over repetitions and warnings;
//! - [`lateness`]: the distributions a run measures and their histograms;
//! - [`cpu`]: CPU used over a window, by the machine and by each service;
//! - [`records`]: what happened during a run: generator health, worker
//!   reports and worker events (a fault's record is beside the fault
//!   kinds, in `faults/record.rs`);
//! - [`sweep`]: `sweep.json`, the steps of a `delaybench sweep`, and what
//!   makes a step hold.

pub mod cpu;
pub mod lateness;
pub mod records;
pub mod run_info;
pub mod summary;
pub mod sweep;

pub use records::{GeneratorHealth, HookRecord, WorkerEvent, WorkerEventKind, WorkerReport};

/// The version of `schema/*.schema.json` that the `run.json`,
/// `summary.json` and `sweep.json` this build writes follow; each file
/// says it first, as `schema_version`. Raise it (and copy the schemas) when
/// a key outside checkers read changes meaning or goes away; adding keys
/// keeps it.
pub const SCHEMA_VERSION: u32 = 1;

/// `value` as pretty JSON with `"schema_version": SCHEMA_VERSION` first.
pub fn versioned_json<T: serde::Serialize>(value: &T) -> serde_json::Result<String> {
    #[derive(serde::Serialize)]
    struct Versioned<'a, T: serde::Serialize> {
        schema_version: u32,
        #[serde(flatten)]
        inner: &'a T,
    }
    serde_json::to_string_pretty(&Versioned {
        schema_version: SCHEMA_VERSION,
        inner: value,
    })
}
