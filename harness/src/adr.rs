//! `delaybench adr`: a draft architecture decision record from one or more
//! run folders (a plain run, a fault run, a rate sweep, a backlog sweep)
//! and a service-level objective.
//!
//! Rules the draft keeps, because people paste it into a real decision:
//! - every number is a link to the JSON file it comes from, and the link's
//!   title names the key and its raw value (a test checks them all);
//! - what no run measured reads "not measured" with the preset or command
//!   that would measure it, never a guess;
//! - a variant (`redis-zset+fallback`) that a run did not include may lean
//!   on its base strategy's figure, and then says so in the same cell;
//! - a p99 from fewer than 1 000 samples is not printed: the maximum
//!   stands in as an upper bound, and says so.

use crate::model::run_info::RunInfo;
use crate::model::summary::{LatenessStats, Pct, Status, Summary};
use crate::model::sweep::SweepResult;
use anyhow::{bail, Context, Result};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use strategies::registry::{self, Role, Variant};

// ---------------------------------------------------------------- SLA --

/// What one SLA term constrains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Lateness percentile (µs) in the runs without faults.
    Lateness(Pct),
    /// Orders still PENDING long after their deadline, in every run.
    Missed,
    /// Every invariant violation, in every run.
    Anomalies,
    /// Share of created orders paid after their deadline (the canceller
    /// had not got to them), runs without faults.
    PaidAfterDeadline,
    /// Highest sustainable orders/s, from a rate sweep.
    MaxRate,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Le,
    Lt,
    Ge,
    Gt,
    Eq,
}

impl Op {
    fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::Le => value <= bound,
            Op::Lt => value < bound,
            Op::Ge => value >= bound,
            Op::Gt => value > bound,
            Op::Eq => value == bound,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Op::Le => "≤",
            Op::Lt => "<",
            Op::Ge => "≥",
            Op::Gt => ">",
            Op::Eq => "=",
        }
    }
}

/// One term, e.g. `p99<=2s`.
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub metric: Metric,
    pub op: Op,
    /// In the metric's unit: µs, a count, a fraction, orders/s.
    pub bound: f64,
    /// As the user wrote it.
    pub text: String,
}

impl Term {
    /// The term in words, e.g. `p99 lateness ≤ 2 s`.
    fn describe(&self) -> String {
        let op = self.op.as_str();
        match self.metric {
            Metric::Lateness(p) => format!("{} lateness {op} {}", pct_name(p), ms_text(self.bound)),
            Metric::Missed => format!("missed cancels {op} {}", self.bound),
            Metric::Anomalies => format!("anomalies {op} {}", self.bound),
            Metric::PaidAfterDeadline => format!(
                "orders paid after their deadline {op} {}% of orders",
                trim(self.bound * 100.0)
            ),
            Metric::MaxRate => format!("max sustainable rate {op} {} orders/s", trim(self.bound)),
        }
    }
}

const SLA_HELP: &str = "terms: p50|p90|p99|p999|max (a duration: 2s, 500ms), missed, anomalies \
     (counts), paid-after-deadline (a share: 1% or 0.01), max-rate (orders/s); operators <= < >= > =; \
     e.g. \"p99<=2s,missed=0,paid-after-deadline<=1%,max-rate>=500\"";

/// Parses `--sla`; errors name the term and list what is accepted.
pub fn parse_sla(text: &str) -> Result<Vec<Term>> {
    let mut terms = Vec::new();
    for raw in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (at, op, len) = ["<=", ">=", "<", ">", "="]
            .iter()
            .filter_map(|op| raw.find(op).map(|i| (i, *op)))
            .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())))
            .map(|(i, op)| (i, op, op.len()))
            .with_context(|| format!("--sla term `{raw}` has no operator; {SLA_HELP}"))?;
        let (name, value) = (raw[..at].trim(), raw[at + len..].trim());
        let op = match op {
            "<=" => Op::Le,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            ">" => Op::Gt,
            _ => Op::Eq,
        };
        let bad = |why: &str| anyhow::anyhow!("--sla term `{raw}`: {why}; {SLA_HELP}");
        let number = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| bad("the value is not a number"))
        };
        let (metric, bound) = match name {
            "p50" | "p90" | "p99" | "p999" | "max" => {
                let pct = match name {
                    "p50" => Pct::P50,
                    "p90" => Pct::P90,
                    "p99" => Pct::P99,
                    "p999" => Pct::P999,
                    _ => Pct::Max,
                };
                let d: Duration = humantime::parse_duration(value)
                    .map_err(|_| bad("the value is not a duration such as 2s or 500ms"))?;
                (Metric::Lateness(pct), d.as_micros() as f64)
            }
            "missed" => (Metric::Missed, number(value)?),
            "anomalies" => (Metric::Anomalies, number(value)?),
            "paid-after-deadline" => {
                let share = match value.strip_suffix('%') {
                    Some(p) => number(p.trim())? / 100.0,
                    None => number(value)?,
                };
                if !(0.0..=1.0).contains(&share) {
                    return Err(bad("a share is between 0% and 100%"));
                }
                (Metric::PaidAfterDeadline, share)
            }
            "max-rate" => (Metric::MaxRate, number(value)?),
            _ => return Err(bad(&format!("unknown metric `{name}`"))),
        };
        if bound < 0.0 {
            return Err(bad("the value is negative"));
        }
        terms.push(Term {
            metric,
            op,
            bound,
            text: raw.to_string(),
        });
    }
    if terms.is_empty() {
        bail!("--sla is empty; {SLA_HELP}");
    }
    Ok(terms)
}

