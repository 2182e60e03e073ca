//! The decision among the options that meet the objective, in words: the
//! pick and the separated difference that made it, or that nothing
//! measured separates them; the criteria where the pick is worse; the
//! differences that do exist; and the trade-off table.

use super::separation::{Compared, Criterion};
use super::tradeoff::Tradeoff;

/// The Decision Outcome's opening: what was chosen and why, or why none.
pub fn decision(t: &Tradeoff) -> Vec<String> {
    let mut lines = Vec::new();
    let n = t.options.len();
    let priority = if t.priority.is_empty() {
        "no priority".to_string()
    } else {
        t.priority
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", then ")
    };
    match t.pick.chosen {
        Some(c) => {
            lines.push(if n == 1 {
                format!(
                    "Chosen option: **{}**, the only option that meets the objective.",
                    t.name(c)
                )
            } else {
                format!(
                    "Chosen option: **{}**. {n} options meet the objective. A difference \
                     between two of them counts only where it is separated (their repetitions' \
                     ranges, from the same run, do not overlap) and material; on that rule and \
                     the priority ({priority}{}), the others leave:",
                    t.name(c),
                    if t.example_priority {
                        ", the tool's example"
                    } else {
                        ""
                    }
                )
            });
            lines.extend(steps(t));
            if n > 1 {
                lines.push(format!("\n{}", caveat(t)));
            }
            let worse = worse_than_others(t, c);
            if worse.is_empty() {
                lines.push(format!(
                    "\nWhere **{}** is worse, separated: nowhere; no other option that meets the \
                     objective is separated from it for the better on any criterion.",
                    t.name(c)
                ));
            } else {
                lines.push(format!("\nWhere **{}** is worse, separated:", t.name(c)));
                lines.extend(worse);
            }
            let reads = reads_worse(t, c);
            if !reads.is_empty() {
                lines.push(format!(
                    "\nWhere **{}** reads worse, but the difference is not separated (no \
                     measured difference; a later run may tell):",
                    t.name(c)
                ));
                lines.extend(reads);
            }
            let unknown = not_measured(t, c);
            if !unknown.is_empty() {
                lines.push(format!("\nNot measured for **{}**:", t.name(c)));
                lines.extend(unknown);
            }
        }
        None => {
            let names: Vec<String> = t
                .pick
                .remaining
                .iter()
                .map(|&i| format!("**{}**", t.name(i)))
                .collect();
            lines.push(format!(
                "Chosen option: none. {n} option{} meet{} the objective. {}No measured \
                 difference separates {} on the priority ({priority}): choose by what you \
                 operate.",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" },
                if t.pick.steps.is_empty() && t.pick.dominated.is_empty() {
                    String::new()
                } else {
                    "Some left on a separated difference (below). ".into()
                },
                names.join(", ")
            ));
            lines.extend(steps(t));
            let exist = differences(t, &t.pick.remaining);
            if exist.is_empty() {
                lines.push(
                    "\nAmong them, no criterion separates any two: every difference in the table \
                     below is inside the spread of its repetitions or rests on one trial."
                        .into(),
                );
            } else {
                lines.push("\nThe differences among them that are separated:".into());
                lines.extend(exist);
            }
        }
    }
    lines
}

