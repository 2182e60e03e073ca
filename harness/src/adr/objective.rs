//! The user's objective, whole: the terms every option is judged against
//! ([`super::sla`]), the priority that may pick one of the options that
//! meet them ([`Criterion`]), where each came from, and each term in words
//! with what it really bounds.
//!
//! It comes from `--slo FILE` (TOML, below), `--sla` and `--prefer`; a flag
//! overrides the file. What the user gives none of is the tool's example,
//! printed the same way and called so.
//!
//! ```toml
//! # slo.toml
//! objective = "p99<=2s,missed=0,max-rate>=500; faults: p99<=10s,missed=0"
//! prefer = ["services", "lateness", "capacity", "cpu"]
//! # The smallest difference that counts, beside its separation: a share
//! # of the smaller figure ("10%") or an amount (lateness "20ms", cpu and
//! # db-cpu in µs, capacity in orders/s).
//! material = { lateness = "20ms", cpu = "10%", capacity = "10%" }
//! ```

use super::evidence::Source;
use super::separation::{Criterion, Material};
use super::sla::{self, duration_text, parse_sla, trim, Condition, Metric, Sla, Term};
use crate::model::lateness::Pct;
use crate::scenario::Payments;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The objective when the user gives none: the tool's example.
pub const EXAMPLE_SLA: &str = "p99<=2s,missed=0,paid-after-deadline<=1%,max-rate>=500,recovery<=30s; faults: p99<=10s,missed=0; cluster: p99<=10s,missed=0";

/// The priority when the user gives none: the tool's example. Services
/// first: what a team must operate outlives any benchmark figure.
pub const EXAMPLE_PREFER: &str = "services,lateness,capacity,cpu";

/// Where a part of the objective came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    Flag(&'static str),
    File(PathBuf),
    Example,
}

impl Origin {
    fn words(&self) -> String {
        match self {
            Origin::Flag(f) => format!("given with `{f}`"),
            Origin::File(p) => format!("from `{}`", p.display()),
            Origin::Example => "the tool's example: no objective was given (`--slo FILE`, \
                                `--sla`, `--prefer`), so read it as one to replace with yours"
                .into(),
        }
    }
}

/// `slo.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SloFile {
    objective: Option<String>,
    prefer: Option<Vec<String>>,
    material: Option<std::collections::BTreeMap<String, String>>,
}

/// The objective and the priority, with where each came from.
#[derive(Debug, Clone)]
pub struct Objective {
    pub sla: Sla,
    pub sla_from: Origin,
    pub prefer: Vec<Criterion>,
    pub prefer_from: Origin,
    /// The user's material differences, by criterion; the others are the
    /// tool's example ([`Objective::material`]).
    pub material: Vec<(Criterion, Material)>,
}

