//! The documentation a newcomer reads: README.md is a front door (at most
//! 250 lines), every relative link in it, CONTRIBUTING.md, the book
//! (`docs/src/`) and the results READMEs leads to a file that exists (and
//! to a heading that exists, where it names one), the book's table of
//! contents lists every page, the layout page names every script, every
//! committed results folder carries its own README, and no hand-written
//! table carries a date or an issue number (they belong to the history,
//! not to what a user reads). Nothing here needs a service.

mod common;

use common::{resolve, without_code};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Markdown files a reader is sent to, relative to the repository.
fn documents(root: &Path) -> Vec<String> {
    let mut files = vec![
        "README.md".to_string(),
        "CONTRIBUTING.md".into(),
        "results/README.md".into(),
    ];
    for (folder, prefix) in [("docs/src", "docs/src/"), ("results", "results/")] {
        let mut found: Vec<String> = std::fs::read_dir(root.join(folder))
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if folder == "results" {
                    e.path()
                        .join("README.md")
                        .exists()
                        .then(|| format!("{prefix}{name}/README.md"))
                } else {
                    name.ends_with(".md").then(|| format!("{prefix}{name}"))
                }
            })
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

/// The anchor a heading gets (GitHub's and mdBook's rule): lower case,
/// letters, digits, `-` and `_` kept, spaces to `-`, the rest dropped;
/// a link's text stands for the link.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading.trim();
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one gets `-1`, `-2`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || !line[hashes..].starts_with(' ') {
            continue;
        }
        // Inline code counts in a heading's anchor.
        let s = slug(&line[hashes..].replace('`', ""));
        let n = seen.entry(s.clone()).or_default();
        found.insert(if *n == 0 { s } else { format!("{s}-{n}") });
        *n += 1;
    }
    found
}

/// Every `](target)` link target of `text`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        if let Some(end) = rest.find([')', ' ', '\n']) {
            if rest[end..].starts_with(')') {
                found.push((text[..at].lines().count().max(1), rest[..end].to_string()));
            }
        }
    }
    found
}

/// The broken links of the document `file` (relative to `root`).
fn broken_links(root: &Path, file: &str) -> Vec<String> {
    let raw = std::fs::read_to_string(root.join(file)).unwrap();
    let text = without_code(&raw, false);
    let base = file.rsplit_once('/').map_or("", |(b, _)| b);
    let mut broken = Vec::new();
    for (line, target) in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let full = if path.is_empty() {
            file.to_string()
        } else if let Some(full) = resolve(base, path) {
            full
        } else {
            broken.push(format!(
                "{file}:{line}: {target} (climbs above the repository)"
            ));
            continue;
        };
        if !root.join(&full).exists() {
            broken.push(format!("{file}:{line}: {target} (no {full})"));
            continue;
        }
        if !anchor.is_empty() && full.ends_with(".md") {
            let linked = std::fs::read_to_string(root.join(&full)).unwrap();
            if !anchors(&without_code(&linked, true)).contains(anchor) {
                broken.push(format!(
                    "{file}:{line}: {target} (no heading #{anchor} in {full})"
                ));
            }
        }
    }
    broken
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; at most 250: move the detail into a page of docs/src"
    );
}

#[test]
fn every_relative_link_leads_somewhere() {
    let root = root();
    let broken: Vec<String> = documents(&root)
        .iter()
        .flat_map(|file| broken_links(&root, file))
        .collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_check_finds_a_missing_file_and_a_missing_heading() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("docs/src")).unwrap();
    std::fs::write(
        dir.path().join("docs/src/a.md"),
        "# A page\n\n## The `x` knob, explained\n\n[ok](b.md#b-heading) [ok](#the-x-knob-explained) \
         [bad](b.md#nope) [bad](c.md) [ok](../../README.md) `[code](nowhere.md)`\n\n```\n[fenced](gone.md)\n```\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("docs/src/b.md"), "# B heading\n").unwrap();
    std::fs::write(dir.path().join("README.md"), "# R\n").unwrap();
    let broken = broken_links(dir.path(), "docs/src/a.md");
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].contains("b.md#nope"), "{broken:?}");
    assert!(broken[1].contains("c.md"), "{broken:?}");
}

