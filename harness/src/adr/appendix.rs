//! The evidence file beside the draft: every term's verdict with every
//! run's figure, every run's measurements of every option, and the inputs
//! in full.

use super::draft::table;
use super::evidence::{self, FaultTally, Figure};
use super::judge::Kind;
use super::limits;
use super::reading::{paid_late_figure, step_key};
use super::sla::{pct_name, trim, Condition};
use super::study::Study;
use crate::model::lateness::Pct;
use crate::model::summary::Summary;
use anyhow::Result;
use std::fmt::Write;
use std::path::Path;
use strategies::checker::Anomaly;

pub fn appendix(study: &Study, base: &Path, draft_file: &str) -> Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "# Evidence for the decision record\n\nThe figures behind [{draft_file}]({draft_file}), \
         every option and every run. Each figure links to the JSON file it comes from (hover: the \
         key and its raw value). An option is judged only from its own runs.\n"
    )?;
    writeln!(out, "## Verdicts, term by term\n")?;
    for c in study.sla.judged() {
        let runs: Vec<&str> = study
            .sources
            .iter()
            .filter(|s| s.condition == c)
            .map(|s| s.label.as_str())
            .collect();
        writeln!(
            out,
            "### {} ({}: {})\n",
            c.name(),
            c.words(),
            if runs.is_empty() {
                "none given".to_string()
            } else {
                runs.join(", ")
            }
        )?;
        let terms = study.sla.terms(c);
        let mut header = vec!["option".to_string()];
        header.extend(terms.iter().map(|t| format!("`{}`", t.text)));
        let mut rows = vec![header];
        for e in &study.evals {
            let Some(ce) = e.condition(c) else {
                continue;
            };
            let mut row = vec![format!("**{}**", e.name)];
            // A condition never measured says why once.
            if ce.terms.len() > 1
                && ce.terms.iter().all(|(_, v)| {
                    v.kind == ce.terms[0].1.kind
                        && v.detail.is_empty()
                        && v.note == ce.terms[0].1.note
                })
            {
                let v = &ce.terms[0].1;
                let word = if v.kind == Kind::NotApplicable {
                    "n/a"
                } else {
                    "not measured"
                };
                row.push(format!("{word} ({}), for every term", v.note));
                row.extend((1..ce.terms.len()).map(|_| "″".to_string()));
                rows.push(row);
                continue;
            }
            for (_, v) in &ce.terms {
                row.push(match v.kind {
                    Kind::NotApplicable => format!("n/a ({})", v.note),
                    Kind::NotMeasured if v.detail.is_empty() => {
                        format!("not measured ({})", v.note)
                    }
                    kind => {
                        let word = match kind {
                            Kind::Meets => "meets",
                            Kind::Fails => "**fails**",
                            _ => "not measured",
                        };
                        let each: Vec<String> = v
                            .detail
                            .iter()
                            .map(|(f, note)| {
                                let note = note.trim();
                                if note.is_empty() {
                                    f.render(base)
                                } else {
                                    format!("{} {note}", f.render(base))
                                }
                            })
                            .collect();
                        format!("{word}: {}", each.join("; "))
                    }
                });
            }
            rows.push(row);
        }
        table(&mut out, &rows);
    }

    writeln!(out, "## Measured, run by run\n")?;
    runs_table(&mut out, study, base)?;
    rates_table(&mut out, study, base)?;
    backlog_table(&mut out, study, base)?;

    writeln!(out, "## Inputs\n")?;
    for s in study.sources {
        let info = &s.info;
        writeln!(
            out,
            "- [`{}`]({}) — {}, scenario `{}` ({}), commit `{}`, started {}: {}.",
            info.run_id,
            evidence::relative(base, &s.dir.join("run.json")),
            s.condition.name(),
            info.scenario.name,
            info.scenario_source,
            info.git_commit.get(..7).unwrap_or(&info.git_commit),
            info.started_at,
            limits::run_words(s)
        )?;
        if let Some(faults) = info.scenario.faults_label() {
            writeln!(
                out,
                "  Faults, at the same times for every strategy: {faults}."
            )?;
        }
        writeln!(out, "  Rerun: `{}`", limits::rerun(s))?;
    }
    Ok(out)
}

