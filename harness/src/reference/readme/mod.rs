//! The text the reference set feeds: README.md's generated sections
//! (between [`begin`] and [`end`] markers: the answer table, the chaos
//! table, the clusters'), the whole of `results/reference/README.md`, and
//! the decision-record draft beside it. All of it is rendered from the
//! folders the manifest names, with the same cells the run reports print
//! ([`crate::report::fig`]), so a number here is the report's number.
//! `delaybench reference readme --check` (run by the tests) fails when the
//! committed text differs from what the folders give (a hand edit of a
//! number fails CI), or when a folder it cites comes from a dirty tree.
//!
//! The rooms: `loaded` (the set, every folder read), one per text
//! (`answer`, `chaos`, `clusters`: README.md's sections, repeated in the
//! book's pages under `docs/src/` that carry their markers;
//! `reference_readme`: the set's own README); this file finds the
//! markers, splices the sections in, and writes or checks every file.

mod answer;
mod chaos;
mod clusters;
mod loaded;
mod reference_readme;

use answer::answer;
use anyhow::{bail, Context, Result};
use chaos::chaos_section;
use clusters::{rabbitmq_cluster_section, redis_cluster_section};
use loaded::{Set, ADR_FILE};
use reference_readme::reference_readme;
use std::path::{Path, PathBuf};

/// The first line of README.md's generated section `name`.
pub fn begin(name: &str) -> String {
    format!(
        "<!-- BEGIN GENERATED {name} by `delaybench reference readme` from results/reference: \
         edit the command, not this text (a test fails on a hand edit) -->"
    )
}

/// Its last line.
pub fn end(name: &str) -> String {
    format!("<!-- END GENERATED {name} -->")
}

/// Renders one of README.md's sections from the set, links relative to
/// the reference folder's path from the README.
type Section = fn(&Set, &str) -> Result<String>;

/// README.md's generated sections, each rendered from the set.
const SECTIONS: [(&str, Section); 4] = [
    ("answer", answer),
    ("chaos", chaos_section),
    ("redis-cluster", redis_cluster_section),
    ("rabbitmq-cluster", rabbitmq_cluster_section),
];

