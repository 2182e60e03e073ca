//! `[backlog]`: far-future PENDING orders that every strategy holds while
//! the scenario's load runs, and the restarts that show what holding them
//! costs when something goes down.
//!
//! - [`insert`]: the orders go into the database in multi-row INSERTs;
//! - [`hand_off`]: each goes to the instances through the strategy's own
//!   `schedule`, pipelined as orders are ([`SCHEDULES_IN_FLIGHT`](crate::instance::protocol::SCHEDULES_IN_FLIGHT)
//!   per worker), until a barrier says every one returned;
//! - [`holdings`]: what Redis, the broker and the worker processes hold;
//! - [`recover`]: after the measured run was checked, every instance is
//!   started afresh, then each service the strategy uses is restarted with
//!   the scenario's command, planned (Redis saved first, the broker's
//!   `stop_app`), then unplanned (SIGKILL, nothing saved) where the
//!   scenario has a kill command; each time the clock runs until the
//!   strategy holds its backlog again and a fresh, already-due probe order
//!   is cancelled. A service's restart also has a few probe orders in
//!   flight through it (scheduled just before, due just after): one never
//!   cancelled was lost with the schedule, and one cancelled only by the
//!   fallback scan was rescued, late. Probes are created after the checker
//!   ran, in their own id range, so they never touch the run's figures.

use crate::instance::{Pool, WorkerSpec};
use crate::model::records::{Holdings, InFlight, Recovery, RestartKind};
use crate::scenario::Backlog;
use anyhow::{Context, Result};
use std::time::Duration;
use strategies::{now_us, Capabilities, Micros, NewOrder, OrderId, OrderStore, Service};
use tokio::time::Instant;

/// Backlog orders take ids from here up (the plan's start at 1).
pub const BACKLOG_FIRST_ID: OrderId = 1 << 36;
/// Recovery probes take ids from here up, above any backlog or storm.
pub const PROBE_FIRST_ID: OrderId = 1 << 38;
/// A new probe this often while none has been cancelled.
const PROBE_EVERY: Duration = Duration::from_millis(500);
/// Probe orders in flight through a service's restart, each due this long
/// after it was scheduled (a strategy without per-message delays: after
/// its shortest one): still waiting in the strategy when the restart
/// command starts, due soon after, during the outage of a slow restart.
const IN_FLIGHT: u64 = 5;
const IN_FLIGHT_DUE: Duration = Duration::from_millis(1500);
/// How long a killed service may take to serve again before the recovery
/// says it did not come back.
const BACK_UP_LIMIT: Duration = Duration::from_secs(120);

/// Inserts `n` PENDING orders with ids from `first`, all due `after` from
/// now (a backlog from [`BACKLOG_FIRST_ID`], a storm from
/// [`STORM_FIRST_ID`](crate::storm::STORM_FIRST_ID)); returns their
/// deadline and the seconds it took.
pub async fn insert(
    store: &OrderStore,
    first: OrderId,
    n: u64,
    after: Duration,
    skus: u32,
) -> Result<(Micros, f64)> {
    let started = Instant::now();
    let created = now_us();
    let expire = created + after.as_micros() as Micros;
    store
        .preload_pending(first, n, created, expire, skus)
        .await
        .with_context(|| format!("preloading {n} pending orders from id {first}"))?;
    Ok((expire, started.elapsed().as_secs_f64()))
}

/// Schedules the `n` orders from `first` on the pool and waits until each
/// instance returned from all of them; the seconds it took.
pub async fn hand_off(pool: &Pool, first: OrderId, n: u64, expire_at_us: Micros) -> f64 {
    let started = Instant::now();
    for k in 0..n {
        pool.schedule(first + k as OrderId, expire_at_us, now_us());
    }
    pool.barrier().await;
    started.elapsed().as_secs_f64()
}

/// Where a strategy keeps its schedule, for [`holdings`].
#[derive(Debug, Clone)]
pub struct Backends {
    pub redis_url: Option<String>,
    /// The strategy's broker (its AMQP URL, or a cluster's list).
    pub amqp_url: Option<String>,
    /// The namespace's resource prefix (keys, queue names).
    pub prefix: String,
}

