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
//!   makes a step hold;
//! - [`held_bytes`]: a backlog sweep's bytes per pending order, net of
//!   the same run's baseline, with the noise floor they are read against;
//! - [`schema`]: the version of `schema/*.schema.json` the files follow.

pub mod cpu;
pub mod held_bytes;
pub mod lateness;
pub mod records;
pub mod run_info;
pub mod schema;
pub mod summary;
pub mod sweep;

pub use records::{GeneratorHealth, HookRecord, WorkerEvent, WorkerEventKind, WorkerReport};
