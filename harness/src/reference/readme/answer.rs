//! README.md's answer section: the table of the six strategies (lateness
//! in quick and busy, cost, the sweep's rate, what chaos missed, what each
//! needs) with what it rests on, whether any strategy broke an invariant
//! without faults, and what the measurement itself cost.

use super::loaded::{Loaded, Set, ADR_FILE};
use crate::model::held_bytes::HeldBytes;
use crate::model::summary::{Status, Summary};
use crate::report::{self, as_ms, fig, markdown_table};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use strategies::checker::Anomaly;
use strategies::registry::{Role, Variant, STRATEGIES};

/// The strategies of the answer table, in the registry's order: each way
/// to build a shop, without teaching variants, baselines or remedies.
fn answer_strategies() -> Vec<Variant> {
    STRATEGIES
        .iter()
        .filter(|s| s.role == Role::Strategy)
        .map(Variant::plain)
        .collect()
}

/// A cell of entry `entry`'s figure `key` for `strategy`, or `not run`.
fn cell(set: &Set, entry: &str, strategy: &str, key: &str, format: fn(f64) -> String) -> String {
    match set.summary(entry, strategy) {
        Some(s) => fig(s, key, format),
        None => "not run".into(),
    }
}

/// Missed cancels under the chaos run, with how many faults hit it: a
/// fault that acted on something else (a standby, not the leader) missed
/// its target and is never counted as acted.
fn chaos_cell(set: &Set, strategy: &str) -> String {
    let Some(s) = set.summary("chaos", strategy) else {
        return "not run".into();
    };
    let reached = |f: &&crate::faults::FaultRecord| {
        matches!(f.reach(), crate::faults::FaultReach::Hit) && f.took_effect()
    };
    let hit = s.faults.iter().filter(reached).count();
    let missed_target = s
        .faults
        .iter()
        .filter(|f| matches!(f.reach(), crate::faults::FaultReach::MissedTarget(_)))
        .count();
    format!(
        "{} ({hit} of {} faults hit{})",
        s.anomalies.get(Anomaly::MissedCancels),
        s.faults.len(),
        if missed_target > 0 {
            format!(", {missed_target} missed their target")
        } else {
            String::new()
        }
    )
}

/// CPU per cancel with the scope every table uses, every service and the
/// workers (the harness left out), as the median of the repetitions with
/// their range and the breakdown by service.
fn cpu_cell(set: &Set, entry: &str, strategy: &str) -> String {
    let (Some(s), Some((folder, _))) = (set.summary(entry, strategy), set.get(entry)) else {
        return "not run".into();
    };
    let reps = s.repetitions(&set.dir.join(folder).join(strategy));
    match Summary::cpu_spread(&reps, |_| true) {
        Some(c) if c.repetitions > 1 => format!(
            "{:.0} ({:.0}–{:.0}): {}",
            c.sum.median,
            c.sum.min,
            c.sum.max,
            c.breakdown(" · ")
        ),
        Some(c) => format!("{:.0}: {}", c.sum.median, c.breakdown(" · ")),
        None => "-".into(),
    }
}

/// The sweep's maximum sustainable rate and its share of the ceiling.
fn sweep_cell(set: &Set, strategy: &str) -> String {
    let Some((_, Loaded::Sweep { result, .. })) = set.get("sweep") else {
        return "not run".into();
    };
    match result
        .strategies
        .iter()
        .find(|s| s.strategy.name() == strategy)
    {
        Some(s) => {
            // A range: the highest rate every repetition held to the
            // lowest one did not (one sweep's figure is no ranking).
            let upto = |rate: f64| match s.first_failed_rate {
                Some(f) => format!("{rate:.0}–{f:.0}"),
                None => format!("≥ {rate:.0}"),
            };
            let max = match (s.max_rate, s.share_of_ceiling, s.first_failed_rate) {
                (Some(rate), Some(share), _) => format!("{} ({:.0} %)", upto(rate), share * 100.0),
                (Some(rate), None, _) => upto(rate),
                (None, _, Some(failed)) => format!("< {failed:.0} (its first step failed)"),
                (None, _, None) => "none held".into(),
            };
            let max = match s.reruns_behind_max() {
                0 => max,
                n => format!("{max}, {n} run(s) rerun after a harness or host stall"),
            };
            match s.strategy.info.rate_caveat {
                Some(caveat) if s.max_rate.is_some() => format!("{max}; {caveat}"),
                _ => max,
            }
        }
        None => "not run".into(),
    }
}

