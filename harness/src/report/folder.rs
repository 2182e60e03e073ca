//! Reading a run folder: `run.json` and the summaries beside it; and
//! copying one for `report --out`.

use crate::model::run_info::RunInfo;
use crate::model::summary::Summary;
use anyhow::{ensure, Context, Result};
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

/// Copies run folder `from` into `to` for `report --out`: everything but
/// the reports it will rewrite and the strategies' SQLite databases.
pub fn copy_folder(from: &Path, to: &Path) -> Result<()> {
    ensure!(
        from.join("run.json").exists(),
        "{} is not a run folder (no run.json)",
        from.display()
    );
    ensure!(
        from.canonicalize()? != to.canonicalize().unwrap_or_else(|_| to.to_path_buf()),
        "--out is the run folder itself; leave it out to rewrite the folder's reports"
    );
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from)?.flatten() {
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        let (source, target) = (entry.path(), to.join(&name));
        if source.is_dir() {
            if name_str != "plots" {
                copy_folder_part(&source, &target)?;
            }
        } else if !matches!(name_str.as_ref(), "report.md" | "report.html") {
            std::fs::copy(&source, &target)
                .with_context(|| format!("copying {}", source.display()))?;
        }
    }
    Ok(())
}

/// A strategy's (or a step's) folder, without its SQLite files.
fn copy_folder_part(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from)?.flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if source.is_dir() {
            copy_folder_part(&source, &target)?;
        } else if !entry.file_name().to_string_lossy().contains(".sqlite") {
            std::fs::copy(&source, &target)
                .with_context(|| format!("copying {}", source.display()))?;
        }
    }
    Ok(())
}
