//! What the end-to-end test files share: running the binary and the
//! databases' URLs.
#![allow(dead_code)] // each test file uses its own subset

use std::process::{Command, Output};

/// Runs the `delaybench` binary quietly (as in CI) and waits for it.
pub fn delaybench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delaybench"))
        .args(args)
        .env("CI", "true")
        .output()
        .expect("run delaybench")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn pg() -> String {
    std::env::var("DELAYBENCH_PG_URL")
        .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".into())
}

pub fn mysql() -> String {
    std::env::var("DELAYBENCH_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// The run folder a `run` or `sweep` printed as its last stdout line.
pub fn run_dir_of(run: &Output) -> std::path::PathBuf {
    let stdout = String::from_utf8_lossy(&run.stdout);
    let dir = stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("DELAYBENCH_RUN_DIR="))
        .unwrap_or_else(|| panic!("no run folder line: {stdout}"));
    std::path::PathBuf::from(dir)
}

/// What every strategy of the run folders under `out` broke, with the
/// examples the checker kept: for a failed run's message, since the
/// scratch folder is gone once the test ends.
pub fn anomalies_under(out: &std::path::Path) -> String {
    let mut lines = Vec::new();
    let runs = std::fs::read_dir(out).into_iter().flatten().flatten();
    for run in runs.map(|e| e.path()).filter(|p| p.is_dir()) {
        let strategies = std::fs::read_dir(&run).into_iter().flatten().flatten();
        for file in strategies.map(|e| e.path().join("summary.json")) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let Ok(s) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            let broke = s["anomalies"]
                .as_object()
                .is_some_and(|a| a.values().any(|v| v.as_u64().unwrap_or(0) > 0));
            if broke {
                lines.push(format!(
                    "{}: anomalies {} examples {} faults {}",
                    s["strategy"], s["anomalies"], s["anomaly_examples"], s["faults"]
                ));
            }
        }
    }
    lines.join("\n")
}

/// Checks that the run folder has `plots/<name>.svg` and `.png` for each
/// of `names`, each a real image, that `report.md` links both files, and
/// returns the SVGs' text in the order of `names`.
pub fn assert_plot_files(dir: &std::path::Path, names: &[&str]) -> Vec<String> {
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    names
        .iter()
        .map(|name| {
            let png = std::fs::read(dir.join(format!("plots/{name}.png")))
                .unwrap_or_else(|e| panic!("plots/{name}.png in {}: {e}", dir.display()));
            assert!(
                png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n"),
                "plots/{name}.png is no PNG ({} bytes)",
                png.len()
            );
            let svg = std::fs::read_to_string(dir.join(format!("plots/{name}.svg")))
                .unwrap_or_else(|e| panic!("plots/{name}.svg in {}: {e}", dir.display()));
            assert!(svg.starts_with("<svg"), "plots/{name}.svg: {svg}");
            for file in [format!("(plots/{name}.png)"), format!("(plots/{name}.svg)")] {
                assert!(
                    report.contains(&file),
                    "report.md does not link {file}: {report}"
                );
            }
            svg
        })
        .collect()
}

/// A results folder for a test's runs. When it is dropped, the test
/// passed or panicked, `delaybench clean --yes` removes what those runs
/// kept: each namespace a `summary.json` in it names (on that summary's
/// database), with its queues and Redis keys, and nothing else.
/// [`Scratch::track`] adds namespaces a test made itself.
#[derive(Debug)]
pub struct Scratch(tempfile::TempDir, std::sync::Mutex<Vec<(String, String)>>);

impl Scratch {
    pub fn new() -> Scratch {
        Scratch(
            tempfile::tempdir().expect("temporary folder"),
            Default::default(),
        )
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }

    /// Removes namespace `ns` on database `db_url` (and its queues and
    /// keys) on drop too.
    pub fn track(&self, db_url: &str, ns: &str) {
        self.1
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((db_url.to_string(), ns.to_string()));
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut args = vec![
            "clean".to_string(),
            "--yes".into(),
            "--out".into(),
            self.path().display().to_string(),
        ];
        let (mut dbs, mut namespaces) = (Vec::new(), Vec::new());
        let mut dirs = vec![self.path().to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.file_name().is_some_and(|n| n == "summary.json") {
                    let Ok(text) = std::fs::read_to_string(&path) else {
                        continue;
                    };
                    let Ok(summary) = serde_json::from_str::<serde_json::Value>(&text) else {
                        continue;
                    };
                    let db = &summary["database"];
                    if let (Some(url), Some(ns)) = (db["url"].as_str(), db["namespace"].as_str()) {
                        // A SQLite namespace is a file path: its stem names the rest.
                        let ns = std::path::Path::new(ns)
                            .file_stem()
                            .map(|s| s.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        if !url.starts_with("sqlite") && !dbs.contains(&url.to_string()) {
                            dbs.push(url.to_string());
                        }
                        if !ns.is_empty() && !namespaces.contains(&ns) {
                            namespaces.push(ns);
                        }
                    }
                }
            }
        }
        for (url, ns) in self.1.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if !url.starts_with("sqlite") && !dbs.contains(url) {
                dbs.push(url.clone());
            }
            if !namespaces.contains(ns) {
                namespaces.push(ns.clone());
            }
        }
        if namespaces.is_empty() {
            return;
        }
        for db in dbs {
            args.extend(["--db".into(), db]);
        }
        for ns in namespaces {
            args.extend(["--prefix".into(), ns]);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_delaybench"))
            .args(&args)
            .env("CI", "true")
            .env_remove("DELAYBENCH_DB")
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "test cleanup: delaybench clean failed: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => eprintln!("test cleanup: cannot run delaybench clean: {e}"),
        }
    }
}

/// `text` with fenced code blocks blanked (line for line, so line numbers
/// stay), so a link, heading or folder shown as a command is not read as
/// one; inline code too unless `keep_inline` (a heading's inline code is
/// part of its anchor).
pub fn without_code(text: &str, keep_inline: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && keep_inline {
            out.push_str(line);
        } else if !fenced {
            let mut in_code = false;
            for c in line.chars() {
                if c == '`' {
                    in_code = !in_code;
                } else if !in_code {
                    out.push(c);
                }
            }
        }
        out.push('\n');
    }
    out
}

/// `target`, written in a file in the folder `base` (both relative to the
/// repository), relative to the repository, `.` and `..` resolved by name;
/// `None` where it climbs above the repository.
pub fn resolve(base: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for segment in base.split('/').chain(target.split('/')) {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}