// ------------------------------------------------------------- inputs --

/// One run folder given to `adr`.
enum Source {
    /// `delaybench run`: with faults or without.
    Run {
        dir: PathBuf,
        info: RunInfo,
        summaries: Vec<Summary>,
    },
    /// `delaybench sweep`: a rate sweep or a backlog sweep.
    Sweep {
        dir: PathBuf,
        info: RunInfo,
        result: SweepResult,
    },
}

impl Source {
    fn load(dir: &Path) -> Result<Source> {
        let info = RunInfo::read(dir)?;
        if dir.join("sweep.json").exists() {
            let result = SweepResult::read(dir)?;
            return Ok(Source::Sweep {
                dir: dir.to_path_buf(),
                info,
                result,
            });
        }
        let (_, summaries) = crate::report::load(dir)?;
        Ok(Source::Run {
            dir: dir.to_path_buf(),
            info,
            summaries,
        })
    }

    fn info(&self) -> &RunInfo {
        match self {
            Source::Run { info, .. } | Source::Sweep { info, .. } => info,
        }
    }

    fn faulted(&self) -> bool {
        !self.info().scenario.faults.is_empty()
    }
}

// ------------------------------------------------------------ figures --

/// A number with where it comes from: rendered as a Markdown link to the
/// file whose title names the key(s) and raw value(s).
#[derive(Debug, Clone)]
struct Figure {
    text: String,
    file: PathBuf,
    keys: Vec<(String, String)>,
}

impl Figure {
    fn new(text: String, file: PathBuf, key: &str, raw: impl ToString) -> Figure {
        Figure {
            text,
            file,
            keys: vec![(key.to_string(), raw.to_string())],
        }
    }

    fn with(mut self, key: &str, raw: impl ToString) -> Figure {
        self.keys.push((key.to_string(), raw.to_string()));
        self
    }

