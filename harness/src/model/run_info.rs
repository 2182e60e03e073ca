//! `run.json`: what was run, where, on what (scenario, seed, git commit,
//! machine, service versions), so a published run can be reproduced.

use crate::scenario::Scenario;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    pub run_id: String,
    pub started_at: String,
    pub delaybench_version: String,
    /// The last commit that changed the code (anything but run folders
    /// and Markdown), with `-dirty` when the tree had such changes
    /// ([`git_commit`]).
    pub git_commit: String,
    /// `release` or `debug`: how the binary that ran was built (`None` in
    /// runs made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_profile: Option<String>,
    pub command: Vec<String>,
    /// `--repeat N`: each strategy ran N times, interleaved.
    #[serde(default = "one")]
    pub repeat: u32,
    pub scenario_source: String,
    pub scenario: Scenario,
    pub seed: u64,
    /// Strategies requested, in run order (skipped ones included).
    pub strategies: Vec<String>,
    pub database_kind: String,
    pub database_url: String,
    pub database_version: String,
    /// Broker and cache versions, where they could be read (RabbitMQ: with
    /// `rabbitmqctl` on this host, including which plugin serves
    /// `x-delayed-message`).
    #[serde(default)]
    pub services: std::collections::BTreeMap<String, String>,
    /// The build of the plugin serving `x-delayed-message` as the broker
    /// ran it (read from the broker, not the repository), when the run used
    /// RabbitMQ; `None` in runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginBuild>,
    pub machine: Machine,
}

/// Which build of the delayed-message plugin the broker ran: its
/// application, version and a hash of the code the node had loaded
/// (`strategies::leftovers::delayed_plugin_build`). A field that could not
/// be read says `unknown`, and `source` says why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginBuild {
    /// The Erlang application serving `x-delayed-message`
    /// (`delaybench_delayed_exchange`, `rabbitmq_delayed_message_exchange`),
    /// `none` when nothing served it, or `unknown`.
    pub name: String,
    /// Its application version, or `none` / `unknown`.
    pub version: String,
    /// SHA-256 (hex), computed on the node, of its modules' lines
    /// `<module> <md5 hex>\n` in module order, each MD5 as the node loaded
    /// it (`module_info(md5)`, equal to `beam_lib:md5/1` of the `.beam`);
    /// or `unknown` with why.
    pub code_sha256: String,
    /// Each module's MD5 as loaded (or `not-loaded`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub modules: std::collections::BTreeMap<String, String>,
    /// The folder the node loaded the application from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// How it was read, and why anything says `unknown`.
    pub source: String,
}

impl RunInfo {
    /// Writes `run.json` with every password removed: from the command
    /// line, the database URL and the scenario's broker and Redis URLs.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let mut info = self.clone();
        info.command = info
            .command
            .iter()
            .map(|a| strategies::redact::url(a))
            .collect();
        info.database_url = strategies::redact::url(&info.database_url);
        // Its `--set`s were redacted when it was made; this is the backstop.
        info.scenario_source = strategies::redact::text(&info.scenario_source);
        let options = &mut info.scenario.strategies;
        // RabbitMQ's factory default too: its redacted form reads back as
        // the default (`CommonArgs::scenario`), so the folder still runs.
        options.rabbit.url = strategies::redact::url(&options.rabbit.url);
        options.redis_zset.url = strategies::redact::url(&options.redis_zset.url);
        for fault in &mut info.scenario.faults {
            fault.redact();
        }
        if let Some(hook) = &mut info.scenario.before_each_strategy {
            hook.command = super::records::redact_command(&hook.command);
        }
        let path = dir.join("run.json");
        std::fs::write(&path, super::schema::versioned_json(&info)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        info.write_scenario(dir)
    }

