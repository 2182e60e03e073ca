//! The draft itself, in the MADR 4 form: Context and Problem Statement,
//! Decision Drivers, Considered Options, Decision Outcome (with its
//! Consequences and Confirmation), Pros and Cons of the Options, More
//! Information (with the limits of the evidence and how to rerun it).

use super::evidence;
use super::judge::Kind;
use super::limits;
use super::objective::{self, Objective};
use super::outcome;
use super::sla::Condition;
use super::study::{Eval, Standing, Study};
use super::tradeoff::Tradeoff;
use super::words::{applied, cell, cost_line, failures, measured_line};
use crate::faults::FaultReach;
use anyhow::Result;
use std::fmt::Write;
use std::path::Path;
use strategies::registry;

pub fn draft(
    study: &Study,
    objective: &Objective,
    base: &Path,
    evidence_file: &str,
) -> Result<String> {
    let mut out = String::new();
    let meeting: Vec<&Eval> = study
        .evals
        .iter()
        .filter(|e| e.standing() == Standing::Meets)
        .collect();
    let tradeoff =
        (!meeting.is_empty()).then(|| Tradeoff::new(study.sources, meeting, objective, base));
    let chosen = tradeoff
        .as_ref()
        .and_then(|t| t.pick.chosen.map(|i| t.options[i]));
    let shortlist = study.shortlist(tradeoff.as_ref().map(Tradeoff::in_order));
    let lead = shortlist[0];
    let first = &study.sources[0].info;
    let date = study
        .sources
        .iter()
        .map(|s| s.info.started_at.get(..10).unwrap_or(""))
        .max()
        .unwrap_or("");
    writeln!(
        out,
        "---\nstatus: proposed\ndate: {date}\ndecision-makers: (who decides)\n---\n"
    )?;
    match (chosen, &tradeoff) {
        (Some(c), Some(t)) if t.example_priority && t.options.len() > 1 => writeln!(
            out,
            "# Cancel unpaid orders at their deadline with {}, under the tool's example \
             priority\n",
            c.name
        )?,
        (Some(c), _) => writeln!(
            out,
            "# Cancel unpaid orders at their deadline with {}\n",
            c.name
        )?,
        (None, Some(t)) => writeln!(
            out,
            "# Cancelling unpaid orders at their deadline: {} meet the objective, no measured \
             difference picks one\n",
            t.pick
                .remaining
                .iter()
                .map(|&i| t.name(i))
                .collect::<Vec<_>>()
                .join(", ")
        )?,
        (None, None) => writeln!(
            out,
            "# Cancelling unpaid orders at their deadline: undecided, {} leads\n",
            lead.name
        )?,
    }
    writeln!(
        out,
        "Draft by `delaybench adr` (delaybench {}) from {} run folders. Every figure links to the \
         JSON file it comes from (hover: the key and its raw value). The full evidence, every run \
         and every term: [{evidence_file}]({evidence_file}). Check it, then make this your decision.\n",
        first.delaybench_version,
        study.sources.len()
    )?;

    context(&mut out, study, base)?;
    drivers(&mut out, study, objective)?;
    considered(&mut out, study)?;
    outcome(&mut out, study, &shortlist, tradeoff.as_ref(), chosen, base)?;
    pros_and_cons(&mut out, study, &shortlist, tradeoff.as_ref(), base)?;
    more_information(&mut out, study, evidence_file)?;
    Ok(out)
}

fn context(out: &mut String, study: &Study, base: &Path) -> Result<()> {
    writeln!(out, "## Context and Problem Statement\n")?;
    writeln!(
        out,
        "An order not paid within its timeout must be cancelled near its deadline and its stock \
         released exactly once; a paid order must never be cancelled. Which way of cancelling \
         should we run, given the objective below and the services we operate? Each option ran \
         the same workload against real services:\n"
    )?;
    for c in Condition::ALL {
        let runs: Vec<String> = study
            .sources
            .iter()
            .filter(|s| s.condition == c)
            .map(|s| {
                format!(
                    "[{}]({}) ({})",
                    s.label,
                    evidence::relative(base, &s.dir.join("run.json")),
                    limits::run_words(s)
                )
            })
            .collect();
        if !runs.is_empty() {
            writeln!(out, "- {}: {}.", c.words(), runs.join("; "))?;
        }
    }
    writeln!(out)?;
    Ok(())
}

fn drivers(out: &mut String, study: &Study, objective: &Objective) -> Result<()> {
    writeln!(out, "## Decision Drivers\n")?;
    for line in objective::words(objective, study.sources) {
        writeln!(out, "{line}")?;
    }
    writeln!(out)?;
    Ok(())
}

