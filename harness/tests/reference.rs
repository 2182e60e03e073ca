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
            .is_some_and(|e| e == "json" || e == "md" || e == "hgrm" || e == "toml")
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

/// Every `results/...` path the READMEs cite exists and is not ignored by
/// git: a folder under an ignored path is silently left out of a commit
/// (results/paid-timers was, cited by README.md, until .gitignore named
/// it), and a clean clone then cites nothing. A `*` in a cited path
/// matches the rest of that path segment.
#[test]
fn every_results_path_the_readmes_cite_is_committed() {
    let root = root();
    let mut missing = Vec::new();
    for readme in ["README.md", "results/README.md"] {
        let text = std::fs::read_to_string(root.join(readme)).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("results/") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_./*-".contains(c)))
                .unwrap_or(tail.len());
            let cited = tail[..end].trim_end_matches(['.', '/']);
            rest = &tail[end..];
            if cited == "results" {
                continue; // `results/<run-id>/...`: a pattern, not a folder
            }
            if !cited_exists(&root, cited) {
                missing.push(format!("{readme}: {cited} (missing)"));
            } else if is_ignored(&root, cited) {
                missing.push(format!("{readme}: {cited} (ignored by .gitignore)"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited but not committed:\n{}",
        missing.join("\n")
    );
}

fn cited_exists(root: &Path, cited: &str) -> bool {
    let Some(star) = cited.find('*') else {
        return root.join(cited).exists();
    };
    let (dir, prefix) = match cited[..star].rfind('/') {
        Some(slash) => (&cited[..slash], &cited[slash + 1..star]),
        None => ("", &cited[..star]),
    };
    std::fs::read_dir(root.join(dir)).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
    })
}

fn is_ignored(root: &Path, cited: &str) -> bool {
    let probe = match cited.find('*') {
        Some(star) => &cited[..star],
        None => cited,
    };
    let status = std::process::Command::new("git")
        .args(["check-ignore", "-q", "--no-index", probe])
        .current_dir(root)
        .status();
    // Exit 0: ignored. Without git (or outside a repository) nothing is said.
    matches!(status, Ok(s) if s.code() == Some(0))
}
