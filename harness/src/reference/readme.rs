//! The text the reference set feeds: README.md's generated sections
//! (between [`begin`] and [`end`] markers: the answer table, the chaos
//! table, the clusters'), the whole of `results/reference/README.md`, and
//! the decision-record draft beside it. All of it is rendered from the
//! folders the manifest names, with the same cells the run reports print
//! ([`crate::report::fig`]), so a number here is the report's number.
//! `delaybench reference readme --check` (run by the tests) fails when the
//! committed text differs from what the folders give: a hand edit of a
//! number fails CI.

use super::set::{short, Manifest, MANIFEST, SLA};
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use crate::model::sweep::SweepResult;
use crate::report::{self, as_count, as_ms, fig, markdown_table, RunTables, Shown};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use strategies::checker::Anomaly;

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

/// The decision-record draft's file in the reference folder.
const ADR_FILE: &str = "adr-draft.md";

/// One folder of the set, loaded.
enum Loaded {
    Run {
        info: RunInfo,
        summaries: Vec<Summary>,
        twins: Vec<Summary>,
    },
    Sweep {
        info: RunInfo,
        result: SweepResult,
    },
}

impl Loaded {
    fn info(&self) -> &RunInfo {
        match self {
            Loaded::Run { info, .. } | Loaded::Sweep { info, .. } => info,
        }
    }

    fn summaries(&self) -> &[Summary] {
        match self {
            Loaded::Run { summaries, .. } => summaries,
            Loaded::Sweep { .. } => &[],
        }
    }
}

/// The reference set: its manifest and every folder it names.
struct Set {
    dir: PathBuf,
    manifest: Manifest,
    loaded: BTreeMap<String, (String, Loaded)>,
}

impl Set {
    fn load(dir: &Path) -> Result<Set> {
        let manifest = Manifest::read(dir)?;
        let mut loaded = BTreeMap::new();
        for e in &manifest.entries {
            let Some(folder) = &e.folder else { continue };
            let path = dir.join(folder);
            let l = if path.join("sweep.json").exists() {
                Loaded::Sweep {
                    info: RunInfo::read(&path)?,
                    result: SweepResult::read(&path)?,
                }
            } else {
                let (info, summaries) = report::load(&path)?;
                let twins = report::load_twins(&path, &info)?;
                Loaded::Run {
                    info,
                    summaries,
                    twins,
                }
            };
            loaded.insert(e.name.clone(), (folder.clone(), l));
        }
        Ok(Set {
            dir: dir.to_path_buf(),
            manifest,
            loaded,
        })
    }

    /// Where the folders come from, from their own `run.json`: `at commit
    /// X (release build, clean tree)` only when every one says so.
    fn provenance(&self) -> String {
        let infos: Vec<&RunInfo> = self.loaded.values().map(|(_, l)| l.info()).collect();
        let mut commits: Vec<&str> = infos.iter().map(|i| i.git_commit.as_str()).collect();
        commits.sort_unstable();
        commits.dedup();
        let mut profiles: Vec<&str> = infos
            .iter()
            .map(|i| i.build_profile.as_deref().unwrap_or("unrecorded"))
            .collect();
        profiles.sort_unstable();
        profiles.dedup();
        let dirty = commits.iter().any(|c| c.ends_with("-dirty"));
        match (commits.as_slice(), profiles.as_slice()) {
            ([one], ["release"]) if !dirty => {
                format!("at commit `{}` (release build, clean tree)", short(one))
            }
            _ => format!(
                "**not from one clean release build**: commits {}; builds {}",
                commits
                    .iter()
                    .map(|c| format!(
                        "`{}`{}",
                        short(c),
                        if c.ends_with("-dirty") {
                            " (dirty)"
                        } else {
                            ""
                        }
                    ))
                    .collect::<Vec<_>>()
                    .join(", "),
                profiles.join(", ")
            ),
        }
    }

    fn get(&self, name: &str) -> Option<&(String, Loaded)> {
        self.loaded.get(name)
    }