fn considered(out: &mut String, study: &Study) -> Result<()> {
    writeln!(out, "## Considered Options\n")?;
    // Each strategy once, with the remedies it ran with.
    let mut bases: Vec<(&'static registry::StrategyInfo, Vec<String>)> = Vec::new();
    for e in &study.evals {
        let info = e.variant.info;
        match bases.iter_mut().find(|(b, _)| b.name == info.name) {
            Some((_, names)) => names.push(e.name.clone()),
            None => bases.push((info, vec![e.name.clone()])),
        }
    }
    bases.sort_by_key(|(b, _)| {
        registry::STRATEGIES
            .iter()
            .position(|s| s.name == b.name)
            .unwrap_or(usize::MAX)
    });
    for (info, names) in &bases {
        let mut needs = vec!["the database".to_string()];
        needs.extend(info.requires.iter().map(|s| s.name().to_string()));
        let mut names = names.clone();
        names.sort_by_key(|n| n.len());
        writeln!(
            out,
            "- {} — {}; needs {}.",
            names
                .iter()
                .map(|n| format!("**{n}**"))
                .collect::<Vec<_>>()
                .join(", "),
            info.summary,
            needs.join(" and ")
        )?;
    }
    writeln!(
        out,
        "\n`+fallback`: {}. `+outbox`: {}. Teaching variants (known mistakes on purpose) and the \
         ceiling (a yardstick) are left out.\n",
        registry::FALLBACK.summary,
        registry::OUTBOX.summary
    )?;
    Ok(())
}

fn outcome(
    out: &mut String,
    study: &Study,
    shortlist: &[&Eval],
    tradeoff: Option<&Tradeoff>,
    chosen: Option<&Eval>,
    base: &Path,
) -> Result<()> {
    writeln!(out, "## Decision Outcome\n")?;
    match tradeoff {
        Some(t) => {
            for line in outcome::decision(t) {
                writeln!(out, "{line}")?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "### The trade-off among the options that meet the objective\n"
            )?;
            let (rows, below) = outcome::table(t);
            table(out, &rows);
            out.push_str(&below);
        }
        None => decision(out, study, shortlist[0], base)?,
    }
    writeln!(
        out,
        "Whether each option meets the objective, condition by condition (every option: [Pros \
         and Cons](#pros-and-cons-of-the-options)). Each cell shows the deciding figure of its \
         own worst run, so two cells may come from different runs: read them for meeting the \
         objective, never to compare two options (the trade-off above does that, from one \
         run):\n"
    )?;
    shortlist_table(out, study, shortlist, base);

    writeln!(out, "### Consequences\n")?;
    match chosen {
        Some(c) => {
            for line in consequences(c, study, tradeoff, base) {
                writeln!(out, "- {line}")?;
            }
        }
        None => writeln!(
            out,
            "- None yet: no option is chosen. Each option's good and bad: [Pros and \
             Cons](#pros-and-cons-of-the-options)."
        )?,
    }
    writeln!(out)?;
    writeln!(out, "### Confirmation\n")?;
    writeln!(
        out,
        "Rerun the evidence on your own machines and services ([the commands](#rerun-the-evidence)) \
         and compare (`delaybench compare`); once in production, watch the lateness p99 and the \
         orders still PENDING past their deadline.\n"
    )?;
    Ok(())
}

/// Why none is chosen where no option meets the objective: the leading
/// one and what it lacks.
fn decision(out: &mut String, study: &Study, lead: &Eval, base: &Path) -> Result<()> {
    let _ = study;
    match lead.standing() {
        Standing::Meets => unreachable!("options that meet go through the trade-off"),
        Standing::NotShown => writeln!(
            out,
            "Chosen option: none yet. No option is shown to meet every term. The leading \
             candidate, **{}**, fails no term that was measured, but it was not measured in {}. \
             Measure that before deciding.\n",
            lead.name,
            lead.conditions
                .iter()
                .filter(|c| c.kind == Kind::NotMeasured)
                .map(|c| format!("{} ({})", c.condition.name(), c.why()))
                .collect::<Vec<_>>()
                .join(" and ")
        )?,
        Standing::Fails => writeln!(
            out,
            "Chosen option: none. No option meets the objective as measured; the closest, \
             **{}**, fails {}.\n",
            lead.name,
            failures(lead, base).join("; ")
        )?,
    }
    Ok(())
}

/// The shortlist as a table: each option's verdict per judged condition.
fn shortlist_table(out: &mut String, study: &Study, shortlist: &[&Eval], base: &Path) {
    let judged = study.sla.judged();
    let mut header = vec!["option".to_string(), "needs".into()];
    header.extend(judged.iter().map(|c| c.name().to_string()));
    header.push("verdict".into());
    let mut rows = vec![header];
    for e in shortlist {
        let mut row = vec![format!("**{}**", e.name), e.needs.join(", ")];
        row.extend(e.conditions.iter().map(|c| cell(c, base)));
        row.push(
            match e.standing() {
                Standing::Meets => "**meets**",
                Standing::NotShown => "not shown",
                Standing::Fails => "fails",
            }
            .into(),
        );
        rows.push(row);
    }
    table(out, &rows);
}

/// The good and the bad of choosing `e`: what was measured, then what the
/// registry says of its strategy and remedies.
fn consequences(e: &Eval, study: &Study, tradeoff: Option<&Tradeoff>, base: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let met = applied(e);
    if !met.is_empty() {
        lines.push(format!(
            "Good, because it meets every term measured in: {met} (figures above)."
        ));
    }
    lines.extend(
        e.variant
            .info
            .good
            .iter()
            .map(|g| format!("Good, because {g}.")),
    );
    for r in e.variant.remedies() {
        lines.extend(
            r.good
                .iter()
                .map(|g| format!("Good ({}), because {g}.", r.suffix)),
        );
    }
    if let Some(cost) = cost_line(e, study, tradeoff, base) {
        lines.push(format!("Neutral, because it costs {cost}."));
    }
    if let Some(t) = tradeoff {
        lines.extend(outcome::worse_lines(t, e));
    }
    if !e.variant.info.requires.is_empty() {
        lines.push(format!(
            "Bad, because {} must be operated beside the database.",
            e.needs[1..].join(" and ")
        ));
    }
    lines.extend(
        e.variant
            .info
            .bad
            .iter()
            .map(|b| format!("Bad, because {b}.")),
    );
    for r in e.variant.remedies() {
        lines.extend(
            r.bad
                .iter()
                .map(|b| format!("Bad ({}), because {b}.", r.suffix)),
        );
    }
    for c in e.conditions.iter().filter(|c| c.kind == Kind::NotMeasured) {
        lines.push(format!(
            "Bad, because {} was not measured: {}.",
            c.condition.name(),
            c.why()
        ));
    }
    lines
}

fn pros_and_cons(
    out: &mut String,
    study: &Study,
    shortlist: &[&Eval],
    tradeoff: Option<&Tradeoff>,
    base: &Path,
) -> Result<()> {
    writeln!(out, "## Pros and Cons of the Options\n")?;
    let chosen = tradeoff.and_then(|t| t.pick.chosen.map(|i| t.options[i]));
    for (info, evals) in &by_strategy(shortlist) {
        strategy_pros_and_cons(out, study, info, evals, chosen, tradeoff, base)?;
    }
    other_options(out, study, shortlist, base)
}

/// The shortlist grouped by strategy, in shortlist order.
fn by_strategy<'a>(
    shortlist: &[&'a Eval],
) -> Vec<(&'static registry::StrategyInfo, Vec<&'a Eval>)> {
    let mut groups: Vec<(&'static registry::StrategyInfo, Vec<&Eval>)> = Vec::new();
    for e in shortlist {
        match groups
            .iter_mut()
            .find(|(b, _)| b.name == e.variant.info.name)
        {
            Some((_, list)) => list.push(e),
            None => groups.push((e.variant.info, vec![e])),
        }
    }
    groups
}

/// One strategy's shortlisted options: what the registry says of it and
/// its remedies (or, for the leading option alone, a pointer to its
/// consequences), then what was measured of each.
fn strategy_pros_and_cons(
    out: &mut String,
    study: &Study,
    info: &registry::StrategyInfo,
    evals: &[&Eval],
    chosen: Option<&Eval>,
    tradeoff: Option<&Tradeoff>,
    base: &Path,
) -> Result<()> {
    let names: Vec<&str> = evals.iter().map(|e| e.name.as_str()).collect();
    writeln!(out, "### {}\n", names.join(", "))?;
    writeln!(out, "{}.\n", capitalise(info.summary))?;
    // The chosen (or leading) option's good and bad are its
    // consequences, above: not repeated.
    let brief = evals.len() == 1 && chosen.is_some_and(|c| c.name == evals[0].name);
    if brief {
        writeln!(out, "- Good and bad: as in [Consequences](#consequences).")?;
    } else {
        for g in info.good {
            writeln!(out, "- Good, because {g}.")?;
        }
        if !info.requires.is_empty() {
            let services: Vec<&str> = info.requires.iter().map(|s| s.name()).collect();
            writeln!(
                out,
                "- Bad, because {} must be operated beside the database.",
                services.join(" and ")
            )?;
        }
        for b in info.bad {
            writeln!(out, "- Bad, because {b}.")?;
        }
        for e in evals {
            for r in e.variant.remedies() {
                writeln!(out, "- **{}** adds {}:", e.name, r.summary)?;
                for g in r.good {
                    writeln!(out, "  - Good, because {g}.")?;
                }
                for b in r.bad {
                    writeln!(out, "  - Bad, because {b}.")?;
                }
            }
        }
    }
    for e in evals {
        writeln!(
            out,
            "- Measured, **{}**: {}.",
            e.name,
            measured_line(e, base)
        )?;
        if let Some(cost) = cost_line(e, study, tradeoff, base).filter(|_| !brief) {
            writeln!(out, "  Cost: {cost}.")?;
        }
        for line in weak_points(e, study, base) {
            writeln!(out, "  {line}")?;
        }
    }
    writeln!(out)?;
    Ok(())
}

/// What the faults aimed at a role (a leader, a claim holder, the node of
/// the next deadline or of the queues: an option's known weak points) did
/// to option `e`, one line per fault run: whether each reached it and the
/// missed cancels put down to it, so a weak point the registry names is
/// read beside what was measured of it.
fn weak_points(e: &Eval, study: &Study, base: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for source in study
        .sources
        .iter()
        .filter(|s| matches!(s.condition, Condition::Faults | Condition::Cluster))
    {
        let Some(s) = source.summary(e.variant) else {
            continue;
        };
        let aimed: Vec<String> = s
            .faults
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let role = f.aimed_at?;
                // A fault that cannot touch this option says nothing of
                // its weak points.
                if matches!(f.reach(), FaultReach::NotApplicable(_)) {
                    return None;
                }
                let missed: u64 = s
                    .missed_by_fault
                    .iter()
                    .filter(|l| l.fault == Some(i))
                    .map(|l| l.missed)
                    .sum();
                let reach = match f.reach() {
                    FaultReach::Hit if f.took_effect() => format!(
                        "hit; {missed} missed cancel{} put down to it alone",
                        if missed == 1 { "" } else { "s" }
                    ),
                    // Aimed right, but it never acted (a command that
                    // failed, a pause whose process was gone): no
                    // measurement of the weak point.
                    FaultReach::Hit => format!(
                        "**did not act**, so nothing was measured of it: {}",
                        f.describe()
                    ),
                    other => format!(
                        "**missed its target**: {}",
                        other.why().unwrap_or("(no reason recorded)")
                    ),
                };
                Some(format!(
                    "#{} aimed at {} ({}): {reach}",
                    i + 1,
                    role.words(),
                    f.label
                ))
            })
            .collect();
        if !aimed.is_empty() {
            let file = source.summary_file(e.name.as_str());
            let trials = match s.repeats.as_ref().map_or(1, |r| r.count) {
                1 => "one trial".to_string(),
                n => format!("the median trial of {n}"),
            };
            lines.push(format!(
                "Faults aimed at its weak points, in [{}]({}) ({trials}): {}.",
                source.label,
                super::evidence::relative(base, &file).replace(' ', "%20"),
                aimed.join("; ")
            ));
        }
    }
    lines
}

