//! `--sla`: the service-level objective an ADR draft judges the options
//! against, term by term and condition by condition.
//!
//! Syntax: sections separated by `;`, each a comma-separated list of terms,
//! optionally led by the condition it is for:
//!
//! ```text
//! p99<=2s,missed=0,max-rate>=500; faults: p99<=10s,missed=0; cluster: none
//! ```
//!
//! The unlabelled section holds the defaults: they apply to every
//! condition that has no section of its own, wherever their metric is
//! measured there (`max-rate` only by a rate sweep, `recovery` only by a
//! backlog sweep). A labelled section replaces the defaults for its
//! condition; `none` leaves the condition unjudged.

use crate::model::lateness::Pct;
use anyhow::{bail, Context, Result};
use std::time::Duration;

/// Where evidence comes from: the kind of run, each judged on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    /// Runs without faults.
    Normal,
    /// Runs with faults (chaos): partitions, pauses, kills, crashes.
    Faults,
    /// Runs with faults on a clustered broker or Redis: a node lost.
    Cluster,
    /// Rate sweeps.
    Capacity,
    /// Backlog sweeps.
    Backlog,
}

impl Condition {
    pub const ALL: [Condition; 5] = [
        Condition::Normal,
        Condition::Faults,
        Condition::Cluster,
        Condition::Capacity,
        Condition::Backlog,
    ];

    /// The label in `--sla` and in the draft's tables.
    pub fn name(self) -> &'static str {
        match self {
            Condition::Normal => "normal",
            Condition::Faults => "faults",
            Condition::Cluster => "cluster",
            Condition::Capacity => "capacity",
            Condition::Backlog => "backlog",
        }
    }

    /// What the runs of the condition are, in a few words.
    pub fn words(self) -> &'static str {
        match self {
            Condition::Normal => "runs without faults",
            Condition::Faults => "runs with faults",
            Condition::Cluster => "a broker or Redis node lost in a cluster",
            Condition::Capacity => "rate sweeps",
            Condition::Backlog => "backlog sweeps",
        }
    }

    fn parse(label: &str) -> Option<Condition> {
        Condition::ALL.into_iter().find(|c| c.name() == label)
    }

    /// Whether runs of this condition measure `metric`.
    pub fn measures(self, metric: Metric) -> bool {
        match self {
            Condition::Normal | Condition::Faults | Condition::Cluster => matches!(
                metric,
                Metric::Lateness(_)
                    | Metric::Missed
                    | Metric::Anomalies
                    | Metric::PaidAfterDeadline
            ),
            Condition::Capacity => metric == Metric::MaxRate,
            // A backlog step keeps p50, p99 and max of its lateness.
            Condition::Backlog => matches!(
                metric,
                Metric::Lateness(Pct::P50 | Pct::P99 | Pct::Max)
                    | Metric::Missed
                    | Metric::Anomalies
                    | Metric::Recovery
            ),
        }
    }
}

/// What one SLA term constrains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Lateness percentile (µs).
    Lateness(Pct),
    /// Orders still PENDING long after their deadline.
    Missed,
    /// Every invariant violation.
    Anomalies,
    /// Share of created orders paid after their deadline (the canceller
    /// had not got to them).
    PaidAfterDeadline,
    /// Highest sustainable orders/s, from a rate sweep.
    MaxRate,
    /// Backlog sweep: from a restart (an instance, the broker, Redis) with
    /// the backlog held until cancelling again (µs), every probe order
    /// cancelled.
    Recovery,
}

impl Metric {
    /// The conditions that measure it, for error messages.
    fn measured_in(self) -> String {
        Condition::ALL
            .into_iter()
            .filter(|c| c.measures(self))
            .map(Condition::name)
            .collect::<Vec<_>>()
            .join(", ")
    }
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
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::Le => value <= bound,
            Op::Lt => value < bound,
            Op::Ge => value >= bound,
            Op::Gt => value > bound,
            Op::Eq => value == bound,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Le => "≤",
            Op::Lt => "<",
            Op::Ge => "≥",
            Op::Gt => ">",
            Op::Eq => "=",
        }
    }

    /// An upper bound (`≤`, `<`): a value known to be at most x decides it
    /// when x holds.
    pub fn is_upper(self) -> bool {
        matches!(self, Op::Le | Op::Lt)
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
    pub fn describe(&self) -> String {
        let op = self.op.as_str();
        match self.metric {
            Metric::Lateness(p) => {
                format!(
                    "{} lateness {op} {}",
                    pct_name(p),
                    duration_text(self.bound)
                )
            }
            Metric::Missed => format!("missed cancels {op} {}", trim(self.bound)),
            Metric::Anomalies => format!("anomalies {op} {}", trim(self.bound)),
            Metric::PaidAfterDeadline => {
                format!("paid after the deadline {op} {}%", trim(self.bound * 100.0))
            }
            Metric::MaxRate => format!("max sustainable rate {op} {} orders/s", trim(self.bound)),
            Metric::Recovery => format!(
                "cancelling again after a restart {op} {}, no probe lost",
                duration_text(self.bound)
            ),
        }
    }
}

