//! Faults injected into a strategy's run at the scenario's times, the same
//! for every strategy, and the record of what actually happened.
//!
//! Each kind lands where it would in production: a process killed, paused
//! or crashed at a point of its own path; a link cut or slowed by the TCP
//! proxy the instances reach their backends through; database sessions
//! terminated on the server; a command (a service restart) run as is. A
//! fault that does not apply to a strategy (a Redis partition for db-scan,
//! a crash point its path does not have) is recorded as such, never
//! silently skipped.

use crate::instance::Pool;
use crate::model::records::FaultReach;
use crate::model::FaultRecord;
use crate::proxy::{route_through, upstream_of, FaultProxy, Target};
use crate::scenario::{Fault, FaultKind};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use strategies::signal::{self, Sig};
use strategies::{
    CrashPoint, DbKind, DbLocation, InstanceRole, OrderStore, Service, StrategyOptions,
};
use tokio::time::Instant;

/// How long after a pause its duplicate attempts are still counted: the
/// resumed process finishes what it held within this.
const DUPLICATES_SETTLE: Duration = Duration::from_secs(2);

/// Fills in each pause's `duplicates_absorbed`: decided attempts (`cancels`
/// and `absorbed`, `(order, when)`) on an order that an earlier attempt
/// had already decided, made from the pause until [`DUPLICATES_SETTLE`]
/// after it. The conditional UPDATE absorbs every one; the checker's
/// duplicate-release count shows they had no effect.
pub fn count_duplicates(
    records: &mut [FaultRecord],
    cancels: &[(strategies::OrderId, strategies::Micros)],
    absorbed: &[(strategies::OrderId, strategies::Micros)],
    t0_us: strategies::Micros,
) {
    let mut attempts: Vec<(strategies::OrderId, strategies::Micros)> =
        cancels.iter().chain(absorbed).copied().collect();
    attempts.sort_unstable();
    // Every attempt after an order's first, as ms after t0.
    let repeats: Vec<u64> = attempts
        .windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| ((w[1].1 - t0_us).max(0) / 1000) as u64)
        .collect();
    let settle = DUPLICATES_SETTLE.as_millis() as u64;
    for record in records
        .iter_mut()
        .filter(|r| r.kind == FaultKind::PauseInstance)
    {
        let Some((from, to)) = record.window_ms else {
            continue;
        };
        let n = repeats
            .iter()
            .filter(|at| (from..=to + settle).contains(*at))
            .count() as u64;
        record.duplicates_absorbed = Some(n);
        if let Some(detail) = &mut record.detail {
            *detail += &format!(
                "; {n} repeated attempts on an already decided order from the pause until {} s \
                 after it, all absorbed (every instance; repeats of any cause in that window count)",
                DUPLICATES_SETTLE.as_secs()
            );
        }
    }
}

/// After a partition heals, how long the instances' new connections are
/// counted as their reconnects.
const RECONNECT_WINDOW: Duration = Duration::from_secs(3);

/// What faults act on, for one strategy's run.
#[derive(Debug, Clone)]
pub struct FaultContext {
    pub pool: Arc<Pool>,
    /// The proxy in front of each backend the strategy's instances use.
    pub proxies: BTreeMap<Target, FaultProxy>,
    /// The harness's own connection to the database (not proxied), which
    /// terminates the instances' sessions.
    pub db: OrderStore,
    /// The label of the instances' database sessions.
    pub session: String,
    /// The crash points the strategy's path has.
    pub crash_points: &'static [CrashPoint],
    /// The first order.
    pub t0: Instant,
    /// A `crash-at` whose point is not reached by then is reported so.
    pub give_up_at: Instant,
    /// The services the strategy uses besides the database.
    pub requires: Vec<Service>,
    /// Its Redis, where it uses one: `(url, resource prefix, shards)`, to
    /// tell whether a fault on a cluster node touched its shards.
    pub redis: Option<(String, String, u32)>,
}

