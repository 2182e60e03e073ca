//! What the inputs are, in a few words; what they cannot show (the limits
//! of the evidence, from each `run.json`); and the command that repeats
//! each one.

use super::evidence::{clustered, Body, Source};
use super::sla::{trim, Condition};
use crate::faults::FaultKind;
use crate::model::lateness::Pct;
use crate::model::sweep::SweepAxis;
use std::collections::BTreeMap;
use std::time::Duration;
use strategies::Service;

fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// `50 orders/s, 15s measured, timeouts 2s (x3), 4s (x1), 2 instances, 3
/// repetitions interleaved` and for fault runs the faults by kind.
pub fn run_words(source: &Source) -> String {
    let info = &source.info;
    let s = &info.scenario;
    match &source.body {
        Body::Sweep(result) if result.axis == SweepAxis::Pending => {
            let pending = pending_sizes(source);
            format!(
                "{} orders/s for {} per step while holding {} pending orders; {}",
                trim(s.rate),
                secs(s.duration),
                pending.join(", "),
                trial_words(info.repeat, true)
            )
        }
        Body::Sweep(result) => format!(
            "offered rates rising until a step fails (p99 at commit over {} ms or the harness \
             behind), {} a step; {}",
            trim(result.bound_ms),
            secs(s.duration),
            trial_words(info.repeat, true)
        ),
        Body::Run(_) => {
            let mut words = format!(
                "{} orders/s, {} measured, timeouts {}, {} instance{}; {}",
                trim(s.rate),
                secs(s.duration),
                s.timeouts_label(),
                s.instances,
                if s.instances == 1 { "" } else { "s" },
                trial_words(info.repeat, false)
            );
            if !s.faults.is_empty() {
                let mut kinds: Vec<(FaultKind, usize)> = Vec::new();
                for f in &s.faults {
                    match kinds.iter_mut().find(|(k, _)| *k == f.kind()) {
                        Some((_, n)) => *n += 1,
                        None => kinds.push((f.kind(), 1)),
                    }
                }
                let kinds: Vec<String> = kinds
                    .iter()
                    .map(|(k, n)| match n {
                        1 => k.as_str().to_string(),
                        n => format!("{} ×{n}", k.as_str()),
                    })
                    .collect();
                words += &format!(
                    "; {} fault{}: {}",
                    s.faults.len(),
                    if s.faults.len() == 1 { "" } else { "s" },
                    kinds.join(", ")
                );
            }
            if source.condition == Condition::Cluster {
                words += &format!("; {}", s.description);
            }
            words
        }
    }
}

fn trial_words(repeat: u32, sweep: bool) -> String {
    match (repeat, sweep) {
        (1, _) => "one trial".into(),
        (n, false) => format!("{n} repetitions, interleaved"),
        (n, true) => format!("each step {n} times back to back"),
    }
}

fn pending_sizes(source: &Source) -> Vec<String> {
    let mut sizes: Vec<u64> = match &source.body {
        Body::Sweep(r) => r
            .strategies
            .iter()
            .flat_map(|s| s.steps.iter().filter_map(|st| st.pending))
            .collect(),
        Body::Run(_) => Vec::new(),
    };
    sizes.sort_unstable();
    sizes.dedup();
    sizes.iter().map(|p| p.to_string()).collect()
}