/// The options left off the shortlist, one line each.
fn other_options(out: &mut String, study: &Study, shortlist: &[&Eval], base: &Path) -> Result<()> {
    let others: Vec<&Eval> = study
        .evals
        .iter()
        .filter(|e| !shortlist.iter().any(|s| s.name == e.name))
        .collect();
    if !others.is_empty() {
        writeln!(out, "### The other options\n")?;
        for e in others {
            writeln!(
                out,
                "- **{}** ({}): {}.",
                e.name,
                e.needs.join(", "),
                measured_line(e, base)
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn more_information(out: &mut String, study: &Study, evidence_file: &str) -> Result<()> {
    writeln!(out, "## More Information\n")?;
    writeln!(
        out,
        "Every run's figures and every term's verdict: [{evidence_file}]({evidence_file}). How the \
         draft judges:\n"
    )?;
    for rule in [
        "each option only from its own runs: a variant that did not run in a condition is not \
         measured there, never given its strategy's figures;",
        "a fault run counts for an option only if a fault reached it: a fault that cannot touch \
         it (n/a) or that missed its target is not survived, and each figure says how many hit;",
        "a percentile needs 10 samples beyond it (a p99: 1 000 cancels); with fewer, the max \
         bounds it from above, and a lower percentile already over a `≤` bound fails the term;",
        "a backlog restart that lost a probe order is no recovery, however fast.",
    ] {
        writeln!(out, "- {rule}")?;
    }
    writeln!(out, "\n### Limits of this evidence\n")?;
    for line in limits::limits(study.sources) {
        writeln!(out, "- {line}")?;
    }
    writeln!(out, "\n### Rerun the evidence\n")?;
    writeln!(
        out,
        "Each input folder's command, from its `run.json`, with the scenario it ran (its \
         `scenario.toml`, or `run.json` itself where it has none):\n"
    )?;
    writeln!(out, "```sh")?;
    for source in study.sources {
        writeln!(out, "{}", limits::rerun(source))?;
    }
    writeln!(out, "```")?;
    Ok(())
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

pub fn table(out: &mut String, rows: &[Vec<String>]) {
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
