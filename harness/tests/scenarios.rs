//! Scenarios by name, from any folder; the scenario a run folder keeps;
//! the service URLs from flags and environment; `list` probing services.

mod common;

use common::run_dir_of;
use std::path::Path;
use std::process::{Command, Output};

/// `delaybench` started in `cwd`, with `env` added.
fn delaybench_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_delaybench"));
    command.current_dir(cwd).args(args).env("CI", "true");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("run delaybench")
}

#[test]
fn a_preset_runs_by_name_from_another_folder_and_the_run_keeps_its_scenario() {
    let elsewhere = common::Scratch::new();
    let out = elsewhere.path().join("results");
    let o = delaybench_in(
        elsewhere.path(),
        &[
            "run",
            "--scenario",
            "mixed-timeouts",
            "--strategies",
            "timing-wheel",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = run_dir_of(&o);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["scenario_source"], "mixed-timeouts (bundled preset)");
    // The folder's scenario.toml says how to repeat the run and loads
    // back to the very scenario run.json recorded.
    let saved = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    assert!(
        saved.contains("delaybench run --scenario scenario.toml --strategies timing-wheel"),
        "{saved}"
    );
    let o = delaybench_in(&dir, &["scenario", "show", "mixed-timeouts"], &[]);
    assert!(o.status.success());
    let parsed: toml::Value = toml::from_str(&saved).unwrap();
    assert_eq!(parsed["name"].as_str(), Some("mixed-timeouts"));
    assert_eq!(parsed["seed"].as_integer(), run["seed"].as_i64());
    assert_eq!(
        parsed["timeouts"].as_array().unwrap().len(),
        run["scenario"]["timeouts"].as_array().unwrap().len()
    );
}

#[test]
fn a_repository_path_to_a_preset_works_from_another_folder_and_a_wrong_name_lists_them() {
    let elsewhere = common::Scratch::new();
    let o = delaybench_in(
        elsewhere.path(),
        &["scenario", "show", "scenarios/chaos.toml"],
        &[],
    );
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("name = \"chaos\""));
    let o = delaybench_in(
        elsewhere.path(),
        &["run", "--scenario", "chaoss", "--out", "x"],
        &[],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("scenario chaoss")
            && stderr.contains("chaos-short")
            && stderr.contains("scenario list"),
        "{stderr}"
    );
    assert!(
        !elsewhere.path().join("x").exists(),
        "a bad scenario leaves nothing"
    );
}

#[test]
fn scenario_init_writes_a_runnable_file_and_never_overwrites() {
    let dir = common::Scratch::new();
    let file = dir.path().join("mine.toml");
    let o = delaybench_in(dir.path(), &["scenario", "init", "mine.toml"], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("# Canceller instances per strategy"));
    let o = delaybench_in(dir.path(), &["scenario", "init", "mine.toml"], &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("never overwrites"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

#[test]
fn list_probes_the_services_the_environment_names() {
    let dir = common::Scratch::new();
    // Nothing listens on port 1: Redis is down, and only the strategies
    // needing Redis say so.
    let o = delaybench_in(
        dir.path(),
        &["list"],
        &[
            ("DELAYBENCH_REDIS", "redis://127.0.0.1:1"),
            ("DELAYBENCH_DB", "sqlite://"),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("redis     DOWN  redis://127.0.0.1:1"),
        "{text}"
    );
    assert!(text.contains("database  up"), "{text}");
    assert!(text.contains("rabbitmq  up"), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing: {text}"))
            .to_string()
    };
    assert!(
        line("redis-zset").contains("cannot run: Redis down"),
        "{text}"
    );
    assert!(line("rabbit-delayed").contains("can run now"), "{text}");
    assert!(line("db-scan").contains("can run now"), "{text}");
}

#[test]
fn a_flag_url_reaches_the_strategy_and_its_error_names_it() {
    let dir = common::Scratch::new();
    let o = delaybench_in(
        dir.path(),
        &[
            "run",
            "--scenario",
            "quick",
            "--strategies",
            "redis-zset",
            "--redis",
            "redis://:hunter2@127.0.0.1:1",
            "--out",
            "r",
        ],
        &[],
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(all.contains("127.0.0.1:1"), "{all}");
    assert!(!all.contains("hunter2"), "the password leaked: {all}");
    // The strategy was reported as not run, with the URL, in the run folder.
    let run_dir = std::fs::read_dir(dir.path().join("r"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let summary = std::fs::read_to_string(run_dir.join("redis-zset/summary.json")).unwrap();
    assert!(
        summary.contains("127.0.0.1:1") && !summary.contains("hunter2"),
        "{summary}"
    );
    let saved = std::fs::read_to_string(run_dir.join("scenario.toml")).unwrap();
    assert!(
        saved.contains("redis://:***@127.0.0.1:1") && saved.contains("Passwords were removed"),
        "{saved}"
    );
}
