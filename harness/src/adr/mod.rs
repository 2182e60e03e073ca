//! `delaybench adr`: a draft architecture decision record, in the MADR 4
//! form, from run folders (runs with and without faults, cluster runs,
//! rate and backlog sweeps) and a service-level objective set per
//! condition ([`sla`]).
//!
//! The draft is short: a shortlist (the best options that meet the SLA
//! and the best one that failed), the consequences of the choice, and the
//! limits of the evidence. Every run's figures and every term's verdict go
//! to an evidence file beside it (`<draft>-evidence.md`). Every number in
//! both is a link to the JSON file it comes from, titled with the key and
//! its raw value (a test checks them all). How options are judged:
//! [`judge`].

mod appendix;
mod draft;
mod evidence;
mod judge;
mod limits;
mod objective;
mod outcome;
mod reading;
mod separation;
mod sla;
mod study;
mod tradeoff;
mod words;

pub use objective::EXAMPLE_SLA;

use crate::model::run_info::RunInfo;
use anyhow::{Context, Result};
use evidence::Source;
use std::path::{Path, PathBuf};
use study::Study;

/// What `delaybench adr` was asked for.
#[derive(Debug, Clone)]
pub struct AdrArgs {
    pub dirs: Vec<PathBuf>,
    /// `--slo`: a file with the objective and the priority.
    pub slo: Option<PathBuf>,
    /// `--sla`: the objective's terms (over the file's).
    pub sla: Option<String>,
    /// `--prefer`: the priority among the options that meet it (over the
    /// file's).
    pub prefer: Option<String>,
    pub out: PathBuf,
}

/// The evidence file written beside the draft `out`: `adr.md` gets
/// `adr-evidence.md`.
pub fn evidence_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "adr".into());
    out.with_file_name(format!("{stem}-evidence.md"))
}

/// Writes the draft to `args.out` and its evidence beside it, and returns
/// the draft's text.
pub fn write(args: &AdrArgs) -> Result<String> {
    let (text, appendix) = render(args)?;
    let base = base_of(&args.out);
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let appendix_file = evidence_path(&args.out);
    std::fs::write(&args.out, &text).with_context(|| format!("writing {}", args.out.display()))?;
    std::fs::write(&appendix_file, appendix)
        .with_context(|| format!("writing {}", appendix_file.display()))?;
    Ok(text)
}

/// The draft and its evidence file as `write` would write them to
/// `args.out` (links relative to its folder), without writing.
pub fn render(args: &AdrArgs) -> Result<(String, String)> {
    let objective = objective::Objective::new(
        args.slo.as_deref(),
        args.sla.as_deref(),
        args.prefer.as_deref(),
    )?;
    let sources = load_sources(&args.dirs)?;
    let base = base_of(&args.out);
    let study = Study::new(&sources, &objective.sla)?;
    let appendix_file = evidence_path(&args.out);
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let text = draft::draft(&study, &objective, &base, &name_of(&appendix_file))?;
    let appendix = appendix::appendix(&study, &base, &name_of(&args.out))?;
    Ok((text, appendix))
}

/// What the run folders `dirs` cannot show, one line each, from their
/// `run.json` (the draft's "limits of this evidence").
pub fn limits_of(dirs: &[PathBuf]) -> Result<Vec<String>> {
    Ok(limits::limits(&load_sources(dirs)?))
}

/// Whether `adr` reads the run folder at `dir` (see
/// [`evidence::refusal`]). A folder it cannot read as a run is left to
/// `adr` to name.
pub fn reads(dir: &Path) -> bool {
    RunInfo::read(dir).map_or(true, |info| evidence::refusal(dir, &info).is_none())
}

fn load_sources(dirs: &[PathBuf]) -> Result<Vec<Source>> {
    let mut sources = dirs
        .iter()
        .map(|d| Source::load(d).with_context(|| format!("reading run folder {}", d.display())))
        .collect::<Result<Vec<_>>>()?;
    Source::label_all(&mut sources);
    Ok(sources)
}

/// The folder the draft's links are relative to.
fn base_of(out: &Path) -> PathBuf {
    out.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}