    fn render(&self, base: &Path) -> String {
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

fn ms_text(us: f64) -> String {
    let ms = us / 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn trim(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The percentile's name, which is also its key in `lateness_us`.
fn pct_name(p: Pct) -> &'static str {
    match p {
        Pct::P50 => "p50",
        Pct::P90 => "p90",
        Pct::P99 => "p99",
        Pct::P999 => "p999",
        Pct::Max => "max",
    }
}

/// `to` relative to the folder `base`, both made absolute.
fn relative(base: &Path, to: &Path) -> String {
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

// ----------------------------------------------------------- verdicts --

/// How an option fares on one term.
#[derive(Debug, Clone)]
enum Verdict {
    Meets(Vec<Figure>, String),
    Fails(Vec<Figure>, String),
    /// Why not, and what would measure it.
    NotMeasured(String),
}

impl Verdict {
    fn of(ok: bool, figures: Vec<Figure>, note: String) -> Verdict {
        if ok {
            Verdict::Meets(figures, note)
        } else {
            Verdict::Fails(figures, note)
        }
    }

    fn cell(&self, base: &Path) -> String {
        let figs = |f: &[Figure]| {
            f.iter()
                .map(|f| f.render(base))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Verdict::Meets(f, note) => format!("meets: {}{note}", figs(f)),
            Verdict::Fails(f, note) => format!("**fails**: {}{note}", figs(f)),
            Verdict::NotMeasured(why) => format!("not measured ({why})"),
        }
    }
}

/// One option of the decision: a strategy (or variant) from the runs.
struct Option_ {
    name: String,
    needs: Vec<&'static str>,
}

/// The figures the draft draws on, gathered from every source.
struct Evidence<'a> {
    sources: &'a [Source],
}

impl<'a> Evidence<'a> {
    /// Summaries of `name` in runs without / with faults; falls back to the
    /// base strategy in runs without faults (the caller says so).
    /// [`Self::plain`], or the verdict that says no run without faults
    /// measured `name` and which command would.
    #[allow(clippy::type_complexity)]
    fn plain_or_not_measured(
        &self,
        name: &str,
    ) -> Result<(Vec<(&'a Source, &'a Summary)>, Option<String>), Verdict> {
        let (found, note) = self.plain(name);
        if found.is_empty() {
            return Err(Verdict::NotMeasured(format!(
                "no run without faults ran {name}: `delaybench run --scenario quick --strategies {name}`"
            )));
        }
        Ok((found, note))
    }

    fn plain(&self, name: &str) -> (Vec<(&'a Source, &'a Summary)>, Option<String>) {
        let exact = self.summaries(name, false);
        if !exact.is_empty() {
            return (exact, None);
        }
        let base = Variant::parse(name)
            .map(|v| v.info.name.to_string())
            .unwrap_or_default();
        if base != name {
            let based = self.summaries(&base, false);
            if !based.is_empty() {
                return (
                    based,
                    Some(format!(
                        " (measured as {base}: no run without faults ran {name})"
                    )),
                );
            }
        }
        (Vec::new(), None)
    }

    fn summaries(&self, name: &str, faulted: bool) -> Vec<(&'a Source, &'a Summary)> {
        self.sources
            .iter()
            .filter(|s| s.faulted() == faulted)
            .filter_map(|source| match source {
                Source::Run { summaries, .. } => summaries
                    .iter()
                    .find(|s| s.strategy == name && s.status == Status::Ok)
                    .map(|s| (source, s)),
                Source::Sweep { .. } => None,
            })
            .collect()
    }

    /// The rate sweep's entry for `name` (or its base, noted).
    fn rate_sweep(
        &self,
        name: &str,
    ) -> Option<(
        &'a Source,
        &'a crate::model::sweep::StrategySweep,
        Option<String>,
    )> {
        let base = Variant::parse(name)
            .map(|v| v.info.name.to_string())
            .unwrap_or_default();
        for (want, note) in [
            (name.to_string(), None),
            (
                base.clone(),
                Some(format!(
                    " (measured as {base}: the sweep did not run {name})"
                )),
            ),
        ] {
            for source in self.sources {
                if let Source::Sweep { result, .. } = source {
                    if result.axis == "rate" {
                        if let Some(s) = result
                            .strategies
                            .iter()
                            .find(|s| s.strategy == want && s.status == Status::Ok)
                        {
                            return Some((source, s, note));
                        }
                    }
                }
            }
        }
        None
    }

    fn backlog_sweep(
        &self,
        name: &str,
    ) -> Option<(&'a Source, &'a crate::model::sweep::StrategySweep)> {
        self.sources.iter().find_map(|source| match source {
            Source::Sweep { result, .. } if result.axis == "pending" => result
                .strategies
                .iter()
                .find(|s| s.strategy == name && s.status == Status::Ok)
                .map(|s| (source, s)),
            _ => None,
        })
    }

    fn has_faults(&self) -> bool {
        self.sources
            .iter()
            .any(|s| s.faulted() && matches!(s, Source::Run { .. }))
    }
}

fn summary_file(source: &Source, s: &Summary) -> PathBuf {
    match source {
        Source::Run { dir, .. } | Source::Sweep { dir, .. } => {
            dir.join(&s.strategy).join("summary.json")
        }
    }
}

fn sweep_file(source: &Source) -> PathBuf {
    match source {
        Source::Run { dir, .. } | Source::Sweep { dir, .. } => dir.join("sweep.json"),
    }
}

fn run_name(source: &Source) -> String {
    source.info().run_id.clone()
}

/// The lateness figure for `p`: the percentile when enough samples stand
/// behind it, else the maximum as an upper bound (said in the text).
/// One cost figure of a summary, as the report's trade-off table shows it:
/// where the strategy ran several times, the median over the repetitions
/// (`repeats.figures.NAME.median`) with its min–max; else the summary's
/// own field. CPU is shown in whole µs, the rest with one decimal.
fn median_figure(
    s: &Summary,
    file: &Path,
    name: &str,
    key: &str,
    value: Option<f64>,
    unit: &str,
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

fn lateness_figure(file: PathBuf, stats: &LatenessStats, p: Pct) -> (Figure, f64, bool) {
    match stats.shown(p) {
        Some(v) => (
            Figure::new(
                format!("{} {} (n={})", pct_name(p), ms_text(v as f64), stats.count),
                file,
                &format!("lateness_us.{}", pct_name(p)),
                v,
            ),
            v as f64,
            true,
        ),
        None => (
            Figure::new(
                format!(
                    "max {} (n={}, too few samples for a {}; the max bounds it)",
                    ms_text(stats.max as f64),
                    stats.count,
                    pct_name(p)
                ),
                file,
                "lateness_us.max",
                stats.max,
            ),
            stats.max as f64,
            false,
        ),
    }
}

fn anomaly_total(s: &Summary) -> u64 {
    crate::report::anomaly_counts(&s.anomalies)
        .iter()
        .map(|(_, n)| n)
        .sum()
}

fn judge(term: &Term, option: &Option_, ev: &Evidence) -> Verdict {
    let name = option.name.as_str();
    match term.metric {
        Metric::Lateness(p) => {
            let (found, note) = match ev.plain_or_not_measured(name) {
                Ok(found) => found,
                Err(not_measured) => return not_measured,
            };
            let mut figures = Vec::new();
            let mut ok = true;
            let mut undecided = false;
            for (source, s) in found {
                let (fig, value, exact) =
                    lateness_figure(summary_file(source, s), &s.lateness_us, p);
                let holds = term.op.holds(value, term.bound);
                // The max bounds the percentile from above: it decides a
                // "≤" term when it is within the bound, and nothing else.
                if !(exact || holds && matches!(term.op, Op::Le | Op::Lt)) {
                    undecided = true;
                }
                ok &= holds;
                figures.push(fig);
            }
            let note = note.unwrap_or_default();
            if undecided {
                let links: Vec<String> = figures.iter().map(|f| f.text.clone()).collect();
                return Verdict::NotMeasured(format!(
                    "{} from too few samples to decide ({}): run longer, e.g. `--scenario busy` or `--repeat 3`{note}",
                    pct_name(p),
                    links.join(", ")
                ));
            }
            Verdict::of(ok, figures, note)
        }
        Metric::Missed | Metric::Anomalies => {
            let (mut found, note) = ev.plain(name);
            found.extend(ev.summaries(name, true));
            if found.is_empty() {
                return Verdict::NotMeasured(format!(
                    "no run ran {name}: `delaybench run --scenario quick --strategies {name}`"
                ));
            }
            let mut figures = Vec::new();
            let mut ok = true;
            for (source, s) in found {
                let (value, key, what) = if term.metric == Metric::Missed {
                    (
                        s.anomalies.missed_cancels,
                        "anomalies.missed_cancels",
                        "missed",
                    )
                } else {
                    (anomaly_total(s), "anomalies.*", "anomalies")
                };
                ok &= term.op.holds(value as f64, term.bound);
                let faults = if source.faulted() {
                    format!(" under {} faults", source.info().scenario.faults.len())
                } else {
                    String::new()
                };
                figures.push(Figure::new(
                    format!("{value} {what}{faults} in {}", run_name(source)),
                    summary_file(source, s),
                    key,
                    value,
                ));
            }
            let mut note = note.unwrap_or_default();
            if !ev.has_faults() {
                note.push_str(" (faults not measured: `--scenario chaos`)");
            } else if ev.summaries(name, true).is_empty() {
                note.push_str(&format!(
                    " (the fault run did not include {name}: `--scenario chaos --strategies {name}`)"
                ));
            }
            Verdict::of(ok, figures, note)
        }
        Metric::PaidAfterDeadline => {
            let (found, note) = match ev.plain_or_not_measured(name) {
                Ok(found) => found,
                Err(not_measured) => return not_measured,
            };
            let mut figures = Vec::new();
            let mut ok = true;
            for (source, s) in found {
                // Over repetitions, the worst one: a share must not read
                // better than any repetition did.
                let worst = s.repeats.as_ref().and_then(|r| {
                    let late = r.figures.get("paid_late")?;
                    let created = r.figures.get("created")?;
                    Some((r.count, late.max, created.min))
                });
                let figure = match worst {
                    Some((count, late, created)) => {
                        let share = late / created.max(1.0);
                        ok &= term.op.holds(share, term.bound);
                        Figure::new(
                            format!(
                                "{:.2}% ({late:.0} of {created:.0} orders, the worst of {count} repetitions)",
                                share * 100.0,
                            ),
                            summary_file(source, s),
                            "repeats.figures.paid_late.max",
                            late,
                        )
                        .with("repeats.figures.created.min", created)
                    }
                    None => {
                        let share =
                            s.orders.paid_after_deadline as f64 / s.orders.created.max(1) as f64;
                        ok &= term.op.holds(share, term.bound);
                        Figure::new(
                            format!(
                                "{:.2}% ({} of {} orders)",
                                share * 100.0,
                                s.orders.paid_after_deadline,
                                s.orders.created
                            ),
                            summary_file(source, s),
                            "orders.paid_after_deadline",
                            s.orders.paid_after_deadline,
                        )
                        .with("orders.created", s.orders.created)
                    }
                };
                figures.push(figure);
            }
            let note = note.unwrap_or_default();
            Verdict::of(ok, figures, note)
        }
        Metric::MaxRate => {
            let Some((source, sweep, note)) = ev.rate_sweep(name) else {
                return Verdict::NotMeasured(format!(
                    "no rate sweep ran {name}: `delaybench sweep --strategies {name}`"
                ));
            };
            let file = sweep_file(source);
            let key = format!("strategies[strategy={}].max_rate", sweep.strategy);
            let note = note.unwrap_or_default();
            match sweep.max_rate {
                Some(rate) => {
                    let ceiling = sweep.first_failed_rate.is_none();
                    let fig = Figure::new(
                        format!(
                            "{} orders/s{}",
                            trim(rate),
                            if ceiling {
                                " (the highest rate offered: at least this)"
                            } else {
                                ""
                            }
                        ),
                        file,
                        &key,
                        rate,
                    );
                    if term.op.holds(rate, term.bound) {
                        Verdict::Meets(vec![fig], note)
                    } else if ceiling && matches!(term.op, Op::Ge | Op::Gt) {
                        Verdict::NotMeasured(format!(
                            "held at every rate offered, up to {}: raise `[sweep] max-rate`",
                            trim(rate)
                        ))
                    } else {
                        Verdict::Fails(vec![fig], note)
                    }
                }
                None => Verdict::Fails(
                    vec![Figure::new(
                        "no rate held".into(),
                        file,
                        &format!("strategies[strategy={}].first_failed_rate", sweep.strategy),
                        sweep.first_failed_rate.map(trim).unwrap_or_default(),
                    )],
                    note,
                ),
            }
        }
    }
}

// -------------------------------------------------------------- draft --

/// What `delaybench adr` was asked for.
#[derive(Debug, Clone)]
pub struct AdrArgs {
    pub dirs: Vec<PathBuf>,
    pub sla: String,
    pub out: PathBuf,
}

/// Writes the draft to `args.out` and returns its text.
pub fn write(args: &AdrArgs) -> Result<String> {
    let terms = parse_sla(&args.sla)?;
    let sources = args
        .dirs
        .iter()
        .map(|d| Source::load(d).with_context(|| format!("reading run folder {}", d.display())))
        .collect::<Result<Vec<_>>>()?;
    let base = args
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let text = draft(&sources, &terms, &args.sla, &base)?;
    std::fs::write(&args.out, &text).with_context(|| format!("writing {}", args.out.display()))?;
    Ok(text)
}

fn options(sources: &[Source]) -> Vec<Option_> {
    let mut names: Vec<String> = Vec::new();
    for source in sources {
        let listed: Vec<String> = match source {
            Source::Run { summaries, .. } => summaries.iter().map(|s| s.strategy.clone()).collect(),
            Source::Sweep { result, .. } => result
                .strategies
                .iter()
                .map(|s| s.strategy.clone())
                .collect(),
        };
        for name in listed {
            let Ok(variant) = Variant::parse(&name) else {
                continue;
            };
            if variant.info.role != Role::Strategy || names.contains(&name) {
                continue;
            }
            names.push(name);
        }
    }
    // The registry's order, each strategy before its variants.
    let rank = |n: &String| {
        let v = Variant::parse(n).expect("parsed above");
        let at = registry::STRATEGIES
            .iter()
            .position(|s| s.name == v.info.name)
            .unwrap_or(usize::MAX);
        (at, n.len(), n.clone())
    };
    names.sort_by_key(rank);
    names
        .into_iter()
        .map(|name| {
            let info = Variant::parse(&name).expect("parsed above").info;
            let mut needs = vec!["database"];
            needs.extend(info.requires.iter().map(|s| s.name()));
            Option_ { name, needs }
        })
        .collect()
}

fn scenario_words(source: &Source) -> String {
    let info = source.info();
    let s = &info.scenario;
    let secs = |d: Duration| humantime::format_duration(d).to_string();
    let mut words = format!(
        "{} orders/s for {} after a {} warm-up; timeouts {}; {:.0}% of orders paid; {} instance{} per strategy; {} {}",
        trim(s.rate),
        secs(s.duration),
        secs(s.warmup),
        s.timeouts_label(),
        s.payments.pay_ratio * 100.0,
        s.instances,
        if s.instances == 1 { "" } else { "s" },
        info.database_kind,
        info.database_version.split(" on ").next().unwrap_or(""),
    );
    if info.repeat > 1 {
        let _ = write!(
            words,
            "; every strategy run {} times, interleaved (figures are medians)",
            info.repeat
        );
    }
    if let Some(faults) = s.faults_label() {
        let _ = write!(
            words,
            ". Faults, at the same times for every strategy: {faults}"
        );
    }
    words
}

fn draft(sources: &[Source], terms: &[Term], sla: &str, base: &Path) -> Result<String> {
    let ev = Evidence { sources };
    let options = options(sources);
    if options.is_empty() {
        bail!("the run folders hold no strategy that is not a teaching variant or the ceiling");
    }
    let mut out = String::new();
    let first = sources[0].info();
    writeln!(
        out,
        "# ADR draft: cancelling unpaid orders at their deadline\n"
    )?;
    writeln!(
        out,
        "Status: **draft**, written by `delaybench adr` (delaybench {}) from {} run folder{}. \
         Every figure links to the JSON it comes from (hover for the key and raw value); \
         check them, then edit this into your decision.\n",
        first.delaybench_version,
        sources.len(),
        if sources.len() == 1 { "" } else { "s" }
    )?;

    writeln!(out, "## Context\n")?;
    writeln!(
        out,
        "An order that is not paid within its timeout must be cancelled and its stock released \
         exactly once; a paid order must never be cancelled. We compared ways of doing that on \
         one identical workload, on real services:\n"
    )?;
    for source in sources {
        let info = source.info();
        let kind = match source {
            Source::Sweep { result, .. } if result.axis == "rate" => format!(
                "rate sweep (each step a whole run; a step holds with p99 at commit ≤ {} ms and the harness keeping up)",
                trim(result.bound_ms)
            ),
            Source::Sweep { .. } => "backlog sweep (the same load while holding far-future pending orders)".to_string(),
            Source::Run { .. } if source.faulted() => "run with faults".to_string(),
            Source::Run { .. } => "run without faults".to_string(),
        };
        writeln!(
            out,
            "- [`{}`]({}) — {kind}, scenario `{}`, commit `{}` on {} ({} cores): {}.",
            info.run_id,
            relative(
                base,
                &match source {
                    Source::Run { dir, .. } | Source::Sweep { dir, .. } => dir.join("run.json"),
                }
            ),
            info.scenario.name,
            info.git_commit.get(..7).unwrap_or(&info.git_commit),
            info.machine.cpu_model,
            info.machine.cpus,
            scenario_words(source)
        )?;
    }
    writeln!(out, "\nThe service-level objective (`--sla \"{sla}\"`):\n")?;
    for t in terms {
        writeln!(out, "- {}", t.describe())?;
    }
    writeln!(
        out,
        "\nLateness terms are judged on the runs without faults; missed cancels and anomalies on \
         every run, faults included; the rate on the rate sweep.\n"
    )?;

    writeln!(out, "## Options considered\n")?;
    for o in &options {
        let info = Variant::parse(&o.name)?.info;
        writeln!(
            out,
            "- **{}** — {}; needs {}.",
            o.name,
            info.summary,
            o.needs.join(", ")
        )?;
    }
    writeln!(out, "\nTeaching variants (known mistakes reproduced on purpose) and the ceiling (a yardstick) are left out.\n")?;

    writeln!(out, "## Measured consequences\n")?;
    consequences(&mut out, &options, &ev, base)?;

    writeln!(out, "## Which options meet the SLA\n")?;
    let verdicts: Vec<Vec<Verdict>> = options
        .iter()
        .map(|o| terms.iter().map(|t| judge(t, o, &ev)).collect())
        .collect();
    let mut header = vec!["option".to_string()];
    header.extend(terms.iter().map(|t| format!("`{}`", t.text)));
    header.push("verdict".into());
    let mut rows = vec![header];
    for (o, vs) in options.iter().zip(&verdicts) {
        let mut row = vec![format!("**{}**", o.name)];
        row.extend(vs.iter().map(|v| v.cell(base)));
        row.push(overall(vs).to_string());
        rows.push(row);
    }
    table(&mut out, &rows);

    writeln!(out, "## Recommendation\n")?;
    recommend(&mut out, &options, &verdicts, terms, base)?;
    Ok(out)
}

/// `meets`, `fails`, or `not shown` (nothing fails, something unmeasured).
fn overall(vs: &[Verdict]) -> &'static str {
    if vs.iter().any(|v| matches!(v, Verdict::Fails(..))) {
        "fails"
    } else if vs.iter().all(|v| matches!(v, Verdict::Meets(..))) {
        "**meets**"
    } else {
        "not shown"
    }
}

fn consequences(out: &mut String, options: &[Option_], ev: &Evidence, base: &Path) -> Result<()> {
    let mut rows = vec![vec![
        "option".to_string(),
        "needs".into(),
        "lateness, runs without faults".into(),
        "cost per cancel".into(),
        "anomalies under faults".into(),
        "max sustainable rate".into(),
        "holding the largest backlog".into(),
    ]];
    for o in options {
        let name = o.name.as_str();
        let (plain, note) = ev.plain(name);
        let note = note.unwrap_or_default();
        // One cell from the runs without faults, or what would measure it.
        let each_plain = |cell: &dyn Fn(PathBuf, &Summary) -> String| {
            if plain.is_empty() {
                return "not measured (`--scenario quick`)".to_string();
            }
            plain
                .iter()
                .map(|(source, s)| cell(summary_file(source, s), s))
                .collect::<Vec<_>>()
                .join("; ")
                + &note
        };
        let lateness = each_plain(&|file, s| {
            let p50 = Figure::new(
                format!("p50 {}", ms_text(s.lateness_us.p50 as f64)),
                file.clone(),
                "lateness_us.p50",
                s.lateness_us.p50,
            );
            let (p99, _, _) = lateness_figure(file, &s.lateness_us, Pct::P99);
            format!("{}, {}", p50.render(base), p99.render(base))
        });
        let cost = each_plain(&|file, s| {
            let c = &s.cost;
            // The canceller's own reads where measured (as the
            // report's trade-off table); else the whole run's, said so.
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
                (
                    "cpu_us_per_cancel",
                    "cost.cpu_us_per_cancel",
                    c.cpu_us_per_cancel,
                    "µs CPU",
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
            .filter_map(|(name, key, value, unit)| {
                median_figure(s, &file, name, key, value, unit).map(|f| f.render(base))
            })
            .collect::<Vec<_>>()
            .join(", ")
        });
        let faulted = ev.summaries(name, true);
        let faults = if !ev.has_faults() {
            "not measured (`--scenario chaos`)".to_string()
        } else if faulted.is_empty() {
            format!("not measured: the fault run did not include it (`--scenario chaos --strategies {name}`)")
        } else {
            faulted
                .iter()
                .map(|(source, s)| {
                    let file = summary_file(source, s);
                    let total = anomaly_total(s);
                    let mut text = Figure::new(
                        format!("{total} anomalies, {} missed", s.anomalies.missed_cancels),
                        file.clone(),
                        "anomalies.*",
                        total,
                    )
                    .with("anomalies.missed_cancels", s.anomalies.missed_cancels)
                    .render(base);
                    let causes: Vec<String> = s
                        .missed_by_fault
                        .iter()
                        .filter(|l| l.missed > 0)
                        .map(|l| format!("{} during {}", l.missed, l.label))
                        .collect();
                    if !causes.is_empty() {
                        let _ = write!(text, " ({})", causes.join("; "));
                    }
                    text
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        let rate = match ev.rate_sweep(name) {
            None => "not measured (`delaybench sweep`)".to_string(),
            Some((source, sweep, note)) => {
                let key = format!("strategies[strategy={}].max_rate", sweep.strategy);
                let text = match sweep.max_rate {
                    Some(r) => {
                        Figure::new(format!("{} orders/s", trim(r)), sweep_file(source), &key, r)
                            .render(base)
                    }
                    None => "no rate held".to_string(),
                };
                // The sweep report has the whole story; its first clause here.
                let limit = sweep
                    .limited_by
                    .as_deref()
                    .map(|l| format!(" (limited by {})", l.split(" (").next().unwrap_or(l)))
                    .unwrap_or_default();
                text + &limit + &note.unwrap_or_default()
            }
        };
        let backlog = match ev.backlog_sweep(name) {
            None => "not measured (`delaybench sweep --scenario backlog`)".to_string(),
            Some((source, sweep)) => match sweep
                .steps
                .iter()
                .filter(|s| s.backlog.is_some())
                .max_by_key(|s| s.pending.unwrap_or(0))
            {
                None => "no step held a backlog".to_string(),
                Some(step) => {
                    let b = step.backlog.as_ref().expect("filtered");
                    let at = format!(
                        "strategies[strategy={}].steps[pending={}]",
                        sweep.strategy, b.pending
                    );
                    let file = sweep_file(source);
                    let mut parts = vec![
                        Figure::new(
                            format!("{} pending", b.pending),
                            file.clone(),
                            &format!("{at}.backlog.pending"),
                            b.pending,
                        )
                        .render(base),
                        Figure::new(
                            format!("handed over in {:.1} s", b.handoff_s),
                            file.clone(),
                            &format!("{at}.backlog.handoff_s"),
                            b.handoff_s,
                        )
                        .render(base),
                    ];
                    if let Some(p99) = step.p99_us {
                        parts.push(
                            Figure::new(
                                format!("p99 at commit {}", ms_text(p99 as f64)),
                                file.clone(),
                                &format!("{at}.p99_us"),
                                p99,
                            )
                            .render(base),
                        );
                    }
                    if let Some(worst) = b
                        .recovery
                        .iter()
                        .filter_map(|r| r.cancelling_again_s.map(|s| (r, s)))
                        .max_by(|a, b| a.1.total_cmp(&b.1))
                    {
                        parts.push(format!(
                            "slowest restart: {} cancelling again after {}",
                            worst.0.what,
                            Figure::new(
                                format!("{:.1} s", worst.1),
                                file,
                                &format!(
                                    "{at}.backlog.recovery[what={}].cancelling_again_s",
                                    worst.0.what
                                ),
                                worst.1
                            )
                            .render(base)
                        ));
                    }
                    parts.join(", ")
                }
            },
        };
        rows.push(vec![
            format!("**{name}**"),
            o.needs.join(", "),
            lateness,
            cost,
            faults,
            rate,
            backlog,
        ]);
    }
    table(out, &rows);
    Ok(())
}

fn recommend(
    out: &mut String,
    options: &[Option_],
    verdicts: &[Vec<Verdict>],
    terms: &[Term],
    base: &Path,
) -> Result<()> {
    let figs = |v: &Verdict| match v {
        Verdict::Meets(f, note) | Verdict::Fails(f, note) => {
            f.iter()
                .map(|f| f.render(base))
                .collect::<Vec<_>>()
                .join(", ")
                + note
        }
        Verdict::NotMeasured(_) => String::new(),
    };
    let evidence = |vs: &[Verdict]| {
        terms
            .iter()
            .zip(vs)
            .filter(|(_, v)| !matches!(v, Verdict::NotMeasured(_)))
            .map(|(t, v)| format!("{} ({})", t.describe(), figs(v)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    // Fewer services to run first, then the lower worst lateness figure.
    let lateness_of = |vs: &[Verdict]| {
        terms.iter().zip(vs).find_map(|(t, v)| match (t.metric, v) {
            (Metric::Lateness(_), Verdict::Meets(f, _)) => f
                .iter()
                .filter_map(|f| f.keys[0].1.parse::<f64>().ok())
                .reduce(f64::max),
            _ => None,
        })
    };
    let mut ranked: Vec<usize> = (0..options.len()).collect();
    ranked.sort_by(|&a, &b| {
        options[a].needs.len().cmp(&options[b].needs.len()).then(
            lateness_of(&verdicts[a])
                .unwrap_or(f64::MAX)
                .total_cmp(&lateness_of(&verdicts[b]).unwrap_or(f64::MAX)),
        )
    });
    let meeting: Vec<usize> = ranked
        .iter()
        .copied()
        .filter(|&i| overall(&verdicts[i]) == "**meets**")
        .collect();
    let open: Vec<usize> = ranked
        .iter()
        .copied()
        .filter(|&i| overall(&verdicts[i]) == "not shown")
        .collect();
    if let Some(&best) = meeting.first() {
        let o = &options[best];
        writeln!(
            out,
            "**Choose {}.** It meets every term of the SLA: {}. It needs {} and nothing else.\n",
            o.name,
            evidence(&verdicts[best]),
            o.needs.join(", ")
        )?;
        if meeting.len() > 1 {
            let others: Vec<String> = meeting
                .iter()
                .skip(1)
                .map(|&i| {
                    format!(
                        "{} (needs {})",
                        options[i].name,
                        options[i].needs.join(", ")
                    )
                })
                .collect();
            writeln!(
                out,
                "These meet it too, with their figures in [the table above](#which-options-meet-the-sla): {}. \
                 Among options that meet the SLA the draft prefers the one needing the fewest services, \
                 then the lower lateness; weigh what you already operate.\n",
                others.join(", ")
            )?;
        }
    } else if let Some(&best) = open.first() {
        let missing: Vec<String> = terms
            .iter()
            .zip(&verdicts[best])
            .filter_map(|(t, v)| match v {
                Verdict::NotMeasured(why) => Some(format!("{} — {why}", t.describe())),
                _ => None,
            })
            .collect();
        writeln!(
            out,
            "**No option is shown to meet every term yet.** {} fails none that was measured ({}), but these were not measured: {}. Measure them before deciding.\n",
            options[best].name,
            evidence(&verdicts[best]),
            missing.join("; ")
        )?;
    } else {
        writeln!(out, "**No option meets the SLA as measured.**\n")?;
    }
    for (i, o) in options.iter().enumerate() {
        let failed: Vec<String> = terms
            .iter()
            .zip(&verdicts[i])
            .filter(|(_, v)| matches!(v, Verdict::Fails(..)))
            .map(|(t, v)| format!("{} ({})", t.describe(), figs(v)))
            .collect();
        if !failed.is_empty() {
            writeln!(out, "- Not {}: it fails {}.", o.name, failed.join("; "))?;
        }
    }
    writeln!(
        out,
        "\nThis is a draft from measurements on one machine; the figures hold for the scenarios above. \
         Rerun them on your own hardware and services (`delaybench run --scenario <run>/scenario.toml`) before you decide."
    )?;
    Ok(())
}

fn table(out: &mut String, rows: &[Vec<String>]) {
    for (i, row) in rows.iter().enumerate() {
        out.push_str("| ");
        out.push_str(&row.join(" | "));
        out.push_str(" |\n");
        if i == 0 {
            out.push_str(&"| --- ".repeat(row.len()));
            out.push_str("|\n");
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sla_terms_parse_with_units_and_bad_ones_name_the_term() {
        let t = parse_sla("p99<=2s, missed=0,paid-after-deadline<=1%,max-rate>=500").unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(
            (t[0].metric, t[0].op, t[0].bound),
            (Metric::Lateness(Pct::P99), Op::Le, 2e6)
        );
        assert_eq!(
            (t[1].metric, t[1].op, t[1].bound),
            (Metric::Missed, Op::Eq, 0.0)
        );
        assert_eq!((t[2].metric, t[2].bound), (Metric::PaidAfterDeadline, 0.01));
        assert_eq!(
            (t[3].metric, t[3].op, t[3].bound),
            (Metric::MaxRate, Op::Ge, 500.0)
        );
        for (bad, names) in [
            ("p99<=fast", "p99<=fast"),
            ("latency<=2s", "unknown metric `latency`"),
            ("missed", "no operator"),
            ("paid-after-deadline<=150%", "between 0% and 100%"),
            ("", "empty"),
        ] {
            let e = format!("{:#}", parse_sla(bad).unwrap_err());
            assert!(e.contains(names) && e.contains("max-rate"), "{bad}: {e}");
        }
    }

    #[test]
    fn relative_links_climb_out_of_the_draft_folder() {
        assert_eq!(
            relative(Path::new("/a/b"), Path::new("/a/c/d.json")),
            "../c/d.json"
        );
        assert_eq!(
            relative(Path::new("/a"), Path::new("/a/c/d.json")),
            "c/d.json"
        );
    }
}
