//! The results index (`delaybench index`): the committed
//! `results/reference/index.html` links every committed reference run's
//! reports (each link resolves), and renders in headless Chromium with a
//! row per run and its plots. (`delaybench reference readme --check`, in
//! `reference.rs`, fails when the committed page is not what the folders
//! give.)

use std::path::{Path, PathBuf};
use std::process::Command;

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/reference")
}

fn runs() -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(reference())
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("run.json").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    runs.sort();
    runs
}

#[test]
fn the_committed_index_links_every_reference_run() {
    let page = std::fs::read_to_string(reference().join("index.html")).unwrap();
    let runs = runs();
    assert!(runs.len() >= 5, "{runs:?}");
    for run in &runs {
        // Every report the folder has (a sweep has report.md only), and
        // report.md always.
        assert!(reference().join(run).join("report.md").exists(), "{run}");
        for report in ["report.html", "report.md"] {
            let href = format!("href=\"{run}/{report}\"");
            let exists = reference().join(run).join(report).exists();
            assert_eq!(page.contains(&href), exists, "{href} in index.html");
        }
    }
    assert_eq!(page.matches("<tr id=\"run-").count(), runs.len());
}

#[test]
fn the_index_renders_in_headless_chromium() {
    let browser = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect(
            "no Chromium here: `apt-get install -y chromium` (scripts/test-prepare.sh installs it \
             as root)",
        );
    let profile = tempfile::tempdir().unwrap();
    let page = reference().join("index.html").canonicalize().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            &format!("--user-data-dir={}", profile.path().display()),
            "--dump-dom",
            &format!("file://{}", page.display()),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    // The browser's own DOM: the rows, each run's link and both plots.
    assert_eq!(dom.matches("<tr id=\"run-").count(), runs().len(), "{dom}");
    for run in runs() {
        assert!(dom.contains(&format!("{run}/report.md")), "{run}");
    }
    assert_eq!(dom.matches("<svg").count(), 2, "{dom}");
    assert!(dom.matches("<polyline").count() >= 6, "a line per strategy");
}
