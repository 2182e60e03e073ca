//! The published numbers are generated: README.md's generated sections,
//! results/reference/README.md and the draft decision record are what
//! `delaybench reference readme` renders from the committed reference set,
//! and a hand edit of any number in them fails here.

mod common;

use common::{delaybench, stderr};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn check(reference: &Path, readme: &Path) -> std::process::Output {
    delaybench(&[
        "reference",
        "--out",
        reference.to_str().unwrap(),
        "--readme",
        readme.to_str().unwrap(),
        "readme",
        "--check",
    ])
}

#[test]
fn the_committed_text_is_what_the_reference_set_gives() {
    let root = root();
    let o = check(&root.join("results/reference"), &root.join("README.md"));
    assert!(
        o.status.success(),
        "regenerate with `cargo run --release -p delaybench -- reference readme`:\n{}",
        stderr(&o)
    );
}

/// Copies the reference set's text files (the JSON and Markdown, not the
/// plots) and README.md into a scratch folder.
fn scratch_copy() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = root();
    let scratch = tempfile::tempdir().unwrap();
    let to = scratch.path().join("results/reference");
    copy_text(&root.join("results/reference"), &to);
    let readme = scratch.path().join("README.md");
    std::fs::copy(root.join("README.md"), &readme).unwrap();
    (scratch, to, readme)
}

fn copy_text(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            if entry.file_name() != "plots" {
                copy_text(&path, &target);
            }
        } else if path
            .extension()
            // html: the index page is generated too, and links the reports
            // each folder has.
            .is_some_and(|e| matches!(e.to_str(), Some("json" | "md" | "hgrm" | "toml" | "html")))
        {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// Changes the first digit after `after` in `file` (0 becomes 1, any other
/// digit 0).
fn edit_a_number(file: &Path, after: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let from = text
        .find(after)
        .unwrap_or_else(|| panic!("{after:?} not in {}", file.display()));
    let at = from + text[from..].find(|c: char| c.is_ascii_digit()).unwrap();
    let digit = if &text[at..at + 1] == "0" { "1" } else { "0" };
    std::fs::write(file, format!("{}{digit}{}", &text[..at], &text[at + 1..])).unwrap();
}

#[test]
fn a_hand_edit_of_a_number_fails() {
    for (file, after) in [
        ("README.md", "| db-timer |"),
        ("README.md", "GENERATED chaos"),
        ("results/reference/README.md", "## busy"),
        ("results/reference/adr-draft.md", "## Decision Outcome"),
    ] {
        let (scratch, reference, readme) = scratch_copy();
        let o = check(&reference, &readme);
        assert!(o.status.success(), "the copy itself: {}", stderr(&o));
        edit_a_number(&scratch.path().join(file), after);
        let o = check(&reference, &readme);
        assert!(
            !o.status.success(),
            "an edit in {file} after {after:?} passed"
        );
        assert!(
            stderr(&o).contains(file.rsplit('/').next().unwrap()),
            "the error names the file: {}",
            stderr(&o)
        );
    }
}

/// Every `results/...` path the READMEs cite exists, is not ignored by git
/// and, in a git checkout, is committed: a folder under an ignored path is
/// silently left out of a commit (results/paid-timers was, cited by
/// README.md, until .gitignore named it), and a clean clone then cites
/// nothing. A `*` in a cited path matches any run of characters within its
/// segment. results/README.md's own relative names (`reference/`) are not
/// read: only `results/...` is.
#[test]
fn every_results_path_the_readmes_cite_is_committed() {
    let root = root();
    let mut missing = std::collections::BTreeSet::new();
    for readme in ["README.md", "results/README.md"] {
        let text = std::fs::read_to_string(root.join(readme)).unwrap();
        for (at, _) in text.match_indices("results/") {
            // Part of a longer path (`/tmp/results/`, `../results/`): not ours.
            if text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
            {
                continue;
            }
            let tail = &text[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_./*-".contains(c)))
                .unwrap_or(tail.len());
            let cited = tail[..end].trim_end_matches(['.', '/']);
            if cited == "results" {
                continue; // `results/<run-id>/...`: a pattern, not a folder
            }
            let matches = glob(&root, cited);
            let why = if matches.is_empty() {
                "missing"
            } else if matches.iter().all(|m| is_ignored(&root, m)) {
                "ignored by .gitignore"
            } else if matches.iter().all(|m| !is_committed(&root, m)) {
                "not committed"
            } else {
                continue;
            };
            missing.insert(format!("{readme}: {cited} ({why})"));
        }
    }
    assert!(
        missing.is_empty(),
        "cited but not committed:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The paths under `root` that `pattern` names, `*` matching within a
/// segment, relative to `root`.
fn glob(root: &Path, pattern: &str) -> Vec<String> {
    let mut found = vec![String::new()];
    for segment in pattern.split('/') {
        let mut next = Vec::new();
        for base in &found {
            let join = |name: &str| {
                if base.is_empty() {
                    name.to_string()
                } else {
                    format!("{base}/{name}")
                }
            };
            if !segment.contains('*') {
                if root.join(join(segment)).exists() {
                    next.push(join(segment));
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(root.join(base)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if wildcard(segment, &name) {
                    next.push(join(&name));
                }
            }
        }
        found = next;
    }
    found
}

/// Whether `name` matches `pattern`, whose `*`s match any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[test]
fn a_cited_pattern_matches_within_a_segment() {
    assert!(wildcard(
        "20261204-15*-storm-100k-*",
        "20261204-150748-storm-100k-default"
    ));
    assert!(!wildcard(
        "20261204-15*-storm-100k-*",
        "20261204-150748-storm-10k-default"
    ));
    assert!(wildcard("*", "anything"));
    assert!(!wildcard("a*b*c", "acb"));
}

fn git(root: &Path, args: &[&str]) -> Option<std::process::Output> {
    std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .ok()
}

fn is_ignored(root: &Path, path: &str) -> bool {
    // Exit 0: ignored. Without git (or outside a repository) nothing is said.
    git(root, &["check-ignore", "-q", "--no-index", path])
        .is_some_and(|o| o.status.code() == Some(0))
}

/// Whether git tracks `path` (or something under it). Outside a git
/// checkout (a source tarball) nothing can be asked, and it counts as
/// committed.
fn is_committed(root: &Path, path: &str) -> bool {
    match git(root, &["ls-files", "--", path]) {
        Some(o) if o.status.success() => !o.stdout.is_empty(),
        _ => true,
    }
}