#[test]
fn the_book_lists_every_page() {
    let root = root();
    let summary = std::fs::read_to_string(root.join("docs/src/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    let mut unlisted = Vec::new();
    for entry in std::fs::read_dir(root.join("docs/src")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "SUMMARY.md" && !listed.contains(&name) {
            unlisted.push(name);
        }
    }
    assert!(
        unlisted.is_empty(),
        "docs/src/SUMMARY.md does not list: {unlisted:?}"
    );
}

#[test]
fn the_layout_page_names_every_script() {
    let root = root();
    let layout = std::fs::read_to_string(root.join("docs/src/layout.md")).unwrap();
    let mut unnamed = Vec::new();
    for entry in std::fs::read_dir(root.join("scripts")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !layout.contains(&format!("`{name}`")) {
            unnamed.push(name);
        }
    }
    assert!(
        unnamed.is_empty(),
        "docs/src/layout.md's scripts table does not name: {unnamed:?}"
    );
}

/// The folders under results/ that hold committed files (git's list; a
/// run of the user's own is not one).
fn committed_results_folders(root: &Path) -> BTreeSet<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z", "--", "results"])
        .current_dir(root)
        .output()
        .expect("git ls-files: the docs tests read the checkout's committed results");
    assert!(out.status.success(), "git ls-files failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter_map(|path| {
            let mut parts = path.split('/');
            let (_, folder, rest) = (parts.next()?, parts.next()?, parts.next());
            rest.map(|_| folder.to_string())
        })
        .collect()
}

#[test]
fn every_committed_results_folder_has_a_readme() {
    let root = root();
    let folders = committed_results_folders(&root);
    assert!(folders.contains("reference"), "{folders:?}");
    let bare: Vec<&String> = folders
        .iter()
        .filter(|f| !root.join("results").join(f).join("README.md").exists())
        .collect();
    assert!(
        bare.is_empty(),
        "committed results folders without a README.md (what the runs are, the command, \
         the commit): {bare:?}"
    );
}

/// Hand-written table rows (outside the generated sections) of the README,
/// CONTRIBUTING.md and the book that carry a date or an issue number.
#[test]
fn no_hand_written_table_carries_a_date_or_an_issue_number() {
    let root = root();
    let mut found = Vec::new();
    let mut files = vec!["README.md".to_string(), "CONTRIBUTING.md".into()];
    files.extend(
        documents(&root)
            .into_iter()
            .filter(|f| f.starts_with("docs/src/")),
    );
    for file in &files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let mut generated = false;
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("<!-- BEGIN GENERATED ") {
                generated = true;
            } else if line.starts_with("<!-- END GENERATED ") {
                generated = false;
            } else if !generated && line.trim_start().starts_with('|') {
                if let Some(what) = dated(line) {
                    found.push(format!("{file}:{}: {what} in {line:?}", i + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "tables a user reads carry history (put it in the commit message or the issue):\n{}",
        found.join("\n")
    );
}

/// A date (`2026-12-05`) or an issue number (`issue 41`, `(#41)`) in `line`.
fn dated(line: &str) -> Option<&'static str> {
    let b = line.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let boundary = |i: Option<usize>| i.is_none_or(|i| !b[i].is_ascii_alphanumeric());
    for i in 0..b.len() {
        let date = (0..4).all(|k| digit(i + k))
            && b.get(i + 4) == Some(&b'-')
            && digit(i + 5)
            && digit(i + 6)
            && b.get(i + 7) == Some(&b'-')
            && digit(i + 8)
            && digit(i + 9)
            && boundary(i.checked_sub(1))
            && boundary(Some(i + 10).filter(|&j| j < b.len()));
        if date {
            return Some("a date");
        }
    }
    let lower = line.to_lowercase();
    let issue = lower
        .match_indices("issue ")
        .any(|(at, _)| lower[at + 6..].starts_with(|c: char| c.is_ascii_digit()))
        || lower
            .match_indices("(#")
            .any(|(at, _)| lower[at + 2..].starts_with(|c: char| c.is_ascii_digit()));
    issue.then_some("an issue number")
}

#[test]
fn a_date_and_an_issue_number_are_found() {
    assert_eq!(dated("| x | since 2026-12-05 |"), Some("a date"));
    assert_eq!(dated("| x | issue 41 |"), Some("an issue number"));
    assert_eq!(dated("| x | fixed (#12) |"), Some("an issue number"));
    assert_eq!(dated("| 20261205-141022-quick | #5 |"), None);
    assert_eq!(dated("| x | 1.5 |"), None);
}
