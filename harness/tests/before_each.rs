//! `[before-each-strategy]`: the scenario's command runs, for real, before
//! every strategy's run; its record reaches summary.json, run.json and the
//! report; a command that fails, cannot start or times out fails that
//! strategy with the command named, and the next strategy still runs.

mod common;

use common::{delaybench, run_dir_of, stderr};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// A short load on SQLite: two strategies need no service.
const SMALL: &str = r#"
name = "hooked"
seed = 11
warmup = "300ms"
duration = "1s"
drain = "1s"
rate = 30.0

[[timeouts]]
after = "500ms"

[strategies.db-scan]
interval = "50ms"
"#;

/// Runs SMALL plus `hook` (the `[before-each-strategy]` table's body) with
/// db-scan and timing-wheel on SQLite.
fn run_with_hook(out: &Path, hook: &str) -> Output {
    let scenario = out.join("hooked.toml");
    std::fs::write(
        &scenario,
        format!("{SMALL}\n[before-each-strategy]\n{hook}\n"),
    )
    .unwrap();
    delaybench(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--strategies",
        "db-scan,timing-wheel",
        "--out",
        out.join("results").to_str().unwrap(),
    ])
}

fn summary(run: &Path, strategy: &str) -> Value {
    let text = std::fs::read_to_string(run.join(strategy).join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn sh(script: &str) -> String {
    format!(
        "command = [\"sh\", \"-c\", {}]",
        serde_json::to_string(script).unwrap()
    )
}

#[test]
fn a_hook_runs_once_before_each_strategy_and_the_run_records_it() {
    let out = common::Scratch::new();
    let log = out.path().join("hook.log");
    // Each run appends a line, and the namespaces that exist then: the
    // hook comes before the strategy's namespace is made.
    let script = format!(
        "echo ran >> {log}; find {results} -name '*.sqlite' | wc -l >> {log}; \
         echo said hello to amqp://guest:s3cret@127.0.0.1:5681/%2f",
        log = log.display(),
        results = out.path().join("results").display()
    );
    let o = run_with_hook(out.path(), &sh(&script));
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!((lines[0].as_str(), lines[2].as_str()), ("ran", "ran"));
    // Before the first strategy no SQLite namespace existed, before the
    // second only the first's.
    assert_eq!((lines[1].trim(), lines[3].trim()), ("0", "1"), "{lines:?}");
    let run = run_dir_of(&o);
    for strategy in ["db-scan", "timing-wheel"] {
        let s = summary(&run, strategy);
        assert_eq!(s["status"], "ok", "{s:#}");
        let hook = &s["before_strategy"];
        assert_eq!(hook["command"][0], "sh", "{s:#}");
        assert_eq!(hook["exit_status"], "exit status: 0");
        assert!(hook["error"].is_null());
        assert!(hook["duration_ms"].as_u64().is_some());
        assert_eq!(
            hook["cwd"].as_str().unwrap(),
            std::env::current_dir().unwrap().display().to_string()
        );
        let said = std::fs::read_to_string(
            run.join(strategy)
                .join(hook["stdout_log"].as_str().unwrap()),
        )
        .unwrap();
        // A password the command printed is not kept.
        assert_eq!(said, "said hello to amqp://guest:***@127.0.0.1:5681/%2f\n");
        assert_eq!(s["orders"]["pending"], 0, "{s:#}");
    }
    // The run keeps the command with its scenario, and the report says it ran.
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(info["scenario"]["before-each-strategy"]["command"][0], "sh");
    let saved = std::fs::read_to_string(run.join("scenario.toml")).unwrap();
    assert!(saved.contains("[before-each-strategy]"), "{saved}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("Before each strategy: `sh -c echo ran")
            && report
                .matches("before the strategy: `sh -c echo ran")
                .count()
                == 2,
        "{report}"
    );
}

#[test]
fn a_failing_hook_fails_its_strategy_with_the_command_named_and_the_next_one_runs() {
    let out = common::Scratch::new();
    let seen = out.path().join("seen");
    // Fails the first time (the first strategy), succeeds the second.
    let script = format!(
        "if [ -e {seen} ]; then exit 0; fi; touch {seen}; echo starting node dlb1; \
         echo 'node dlb1 did not come back' >&2; echo 'at amqp://guest:s3cret@h:5681' >&2; exit 3",
        seen = seen.display()
    );
    let o = run_with_hook(out.path(), &sh(&script));
    // The run is written, and exits non-zero for the failed strategy.
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("db-scan failed"), "{err}");
    let run = run_dir_of(&o);
    let failed = summary(&run, "db-scan");
    assert_eq!(failed["status"], "failed", "{failed:#}");
    let reason = failed["reason"].as_str().unwrap();
    assert!(
        reason.contains("before-each-strategy command `sh -c if [ -e")
            && reason.contains("exit status: 3")
            && reason.contains("node dlb1 did not come back")
            && reason.contains("amqp://guest:***@h:5681")
            && !reason.contains("s3cret"),
        "{reason}"
    );
    // Its output is kept beside the summary, each stream in its file.
    let log = |name: &str| std::fs::read_to_string(run.join("db-scan").join(name)).unwrap();
    assert_eq!(
        (
            log("before-each-strategy.stdout.log"),
            log("before-each-strategy.stderr.log")
        ),
        (
            "starting node dlb1\n".to_string(),
            "node dlb1 did not come back\nat amqp://guest:***@h:5681\n".to_string()
        )
    );
    assert_eq!(failed["before_strategy"]["exit_status"], "exit status: 3");
    // The strategy never started: no namespace, no orders.
    assert!(failed["database"]["namespace"].is_null(), "{failed:#}");
    assert_eq!(failed["orders"]["created"], 0);
    let next = summary(&run, "timing-wheel");
    assert_eq!(next["status"], "ok", "{next:#}");
    assert_eq!(next["before_strategy"]["exit_status"], "exit status: 0");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("**db-scan** failed: before-each-strategy command")
            && report.contains("node dlb1 did not come back"),
        "{report}"
    );
}

