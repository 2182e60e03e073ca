//! `delaybench reference`: the reference set, one command at one commit.
//!
//! It runs the [`MATRIX`](set::MATRIX) (quick, busy, probe-cost, mixed-timeouts, chaos,
//! the rate sweep, the 1M backlog and the 100k deadline storm; with `--clusters` the Redis and
//! RabbitMQ cluster presets too) into one folder, each entry as its own
//! `delaybench run` or `sweep` process, and keeps a manifest
//! (`reference.json`) of what ran where. When every entry is done it
//! removes the run folders the new set replaces, drafts the decision
//! record, and writes the READMEs' generated sections ([`readme`]), so
//! every published number comes from that one set.
//!
//! - It refuses a dirty tree (unless `--allow-dirty`) and a debug build
//!   (unless `--allow-debug`): every `run.json` then names the same clean
//!   commit and a release build.
//! - It resumes: run again at the same commit, it skips the entries done
//!   and repeats the one that was cut short (`--fresh` starts over).

pub mod readme;
mod set;

use set::{short, Entry, EntryStatus, Manifest, ManifestEntry, CLUSTERS, CLUSTERS_UP, MATRIX};

use crate::model::run_info;
use crate::service_args::ServiceArgs;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The reference set's database unless `--db` names another.
pub const DEFAULT_DB: &str = "postgres://root@127.0.0.1/test";

/// What `delaybench reference` was asked to do.
#[derive(Debug, Clone, clap::Args)]
pub struct ReferenceArgs {
    /// The reference folder; the READMEs' generated sections read it.
    #[arg(long, default_value = "results/reference")]
    pub out: PathBuf,
    /// The services of every entry (the database defaults to [`DEFAULT_DB`]).
    #[command(flatten)]
    pub services: ServiceArgs,
    /// Also run the Redis and RabbitMQ cluster presets, last, starting the
    /// local clusters first (`scripts/services.sh redis-cluster
    /// rabbitmq-cluster`, from the repository root).
    #[arg(long)]
    pub clusters: bool,
    /// Run although the work tree has uncommitted changes (the folders then
    /// name a `-dirty` commit, and the set is not a reference).
    #[arg(long)]
    pub allow_dirty: bool,
    /// Run although this is a debug build (for trying the command out).
    #[arg(long)]
    pub allow_debug: bool,
    /// Start over, even where a run at this commit was cut short, and
    /// replace an unfinished set of another commit (refused without it).
    #[arg(long)]
    pub fresh: bool,
    /// Run only these entries of the set (comma-separated names) this
    /// time: a set longer than one sitting is made in parts, in any order,
    /// each part resuming the same set. The READMEs are written once every
    /// entry is done.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// The README whose answer section is generated.
    #[arg(long, default_value = "README.md")]
    pub readme: PathBuf,
}