    /// `scenario.toml`: the scenario as this run resolved it (the service
    /// URLs of flags and environment in, passwords out), so
    /// `--scenario <run>/scenario.toml` repeats the run.
    fn write_scenario(&self, dir: &Path) -> Result<()> {
        let redacted = self
            .command
            .iter()
            .any(|a| strategies::redact::was_redacted(a))
            || [
                &self.scenario.strategies.rabbit.url,
                &self.scenario.strategies.redis_zset.url,
            ]
            .iter()
            // The default broker's reads back by itself.
            .any(|u| {
                strategies::redact::was_redacted(u)
                    && !crate::scenario::is_redacted_default_broker(u)
            });
        let strategies = self.strategies.join(",");
        let verb = if self.command.get(1).is_some_and(|c| c == "sweep") {
            "sweep"
        } else {
            "run"
        };
        let header = format!(
            "# The scenario of run {id}, from {source}, with every default filled in.\n\
             # Repeat the run with:\n\
             #   delaybench {verb} --scenario scenario.toml --strategies {strategies} --db {db}\n{note}\n",
            id = self.run_id,
            source = self.scenario_source,
            db = self.database_url,
            note = if redacted {
                "# Passwords were removed (***): put them back, or pass --db / --amqp / --redis.\n"
            } else {
                ""
            },
        );
        let path = dir.join("scenario.toml");
        std::fs::write(&path, header + &self.scenario.to_toml()?)
            .with_context(|| format!("writing {}", path.display()))
    }

    pub fn read(dir: &Path) -> Result<RunInfo> {
        let path = dir.join("run.json");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (is this a delaybench run folder?)",
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

fn one() -> u32 {
    1
}

/// The machine the run happened on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_mib: u64,
}

impl Machine {
    /// Reads the machine's facts through `sysinfo`; a field stays empty
    /// (or 0) where the system does not tell.
    pub fn detect() -> Machine {
        use sysinfo::{CpuRefreshKind, MemoryRefreshKind, RefreshKind, System};
        // The CPU list (with each CPU's brand) and the RAM, nothing more.
        let system = System::new_with_specifics(
            RefreshKind::nothing()
                .with_cpu(CpuRefreshKind::nothing())
                .with_memory(MemoryRefreshKind::nothing().with_ram()),
        );
        Machine {
            hostname: System::host_name().unwrap_or_default(),
            os: os_pretty_name(),
            kernel: System::kernel_version().unwrap_or_default(),
            cpu_model: system
                .cpus()
                .first()
                .map(|cpu| cpu.brand().to_string())
                .unwrap_or_default(),
            // The CPUs this process may use (affinity, cgroup quota), as
            // a run could use them: sysinfo counts every CPU the machine has.
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            memory_mib: system.total_memory() / (1024 * 1024),
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "{} CPUs ({}), {} MiB, {}",
            self.cpus, self.cpu_model, self.memory_mib, self.os
        )
    }
}

/// The distribution's own name for itself (`PRETTY_NAME` in
/// /etc/os-release, "Debian GNU/Linux 12 (bookworm)"), or "". Read here:
/// sysinfo gives `NAME` and `VERSION_ID` apart, and its long version
/// ("Linux (Debian GNU/Linux 12)") is not what earlier runs recorded.
fn os_pretty_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .unwrap_or_default()
}

/// How this binary was built: `release` or `debug`.
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// The commit this binary was built from (`build.rs`), or `unknown`.
pub fn build_commit() -> &'static str {
    option_env!("DELAYBENCH_BUILD_COMMIT").unwrap_or("unknown")
}

/// The last commit that changed the code, `-dirty` if the work tree has
/// changes to anything but run folders and Markdown, or `unknown`.
///
/// Code is everything but run folders (`results/`) and Markdown: a commit
/// that only adds runs or edits documentation builds the same binary and
/// runs the same scenarios, so it leaves this commit where it was. That
/// lets a reference set longer than one sitting be run in parts at one
/// code commit, each part committed as it finishes.
pub fn git_commit() -> String {
    git_commit_in(Path::new("."))
}

/// [`git_commit`] of the work tree at `dir`.
fn git_commit_in(dir: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let code_commit = git(&[
        "log",
        "-1",
        "--format=%H",
        "--",
        ":(top)",
        ":(top,exclude)results",
        ":(top,exclude,glob)**/*.md",
    ])
    .filter(|c| !c.is_empty());
    match code_commit.or_else(|| git(&["rev-parse", "HEAD"])) {
        Some(commit) => {
            // Results and documentation are not code: a run writing into
            // a tracked results folder (the reference set's), or a README
            // being edited while a sweep runs, does not make the tree
            // dirty. No Markdown file is compiled in (every `include_str!`
            // names a .toml).
            let dirty = git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)results",
                ":(exclude,glob)**/*.md",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        None => "unknown".into(),
    }
}