#[test]
fn a_hook_that_cannot_start_or_runs_too_long_fails_every_strategy() {
    let out = common::Scratch::new();
    let o = run_with_hook(out.path(), "command = [\"./no-such-script.sh\", \"x\"]");
    assert!(!o.status.success());
    let run = run_dir_of(&o);
    for strategy in ["db-scan", "timing-wheel"] {
        let s = summary(&run, strategy);
        assert_eq!(s["status"], "failed", "{s:#}");
        let reason = s["reason"].as_str().unwrap();
        assert!(
            reason
                .contains("could not run the before-each-strategy command `./no-such-script.sh x`")
                && reason.contains("folder delaybench runs in"),
            "{reason}"
        );
        assert!(s["before_strategy"]["exit_status"].is_null());
    }

    // The command leaves a child of its own running in the background
    // (its pid noted in a file): the timeout ends that one too.
    let out = common::Scratch::new();
    let pids = out.path().join("background.pids");
    let started = std::time::Instant::now();
    let o = run_with_hook(
        out.path(),
        &format!(
            "{}\ntimeout = \"300ms\"",
            sh(&format!(
                "echo waiting >&2; sleep 30 & echo $! >> {}; sleep 30",
                pids.display()
            ))
        ),
    );
    assert!(!o.status.success());
    // Killed at its timeout, not waited for: two strategies, well under 30 s.
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    let run = run_dir_of(&o);
    for strategy in ["db-scan", "timing-wheel"] {
        let s = summary(&run, strategy);
        assert_eq!(s["status"], "failed", "{s:#}");
        let reason = s["reason"].as_str().unwrap();
        assert!(
            reason.contains("was still running after its timeout of 300ms")
                && reason.contains("waiting"),
            "{reason}"
        );
    }
    let pids = std::fs::read_to_string(&pids).unwrap();
    assert_eq!(pids.lines().count(), 2, "{pids}");
    for pid in pids.lines() {
        // Gone, or a zombie nobody has reaped yet: not running.
        let running = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .starts_with('Z')
            })
        };
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while running() && std::time::Instant::now() < give_up {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            !running(),
            "the timed-out command's background child {pid} still runs"
        );
    }
}
