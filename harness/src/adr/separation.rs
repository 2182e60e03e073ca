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
//! - A separated difference counts only when it is material: at least the
//!   column's [`Material`] difference (for lateness a share of the
//!   objective's own bound: 0.8 ms under a 2 s objective is no reason to
//!   choose).
//! - A rate sweep's maximum is a bracket (the highest rate every
//!   repetition held, the lowest one did not): two separate only when one
//!   held every repetition at a rate where the other failed, with at least
//!   [`MIN_REPETITIONS`] repetitions a step.
//! - A figure not measured for an option is never a pass and never
//!   borrowed: it is "not measured", and that option can neither beat nor
//!   be beaten on it.
//!
//! The pick ([`pick`]) starts from the options no chain of domination
//! reaches from outside (the Pareto set, with dominance followed through
//! chains, so a cycle of non-transitive ties keeps its members rather
//! than ruling out every option), then applies the user's priority
//! criterion by criterion: an option another remaining one beats leaves.
//! A priority criterion not measured for some remaining option while
//! measured for others stops the pick (a missing figure separates
//! nothing). It picks only when one option remains; otherwise it says
//! that nothing measured separates them.

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
    /// The range is a sweep's bracket (held..failed), not repetitions'
    /// spread: no chance of a false separation applies to it.
    pub bracket: bool,
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
            bracket: false,
            text,
        }
    }
}

/// The smallest difference between two medians that counts, beside their
/// separation.
#[derive(Debug, Clone, PartialEq)]
pub enum Material {
    /// Any separated difference.
    Any,
    /// At least this much, in the figure's unit, with its words.
    Absolute(f64, String),
    /// At least this share of the smaller figure.
    Relative(f64),
}

impl Material {
    fn holds(&self, a: f64, b: f64) -> bool {
        let d = (a - b).abs();
        match self {
            Material::Any => true,
            Material::Absolute(x, _) => d >= *x,
            Material::Relative(share) => d >= share * a.abs().min(b.abs()),
        }
    }

