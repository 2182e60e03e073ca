//! Reading a run folder: `run.json` and the summaries beside it.

use crate::model::run_info::RunInfo;
use crate::model::summary::Summary;
use anyhow::Result;
use std::path::Path;

/// Reads `run.json` and the summaries in the order the run listed them.
pub fn load(run_dir: &Path) -> Result<(RunInfo, Vec<Summary>)> {
    let info = RunInfo::read(run_dir)?;
    let mut summaries = Vec::new();
    for name in &info.strategies {
        let dir = run_dir.join(name);
        if dir.join("summary.json").exists() {
            summaries.push(Summary::read(&dir)?);
        }
    }
    Ok((info, summaries))
}

/// The unmeasured twins of a run with `measure.unmeasured-twin`, in the
/// order of the strategies (none otherwise).
pub fn load_twins(run_dir: &Path, info: &RunInfo) -> Result<Vec<Summary>> {
    let mut twins = Vec::new();
    for name in &info.strategies {
        let dir = run_dir.join(crate::model::summary::twin_folder(name));
        if dir.join("summary.json").exists() {
            twins.push(Summary::read(&dir)?);
        }
    }
    Ok(twins)
}