/// Why an instance fault aimed at `index` misses what matters, when the
/// strategy elects a leader and `index` is not it.
fn missed_leader(roles: &[Option<InstanceRole>], index: usize) -> Option<String> {
    let leader = roles.iter().position(|r| *r == Some(InstanceRole::Leader));
    match roles.get(index).copied().flatten() {
        // Roles as of each instance's last flush, at most FLUSH_EVERY old.
        Some(InstanceRole::Standby) => Some(match leader {
            Some(l) => format!(
                "instance {index} was a standby; instance {l} held the lead (as of their last \
                 reports, at most 1 s before the fault)"
            ),
            None => format!("instance {index} was a standby; no instance reported the lead"),
        }),
        _ => None,
    }
}

/// Why a `run-command` fault on Redis Cluster node `node` misses this
/// strategy: that node served none of its shards' slots when it came.
/// `Err` says why that could not be told (the record then keeps `hit`).
async fn missed_shards(
    node: &str,
    (url, prefix, shards): &(String, String, u32),
) -> Result<Option<String>, String> {
    if !strategies::redis_cluster::is_cluster(url) {
        return Ok(Some(format!(
            "node {node} is a Redis Cluster node, and this strategy's Redis is not a cluster"
        )));
    }
    let masters = strategies::redis_cluster::masters(url)
        .await
        .map_err(|e| format!("could not list the cluster's masters: {e}"))?;
    let Some(master) = masters.iter().find(|m| m.addr == node) else {
        return Err(format!(
            "node {node} is not among the masters the cluster lists ({})",
            masters
                .iter()
                .map(|m| m.addr.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    let slots = strategies::redis_zset::cluster_shard_slots(prefix, *shards);
    let held = slots.iter().filter(|s| master.serves(**s)).count();
    Ok((held == 0).then(|| format!("node {node} served none of this strategy's {shards} shards")))
}

/// Starts a proxy in front of each backend that the scenario's network
/// faults target and the strategy's instances use, and returns the
/// location and options that send the instances through them. Without
/// network faults the instances connect directly, as they always did.
pub async fn route(
    faults: &[Fault],
    requires: &[Service],
    location: &DbLocation,
    options: &StrategyOptions,
) -> anyhow::Result<(BTreeMap<Target, FaultProxy>, DbLocation, StrategyOptions)> {
    let (mut location, mut options) = (location.clone(), options.clone());
    let mut proxies = BTreeMap::new();
    let targets: std::collections::BTreeSet<Target> = faults
        .iter()
        .filter(|f| matches!(f.kind, FaultKind::Partition | FaultKind::Latency))
        .filter_map(|f| f.target)
        .collect();
    for target in targets {
        let url = match target {
            Target::Database if location.kind != DbKind::Sqlite => &mut location.url,
            Target::Redis if requires.contains(&Service::Redis) => {
                // The cluster client connects to every master at the
                // addresses the cluster announces, past a proxy in front
                // of the seed: the fault would cut almost nothing.
                anyhow::ensure!(
                    !strategies::redis_cluster::is_cluster(&options.redis_zset.url),
                    "a `partition` or `latency` fault on target = \"redis\" cannot act on a \
                     Redis Cluster ({}): its clients reach every master directly. Use a \
                     run-command fault on a node instead (scenarios/redis-cluster.toml)",
                    strategies::redact::url(&options.redis_zset.url)
                );
                &mut options.redis_zset.url
            }
            Target::Rabbitmq if requires.contains(&Service::RabbitMq) => &mut options.rabbit.url,
            _ => continue, // recorded as not applicable when the fault comes
        };
        let proxy = FaultProxy::start(target, upstream_of(url)?).await?;
        *url = route_through(url, proxy.local_addr())?;
        proxies.insert(target, proxy);
    }
    Ok((proxies, location, options))
}

/// Runs every fault at its time after `t0`, each on its own task so a slow
/// restart never delays the next fault, and returns the records in
/// scenario order once all are done.
pub async fn inject(faults: Vec<Fault>, context: FaultContext) -> Vec<FaultRecord> {
    let tasks: Vec<_> = faults
        .into_iter()
        .map(|fault| tokio::spawn(inject_one(fault, context.clone())))
        .collect();
    let mut records = Vec::new();
    for task in tasks {
        match task.await {
            Ok(record) => records.push(record),
            Err(e) => tracing::error!(error = %e, "a fault task panicked"),
        }
    }
    records
}

async fn inject_one(fault: Fault, cx: FaultContext) -> FaultRecord {
    let t0 = cx.t0;
    let since_t0 = || t0.elapsed().as_millis() as u64;
    let mut record = FaultRecord::planned(&fault);
    tokio::time::sleep_until(t0 + fault.at).await;
    let index = fault.instance() as usize;
    if matches!(
        fault.kind,
        FaultKind::KillInstance | FaultKind::PauseInstance | FaultKind::CrashAt
    ) {
        if let Some(why) = missed_leader(&cx.pool.roles(), index) {
            record.reach = FaultReach::MissedTarget(why);
        }
    }
    match fault.kind {
        FaultKind::KillInstance => {
            match cx.pool.kill(index).await {
                Ok(pid) => {
                    record.killed_pid = pid;
                    record.killed_at_ms = pid.map(|_| since_t0());
                }
                Err(e) => {
                    record.error = Some(format!("{e:#}"));
                    return record;
                }
            }
            if let Some(after) = fault.restart_after {
                tokio::time::sleep(after).await;
                restart(&cx.pool, index, &mut record, since_t0).await;
            }
        }
        FaultKind::RunCommand => {
            // The command runs for every strategy alike; whether it could
            // touch this one is decided first, from what it uses.
            let service = match fault.target {
                Some(Target::Redis) => Some(Service::Redis),
                Some(Target::Rabbitmq) => Some(Service::RabbitMq),
                _ => None,
            };
            match service {
                Some(service) if !cx.requires.contains(&service) => {
                    record.not_applicable(format!("this strategy does not use {}", service.name()));
                }
                _ => {
                    if let (Some(node), Some(redis)) = (&fault.node, &cx.redis) {
                        match missed_shards(node, redis).await {
                            Ok(Some(why)) => record.reach = FaultReach::MissedTarget(why),
                            Ok(None) => {}
                            Err(why) => {
                                record.detail = Some(format!(
                                    "whether it hit the strategy's shards is unknown: {why}"
                                ))
                            }
                        }
                    }
                }
            }
            let start = since_t0();
            let output = tokio::process::Command::new(&fault.command[0])
                .args(&fault.command[1..])
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output()
                .await;
            let finished = since_t0();
            record.finished_at_ms = Some(finished);
            if let Some(lasts) = fault.lasts {
                // What it did (a stopped node) outlasts the command.
                let until = start + lasts.as_millis() as u64;
                record.window_ms = Some((start, until.max(finished)));
            }
            match output {
                Ok(out) => {
                    record.exit_status = Some(out.status.to_string());
                    if !out.status.success() {
                        record.error = Some(format!("the command failed: {}", tail(&out.stderr)));
                    }
                }
                Err(e) => record.error = Some(format!("could not run `{}`: {e}", fault.command[0])),
            }
        }
        FaultKind::Partition | FaultKind::Latency => {
            let target = fault
                .target
                .expect("validated: partition and latency have a target");
            let lasts = fault.window();
            let Some(proxy) = cx.proxies.get(&target) else {
                record.not_applicable(format!(
                    "this strategy's instances do not use {}",
                    target.as_str()
                ));
                return record;
            };
            let before = proxy.stats();
            let start = since_t0();
            if fault.kind == FaultKind::Partition {
                proxy.partition(lasts);
            } else {
                proxy.add_latency(fault.add.unwrap_or_default(), lasts);
            }
            tokio::time::sleep(lasts).await;
            record.window_ms = Some((start, since_t0()));
            let after = proxy.stats();
            // How the instances came back: the connections they opened
            // once the link healed.
            tokio::time::sleep(RECONNECT_WINDOW).await;
            let reconnected = proxy.stats().connections - after.connections;
            record.detail = Some(if fault.kind == FaultKind::Partition {
                format!(
                    "{} open connections dropped, {} new ones refused; {reconnected} connections \
                     opened in the {} s after it healed",
                    after.dropped - before.dropped,
                    after.refused - before.refused,
                    RECONNECT_WINDOW.as_secs()
                )
            } else {
                format!(
                    "{} new connections meanwhile",
                    after.connections - before.connections
                )
            });
        }
        FaultKind::PauseInstance => {
            let Some(pid) = cx.pool.pid_of(index) else {
                record.detail = Some(format!("instance {index} was down"));
                return record;
            };
            // A strategy whose path lacks the point is paused wherever it
            // is, as a pause without a point would be (and the record says so).
            let undeclared_point = fault
                .point
                .and_then(|point| undeclared(point, cx.crash_points));
            match fault.point.filter(|_| undeclared_point.is_none()) {
                Some(point) => {
                    // It stops itself when its path gets there.
                    if cx.pool.arm_stall(index, point) != Some(pid) {
                        record.detail = Some(format!("instance {index} was down"));
                        return record;
                    }
                    while !is_stopped(pid) && Instant::now() < cx.give_up_at {
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    if !is_stopped(pid) {
                        // Disarmed, and continued in case it stopped just now.
                        cx.pool.disarm(index);
                        let _ = signal::to_process(pid, Sig::Cont);
                        record.error = Some(format!(
                            "the point {point} was not reached before the arrivals ended"
                        ));
                        return record;
                    }
                }
                None => {
                    if let Err(e) = signal::to_process(pid, Sig::Stop) {
                        record.error = Some(e);
                        return record;
                    }
                }
            }
            let start = since_t0();
            tokio::time::sleep(fault.window()).await;
            // Whatever happens, the process must not stay stopped.
            let resumed = signal::to_process(pid, Sig::Cont);
            record.window_ms = Some((start, since_t0()));
            record.error = resumed.err();
            // The duplicate attempts it caused are counted once the run is
            // over, from every attempt's record (`count_duplicates`).
            record.detail = Some(format!(
                "pid {pid} stopped with SIGSTOP{}, resumed with SIGCONT{}",
                match fault.point {
                    Some(p) if undeclared_point.is_none() => format!(" at {p}"),
                    _ => String::new(),
                },
                undeclared_point
                    .map(|why| format!("; paused wherever it was, {why}"))
                    .unwrap_or_default()
            ));
        }
        FaultKind::KillDbConnections => {
            let at = since_t0();
            record.window_ms = Some((at, at));
            match cx.db.kill_sessions(&cx.session).await {
                Ok(n) => record.detail = Some(format!("{n} database sessions terminated")),
                Err(strategies::Error::Config(why)) => record.not_applicable(why),
                Err(e) => record.error = Some(e.to_string()),
            }
        }
        FaultKind::CrashAt => crash_at(&fault, &cx, &mut record).await,
    }
    record
}

/// Arms the crash point, waits for the process to die of it, restarts it,
/// and again, `times` times.
async fn crash_at(fault: &Fault, cx: &FaultContext, record: &mut FaultRecord) {
    let point = fault.point.expect("validated: crash-at has a point");
    let since_t0 = || cx.t0.elapsed().as_millis() as u64;
    if let Some(why) = undeclared(point, cx.crash_points) {
        record.not_applicable(why);
        return;
    }
    let index = fault.instance() as usize;
    let restart_after = fault.restart_after.unwrap_or(Duration::from_secs(1));
    let mut crashes = Vec::new();
    let start = since_t0();
    for _ in 0..fault.times {
        let Some(pid) = cx.pool.arm_crash(index, point) else {
            record.error = Some(format!("instance {index} was down when its crash was due"));
            break;
        };
        // The process dies the next time its path gets there.
        while cx.pool.pid_of(index) == Some(pid) && Instant::now() < cx.give_up_at {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if cx.pool.pid_of(index) == Some(pid) {
            cx.pool.disarm(index);
            record.error = Some(format!(
                "the point was not reached before the arrivals ended ({} of {} crashes)",
                crashes.len(),
                fault.times
            ));
            break;
        }
        crashes.push(format!("pid {pid} at {:.1} s", since_t0() as f64 / 1000.0));
        record.killed_pid.get_or_insert(pid);
        record.killed_at_ms.get_or_insert(since_t0());
        if cx.pool.restarts_dead() {
            // `restart-dead-instances` restarts it: wait for that process
            // rather than race it with a second one.
            let restarted = Instant::now() + restart_after + Duration::from_secs(60);
            while cx.pool.pid_of(index).is_none() && Instant::now() < restarted {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            continue;
        }
        tokio::time::sleep(restart_after).await;
        // Once the pool has noted the death.
        let noted = Instant::now() + Duration::from_secs(10);
        while cx.pool.is_running(index) && cx.pool.pid_of(index).is_none() && Instant::now() < noted
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if !cx.pool.is_running(index) {
            restart(&cx.pool, index, record, since_t0).await;
        }
    }
    // A crash that never happened did not act: no window, so no loss is
    // put down to it.
    if !crashes.is_empty() {
        record.window_ms = Some((start, since_t0()));
    }
    record.detail = Some(format!(
        "aborted {} of {} times at {point} ({}), each restarted {}",
        crashes.len(),
        fault.times,
        crashes.join(", "),
        if cx.pool.restarts_dead() {
            "by `restart-dead-instances`".to_string()
        } else {
            format!("{} later", humantime::format_duration(restart_after))
        }
    ));
}

/// Why `point` cannot be used, when the strategy's path does not have it.
fn undeclared(point: CrashPoint, declared: &[CrashPoint]) -> Option<String> {
    if declared.contains(&point) {
        return None;
    }
    let names: Vec<&str> = declared.iter().map(|p| p.as_str()).collect();
    Some(format!(
        "this strategy's path has no {point} point (it declares: {})",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    ))
}

/// Whether process `pid` is stopped (state `T` in `/proc/<pid>/stat`).
fn is_stopped(pid: u32) -> bool {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System};
    // The state is read with every refresh, however little it asks for.
    let pid = Pid::from_u32(pid);
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing(),
    );
    system
        .process(pid)
        .is_some_and(|p| p.status() == ProcessStatus::Stop)
}

async fn restart(pool: &Pool, index: usize, record: &mut FaultRecord, since_t0: impl Fn() -> u64) {
    match pool.restart(index).await {
        Ok(pid) => {
            record.restarted_pid = Some(pid);
            record.restarted_at_ms = Some(since_t0());
        }
        Err(e) => record.error = Some(format!("restart: {e:#}")),
    }
}

/// The last three lines a command printed, on one line.
pub(crate) fn tail(stderr: &[u8]) -> String {
    // It ends up in run.json and the report, which never hold a password.
    let said = strategies::redact::text(&String::from_utf8_lossy(stderr));
    let tail: Vec<&str> = said.lines().rev().take(3).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
}

#[cfg(test)]
mod tests {
    use strategies::InstanceRole::{Leader, Peer, Standby};

    #[test]
    fn an_instance_fault_misses_only_when_it_hits_a_standby() {
        let missed = |roles: &[Option<InstanceRole>], i| super::missed_leader(roles, i);
        let why = missed(&[Some(Standby), Some(Leader)], 0).unwrap();
        assert!(
            why.contains("instance 0 was a standby; instance 1 held the lead"),
            "{why}"
        );
        assert_eq!(missed(&[Some(Standby), Some(Leader)], 1), None);
        assert_eq!(missed(&[Some(Peer), Some(Peer)], 0), None);
        // A down instance has no role: the fault's own record says it was down.
        assert_eq!(missed(&[None, Some(Leader)], 0), None);
        let why = missed(&[Some(Standby), None], 0).unwrap();
        assert!(why.contains("no instance reported the lead"), "{why}");
    }

    use super::*;

    #[test]
    fn a_repeat_counts_only_inside_a_pause_and_its_settling() {
        let fault = Fault {
            kind: FaultKind::PauseInstance,
            at: Duration::from_secs(10),
            instance: Some(1),
            restart_after: None,
            command: vec![],
            target: None,
            node: None,
            lasts: Some(Duration::from_secs(3)),
            add: None,
            point: None,
            times: 1,
        };
        let mut records = vec![FaultRecord::planned(&fault)];
        records[0].window_ms = Some((10_000, 13_000));
        records[0].detail = Some("paused".into());
        let t0 = 1_000_000_000;
        let at = |ms: i64| t0 + ms * 1000;
        // Order 1: cancelled at 12 s, repeated at 13.1 s (counted). Order 2:
        // one attempt. Order 3: repeated at 20 s (outside). Order 4: two
        // absorbed attempts at 11 s and 14 s (the second counted).
        let cancels = [(1, at(12_000)), (2, at(12_500)), (3, at(5_000))];
        let absorbed = [
            (1, at(13_100)),
            (3, at(20_000)),
            (4, at(11_000)),
            (4, at(14_000)),
        ];
        count_duplicates(&mut records, &cancels, &absorbed, t0);
        assert_eq!(records[0].duplicates_absorbed, Some(2));
        assert!(records[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("2 repeated attempts"));
    }
}
