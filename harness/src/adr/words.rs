//! One option's verdicts in words, as the draft's sections quote them:
//! the conditions it meets, each failed term with its deciding figure, its
//! cell of the shortlist, its cost per cancel, and what was measured of it
//! condition by condition.

use super::evidence;
use super::judge::Kind;
use super::sla::Condition;
use super::study::{CondEval, Eval, Study};
use super::tradeoff::Tradeoff;
use crate::model::summary::Summary;
use std::fmt::Write;
use std::path::Path;

/// The conditions that apply to an option, by name (`normal, faults;
/// cluster n/a`).
pub(super) fn applied(e: &Eval) -> String {
    let met: Vec<&str> = e
        .conditions
        .iter()
        .filter(|c| c.kind == Kind::Meets)
        .map(|c| c.condition.name())
        .collect();
    let na: Vec<&str> = e
        .conditions
        .iter()
        .filter(|c| c.kind == Kind::NotApplicable)
        .map(|c| c.condition.name())
        .collect();
    let mut words = met.join(", ");
    if !na.is_empty() {
        let _ = write!(words, "; {} n/a to it", na.join(", "));
    }
    words
}

/// Each failed term in a few words with its deciding figure.
pub(super) fn failures(e: &Eval, base: &Path) -> Vec<String> {
    e.conditions
        .iter()
        .flat_map(|c| c.terms.iter().map(move |t| (c.condition, t)))
        .filter(|(_, (_, v))| v.kind == Kind::Fails)
        .map(|(c, (t, v))| {
            format!(
                "{} `{}` with {}{}",
                c.name(),
                t.text,
                v.shown.as_ref().map(|f| f.render(base)).unwrap_or_default(),
                v.note
            )
        })
        .collect()
}

/// One condition of one option for the shortlist: the deciding figure of
/// each term (only the failing ones where one fails).
pub(super) fn cell(c: &CondEval, base: &Path) -> String {
    let figs = |want: Kind| {
        c.terms
            .iter()
            .filter(|(_, v)| v.kind == want)
            .filter_map(|(t, v)| {
                v.shown
                    .as_ref()
                    .map(|f| format!("`{}` {}{}", t.text, f.render(base), v.note))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    match c.kind {
        Kind::Meets => format!("meets: {}", figs(Kind::Meets)),
        Kind::Fails => format!("**fails**: {}", figs(Kind::Fails)),
        Kind::NotApplicable => "n/a".into(),
        Kind::NotMeasured => {
            let missing: Vec<String> = c
                .terms
                .iter()
                .filter(|(_, v)| v.kind == Kind::NotMeasured)
                .map(|(t, _)| format!("`{}`", t.text))
                .collect();
            let met = figs(Kind::Meets);
            let all = missing.len() == c.terms.len();
            format!(
                "not measured{}{}",
                if all {
                    String::new()
                } else {
                    format!(": {}", missing.join(", "))
                },
                if met.is_empty() {
                    String::new()
                } else {
                    format!("; meets {met}")
                }
            )
        }
    }
}

/// Cost per cancel from the run the trade-off compares the options in
/// (its lateness column's run), where the option ran there; else from its
/// own run with the most cancels without faults, else with faults, said
/// to be another run than the others'.
pub(super) fn cost_line(
    e: &Eval,
    study: &Study,
    tradeoff: Option<&Tradeoff>,
    base: &Path,
) -> Option<String> {
    let compared_in = tradeoff.and_then(|t| t.normal_run.clone());
    if let Some(label) = &compared_in {
        if let Some((source, s)) = study
            .sources
            .iter()
            .find(|s| &s.label == label)
            .and_then(|src| src.summary(e.variant).map(|sum| (src, sum)))
        {
            let (figs, no_cpu) = cost_parts(s, source, base);
            if !figs.is_empty() {
                return Some(format!(
                    "{} per cancel ({}{})",
                    figs.join(", "),
                    source.label,
                    no_cpu.map(|c| format!("; {c}")).unwrap_or_default()
                ));
            }
        }
    }
    for c in [Condition::Normal, Condition::Faults, Condition::Cluster] {
        let best = study
            .sources
            .iter()
            .filter(|s| s.condition == c)
            .filter_map(|s| s.summary(e.variant).map(|sum| (s, sum)))
            .max_by_key(|(_, sum)| sum.lateness_us.count);
        if let Some((source, s)) = best {
            let (figs, no_cpu) = cost_parts(s, source, base);
            if figs.is_empty() {
                continue;
            }
            let mut caveats: Vec<String> = no_cpu.into_iter().collect();
            if c != Condition::Normal {
                caveats.push(format!("{}: no run without faults ran it", c.words()));
            }
            if let Some(label) = &compared_in {
                caveats.push(format!(
                    "not {label}, where the others are compared: not comparable with theirs"
                ));
            }
            return Some(format!(
                "{} per cancel ({}{})",
                figs.join(", "),
                source.label,
                caveats.iter().map(|c| format!("; {c}")).collect::<String>()
            ));
        }
    }
    None
}

/// `s`'s cost figures as the draft cites them, and, where CPU is not
/// among them, why: a run without repetitions writes no CPU figure in the
/// one scope (every service and the workers), and the workers' own figure
/// alone would read cheaper than the others' beside it.
fn cost_parts(
    s: &Summary,
    source: &evidence::Source,
    base: &Path,
) -> (Vec<String>, Option<String>) {
    let figures = evidence::cost_figures(s, &source.summary_file(s.strategy.name()));
    let has_cpu = figures.iter().any(|f| {
        f.keys
            .iter()
            .any(|(k, _)| k.contains("cpu_all_us_per_cancel"))
    });
    let figs = figures.iter().map(|f| f.render(base)).collect();
    let no_cpu = (!has_cpu).then(|| {
        format!(
            "no CPU figure: {} wrote none with every service and the workers in one scope \
             (a run with --repeat writes it)",
            source.label
        )
    });
    (figs, no_cpu)
}

/// What was measured of an option, condition by condition: failures with
/// their figure, then what it meets, what is n/a, what was not measured.
pub(super) fn measured_line(e: &Eval, base: &Path) -> String {
    let mut parts = Vec::new();
    let fails = failures(e, base);
    if !fails.is_empty() {
        parts.push(format!("fails {}", fails.join("; ")));
    }
    let by = |k: Kind| -> Vec<&str> {
        e.conditions
            .iter()
            .filter(|c| c.kind == k)
            .map(|c| c.condition.name())
            .collect()
    };
    let met = by(Kind::Meets);
    if !met.is_empty() {
        parts.push(format!("meets {}", met.join(", ")));
    }
    let na = by(Kind::NotApplicable);
    if !na.is_empty() {
        parts.push(format!("{} n/a", na.join(", ")));
    }
    let nm: Vec<String> = e
        .conditions
        .iter()
        .filter(|c| c.kind == Kind::NotMeasured)
        .map(|c| {
            let partly: Vec<String> = c
                .terms
                .iter()
                .filter(|(_, v)| v.kind == Kind::NotMeasured && v.note.starts_with("too few"))
                .map(|(t, _)| format!("`{}` from too few samples", t.text))
                .collect();
            if partly.is_empty() {
                c.condition.name().to_string()
            } else {
                format!("{} ({})", c.condition.name(), partly.join(", "))
            }
        })
        .collect();
    if !nm.is_empty() {
        parts.push(format!("not measured: {}", nm.join(", ")));
    }
    parts.join("; ")
}