impl Objective {
    /// From `--slo`, `--sla` and `--prefer` (each optional).
    pub fn new(slo: Option<&Path>, sla: Option<&str>, prefer: Option<&str>) -> Result<Objective> {
        let file = match slo {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading --slo {}", path.display()))?;
                let file: SloFile = toml::from_str(&text)
                    .with_context(|| format!("--slo {}: not an objective file", path.display()))?;
                Some((path.to_path_buf(), file))
            }
            None => None,
        };
        let (sla_text, sla_from) = match (sla, &file) {
            (Some(s), _) => (s.to_string(), Origin::Flag("--sla")),
            (
                None,
                Some((
                    p,
                    SloFile {
                        objective: Some(o), ..
                    },
                )),
            ) => (o.clone(), Origin::File(p.clone())),
            _ => (EXAMPLE_SLA.to_string(), Origin::Example),
        };
        let sla = parse_sla(&sla_text).with_context(|| match &sla_from {
            Origin::File(p) => format!("--slo {}: field `objective`", p.display()),
            _ => "--sla".into(),
        })?;
        let (prefer, prefer_from) = match (prefer, &file) {
            (Some(p), _) => (
                p.split(',').map(|s| s.trim().to_string()).collect(),
                Origin::Flag("--prefer"),
            ),
            (
                None,
                Some((
                    path,
                    SloFile {
                        prefer: Some(p), ..
                    },
                )),
            ) => (p.clone(), Origin::File(path.clone())),
            _ => (
                EXAMPLE_PREFER.split(',').map(String::from).collect(),
                Origin::Example,
            ),
        };
        let prefer = parse_prefer(&prefer).with_context(|| match &prefer_from {
            Origin::File(p) => format!("--slo {}: field `prefer`", p.display()),
            _ => "--prefer".into(),
        })?;
        let material = match &file {
            Some((
                path,
                SloFile {
                    material: Some(m), ..
                },
            )) => parse_material(m)
                .with_context(|| format!("--slo {}: field `material`", path.display()))?,
            _ => Vec::new(),
        };
        Ok(Objective {
            sla,
            sla_from,
            prefer,
            prefer_from,
            material,
        })
    }

    /// The smallest difference on `criterion` that counts: the user's, or
    /// the tool's example (lateness: 1 % of the objective's first lateness
    /// bound without faults, since a difference far inside the bound is
    /// no reason to choose; CPU and capacity: 10 % of the smaller figure;
    /// services, faults and recovery: any).
    pub fn material(&self, criterion: Criterion) -> Material {
        if let Some((_, m)) = self.material.iter().find(|(c, _)| *c == criterion) {
            return m.clone();
        }
        match criterion {
            Criterion::Lateness => self
                .sla
                .terms(Condition::Normal)
                .iter()
                .find(|t| matches!(t.metric, Metric::Lateness(_)) && t.op.is_upper())
                .map(|t| {
                    let x = t.bound * 0.01;
                    Material::Absolute(x, format!("1 % of `{}`: {}", t.text, duration_text(x)))
                })
                .unwrap_or(Material::Relative(0.1)),
            Criterion::Cpu | Criterion::DatabaseCpu | Criterion::Capacity => {
                Material::Relative(0.1)
            }
            Criterion::Services | Criterion::Faults | Criterion::Recovery => Material::Any,
        }
    }
}

/// `material = { lateness = "20ms", cpu = "10%", ... }`: a share, or an
/// amount in the criterion's unit.
fn parse_material(
    m: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<(Criterion, Material)>> {
    let mut out = Vec::new();
    for (name, value) in m {
        let Some(c) = Criterion::parse(name) else {
            bail!("unknown criterion `{name}`");
        };
        let value = value.trim();
        let material = if let Some(p) = value.strip_suffix('%') {
            let share: f64 = p
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("`{name} = \"{value}\"`: not a share such as 10%"))?;
            Material::Relative(share / 100.0)
        } else if c == Criterion::Lateness {
            let d = humantime::parse_duration(value).map_err(|_| {
                anyhow::anyhow!("`{name} = \"{value}\"`: not a duration such as 20ms, nor a share")
            })?;
            let us = d.as_micros() as f64;
            Material::Absolute(us, duration_text(us))
        } else {
            let x: f64 = value.parse().map_err(|_| {
                anyhow::anyhow!("`{name} = \"{value}\"`: not a number, nor a share")
            })?;
            Material::Absolute(
                x,
                format!(
                    "{value} {}",
                    if c == Criterion::Capacity {
                        "orders/s"
                    } else {
                        "µs"
                    }
                ),
            )
        };
        out.push((c, material));
    }
    Ok(out)
}