/// The broker as run.json names it, read over AMQP (server properties and
/// a probe declare), so it is right for a broker in a container too.
pub async fn rabbitmq_description(url: &str) -> String {
    match strategies::rabbit::broker_facts(url).await {
        Ok(facts) => format!(
            "{}, {}",
            facts.version,
            if facts.delayed_exchange {
                "x-delayed-message exchange type available"
            } else {
                "no x-delayed-message exchange type"
            }
        ),
        Err(e) => format!("unknown ({e})"),
    }
}

/// The build of the plugin serving `x-delayed-message` on the broker of
/// `url`, as the broker reports it ([`PluginBuild`]).
pub async fn delayed_plugin_build(url: &str) -> PluginBuild {
    let b = strategies::leftovers::delayed_plugin_build(url).await;
    PluginBuild {
        name: b.name,
        version: b.version,
        code_sha256: b.code_sha256,
        modules: b.modules,
        dir: b.dir,
        source: b.source,
    }
}

#[cfg(test)]
mod commit_tests {
    use std::path::Path;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// Edits to run folders and Markdown leave a run's commit clean; an
    /// edit to anything else (code, a scenario) marks it `-dirty`.
    #[test]
    fn only_changes_to_what_builds_or_configures_a_run_make_it_dirty() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("results/r1")).unwrap();
        std::fs::create_dir_all(root.join("harness/src")).unwrap();
        let files = [
            "README.md",
            "harness/notes.md",
            "results/r1/run.json",
            "harness/src/main.rs",
            "scenario.toml",
        ];
        for f in files {
            std::fs::write(root.join(f), "a\n").unwrap();
        }
        git(root, &["init", "-q"]);
        git(root, &["add", "."]);
        git(root, &["commit", "-q", "-m", "first"]);
        let commit = super::git_commit_in(root);
        assert_eq!(commit.len(), 40, "{commit}");
        for f in ["README.md", "harness/notes.md", "results/r1/run.json"] {
            std::fs::write(root.join(f), "b\n").unwrap();
        }
        assert_eq!(super::git_commit_in(root), commit);
        for f in ["harness/src/main.rs", "scenario.toml"] {
            std::fs::write(root.join(f), "b\n").unwrap();
            assert_eq!(super::git_commit_in(root), format!("{commit}-dirty"), "{f}");
            git(root, &["checkout", "-q", f]);
        }
        assert_eq!(super::git_commit_in(root), commit);
        // Committing runs and documentation leaves the code commit as it
        // was; committing code moves it.
        for f in ["README.md", "results/r1/run.json"] {
            std::fs::write(root.join(f), "c\n").unwrap();
        }
        git(root, &["commit", "-qam", "runs and notes"]);
        assert_eq!(super::git_commit_in(root), commit);
        std::fs::write(root.join("scenario.toml"), "c\n").unwrap();
        git(root, &["commit", "-qam", "code"]);
        let moved = super::git_commit_in(root);
        assert!(moved != commit && moved.len() == 40, "{moved}");
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// What `sysinfo` reads is what run.json held when /proc was parsed
    /// by hand.
    #[test]
    fn the_machine_is_what_linux_tells() {
        let machine = super::Machine::detect();
        let read = |path: &str| std::fs::read_to_string(path).unwrap();
        assert_eq!(machine.hostname, read("/proc/sys/kernel/hostname").trim());
        assert_eq!(machine.kernel, read("/proc/sys/kernel/osrelease").trim());
        let cpuinfo = read("/proc/cpuinfo");
        if let Some(model) = cpuinfo.lines().find_map(|l| l.strip_prefix("model name")) {
            let model = model.trim_start().trim_start_matches(':').trim();
            assert_eq!(machine.cpu_model, model);
        }
        let total_kib: u64 = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        assert_eq!(machine.memory_mib, total_kib / 1024);
        if let Ok(release) = std::fs::read_to_string("/etc/os-release") {
            let pretty = release
                .lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"'));
            assert_eq!(Some(machine.os.as_str()), pretty.or(Some("")));
        }
        assert!(machine.cpus > 0);
    }
}