/// Who left the choice and on what: dominated options first (by whom,
/// on which criterion, with both figures), then each step of the
/// priority.
fn steps(t: &Tradeoff) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, by) in &t.pick.dominated {
        let reasons: Vec<String> = by
            .iter()
            .flat_map(|&j| {
                t.columns
                    .iter()
                    .filter_map(move |col| match col.compare(j, *i) {
                        Compared::Better(why) => Some(format!(
                            "**{}** on {}: {} against {}; {why}",
                            t.name(j),
                            col.criterion.name(),
                            col.readings[j].text(),
                            col.readings[*i].text()
                        )),
                        _ => None,
                    })
            })
            .collect();
        lines.push(format!(
            "- **{}** leaves first, dominated (separated for the worse, and for the better on \
             no criterion): {}.",
            t.name(*i),
            if reasons.is_empty() {
                "through a chain of other options that dominate one another".into()
            } else {
                reasons.join("; ")
            }
        ));
    }
    for step in &t.pick.steps {
        let col = t.column(step.criterion);
        for (i, j, why) in &step.left {
            lines.push(format!(
                "- on **{}** ({}): **{}** {} against **{}** {}; {why}: it leaves.",
                step.criterion.name(),
                col.from,
                t.name(*i),
                col.readings[*i].text(),
                t.name(*j),
                col.readings[*j].text()
            ));
        }
    }
    if let Some((criterion, missing)) = &t.pick.blocked {
        for (i, why) in missing {
            lines.push(format!(
                "- on **{}**, **{}** was not measured ({why}) where the others were: a missing \
                 figure separates nothing, so the priority stops here; measure it in the same \
                 run as the others to decide.",
                criterion.name(),
                t.name(*i)
            ));
        }
    }
    lines
}

/// How many pairwise comparisons could have separated two options (both
/// measured with enough repetitions), and the chance that at least one of
/// them separated by luck alone if none differed (each 1 in 10 at 3
/// against 3; taken as independent).
fn family(t: &Tradeoff) -> (usize, f64) {
    let n = t.options.len();
    let mut k = 0;
    let mut none_by_luck = 1.0;
    for col in &t.columns {
        for a in 0..n {
            for b in a + 1..n {
                let (Some(x), Some(y)) = (col.readings[a].measured(), col.readings[b].measured())
                else {
                    continue;
                };
                if let (Some(p), Some(q)) = (x.repetitions, y.repetitions) {
                    if p >= super::separation::MIN_REPETITIONS
                        && q >= super::separation::MIN_REPETITIONS
                        && !x.bracket
                    {
                        k += 1;
                        none_by_luck *= 1.0 - 1.0 / super::separation::chance_one_in(p, q) as f64;
                    }
                }
            }
        }
    }
    (k, 1.0 - none_by_luck)
}

/// What the pick rests on, in a sentence: the priority's origin and the
/// number of comparisons behind it.
fn caveat(t: &Tradeoff) -> String {
    let (k, luck) = family(t);
    format!(
        "{}{k} comparisons could have separated two options here; with that many, the chance \
         that at least one separation above is luck alone, were no option different, is about \
         {:.0} %: read the chance beside each deciding one, and rerun with more repetitions \
         before relying on a single 1-in-10.",
        if t.example_priority {
            "This rests on the tool's example priority, not yours: set `--prefer` (or `prefer` \
             in `--slo`) to what matters to you. "
        } else {
            ""
        },
        luck * 100.0
    )
}

/// Each criterion where another option that meets the objective is
/// separated from `c` for the better.
fn worse_than_others(t: &Tradeoff, c: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for col in &t.columns {
        let better: Vec<(usize, String)> = (0..t.options.len())
            .filter(|&j| j != c)
            .filter_map(|j| match col.compare(j, c) {
                Compared::Better(why) => Some((j, why)),
                _ => None,
            })
            .collect();
        if better.is_empty() {
            continue;
        }
        let others: Vec<String> = better
            .iter()
            .map(|(j, _)| format!("**{}** {}", t.name(*j), col.readings[*j].text()))
            .collect();
        lines.push(format!(
            "- {} ({}): {} against {}; {}.",
            col.criterion.words(),
            col.from,
            col.readings[c].text(),
            others.join(", "),
            better[0].1
        ));
    }
    lines
}