fn parse_prefer(names: &[String]) -> Result<Vec<Criterion>> {
    let known = || {
        Criterion::ALL
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for name in names.iter().filter(|n| !n.is_empty()) {
        let Some(c) = Criterion::parse(name) else {
            bail!("unknown criterion `{name}`; the criteria: {}", known());
        };
        if out.contains(&c) {
            bail!("`{name}` is named twice");
        }
        out.push(c);
    }
    Ok(out)
}

/// What a term bounds in practice, in a sentence, given the runs it is
/// judged on (`sources`).
pub fn bounds(term: &Term, condition: Condition, sources: &[Source]) -> String {
    match term.metric {
        Metric::Lateness(p) => {
            let share = match p {
                Pct::P50 => "half of the cancels",
                Pct::P90 => "9 cancels in 10",
                Pct::P99 => "99 cancels in 100",
                Pct::P999 => "999 cancels in 1 000",
                Pct::Max => "every cancel",
            };
            format!(
                "{share} take effect at most {} after the deadline{}",
                duration_text(term.bound),
                if p == Pct::Max {
                    String::new()
                } else {
                    format!(
                        " (a {} needs {} cancels; with fewer, the max bounds it)",
                        sla::pct_name(p),
                        super::reading::samples_needed(p)
                    )
                }
            )
        }
        Metric::Missed => {
            "no order is still PENDING after its deadline plus the run's drain".into()
        }
        Metric::Anomalies => "no invariant broke: no paid order cancelled, no stock released \
                              twice, no early cancel, no refund missing or doubled, no order \
                              forgotten"
            .into(),
        Metric::PaidAfterDeadline => paid_late_bounds(term.bound, condition, sources),
        Metric::MaxRate => format!(
            "a rate sweep on these machines held a step of {} orders/s in every repetition \
             (the commit-time p99 under the sweep's bound, the harness on time, no anomaly): \
             a figure of this machine, not of yours",
            trim(term.bound)
        ),
        Metric::Recovery => format!(
            "after a restart with the backlog held, cancels resume within {} and no probe \
             order is lost (measured on the restarts the backlog preset makes)",
            duration_text(term.bound)
        ),
    }
}

/// What the paid-after-deadline share depends on in a workload: how its
/// payers pay, and the share of checkouts aborted (they never pay).
#[derive(Debug, Clone, PartialEq)]
pub struct Payers {
    pub payments: Payments,
    pub abort_ratio: f64,
}

impl Payers {
    pub fn of(source: &Source) -> Payers {
        Payers {
            payments: source.info.scenario.payments.clone(),
            abort_ratio: source.info.scenario.checkout_abort_ratio,
        }
    }
}

/// The share of created orders paid after their deadline when every
/// cancel is `late_us` late, under the workload's draws
/// (harness/src/workload.rs): near-deadline payers uniform over ±epsilon
/// of the deadline, late payers over late-by/2..late-by after it, each
/// callback `callback-delay` later still, aborted checkouts never paying.
pub fn paid_late_share(w: &Payers, late_us: f64) -> f64 {
    let p = &w.payments;
    let eps = p.near_deadline_epsilon.as_micros() as f64;
    let late_by = p.late_by.as_micros() as f64;
    let delay = p.callback_delay.as_micros() as f64;
    // The part of (lo, hi) after the deadline and before the cancel.
    let within = |lo: f64, hi: f64| (hi.min(late_us) - lo.max(0.0)).max(0.0);
    let near = if eps > 0.0 {
        p.near_deadline_share * within(delay - eps, delay + eps) / (2.0 * eps)
    } else {
        0.0
    };
    let late = if late_by > 0.0 {
        p.late_share * within(delay + late_by / 2.0, delay + late_by) / (late_by / 2.0)
    } else {
        0.0
    };
    p.pay_ratio * (1.0 - w.abort_ratio) * (near + late)
}

/// The lateness at which [`paid_late_share`] reaches `share` (`None`: it
/// never does), by bisection.
pub fn implied_lateness_us(w: &Payers, share: f64) -> Option<f64> {
    let p = &w.payments;
    let top = p.late_by.as_micros() as f64
        + p.near_deadline_epsilon.as_micros() as f64
        + p.callback_delay.as_micros() as f64;
    if paid_late_share(w, top) <= share {
        return None;
    }
    let (mut lo, mut hi) = (0.0, top);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if paid_late_share(w, mid) <= share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// A lateness in µs, rounded as "about" reads: `8 ms`, `13 ms`, `0.6 s`.
fn about(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.1} s", us / 1e6)
    } else if us >= 1e5 {
        format!("{:.0} ms", (us / 1e4).round() * 10.0)
    } else if us >= 1e3 {
        format!("{:.0} ms", us / 1e3)
    } else {
        format!("{:.1} ms", us / 1e3)
    }
}