fn lateness_cell(s: &Summary, file: &Path, base: &Path) -> String {
    let l = &s.lateness_us;
    let mut parts: Vec<String> = [Pct::P50, Pct::P90, Pct::P99]
        .into_iter()
        .filter_map(|p| {
            l.shown(p).map(|v| {
                Figure::new(
                    format!("{} {}", pct_name(p), evidence::ms_text(v as f64)),
                    file.to_path_buf(),
                    &format!("lateness_us.{}", pct_name(p)),
                    v,
                )
                .render(base)
            })
        })
        .collect();
    parts.push(
        Figure::new(
            format!("max {}", evidence::ms_text(l.max as f64)),
            file.to_path_buf(),
            "lateness_us.max",
            l.max,
        )
        .render(base),
    );
    parts.push(
        Figure::new(
            format!("{} cancels", l.count),
            file.to_path_buf(),
            "lateness_us.count",
            l.count,
        )
        .render(base),
    );
    parts.join(", ")
}

fn runs_table(out: &mut String, study: &Study, base: &Path) -> Result<()> {
    let mut rows = vec![vec![
        "option".to_string(),
        "run".into(),
        "lateness".into(),
        "missed, anomalies, paid late".into(),
        "faults".into(),
        "cost per cancel".into(),
    ]];
    for e in &study.evals {
        for c in [Condition::Normal, Condition::Faults, Condition::Cluster] {
            for source in study.sources.iter().filter(|s| s.condition == c) {
                let Some(s) = source.summary(e.variant) else {
                    continue;
                };
                let file = source.summary_file(s.strategy.name());
                let missed = Figure::new(
                    format!("{} missed", s.anomalies.get(Anomaly::MissedCancels)),
                    file.clone(),
                    "anomalies.missed_cancels",
                    s.anomalies.get(Anomaly::MissedCancels),
                )
                .render(base);
                let anomalies = Figure::new(
                    format!("{} anomalies", s.anomalies.total()),
                    file.clone(),
                    "anomalies.*",
                    s.anomalies.total(),
                )
                .render(base);
                let (late, _) = paid_late_figure(s, file.clone(), &source.label);
                let faults = if c == Condition::Normal {
                    "none".to_string()
                } else {
                    let mut words = FaultTally::of(s).words();
                    let causes: Vec<String> = s
                        .missed_by_fault
                        .iter()
                        .filter(|l| l.missed > 0)
                        .map(|l| format!("{} missed during {}", l.missed, short(&l.label)))
                        .collect();
                    if !causes.is_empty() {
                        let _ = write!(words, "; {}", causes.join("; "));
                    }
                    words
                };
                let cost: Vec<String> = evidence::cost_figures(s, &file)
                    .iter()
                    .map(|f| f.render(base))
                    .collect();
                rows.push(vec![
                    format!("**{}**", e.name),
                    format!("{} ({})", source.label, c.name()),
                    lateness_cell(s, &file, base),
                    format!("{missed}, {anomalies}, {}", late.render(base)),
                    faults,
                    cost.join(", "),
                ]);
            }
        }
    }
    if rows.len() > 1 {
        writeln!(out, "### Runs with and without faults\n")?;
        table(out, &rows);
    }
    Ok(())
}

fn rates_table(out: &mut String, study: &Study, base: &Path) -> Result<()> {
    let mut rows = vec![vec![
        "option".to_string(),
        "sweep".into(),
        "max sustainable rate".into(),
        "first failing rate".into(),
        "limited by".into(),
    ]];
    for e in &study.evals {
        for source in study
            .sources
            .iter()
            .filter(|s| s.condition == Condition::Capacity)
        {
            let Some(sweep) = source.sweep(e.variant) else {
                continue;
            };
            let file = source.sweep_file();
            let key = |k: &str| format!("strategies[strategy={}].{k}", sweep.strategy);
            let fig = |v: Option<f64>, k: &str| match v {
                Some(v) => Figure::new(format!("{} orders/s", trim(v)), file.clone(), &key(k), v)
                    .render(base),
                None => "none".into(),
            };
            rows.push(vec![
                format!("**{}**", e.name),
                source.label.clone(),
                fig(sweep.max_rate, "max_rate"),
                fig(sweep.first_failed_rate, "first_failed_rate"),
                sweep.limited_by.clone().unwrap_or_default(),
            ]);
        }
    }
    if rows.len() > 1 {
        writeln!(out, "### Rate sweeps\n")?;
        table(out, &rows);
    }
    Ok(())
}

