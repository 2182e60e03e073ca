//! The verdict of each SLA term for an option in a condition.
//!
//! Rules:
//! - an option is judged only from its own runs ([`own`]):
//!   `rabbit-ttl+outbox` is never given `rabbit-ttl`'s figures; where it
//!   never ran, "not measured";
//! - a fault that did not reach an option (`n/a`, or one that missed its
//!   target) is no evidence that it survives faults: a fault run counts for
//!   an option only if at least one fault hit it, and every cell says how
//!   many did;
//! - a percentile from too few samples is not printed, but it is still
//!   bounded: the max bounds it from above, and a lower percentile that is
//!   already over a `≤` bound fails the term;
//! - a backlog restart that lost a probe order fails, however fast.
//!
//! How one run reads against a term is [`reading`](super::reading)'s;
//! this file gathers the runs' readings into the verdict.

use super::evidence::{measure_hint, own, Figure, Own, Source};
use super::reading::{read, Reading};
use super::sla::{Condition, Op, Term};
use strategies::registry::Variant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Meets,
    Fails,
    NotMeasured,
    NotApplicable,
}

/// How an option fares on one term in one condition.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub kind: Kind,
    /// The deciding figure: the worst run's (the failing one's, where one
    /// fails).
    pub shown: Option<Figure>,
    /// Said after the figure (how it decides), or why it is not measured.
    pub note: String,
    /// Every run's figure with its own note, for the evidence appendix.
    pub detail: Vec<(Figure, String)>,
}

impl Verdict {
    pub fn not_measured(why: String) -> Verdict {
        Verdict {
            kind: Kind::NotMeasured,
            shown: None,
            note: why,
            detail: Vec::new(),
        }
    }

    pub fn not_applicable(why: String) -> Verdict {
        Verdict {
            kind: Kind::NotApplicable,
            ..Verdict::not_measured(why)
        }
    }
}

/// Judges `term` for `option` in `condition` from its own runs.
pub fn judge(sources: &[Source], option: Variant, condition: Condition, term: &Term) -> Verdict {
    let (samples, left_out) = match own(sources, option, condition) {
        Own::NotApplicable(why) => return Verdict::not_applicable(why),
        Own::Samples(s, l) => (s, l),
    };
    if samples.is_empty() {
        return Verdict::not_measured(no_run_reached(option, condition, &left_out));
    }
    let readings: Vec<Reading> = samples.iter().map(|s| read(s, term)).collect();
    let upper = term.op.is_upper() || term.op == Op::Eq;
    let mut tally = Tally::of(readings, upper);
    if !left_out.is_empty() {
        let note = format!(" (left out: {})", left_out.join("; "));
        if let Some((_, _, n)) = tally.failing.as_mut().or(tally.holding.as_mut()) {
            n.push_str(&note);
        }
    }
    tally.verdict()
}

/// Why nothing measured `option` in `condition`: no run of it, or none
/// that reached it (the `left_out` runs, each with its reason).
fn no_run_reached(option: Variant, condition: Condition, left_out: &[String]) -> String {
    let name = option.name();
    let mut why = format!(
        "no {} ran {name}: {}",
        singular(condition),
        measure_hint(option, condition)
    );
    if !left_out.is_empty() {
        why = format!(
            "no {} reached {name} ({}): {}",
            singular(condition),
            left_out.join("; "),
            measure_hint(option, condition)
        );
    }
    why
}

/// Every run's reading of one term, gathered: the worst failing and the
/// worst holding figure (worst: the highest for an upper bound or `=`,
/// else the lowest), the undecided runs, and each run's line for the
/// evidence file.
struct Tally {
    failing: Option<(Figure, f64, String)>,
    holding: Option<(Figure, f64, String)>,
    undecided: Vec<String>,
    detail: Vec<(Figure, String)>,
}

impl Tally {
    fn of(readings: Vec<Reading>, upper: bool) -> Tally {
        let worst = |a: f64, b: f64| if upper { a > b } else { a < b };
        let mut detail = Vec::new();
        let (mut failing, mut holding, mut undecided): (
            Option<(Figure, f64, String)>,
            _,
            Vec<String>,
        ) = (None, None::<(Figure, f64, String)>, Vec::new());
        for r in readings {
            match r {
                Reading::Fails(f, v, note) => {
                    detail.push((f.clone(), format!("**fails**{note}")));
                    if failing.as_ref().is_none_or(|(_, w, _)| worst(v, *w)) {
                        failing = Some((f, v, note));
                    }
                }
                Reading::Holds(f, v, note) => {
                    detail.push((f.clone(), note.trim_start().to_string()));
                    if holding.as_ref().is_none_or(|(_, w, _)| worst(v, *w)) {
                        holding = Some((f, v, note));
                    }
                }
                Reading::Undecided(f, why) => {
                    detail.push((f.clone(), format!("undecided: {why}")));
                    undecided.push(format!("{} ({why})", f.text));
                }
            }
        }
        Tally {
            failing,
            holding,
            undecided,
            detail,
        }
    }

    /// Fails where any run fails; else not measured while any run is
    /// undecided; else meets, shown by the worst holding figure.
    fn verdict(self) -> Verdict {
        let Tally {
            failing,
            holding,
            undecided,
            detail,
        } = self;
        let verdict = |kind, (f, _, note): (Figure, f64, String), detail| Verdict {
            kind,
            shown: Some(f),
            note,
            detail,
        };
        if let Some(f) = failing {
            return verdict(Kind::Fails, f, detail);
        }
        if !undecided.is_empty() {
            let mut v = Verdict::not_measured(format!(
                "too few samples to decide: {}",
                undecided.join("; ")
            ));
            v.detail = detail;
            return v;
        }
        verdict(Kind::Meets, holding.expect("a sample read"), detail)
    }
}

fn singular(condition: Condition) -> &'static str {
    match condition {
        Condition::Normal => "run without faults",
        Condition::Faults => "fault run",
        Condition::Cluster => "cluster run",
        Condition::Capacity => "rate sweep",
        Condition::Backlog => "backlog sweep",
    }
}