/// The paid-after-deadline term in words: the lateness bound it stands
/// for in the workloads of the runs it is judged on.
fn paid_late_bounds(share: f64, condition: Condition, sources: &[Source]) -> String {
    let mut groups: Vec<(Payers, Vec<&str>)> = Vec::new();
    for s in sources.iter().filter(|s| s.condition == condition) {
        let w = Payers::of(s);
        match groups.iter_mut().find(|(g, _)| *g == w) {
            Some((_, labels)) => labels.push(&s.label),
            None => groups.push((w, vec![&s.label])),
        }
    }
    if groups.is_empty() {
        return "the share of created orders whose payment arrived after their deadline while \
                they were still PENDING (no run here to say what lateness that stands for)"
            .into();
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(w, labels)| {
            let p = &w.payments;
            let eps = p.near_deadline_epsilon.as_micros() as f64;
            // What pays 0..epsilon after the deadline: a canceller later
            // than epsilon lets it all pay late.
            let near_after = paid_late_share(
                &Payers {
                    payments: Payments {
                        late_share: 0.0,
                        ..p.clone()
                    },
                    ..w.clone()
                },
                eps,
            );
            let mut extras = Vec::new();
            if w.abort_ratio > 0.0 {
                extras.push(format!(
                    "{}% of checkouts aborted",
                    trim(w.abort_ratio * 100.0)
                ));
            }
            if !p.callback_delay.is_zero() {
                extras.push(format!(
                    "every callback {} late",
                    duration_text(p.callback_delay.as_micros() as f64)
                ));
            }
            let workload = format!(
                "in {} (pay-ratio {}, {}% of payers within ±{} of the deadline, {}% of payers \
                 {}–{} after it{}), {:.1}% of orders pay 0–{} after their deadline",
                labels.join(", "),
                trim(p.pay_ratio),
                trim(p.near_deadline_share * 100.0),
                duration_text(eps),
                trim(p.late_share * 100.0),
                duration_text(p.late_by.as_micros() as f64 / 2.0),
                duration_text(p.late_by.as_micros() as f64),
                extras.iter().map(|e| format!(", {e}")).collect::<String>(),
                near_after * 100.0,
                duration_text(eps)
            );
            match implied_lateness_us(w, share) {
                Some(l) if l <= eps => format!(
                    "{workload}, so a canceller later than {} lets all of them pay late: ≤ {}% \
                     holds only while the mean lateness, each cancel counted up to {}, stays \
                     under about {}. It is a lateness bound of about epsilon, stricter than a \
                     p99 term of seconds",
                    duration_text(eps),
                    trim(share * 100.0),
                    duration_text(eps),
                    about(l)
                ),
                Some(l) => format!(
                    "{workload}, more than the bound allows only once cancels are about {} late",
                    about(l)
                ),
                None => format!("{workload}: this bound holds whatever the lateness"),
            }
        })
        .collect();
    format!(
        "the share of created orders paid after their deadline while still PENDING; {}",
        parts.join("; ")
    )
}