/// Each criterion where another option's figure reads better than `c`'s
/// without being separated from it: the best-reading one, with why it
/// does not count.
fn reads_worse(t: &Tradeoff, c: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for col in &t.columns {
        let Some(mine) = col.readings[c].measured() else {
            continue;
        };
        let better = |a: f64, b: f64| {
            if col.criterion.higher_is_better() {
                a > b
            } else {
                a < b
            }
        };
        let best = (0..t.options.len())
            .filter(|&j| j != c)
            .filter_map(|j| Some((j, col.readings[j].measured()?)))
            .filter(|(_, m)| better(m.median, mine.median))
            .filter(|(j, _)| !matches!(col.compare(*j, c), Compared::Better(_)))
            .reduce(|x, y| if better(y.1.median, x.1.median) { y } else { x });
        if let Some((j, _)) = best {
            let why = match col.compare(j, c) {
                Compared::Tie(why) | Compared::Unknown(why) => why,
                _ => String::new(),
            };
            lines.push(format!(
                "- {} ({}): {} against **{}** {}; {why}.",
                col.criterion.words(),
                col.from,
                col.readings[c].text(),
                t.name(j),
                col.readings[j].text()
            ));
        }
    }
    lines
}

/// The criteria `c` was not measured on.
fn not_measured(t: &Tradeoff, c: usize) -> Vec<String> {
    t.columns
        .iter()
        .filter(|col| col.readings[c].measured().is_none())
        .map(|col| format!("- {}: {}.", col.criterion.words(), col.readings[c].text()))
        .collect()
}

/// Every separated difference between two of `among`, criterion by
/// criterion.
fn differences(t: &Tradeoff, among: &[usize]) -> Vec<String> {
    let mut lines = Vec::new();
    for col in &t.columns {
        for &a in among {
            for &b in among {
                if let Compared::Better(why) = col.compare(a, b) {
                    lines.push(format!(
                        "- {}: **{}** {} against **{}** {}; {why}.",
                        col.criterion.words(),
                        t.name(a),
                        col.readings[a].text(),
                        t.name(b),
                        col.readings[b].text()
                    ));
                }
            }
        }
    }
    lines
}

/// The trade-off as table rows (header first): one row per option that
/// meets the objective, one column per criterion; and what goes below it:
/// the run each column is read from, and the rule.
pub fn table(t: &Tradeoff) -> (Vec<Vec<String>>, String) {
    let mut header = vec!["option".to_string()];
    header.extend(Criterion::ALL.iter().map(|c| c.name().to_string()));
    header.push("standing".into());
    let mut rows = vec![header];
    let dominated_by = |i: usize| {
        t.pick
            .dominated
            .iter()
            .find(|(d, _)| *d == i)
            .map(|(_, by)| by.clone())
    };
    for i in 0..t.options.len() {
        let mut row = vec![format!("**{}**", t.name(i))];
        row.extend(
            Criterion::ALL
                .iter()
                .map(|c| t.column(*c).readings[i].text()),
        );
        row.push(if t.pick.chosen == Some(i) {
            "**chosen**".into()
        } else if let Some(by) = dominated_by(i) {
            format!(
                "dominated by {}",
                by.iter().map(|&j| t.name(j)).collect::<Vec<_>>().join(", ")
            )
        } else if t.pick.remaining.contains(&i) {
            "not separated from the rest".into()
        } else {
            "left on the priority".into()
        });
        rows.push(row);
    }
    let mut below = String::new();
    for c in Criterion::ALL {
        below.push_str(&format!("- {}: {}.\n", c.name(), t.column(c).from));
    }
    below.push_str(&format!(
        "\nA range is the lowest to the highest repetition; two options differ on a criterion \
         only where their ranges, from the same run, do not overlap with at least {} \
         repetitions each (by chance alone that happens 1 in {} times for 3 against 3). One \
         trial (faults, recovery) is shown, never ranked.\n\n",
        super::separation::MIN_REPETITIONS,
        super::separation::chance_one_in(3, 3)
    ));
    (rows, below)
}

/// For the chosen option's consequences: "Bad, because ..." for each
/// criterion where another option that meets the objective is separated
/// from it for the better.
pub fn worse_lines(t: &Tradeoff, e: &super::study::Eval) -> Vec<String> {
    let Some(c) = t.options.iter().position(|o| o.name == e.name) else {
        return Vec::new();
    };
    worse_than_others(t, c)
        .into_iter()
        .map(|l| format!("Bad, because on {}", l.trim_start_matches("- ")))
        .collect()
}