/// The objective: the terms of each condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sla {
    /// As the user wrote it.
    pub text: String,
    /// Per condition (in [`Condition::ALL`] order): its terms, and whether
    /// they are the condition's own section (`false`: the defaults).
    pub conditions: Vec<(Condition, Vec<Term>, bool)>,
}

impl Sla {
    /// The terms `condition` is judged on (empty: not judged).
    pub fn terms(&self, condition: Condition) -> &[Term] {
        self.conditions
            .iter()
            .find(|(c, _, _)| *c == condition)
            .map(|(_, t, _)| t.as_slice())
            .unwrap_or(&[])
    }

    /// The conditions with at least one term.
    pub fn judged(&self) -> Vec<Condition> {
        self.conditions
            .iter()
            .filter(|(_, t, _)| !t.is_empty())
            .map(|(c, _, _)| *c)
            .collect()
    }
}

pub const SLA_HELP: &str =
    "terms: p50|p90|p99|p999|max (a duration: 2s, 500ms), missed, anomalies \
     (counts), paid-after-deadline (a share: 1% or 0.01), max-rate (orders/s, rate sweeps), \
     recovery (a duration, backlog sweeps); operators <= < >= > =; sections by condition after \
     `;`, each `normal:`, `faults:`, `cluster:`, `capacity:` or `backlog:` (`none`: not judged), \
     the unlabelled one the default for the others; e.g. \
     \"p99<=2s,missed=0,max-rate>=500; faults: p99<=10s,missed=0\"";

/// Parses `--sla`; errors name the term (and its section) and list what
/// is accepted.
pub fn parse_sla(text: &str) -> Result<Sla> {
    let mut defaults: Option<Vec<Term>> = None;
    let mut own: Vec<(Condition, Vec<Term>)> = Vec::new();
    for section in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let labelled = section.split_once(':').and_then(|(label, rest)| {
            let label = label.trim();
            label
                .chars()
                .all(|c| c.is_ascii_alphabetic() || c == '-')
                .then_some((label, rest.trim()))
        });
        match labelled {
            Some((label, rest)) => {
                let condition = Condition::parse(label).with_context(|| {
                    format!(
                        "--sla section `{section}`: unknown condition `{label}`; conditions: \
                         normal, faults, cluster, capacity, backlog; {SLA_HELP}"
                    )
                })?;
                if own.iter().any(|(c, _)| *c == condition) {
                    bail!("--sla names `{label}:` twice; {SLA_HELP}");
                }
                let terms = if rest == "none" {
                    Vec::new()
                } else {
                    let terms = parse_terms(rest, Some(condition))?;
                    if terms.is_empty() {
                        bail!(
                            "--sla section `{section}` has no terms (write `{label}: none` to \
                             leave it unjudged); {SLA_HELP}"
                        );
                    }
                    terms
                };
                own.push((condition, terms));
            }
            None => {
                if defaults.is_some() {
                    bail!(
                        "--sla has two sections without a condition; label the second, e.g. \
                         `faults: {section}`; {SLA_HELP}"
                    );
                }
                defaults = Some(parse_terms(section, None)?);
            }
        }
    }
    let defaults = defaults.unwrap_or_default();
    let conditions: Vec<(Condition, Vec<Term>, bool)> = Condition::ALL
        .into_iter()
        .map(|c| match own.iter().find(|(o, _)| *o == c) {
            Some((_, terms)) => (c, terms.clone(), true),
            None => (
                c,
                defaults
                    .iter()
                    .filter(|t| c.measures(t.metric))
                    .cloned()
                    .collect(),
                false,
            ),
        })
        .collect();
    if conditions.iter().all(|(_, t, _)| t.is_empty()) {
        bail!("--sla is empty; {SLA_HELP}");
    }
    Ok(Sla {
        text: text.to_string(),
        conditions,
    })
}

fn parse_terms(text: &str, condition: Option<Condition>) -> Result<Vec<Term>> {
    let mut terms = Vec::new();
    for raw in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let term = parse_term(raw)?;
        if let Some(c) = condition {
            if !c.measures(term.metric) {
                bail!(
                    "--sla term `{raw}` under `{}:`: {} does not measure it (it is measured in: \
                     {}); {SLA_HELP}",
                    c.name(),
                    c.words(),
                    term.metric.measured_in()
                );
            }
        }
        terms.push(term);
    }
    Ok(terms)
}