impl Backends {
    pub fn of(
        capabilities: &Capabilities,
        redis_url: &str,
        amqp_url: &str,
        prefix: String,
    ) -> Backends {
        Backends {
            redis_url: capabilities
                .requires
                .contains(&Service::Redis)
                .then(|| redis_url.to_string()),
            amqp_url: capabilities
                .requires
                .contains(&Service::RabbitMq)
                .then(|| amqp_url.to_string()),
            prefix,
        }
    }
}

/// What the backends, the database and the pool's processes hold now.
pub async fn holdings(backends: &Backends, pool: &Pool, store: &OrderStore) -> Holdings {
    let mut held = Holdings {
        worker_rss_kib: rss_kib(&pool.pids()),
        ..Holdings::default()
    };
    match database_bytes(store).await {
        Ok(bytes) => held.database_bytes = bytes,
        Err(e) => held.notes.push(format!("database size not read: {e:#}")),
    }
    if let Some(url) = &backends.redis_url {
        match redis_holdings(url, &backends.prefix).await {
            Ok((memory, members)) => {
                held.redis_used_memory = Some(memory);
                held.redis_members = Some(members);
            }
            Err(e) => held.notes.push(format!("Redis not read: {e:#}")),
        }
    }
    if let Some(url) = &backends.amqp_url {
        match strategies::leftovers::broker_holdings(url, &backends.prefix).await {
            Ok(broker) => {
                held.queued_messages = Some(broker.queued);
                held.delayed_stored = broker.delayed;
                held.broker_memory = Some(broker.memory);
                held.notes.extend(
                    broker
                        .notes
                        .into_iter()
                        .map(|n| format!("RabbitMQ ({}): {n}", broker.source)),
                );
            }
            Err(e) => held.notes.push(format!("RabbitMQ not read: {e:#}")),
        }
    }
    held
}

/// The namespace's tables with their indexes, in bytes: on PostgreSQL
/// `pg_total_relation_size` (heap, indexes, TOAST) of every table of the
/// schema; on MariaDB InnoDB's `data_length + index_length` after `ANALYZE
/// TABLE` (whole pages, an estimate the server keeps); on SQLite the
/// file's pages. `None` where the kind has no such reading.
async fn database_bytes(store: &OrderStore) -> Result<Option<u64>> {
    let sql = match store.location().kind {
        strategies::DbKind::Postgres => {
            "SELECT CAST(COALESCE(SUM(pg_total_relation_size(c.oid)), 0) AS BIGINT) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        }
        strategies::DbKind::Mysql => {
            let tables = store
                .query_text_counts(
                    "SELECT table_name, COUNT(*) FROM information_schema.tables \
                     WHERE table_schema = DATABASE() AND engine = 'InnoDB' GROUP BY table_name",
                )
                .await?;
            if !tables.is_empty() {
                let names: Vec<String> = tables.iter().map(|(t, _)| format!("`{t}`")).collect();
                store
                    .execute_unchecked(&format!("ANALYZE TABLE {}", names.join(", ")))
                    .await?;
            }
            "SELECT CAST(COALESCE(SUM(data_length + index_length), 0) AS SIGNED) \
             FROM information_schema.tables WHERE table_schema = DATABASE()"
        }
        strategies::DbKind::Sqlite => {
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
        }
    };
    let bytes = store.query_i64s(sql, &[]).await?;
    Ok(bytes.first().map(|b| (*b).max(0) as u64))
}

/// `used_memory`, and the members of the strategy's ZSETs. On a cluster,
/// the sums over every master (an error while one is down).
async fn redis_holdings(url: &str, prefix: &str) -> Result<(u64, u64)> {
    if strategies::redis_cluster::is_cluster(url) {
        let (mut memory, mut members) = (0, 0);
        for master in strategies::redis_cluster::masters(url).await? {
            let (m, n) = node_holdings(&master.url, prefix)
                .await
                .with_context(|| format!("cluster node {}", master.addr))?;
            memory += m;
            members += n;
        }
        return Ok((memory, members));
    }
    node_holdings(url, prefix).await
}

/// [`redis_holdings`] of one server.
async fn node_holdings(url: &str, prefix: &str) -> Result<(u64, u64)> {
    let client = strategies::tls::redis_client(url)
        .map_err(anyhow::Error::msg)
        .context("Redis URL")?;
    let mut conn = tokio::time::timeout(
        Duration::from_secs(10),
        client.get_multiplexed_async_connection(),
    )
    .await
    .context("connecting to Redis")??;
    let info: redis::InfoDict = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await?;
    let memory: u64 = info
        .get("used_memory")
        .context("INFO memory has no used_memory")?;
    let pattern = format!("dlb:{{{prefix}:*");
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut members = 0;
    for key in keys
        .iter()
        .filter(|k| k.ends_with(":delay") || k.ends_with(":processing"))
    {
        let n: u64 = redis::cmd("ZCARD").arg(key).query_async(&mut conn).await?;
        members += n;
    }
    Ok((memory, members))
}

/// Resident memory in KiB of each of `pids` still running, in order (on
/// Linux the same figure as `VmRSS`), read through `sysinfo`; none where it
/// does not support the system.
fn rss_kib(pids: &[u32]) -> Vec<u64> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
    let wanted: Vec<Pid> = pids.iter().map(|p| Pid::from_u32(*p)).collect();
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&wanted),
        true,
        ProcessRefreshKind::nothing().with_memory().without_tasks(),
    );
    wanted
        .iter()
        .filter_map(|pid| system.process(*pid))
        .map(|p| p.memory() / 1024)
        .collect()
}

