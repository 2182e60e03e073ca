//! When a difference between two options counts: the rule every
//! comparison of the draft goes through, and the pick it allows.
//!
//! - A figure measured with repetitions is a range (lowest to highest
//!   repetition). Two ranges separate two options only when each has at
//!   least [`MIN_REPETITIONS`] repetitions, both come from the same run
//!   (the caller's duty: a [`Column`] reads every option from one run), and
//!   they do not overlap. With no real difference, two ranges of n and m
//!   repetitions fail to overlap by chance alone with probability
//!   2 / C(n+m, n) (1 in 10 for 3 against 3, 1 in 3 for 2 against 2): the
//!   text says so beside every separation.
//! - An exact figure (the services an option needs) has no noise: any
//!   difference counts.
//! - A figure not measured for an option is never a pass and never
//!   borrowed: it is "not measured", and that option can neither beat nor
//!   be beaten on it.
//!
//! The pick ([`pick`]) starts from the options no other one dominates (the
//! Pareto set: better on some criterion, worse on none, every criterion
//! measured for both), then applies the user's priority criterion by
//! criterion: an option that another remaining one beats, or that is not
//! measured where others are, leaves. It picks only when one option
//! remains; otherwise it says that nothing measured separates them.

pub use crate::model::summary::{chance_one_in, MIN_REPETITIONS};

/// A criterion of the trade-off among the options that meet the objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criterion {
    /// Services to operate beside the database (exact).
    Services,
    /// Lateness without faults, per repetition, in one run.
    Lateness,
    /// CPU per cancel, every service plus the workers, per repetition.
    Cpu,
    /// The database server's share of it: the one service every option
    /// shares with the shop.
    DatabaseCpu,
    /// Maximum sustainable rate, from a rate sweep.
    Capacity,
    /// Faults that reached the option in a fault run, all survived.
    Faults,
    /// Cancelling again after a restart with a backlog held.
    Recovery,
}

impl Criterion {
    pub const ALL: [Criterion; 7] = [
        Criterion::Services,
        Criterion::Lateness,
        Criterion::Capacity,
        Criterion::Cpu,
        Criterion::DatabaseCpu,
        Criterion::Faults,
        Criterion::Recovery,
    ];