    fn summary(&self, entry: &str, strategy: &str) -> Option<&Summary> {
        self.get(entry)?
            .1
            .summaries()
            .iter()
            .find(|s| s.strategy == strategy && s.status == Status::Ok)
    }
}

/// Renders everything and writes it: the reference README, the draft and
/// its evidence, and README.md's section.
pub fn write_all(dir: &Path, readme: &Path) -> Result<()> {
    for (path, text) in render_all(dir, readme)? {
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Fails, naming the file and the first line that differs, where the
/// committed text is not what the folders give.
pub fn check_all(dir: &Path, readme: &Path) -> Result<()> {
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
        dirs: set.manifest.folders(dir),
        sla: SLA.to_string(),
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
    Ok(files)
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

/// The path from the README's folder to the reference folder, for links.
fn relative_to(readme: &Path, dir: &Path) -> String {
    let base = readme.parent().unwrap_or(Path::new(""));
    dir.strip_prefix(base)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| dir.to_string_lossy().into_owned())
}

/// The strategies of the answer table, in its order.
const ANSWER: [&str; 6] = [
    "db-scan",
    "db-timer",
    "timing-wheel",
    "rabbit-ttl",
    "rabbit-delayed",
    "redis-zset",
];

/// A cell of entry `entry`'s figure `key` for `strategy`, or `not run`.
fn cell(set: &Set, entry: &str, strategy: &str, key: &str, format: fn(f64) -> String) -> String {
    match set.summary(entry, strategy) {
        Some(s) => fig(s, key, format),
        None => "not run".into(),
    }
}

/// Missed cancels under the chaos run, with how many faults hit it.
fn chaos_cell(set: &Set, strategy: &str) -> String {
    let Some(s) = set.summary("chaos", strategy) else {
        return "not run".into();
    };
    let hit = s.faults.iter().filter(|f| f.took_effect()).count();
    let missed_target = s
        .faults
        .iter()
        .filter(|f| matches!(f.reach(), crate::faults::FaultReach::MissedTarget(_)))
        .count();
    format!(
        "{} ({hit} of {} faults acted{})",
        s.anomalies.get(Anomaly::MissedCancels),
        s.faults.len(),
        if missed_target > 0 {
            format!(", {missed_target} missed their target")
        } else {
            String::new()
        }
    )
}

/// The sweep's maximum sustainable rate and its share of the ceiling.
fn sweep_cell(set: &Set, strategy: &str) -> String {
    let Some((_, Loaded::Sweep { result, .. })) = set.get("sweep") else {
        return "not run".into();
    };
    match result.strategies.iter().find(|s| s.strategy == strategy) {
        Some(s) => {
            let max = match (s.max_rate, s.share_of_ceiling, s.first_failed_rate) {
                (Some(rate), Some(share), _) => format!("{rate:.0} ({:.0} %)", share * 100.0),
                (Some(rate), None, _) => format!("{rate:.0}"),
                (None, _, Some(failed)) => format!("< {failed:.0} (its first step failed)"),
                (None, _, None) => "none held".into(),
            };
            match s.reruns_behind_max() {
                0 => max,
                n => format!("{max}, {n} run(s) rerun after a harness stall"),
            }
        }
        None => "not run".into(),
    }
}

fn needs(strategy: &str) -> String {
    match strategies::registry::info(strategy) {
        Ok(i) if i.requires.is_empty() => "nothing".into(),
        Ok(i) => i
            .requires
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
        Err(_) => "-".into(),
    }
}

/// The smallest and largest `n` of `strategies` in entry `entry`.
fn n_range(set: &Set, entry: &str, strategies: &[&str]) -> String {
    let ns: Vec<u64> = strategies
        .iter()
        .filter_map(|s| set.summary(entry, s))
        .map(|s| s.lateness_us.count)
        .collect();
    match (ns.iter().min(), ns.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
        _ => "-".into(),
    }
}

/// README.md's section: the answer table and what it rests on.
fn answer(set: &Set, reference: &str) -> Result<String> {
    let mut out = String::new();
    let info = set
        .get("quick")
        .map(|(_, l)| l.info())
        .context("the reference set has no quick run")?;
    let services: Vec<String> = info
        .services
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        out,
        "\nFrom the committed [reference set]({reference}/README.md), made by `delaybench reference` \
         {} on {}: {}; {}. Every figure below is generated from its folders.\n",
        set.provenance(),
        info.machine.summary(),
        info.database_version
            .split(" on ")
            .next()
            .unwrap_or(&info.database_version),
        services.join(", ")
    );
    if let Some((folder, _)) = set.get("quick") {
        let _ = writeln!(
            out,
            "![lateness CDF of the six strategies, quick scenario]({reference}/{folder}/plots/lateness-cdf.png)\n"
        );
    }
    let mut rows = vec![[
        "strategy",
        "p90 ms, quick",
        "p99 ms, busy",
        "DB rows read / cancel, busy",
        "CPU µs / cancel, busy",
        "max orders/s (share of ceiling), sweep",
        "missed under chaos (faults that acted)",
        "same, +fallback",
        "needs besides the DB",
    ]
    .map(String::from)
    .to_vec()];
    for strategy in ANSWER {
        let rows_read = set
            .summary("busy", strategy)
            .map(report::rows_read_text)
            .unwrap_or_else(|| "not run".into());
        let fallback = format!("{strategy}+fallback");
        rows.push(vec![
            strategy.to_string(),
            cell(set, "quick", strategy, "p90", as_ms),
            cell(set, "busy", strategy, "p99", as_ms),
            rows_read,
            cell(set, "busy", strategy, "cpu_us_per_cancel", as_count),
            sweep_cell(set, strategy),
            chaos_cell(set, strategy),
            if strategies::registry::Variant::parse(&fallback).is_ok() {
                chaos_cell(set, &fallback)
            } else {
                "- (no fallback variant)".into()
            },
            needs(strategy),
        ]);
    }
    markdown_table(&mut out, &rows);
    let link = |entry: &str| {
        set.get(entry)
            .map(|(folder, _)| format!("[{entry}]({reference}/{folder}/report.md)"))
            .unwrap_or_else(|| format!("{entry} (not run)"))
    };
    let _ = writeln!(
        out,
        "Lateness percentiles pool the samples of {} interleaved repetitions (n = {} per \
         strategy in {}, {} in {}), with the repetitions' own min–max beside them; costs are \
         the repetitions' median (min–max); rows read are the canceller's own on PostgreSQL \
         (sampled, see the reference README), the whole run's where marked. The rates come from \
         {} (each step {} times, back to back), the missed cancels from {} (one trial; `acted` \
         counts the faults that acted on the strategy: the others could not touch it, hit an \
         instance already down, or never reached their point). More: {}; the draft decision \
         record [{ADR_FILE}]({reference}/{ADR_FILE}).\n",
        info.repeat,
        n_range(set, "quick", &ANSWER),
        link("quick"),
        n_range(set, "busy", &ANSWER),
        link("busy"),
        link("sweep"),
        set.get("sweep").map_or(0, |(_, l)| l.info().repeat),
        link("chaos"),
        [
            "probe-cost",
            "mixed-timeouts",
            "backlog",
            "redis-cluster",
            "rabbitmq-cluster",
            "rabbitmq-cluster-classic"
        ]
        .iter()
        .filter(|e| set.get(e).is_some())
        .map(|e| link(e))
        .collect::<Vec<_>>()
        .join(", ")
    );
    anomaly_sentence(&mut out, set);
    measurement_sentence(&mut out, set);
    Ok(out)
}

/// The chaos run's faults table, as its report prints it.
fn chaos_section(set: &Set, reference: &str) -> Result<String> {
    let mut out = String::new();
    let Some((folder, loaded)) = set.get("chaos") else {
        let _ = writeln!(out, "\nThe reference set has no chaos run.\n");
        return Ok(out);
    };
    let summaries = loaded.summaries();
    let first = summaries
        .iter()
        .find(|s| s.status == Status::Ok && !s.faults.is_empty());
    let _ =
        writeln!(
        out,
        "\nMeasured in [the reference chaos run]({reference}/{folder}/report.md) ({}, one trial, \
         {} instances, {} orders/s): missed cancels per fault, then the totals.\n",
        loaded.info().database_version.split(" on ").next().unwrap_or(""),
        loaded.info().scenario.instances,
        loaded.info().scenario.rate
    );
    if let Some(mut rows) = report::fault_rows(summaries) {
        // `#k` heads the fault columns; the labels follow the table.
        for cell in rows[0].iter_mut().filter(|c| c.starts_with('#')) {
            *cell = cell.split(' ').next().unwrap_or_default().to_string();
        }
        rows[0].push("p99 ms (n)".into());
        for row in rows.iter_mut().skip(1) {
            let p99 = summaries
                .iter()
                .find(|s| s.strategy == row[0])
                .map(|s| format!("{} ({})", fig(s, "p99", as_ms), s.lateness_us.count))
                .unwrap_or_else(|| "-".into());
            row.push(p99);
        }
        markdown_table(&mut out, &rows);
    }
    if let Some(first) = first {
        let labels: Vec<String> = first
            .faults
            .iter()
            .enumerate()
            .map(|(i, f)| format!("#{} {}", i + 1, f.label))
            .collect();
        let _ = writeln!(out, "Faults: {}.\n", labels.join("; "));
    }
    let remedied: Vec<&Summary> = summaries
        .iter()
        .filter(|s| s.strategy.contains("+fallback") || s.strategy.contains("+outbox"))
        .collect();
    let lost: Vec<String> = remedied
        .iter()
        .filter(|s| s.status != Status::Ok || s.anomalies.total() > 0)
        .map(|s| match s.status {
            Status::Ok => format!("{} ({})", s.strategy, s.anomalies.total()),
            other => format!("{} (did not run: {})", s.strategy, other.as_str()),
        })
        .collect();
    let _ = if lost.is_empty() {
        writeln!(
            out,
            "Every one of the {} variants with `+fallback` or `+outbox` had 0 anomalies.\n",
            remedied.len()
        )
    } else {
        writeln!(
            out,
            "**Remedied variants with anomalies, or not run**: {}.\n",
            lost.join(", ")
        )
    };
    Ok(out)
}

/// Cancelled, missed and lateness of each strategy of a cluster run.
fn cluster_rows(summaries: &[Summary], label: &str) -> Vec<Vec<String>> {
    summaries
        .iter()
        .filter(|s| s.status == Status::Ok)
        .map(|s| {
            vec![
                s.strategy.clone(),
                label.to_string(),
                s.orders.cancelled.to_string(),
                s.anomalies.get(Anomaly::MissedCancels).to_string(),
                (s.anomalies.total() - s.anomalies.get(Anomaly::MissedCancels)).to_string(),
                fig(s, "p90", as_ms),
                fig(s, "max", as_ms),
            ]
        })
        .collect()
}

fn cluster_table(set: &Set, reference: &str, entries: &[(&str, &str)], what: &str) -> String {
    let mut out = String::new();
    let ran: Vec<&(&str, &str)> = entries
        .iter()
        .filter(|(e, _)| set.get(e).is_some())
        .collect();
    if ran.is_empty() {
        let _ = writeln!(
            out,
            "\nThis reference set has no {what} run (`delaybench reference --clusters` adds \
             them once the clusters are up); nothing is claimed here.\n"
        );
        return out;
    }
    let links: Vec<String> = ran
        .iter()
        .filter_map(|(e, _)| {
            set.get(e)
                .map(|(folder, _)| format!("[{e}]({reference}/{folder}/report.md)"))
        })
        .collect();
    let _ = writeln!(
        out,
        "\nMeasured in the reference set ({}):\n",
        links.join(", ")
    );
    let mut rows = vec![[
        "strategy",
        "queues or cluster",
        "cancelled",
        "missed",
        "other anomalies",
        "p90 ms",
        "max ms",
    ]
    .map(String::from)
    .to_vec()];
    for (e, label) in ran {
        if let Some((_, l)) = set.get(e) {
            rows.extend(cluster_rows(l.summaries(), label));
        }
    }
    markdown_table(&mut out, &rows);
    let _ = writeln!(
        out,
        "The lateness columns cover the cancels that happened (a missed order has none); \
         `+fallback` rows include its scan interval.\n"
    );
    out
}

fn redis_cluster_section(set: &Set, reference: &str) -> Result<String> {
    Ok(cluster_table(
        set,
        reference,
        &[("redis-cluster", "3 masters, 7001 killed")],
        "Redis Cluster",
    ))
}

fn rabbitmq_cluster_section(set: &Set, reference: &str) -> Result<String> {
    Ok(cluster_table(
        set,
        reference,
        &[
            ("rabbitmq-cluster", "quorum"),
            ("rabbitmq-cluster-classic", "classic"),
        ],
        "RabbitMQ cluster",
    ))
}

/// Which strategies broke an invariant in the runs without faults.
fn anomaly_sentence(out: &mut String, set: &Set) {
    let mut broken = Vec::new();
    for entry in ["quick", "busy", "probe-cost", "mixed-timeouts"] {
        let Some((_, l)) = set.get(entry) else {
            continue;
        };
        for s in l.summaries() {
            let teaching = strategies::registry::info(&s.strategy).is_ok_and(|i| i.is_teaching());
            if s.status != Status::Ok {
                broken.push(format!(
                    "{} in {entry} did not run ({})",
                    s.strategy,
                    s.status.as_str()
                ));
            } else if !teaching && s.anomalies.total() > 0 {
                broken.push(format!(
                    "{} in {entry} ({})",
                    s.strategy,
                    s.anomalies.total()
                ));
            }
        }
    }
    let _ = if broken.is_empty() {
        writeln!(
            out,
            "No strategy broke an invariant in quick, busy, probe-cost or mixed-timeouts (every \
             anomaly 0).\n"
        )
    } else {
        writeln!(
            out,
            "**Anomalies, or strategies that did not run, without faults**: {}.\n",
            broken.join(", ")
        )
    };
}

/// What the measurement costs, from the probe-cost run.
fn measurement_sentence(out: &mut String, set: &Set) {
    let Some((
        _,
        Loaded::Run {
            info,
            summaries,
            twins,
        },
    )) = set.get("probe-cost")
    else {
        return;
    };
    // The highest share of any repetition, not the medians' highest.
    let mut worst: Option<(f64, &str)> = None;
    let (mut apart, mut within, mut unknown) = (Vec::new(), 0, Vec::new());
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        if let Some(v) = report::shown(s, "measurement_share_of_cpu") {
            let share = v.spread.map_or(v.value, |(_, max)| max);
            if worst.is_none_or(|(w, _)| share > w) {
                worst = Some((share, &s.strategy));
            }
        }
        let twin = twins
            .iter()
            .find(|t| t.strategy == s.strategy && t.status == Status::Ok);
        let spread = |x: &Summary| match report::shown(x, "p99") {
            Some(Shown {
                value,
                spread: Some((min, max)),
            }) => Some(crate::model::summary::Spread {
                median: value,
                min,
                max,
            }),
            _ => None,
        };
        match (spread(s), twin.and_then(spread)) {
            (Some(a), Some(b)) if a.differs_from(&b) => apart.push(s.strategy.clone()),
            (Some(_), Some(_)) => within += 1,
            _ => unknown.push(s.strategy.clone()),
        }
    }
    let Some((share, strategy)) = worst else {
        return;
    };
    let _ = writeln!(
        out,
        "The measurement's own probes and flushes took at most {:.2} % of a strategy's CPU per \
         cancel in any repetition ({strategy}) at {} orders/s. Beside an unmeasured twin, run \
         interleaved: p99s within each other's spread for {within} strategies{}{}.\n",
        share * 100.0,
        info.scenario.rate,
        if apart.is_empty() {
            String::new()
        } else {
            format!(", apart beyond the spread for {}", apart.join(", "))
        },
        if unknown.is_empty() {
            String::new()
        } else {
            format!(", not comparable (no spread) for {}", unknown.join(", "))
        }
    );
}