/// What [`recover`] needs of the run.
pub struct RecoveryInput<'a> {
    pub specs: Vec<WorkerSpec>,
    pub backlog: &'a Backlog,
    pub pending: u64,
    pub store: &'a OrderStore,
    pub backends: &'a Backends,
    /// What the backends held before the restarts, to tell a lost backlog.
    pub before: &'a Holdings,
    /// The least time a due probe still waits in the strategy (rabbit-ttl:
    /// its shortest TTL queue), which every recovery time then includes.
    pub probe_wait: Option<Duration>,
}

/// What the instances' restart did, for the recovery table: only a
/// strategy that reloads the pending orders on start is said to.
fn instances_restart_how(specs: &[WorkerSpec]) -> String {
    let reloads = specs
        .first()
        .filter(|spec| spec.strategy.info.reloads_pending_on_start)
        .map(|spec| {
            if spec.options.timing_wheel.reload_all {
                " (each reloads every PENDING order from the database)"
            } else {
                " (each reloads its share of the PENDING orders from the database, id modulo the instances)"
            }
        });
    format!(
        "{} instance(s) stopped, then started afresh{}",
        specs.len(),
        reloads.unwrap_or("")
    )
}

/// Every instance started afresh, then each service the strategy uses
/// restarted with the scenario's command, in turn, planned then unplanned;
/// each timed until the strategy is cancelling again with its backlog in
/// place.
pub async fn recover(input: RecoveryInput<'_>) -> Result<Vec<Recovery>> {
    let mut recoveries = Vec::new();
    let mut probe_ids = PROBE_FIRST_ID..;
    let started = Instant::now();
    let pool = Pool::spawn(input.specs.clone(), None).await?;
    let restart_s = started.elapsed().as_secs_f64();
    let mut first = Recovery {
        what: "instances".into(),
        how: instances_restart_how(&input.specs),
        restart_s,
        ..Recovery::default()
    };
    until_cancelling(&pool, &input, started, &mut probe_ids, &[], &mut first).await?;
    recoveries.push(first);
    let redis = input.backends.redis_url.is_some();
    let rabbitmq = input.backends.amqp_url.is_some();
    let b = input.backlog;
    let restarts = [
        ("redis", RestartKind::Planned, redis, &b.restart_redis),
        (
            "redis-sigkill",
            RestartKind::Unplanned,
            redis,
            &b.kill_redis,
        ),
        (
            "rabbitmq",
            RestartKind::Planned,
            rabbitmq,
            &b.restart_rabbitmq,
        ),
        (
            "rabbitmq-sigkill",
            RestartKind::Unplanned,
            rabbitmq,
            &b.kill_rabbitmq,
        ),
    ];
    for (what, kind, used, command) in restarts {
        if !used {
            continue;
        }
        let mut recovery = Recovery {
            what: what.into(),
            kind,
            how: command_text(command),
            ..Recovery::default()
        };
        if command.is_empty() {
            // A scenario without an unplanned restart has none to report.
            if kind == RestartKind::Planned {
                recovery.notes.push(format!(
                    "not restarted: the scenario's `backlog.restart-{what}` is empty"
                ));
                recoveries.push(recovery);
            }
            continue;
        }
        // A strategy without per-message delays (rabbit-ttl) is handed
        // orders due at one of its delays, as every order it takes: one
        // due in between would wait in the next longer queue.
        let due = input.probe_wait.unwrap_or(IN_FLIGHT_DUE);
        let in_flight = put_in_flight(&pool, input.store, &mut probe_ids, due).await;
        let started = Instant::now();
        let status = tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .status()
            .await;
        recovery.restart_s = started.elapsed().as_secs_f64();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => recovery
                .notes
                .push(format!("the restart command exited {s}")),
            Err(e) => recovery
                .notes
                .push(format!("the restart command did not run: {e}")),
        }
        if kind == RestartKind::Unplanned && !back_up(input.backends, what).await {
            let service = what.trim_end_matches("-sigkill");
            tracing::error!(
                "{service} did not serve again within {} s of its kill command; \
                 start it again (scripts/services.sh {service})",
                BACK_UP_LIMIT.as_secs()
            );
            recovery.notes.push(format!(
                "{service} did not serve again within {} s of the command",
                BACK_UP_LIMIT.as_secs()
            ));
        }
        until_cancelling(
            &pool,
            &input,
            started,
            &mut probe_ids,
            &in_flight,
            &mut recovery,
        )
        .await?;
        if let Some(f) = recovery.in_flight.as_mut() {
            f.due_after_ms = due.as_millis() as u64;
        }
        recoveries.push(recovery);
    }
    pool.stop().await?;
    Ok(recoveries)
}