/// The storm entry's drain: cancels per second of the drain and per
/// core-second of its own CPU, with the regular orders' p99 before and
/// during it (see `storm_table`).
fn storm_cell(set: &Set, strategy: &str) -> String {
    match set.summary("storm", strategy) {
        Some(s) => match &s.storm {
            // Over trials, the median trial's drain with every trial's
            // range of drain rates (one storm's drain is no distribution).
            Some(r) => match s
                .repeats
                .as_ref()
                .and_then(|rep| Some((rep.count, rep.figures.get("storm_cancels_per_s")?)))
            {
                Some((n, sp)) if n > 1 => format!(
                    "{}; drain over {n} trials {:.0}–{:.0}/s",
                    report::storm_drain_text(r),
                    sp.min,
                    sp.max
                ),
                _ => format!("{} (one trial)", report::storm_drain_text(r)),
            },
            None => "no storm record".into(),
        },
        None => "not run".into(),
    }
}

/// What holding the backlog entry's pending orders cost each backend the
/// strategy uses, in bytes per order net of the same run's baseline, each
/// with its noise floor (see `report::sweep`'s bytes table).
fn bytes_cell(set: &Set, strategy: &str) -> String {
    let Some((_, Loaded::Sweep { result, .. })) = set.get("backlog") else {
        return "not run".into();
    };
    if !result
        .strategies
        .iter()
        .any(|s| s.strategy.name() == strategy && s.status == Status::Ok)
    {
        return "not run".into();
    }
    // The largest backlog the strategy held.
    match HeldBytes::of(result).largest(strategy) {
        Some(step) => format!(
            "of {}: {}",
            report::as_count(step.pending as f64),
            report::bytes_text(step)
        ),
        None => "-".into(),
    }
}