    pub fn words(&self) -> String {
        match self {
            Material::Any => "any".into(),
            Material::Absolute(_, words) => words.clone(),
            Material::Relative(share) => format!("{:.0} % of the smaller", share * 100.0),
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

/// `a` against `b` on a criterion where higher is better or not, a
/// difference counting only from `material` up.
pub fn compare(higher_is_better: bool, a: &Reading, b: &Reading, material: &Material) -> Compared {
    let (a, b) = match (a, b) {
        (Reading::Measured(a), Reading::Measured(b)) => (a, b),
        (Reading::NotMeasured(why), _) | (_, Reading::NotMeasured(why)) => {
            return Compared::Unknown(format!("not measured: {why}"))
        }
    };
    let a_better = |above: bool| if higher_is_better { above } else { !above };
    let verdict = |a_above: bool, why: String| {
        if a_better(a_above) {
            Compared::Better(why)
        } else {
            Compared::Worse(why)
        }
    };
    match (a.repetitions, b.repetitions) {
        (None, None) => {
            if a.median == b.median {
                Compared::Tie("the same".into())
            } else {
                verdict(a.median > b.median, "exact figures".into())
            }
        }
        (Some(n), Some(m)) => {
            if n < MIN_REPETITIONS || m < MIN_REPETITIONS {
                return Compared::Tie(format!(
                    "{n} and {m} repetitions: at least {MIN_REPETITIONS} each are needed to \
                     separate two options"
                ));
            }
            let apart = if a.low > b.high {
                Some(true)
            } else if a.high < b.low {
                Some(false)
            } else {
                None
            };
            let Some(a_above) = apart else {
                return Compared::Tie(if a.bracket || b.bracket {
                    "their brackets (held..failed) overlap".into()
                } else {
                    format!("the ranges of {n} and {m} repetitions overlap")
                });
            };
            if !material.holds(a.median, b.median) {
                return Compared::Tie(format!(
                    "separated, but by less than the material difference ({})",
                    material.words()
                ));
            }
            let why = if a.bracket || b.bracket {
                format!(
                    "one held every repetition ({n} and {m} a step) at a rate where the other \
                     failed"
                )
            } else {
                format!(
                    "ranges of {n} and {m} repetitions do not overlap (by chance alone 1 in {})",
                    chance_one_in(n, m)
                )
            };
            verdict(a_above, why)
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
    /// The smallest difference that counts.
    pub material: Material,
    /// One per option, in the trade-off's order.
    pub readings: Vec<Reading>,
}

impl Column {
    pub fn compare(&self, a: usize, b: usize) -> Compared {
        compare(
            self.criterion.higher_is_better(),
            &self.readings[a],
            &self.readings[b],
            &self.material,
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

/// For every option, the options that dominate it directly.
pub fn dominated_by(columns: &[Column], options: usize) -> Vec<Vec<usize>> {
    (0..options)
        .map(|b| {
            (0..options)
                .filter(|&a| a != b && dominates(columns, a, b))
                .collect()
        })
        .collect()
}

/// The Pareto set with dominance followed through chains: an option stays
/// unless some option reaches it by a chain of dominations and it does not
/// reach that one back. Ties are not transitive, so dominance can run in a
/// cycle (A over B over C over A); the cycle's members then stay together
/// instead of ruling out every option. Never empty for a non-empty set.
pub fn undominated(by: &[Vec<usize>]) -> Vec<usize> {
    let n = by.len();
    // reach[a][b]: a chain of dominations leads from a to b.
    let mut reach = vec![vec![false; n]; n];
    for (b, doms) in by.iter().enumerate() {
        for &a in doms {
            reach[a][b] = true;
        }
    }
    for k in 0..n {
        let through = reach[k].clone();
        for row in reach.iter_mut() {
            if row[k] {
                for (b, r) in row.iter_mut().enumerate() {
                    *r |= through[b];
                }
            }
        }
    }
    (0..n)
        .filter(|&i| !(0..n).any(|j| j != i && reach[j][i] && !reach[i][j]))
        .collect()
}

/// One step of the pick: the criterion applied and who left, with why.
#[derive(Debug, Clone)]
pub struct Step {
    pub criterion: Criterion,
    /// Each option that left: the option that beat it, and how.
    pub left: Vec<(usize, usize, String)>,
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
    let mut remaining = undominated(&by);
    let dominated: Vec<(usize, Vec<usize>)> = (0..options)
        .filter(|i| !remaining.contains(i))
        .map(|i| (i, by[i].clone()))
        .collect();
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
                left.push((i, j, why));
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
            bracket: false,
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
            material: Material::Any,
            readings,
        }
    }

    #[test]
    fn overlapping_ranges_are_a_tie_and_disjoint_ones_separate() {
        // Lower is better for lateness.
        let a = range(2.0, 2.2, 3);
        let b = range(2.1, 23.4, 3);
        assert!(matches!(
            compare(false, &a, &b, &Material::Any),
            Compared::Tie(_)
        ));
        let c = range(2.9, 3.1, 3);
        match compare(false, &a, &c, &Material::Any) {
            Compared::Better(why) => assert!(why.contains("1 in 10"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            compare(false, &c, &a, &Material::Any),
            Compared::Worse(_)
        ));
        // Higher is better for capacity.
        assert!(matches!(
            compare(true, &c, &a, &Material::Any),
            Compared::Better(_)
        ));
    }

    #[test]
    fn two_repetitions_never_separate() {
        let a = range(1.0, 1.1, 2);
        let b = range(5.0, 5.1, 3);
        match compare(false, &a, &b, &Material::Any) {
            Compared::Tie(why) => assert!(why.contains("at least 3"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_figure_is_unknown_never_a_pass() {
        let a = range(1.0, 1.1, 3);
        let missing = Reading::NotMeasured("it did not run in busy".into());
        assert!(matches!(
            compare(false, &a, &missing, &Material::Any),
            Compared::Unknown(_)
        ));
        assert!(matches!(
            compare(false, &missing, &a, &Material::Any),
            Compared::Unknown(_)
        ));
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
    fn a_cycle_of_dominations_keeps_its_members_instead_of_ruling_out_all() {
        // Non-transitive ties: 0 over 1 on x, 1 over 2 on y, 2 over 0 on z,
        // each other pair a tie there.
        let columns = vec![
            column(
                Criterion::Lateness,
                vec![range(1.0, 2.0, 3), range(3.0, 4.0, 3), range(1.5, 3.5, 3)],
            ),
            column(
                Criterion::Cpu,
                vec![range(1.5, 3.5, 3), range(1.0, 2.0, 3), range(3.0, 4.0, 3)],
            ),
            column(
                Criterion::Capacity,
                vec![range(1.0, 2.0, 3), range(1.5, 3.5, 3), range(3.0, 4.0, 3)],
            ),
        ];
        let by = dominated_by(&columns, 3);
        assert!(by.iter().all(|d| d.len() == 1), "a cycle: {by:?}");
        let p = pick(&columns, 3, &[Criterion::Lateness]);
        assert!(!p.remaining.is_empty());
        assert_eq!(undominated(&by), [0, 1, 2]);
        // Below the cycle, a fourth option every one of them beats leaves.
        let mut columns = columns;
        for c in &mut columns {
            let worse = if c.criterion.higher_is_better() {
                range(0.1, 0.2, 3)
            } else {
                range(9.0, 9.5, 3)
            };
            c.readings.push(worse);
        }
        let by = dominated_by(&columns, 4);
        assert_eq!(undominated(&by), [0, 1, 2]);
    }

    #[test]
    fn a_separated_difference_smaller_than_the_material_one_is_a_tie() {
        let a = range(2.06, 2.10, 3);
        let b = range(2.69, 3.02, 3);
        let twenty_ms = Material::Absolute(20.0, "20 ms".into());
        match compare(false, &a, &b, &twenty_ms) {
            Compared::Tie(why) => assert!(why.contains("material difference (20 ms)"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            compare(false, &a, &b, &Material::Relative(0.1)),
            Compared::Better(_)
        ));
        assert!(matches!(
            compare(
                false,
                &range(100.0, 101.0, 3),
                &range(105.0, 106.0, 3),
                &Material::Relative(0.1)
            ),
            Compared::Tie(_)
        ));
    }

    #[test]
    fn sweep_brackets_separate_only_when_one_held_where_the_other_failed() {
        let bracket = |held: f64, failed: f64, reps: u32| {
            Reading::Measured(Measured {
                low: held,
                median: held,
                high: failed,
                repetitions: Some(reps),
                bracket: true,
                text: String::new(),
            })
        };
        // 2200 held where 1800 failed, 3 repetitions a step.
        match compare(
            true,
            &bracket(2200.0, 2400.0, 3),
            &bracket(1600.0, 1800.0, 3),
            &Material::Any,
        ) {
            Compared::Better(why) => {
                assert!(
                    why.contains("held every repetition") && !why.contains("chance"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        // Adjacent brackets, or two repetitions a step: no difference.
        assert!(matches!(
            compare(
                true,
                &bracket(1800.0, 2000.0, 3),
                &bracket(1600.0, 1800.0, 3),
                &Material::Any
            ),
            Compared::Tie(_)
        ));
        assert!(matches!(
            compare(
                true,
                &bracket(2200.0, 2400.0, 2),
                &bracket(1600.0, 1800.0, 2),
                &Material::Any
            ),
            Compared::Tie(_)
        ));
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
