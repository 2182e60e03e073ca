//! The published numbers are generated: README.md's generated sections,
//! results/reference/README.md and the draft decision record are what
//! `delaybench reference readme` renders from the committed reference set,
//! and a hand edit of any number in them fails here.

mod common;

use common::{delaybench, stderr, without_code};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The book's pages (`docs/src/*.md`) and CONTRIBUTING.md, each with the
/// folder its relative links are read from: prose moved out of README.md
/// is held to README.md's rules.
fn book_pages(root: &Path) -> Vec<(String, String)> {
    let mut pages: Vec<(String, String)> = std::fs::read_dir(root.join("docs/src"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| (format!("docs/src/{name}"), "docs/src".to_string()))
        .collect();
    pages.sort();
    pages.push(("CONTRIBUTING.md".into(), String::new()));
    pages
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
/// plots), README.md and the book's pages into a scratch folder.
fn scratch_copy() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = root();
    let scratch = tempfile::tempdir().unwrap();
    let to = scratch.path().join("results/reference");
    copy_text(&root.join("results/reference"), &to);
    let readme = scratch.path().join("README.md");
    std::fs::copy(root.join("README.md"), &readme).unwrap();
    // The book's pages beside it repeat some sections in full.
    copy_text(&root.join("docs/src"), &scratch.path().join("docs/src"));
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
        ("docs/src/chaos.md", "GENERATED chaos"),
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

/// `reference readme --check` fails, naming the folder, when a folder the
/// generated text cites comes from a dirty tree, whatever the text says.
#[test]
fn a_cited_folder_from_a_dirty_tree_fails_the_check() {
    let (_scratch, reference, readme) = scratch_copy();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reference.join("reference.json")).unwrap())
            .unwrap();
    let folder = manifest["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["folder"].as_str())
        .unwrap();
    let run = reference.join(folder).join("run.json");
    let text = std::fs::read_to_string(&run).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let commit = doc["git_commit"].as_str().unwrap();
    assert!(!commit.ends_with("-dirty"), "{commit}");
    std::fs::write(
        &run,
        text.replacen(
            &format!("\"git_commit\": \"{commit}\""),
            &format!("\"git_commit\": \"{commit}-dirty\""),
            1,
        ),
    )
    .unwrap();
    let o = check(&reference, &readme);
    assert!(!o.status.success(), "a dirty folder passed");
    assert!(
        stderr(&o).contains("dirty tree") && stderr(&o).contains(folder),
        "the error names the folder and why: {}",
        stderr(&o)
    );
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
    let mut readmes = vec!["README.md".to_string(), "results/README.md".into()];
    readmes.extend(book_pages(&root).into_iter().map(|(file, _)| file));
    for readme in &readmes {
        let text = std::fs::read_to_string(root.join(readme)).unwrap();
        // A book page names the folder from docs/src: `../../results/`.
        let up = if readme.starts_with("docs/src/") {
            "../../"
        } else {
            ""
        };
        for (at, _) in text.match_indices("results/") {
            let Some(before) = text[..at].strip_suffix(up) else {
                continue;
            };
            // Part of a longer path (`/tmp/results/`, `../results/`): not ours.
            if before
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

/// Every run folder under results/ (a folder with a `run.json`), relative
/// to the repository, with the commit its `run.json` records.
fn run_folders(root: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, rel: &str, found: &mut Vec<(String, String)>) {
        let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
            return;
        };
        for entry in entries.flatten() {
            if !entry.path().is_dir() {
                continue;
            }
            let rel = format!("{rel}/{}", entry.file_name().to_string_lossy());
            let run = root.join(&rel).join("run.json");
            if run.exists() {
                let doc: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&run).unwrap())
                        .unwrap_or_else(|e| panic!("{}: {e}", run.display()));
                let commit = doc["git_commit"].as_str().unwrap_or_default().to_string();
                found.push((rel, commit));
            } else {
                walk(root, &rel, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(root, "results", &mut found);
    found.sort();
    found
}

/// The run folders whose `run.json` records a `-dirty` commit.
fn dirty_folders(root: &Path) -> Vec<(String, String)> {
    run_folders(root)
        .into_iter()
        .filter(|(_, commit)| commit.ends_with("-dirty"))
        .collect()
}

/// The run folders (of `runs`: all of them, or the dirty ones) that
/// `text`, read from a file in the folder `base` (relative to the
/// repository), cites, each with the byte offset of the citation: a path
/// naming the folder, something in it, or a folder holding it
/// (`results/batch-wait` cites every run in it);
/// `results/...` is read from the repository's root, any other path from
/// `base`; and the folder's own name anywhere. Not a citation: `--out DIR`
/// (where a command writes), and `base` itself (a folder's README naming
/// its folder).
fn cited_runs<'a>(
    root: &Path,
    base: &str,
    text: &str,
    runs: &'a [(String, String)],
) -> Vec<(usize, &'a (String, String))> {
    let mut cited = Vec::new();
    for d in runs {
        let name = d.0.rsplit('/').next().unwrap();
        cited.extend(text.match_indices(name).map(|(at, _)| (at, d)));
    }
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./*-".contains(c);
    let mut at = 0;
    while at < text.len() {
        let Some(start) = text[at..].find(is_path).map(|i| at + i) else {
            break;
        };
        let end = text[start..]
            .find(|c: char| !is_path(c))
            .map_or(text.len(), |i| start + i);
        at = end;
        let token = text[start..end].trim_end_matches('.');
        // `--out DIR` names where a command writes, not what it cites.
        if !token.contains('/') || text[..start].ends_with("--out ") {
            continue;
        }
        let path = resolve(base, token.trim_end_matches('/'));
        // A folder's README naming its own folder: each run in it is
        // cited by name where it is described; `results/` holds them all.
        if path == base || path == "results" {
            continue;
        }
        for path in glob(root, &path) {
            for d in runs {
                let within = |a: &str, b: &str| a.starts_with(b) && a[b.len()..].starts_with('/');
                if path == d.0 || within(&path, &d.0) || within(&d.0, &path) {
                    cited.push((start, d));
                }
            }
        }
    }
    cited.sort_by_key(|(at, d)| (*at, &d.0));
    cited.dedup();
    cited
}

/// The path `token`, written in a file in the folder `base`, relative to
/// the repository: `results/...` from the root, anything else from `base`
/// (as written where it would climb above the repository: it names
/// nothing there).
fn resolve(base: &str, token: &str) -> String {
    let from = if token.starts_with("results/") {
        ""
    } else {
        base
    };
    common::resolve(from, token).unwrap_or_else(|| token.to_string())
}

/// The sentence of `text` around byte `at`: it ends at `.`, `!` or `?`
/// before whitespace and a capital letter (or a link, code or bold),
/// at a blank line, and where a list item, table row, heading or code
/// fence begins; a table row is one line.
fn sentence_at(text: &str, at: usize) -> &str {
    let opens = |line: &str| {
        let t = line.trim_start();
        ["- ", "* ", "|", "#", "```", "<!--"]
            .iter()
            .any(|p| t.starts_with(p))
            || t.split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let line_start = |i: usize| text[..i].rfind('\n').map_or(0, |n| n + 1);
    let line_end = |i: usize| text[i..].find('\n').map_or(text.len(), |n| i + n);
    let blank = |i: usize| text[i..line_end(i)].trim().is_empty();
    // The block of lines: back to the line that opens it (or follows a
    // blank line), on to the line before the next such one.
    let mut from = line_start(at);
    while from > 0 && !opens(&text[from..line_end(from)]) {
        let previous = line_start(from - 1);
        if blank(previous) {
            break;
        }
        from = previous;
    }
    let mut to = line_end(at);
    while to < text.len() && !blank(to + 1) && !opens(&text[to + 1..line_end(to + 1)]) {
        to = line_end(to + 1);
    }
    let block = &text[from..to];
    let at = at - from;
    // Within the block, the sentence.
    let ends = |i: usize| {
        let rest = &block[i + 1..];
        let after = rest.trim_start();
        rest.starts_with(char::is_whitespace)
            && (after.starts_with(|c: char| c.is_ascii_uppercase())
                || ["[", "`", "**", "("].iter().any(|p| after.starts_with(p)))
    };
    let boundaries: Vec<usize> = block
        .char_indices()
        .filter(|&(i, c)| ".!?".contains(c) && ends(i))
        .map(|(i, _)| i + 1)
        .collect();
    let start = boundaries
        .iter()
        .rev()
        .find(|&&b| b <= at)
        .copied()
        .unwrap_or(0);
    let end = boundaries
        .iter()
        .find(|&&b| b > at)
        .copied()
        .unwrap_or(block.len());
    &block[start..end]
}

/// README.md's generated sections, each as `(first line, text)`.
fn generated_sections(readme: &str) -> Vec<(usize, &str)> {
    let mut sections = Vec::new();
    let mut rest = 0;
    while let Some(begin) = readme[rest..].find("<!-- BEGIN GENERATED ") {
        let begin = rest + begin;
        let end = readme[begin..]
            .find("<!-- END GENERATED ")
            .map_or(readme.len(), |e| begin + e);
        sections.push((readme[..begin].lines().count() + 1, &readme[begin..end]));
        rest = end;
    }
    sections
}

/// README.md with its generated sections blanked out, line for line (so
/// no sentence runs across one, and line numbers stay).
fn hand_written(readme: &str) -> String {
    let mut out = String::new();
    let mut rest = 0;
    while let Some(begin) = readme[rest..].find("<!-- BEGIN GENERATED ") {
        let begin = rest + begin;
        out.push_str(&readme[rest..begin]);
        let end = readme[begin..]
            .find("<!-- END GENERATED ")
            .map_or(readme.len(), |e| begin + e);
        rest = readme[end..].find('\n').map_or(readme.len(), |n| end + n);
        out.extend(readme[begin..rest].chars().filter(|&c| c == '\n'));
    }
    out.push_str(&readme[rest..]);
    out
}

/// No folder the generated text cites (README.md's generated sections,
/// results/reference/README.md, the decision-record draft and its
/// evidence) comes from a dirty tree: a published figure comes from one
/// clean commit.
#[test]
fn no_generated_text_cites_a_folder_from_a_dirty_tree() {
    let root = root();
    let dirty = dirty_folders(&root);
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut texts: Vec<(String, String, String)> = generated_sections(&readme)
        .into_iter()
        .map(|(line, text)| {
            (
                format!("README.md's section at line {line}"),
                String::new(),
                text.to_string(),
            )
        })
        .collect();
    for (page, base) in book_pages(&root) {
        let text = std::fs::read_to_string(root.join(&page)).unwrap();
        for (line, section) in generated_sections(&text) {
            texts.push((
                format!("{page}'s section at line {line}"),
                base.clone(),
                section.to_string(),
            ));
        }
    }
    let reference = root.join("results/reference");
    for entry in std::fs::read_dir(&reference).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "README.md" || (name.starts_with("adr-draft") && name.ends_with(".md")) {
            texts.push((
                format!("results/reference/{name}"),
                "results/reference".into(),
                std::fs::read_to_string(entry.path()).unwrap(),
            ));
        }
    }
    assert!(
        texts.len() >= 4,
        "the generated texts: {:?}",
        texts.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
    let mut found = std::collections::BTreeSet::new();
    for (what, base, text) in &texts {
        for (_, (folder, commit)) in cited_runs(&root, base, text, &dirty) {
            found.insert(format!("{what}: {folder} (commit {commit})"));
        }
    }
    assert!(
        found.is_empty(),
        "generated text cites folders from a dirty tree:\n{}",
        found.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Hand-written prose (README.md and the book's pages outside their
/// generated sections, CONTRIBUTING.md, the READMEs of results/ and its
/// folders, rabbitmq-plugin/README.md) that
/// cites a folder from a dirty tree says so in the same sentence: the word
/// "dirty" and the commit (its first seven characters) the folder's
/// run.json records.
#[test]
fn prose_that_cites_a_folder_from_a_dirty_tree_says_so() {
    let root = root();
    let dirty = dirty_folders(&root);
    let mut files = vec![
        ("README.md".to_string(), String::new()),
        ("results/README.md".into(), "results".into()),
        ("rabbitmq-plugin/README.md".into(), "rabbitmq-plugin".into()),
        ("bench/README.md".into(), "bench".into()),
    ];
    files.extend(book_pages(&root));
    for entry in std::fs::read_dir(root.join("results")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "reference" && entry.path().join("README.md").exists() {
            files.push((
                format!("results/{name}/README.md"),
                format!("results/{name}"),
            ));
        }
    }
    let mut unsaid = std::collections::BTreeSet::new();
    for (file, base) in &files {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        let text = hand_written(&text);
        for (at, (folder, commit)) in cited_runs(&root, base, &text, &dirty) {
            let sentence = sentence_at(&text, at);
            let short = &commit[..7];
            if !(sentence.to_lowercase().contains("dirty") && sentence.contains(short)) {
                let line = text[..at].lines().count().max(1);
                unsaid.insert(format!(
                    "{file}, near line {line}: {folder} (commit {commit}) in {:?}",
                    sentence.trim()
                ));
            }
        }
    }
    assert!(
        unsaid.is_empty(),
        "these sentences cite a folder from a dirty tree without saying so (the word \
         \"dirty\" and the commit's first seven characters):\n{}",
        unsaid.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Hand-written prose in README.md and the book (outside their generated
/// sections and code blocks) that cites a run folder (its path, a file in it, or its name) gives that
/// folder's commit, the first seven characters its run.json records, in
/// the same sentence: a figure read from a run is only as good as the
/// build that made it, and a reader should not have to open the folder to
/// learn which one. A path naming a folder that only holds runs
/// (`results/reference/<folder>`, `results/batch-wait/`) cites no one run.
#[test]
fn prose_that_cites_a_run_folder_names_its_commit() {
    let root = root();
    let runs = run_folders(&root);
    let mut pages = vec![("README.md".to_string(), String::new())];
    pages.extend(book_pages(&root));
    let mut uncommitted = Vec::new();
    for (page, base) in &pages {
        // A command that names folders (`delaybench adr
        // results/reference/*/`) states no figure.
        let text = without_code(
            &hand_written(&std::fs::read_to_string(root.join(page)).unwrap()),
            true,
        );
        uncommitted.extend(
            cited_without_commit(&root, base, &text, &runs)
                .into_iter()
                .map(|line| format!("{page}, {line}")),
        );
    }
    assert!(
        uncommitted.is_empty(),
        "these sentences cite a run folder without its commit (the first seven characters of \
         its run.json's git_commit):\n{}",
        uncommitted.join("\n")
    );
    // The check itself: a folder cited without its commit, then with it.
    let (folder, commit) = runs
        .iter()
        .find(|(_, c)| c.len() >= 7)
        .expect("a committed run folder");
    let bare = format!("# T\n\nA figure from [{folder}]({folder}/report.md) reads 5 ms.\n");
    assert_eq!(
        cited_without_commit(&root, "", &bare, &runs).len(),
        1,
        "{bare}"
    );
    let cited = bare.replace(" reads", &format!(", at {}, reads", &commit[..7]));
    assert!(
        cited_without_commit(&root, "", &cited, &runs).is_empty(),
        "{cited}"
    );
    let holder = folder.rsplit_once('/').unwrap().0;
    let group = format!("# T\n\nEvery run is in [{holder}]({holder}/).\n");
    assert!(
        cited_without_commit(&root, "", &group, &runs).is_empty(),
        "{group}"
    );
}

/// The citations of run folders (of `runs`) in `text`, a file in the folder
/// `base` (relative to the repository), whose sentence lacks the folder's commit (its first
/// seven characters), each as a line naming where, what and the sentence.
/// A path to a folder that holds runs is not a citation of each of them.
fn cited_without_commit(
    root: &Path,
    base: &str,
    text: &str,
    runs: &[(String, String)],
) -> Vec<String> {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./*-".contains(c);
    let mut uncommitted = std::collections::BTreeSet::new();
    for (at, (folder, commit)) in cited_runs(root, base, text, runs) {
        let end = text[at..]
            .find(|c: char| !is_path(c))
            .map_or(text.len(), |i| at + i);
        let token = resolve(base, text[at..end].trim_end_matches(['.', '/']));
        if folder.starts_with(&format!("{token}/")) {
            continue;
        }
        let sentence = sentence_at(text, at);
        let short = commit.get(..7).unwrap_or("(no commit recorded)");
        if !sentence.contains(short) {
            let line = text[..at].lines().count().max(1);
            uncommitted.insert(format!(
                "near line {line}: {folder} (commit {short}) in {:?}",
                sentence.trim()
            ));
        }
    }
    uncommitted.into_iter().collect()
}

/// The sentence rules the check above reads prose by.
#[test]
fn a_citation_is_read_in_its_own_sentence() {
    let text = "# T\n\nFirst sentence cites a/b. Second one, from a dirty tree at\n\
                abc1234, cites c/d (e.g. x). Third.\n- an item cites e/f\n  and goes on.\n\
                | row | g/h |\n| row | i/j |\n";
    let at = |s: &str| text.find(s).unwrap();
    assert_eq!(sentence_at(text, at("a/b")), "First sentence cites a/b.");
    assert!(sentence_at(text, at("c/d")).contains("dirty tree at\nabc1234"));
    assert!(sentence_at(text, at("c/d")).ends_with("(e.g. x)."));
    assert_eq!(
        sentence_at(text, at("e/f")),
        "- an item cites e/f\n  and goes on."
    );
    assert_eq!(sentence_at(text, at("g/h")), "| row | g/h |");
    let readme = format!(
        "a\n{}\nin x/y\n<!-- END GENERATED s -->\nb\n",
        "<!-- BEGIN GENERATED s -->"
    );
    assert_eq!(hand_written(&readme), "a\n\n\n\nb\n");
    assert_eq!(
        without_code("a x/y\n```sh\nrun x/y\n```\nb\n", true),
        "a x/y\n\n\n\nb\n"
    );
    assert_eq!(generated_sections(&readme).len(), 1);
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

#[test]
fn a_cluster_entry_asked_for_without_clusters_is_refused_not_skipped() {
    // Before, `--only redis-cluster` without --clusters ran nothing and
    // said the part was done. Refused before anything runs or is written.
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("set");
    let o = delaybench(&[
        "reference",
        "--out",
        out.to_str().unwrap(),
        "--allow-dirty",
        "--allow-debug",
        "--only",
        "redis-cluster",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("add --clusters"), "{}", stderr(&o));
    assert!(!out.exists());
}