fn parse_term(raw: &str) -> Result<Term> {
    let (at, op) = ["<=", ">=", "<", ">", "="]
        .iter()
        .filter_map(|op| raw.find(op).map(|i| (i, *op)))
        .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())))
        .with_context(|| format!("--sla term `{raw}` has no operator; {SLA_HELP}"))?;
    let (name, value) = (raw[..at].trim(), raw[at + op.len()..].trim());
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
    let duration = |v: &str| {
        humantime::parse_duration(v)
            .map(|d: Duration| d.as_micros() as f64)
            .map_err(|_| bad("the value is not a duration such as 2s or 500ms"))
    };
    let (metric, bound) = match name {
        "p50" => (Metric::Lateness(Pct::P50), duration(value)?),
        "p90" => (Metric::Lateness(Pct::P90), duration(value)?),
        "p99" => (Metric::Lateness(Pct::P99), duration(value)?),
        "p999" => (Metric::Lateness(Pct::P999), duration(value)?),
        "max" => (Metric::Lateness(Pct::Max), duration(value)?),
        "recovery" => (Metric::Recovery, duration(value)?),
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
    Ok(Term {
        metric,
        op,
        bound,
        text: raw.to_string(),
    })
}

/// The percentile's name, which is also its key in `lateness_us`.
pub fn pct_name(p: Pct) -> &'static str {
    match p {
        Pct::P50 => "p50",
        Pct::P90 => "p90",
        Pct::P99 => "p99",
        Pct::P999 => "p999",
        Pct::Max => "max",
    }
}

/// A bound in µs, in the unit a person would write it in: `2 s`, `50 ms`.
pub fn duration_text(us: f64) -> String {
    if us >= 1e6 && (us / 1e6).fract() == 0.0 {
        format!("{} s", trim(us / 1e6))
    } else if us >= 1e6 {
        format!("{:.1} s", us / 1e6)
    } else {
        format!("{} ms", trim(us / 1e3))
    }
}

pub fn trim(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sla_terms_parse_with_units_and_bad_ones_name_the_term() {
        let sla =
            parse_sla("p99<=2s, missed=0,paid-after-deadline<=1%,max-rate>=500,recovery<=30s")
                .unwrap();
        let t = sla.terms(Condition::Normal);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].metric, t[0].op, t[0].bound),
            (Metric::Lateness(Pct::P99), Op::Le, 2e6)
        );
        assert_eq!(
            (t[1].metric, t[1].op, t[1].bound),
            (Metric::Missed, Op::Eq, 0.0)
        );
        assert_eq!((t[2].metric, t[2].bound), (Metric::PaidAfterDeadline, 0.01));
        let rate = sla.terms(Condition::Capacity);
        assert_eq!(
            (rate.len(), rate[0].metric, rate[0].op, rate[0].bound),
            (1, Metric::MaxRate, Op::Ge, 500.0)
        );
        // The backlog keeps what a backlog step measures.
        let backlog: Vec<&str> = sla
            .terms(Condition::Backlog)
            .iter()
            .map(|t| t.text.as_str())
            .collect();
        assert_eq!(backlog, ["p99<=2s", "missed=0", "recovery<=30s"]);
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
    fn a_condition_section_replaces_the_defaults_for_that_condition() {
        let sla = parse_sla("p99<=2s,missed=0; faults: missed=0,p99<=10s; cluster: none").unwrap();
        let texts = |c| {
            sla.terms(c)
                .iter()
                .map(|t: &Term| t.text.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(Condition::Normal), ["p99<=2s", "missed=0"]);
        assert_eq!(texts(Condition::Faults), ["missed=0", "p99<=10s"]);
        assert!(texts(Condition::Cluster).is_empty());
        assert!(texts(Condition::Capacity).is_empty());
        assert_eq!(texts(Condition::Backlog), ["p99<=2s", "missed=0"]);
        assert_eq!(
            sla.judged(),
            [Condition::Normal, Condition::Faults, Condition::Backlog]
        );
        // Only sections: the other conditions are not judged.
        let sla = parse_sla("capacity: max-rate>=100").unwrap();
        assert_eq!(sla.judged(), [Condition::Capacity]);
        for (bad, names) in [
            ("p99<=2s; chaos: missed=0", "unknown condition `chaos`"),
            ("faults: max-rate>=5", "`max-rate>=5` under `faults:`"),
            ("backlog: p90<=1s", "`p90<=1s` under `backlog:`"),
            ("faults: missed=0; faults: p99<=1s", "`faults:` twice"),
            ("p99<=2s; missed=0", "two sections without a condition"),
            ("faults: ", "no terms"),
            ("faults: missed=0, p99<=soon", "`p99<=soon`"),
        ] {
            let e = format!("{:#}", parse_sla(bad).unwrap_err());
            assert!(e.contains(names), "{bad}: {e}");
        }
    }
}
