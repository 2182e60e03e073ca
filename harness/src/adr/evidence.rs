//! What the run folders hold for each option: the folders and the
//! condition each one measures, the figures (each a link to its JSON file
//! and key), how a fault run's faults met a strategy, and an option's own
//! runs of a condition ([`own`]). The verdicts: [`super::judge`].

use super::sla::Condition;
use crate::faults::FaultReach;
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use crate::model::sweep::{StrategySweep, SweepAxis, SweepResult, SweepStep};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use strategies::registry::Variant;
use strategies::Service;

// ------------------------------------------------------------ sources --

/// One run folder given to `adr`.
pub struct Source {
    pub dir: PathBuf,
    pub info: RunInfo,
    pub body: Body,
    pub condition: Condition,
    /// A short name, unique among the sources: the scenario's, with the
    /// run's month and day where two share it (`chaos@1130`).
    pub label: String,
}

pub enum Body {
    Run(Vec<Summary>),
    Sweep(SweepResult),
}

/// Why `adr` does not read the run folder `dir` whose `run.json` is
/// `info`, or `None` when it does. A deadline storm (a run or a sweep with
/// a `[storm]`) is refused: its lateness is the storm's drain, not a
/// condition's, and read as `normal` it would fail every option the storm
/// ran and none it did not; no objective term reads a drain yet.
pub(super) fn refusal(dir: &Path, info: &RunInfo) -> Option<String> {
    info.scenario.storm.is_some().then(|| {
        format!(
            "{} is a deadline storm (its scenario has a [storm]): its lateness is the \
             storm's drain, not a condition's, and no objective term reads a drain yet; leave \
             it out and cite its report.md (its storm table) in the ADR by hand",
            dir.display()
        )
    })
}

impl Source {
    pub fn load(dir: &Path) -> Result<Source> {
        let info = RunInfo::read(dir)?;
        if let Some(why) = refusal(dir, &info) {
            bail!(why);
        }
        let (body, condition) = if dir.join("sweep.json").exists() {
            let result = SweepResult::read(dir)?;
            let condition = match result.axis {
                SweepAxis::Rate => Condition::Capacity,
                SweepAxis::Pending => Condition::Backlog,
                // A storm sweep's scenario has its `[storm]`, refused above;
                // this one's run.json and sweep.json disagree.
                SweepAxis::Storm => bail!(
                    "{}: sweep.json is a storm sweep but run.json's scenario has no [storm]",
                    dir.display()
                ),
            };
            (Body::Sweep(result), condition)
        } else {
            let (_, summaries) = crate::report::load(dir)?;
            let condition = if info.scenario.faults.is_empty() {
                Condition::Normal
            } else if clustered(&info).is_empty() {
                Condition::Faults
            } else {
                Condition::Cluster
            };
            (Body::Run(summaries), condition)
        };
        let label = info
            .run_id
            .splitn(3, '-')
            .nth(2)
            .unwrap_or(&info.run_id)
            .to_string();
        Ok(Source {
            dir: dir.to_path_buf(),
            info,
            body,
            condition,
            label,
        })
    }

    /// Labels every source, adding the month and day where two would
    /// read alike.
    pub fn label_all(sources: &mut [Source]) {
        let labels: Vec<String> = sources.iter().map(|s| s.label.clone()).collect();
        for s in sources.iter_mut() {
            if labels.iter().filter(|l| **l == s.label).count() > 1 {
                let day = s.info.run_id.get(4..8).unwrap_or("");
                s.label = format!("{}@{day}", s.label);
            }
        }
    }

    pub fn summary(&self, option: Variant) -> Option<&Summary> {
        match &self.body {
            Body::Run(summaries) => summaries
                .iter()
                .find(|s| s.strategy == option && s.status == Status::Ok),
            Body::Sweep(_) => None,
        }
    }

    pub fn sweep(&self, option: Variant) -> Option<&StrategySweep> {
        match &self.body {
            Body::Sweep(result) => result
                .strategies
                .iter()
                .find(|s| s.strategy == option && s.status == Status::Ok),
            Body::Run(_) => None,
        }
    }

    pub fn summary_file(&self, name: &str) -> PathBuf {
        self.dir.join(name).join("summary.json")
    }

    pub fn sweep_file(&self) -> PathBuf {
        self.dir.join("sweep.json")
    }
}

/// The services a run's scenario runs as a cluster: Redis from a
/// `redis+cluster://` URL, RabbitMQ from a list of node URLs.
pub fn clustered(info: &RunInfo) -> Vec<Service> {
    let o = &info.scenario.strategies;
    let mut services = Vec::new();
    if o.rabbit.url.contains(',') {
        services.push(Service::RabbitMq);
    }
    if o.redis_zset.url.starts_with("redis+cluster")
        || info
            .services
            .get("redis")
            .is_some_and(|s| s.contains("Cluster"))
    {
        services.push(Service::Redis);
    }
    services
}

// ------------------------------------------------------------ figures --

