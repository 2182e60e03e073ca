//! The evaluation: every option of the decision and how it fares in every
//! judged condition ([`Eval`], [`CondEval`], [`Standing`]), and the study
//! of all of them the draft and its evidence are written from ([`Study`]).

use super::evidence::{self, Source};
use super::judge::{self, Kind, Verdict};
use super::sla::{Condition, Sla, Term};
use anyhow::{bail, Result};
use strategies::registry::{self, Role, Variant};

/// One option of the decision and how it fares in every judged condition.
pub struct Eval {
    pub name: String,
    pub variant: Variant,
    /// `database`, then the services it needs.
    pub needs: Vec<&'static str>,
    /// One per judged condition, in [`Condition::ALL`] order.
    pub conditions: Vec<CondEval>,
}

/// An option in one condition: each term's verdict, and the sum of them.
pub struct CondEval {
    pub condition: Condition,
    pub kind: Kind,
    pub terms: Vec<(Term, Verdict)>,
}

/// Where an option stands overall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Standing {
    /// Meets every term of every condition that applies to it.
    Meets,
    /// Fails none, but some were not measured.
    NotShown,
    Fails,
}

impl CondEval {
    fn new(condition: Condition, terms: Vec<(Term, Verdict)>) -> CondEval {
        let kinds: Vec<Kind> = terms.iter().map(|(_, v)| v.kind).collect();
        let kind = if kinds.iter().all(|k| *k == Kind::NotApplicable) {
            Kind::NotApplicable
        } else if kinds.contains(&Kind::Fails) {
            Kind::Fails
        } else if kinds
            .iter()
            .all(|k| matches!(k, Kind::Meets | Kind::NotApplicable))
        {
            Kind::Meets
        } else {
            Kind::NotMeasured
        };
        CondEval {
            condition,
            kind,
            terms,
        }
    }

    /// Why the condition is not measured (or not applicable), once.
    pub fn why(&self) -> String {
        let mut whys: Vec<&str> = Vec::new();
        for (_, v) in &self.terms {
            if matches!(v.kind, Kind::NotMeasured | Kind::NotApplicable)
                && !whys.contains(&v.note.as_str())
            {
                whys.push(&v.note);
            }
        }
        whys.join("; ")
    }
}

impl Eval {
    pub fn standing(&self) -> Standing {
        if self.conditions.iter().any(|c| c.kind == Kind::Fails) {
            Standing::Fails
        } else if self
            .conditions
            .iter()
            .all(|c| matches!(c.kind, Kind::Meets | Kind::NotApplicable))
        {
            Standing::Meets
        } else {
            Standing::NotShown
        }
    }

    /// How far from meeting: failed terms, or conditions not measured.
    fn distance(&self) -> usize {
        match self.standing() {
            Standing::Fails => self
                .conditions
                .iter()
                .flat_map(|c| &c.terms)
                .filter(|(_, v)| v.kind == Kind::Fails)
                .count(),
            _ => self
                .conditions
                .iter()
                .filter(|c| c.kind == Kind::NotMeasured)
                .count(),
        }
    }

    pub fn condition(&self, c: Condition) -> Option<&CondEval> {
        self.conditions.iter().find(|e| e.condition == c)
    }
}

/// The draft's material: the inputs, the SLA, and every option judged.
pub struct Study<'a> {
    pub sources: &'a [Source],
    pub sla: &'a Sla,
    /// In order: those that meet first (fewest services), then those not
    /// shown (fewest conditions unmeasured), then those that fail (fewest
    /// terms failed); the registry's order among equals.
    pub evals: Vec<Eval>,
}

impl<'a> Study<'a> {
    pub fn new(sources: &'a [Source], sla: &'a Sla) -> Result<Study<'a>> {
        let options = options(sources);
        if options.is_empty() {
            bail!("the run folders hold no strategy that is not a teaching variant or the ceiling");
        }
        let mut evals: Vec<Eval> = options
            .into_iter()
            .map(|variant| {
                let mut needs = vec!["database"];
                needs.extend(variant.info.requires.iter().map(|s| s.name()));
                let conditions = sla
                    .judged()
                    .into_iter()
                    .map(|c| {
                        let terms = sla
                            .terms(c)
                            .iter()
                            .map(|t| (t.clone(), judge::judge(sources, variant, c, t)))
                            .collect();
                        CondEval::new(c, terms)
                    })
                    .collect();
                Eval {
                    name: variant.name().to_string(),
                    variant,
                    needs,
                    conditions,
                }
            })
            .collect();
        // A stable sort keeps the registry's order among equals. No
        // figure orders them: which of those that meet is preferred is the
        // trade-off's ([`super::tradeoff`]), on separated differences only.
        evals.sort_by_key(|e| (e.standing(), e.distance(), e.needs.len()));
        Ok(Study {
            sources,
            sla,
            evals,
        })
    }

    /// Every option that meets the objective, the trade-off's chosen or
    /// remaining ones first (else up to three of those closest to it, not
    /// shown to), and the best one that fails.
    /// `meeting`: those that meet, in the trade-off's order.
    pub fn shortlist<'s>(&'s self, meeting: Option<Vec<&'s Eval>>) -> Vec<&'s Eval> {
        let mut list: Vec<&Eval> = match meeting {
            Some(meeting) => meeting,
            None => {
                let best = self.evals[0].standing();
                self.evals
                    .iter()
                    .filter(|e| e.standing() == best)
                    .take(3)
                    .collect()
            }
        };
        if let Some(failed) = self
            .evals
            .iter()
            .find(|e| e.standing() == Standing::Fails && !list.iter().any(|l| l.name == e.name))
        {
            list.push(failed);
        }
        list
    }
}

/// Every strategy and variant the folders ran, teaching variants and the
/// ceiling left out, in the registry's order (each strategy before its
/// variants).
pub(super) fn options(sources: &[Source]) -> Vec<Variant> {
    let mut options: Vec<Variant> = Vec::new();
    for source in sources {
        let listed: Vec<Variant> = match &source.body {
            evidence::Body::Run(summaries) => summaries.iter().map(|s| s.strategy).collect(),
            evidence::Body::Sweep(result) => result.strategies.iter().map(|s| s.strategy).collect(),
        };
        for variant in listed {
            if variant.info.role == Role::Strategy && !options.contains(&variant) {
                options.push(variant);
            }
        }
    }
    options.sort_by_key(|v| {
        let at = registry::STRATEGIES
            .iter()
            .position(|s| s == v.info)
            .unwrap_or(usize::MAX);
        (at, v.outbox, v.fallback)
    });
    options
}
