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
