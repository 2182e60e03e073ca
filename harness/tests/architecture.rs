//! The house's shape, checked (issue 21): no import circles between the
//! modules of `harness/src` and `strategies/src`, and no module importing
//! from its parent (or any ancestor). A parent may use its children; a
//! child that needs what its parent defines means that item belongs in a
//! sibling, which the parent re-exports.
//!
//! The check reads the source: every `use crate::…`, `use super::…` and
//! every inline `crate::…` / `super::…` path outside `#[cfg(test)]` code,
//! resolved to the module that defines it (following `pub use`
//! re-exports). It is a reading of the text, not of rustc's resolution,
//! so it is strict where it can be: a path it cannot place counts against
//! the longest module prefix it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["store", "orders"]`; `[]` is the root.
type Module = Vec<String>;

/// Upward imports allowed, each with why: a child that continues its
/// parent's `impl` of one type in another file (rustc allows an inherent
/// `impl` anywhere in the crate; splitting the claim loop from the rest of
/// `RedisZset` keeps each file about one thing).
const ALLOWED_UPWARD: &[(&str, &str)] = &[
    (
        "redis_zset::worker",
        "continues `impl RedisZset` (the claim loop) from redis_zset/mod.rs",
    ),
    (
        "rabbit::consumer",
        "continues `impl RabbitStrategy` (the consumer) from rabbit/mod.rs",
    ),
];