/// Renders everything and writes it: the reference README, the draft and
/// its evidence, and README.md's section.
pub fn write_all(dir: &Path, readme: &Path) -> Result<()> {
    for (path, text) in render_all(dir, readme)? {
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Fails, naming the file and the first line that differs, where the
/// committed text is not what the folders give, and, naming each one,
/// where a folder the text cites comes from a dirty tree.
pub fn check_all(dir: &Path, readme: &Path) -> Result<()> {
    let dirty = loaded::dirty_folders(dir)?;
    if !dirty.is_empty() {
        bail!(
            "the generated text cites folders of {} made from a dirty tree (their run.json's \
             commit ends in -dirty), which no published figure may come from; make the set \
             again from a clean commit (`delaybench reference`):\n  {}",
            dir.display(),
            dirty.join("\n  ")
        );
    }
    let mut stale = Vec::new();
    for (path, text) in render_all(dir, readme)? {
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != text {
            let line = committed
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| committed.lines().count().min(text.lines().count()));
            let (was, is) = (
                committed.lines().nth(line).unwrap_or("(end of file)"),
                text.lines().nth(line).unwrap_or("(end of file)"),
            );
            stale.push(format!(
                "{} line {}: it says {was:?}, the folders give {is:?}",
                path.display(),
                line + 1
            ));
        }
    }
    if !stale.is_empty() {
        bail!(
            "generated text differs from what {} gives (run `delaybench reference readme` to \
             regenerate it; never edit it by hand):\n  {}",
            dir.display(),
            stale.join("\n  ")
        );
    }
    Ok(())
}

/// Every generated file as `(path, text)`.
fn render_all(dir: &Path, readme: &Path) -> Result<Vec<(PathBuf, String)>> {
    let set = Set::load(dir)?;
    let mut files = vec![(dir.join("README.md"), reference_readme(&set)?)];
    let out = dir.join(ADR_FILE);
    let (draft, evidence) = crate::adr::render(&crate::adr::AdrArgs {
        dirs: set.manifest.adr_folders(dir).0,
        // The tool's example objective and priority, said so in the draft.
        slo: None,
        sla: None,
        prefer: None,
        out: out.clone(),
    })?;
    // The rerun commands name the folders as read (`dir/<folder>`); a
    // reader runs them from the README's folder, so they name the set as
    // the README does, wherever this process was started.
    let relative = relative_to(readme, dir);
    let as_read = format!("{}/", dir.display());
    let as_run = format!("{relative}/");
    files.push((out.clone(), draft.replace(&as_read, &as_run)));
    files.push((
        crate::adr::evidence_path(&out),
        evidence.replace(&as_read, &as_run),
    ));
    // The set's index page (`delaybench index`), named as the README names it.
    files.push((
        dir.join("index.html"),
        crate::report::index::render(dir, &relative)?,
    ));
    let mut text =
        std::fs::read_to_string(readme).with_context(|| format!("reading {}", readme.display()))?;
    for (name, render) in SECTIONS {
        text = splice(&text, name, &render(&set, &relative)?).with_context(|| {
            format!(
                "{} has no generated section `{name}`: put the lines `{}` and `{}` where it goes",
                readme.display(),
                begin(name),
                end(name)
            )
        })?;
    }
    files.push((readme.to_path_buf(), text));
    // The book's pages carry the same sections, linked from their folder.
    for page in book_pages(readme) {
        let mut text = std::fs::read_to_string(&page)
            .with_context(|| format!("reading {}", page.display()))?;
        let relative = relative_to(&page, dir);
        let mut spliced = false;
        for (name, render) in SECTIONS {
            if text.contains(&begin(name)) {
                text = splice(&text, name, &render(&set, &relative)?)
                    .with_context(|| format!("{}: section `{name}`", page.display()))?;
                spliced = true;
            }
        }
        if spliced {
            files.push((page, text));
        }
    }
    Ok(files)
}

/// The book's pages (`docs/src/*.md` beside the README), where some of the
/// README's sections are repeated in full; none when there is no book.
fn book_pages(readme: &Path) -> Vec<PathBuf> {
    let book = readme.parent().unwrap_or(Path::new("")).join("docs/src");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&book)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

/// `text` with what lies between section `name`'s markers replaced by
/// `section`.
fn splice(text: &str, name: &str, section: &str) -> Result<String> {
    let (first, last) = (begin(name), end(name));
    let from = text.find(&first).context("no BEGIN marker")?;
    let to = text[from..].find(&last).context("no END marker")? + from;
    Ok(format!(
        "{}{first}\n{section}{last}{}",
        &text[..from],
        &text[to + last.len()..]
    ))
}

/// The path from the folder of `file` (the README, a page of the book) to
/// the reference folder, for links: `results/reference` from the README,
/// `../../results/reference` from `docs/src/`.
fn relative_to(file: &Path, dir: &Path) -> String {
    let base = file.parent().unwrap_or(Path::new(""));
    if let Ok(inside) = dir.strip_prefix(base) {
        return inside.to_string_lossy().into_owned();
    }
    let (base, dir) = (lexical(base), lexical(dir));
    let common = base.iter().zip(&dir).take_while(|(a, b)| a == b).count();
    let mut parts = vec!["..".to_string(); base.len() - common];
    parts.extend(dir[common..].iter().cloned());
    parts.join("/")
}

/// The components of `path` made absolute from the working folder, `..`
/// and `.` resolved by name (the paths here are the checkout's own, with
/// no symbolic link to climb out of).
fn lexical(path: &Path) -> Vec<String> {
    use std::path::Component;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut parts: Vec<String> = Vec::new();
    for component in absolute.components() {
        match component {
            Component::Normal(name) => parts.push(name.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_between_the_markers_is_replaced_and_nothing_else() {
        let (b, e) = (begin("answer"), end("answer"));
        let other = format!("{}\nkept 3.0\n{}", begin("chaos"), end("chaos"));
        let text = format!("# top\n\nbefore\n{b}\nold 1.0\n{e}\nafter\n{other}\n");
        let out = splice(&text, "answer", "new 2.0\n").unwrap();
        assert_eq!(
            out,
            format!("# top\n\nbefore\n{b}\nnew 2.0\n{e}\nafter\n{other}\n")
        );
        assert!(splice("no markers", "answer", "x").is_err());
    }

    #[test]
    fn a_book_page_links_the_set_from_its_own_folder() {
        let set = Path::new("results/reference");
        assert_eq!(
            relative_to(Path::new("README.md"), set),
            "results/reference"
        );
        assert_eq!(
            relative_to(Path::new("docs/src/answer.md"), set),
            "../../results/reference"
        );
        assert_eq!(
            relative_to(
                Path::new("/r/harness/../docs/src/answer.md"),
                Path::new("/r/harness/../results/reference")
            ),
            "../../results/reference"
        );
        assert_eq!(
            relative_to(Path::new("/r/README.md"), Path::new("/r/results/reference")),
            "results/reference"
        );
    }
}
