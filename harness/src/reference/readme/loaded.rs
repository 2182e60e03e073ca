//! The reference set as the generated text reads it: the manifest and
//! every folder it names, loaded (a run's summaries and unmeasured twins,
//! or a sweep's result), and where the folders came from (one clean
//! release commit, or not).

use super::super::set::{short, Manifest};
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use crate::model::sweep::SweepResult;
use crate::report;
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folders the manifest at `dir` names whose `run.json` records a
/// commit with `-dirty` (`<folder> (commit <commit>)`), read from the
/// manifest and each `run.json` alone: the generated text cites every one
/// of them, and a folder from a dirty tree may not be cited.
pub(super) fn dirty_folders(dir: &Path) -> Result<Vec<String>> {
    let manifest = Manifest::read(dir)?;
    let mut dirty = Vec::new();
    for folder in manifest.entries.iter().filter_map(|e| e.folder.as_ref()) {
        let commit = RunInfo::read(&dir.join(folder))?.git_commit;
        if commit.ends_with("-dirty") {
            dirty.push(format!("{folder} (commit {commit})"));
        }
    }
    Ok(dirty)
}

/// The decision-record draft's file in the reference folder.
pub(super) const ADR_FILE: &str = "adr-draft.md";

/// One folder of the set, loaded.
pub(super) enum Loaded {
    Run {
        info: RunInfo,
        summaries: Vec<Summary>,
        twins: Vec<Summary>,
    },
    Sweep {
        info: RunInfo,
        result: SweepResult,
    },
}

impl Loaded {
    pub(super) fn info(&self) -> &RunInfo {
        match self {
            Loaded::Run { info, .. } | Loaded::Sweep { info, .. } => info,
        }
    }

    pub(super) fn summaries(&self) -> &[Summary] {
        match self {
            Loaded::Run { summaries, .. } => summaries,
            Loaded::Sweep { .. } => &[],
        }
    }
}

/// The reference set: its manifest and every folder it names.
pub(super) struct Set {
    pub(super) dir: PathBuf,
    pub(super) manifest: Manifest,
    loaded: BTreeMap<String, (String, Loaded)>,
}

impl Set {
    pub(super) fn load(dir: &Path) -> Result<Set> {
        let manifest = Manifest::read(dir)?;
        let mut loaded = BTreeMap::new();
        for e in &manifest.entries {
            let Some(folder) = &e.folder else { continue };
            let path = dir.join(folder);
            let l = if path.join("sweep.json").exists() {
                Loaded::Sweep {
                    info: RunInfo::read(&path)?,
                    result: SweepResult::read(&path)?,
                }
            } else {
                let (info, summaries) = report::load(&path)?;
                let twins = report::load_twins(&path, &info)?;
                Loaded::Run {
                    info,
                    summaries,
                    twins,
                }
            };
            loaded.insert(e.name.clone(), (folder.clone(), l));
        }
        Ok(Set {
            dir: dir.to_path_buf(),
            manifest,
            loaded,
        })
    }

    /// Where the folders come from, from their own `run.json`: `at commit
    /// X (release build, clean tree)` only when every one says so.
    pub(super) fn provenance(&self) -> String {
        let infos: Vec<&RunInfo> = self.loaded.values().map(|(_, l)| l.info()).collect();
        let mut commits: Vec<&str> = infos.iter().map(|i| i.git_commit.as_str()).collect();
        commits.sort_unstable();
        commits.dedup();
        let mut profiles: Vec<&str> = infos
            .iter()
            .map(|i| i.build_profile.as_deref().unwrap_or("unrecorded"))
            .collect();
        profiles.sort_unstable();
        profiles.dedup();
        let dirty = commits.iter().any(|c| c.ends_with("-dirty"));
        match (commits.as_slice(), profiles.as_slice()) {
            ([one], ["release"]) if !dirty => {
                format!("at commit `{}` (release build, clean tree)", short(one))
            }
            _ => format!(
                "**not from one clean release build**: commits {}; builds {}",
                commits
                    .iter()
                    .map(|c| format!(
                        "`{}`{}",
                        short(c),
                        if c.ends_with("-dirty") {
                            " (dirty)"
                        } else {
                            ""
                        }
                    ))
                    .collect::<Vec<_>>()
                    .join(", "),
                profiles.join(", ")
            ),
        }
    }

    pub(super) fn get(&self, name: &str) -> Option<&(String, Loaded)> {
        self.loaded.get(name)
    }

    pub(super) fn summary(&self, entry: &str, strategy: &str) -> Option<&Summary> {
        self.get(entry)?
            .1
            .summaries()
            .iter()
            .find(|s| s.strategy.name() == strategy && s.status == Status::Ok)
    }
}