/// Runs the reference set (or resumes it) and writes what it feeds.
pub async fn reference(args: &ReferenceArgs) -> Result<()> {
    let commit = run_info::git_commit();
    if (commit.ends_with("-dirty") || commit == "unknown") && !args.allow_dirty {
        bail!(
            "the work tree is {} (commit {commit}): the reference set must come from one clean \
             commit. Commit or stash your changes (`git status` lists them), or pass \
             --allow-dirty to try the command out",
            if commit == "unknown" {
                "not a git checkout"
            } else {
                "dirty"
            }
        );
    }
    let built = run_info::build_commit();
    if !commit.starts_with(built) && !args.allow_dirty {
        bail!(
            "this binary was built from commit {} but the checkout is at {}: rebuild \
             (`cargo run --release -p delaybench -- reference` does), or pass --allow-dirty",
            short(built),
            short(&commit)
        );
    }
    let profile = run_info::build_profile();
    if profile != "release" && !args.allow_debug {
        bail!(
            "this is a {profile} build: reference numbers come from a release build \
             (`cargo run --release -p delaybench -- reference`), or pass --allow-debug to try \
             the command out"
        );
    }
    let matrix: Vec<&Entry> = MATRIX
        .iter()
        .chain(if args.clusters { CLUSTERS } else { &[] })
        .collect();
    if let Some(unknown) = args
        .only
        .iter()
        .find(|o| !MATRIX.iter().chain(CLUSTERS).any(|e| e.name == o.as_str()))
    {
        bail!(
            "--only {unknown}: no such entry; the entries are {}",
            MATRIX
                .iter()
                .chain(CLUSTERS)
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(cluster) = args
        .only
        .iter()
        .find(|o| CLUSTERS.iter().any(|e| e.name == o.as_str()))
        .filter(|_| !args.clusters)
    {
        bail!(
            "--only {cluster} is a cluster entry, which runs only with --clusters (that \
             starts the local clusters first): add --clusters"
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let db = args.services.database(DEFAULT_DB)?;
    let db_display = strategies::redact::url(db);
    let previous = Manifest::read(&args.out).ok();
    let wanted: Vec<&str> = matrix.iter().map(|e| e.name).collect();
    // Resumed only when it is the same set: the same commit, build,
    // database and entries, and not finished.
    let same_set = |m: &Manifest| {
        m.finished_at.is_none() && m.differs(&commit, profile, &db_display, &wanted).is_none()
    };
    // What a new set replaces: every folder the last manifest named (its
    // entries', what failed attempts left, and what it was replacing).
    let replaced: Vec<String> = previous
        .iter()
        .flat_map(|m| {
            m.replaces.iter().cloned().chain(
                m.entries
                    .iter()
                    .flat_map(|e| e.folder.iter().chain(&e.partial).cloned()),
            )
        })
        .collect();
    // An unfinished set is never replaced by accident: a part run from
    // another commit (or with other entries) would start a new set and
    // throw the measured entries away.
    if let Some((m, why)) = previous
        .as_ref()
        .filter(|m| {
            !args.fresh
                && m.finished_at.is_none()
                && m.entries.iter().any(|e| e.status == EntryStatus::Done)
        })
        .and_then(|m| Some((m, m.differs(&commit, profile, &db_display, &wanted)?)))
    {
        bail!(
            "{} holds an unfinished set ({}); this run {why}. Finish that set from its own \
             commit (`git worktree add <dir> {}` and run there), or pass --fresh to start a \
             new set that replaces it",
            args.out.display(),
            m.progress(),
            short(&m.commit)
        );
    }
    let mut manifest = match previous {
        Some(m) if !args.fresh && same_set(&m) => {
            eprintln!("delaybench reference: resuming the set of {}", m.progress());
            m
        }
        _ => Manifest {
            commit: commit.clone(),
            build_profile: profile.to_string(),
            database_url: db_display.clone(),
            started_at: chrono::Local::now().to_rfc3339(),
            finished_at: None,
            entries: matrix
                .iter()
                .map(|e| ManifestEntry {
                    name: e.name.to_string(),
                    what: e.what.to_string(),
                    command: e.args.iter().map(|a| a.to_string()).collect(),
                    folder: None,
                    partial: Vec::new(),
                    status: EntryStatus::Pending,
                    reason: None,
                })
                .collect(),
            replaces: replaced,
        },
    };
    manifest.write(&args.out)?;
    let total = manifest.entries.len();
    let mut clusters_started = false;
    for k in 0..total {
        let entry = manifest.entries[k].clone();
        if entry.status == EntryStatus::Done || !asked(&args.only, &entry.name) {
            continue;
        }
        // The clusters run only for their entries, so their idle nodes
        // share no core with the rest of the set.
        if CLUSTERS.iter().any(|c| c.name == entry.name) && !clusters_started {
            eprintln!("delaybench reference: starting the local clusters: {CLUSTERS_UP}");
            let status = tokio::process::Command::new("sh")
                .args(["-c", CLUSTERS_UP])
                .status()
                .await;
            if !status.as_ref().is_ok_and(|s| s.success()) {
                eprintln!(
                    "delaybench reference: `{CLUSTERS_UP}` failed ({status:?}); the cluster \
                     entries will fail naming their services"
                );
            }
            clusters_started = true;
        }
        // What an earlier, interrupted attempt left is not part of the set.
        for folder in entry.folder.iter().chain(&entry.partial) {
            let _ = std::fs::remove_dir_all(args.out.join(folder));
        }
        manifest.entries[k].partial.clear();
        let before = folders_in(&args.out);
        eprintln!(
            "\ndelaybench reference: entry {} of {total}: {} ({}): delaybench {}",
            k + 1,
            entry.name,
            entry.what,
            entry.command.join(" ")
        );
        manifest.entries[k].status = EntryStatus::Running;
        manifest.entries[k].folder = None;
        manifest.write(&args.out)?;
        let (folder, outcome) = run_entry(&entry.command, args, db).await;
        let e = &mut manifest.entries[k];
        e.partial = folders_in(&args.out)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        e.folder = folder.and_then(|f| {
            f.strip_prefix(&args.out)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        });
        match outcome {
            Ok(()) if e.folder.is_some() => {
                e.status = EntryStatus::Done;
                e.reason = None;
                e.partial.retain(|f| Some(f) != e.folder.as_ref());
            }
            Ok(()) => {
                e.status = EntryStatus::Failed;
                e.reason = Some("it printed no run folder".into());
            }
            Err(why) => {
                e.status = EntryStatus::Failed;
                e.reason = Some(why);
            }
        }
        let said = format!(
            "delaybench reference: {}: {}{}",
            e.name,
            match e.status {
                EntryStatus::Done => "done",
                _ => "FAILED",
            },
            e.reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        );
        manifest.write(&args.out)?;
        eprintln!("{said}");
    }
    match set_state(&manifest.entries, &args.only) {
        SetState::Failed(failed) => bail!(
            "the reference set is incomplete ({}); the older folders are kept. Run the same \
             command again to repeat what failed",
            failed.join("; ")
        ),
        SetState::Part(left) => {
            eprintln!(
                "delaybench reference: --only ran part of the set ({} of {total} entries done; \
                 left: {}): the older folders are kept and the READMEs are written once the \
                 same command without --only (or naming the rest) has finished it",
                total - left.len(),
                left.join(", ")
            );
            return Ok(());
        }
        SetState::Complete => {}
    }
    let removed = remove_replaced(&args.out, &manifest);
    if !removed.is_empty() {
        eprintln!(
            "delaybench reference: removed the folders the set replaces: {}",
            removed.join(", ")
        );
    }
    manifest.finished_at = Some(chrono::Local::now().to_rfc3339());
    manifest.write(&args.out)?;
    readme::write_all(&args.out, &args.readme)?;
    eprintln!(
        "delaybench reference: done; {} and {} are generated from it",
        args.out.join("README.md").display(),
        args.readme.display()
    );
    Ok(())
}

/// Whether `--only` (empty: every entry) asks for the entry `name`.
fn asked(only: &[String], name: &str) -> bool {
    only.is_empty() || only.iter().any(|o| o == name)
}

/// Where a set stands once the entries asked for have run.
#[derive(Debug, PartialEq)]
enum SetState {
    /// Every entry is done: the READMEs can be written.
    Complete,
    /// An entry asked for did not finish: each as `name: why`.
    Failed(Vec<String>),
    /// Every entry asked for is done, these others are not yet.
    Part(Vec<String>),
}

fn set_state(entries: &[ManifestEntry], only: &[String]) -> SetState {
    let undone = entries.iter().filter(|e| e.status != EntryStatus::Done);
    let failed: Vec<String> = undone
        .clone()
        .filter(|e| asked(only, &e.name))
        .map(|e| format!("{}: {}", e.name, e.reason.as_deref().unwrap_or("not run")))
        .collect();
    let left: Vec<String> = undone.map(|e| e.name.clone()).collect();
    if !failed.is_empty() {
        SetState::Failed(failed)
    } else if !left.is_empty() {
        SetState::Part(left)
    } else {
        SetState::Complete
    }
}

/// Runs one entry as its own `delaybench` process (so a crash of one
/// loses nothing of the others), echoing its output; returns the run
/// folder it printed and how it ended.
async fn run_entry(
    command: &[String],
    args: &ReferenceArgs,
    db: &str,
) -> (Option<PathBuf>, std::result::Result<(), String>) {
    // The same build for every entry, whatever is rebuilt meanwhile.
    let exe = match crate::child::own_binary() {
        Ok(exe) => exe,
        Err(e) => return (None, Err(format!("cannot find the delaybench binary: {e}"))),
    };
    let mut cmd = tokio::process::Command::new(exe);
    // run.json records `delaybench run ...`, not `/proc/self/exe run ...`.
    #[cfg(unix)]
    cmd.arg0(crate::child::PROCESS_NAME);
    cmd.args(command)
        .args(args.services.child_flags(db))
        .arg("--out")
        .arg(&args.out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return (None, Err(format!("cannot start delaybench: {e}"))),
    };
    let mut folder = None;
    if let Some(stdout) = child.stdout.take() {
        let mut reader = BufReader::new(stdout);
        let mut bytes = Vec::new();
        // Read to the end whatever the bytes are, so the child never
        // blocks on a full pipe.
        while matches!(reader.read_until(b'\n', &mut bytes).await, Ok(n) if n > 0) {
            let line = String::from_utf8_lossy(&bytes);
            let line = line.trim_end_matches('\n');
            match line.strip_prefix("DELAYBENCH_RUN_DIR=") {
                Some(dir) => folder = Some(PathBuf::from(dir)),
                None => println!("{line}"),
            }
            bytes.clear();
        }
    }
    let outcome = match child.wait().await {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("delaybench exited with {status}")),
        Err(e) => Err(format!("waiting for delaybench: {e}")),
    };
    (folder, outcome)
}

/// The folder names directly in `dir`.
fn folders_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Removes the folders of the set this one replaces (and what failed
/// attempts left), never one this set names. Returns their names.
fn remove_replaced(dir: &Path, manifest: &Manifest) -> Vec<String> {
    let kept: Vec<&str> = manifest
        .entries
        .iter()
        .filter_map(|e| e.folder.as_deref())
        .collect();
    let mut removed: Vec<String> = manifest
        .replaces
        .iter()
        .chain(manifest.entries.iter().flat_map(|e| &e.partial))
        .filter(|f| !kept.contains(&f.as_str()) && !f.contains('/') && !f.starts_with('.'))
        .filter(|f| std::fs::remove_dir_all(dir.join(f)).is_ok())
        .cloned()
        .collect();
    removed.sort();
    removed.dedup();
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, status: EntryStatus) -> ManifestEntry {
        ManifestEntry {
            name: name.into(),
            what: String::new(),
            command: Vec::new(),
            folder: None,
            partial: Vec::new(),
            status,
            reason: None,
        }
    }

    #[test]
    fn a_set_made_in_parts_is_complete_only_when_every_entry_is_done() {
        use EntryStatus::*;
        let only = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let set = [
            entry("quick", Done),
            entry("sweep", Pending),
            entry("storm", Done),
        ];
        // The part asked for is done, the sweep is left for another sitting.
        assert_eq!(
            set_state(&set, &only(&["storm"])),
            SetState::Part(vec!["sweep".into()])
        );
        // Asked for and not done: a failure, whatever else is left.
        assert_eq!(
            set_state(&set, &only(&["sweep"])),
            SetState::Failed(vec!["sweep: not run".into()])
        );
        assert_eq!(
            set_state(&set, &[]),
            SetState::Failed(vec!["sweep: not run".into()])
        );
        let done = [entry("quick", Done), entry("sweep", Done)];
        assert_eq!(set_state(&done, &only(&["sweep"])), SetState::Complete);
        assert_eq!(set_state(&done, &[]), SetState::Complete);
    }

    #[test]
    fn a_part_of_another_commit_or_entries_is_not_the_same_set() {
        let m = Manifest {
            commit: "3772c7a4e4".into(),
            build_profile: "release".into(),
            database_url: DEFAULT_DB.into(),
            started_at: "then".into(),
            finished_at: None,
            entries: vec![
                entry("quick", EntryStatus::Done),
                entry("sweep", EntryStatus::Pending),
            ],
            replaces: Vec::new(),
        };
        let wanted = ["quick", "sweep"];
        assert_eq!(
            m.differs("3772c7a4e4", "release", DEFAULT_DB, &wanted),
            None
        );
        let other = m
            .differs("313729a3aa", "release", DEFAULT_DB, &wanted)
            .unwrap();
        assert!(other.contains("313729a"), "{other}");
        assert!(m
            .differs("3772c7a4e4", "debug", DEFAULT_DB, &wanted)
            .is_some());
        assert!(m
            .differs("3772c7a4e4", "release", "postgres://x/y", &wanted)
            .is_some());
        let more = m
            .differs(
                "3772c7a4e4",
                "release",
                DEFAULT_DB,
                &["quick", "sweep", "redis-cluster"],
            )
            .unwrap();
        assert!(more.contains("--clusters"), "{more}");
        assert_eq!(m.progress(), "3772c7a (started then): 1 of 2 entries done");
    }

    /// The value after `flag` in an entry's arguments.
    fn value<'a>(entry: &'a Entry, flag: &str) -> Option<&'a str> {
        let k = entry.args.iter().position(|a| *a == flag)?;
        entry.args.get(k + 1).copied()
    }

    #[test]
    fn every_entry_names_a_preset_and_strategies_that_exist() {
        for entry in MATRIX.iter().chain(CLUSTERS) {
            if let Some(scenario) = value(entry, "--scenario") {
                assert!(
                    crate::presets::find(scenario).is_some(),
                    "{}: no preset {scenario}",
                    entry.name
                );
            }
            let list = value(entry, "--strategies").expect("every entry names its strategies");
            let names = crate::run::args::select(Some(list))
                .unwrap_or_else(|e| panic!("{}: {list}: {e:#}", entry.name));
            assert!(!names.is_empty(), "{}", entry.name);
        }
    }

    #[test]
    fn every_remedy_the_chaos_entry_runs_also_runs_without_faults() {
        // The decision record judges an option only from its own runs: a
        // remedy that ran only under faults would be "not measured" normally.
        let list = |name: &str| {
            let entry = MATRIX.iter().find(|e| e.name == name).expect("entry");
            value(entry, "--strategies")
                .expect("strategies")
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let busy = list("busy");
        let sweep = list("sweep");
        for remedy in list("chaos").iter().filter(|s| s.contains('+')) {
            assert!(busy.contains(remedy), "busy does not run {remedy}");
            if remedy.ends_with("+fallback") && !remedy.contains("+outbox") {
                assert!(sweep.contains(remedy), "the sweep does not run {remedy}");
            }
        }
    }
}
