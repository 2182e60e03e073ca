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
    let (from_real, to_real) = (from.canonicalize()?, absolute(to));
    ensure!(
        from_real != to_real,
        "--out is the run folder itself; leave it out to rewrite the folder's reports"
    );
    // Inside it, the copy would copy itself, deeper each time.
    ensure!(
        !to_real.starts_with(&from_real),
        "--out {} is inside the run folder {}; give a folder outside it",
        to.display(),
        from.display()
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

/// `path` made absolute with its symbolic links resolved, for the part that
/// exists (a folder not made yet keeps the rest of its path as given).
fn absolute(path: &Path) -> std::path::PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = if parent.as_os_str().is_empty() {
                    std::path::PathBuf::from(".")
                } else {
                    parent.to_path_buf()
                };
            }
            _ => break,
        }
    }
    let mut full = existing.canonicalize().unwrap_or(existing);
    full.extend(rest.iter().rev());
    full
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