/// A restart command on one line, for the record: its words, a script's
/// lines joined by `; `.
fn command_text(command: &[String]) -> String {
    command
        .iter()
        .map(|word| {
            word.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// [`IN_FLIGHT`] probe orders scheduled on `pool` (each returned, or a
/// few seconds passed), due `due` after: their ids and deadlines. A probe
/// the database refused is left out.
async fn put_in_flight(
    pool: &Pool,
    store: &OrderStore,
    probe_ids: &mut std::ops::RangeFrom<OrderId>,
    due: Duration,
) -> Vec<(OrderId, Micros)> {
    let mut orders = Vec::new();
    for _ in 0..IN_FLIGHT {
        let id = probe_ids.next().expect("unbounded");
        let created = now_us();
        let order = NewOrder {
            id,
            sku: 1,
            qty: 1,
            created_at_us: created,
            expire_at_us: created + due.as_micros() as Micros,
        };
        if store.create_order(&order).await.is_ok() {
            pool.schedule(id, order.expire_at_us, now_us());
            orders.push((id, order.expire_at_us));
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), pool.barrier()).await;
    orders
}

/// Whether the killed service (`what`) serves again, waited for up to
/// [`BACK_UP_LIMIT`]: Redis answers, the broker's holdings read (`rabbitmqctl` or
/// its management API).
async fn back_up(backends: &Backends, what: &str) -> bool {
    let limit = Instant::now() + BACK_UP_LIMIT;
    while Instant::now() < limit {
        let up = match what {
            "redis-sigkill" => match &backends.redis_url {
                Some(url) => redis_holdings(url, &backends.prefix).await.is_ok(),
                None => true,
            },
            _ => match &backends.amqp_url {
                Some(url) => strategies::leftovers::broker_holdings(url, &backends.prefix)
                    .await
                    .is_ok(),
                None => true,
            },
        };
        if up {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    false
}

/// Waits until the pool holds the backlog again (a wheel's `reloaded`
/// counter, set once its reload is done, reached each instance's part of
/// it on every instance: its share, or all of it with `reload-all`), a
/// probe was cancelled, and every order `in_flight` through the restart
/// was cancelled too; fills `recovery`'s probes, time and holdings.
async fn until_cancelling(
    pool: &Pool,
    input: &RecoveryInput<'_>,
    started: Instant,
    probe_ids: &mut std::ops::RangeFrom<OrderId>,
    in_flight: &[(OrderId, Micros)],
    recovery: &mut Recovery,
) -> Result<()> {
    let limit = started + input.backlog.recovery_limit;
    let mut probes: Vec<OrderId> = Vec::new();
    let mut next_probe = Instant::now();
    let mut reloaded_at = None;
    let mut cancelled_at = None;
    let mut in_flight_done_at = in_flight.is_empty().then(Instant::now);
    let mut next_in_flight_check = Instant::now();
    // The backlog's ids are consecutive, so each share holds at least
    // pending / instances of them.
    let each_reloads = match input
        .specs
        .first()
        .and_then(|spec| spec.instance_options().timing_wheel.reload_share())
    {
        Some(share) => input.pending / u64::from(share.of),
        None => input.pending,
    };
    while Instant::now() < limit
        && (reloaded_at.is_none() || cancelled_at.is_none() || in_flight_done_at.is_none())
    {
        if reloaded_at.is_none() {
            // A barrier makes every instance flush its counters now (not
            // waited for past a second: a schedule may hang on a service
            // that is still down).
            let _ = tokio::time::timeout(Duration::from_secs(1), pool.barrier()).await;
            let holds = (0..pool.len()).all(|i| {
                pool.counters_of(i)
                    .is_none_or(|c| c.get("reloaded").is_none_or(|r| *r >= each_reloads))
            });
            if holds {
                reloaded_at = Some(Instant::now());
            }
        }
        if cancelled_at.is_none() && Instant::now() >= next_probe {
            let id = probe_ids.next().expect("unbounded");
            let created = now_us();
            let order = NewOrder {
                id,
                sku: 1,
                qty: 1,
                created_at_us: created,
                expire_at_us: created + 1,
            };
            // The database may be what restarted: a failed create is retried
            // with the next probe.
            if input.store.create_order(&order).await.is_ok() {
                pool.schedule(id, order.expire_at_us, now_us());
                probes.push(id);
            }
            next_probe = Instant::now() + PROBE_EVERY;
        }
        if cancelled_at.is_none() && cancelled(input.store, &probes).await > 0 {
            cancelled_at = Some(Instant::now());
        }
        if in_flight_done_at.is_none() && Instant::now() >= next_in_flight_check {
            if cancelled_among(input.store, in_flight).await >= in_flight.len() as u64 {
                in_flight_done_at = Some(Instant::now());
            }
            next_in_flight_check = Instant::now() + Duration::from_millis(100);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Probes still in flight get a moment before the count.
    tokio::time::sleep(Duration::from_secs(1)).await;
    recovery.probes = probes.len() as u64;
    recovery.probes_cancelled = cancelled(input.store, &probes).await;
    if !in_flight.is_empty() {
        recovery.in_flight = Some(in_flight_record(input.store, in_flight, started).await);
    }
    let limit_s = input.backlog.recovery_limit.as_secs_f64();
    // The orders in flight count by their lateness: each was due after the
    // restart's start, and an on-time cancel says nothing of the restart.
    let in_flight_late_s = recovery
        .in_flight
        .as_ref()
        .and_then(|f| f.max_late_ms)
        .map_or(0.0, |ms| ms.max(0.0) / 1000.0);
    recovery.cancelling_again_s = match (reloaded_at, cancelled_at, in_flight_done_at) {
        (Some(r), Some(c), Some(_)) => Some(
            r.max(c)
                .duration_since(started)
                .as_secs_f64()
                .max(in_flight_late_s),
        ),
        _ => {
            recovery.notes.push(format!(
                "not cancelling again within {limit_s:.0} s ({})",
                match (reloaded_at, cancelled_at) {
                    (None, _) => "the backlog was not reloaded",
                    (_, None) => "no probe was cancelled",
                    _ => "an order in flight through the restart was never cancelled",
                }
            ));
            None
        }
    };
    if let Some(loss) = recovery.loss_text() {
        recovery.notes.push(loss);
    }
    if let Some(wait) = input.probe_wait {
        recovery.notes.push(format!(
            "includes the probe's {} in the shortest TTL queue (no per-message delay)",
            humantime::format_duration(wait)
        ));
    }
    if recovery.probes_cancelled < recovery.probes {
        recovery.notes.push(format!(
            "{} of {} probe orders not cancelled (their schedule was lost or is late)",
            recovery.probes - recovery.probes_cancelled,
            recovery.probes
        ));
    }
    recovery.held_after = holdings(input.backends, pool, input.store).await;
    let counts = |h: &Holdings| {
        [
            ("Redis ZSET members", h.redis_members),
            ("queued messages", h.queued_messages),
            ("stored delayed messages", h.delayed_stored),
        ]
    };
    for ((what, before), (_, after)) in counts(input.before)
        .into_iter()
        .zip(counts(&recovery.held_after))
    {
        if let (Some(before), Some(after)) = (before, after) {
            if after < before.min(input.pending) {
                recovery.notes.push(format!(
                    "backlog lost: {what} {before} before the restart, {after} after; the lost \
                     orders wait for a fallback scan"
                ));
            }
        }
    }
    Ok(())
}

/// How many of the orders `in_flight` are CANCELLED (0 while the
/// database cannot say).
async fn cancelled_among(store: &OrderStore, in_flight: &[(OrderId, Micros)]) -> u64 {
    let (Some((first, _)), Some((last, _))) = (in_flight.first(), in_flight.last()) else {
        return 0;
    };
    store
        .query_i64s(
            "SELECT COUNT(*) FROM orders WHERE id >= ? AND id <= ? AND status = 'CANCELLED'",
            &[*first, *last],
        )
        .await
        .ok()
        .and_then(|n| n.first().copied())
        .unwrap_or(0)
        .max(0) as u64
}

/// What became of the orders in flight through a restart, read from the
/// orders table: cancelled, by whom, how late.
async fn in_flight_record(
    store: &OrderStore,
    in_flight: &[(OrderId, Micros)],
    started: Instant,
) -> InFlight {
    let mut record = InFlight {
        orders: in_flight.len() as u64,
        watched_s: started.elapsed().as_secs_f64(),
        ..InFlight::default()
    };
    for (id, _) in in_flight {
        let Ok(Some(row)) = store.order(*id).await else {
            continue;
        };
        let Some(at) = row.cancelled_at_us else {
            continue;
        };
        record.cancelled += 1;
        if row.cancelled_by.as_deref() == Some(strategies::db_scan::FALLBACK_BY) {
            record.by_fallback += 1;
        }
        let late_ms = (at - row.expire_at_us) as f64 / 1000.0;
        record.max_late_ms = Some(record.max_late_ms.map_or(late_ms, |m: f64| m.max(late_ms)));
    }
    record
}

/// How many of `ids` are CANCELLED (0 while the database cannot say).
async fn cancelled(store: &OrderStore, ids: &[OrderId]) -> u64 {
    let Some(first) = ids.first() else {
        return 0;
    };
    store
        .query_i64s(
            "SELECT COUNT(*) FROM orders WHERE id >= ? AND status = 'CANCELLED'",
            &[*first],
        )
        .await
        .ok()
        .and_then(|n| n.first().copied())
        .unwrap_or(0)
        .max(0) as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn rss_of_live_processes_only_in_kib() {
        if !sysinfo::IS_SUPPORTED_SYSTEM {
            return;
        }
        // u32::MAX is no process's pid.
        let rss = super::rss_kib(&[std::process::id(), u32::MAX]);
        assert_eq!(rss.len(), 1, "{rss:?}");
        assert!(rss[0] > 1024, "{rss:?}");
        // Linux's own figure agrees (the test's threads may move it a little).
        if let Some(vm_rss) = crate::resources::own_status_kib("VmRSS") {
            assert!(
                rss[0].abs_diff(vm_rss) <= vm_rss / 5,
                "{} KiB vs VmRSS {vm_rss} KiB",
                rss[0]
            );
        }
    }
}
