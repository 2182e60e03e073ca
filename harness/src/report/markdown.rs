//! `report.md`: the results table, the trade-off table, the plots in
//! `plots/` linked under them, one section per strategy, and how to read
//! them.

use super::fault_table::FAULT_NOTES;
use super::plots::{markdown_links, Figure, Section};
use super::storm_table::STORM_NOTES;
use super::table::{ms, RunTables, MEASUREMENT_NOTES, TRADEOFF_NOTES};
use crate::model::lateness::{LatenessStats, Pct};
use crate::model::run_info::RunInfo;
use crate::model::summary::{Status, Summary};
use std::fmt::Write as _;

/// The report; `figures` are the plots in `plots/`, each linked under the
/// section it belongs to.
pub fn markdown(
    info: &RunInfo,
    summaries: &[Summary],
    tables: &RunTables,
    figures: &[Figure],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# delaybench run `{}`\n", info.run_id);
    for (line, stressed) in &tables.facts {
        if *stressed {
            let _ = writeln!(out, "**{line}**  ");
        } else {
            let _ = writeln!(out, "{line}  ");
        }
    }
    let _ = writeln!(out, "\n## Results\n");
    table(&mut out, &tables.results);
    if let Some(teaching) = &tables.teaching {
        let _ = writeln!(
            out,
            "\n## Deliberately wrong (teaching variants)\n\nKnown mistakes reproduced on \
             purpose so the checker can show their damage. Not options: never choose one.\n"
        );
        table(&mut out, teaching);
    }
    for s in summaries.iter().filter(|s| s.status != Status::Ok) {
        let _ = writeln!(
            out,
            "- **{}** {}: {}",
            s.strategy,
            s.status.as_str(),
            s.reason.as_deref().unwrap_or("no reason recorded")
        );
    }
    let lateness_plots = markdown_links(figures, Section::Lateness);
    if !lateness_plots.is_empty() {
        let _ = write!(out, "\n{lateness_plots}");
    }
    if tables.tradeoffs.len() > 1 {
        let _ = writeln!(out, "\n## Trade-offs, measured\n");
        table(&mut out, &tables.tradeoffs);
        let _ = writeln!(out, "{TRADEOFF_NOTES}\n");
        out.push_str(&markdown_links(figures, Section::Cost));
    }
    if let Some(rows) = &tables.measurement {
        let _ = writeln!(out, "\n## The measurement's own cost\n");
        table(&mut out, rows);
        let _ = writeln!(out, "\n{MEASUREMENT_NOTES}");
    }
    if let Some(faults) = &tables.faults {
        let _ = writeln!(out, "\n## Faults: what each strategy lost, and where\n");
        table(&mut out, faults);
        let _ = writeln!(out, "\n{FAULT_NOTES}");
    }
    if let Some(storm) = &tables.storm {
        let _ = writeln!(
            out,
            "\n## Deadline storm: draining orders due in one instant\n"
        );
        table(&mut out, storm);
        let _ = writeln!(out, "\n{STORM_NOTES}");
    }
    for s in summaries.iter().filter(|s| s.status == Status::Ok) {
        let _ = writeln!(out, "\n### {}\n", s.strategy);
        let _ = writeln!(
            out,
            "- database: {} `{}`, namespace `{}`",
            s.database.kind,
            s.database.url,
            s.database.namespace.as_deref().unwrap_or("-")
        );
        for w in &s.warnings {
            let _ = writeln!(out, "- **warning**: {w}");
        }
        if let Some(hook) = &s.before_strategy {
            let _ = writeln!(out, "- {}", hook.describe());
        }
        for link in s.network.iter().flatten() {
            let _ = writeln!(out, "- network: {}", link.describe());
        }
        for host in s.hosts.iter().flatten() {
            let _ = writeln!(out, "- host: {}", host.describe());
        }
        for fault in &s.faults {
            let _ = writeln!(out, "- **fault**: {}", fault.describe());
        }
        for event in &s.worker_events {
            let _ = writeln!(out, "- **worker**: {}", event.describe());
        }
        let partial: Vec<String> = s
            .cost
            .instances
            .iter()
            .filter(|r| !r.complete)
            .map(|r| {
                format!(
                    "instance {} pid {} ({})",
                    r.instance,
                    r.pid,
                    r.end.as_deref().unwrap_or("ended")
                )
            })
            .collect();
        if !partial.is_empty() {
            let _ = writeln!(
                out,
                "- counters of {} are those of its last flush, at most 1 s before it ended \
                 (cost figures use the same flush for numerator and denominator)",
                partial.join(", ")
            );
        }
        distribution(
            &mut out,
            "lateness, row-based (`cancelled_at_us`)",
            Some(&s.lateness_us),
        );
        distribution(
            &mut out,
            "lateness when the COMMIT returned",
            s.committed_lateness_us.as_ref(),
        );
        distribution(
            &mut out,
            "COMMIT returned minus the row's stamp, per order",
            s.commit_gap_us.as_ref(),
        );
        distribution(
            &mut out,
            &format!(
                "**{} orders paid after their deadline** while still pending; paid_at - deadline, \
                 a lower bound on the lateness they are missing from",
                s.orders.paid_after_deadline
            ),
            s.censored_lateness_us.as_ref().filter(|c| c.count > 0),
        );
        distribution(
            &mut out,
            "schedule path, order committed -> schedule() returned",
            s.schedule_path_us.as_ref(),
        );
        if let (None, Some(why)) = (&s.schedule_path_us, &s.schedule_path_absent) {
            let _ = writeln!(out, "- schedule path: {why}");
        }
        lateness_by_timeout(&mut out, s);
        let by: Vec<String> = s
            .cancelled_by
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(
            out,
            "- cancels by path: {}",
            if by.is_empty() {
                "none".into()
            } else {
                by.join(", ")
            }
        );
        let pays: Vec<String> = s
            .payments
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(out, "- payment callbacks recorded: {}", pays.join(", "));
        let c = &s.cost;
        let _ = writeln!(
            out,
            "- cost (measured window): {} statements, {} transactions, {} retries, {} rows read by scans, \
             {} cancel attempts of which {} changed nothing (already paid {}, already cancelled {}, \
             not due {}); CPU {} ms over {} instance(s), peak RSS {} KiB",
            c.store.statements,
            c.store.transactions,
            c.store.retries,
            c.store.rows_read,
            c.store.cancel_attempts,
            c.absorbed_attempts,
            c.store.already_paid,
            c.store.already_cancelled,
            c.store.not_due,
            c.cpu_ms,
            c.instances.len(),
            c.peak_rss_kib
        );
        if let (Some(n), Some(per)) = (c.redis_commands, c.redis_commands_per_cancel) {
            let _ = writeln!(
                out,
                "- Redis: {n} commands served during the measured window, {per:.1} per cancel \
                 (INFO commandstats delta, server-wide)"
            );
        }
        if let Some(note) = &c.redis_note {
            let _ = writeln!(out, "- Redis commands: **{note}**");
        }
        if let (Some(n), Some(per)) = (
            c.canceller_server_rows_read,
            c.canceller_server_rows_read_per_cancel,
        ) {
            let sampled = match (&c.measurement, c.canceller_server_rows_read_ci95_per_cancel) {
                (Some(m), Some(ci)) if m.server_reads_probes < m.transactions && ci > 0.0 => {
                    format!(
                        ", estimated from {} of {} transactions read: {per:.2} ±{ci:.2} (95 %)",
                        m.server_reads_probes, m.transactions
                    )
                }
                // An interval of 0 from a few readings is not certainty.
                (Some(m), Some(_)) if m.server_reads_probes < m.transactions => format!(
                    ", estimated from {} of {} transactions read, every reading alike (no \
                     spread to give an interval from)",
                    m.server_reads_probes, m.transactions
                ),
                (Some(m), _) => format!(", every one of {} transactions read", m.transactions),
                (None, _) => String::new(),
            };
            let _ = writeln!(
                out,
                "- database server, canceller only: {n} rows read, {per:.1} per cancel{sampled} ({})",
                crate::model::summary::canceller_rows_method(&s.database.kind)
            );
        }
        if let Some(m) = &c.measurement {
            let _ = writeln!(
                out,
                "- the measurement on its path: server-reads probe {:.1} ms over {} transactions, \
                 flushes to the harness {:.1} ms; {} per cancel{}",
                m.probe_us as f64 / 1000.0,
                m.server_reads_probes,
                m.flush_us as f64 / 1000.0,
                m.us_per_cancel
                    .map_or("-".into(), |us| format!("{us:.1} µs")),
                m.share_of_cpu
                    .map(|share| format!(", {:.2} % of the CPU per cancel", share * 100.0))
                    .unwrap_or_default()
            );
        }
        if let (Some(n), Some(per)) = (c.server_rows_read, c.server_rows_read_per_cancel) {
            let _ = writeln!(
                out,
                "- database server: {n} rows read over the whole run, {per:.1} per cancelled order \
                 ({}; order creation and payments included)",
                crate::model::summary::server_rows_source(&s.database.kind)
            );
        }
        if let (Some(n), Some(per)) = (c.broker_messages, c.broker_messages_per_cancel) {
            let _ = writeln!(
                out,
                "- RabbitMQ: {n} messages published or consumed (re-delays included), {per:.1} per \
                 cancel (the strategy's own counters, measured window)"
            );
        }
        let g = &s.generator;
        let _ = writeln!(
            out,
            "- generator: {}/{} orders created ({} refused for stock, {} errors), {} callbacks \
             ({} errors), {} connections",
            g.created,
            g.orders_planned,
            g.refused,
            g.create_errors,
            g.callbacks_delivered,
            g.payment_errors,
            g.pool_connections,
        );
        distribution(
            &mut out,
            "generator lag, intended time -> transaction committed (histogram in \
             `generator_lag.hgrm`)",
            Some(&g.lag_us).filter(|l| l.count > 0),
        );
        let sum = |f: fn(&crate::model::WorkerReport) -> u64| -> u64 {
            s.cost.instances.iter().map(f).sum()
        };
        let (errors, retried, dropped, lost) = (
            sum(|i| i.schedule_errors),
            sum(|i| i.schedules_retried),
            sum(|i| i.schedules_dropped),
            sum(|i| i.schedules_lost_with_process),
        );
        if lost > 0 {
            let _ = writeln!(
                out,
                "- **up to {lost} schedules were lost with processes that died** before they made \
                 them (sent to the process, not reported made or dropped by its last flush)"
            );
        }
        if errors > 0 {
            let _ = writeln!(
                out,
                "- **{errors} schedule calls failed**; {retried} orders went to the retry buffer \
                 and **{dropped} were dropped** (committed but never scheduled: only a fallback \
                 scan cancels them, each unpaid one is a missed cancel otherwise)"
            );
        }
        if let Some(o) = &s.outbox {
            let _ = writeln!(
                out,
                "- outbox: {} schedules relayed ({} relay calls failed and were retried); longest \
                 {} rows at {:.1} s; {} left when the run stopped",
                sum(|i| i.outbox_relayed),
                sum(|i| i.outbox_failed),
                o.max_rows,
                o.max_at_ms as f64 / 1000.0,
                outbox_left(o)
            );
            // Its length over time, one figure per second (the largest of
            // the second's samples), so a growing outbox reads at a glance.
            let mut per_second: Vec<u64> = Vec::new();
            for (at_ms, rows) in &o.samples {
                let second = (*at_ms / 1000) as usize;
                if per_second.len() <= second {
                    per_second.resize(second + 1, 0);
                }
                per_second[second] = per_second[second].max(*rows);
            }
            let _ = writeln!(
                out,
                "- outbox rows, each second from the first order: `{}`",
                per_second
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        for loss in s.missed_by_fault.iter().filter(|l| l.missed > 0) {
            let _ = writeln!(
                out,
                "- **{} missed cancels** during: {}",
                loss.missed, loss.label
            );
        }
        if let Some(e) = &s.teardown_error {
            let _ = writeln!(
                out,
                "- **teardown failed** (its queues or keys may be left behind; the figures stand): {e}"
            );
        }
        if g.unscheduled > 0 {
            let _ = writeln!(
                out,
                "- **{} orders were created while every instance was down** and never scheduled",
                g.unscheduled
            );
        }
        if let Some(w) = &g.warning {
            let _ = writeln!(out, "- **generator**: {w}");
        }
        if let Some(caps) = &s.capabilities {
            let _ = writeln!(
                out,
                "- capabilities: durable across restart: {}, arbitrary delay: {}, needs fallback: {}, multi-instance safe: {}",
                caps.durable_across_restart, caps.arbitrary_delay, caps.needs_fallback, caps.multi_instance_safe
            );
            for note in &caps.notes {
                let _ = writeln!(out, "- note: {note}");
            }
        }
        if s.anomalies.total() > 0 {
            let _ = writeln!(
                out,
                "- **anomaly examples** (order ids; SKUs for stock): `{}`",
                serde_json::to_string(&s.anomaly_examples).unwrap_or_default()
            );
        }
    }
    out.push_str(GLOSSARY);
    out
}

/// One line with a distribution's sample count and the percentiles it can
/// support (`-` for those resting on fewer than 10 samples beyond them).
fn distribution(out: &mut String, label: &str, stats: Option<&LatenessStats>) {
    let Some(l) = stats else { return };
    let values: Vec<String> = [
        ("p50", Pct::P50),
        ("p90", Pct::P90),
        ("p99", Pct::P99),
        ("p99.9", Pct::P999),
        ("max", Pct::Max),
    ]
    .iter()
    .map(|(name, which)| match l.shown(*which) {
        Some(us) => format!("{name} {} ms", ms(us)),
        None => format!("{name} -"),
    })
    .collect();
    let _ = writeln!(out, "- {label}: n={}, {}", l.count, values.join(", "));
}

/// The per-timeout lateness table, when the scenario mixes timeouts, with
/// a plain statement when short deadlines waited behind long ones.
fn lateness_by_timeout(out: &mut String, s: &Summary) {
    if s.lateness_by_timeout.len() < 2 {
        return;
    }
    let _ = writeln!(out, "- lateness by configured timeout:\n");
    let _ = writeln!(
        out,
        "  | timeout | orders | p50 ms | p90 ms | p99 ms | max ms |\n  | --- | --- | --- | --- | --- | --- |"
    );
    let cell = |t: &crate::model::lateness::TimeoutLateness, p: Pct| {
        t.shown(p).map(ms).unwrap_or_else(|| "-".into())
    };
    for t in &s.lateness_by_timeout {
        let _ = writeln!(
            out,
            "  | {} ms | {} | {} | {} | {} | {} |",
            t.timeout_ms,
            t.count,
            cell(t, Pct::P50),
            cell(t, Pct::P90),
            cell(t, Pct::P99),
            cell(t, Pct::Max)
        );
    }
    let (shortest, longest) = (
        &s.lateness_by_timeout[0],
        &s.lateness_by_timeout[s.lateness_by_timeout.len() - 1],
    );
    let gap_us = (longest.timeout_ms - shortest.timeout_ms) * 1000;
    // Judged on the highest percentile the short class's count supports.
    let judged = [(Pct::P99, "p99"), (Pct::P90, "p90"), (Pct::P50, "p50")]
        .into_iter()
        .find_map(|(p, name)| shortest.shown(p).map(|v| (name, v)));
    match judged {
        Some((name, value)) if value * 2 > gap_us => {
            let _ = writeln!(
                out,
                "\n  **Head-of-line blocking**: the {} ms orders' {name} lateness ({} ms, n = {}) is \
                 more than half the {} ms between the timeouts: short deadlines waited behind long \
                 ones.\n",
                shortest.timeout_ms,
                ms(value),
                shortest.count,
                gap_us / 1000
            );
        }
        _ => {
            let _ = writeln!(out);
        }
    }
}

const GLOSSARY: &str = "
## How to read this

- **lateness** = `cancelled_at_us - expire_at_us` of each cancelled order created after the warm-up
  (HdrHistogram, 3 significant digits; full distribution in `<strategy>/lateness.hgrm`).
  `cancelled_at_us` is read right before the order's own UPDATE (fresh on every retry);
  **commit p99** is the same orders' lateness when their COMMIT returned, as the worker saw it.
  **n** is the sample count; a percentile with fewer than 10 samples beyond it shows `-`.
- **paid late**: orders paid after their deadline while still pending. The canceller had not
  acted by then, so they are missing from the lateness figures; `paid_at - deadline` is shown
  per strategy as a lower bound on that missing lateness. Not an anomaly.
- **anomalies** are computed from the database by the checker; every one must be 0:
  `early` cancelled before its deadline (by its own stamp, or by a payment that found it
  cancelled); `paid-then-cancelled` a paid order ended CANCELLED; `duplicate-releases` stock
  released more than once; `missed` still PENDING `drain` after its
  deadline; `refund-errors` a captured payment not applied-or-refunded exactly once;
  `stock-mismatches` SKUs whose stock is not initial minus what live orders hold;
  `unreleased` cancelled without a release; `orphan-releases` released but not cancelled;
  `phantom-schedules` (from the instances, not the database) cancel attempts on orders that
  never existed: scheduled inside a transaction that rolled back, or delivered before its commit.
- **stmts/cancel**: SQL statements the canceller instances sent (BEGIN/COMMIT included) per order
  they cancelled, app-side, after the warm-up. **attempts/cancel**: `cancel_if_due` calls per
  effective cancel; above 1 means some attempts changed nothing because the order was already
  paid (a schedule nobody withdrew), already cancelled (a duplicate, or another instance won) or
  not yet due; the conditional UPDATE absorbed them all.
- Raw numbers: `run.json` and `<strategy>/summary.json`.
";

/// A markdown table, header first, followed by a blank line.
pub(crate) fn table(out: &mut String, rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", rows[0].join(" | "));
    let _ = writeln!(out, "|{}", " --- |".repeat(rows[0].len()));
    for row in &rows[1..] {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    let _ = writeln!(out);
}

/// The outbox's rows left at the end, with what they are: a row under a
/// relay's lease may have been scheduled already (its relay crashed or its
/// delete failed), and only a pending order's row can be a lost schedule.
fn outbox_left(o: &crate::model::records::OutboxRecord) -> String {
    match (o.left_at_end, o.left_leased, o.left_of_pending_orders) {
        (None, ..) => "unknown".into(),
        (Some(0), ..) => "0".into(),
        (Some(rows), Some(leased), Some(pending)) => format!(
            "**{rows}** ({leased} held back from the relays: under the lease of a relay that \
             crashed or failed to delete them, maybe scheduled already, or handed back for a \
             retry; {pending} belonging to orders still pending)"
        ),
        (Some(rows), ..) => format!("**{rows}**"),
    }
}

#[cfg(test)]
mod tests {
    use super::{outbox_left, GLOSSARY};
    use crate::model::records::OutboxRecord;
    use strategies::checker::{Anomaly, Source};
    use strategies::store::OutboxLeft;

    #[test]
    fn the_outbox_rows_left_say_what_they_are() {
        let left = |rows, leased, of_pending_orders| {
            OutboxRecord::of(
                Vec::new(),
                Some(OutboxLeft {
                    rows,
                    leased,
                    of_pending_orders,
                }),
            )
        };
        assert_eq!(outbox_left(&OutboxRecord::of(Vec::new(), None)), "unknown");
        assert_eq!(outbox_left(&left(0, 0, 0)), "0");
        let text = outbox_left(&left(3, 2, 1));
        assert!(
            text.starts_with("**3** (2 held back from the relays"),
            "{text}"
        );
        assert!(
            text.contains("1 belonging to orders still pending"),
            "{text}"
        );
        // A file from before the breakdown: the count alone, in bold.
        let mut old = left(4, 0, 0);
        (old.left_leased, old.left_of_pending_orders) = (None, None);
        assert_eq!(outbox_left(&old), "**4**");
    }

    /// The glossary is hand-wrapped prose, not rendered from the table
    /// (committed reports must regenerate byte for byte), so it is checked
    /// against the table instead: each row's column and meaning, in order.
    #[test]
    fn the_glossary_explains_every_anomaly_as_the_table_does() {
        let prose = GLOSSARY.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut from = 0;
        for anomaly in Anomaly::ALL {
            let whence = if anomaly.source() == Source::Instances {
                " (from the instances, not the database)"
            } else {
                ""
            };
            let entry = format!("`{}`{whence} {}", anomaly.column(), anomaly.means());
            let at = prose[from..]
                .find(&entry)
                .unwrap_or_else(|| panic!("GLOSSARY lacks, after the anomaly before it: {entry}"));
            from += at + entry.len();
        }
    }
}