/// Labels of the sources matching `f`, joined.
fn labels(sources: &[Source], f: impl Fn(&Source) -> bool) -> String {
    sources
        .iter()
        .filter(|s| f(s))
        .map(|s| s.label.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_loopback(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return true; // sqlite:// or a file: no network at all
    };
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() {
        return true;
    }
    let host = host
        .trim_start_matches('[')
        .split([']', ':'])
        .next()
        .unwrap_or("");
    matches!(host, "127.0.0.1" | "localhost" | "::1" | "") || host.starts_with("127.")
}

/// What the inputs cannot show, each in one sentence, from their
/// `run.json`.
pub fn limits(sources: &[Source]) -> Vec<String> {
    let mut lines = Vec::new();
    // The machine.
    let mut machines: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for s in sources {
        let m = &s.info.machine;
        machines
            .entry(format!(
                "{} cores ({}), {:.0} GiB, {}",
                m.cpus,
                m.cpu_model,
                m.memory_mib as f64 / 1024.0,
                m.os
            ))
            .or_default()
            .push(&s.label);
    }
    let machine = if machines.len() == 1 {
        format!("one machine of {}", machines.keys().next().expect("one"))
    } else {
        machines
            .iter()
            .map(|(m, l)| format!("{m} ({})", l.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    };
    lines.push(format!(
        "**One shared host.** Every run was on {machine}: the database, the broker, Redis, the \
         harness (load generator and checker) and every canceller instance shared its cores, so \
         each one's CPU is part of the others' figures, and a sweep's limit is often the machine's."
    ));
    // The network.
    let mut urls: Vec<String> = Vec::new();
    for s in sources {
        urls.push(s.info.database_url.clone());
        let o = &s.info.scenario.strategies;
        urls.extend(o.rabbit.url.split(',').map(str::to_string));
        urls.push(o.redis_zset.url.clone());
    }
    let remote: Vec<&String> = urls.iter().filter(|u| !is_loopback(u)).collect();
    let simulated: Vec<String> = sources
        .iter()
        .filter(|s| s.info.scenario.network.adds_anything())
        .map(|s| format!("{} ({})", s.label, s.info.scenario.network.label()))
        .collect();
    if !simulated.is_empty() {
        lines.push(format!(
            "**Network simulated.** {} held a steady round trip between the services and the \
             order service and instances, by the harness's proxy on this host (not netem, not \
             a real network: TCP's own behaviour over a long link and the proxy's CPU are not \
             a real network's); {}.",
            simulated.join("; "),
            if simulated.len() == sources.len() {
                "every source did"
            } else {
                "the other sources were over loopback"
            }
        ));
    }
    if remote.is_empty() && !simulated.is_empty() {
        // Said above.
    } else if remote.is_empty() {
        lines.push(
            "**Loopback only.** Every service was reached over 127.0.0.1: no network latency or \
             loss between hosts, apart from the partitions and latency the harness injected."
                .into(),
        );
    } else {
        lines.push(format!(
            "**Network.** Some services were on other hosts ({}); the others over loopback.",
            remote
                .iter()
                .map(|u| strategies::redact::url(u))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // Trials.
    let single_faults = labels(sources, |s| {
        s.info.repeat == 1 && matches!(s.condition, Condition::Faults | Condition::Cluster)
    });
    let single_other = labels(sources, |s| {
        s.info.repeat == 1 && !matches!(s.condition, Condition::Faults | Condition::Cluster)
    });
    let repeated = |sweep: bool| {
        sources
            .iter()
            .filter(|s| s.info.repeat > 1 && matches!(s.body, Body::Sweep(_)) == sweep)
            .map(|s| format!("{} ×{}", s.label, s.info.repeat))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut trials = String::from("**Few trials.** ");
    if !single_faults.is_empty() {
        trials += &format!(
            "Every fault and cluster run is one trial ({single_faults}): where a fault lands in a \
             strategy's path decides what it loses, and another trial may land elsewhere. "
        );
    }
    if !single_other.is_empty() {
        trials += &format!("One trial too: {single_other}. ");
    }
    let runs = repeated(false);
    if !runs.is_empty() {
        trials += &format!("Repeated, interleaved: {runs}. ");
    }
    let sweeps = repeated(true);
    if !sweeps.is_empty() {
        trials += &format!(
            "Sweeps ran each step back to back, one strategy after another, not interleaved \
             ({sweeps}): a drift of the machine during a sweep lands on one strategy."
        );
    }
    lines.push(trials.trim_end().to_string());
    // Windows and samples.
    let mut windows: Vec<(String, Vec<&str>)> = Vec::new();
    for s in sources {
        let w = format!(
            "{}{}",
            secs(s.info.scenario.duration),
            if matches!(s.body, Body::Sweep(_)) {
                " a step"
            } else {
                ""
            }
        );
        match windows.iter_mut().find(|(x, _)| *x == w) {
            Some((_, l)) => l.push(&s.label),
            None => windows.push((w, vec![&s.label])),
        }
    }
    let needed = super::reading::samples_needed(Pct::P99);
    let short = labels(sources, |s| match &s.body {
        Body::Run(summaries) => summaries
            .iter()
            .any(|x| x.lateness_us.count > 0 && x.lateness_us.count < needed),
        Body::Sweep(r) => r
            .strategies
            .iter()
            .flat_map(|x| &x.steps)
            .any(|st| st.cancels > 0 && st.cancels < needed),
    });
    let mut w = format!(
        "**Short windows.** Measured after the warm-up: {}.",
        windows
            .iter()
            .map(|(w, l)| format!("{w} ({})", l.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    );
    if !short.is_empty() {
        w += &format!(
            " A p99 needs {needed} cancels; in {short} some strategies had fewer, so their p99 is \
             only bounded (by the max, or a lower percentile)."
        );
    }
    lines.push(w);
    // Timeouts.
    let timeouts: Vec<Duration> = sources
        .iter()
        .flat_map(|s| s.info.scenario.timeouts.iter().map(|t| t.after))
        .collect();
    if let (Some(lo), Some(hi)) = (timeouts.iter().min(), timeouts.iter().max()) {
        lines.push(format!(
            "**Compressed time.** Timeouts of {}–{} stand in for real ones of minutes or hours; \
             the pending orders a longer wait holds are measured only by a backlog sweep.",
            secs(*lo),
            secs(*hi)
        ));
    }
    // Persistence and queue types.
    let mut services: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for s in sources {
        for (name, v) in &s.info.services {
            let seen = services.entry(name.as_str()).or_default();
            if !seen.contains(&v.as_str()) {
                seen.push(v);
            }
        }
    }
    let mut queues: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for s in sources
        .iter()
        .filter(|s| s.info.services.contains_key("rabbitmq"))
    {
        let q = serde_json::to_value(s.info.scenario.strategies.rabbit.queue_type)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        queues.entry(q).or_default().push(&s.label);
    }
    if !services.is_empty() {
        let mut p = format!(
            "**Services as configured.** {}.",
            services
                .values()
                .map(|v| v.join(" / "))
                .collect::<Vec<_>>()
                .join("; ")
        );
        if services
            .get("redis")
            .is_some_and(|v| v.iter().any(|x| x.contains("append-only file off")))
        {
            p += " Redis ran without append-only persistence: a Redis restart loses its data, and \
                  what persistence costs is in no figure.";
        }
        if !queues.is_empty() {
            p += &format!(
                " RabbitMQ queues: {}.",
                queues
                    .iter()
                    .map(|(q, l)| format!("{q} ({})", l.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        lines.push(p);
    }
    // The database.
    let mut dbs: Vec<String> = sources
        .iter()
        .map(|s| {
            s.info
                .database_version
                .split(" on ")
                .next()
                .unwrap_or(&s.info.database_kind)
                .split(" (")
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    dbs.sort();
    dbs.dedup();
    let kinds: Vec<&str> = ["postgres", "mysql", "sqlite"]
        .into_iter()
        .filter(|k| !sources.iter().any(|s| s.info.database_kind == *k))
        .map(|k| match k {
            "postgres" => "PostgreSQL",
            "mysql" => "MariaDB",
            _ => "SQLite",
        })
        .collect();
    lines.push(format!(
        "**One database.** Every run used one {} server without a replica: a database \
         failover, which every option depends on, was not measured{}.",
        dbs.join(" or "),
        if kinds.is_empty() {
            String::new()
        } else {
            format!(", nor {}", kinds.join(" and "))
        }
    ));
    // Clusters.
    let clusters: Vec<String> = sources
        .iter()
        .filter(|s| s.condition == Condition::Cluster)
        .map(|s| {
            let what: Vec<&str> = clustered(&s.info)
                .iter()
                .map(|c| match c {
                    Service::Redis => "Redis Cluster",
                    Service::RabbitMq => "RabbitMQ cluster",
                })
                .collect();
            format!("{} ({})", s.label, what.join(", "))
        })
        .collect();
    if !clusters.is_empty() {
        lines.push(format!(
            "**Clusters on one host.** The cluster runs ({}) ran every node on the same machine: a \
             node lost is a process stopped, not a machine or a network gone.",
            clusters.join(", ")
        ));
    }
    // Builds.
    let mut commits: Vec<&str> = sources.iter().map(|s| s.info.git_commit.as_str()).collect();
    commits.sort_unstable();
    commits.dedup();
    if commits.len() > 1 {
        lines.push(format!(
            "**Several builds.** The inputs come from {} commits ({}): an option's runs may come \
             from different builds of it.",
            commits.len(),
            commits
                .iter()
                .map(|c| format!(
                    "`{}{}`",
                    c.get(..7).unwrap_or(c),
                    if c.ends_with("-dirty") { "-dirty" } else { "" }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    lines
}

/// The command that repeats `source`: its own command line from
/// `run.json` (`delaybench` for the binary it ran, `--out` dropped), with
/// the scenario it ran: the folder's `scenario.toml`, or its `run.json`
/// where it has none (`--scenario` takes either).
pub fn rerun(source: &Source) -> String {
    let scenario = if source.dir.join("scenario.toml").exists() {
        source.dir.join("scenario.toml")
    } else {
        source.dir.join("run.json")
    };
    let command = &source.info.command;
    let verb = command
        .get(1)
        .filter(|v| !v.starts_with('-'))
        .cloned()
        .unwrap_or_else(|| {
            if matches!(source.body, Body::Sweep(_)) {
                "sweep".into()
            } else {
                "run".into()
            }
        });
    let mut args = vec![
        "delaybench".to_string(),
        verb,
        "--scenario".into(),
        scenario.display().to_string(),
    ];
    let mut rest = command.iter().skip(2);
    while let Some(a) = rest.next() {
        if a == "--scenario" || a == "--out" {
            rest.next();
            continue;
        }
        if a.starts_with("--scenario=") || a.starts_with("--out=") {
            continue;
        }
        args.push(a.clone());
    }
    if command.is_empty() {
        let names: Vec<&str> = source
            .info
            .strategies
            .iter()
            .map(String::as_str)
            .filter(|s| *s != "ceiling")
            .collect();
        args.extend(["--strategies".to_string(), names.join(",")]);
    }
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// `a` as one shell word.
fn quote(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_on_this_host_are_loopback() {
        for url in [
            "postgres://root@127.0.0.1/test",
            "amqp://guest:***@127.0.0.1:5681/%2f",
            "redis+cluster://127.0.0.1:7000",
            "sqlite://",
            "mysql://root@localhost:3306/test",
            "redis://[::1]:6379",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        assert!(!is_loopback("postgres://u@db.example.com/x"));
        assert_eq!(quote("a,b"), "a,b");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