/// A number with where it comes from: rendered as a Markdown link to the
/// file whose title names the key(s) and raw value(s).
#[derive(Debug, Clone)]
pub struct Figure {
    pub text: String,
    pub file: PathBuf,
    pub keys: Vec<(String, String)>,
}

impl Figure {
    pub fn new(text: String, file: PathBuf, key: &str, raw: impl ToString) -> Figure {
        Figure {
            text,
            file,
            keys: vec![(key.to_string(), raw.to_string())],
        }
    }

    pub fn with(mut self, key: &str, raw: impl ToString) -> Figure {
        self.keys.push((key.to_string(), raw.to_string()));
        self
    }

    pub fn render(&self, base: &Path) -> String {
        let title: Vec<String> = self
            .keys
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        format!(
            "[{}]({} \"{}\")",
            self.text,
            relative(base, &self.file).replace(' ', "%20"),
            title.join("; ")
        )
    }
}

pub fn ms_text(us: f64) -> String {
    let ms = us / 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

/// `to` relative to the folder `base`, both made absolute.
pub fn relative(base: &Path, to: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (base, to) = (abs(base), abs(to));
    let b: Vec<_> = base.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = b.iter().zip(&t).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".to_string(); b.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// One cost figure of a summary, as the report's trade-off table shows it:
/// where the strategy ran several times, the median over the repetitions
/// (`repeats.figures.NAME.median`) with its min–max; else the summary's
/// own field. CPU is shown in whole µs, the rest with one decimal.
fn median_figure(
    s: &Summary,
    file: &Path,
    (name, key, value, unit): (&str, &str, Option<f64>, &str),
) -> Option<Figure> {
    let fmt = |v: f64| {
        if unit.starts_with("µs") {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let value = value?;
    match s
        .repeats
        .as_ref()
        .and_then(|r| Some((r.count, r.figures.get(name)?)))
    {
        Some((count, spread)) => Some(Figure::new(
            format!(
                "{} {unit} (median of {count}, {}–{})",
                fmt(spread.median),
                fmt(spread.min),
                fmt(spread.max)
            ),
            file.to_path_buf(),
            &format!("repeats.figures.{name}.median"),
            spread.median,
        )),
        None => Some(Figure::new(
            format!("{} {unit}", fmt(value)),
            file.to_path_buf(),
            key,
            value,
        )),
    }
}

/// The cost per cancel of one summary: DB statements, rows read, CPU, and
/// broker messages or Redis commands where the strategy uses them.
pub fn cost_figures(s: &Summary, file: &Path) -> Vec<Figure> {
    let c = &s.cost;
    // The canceller's own reads where measured (as the report's
    // trade-off table); else the whole run's, said so.
    let rows = match c.canceller_server_rows_read_per_cancel {
        Some(_) => (
            "canceller_rows_per_cancel",
            "cost.canceller_server_rows_read_per_cancel",
            c.canceller_server_rows_read_per_cancel,
            "DB rows read by the canceller",
        ),
        None => (
            "server_rows_per_cancel",
            "cost.server_rows_read_per_cancel",
            c.server_rows_read_per_cancel,
            "DB rows read (whole run, workload included)",
        ),
    };
    [
        (
            "stmts_per_cancel",
            "cost.statements_per_cancel",
            c.statements_per_cancel,
            "DB statements",
        ),
        rows,
        // One scope for CPU everywhere: every service and the workers,
        // where the run wrote that figure (a run older than it has it in
        // the trade-off table, computed from its parts, not here).
        (
            "cpu_all_us_per_cancel",
            "repeats.figures.cpu_all_us_per_cancel.median",
            s.repeats
                .as_ref()
                .filter(|r| !r.derived.iter().any(|d| d == "cpu_all_us_per_cancel"))
                .and_then(|r| r.figures.get("cpu_all_us_per_cancel"))
                .map(|spread| spread.median),
            "µs of CPU, every service and the workers",
        ),
        (
            "broker_msgs_per_cancel",
            "cost.broker_messages_per_cancel",
            c.broker_messages_per_cancel,
            "broker messages",
        ),
        (
            "redis_cmds_per_cancel",
            "cost.redis_commands_per_cancel",
            c.redis_commands_per_cancel,
            "Redis commands",
        ),
    ]
    .into_iter()
    .filter_map(|f| median_figure(s, file, f))
    .collect()
}

// -------------------------------------------------------------- faults --

/// How the faults of one fault run met one strategy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultTally {
    pub total: usize,
    /// Acted on what they were aimed at.
    pub hit: usize,
    /// Could not touch this strategy.
    pub not_applicable: usize,
    /// Acted on something else (a standby, a master without its shards),
    /// or aimed at a role nobody held and did nothing.
    pub missed_target: usize,
}

impl FaultTally {
    pub fn of(s: &Summary) -> FaultTally {
        let mut t = FaultTally {
            total: s.faults.len(),
            ..FaultTally::default()
        };
        for f in &s.faults {
            match f.reach() {
                FaultReach::NotApplicable(_) => t.not_applicable += 1,
                FaultReach::MissedTarget(_) => t.missed_target += 1,
                FaultReach::Hit if f.took_effect() => t.hit += 1,
                // Aimed right but never acted (a crash point not reached).
                FaultReach::Hit => {}
            }
        }
        t
    }

    /// `5 of 9 faults hit, 4 n/a`.
    pub fn words(&self) -> String {
        let mut w = format!(
            "{} of {} fault{} hit",
            self.hit,
            self.total,
            if self.total == 1 { "" } else { "s" }
        );
        if self.not_applicable > 0 {
            w += &format!(", {} n/a", self.not_applicable);
        }
        if self.missed_target > 0 {
            w += &format!(", {} missed its target", self.missed_target);
        }
        let idle = self.total - self.hit - self.not_applicable - self.missed_target;
        if idle > 0 {
            w += &format!(", {idle} never acted");
        }
        w
    }
}

// ----------------------------------------------------------- evidence --

/// One run (or sweep step) of an option that a condition is judged on.
pub struct Sample<'a> {
    pub source: &'a Source,
    pub what: SampleKind<'a>,
}

pub enum SampleKind<'a> {
    /// A run's summary, and for a fault run how its faults met it.
    Run(&'a Summary, Option<FaultTally>),
    /// A backlog sweep's step.
    Step(&'a StrategySweep, &'a SweepStep),
    /// A rate sweep's strategy.
    Rate(&'a StrategySweep),
}

/// What one option's runs of one condition are.
pub enum Own<'a> {
    /// The condition cannot touch the option, and why.
    NotApplicable(String),
    /// The samples (possibly none), and the runs left out with why.
    Samples(Vec<Sample<'a>>, Vec<String>),
}

/// Every run of `option` in `condition`, from its own runs only.
pub fn own<'a>(sources: &'a [Source], option: Variant, condition: Condition) -> Own<'a> {
    if condition == Condition::Cluster && option.info.requires.is_empty() {
        return Own::NotApplicable(
            "no broker or Redis to lose a node of; the one database's own failover was not measured"
                .into(),
        );
    }
    let mut samples = Vec::new();
    let mut left_out = Vec::new();
    for source in sources.iter().filter(|s| s.condition == condition) {
        match condition {
            Condition::Normal | Condition::Faults | Condition::Cluster => {
                let Some(s) = source.summary(option) else {
                    continue;
                };
                if condition == Condition::Normal {
                    samples.push(Sample {
                        source,
                        what: SampleKind::Run(s, None),
                    });
                    continue;
                }
                if condition == Condition::Cluster
                    && !clustered(&source.info)
                        .iter()
                        .any(|c| option.info.requires.contains(c))
                {
                    left_out.push(format!(
                        "{}: it uses none of the clustered services",
                        source.label
                    ));
                    continue;
                }
                let tally = FaultTally::of(s);
                if tally.hit == 0 {
                    left_out.push(format!(
                        "{}: no fault reached it ({})",
                        source.label,
                        tally.words()
                    ));
                    continue;
                }
                samples.push(Sample {
                    source,
                    what: SampleKind::Run(s, Some(tally)),
                });
            }
            Condition::Capacity => {
                if let Some(sweep) = source.sweep(option) {
                    samples.push(Sample {
                        source,
                        what: SampleKind::Rate(sweep),
                    });
                }
            }
            Condition::Backlog => {
                if let Some(sweep) = source.sweep(option) {
                    for step in &sweep.steps {
                        samples.push(Sample {
                            source,
                            what: SampleKind::Step(sweep, step),
                        });
                    }
                }
            }
        }
    }
    Own::Samples(samples, left_out)
}

/// The command that would measure `option` in `condition`.
pub fn measure_hint(option: Variant, condition: Condition) -> String {
    let (name, services) = (option.name(), option.info.requires);
    match condition {
        Condition::Normal => format!("`delaybench run --scenario busy --strategies {name}`"),
        Condition::Faults => {
            format!("`delaybench run --scenario chaos --allow-anomalies --strategies {name}`")
        }
        Condition::Cluster => {
            let preset = if services.contains(&Service::Redis) {
                "redis-cluster"
            } else {
                "rabbitmq-cluster"
            };
            format!("`delaybench run --scenario {preset} --allow-anomalies --strategies {name}`")
        }
        Condition::Capacity => format!("`delaybench sweep --strategies {name}`"),
        Condition::Backlog => format!("`delaybench sweep --scenario backlog --strategies {name}`"),
    }
}

#[cfg(test)]
mod tests {
    use crate::model::summary::{DatabaseInfo, Status, Summary};

    /// The draft's fault tally counts a fault aimed at a role nobody held
    /// as missed, never as hit.
    #[test]
    fn a_role_nobody_held_is_tallied_missed() {
        let mut s = Summary::not_run(
            "db-timer".parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        s.faults = crate::faults::FaultRecord::role_examples();
        let t = super::FaultTally::of(&s);
        assert_eq!((t.hit, t.missed_target, t.not_applicable), (1, 1, 1));
        assert_eq!(t.words(), "1 of 3 faults hit, 1 n/a, 1 missed its target");
    }
}