fn backlog_table(out: &mut String, study: &Study, base: &Path) -> Result<()> {
    let mut rows = vec![vec![
        "option".to_string(),
        "step".into(),
        "held".into(),
        "lateness at commit".into(),
        "restarts with the backlog held".into(),
    ]];
    for e in &study.evals {
        for source in study
            .sources
            .iter()
            .filter(|s| s.condition == Condition::Backlog)
        {
            let Some(sweep) = source.sweep(e.variant) else {
                continue;
            };
            let file = source.sweep_file();
            for step in &sweep.steps {
                let at = step_key(sweep, step);
                let fig = |text: String, k: &str, v: String| {
                    Figure::new(text, file.clone(), &format!("{at}.{k}"), v).render(base)
                };
                let mut lateness = Vec::new();
                for (name, v) in [
                    ("p50", step.p50_us),
                    ("p99", step.p99_us),
                    ("max", step.max_us),
                ] {
                    if let Some(v) = v {
                        lateness.push(fig(
                            format!("{name} {}", evidence::ms_text(v as f64)),
                            &format!("{name}_us"),
                            v.to_string(),
                        ));
                    }
                }
                lateness.push(fig(
                    format!("{} cancels", step.cancels),
                    "cancels",
                    step.cancels.to_string(),
                ));
                let mut held = vec![if step.holds {
                    "holds".to_string()
                } else {
                    format!("**does not hold**: {}", step.reasons.join("; "))
                }];
                let mut restarts = Vec::new();
                if let Some(b) = &step.backlog {
                    held.push(fig(
                        format!("handed over in {:.1} s", b.handoff_s),
                        "backlog.handoff_s",
                        b.handoff_s.to_string(),
                    ));
                    for r in &b.recovery {
                        let k = format!("backlog.recovery[what={}]", r.what);
                        let again = match r.cancelling_again_s {
                            Some(s) => fig(
                                format!("{s:.1} s"),
                                &format!("{k}.cancelling_again_s"),
                                s.to_string(),
                            ),
                            None => "not within the limit".into(),
                        };
                        let probes = Figure::new(
                            format!("{} of {} probes cancelled", r.probes_cancelled, r.probes),
                            file.clone(),
                            &format!("{at}.{k}.probes_cancelled"),
                            r.probes_cancelled,
                        )
                        .with(&format!("{at}.{k}.probes"), r.probes)
                        .render(base);
                        let lost = match r.loss_text() {
                            Some(loss) if r.lost_probes() > 0 => {
                                format!(" — {loss}: **not a recovery**")
                            }
                            Some(loss) => format!(" — {loss}"),
                            None if r.lost_probes() > 0 => " — **not a recovery**".into(),
                            None => String::new(),
                        };
                        restarts.push(format!(
                            "{} ({}): cancelling again after {again}, {probes}{lost}",
                            r.what,
                            r.kind.label()
                        ));
                    }
                }
                rows.push(vec![
                    format!("**{}**", e.name),
                    format!(
                        "{} ({} pending)",
                        source.label,
                        step.pending.map(|p| p.to_string()).unwrap_or_default()
                    ),
                    held.join(", "),
                    lateness.join(", "),
                    restarts.join("; "),
                ]);
            }
        }
    }
    if rows.len() > 1 {
        writeln!(out, "### Backlog sweeps\n")?;
        table(out, &rows);
    }
    Ok(())
}

/// A fault's label cut to a readable length (a command's can be long).
fn short(label: &str) -> String {
    match label.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &label[..at]),
        None => label.to_string(),
    }
}