fn needs(strategy: Variant) -> String {
    match strategy.info.requires {
        [] => "nothing".into(),
        requires => requires
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The smallest and largest `n` of `strategies` in entry `entry`.
fn n_range(set: &Set, entry: &str, strategies: &[&str]) -> String {
    let ns: Vec<u64> = strategies
        .iter()
        .filter_map(|s| set.summary(entry, s))
        .map(|s| s.lateness_us.count)
        .collect();
    match (ns.iter().min(), ns.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
        _ => "-".into(),
    }
}

/// README.md's section: the answer table and what it rests on.
pub(super) fn answer(set: &Set, reference: &str) -> Result<String> {
    let mut out = String::new();
    let info = set
        .get("quick")
        .map(|(_, l)| l.info())
        .context("the reference set has no quick run")?;
    let services: Vec<String> = info
        .services
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        out,
        "\nFrom the committed [reference set]({reference}/README.md), made by `delaybench reference` \
         {} on {}: {}; {}. Every figure below is generated from its folders.\n",
        set.provenance(),
        info.machine.summary(),
        info.database_version
            .split(" on ")
            .next()
            .unwrap_or(&info.database_version),
        services.join(", ")
    );
    if let Some((folder, _)) = set.get("quick") {
        let _ = writeln!(
            out,
            "![lateness CDF of the six strategies, quick scenario]({reference}/{folder}/plots/lateness-cdf.png)\n"
        );
    }
    let mut rows = vec![[
        "strategy",
        "p90 ms, quick",
        "p99 ms, busy",
        "DB rows read / cancel, busy",
        "CPU µs / cancel, busy: every service and the workers (by service)",
        "max orders/s: held–failed (share of ceiling), sweep",
        "missed under chaos (faults that hit it)",
        "same, +fallback",
        "storm of 100k: drain cancels/s (per core-s); regular orders' p99 (max below 1 000 samples) before → during",
        "bytes per pending order, backlog",
        "needs besides the DB",
    ]
    .map(String::from)
    .to_vec()];
    let answer = answer_strategies();
    let answer_names: Vec<&str> = answer.iter().map(|v| v.name()).collect();
    for &variant in &answer {
        let strategy = variant.name();
        let rows_read = set
            .summary("busy", strategy)
            .map(report::rows_read_text)
            .unwrap_or_else(|| "not run".into());
        rows.push(vec![
            strategy.to_string(),
            cell(set, "quick", strategy, "p90", as_ms),
            cell(set, "busy", strategy, "p99", as_ms),
            rows_read,
            cpu_cell(set, "busy", strategy),
            sweep_cell(set, strategy),
            chaos_cell(set, strategy),
            if let Some(fallback) = variant.with_fallback() {
                chaos_cell(set, fallback.name())
            } else {
                "- (no fallback variant)".into()
            },
            storm_cell(set, strategy),
            bytes_cell(set, strategy),
            needs(variant),
        ]);
    }
    markdown_table(&mut out, &rows);
    let link = |entry: &str| {
        set.get(entry)
            .map(|(folder, _)| format!("[{entry}]({reference}/{folder}/report.md)"))
            .unwrap_or_else(|| format!("{entry} (not run)"))
    };
    let _ = writeln!(
        out,
        "Lateness percentiles pool the samples of {} interleaved repetitions (n = {} per \
         strategy in {}, {} in {}), with the repetitions' own min–max beside them; costs are \
         the repetitions' median (min–max); rows read are the canceller's own on PostgreSQL \
         (sampled, see the reference README), the whole run's where marked. The rates come from \
         {} (each step {} times, back to back; a maximum is the range from the highest rate every \
         repetition held to the lowest one did not, and two are ranked only where their ranges \
         part with at least 3 repetitions a step), the missed cancels from {} (one trial; `hit` \
         counts the faults that acted on what they were aimed at in the strategy: the others \
         could not touch it, missed their target (a standby instead of the leader: said so), \
         hit an instance already down, or never reached their point), the drain from {} ({}: \
         the storm's orders due in one instant while the regular load runs; per core-second of \
         the CPU the drain took beyond that load, every service and the workers summed), the \
         bytes from {} (what each backend grew by with the backlog in place, less what it moved \
         by in the same run's step with no backlog, over its size, ± the run's noise floor of \
         that backend; `≈ 0` when within it). More: {}; the draft decision \
         record [{ADR_FILE}]({reference}/{ADR_FILE}).\n",
        info.repeat,
        n_range(set, "quick", &answer_names),
        link("quick"),
        n_range(set, "busy", &answer_names),
        link("busy"),
        link("sweep"),
        set.get("sweep").map_or(0, |(_, l)| l.info().repeat),
        link("chaos"),
        link("storm"),
        match set.get("storm").map(|(_, l)| l.info().repeat) {
            None => "not run in this set".to_string(),
            Some(0 | 1) => "one trial".to_string(),
            Some(n) => format!("{n} trials, each drain rate shown as their range"),
        },
        link("backlog"),
        [
            "probe-cost",
            "mixed-timeouts",
            "redis-cluster",
            "rabbitmq-cluster",
            "rabbitmq-cluster-classic"
        ]
        .iter()
        .filter(|e| set.get(e).is_some())
        .map(|e| link(e))
        .collect::<Vec<_>>()
        .join(", ")
    );
    db_scan_sentence(&mut out, set);
    anomaly_sentence(&mut out, set);
    measurement_sentence(&mut out, set);
    Ok(out)
}

/// How db-scan was configured in each run its row reads: the presets set
/// it differently (the sweep, storm and backlog presets scan more often,
/// in bigger batches), so its row can mix configurations, and says so.
fn db_scan_sentence(out: &mut String, set: &Set) {
    let mut configs: Vec<((u128, u32), Vec<&str>)> = Vec::new();
    for entry in ["quick", "busy", "chaos", "sweep", "storm", "backlog"] {
        let Some((_, loaded)) = set.get(entry) else {
            continue;
        };
        let scan = &loaded.info().scenario.strategies.db_scan;
        let key = (scan.interval.as_millis(), scan.batch_size);
        match configs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, entries)) => entries.push(entry),
            None => configs.push((key, vec![entry])),
        }
    }
    let described: Vec<String> = configs
        .iter()
        .map(|((interval, batch), entries)| {
            format!(
                "every {interval} ms in batches of {batch} in {}",
                english_list(entries)
            )
        })
        .collect();
    match described.len() {
        0 => {}
        1 => {
            let _ = writeln!(
                out,
                "db-scan scanned {} (as its presets set it).\n",
                described[0]
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "db-scan's row mixes configurations, as each preset sets it: it scanned {}.\n",
                described.join("; ")
            );
        }
    }
}