#[derive(Debug, Default)]
struct Findings {
    /// Each circle, its modules sorted.
    circles: Vec<Vec<String>>,
    /// `(module, path it imports from an ancestor)`.
    upward: Vec<(String, String)>,
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without its tests (everything from the first
/// top-level `#[cfg(...test...)]` on) and without line comments.
fn code_of(src: &str) -> String {
    let mut out = String::new();
    for line in src.lines() {
        if line.starts_with("#[cfg(") && line.contains("test") && !line.contains("not(test") {
            break;
        }
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Splits `a, b::{c, d}, e` at its top-level commas.
fn top_level_items(tree: &str) -> Vec<&str> {
    let (mut items, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (i, ch) in tree.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&tree[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    items.push(&tree[from..]);
    items
}

/// Every path a use tree names, each as its segments.
fn expand(prefix: &[String], tree: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for item in top_level_items(tree) {
        let item: String = item.split_whitespace().collect::<Vec<_>>().join(" ");
        if item.is_empty() {
            continue;
        }
        if let Some(open) = item.find('{') {
            let head: Vec<String> = item[..open]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            let inner = &item[open + 1..item.rfind('}').unwrap_or(item.len())];
            let mut p = prefix.to_vec();
            p.extend(head);
            paths.extend(expand(&p, inner));
        } else {
            let item = item.split(" as ").next().unwrap_or("").trim();
            let mut p = prefix.to_vec();
            p.extend(
                item.split("::")
                    .filter(|s| !s.is_empty() && *s != "self")
                    .map(String::from),
            );
            paths.push(p);
        }
    }
    paths
}

/// The use statements of `code`: `(is it a re-export, the tree after `use`)`.
fn uses(code: &str) -> Vec<(bool, String)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(i) = code[at..].find("use ") {
        let start = at + i;
        at = start + 4;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if !boundary {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let tree = code[at..at + end].trim().to_string();
        let before = code[..start].trim_end();
        let public = ["pub", "pub(crate)", "pub(super)"]
            .iter()
            .any(|p| before.ends_with(p));
        found.push((public, tree));
    }
    found
}

/// Inline `crate::a::b` and `super::a` paths outside use statements.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for anchor in ["crate::", "super::"] {
        for (i, _) in code.match_indices(anchor) {
            let prev = code[..i].chars().next_back();
            if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[i..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let segments: Vec<String> = rest[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            // `super::{a, b}`: a use tree, read with its statement.
            if segments.len() > 1 {
                paths.push(segments);
            }
        }
    }
    paths
}

/// `path` as written in `module`, made absolute; `None` for another crate.
fn absolute(module: &Module, path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some(module.iter().chain(&path[1..]).cloned().collect()),
        "super" => {
            let mut base = module.clone();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }
        _ => {
            let mut candidate = module.clone();
            candidate.push(first.clone());
            modules
                .contains(&candidate)
                .then(|| module.iter().chain(path).cloned().collect())
        }
    }
}

fn check(root: &Path, allowed: &[(&str, &str)]) -> Findings {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let code: BTreeMap<Module, String> = files
        .iter()
        // `src/bin/*` are crate roots of their own; `tests.rs` files are
        // `#[cfg(test)]` modules.
        .filter(|f| {
            !f.strip_prefix(root).unwrap().starts_with("bin")
                && f.file_name().is_some_and(|n| n != "tests.rs")
        })
        .map(|f| {
            (
                module_of(root, f),
                code_of(&std::fs::read_to_string(f).unwrap()),
            )
        })
        .collect();
    let modules: BTreeSet<Module> = code.keys().cloned().collect();

    // `pub use` re-exports: (module, name) -> where the name is defined.
    let mut reexports: BTreeMap<(Module, String), Module> = BTreeMap::new();
    for (m, text) in &code {
        for (public, tree) in uses(text) {
            if !public {
                continue;
            }
            for path in expand(&[], &tree) {
                let Some(target) = absolute(m, &path, &modules) else {
                    continue;
                };
                if let Some(last) = target.last().filter(|l| l.as_str() != "*") {
                    reexports.insert((m.clone(), last.clone()), target.clone());
                }
            }
        }
    }
    let resolve = |mut path: Module| -> Module {
        for _ in 0..8 {
            let hop = (1..=path.len()).rev().find_map(|k| {
                let owner = path[..k - 1].to_vec();
                modules
                    .contains(&owner)
                    .then(|| reexports.get(&(owner, path[k - 1].clone())))
                    .flatten()
                    .map(|to| (k, to.clone()))
            });
            match hop {
                Some((k, to)) if to != path[..k] => {
                    path = to.into_iter().chain(path[k..].iter().cloned()).collect();
                }
                _ => break,
            }
        }
        path
    };

    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let mut findings = Findings::default();
    for (m, text) in &code {
        let mut paths: Vec<Vec<String>> = uses(text)
            .into_iter()
            .flat_map(|(_, tree)| expand(&[], &tree))
            .collect();
        paths.extend(inline_paths(text));
        for path in paths {
            let Some(abs) = absolute(m, &path, &modules) else {
                continue;
            };
            let abs = resolve(abs);
            let k = (0..=abs.len())
                .rev()
                .find(|&k| modules.contains(&abs[..k]))
                .unwrap_or(0);
            let target = abs[..k].to_vec();
            if &target == m || target.starts_with(m) {
                continue; // itself, or a parent using its child
            }
            if m.starts_with(&target) {
                if !allowed.iter().any(|(a, _)| *a == name(m)) {
                    findings.upward.push((name(m), path.join("::")));
                }
                continue;
            }
            edges.entry(m.clone()).or_default().insert(target);
        }
    }
    findings.upward.sort();
    findings.upward.dedup();
    findings.circles = circles(&modules, &edges);
    findings
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(
    modules: &BTreeSet<Module>,
    edges: &BTreeMap<Module, BTreeSet<Module>>,
) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        found: Vec<Vec<String>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &Module) {
            let i = self.index.len();
            self.index.insert(v.clone(), i);
            self.low.insert(v.clone(), i);
            self.stack.push(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    let done = &w == v;
                    component.push(name(&w));
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for m in modules {
        if !t.index.contains_key(m) {
            t.visit(m);
        }
    }
    t.found
}

fn assert_clean(crate_src: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_src);
    let findings = check(&root, ALLOWED_UPWARD);
    assert!(
        findings.circles.is_empty() && findings.upward.is_empty(),
        "{crate_src}: import circles {:?}; imports from a parent (move the item to a sibling \
         the parent re-exports) {:?}",
        findings.circles,
        findings.upward
    );
}

#[test]
fn the_harness_has_no_import_circle_and_no_upward_import() {
    assert_clean("harness/src");
}

#[test]
fn the_strategies_have_no_import_circle_and_no_upward_import() {
    assert_clean("strategies/src");
}

/// The check finds what it looks for: a circle through a re-export, an
/// upward `super::` and an upward `crate::` path, and nothing in a tree
/// without them.
#[test]
fn the_check_finds_a_circle_and_an_upward_import() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\nmod p;\npub use a::A;\n");
    write("a.rs", "use crate::b::{self, B};\npub struct A;\n");
    write("b.rs", "pub struct B(crate::A);\n");
    write(
        "p/mod.rs",
        "mod c;\nmod d;\npub struct Z;\npub use d::D;\n#[cfg(test)]\nmod tests { use super::c::C; }\n",
    );
    write("p/c.rs", "use super::{d::D, Z};\npub struct C;\n");
    write(
        "p/d.rs",
        "pub struct D(crate::p::Z); // super::Z in a comment is not code\n",
    );
    let findings = check(dir.path(), &[]);
    assert_eq!(
        findings.circles,
        vec![vec!["a".to_string(), "b".to_string()]]
    );
    assert_eq!(
        findings.upward,
        vec![
            ("p::c".to_string(), "super::Z".to_string()),
            ("p::d".to_string(), "crate::p::Z".to_string()),
        ]
    );
    let allowed = check(dir.path(), &[("p::c", "why"), ("p::d", "why")]);
    assert!(allowed.upward.is_empty());

    // Moving Z to a sibling and breaking the circle leaves nothing.
    write("b.rs", "pub struct B;\n");
    write("p/mod.rs", "mod c;\nmod d;\nmod z;\npub use z::Z;\n");
    write("p/z.rs", "pub struct Z;\n");
    write("p/c.rs", "use super::z::Z;\npub struct C(Z);\n");
    write("p/d.rs", "pub struct D(super::z::Z);\n");
    let findings = check(dir.path(), &[]);
    assert!(
        findings.circles.is_empty() && findings.upward.is_empty(),
        "{findings:?}"
    );
}