/// `results/reference/README.md`, whole.
fn reference_readme(set: &Set) -> Result<String> {
    let m = &set.manifest;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# The reference set\n\n<!-- Generated by `delaybench reference readme` from {} and the \
         folders it names: edit the command, not this file (a test fails on a hand edit). -->\n",
        MANIFEST
    );
    let _ = writeln!(
        out,
        "Every folder here was made by `delaybench reference`, {}. To make it again:\n\n```sh\n\
         git checkout {}\ncargo run --release -p delaybench -- reference{}\n```\n",
        set.provenance(),
        m.commit.trim_end_matches("-dirty"),
        if set.get("redis-cluster").is_some() {
            " --clusters"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "Database {}; started {}, finished {}. Each entry ran as its own `delaybench` process; \
         [`{}`]({}) lists them with their folders. `delaybench compare` sets a run of yours \
         beside one of these (`--fail-on-regression` exits 3 on a figure worse beyond the \
         spread).\n",
        m.database_url,
        m.started_at,
        m.finished_at.as_deref().unwrap_or("(not finished)"),
        MANIFEST,
        MANIFEST
    );
    let limits = crate::adr::limits_of(&m.folders(&set.dir))?;
    if !limits.is_empty() {
        let _ = writeln!(out, "## Limits of this evidence\n");
        for l in limits {
            let _ = writeln!(out, "- {l}");
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "The decision-record draft [{ADR_FILE}]({ADR_FILE}) is `delaybench adr` over these \
         folders with `--sla \"{SLA}\"`.\n"
    );
    for e in &m.entries {
        let _ = writeln!(out, "## {}: {}\n", e.name, e.what);
        let Some((folder, loaded)) = set.get(&e.name) else {
            let _ = writeln!(out, "Not in this set ({:?}).\n", e.status);
            continue;
        };
        let info = loaded.info();
        let _ = writeln!(
            out,
            "[`{folder}/`]({folder}/report.md), `delaybench {} --db {} --out results/reference`; \
             scenario {}: {}.\n",
            e.command.join(" "),
            m.database_url,
            info.scenario.name,
            info.scenario.description
        );
        match loaded {
            Loaded::Run {
                info,
                summaries,
                twins,
            } => run_section(&mut out, &RunTables::build(info, summaries, twins)),
            Loaded::Sweep { result, .. } => {
                if result.axis == "pending" {
                    report::sweep::backlog_tables(&mut out, result);
                } else {
                    report::sweep::rate_tables(&mut out, result);
                }
                let _ = writeln!(out);
            }
        }
    }
    Ok(out)
}

/// A run's tables: the trade-offs (as its report prints them), then what
/// its kind adds (the measurement's cost, lateness by timeout, faults).
fn run_section(out: &mut String, tables: &RunTables) {
    if tables.tradeoffs.len() > 1 {
        markdown_table(out, &tables.tradeoffs);
    }
    if let Some(rows) = &tables.teaching_tradeoffs {
        let _ = writeln!(
            out,
            "Teaching variants (deliberate mistakes, never options):\n"
        );
        markdown_table(out, rows);
    }
    if let Some(rows) = &tables.measurement {
        let _ = writeln!(out, "The measurement's own cost:\n");
        markdown_table(out, rows);
    }
    if let Some(rows) = &tables.by_timeout {
        let _ = writeln!(
            out,
            "Lateness by configured timeout (pooled over the repetitions):\n"
        );
        markdown_table(out, rows);
    }
    if let Some(rows) = &tables.faults {
        let _ = writeln!(
            out,
            "Missed cancels by fault (`n/a`: it could not touch the strategy):\n"
        );
        markdown_table(out, rows);
    }
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
}