/// `a`, `a and b`, `a, b and c`.
fn english_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Which strategies broke an invariant in the runs without faults.
fn anomaly_sentence(out: &mut String, set: &Set) {
    let mut broken = Vec::new();
    let mut looked = Vec::new();
    for entry in ["quick", "busy", "probe-cost", "mixed-timeouts", "storm"] {
        let Some((_, l)) = set.get(entry) else {
            continue;
        };
        looked.push(entry);
        for s in l.summaries() {
            let teaching = s.strategy.info.is_teaching();
            if s.status != Status::Ok {
                broken.push(format!(
                    "{} in {entry} did not run ({})",
                    s.strategy,
                    s.status.as_str()
                ));
            } else if !teaching && s.anomalies.total() > 0 {
                broken.push(format!(
                    "{} in {entry} ({})",
                    s.strategy,
                    s.anomalies.total()
                ));
            }
        }
    }
    let _ = if broken.is_empty() {
        let last = looked.pop().unwrap_or("no run");
        let runs = if looked.is_empty() {
            last.to_string()
        } else {
            format!("{} or {last}", looked.join(", "))
        };
        writeln!(
            out,
            "No strategy broke an invariant in {runs} (every anomaly 0).\n"
        )
    } else {
        writeln!(
            out,
            "**Anomalies, or strategies that did not run, without faults**: {}.\n",
            broken.join(", ")
        )
    };
}

/// What the measurement costs, from the probe-cost run.
fn measurement_sentence(out: &mut String, set: &Set) {
    let Some((
        _,
        Loaded::Run {
            info,
            summaries,
            twins,
        },
    )) = set.get("probe-cost")
    else {
        return;
    };
    // The highest share of any repetition, not the medians' highest.
    let mut worst: Option<(f64, &str)> = None;
    let (mut apart, mut within, mut unknown) = (Vec::new(), 0, Vec::new());
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        if let Some(v) = report::shown(s, "measurement_share_of_cpu") {
            let share = v.spread.map_or(v.value, |(_, max)| max);
            if worst.is_none_or(|(w, _)| share > w) {
                worst = Some((share, s.strategy.name()));
            }
        }
        let twin = twins
            .iter()
            .find(|t| t.strategy == s.strategy && t.status == Status::Ok);
        let p99 = |x: &Summary| report::shown(x, "p99").filter(|v| v.spread.is_some());
        match (p99(s), twin.and_then(p99)) {
            (Some(a), Some(b)) => match a.separated_from(&b) {
                Ok(true) => apart.push(s.strategy.name()),
                // Apart with too few repetitions is no difference.
                Ok(false) | Err(_) => within += 1,
            },
            _ => unknown.push(s.strategy.name()),
        }
    }
    let Some((share, strategy)) = worst else {
        return;
    };
    let _ = writeln!(
        out,
        "The measurement's own probes and flushes took at most {:.2} % of a strategy's CPU per \
         cancel in any repetition ({strategy}) at {} orders/s. Beside an unmeasured twin, run \
         interleaved: p99s within each other's spread for {within} strategies{}{}.\n",
        share * 100.0,
        info.scenario.rate,
        if apart.is_empty() {
            String::new()
        } else {
            format!(", apart beyond the spread for {}", apart.join(", "))
        },
        if unknown.is_empty() {
            String::new()
        } else {
            format!(", not comparable (no spread) for {}", unknown.join(", "))
        }
    );
}