    /// Its name in `prefer` and in the draft.
    pub fn name(self) -> &'static str {
        match self {
            Criterion::Services => "services",
            Criterion::Lateness => "lateness",
            Criterion::Cpu => "cpu",
            Criterion::DatabaseCpu => "db-cpu",
            Criterion::Capacity => "capacity",
            Criterion::Faults => "faults",
            Criterion::Recovery => "recovery",
        }
    }

    /// What it is, in a few words.
    pub fn words(self) -> &'static str {
        match self {
            Criterion::Services => "services to operate",
            Criterion::Lateness => "lateness without faults",
            Criterion::Cpu => "CPU per cancel (every service and the workers)",
            Criterion::DatabaseCpu => "the database server's CPU per cancel",
            Criterion::Capacity => "maximum sustainable rate",
            Criterion::Faults => "faults that reached it, all survived",
            Criterion::Recovery => "recovery after a restart with a backlog",
        }
    }

    pub fn higher_is_better(self) -> bool {
        matches!(self, Criterion::Capacity | Criterion::Faults)
    }

    pub fn parse(name: &str) -> Option<Criterion> {
        Criterion::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// One option's figure on one criterion.
#[derive(Debug, Clone)]
pub struct Measured {
    pub low: f64,
    pub median: f64,
    pub high: f64,
    /// Repetitions behind the range; `None` for an exact figure.
    pub repetitions: Option<u32>,
    /// The figure as the draft prints it (a link to its JSON).
    pub text: String,
}

impl Measured {
    pub fn exact(value: f64, text: String) -> Measured {
        Measured {
            low: value,
            median: value,
            high: value,
            repetitions: None,
            text,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Reading {
    Measured(Measured),
    /// Why not.
    NotMeasured(String),
}

impl Reading {
    pub fn text(&self) -> String {
        match self {
            Reading::Measured(m) => m.text.clone(),
            Reading::NotMeasured(why) => format!("not measured ({why})"),
        }
    }

    pub fn measured(&self) -> Option<&Measured> {
        match self {
            Reading::Measured(m) => Some(m),
            Reading::NotMeasured(_) => None,
        }
    }
}

/// How option `a` stands against option `b` on one criterion, with why.
#[derive(Debug, Clone, PartialEq)]
pub enum Compared {
    Better(String),
    Worse(String),
    /// No measured difference.
    Tie(String),
    /// One of them (or both) not measured.
    Unknown(String),
}

/// `a` against `b` on a criterion where higher is better or not.
pub fn compare(higher_is_better: bool, a: &Reading, b: &Reading) -> Compared {
    let (a, b) = match (a, b) {
        (Reading::Measured(a), Reading::Measured(b)) => (a, b),
        (Reading::NotMeasured(why), _) | (_, Reading::NotMeasured(why)) => {
            return Compared::Unknown(format!("not measured: {why}"))
        }
    };
    let a_better = |above: bool| if higher_is_better { above } else { !above };
    match (a.repetitions, b.repetitions) {
        (None, None) => {
            if a.median == b.median {
                Compared::Tie("the same".into())
            } else if a_better(a.median > b.median) {
                Compared::Better("exact figures".into())
            } else {
                Compared::Worse("exact figures".into())
            }
        }
        (Some(n), Some(m)) => {
            if n < MIN_REPETITIONS || m < MIN_REPETITIONS {
                return Compared::Tie(format!(
                    "{n} and {m} repetitions: at least {MIN_REPETITIONS} each are needed to \
                     separate two options"
                ));
            }
            let why = format!(
                "ranges of {n} and {m} repetitions do not overlap (by chance alone 1 in {})",
                chance_one_in(n, m)
            );
            if a.low > b.high {
                if a_better(true) {
                    Compared::Better(why)
                } else {
                    Compared::Worse(why)
                }
            } else if a.high < b.low {
                if a_better(false) {
                    Compared::Better(why)
                } else {
                    Compared::Worse(why)
                }
            } else {
                Compared::Tie(format!("the ranges of {n} and {m} repetitions overlap"))
            }
        }
        // An exact figure against a measured one: not the same kind.
        _ => Compared::Unknown("an exact figure against a measured one".into()),
    }
}

/// One criterion read for every option of the trade-off, from one run.
#[derive(Debug, Clone)]
pub struct Column {
    pub criterion: Criterion,
    /// Where the readings come from, in words (the run, the figure, its
    /// rate), or why none could be read.
    pub from: String,
    /// One per option, in the trade-off's order.
    pub readings: Vec<Reading>,
}

impl Column {
    pub fn compare(&self, a: usize, b: usize) -> Compared {
        compare(
            self.criterion.higher_is_better(),
            &self.readings[a],
            &self.readings[b],
        )
    }
}

/// Whether `a` dominates `b`: better on some criterion, worse on none,
/// and every criterion measured for both (or for neither).
pub fn dominates(columns: &[Column], a: usize, b: usize) -> bool {
    let mut better = false;
    for column in columns {
        match column.compare(a, b) {
            Compared::Better(_) => better = true,
            Compared::Tie(_) => {}
            Compared::Worse(_) => return false,
            Compared::Unknown(_) => {
                let both_missing = column.readings[a].measured().is_none()
                    && column.readings[b].measured().is_none();
                if !both_missing {
                    return false;
                }
            }
        }
    }
    better
}

/// For every option, the options that dominate it (empty: in the Pareto
/// set).
pub fn dominated_by(columns: &[Column], options: usize) -> Vec<Vec<usize>> {
    (0..options)
        .map(|b| {
            (0..options)
                .filter(|&a| a != b && dominates(columns, a, b))
                .collect()
        })
        .collect()
}

/// One step of the pick: the criterion applied and who left, with why.
#[derive(Debug, Clone)]
pub struct Step {
    pub criterion: Criterion,
    /// Each option that left: the option that beat it (none: it was not
    /// measured where others were) and why.
    pub left: Vec<(usize, Option<usize>, String)>,
}

/// What the priority made of the options.
#[derive(Debug, Clone)]
pub struct Pick {
    /// The one option left, if only one was.
    pub chosen: Option<usize>,
    /// Those left after every step (one when chosen).
    pub remaining: Vec<usize>,
    /// Left out first: dominated, with by whom.
    pub dominated: Vec<(usize, Vec<usize>)>,
    pub steps: Vec<Step>,
    /// The criterion the pick stopped at because some remaining option
    /// was not measured there while others were, with those options and
    /// why: a missing figure separates nothing, so no later criterion may
    /// decide in its place.
    pub blocked: Option<(Criterion, Vec<(usize, String)>)>,
}

/// Applies `priority` to the options of `columns` (`options` of them).
pub fn pick(columns: &[Column], options: usize, priority: &[Criterion]) -> Pick {
    let by = dominated_by(columns, options);
    let dominated: Vec<(usize, Vec<usize>)> = by
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.is_empty())
        .map(|(i, d)| (i, d.clone()))
        .collect();
    let mut remaining: Vec<usize> = (0..options).filter(|i| by[*i].is_empty()).collect();
    let mut steps = Vec::new();
    let mut blocked = None;
    for &criterion in priority {
        if remaining.len() <= 1 {
            break;
        }
        let Some(column) = columns.iter().find(|c| c.criterion == criterion) else {
            continue;
        };
        let any_measured = remaining
            .iter()
            .any(|&i| column.readings[i].measured().is_some());
        let missing: Vec<(usize, String)> = remaining
            .iter()
            .filter_map(|&i| match &column.readings[i] {
                Reading::NotMeasured(why) => Some((i, why.clone())),
                Reading::Measured(_) => None,
            })
            .collect();
        if any_measured && !missing.is_empty() {
            blocked = Some((criterion, missing));
            break;
        }
        let mut left = Vec::new();
        for &i in &remaining {
            if let Some((j, why)) = remaining.iter().find_map(|&j| match column.compare(j, i) {
                Compared::Better(why) if j != i => Some((j, why)),
                _ => None,
            }) {
                left.push((i, Some(j), why));
            }
        }
        // Never every one: non-transitive ties cannot empty the set, but
        // guard it all the same.
        if left.len() == remaining.len() {
            continue;
        }
        remaining.retain(|i| !left.iter().any(|(l, _, _)| l == i));
        if !left.is_empty() {
            steps.push(Step { criterion, left });
        }
    }
    Pick {
        chosen: (remaining.len() == 1).then(|| remaining[0]),
        remaining,
        dominated,
        steps,
        blocked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(low: f64, high: f64, reps: u32) -> Reading {
        Reading::Measured(Measured {
            low,
            median: (low + high) / 2.0,
            high,
            repetitions: Some(reps),
            text: format!("{low}–{high}"),
        })
    }

    fn exact(v: f64) -> Reading {
        Reading::Measured(Measured::exact(v, format!("{v}")))
    }

    fn column(criterion: Criterion, readings: Vec<Reading>) -> Column {
        Column {
            criterion,
            from: "one run".into(),
            readings,
        }
    }

    #[test]
    fn overlapping_ranges_are_a_tie_and_disjoint_ones_separate() {
        // Lower is better for lateness.
        let a = range(2.0, 2.2, 3);
        let b = range(2.1, 23.4, 3);
        assert!(matches!(compare(false, &a, &b), Compared::Tie(_)));
        let c = range(2.9, 3.1, 3);
        match compare(false, &a, &c) {
            Compared::Better(why) => assert!(why.contains("1 in 10"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(compare(false, &c, &a), Compared::Worse(_)));
        // Higher is better for capacity.
        assert!(matches!(compare(true, &c, &a), Compared::Better(_)));
    }

    #[test]
    fn two_repetitions_never_separate() {
        let a = range(1.0, 1.1, 2);
        let b = range(5.0, 5.1, 3);
        match compare(false, &a, &b) {
            Compared::Tie(why) => assert!(why.contains("at least 3"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_figure_is_unknown_never_a_pass() {
        let a = range(1.0, 1.1, 3);
        let missing = Reading::NotMeasured("it did not run in busy".into());
        assert!(matches!(compare(false, &a, &missing), Compared::Unknown(_)));
        assert!(matches!(compare(false, &missing, &a), Compared::Unknown(_)));
        // It cannot be dominated on what it lacks, nor dominate.
        let columns = vec![column(Criterion::Lateness, vec![a, missing])];
        assert!(!dominates(&columns, 0, 1));
        assert!(!dominates(&columns, 1, 0));
        // Nor can the priority pick the other for it: the pick stops there,
        // and no later criterion decides in its place.
        let columns = vec![
            columns[0].clone(),
            column(Criterion::Services, vec![exact(1.0), exact(2.0)]),
        ];
        let p = pick(&columns, 2, &[Criterion::Lateness, Criterion::Services]);
        assert_eq!(p.chosen, None);
        let (at, missing) = p.blocked.unwrap();
        assert_eq!(at, Criterion::Lateness);
        assert_eq!(missing[0].0, 1);
    }

    #[test]
    fn the_chance_of_a_false_separation_is_stated() {
        assert_eq!(chance_one_in(2, 2), 3);
        assert_eq!(chance_one_in(3, 3), 10);
        assert_eq!(chance_one_in(5, 5), 126);
        assert_eq!(chance_one_in(3, 5), 28);
    }

    #[test]
    fn a_tie_on_every_priority_picks_none() {
        let columns = vec![
            column(Criterion::Services, vec![exact(1.0), exact(1.0)]),
            column(
                Criterion::Lateness,
                vec![range(2.2, 23.4, 3), range(2.5, 3.0, 3)],
            ),
        ];
        let p = pick(&columns, 2, &[Criterion::Services, Criterion::Lateness]);
        assert_eq!(p.chosen, None);
        assert_eq!(p.remaining, [0, 1]);
        assert!(p.dominated.is_empty());
    }

    #[test]
    fn the_priority_picks_on_a_separated_difference_only() {
        // 0 needs fewer services; 1 and 2 are faster but need Redis.
        let columns = vec![
            column(
                Criterion::Services,
                vec![exact(1.0), exact(2.0), exact(2.0)],
            ),
            column(
                Criterion::Lateness,
                vec![range(5.0, 6.0, 3), range(2.0, 2.2, 3), range(2.1, 2.4, 3)],
            ),
        ];
        // Nobody dominates: 0 is better on services, worse on lateness.
        assert!(pick(&columns, 3, &[]).dominated.is_empty());
        let p = pick(&columns, 3, &[Criterion::Services, Criterion::Lateness]);
        assert_eq!(p.chosen, Some(0));
        assert_eq!(p.steps.len(), 1);
        // Lateness first: 1 and 2 overlap, nothing separates them.
        let p = pick(&columns, 3, &[Criterion::Lateness]);
        assert_eq!((p.chosen, p.remaining.clone()), (None, vec![1, 2]));
        // Then services cannot part them either.
        let p = pick(&columns, 3, &[Criterion::Lateness, Criterion::Services]);
        assert_eq!(p.chosen, None);
    }

    #[test]
    fn a_dominated_option_leaves_first() {
        let columns = vec![
            column(Criterion::Services, vec![exact(1.0), exact(1.0)]),
            column(
                Criterion::Cpu,
                vec![range(1100.0, 1300.0, 3), range(1366.0, 1476.0, 3)],
            ),
            column(
                Criterion::Lateness,
                vec![range(2.0, 3.0, 3), range(2.5, 2.8, 3)],
            ),
        ];
        let p = pick(&columns, 2, &[Criterion::Services]);
        assert_eq!(p.dominated, vec![(1, vec![0])]);
        assert_eq!(p.chosen, Some(0));
    }
}