/// The objective in words, one line each, for the draft's Decision
/// Drivers: where it came from, each judged condition's terms with what
/// they bound, then the priority.
pub fn words(objective: &Objective, sources: &[Source]) -> Vec<String> {
    let mut lines = vec![format!(
        "The objective, {}: `{}`.",
        objective.sla_from.words(),
        objective.sla.text
    )];
    let mut unjudged = Vec::new();
    for (c, terms, own) in &objective.sla.conditions {
        if terms.is_empty() {
            unjudged.push(c.name());
            continue;
        }
        let mut line = format!(
            "- **{}** ({}{}):",
            c.name(),
            c.words(),
            if *own { "" } else { "; the defaults" }
        );
        for t in terms {
            line += &format!("\n  - {}: {}.", t.describe(), bounds(t, *c, sources));
        }
        lines.push(line);
    }
    if !unjudged.is_empty() {
        lines.push(format!(
            "- not judged (no term for them): {}; their figures are in the evidence file.",
            unjudged.join(", ")
        ));
    }
    lines.push(format!(
        "\nAmong the options that meet it, the priority ({}): {}. An option is preferred on a \
         criterion only where it is separated there: its repetitions' range, from the same run \
         as the others', does not overlap theirs (at least 3 repetitions each), and by at least \
         the material difference ({}); otherwise the options tie on it and the next criterion \
         decides. With no priority left, none is picked.",
        objective.prefer_from.words(),
        if objective.prefer.is_empty() {
            "none".to_string()
        } else {
            objective
                .prefer
                .iter()
                .map(|c| format!("{} ({})", c.name(), c.words()))
                .collect::<Vec<_>>()
                .join(", then ")
        },
        Criterion::ALL
            .iter()
            .map(|c| format!("{} {}", c.name(), objective.material(*c).words()))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_near_deadline_term_is_a_lateness_bound_of_about_epsilon() {
        let w = |payments: Payments, abort_ratio: f64| Payers {
            payments,
            abort_ratio,
        };
        let p = w(Payments::default(), 0.0);
        // 0.5 × 0.1 / 2 = 2.5 % pay 0–20 ms after the deadline.
        assert!((paid_late_share(&p, 20_000.0) - 0.025).abs() < 1e-12);
        assert!((paid_late_share(&p, 400_000.0) - 0.025).abs() < 1e-12);
        // ≤ 1 % holds while cancels are within about 8 ms.
        let l = implied_lateness_us(&p, 0.01).unwrap();
        assert!((l - 8_000.0).abs() < 1.0, "{l}");
        // ≤ 3 %: past epsilon, into the late payers (0.5–1 s).
        let l = implied_lateness_us(&p, 0.03).unwrap();
        assert!(l > 500_000.0 && l < 1_000_000.0, "{l}");
        // ≤ 10 %: never reached.
        assert_eq!(implied_lateness_us(&p, 0.10), None);
        let wide = w(
            Payments {
                near_deadline_epsilon: Duration::from_millis(100),
                ..Payments::default()
            },
            0.0,
        );
        assert!((implied_lateness_us(&wide, 0.01).unwrap() - 40_000.0).abs() < 1.0);
        // Aborted checkouts never pay: a fifth fewer payers, a fifth more room.
        let aborting = w(Payments::default(), 0.2);
        assert!((implied_lateness_us(&aborting, 0.01).unwrap() - 10_000.0).abs() < 1.0);
        // A callback 20 ms late moves every near payer past the deadline:
        // 5 % pay within 0..40 ms after it, 1 % by 8 ms of lateness.
        let delayed = w(
            Payments {
                callback_delay: Duration::from_millis(20),
                ..Payments::default()
            },
            0.0,
        );
        assert!((paid_late_share(&delayed, 40_000.0) - 0.05).abs() < 1e-12);
        assert!((implied_lateness_us(&delayed, 0.01).unwrap() - 8_000.0).abs() < 1.0);
    }

    /// docs/slo.toml, the file users copy, is the tool's example written
    /// out: it reads, and says what the tool does with no objective.
    #[test]
    fn the_committed_example_file_is_the_tools_example() {
        let file = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/slo.toml"));
        let o = Objective::new(Some(file), None, None).unwrap();
        let example = Objective::new(None, None, None).unwrap();
        assert_eq!(o.sla.text, EXAMPLE_SLA);
        assert_eq!(o.prefer, example.prefer);
        for c in [Criterion::Lateness, Criterion::Cpu, Criterion::Capacity] {
            assert_eq!(
                format!("{:?}", o.material(c)),
                format!("{:?}", example.material(c)),
                "{c:?}"
            );
        }
    }

    #[test]
    fn an_objective_file_is_read_and_a_bad_field_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("slo.toml");
        std::fs::write(
            &file,
            "objective = \"p99<=1s,missed=0\"\nprefer = [\"lateness\", \"cpu\"]\n",
        )
        .unwrap();
        let o = Objective::new(Some(&file), None, None).unwrap();
        assert_eq!(o.sla.text, "p99<=1s,missed=0");
        assert_eq!(o.prefer, [Criterion::Lateness, Criterion::Cpu]);
        assert_eq!(o.sla_from, Origin::File(file.clone()));
        // A flag overrides the file.
        let o = Objective::new(Some(&file), Some("p50<=1s"), Some("services")).unwrap();
        assert_eq!(
            (o.sla.text.as_str(), o.prefer.as_slice()),
            ("p50<=1s", &[Criterion::Services][..])
        );
        // None given: the tool's example, said so.
        let o = Objective::new(None, None, None).unwrap();
        assert_eq!(
            (o.sla_from, o.prefer_from),
            (Origin::Example, Origin::Example)
        );
        for (text, says) in [
            ("objective = \"latency<=2s\"", "`objective`"),
            ("prefer = [\"speed\"]", "unknown criterion `speed`"),
            ("prefer = [\"cpu\", \"cpu\"]", "named twice"),
            ("objectives = \"p99<=2s\"", "unknown field `objectives`"),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = format!("{:#}", Objective::new(Some(&file), None, None).unwrap_err());
            assert!(e.contains(says) && e.contains("slo.toml"), "{text}: {e}");
        }
    }
}
