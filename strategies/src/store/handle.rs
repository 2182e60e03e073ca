//! The order store's handle: connecting, schema installation, and
//! counting what its owner does (the counters are in `stats`).

use super::location::{
    admin_version, identifier, unreachable, DbKind, DbLocation, CONNECT_TIMEOUT,
};
use super::probe::{self, ReadingSums, ServerReads};
use super::sql::{self, Sql};
use super::stats::{Counters, StoreStats};
use crate::domain::{CancelOutcome, Micros, OrderId};
use crate::error::{DbContext, Error, Result};
use serde::{Deserialize, Serialize};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, AssertSqlSafe, Executor, Row};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// MariaDB's stand-in for `application_name`: which labelled store opened
/// each connection (see [`OrderStore::connect_as`]).
const SESSIONS_DDL: &str = "CREATE TABLE IF NOT EXISTS dlb_sessions \
     (connection_id BIGINT PRIMARY KEY, label VARCHAR(64) NOT NULL)";

/// A connection pool on one namespace plus the statement counters of
/// whoever owns it. Cloning shares the pool and the counters.
#[derive(Clone)]
pub struct OrderStore {
    pub(super) pool: AnyPool,
    pub(super) location: DbLocation,
    pub(super) sql: Arc<Sql>,
    pub(super) counters: Arc<Counters>,
    pub(super) commit_log: Arc<CommitLog>,
    /// Which transactions read their own server-side row counts before
    /// COMMIT (see [`OrderStore::set_server_reads`]).
    pub(super) probe: Arc<ProbeCell>,
    /// `create_order` also writes the outbox row (see [`OrderStore::with_outbox`]).
    pub(super) writes_outbox: bool,
    /// `create_order` also sends `NOTIFY` with the deadline (see
    /// [`OrderStore::with_deadline_notify`]).
    pub(super) notifies_deadlines: bool,
}

/// When the COMMIT of each effective cancel returned, kept only for an
/// owner that asked ([`OrderStore::log_cancel_commits`]): a harness worker
/// ships them to the harness, which reports lateness at commit beside the
/// lateness stamped in the row.
#[derive(Debug, Default)]
pub(super) struct CommitLog {
    enabled: std::sync::atomic::AtomicBool,
    entries: std::sync::Mutex<Vec<(OrderId, Micros)>>,
    /// Attempts that changed nothing because the order was already decided
    /// (already cancelled, already paid) or never existed: with the
    /// cancels, every attempt on an order, so a second attempt by another
    /// process (a duplicate) can be counted.
    absorbed: std::sync::Mutex<Vec<(OrderId, Micros)>>,
}

impl CommitLog {
    /// Notes the committed outcomes' effective cancels, at the time this is
    /// called (right after COMMIT returned).
    pub(super) fn note(&self, outcomes: &[(OrderId, CancelOutcome)]) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let at = crate::now_us();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.extend(
            outcomes
                .iter()
                .filter(|(_, o)| *o == CancelOutcome::Cancelled)
                .map(|(id, _)| (*id, at)),
        );
        drop(entries);
        let mut absorbed = self.absorbed.lock().unwrap_or_else(|p| p.into_inner());
        absorbed.extend(
            outcomes
                .iter()
                .filter(|(_, o)| !matches!(o, CancelOutcome::Cancelled | CancelOutcome::NotDue))
                .map(|(id, _)| (*id, at)),
        );
    }
}

/// The server-reads probe a store and its clones share.
#[derive(Debug, Default)]
pub(super) struct ProbeCell {
    mode: std::sync::Mutex<ProbeMode>,
    /// The reading's statement, made at the first probe from the
    /// namespace's relations.
    pub(super) reading: tokio::sync::OnceCell<sqlx::SqlStr>,
}

#[derive(Debug, Default)]
pub(super) enum ProbeMode {
    #[default]
    Off,
    Every,
    Sampled(probe::Sampler),
}

impl std::fmt::Debug for OrderStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// The index db-scan's query reads (`SELECT id FROM orders WHERE status =
/// 'PENDING' AND expire_at_us <= ? ORDER BY expire_at_us LIMIT ?`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScanIndex {
    /// `(status, expire_at_us)`, created with the schema: the scan reads
    /// the due PENDING range and nothing else.
    #[default]
    StatusExpire,
    /// `(expire_at_us) WHERE status = 'PENDING'` instead: smaller, since
    /// it holds pending orders only (PostgreSQL and SQLite; MariaDB has no
    /// partial indexes).
    PartialPending,
    /// No index on status or deadline: every scan reads the whole table
    /// (the `db-scan-noindex` teaching variant).
    None,
}

impl OrderStore {
    /// Replaces the schema's `(status, expire_at_us)` index by `index`.
    /// Idempotent; other strategies keep the schema's index.
    pub async fn set_scan_index(&self, index: ScanIndex) -> Result<()> {
        let (drop, drop_partial) = match self.location.kind {
            DbKind::Mysql => ("DROP INDEX IF EXISTS orders_status_expire ON orders", ""),
            _ => (
                "DROP INDEX IF EXISTS orders_status_expire",
                "DROP INDEX IF EXISTS orders_pending_expire",
            ),
        };
        let statements: &[&str] = match index {
            ScanIndex::StatusExpire => &[],
            ScanIndex::None => &[drop, drop_partial],
            ScanIndex::PartialPending if self.location.kind == DbKind::Mysql => {
                return Err(Error::Config(
                    "strategies.db-scan.index = \"partial-pending\" needs partial indexes, which \
                     MariaDB does not have; accepted there: \"status-expire\" or \"none\""
                        .into(),
                ))
            }
            ScanIndex::PartialPending => &[
                drop,
                "CREATE INDEX IF NOT EXISTS orders_pending_expire ON orders (expire_at_us) \
                 WHERE status = 'PENDING'",
            ],
        };
        for sql in statements.iter().filter(|s| !s.is_empty()) {
            self.pool
                .execute(*sql)
                .await
                .ctx("changing the scan's index")?;
        }
        Ok(())
    }

    /// Connects a pool of at most `max_connections` to `location`.
    ///
    /// PostgreSQL connections select the namespace with `search_path`;
    /// MariaDB connections use READ COMMITTED (as PostgreSQL does) so a
    /// locking read sees the latest commit; SQLite uses WAL with a busy
    /// timeout so several processes can share the file.
    pub async fn connect(location: &DbLocation, max_connections: u32) -> Result<OrderStore> {
        Self::connect_as(location, max_connections, None).await
    }

    /// [`OrderStore::connect`], with every connection labelled `session`
    /// on the server, so [`OrderStore::kill_sessions`] can find them: the
    /// PostgreSQL `application_name`; on MariaDB, which has no such
    /// label, a row `(CONNECTION_ID(), session)` in `dlb_sessions`.
    /// `session` is an identifier (`[a-z0-9_]`, see [`identifier`]).
    pub async fn connect_as(
        location: &DbLocation,
        max_connections: u32,
        session: Option<&str>,
    ) -> Result<OrderStore> {
        sqlx::any::install_default_drivers();
        let label = session.map(|s| identifier(s).chars().take(63).collect::<String>());
        let init: Arc<Vec<String>> = Arc::new(match location.kind {
            DbKind::Postgres => {
                let mut init = vec![format!("SET search_path TO \"{}\"", location.namespace)];
                if let Some(label) = &label {
                    init.push(format!("SET application_name TO '{label}'"));
                }
                init
            }
            DbKind::Mysql => {
                let mut init =
                    vec!["SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".to_string()];
                if let Some(label) = &label {
                    init.push(SESSIONS_DDL.to_string());
                    init.push(format!(
                        "REPLACE INTO dlb_sessions (connection_id, label) VALUES (CONNECTION_ID(), '{label}')"
                    ));
                }
                init
            }
            DbKind::Sqlite => vec![
                "PRAGMA busy_timeout = 10000".to_string(),
                "PRAGMA journal_mode = WAL".to_string(),
                "PRAGMA synchronous = NORMAL".to_string(),
            ],
        });
        let pool = AnyPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(CONNECT_TIMEOUT)
            .after_connect(move |conn, _meta| {
                let init = Arc::clone(&init);
                Box::pin(async move {
                    // Built above from the namespace and label, both
                    // checked by `identifier` when the location was made.
                    for statement in init.iter() {
                        conn.execute(AssertSqlSafe(statement.as_str())).await?;
                    }
                    Ok(())
                })
            })
            .connect(&location.connect_url()?)
            .await
            .map_err(|e| unreachable(location.kind, &location.display_url(), &e))?;
        let skip_locked = match location.kind {
            DbKind::Postgres => true,
            DbKind::Mysql => mysql_has_skip_locked(&admin_version(&pool, location.kind).await?),
            DbKind::Sqlite => false,
        };
        Ok(OrderStore {
            pool,
            location: location.clone(),
            sql: Arc::new(Sql::new(location.kind, skip_locked)),
            counters: Arc::default(),
            commit_log: Arc::default(),
            probe: Arc::default(),
            writes_outbox: false,
            notifies_deadlines: false,
        })
    }

    /// Where this store is connected.
    pub fn location(&self) -> &DbLocation {
        &self.location
    }

    /// Makes PostgreSQL publish the row counts this store's connections
    /// have not yet published (they go out at most once a second, and up
    /// to 10 s late): each connection flushes at the end of this call's
    /// transaction. No-op elsewhere, and on PostgreSQL before 15.
    pub async fn flush_statistics(&self) {
        if self.location.kind != DbKind::Postgres {
            return;
        }
        for _ in 0..self.max_connections() {
            let _ = self.pool.execute("SELECT pg_stat_force_next_flush()").await;
        }
    }

    /// The most connections this store's pool opens.
    pub fn max_connections(&self) -> u32 {
        self.pool.options().get_max_connections()
    }

    /// Whether db-scan claims rows with `FOR UPDATE SKIP LOCKED` here.
    pub fn claims_with_skip_locked(&self) -> bool {
        self.sql.scan_due_skip_locked.is_some()
    }

    /// A snapshot of this store's counters.
    pub fn stats(&self) -> StoreStats {
        self.counters.snapshot()
    }

    /// From now on, note when the COMMIT of each cancel this store (or a
    /// clone) makes returned; [`OrderStore::take_cancel_commits`] drains them.
    pub fn log_cancel_commits(&self) {
        self.commit_log.enabled.store(true, Ordering::Relaxed);
    }

    /// From now on, every transaction of this store (and its clones) reads
    /// how many rows the server read inside it (exact: two extra round
    /// trips per transaction). Returns whether this database can tell
    /// (PostgreSQL). Harness runs sample instead ([`OrderStore::set_server_reads`]).
    pub fn measure_server_reads(&self) -> bool {
        self.set_server_reads(ServerReads::Every)
    }

    /// Sets which transactions of this store (and its clones) read their
    /// own server-side reads, apart from everyone else's on the same
    /// tables, and add them to `server_rows_read`; the readings are not
    /// counted in `statements`. Returns whether this database supports it
    /// (PostgreSQL's per-backend counters); elsewhere the probe stays off.
    pub fn set_server_reads(&self, reads: ServerReads) -> bool {
        let supported = self.location.kind == DbKind::Postgres;
        let mode = match reads {
            _ if !supported => ProbeMode::Off,
            ServerReads::Off => ProbeMode::Off,
            ServerReads::Every => ProbeMode::Every,
            ServerReads::Sampled { per_second } => {
                ProbeMode::Sampled(probe::Sampler::new(per_second, std::time::Instant::now()))
            }
        };
        *self.probe.mode.lock().unwrap_or_else(|p| p.into_inner()) = mode;
        supported && reads != ServerReads::Off
    }

    /// Whether the transaction starting now is read, and for how many
    /// transactions its reading stands.
    pub(super) fn probe_draw(&self) -> probe::Draw {
        match &*self.probe.mode.lock().unwrap_or_else(|p| p.into_inner()) {
            ProbeMode::Off => probe::Draw::Off,
            ProbeMode::Every => probe::Draw::Read { weight: 1 },
            ProbeMode::Sampled(sampler) => match sampler.decide(std::time::Instant::now()) {
                Some(weight) => probe::Draw::Read { weight },
                None => probe::Draw::Unread,
            },
        }
    }

    /// Adds one transaction's reading, standing for `weight` transactions.
    pub(super) fn count_probe(&self, weight: u64, rows: u64, spent: Duration) {
        self.count_reading_sums(&ReadingSums::reading(weight, rows));
        self.count(
            &self.counters.server_reads_probe_us,
            spent.as_micros() as u64,
        );
    }

    /// Counts a transaction the sampler passed over, once the probe could
    /// have read it: before the namespace's relations are known a reading
    /// gives nothing, so neither does the transaction it would have read.
    pub(super) fn count_unread(&self) {
        if self.probe.reading.initialized() {
            self.count_reading_sums(&ReadingSums::UNREAD);
        }
    }

    fn count_reading_sums(&self, sums: &ReadingSums) {
        let c = &self.counters;
        for (counter, n) in [
            (&c.server_reads_eligible, sums.eligible),
            (&c.server_reads_probes, sums.readings),
            (&c.server_reads_weight, sums.weight),
            (&c.server_rows_read, sums.weighted_rows),
            (&c.server_reads_spread_weight, sums.spread_weight),
            (&c.server_rows_read_spread, sums.spread_rows),
            (&c.server_rows_read_spread_squares, sums.spread_squares),
        ] {
            if n == 0 {
                continue;
            }
            // Squares of rows times k² can grow large: a sum that would
            // wrap stays at its ceiling instead (at most one reading a
            // second per store takes this path).
            let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_add(n))
            });
        }
    }

    /// The `(order id, when)` of every attempt noted since the last call
    /// that changed nothing but was not early (already cancelled, already
    /// paid, missing): with [`OrderStore::take_cancel_commits`], every
    /// decided attempt.
    pub fn take_absorbed_attempts(&self) -> Vec<(OrderId, Micros)> {
        drain(&self.commit_log.absorbed)
    }

    /// The `(order id, commit returned at)` pairs noted since the last call.
    pub fn take_cancel_commits(&self) -> Vec<(OrderId, Micros)> {
        drain(&self.commit_log.entries)
    }

    /// Creates the tables and index of the schema contract and fills `stock`
    /// with SKUs `1..=skus`, each holding `initial` units.
    pub async fn install_schema(&self, skus: u32, initial: i64) -> Result<()> {
        for ddl in &self.sql.schema {
            self.pool
                .execute(AssertSqlSafe(ddl.as_str()))
                .await
                .ctx("creating the schema")?;
        }
        let mut tx = self.pool.begin().await.ctx("filling stock")?;
        for sku in 1..=i64::from(skus) {
            sqlx::query(self.sql.insert_stock.clone())
                .bind(sku)
                .bind(initial)
                .bind(initial)
                .execute(&mut *tx)
                .await
                .ctx("filling stock")?;
        }
        tx.commit().await.ctx("filling stock")?;
        Ok(())
    }

    /// Terminates every server session labelled `session` (see
    /// [`OrderStore::connect_as`]) from this store's own connection, the
    /// way an operator or a failover does: `pg_terminate_backend` on
    /// PostgreSQL, `KILL CONNECTION` on MariaDB. Returns how many it ended.
    /// SQLite has no server sessions: an error that says so.
    pub async fn kill_sessions(&self, session: &str) -> Result<u64> {
        let label: String = identifier(session).chars().take(63).collect();
        match self.location.kind {
            DbKind::Postgres => {
                let rows = sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = $1 AND pid <> pg_backend_pid()",
                )
                .bind(&label)
                .fetch_all(&self.pool)
                .await
                .ctx("terminating sessions")?;
                Ok(rows
                    .iter()
                    .filter(|r| r.try_get::<bool, _>(0).unwrap_or(false))
                    .count() as u64)
            }
            DbKind::Mysql => {
                self.pool
                    .execute(SESSIONS_DDL)
                    .await
                    .ctx("reading labelled sessions")?;
                let ids: Vec<i64> = sqlx::query(
                    "SELECT CAST(s.connection_id AS SIGNED) FROM dlb_sessions s \
                     JOIN information_schema.PROCESSLIST p ON p.ID = s.connection_id \
                     WHERE s.label = ? AND p.ID <> CONNECTION_ID()",
                )
                .bind(&label)
                .fetch_all(&self.pool)
                .await
                .ctx("reading labelled sessions")?
                .iter()
                .filter_map(|r| r.try_get::<i64, _>(0).ok())
                .collect();
                let mut killed = 0;
                for id in ids {
                    // Gone meanwhile is fine: it ended by itself.
                    if self
                        .pool
                        .execute(AssertSqlSafe(format!("KILL CONNECTION {id}")))
                        .await
                        .is_ok()
                    {
                        killed += 1;
                    }
                }
                Ok(killed)
            }
            DbKind::Sqlite => Err(Error::Config(
                "kill-db-connections needs a database server; SQLite has no server sessions \
                 (run with --db postgres://... or mysql://...)"
                    .into(),
            )),
        }
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Runs a read-only query whose columns are all integers; the checker
    /// and tests use it. The SQL uses `?` placeholders for `binds`; its
    /// text is the caller's own (constants), never built from a value.
    pub async fn query_i64_rows(&self, sql: &str, binds: &[i64]) -> Result<Vec<Vec<i64>>> {
        let mut query = sqlx::query(sql::audited(sql::render(self.location.kind, sql)));
        for b in binds {
            query = query.bind(*b);
        }
        let rows = query
            .fetch_all(&self.pool)
            .await
            .ctx("reading for the checker")?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<i64, _>(i).ctx("decoding a checker row"))
                    .collect()
            })
            .collect()
    }

    /// [`OrderStore::query_i64_rows`] for a single-column result.
    pub async fn query_i64s(&self, sql: &str, binds: &[i64]) -> Result<Vec<i64>> {
        let rows = self.query_i64_rows(sql, binds).await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.first().copied())
            .collect())
    }

    /// Runs a read-only query returning `(text, i64)` rows (e.g. `GROUP BY status`).
    pub async fn query_text_counts(&self, sql: &str) -> Result<Vec<(String, i64)>> {
        let rows: Vec<AnyRow> = sqlx::query(sql::audited(sql::render(self.location.kind, sql)))
            .fetch_all(&self.pool)
            .await
            .ctx("reading for the checker")?;
        rows.iter()
            .map(|r| {
                let label: Option<String> = r.try_get(0).ctx("decoding a checker row")?;
                let count: i64 = r.try_get(1).ctx("decoding a checker row")?;
                Ok((label.unwrap_or_else(|| "NULL".into()), count))
            })
            .collect()
    }

    /// Executes `sql` as is, bypassing every rule of the domain. For tests
    /// that build broken states on purpose (and teaching variants), and the
    /// harness's own upkeep (an `ANALYZE TABLE` before reading sizes);
    /// never used by a correct strategy.
    pub async fn execute_unchecked(&self, sql: &str) -> Result<u64> {
        let done = self
            .pool
            .execute(AssertSqlSafe(sql))
            .await
            .ctx("executing unchecked SQL")?;
        Ok(done.rows_affected())
    }

    /// The database's plan for the db-scan query, one line per plan row, so
    /// tests can check that it uses the `(status, expire_at_us)` index.
    pub async fn explain_scan(&self) -> Result<String> {
        let (prefix, column) = match self.location.kind {
            DbKind::Postgres => ("EXPLAIN ", 0),
            DbKind::Mysql => ("EXPLAIN ", 5), // the `key` column
            DbKind::Sqlite => ("EXPLAIN QUERY PLAN ", 3),
        };
        let sql = sql::audited(format!("{prefix}{}", self.sql.scan_due.as_str()));
        let rows = sqlx::query(sql)
            .bind(crate::now_us())
            .bind(100_i64)
            .fetch_all(&self.pool)
            .await
            .ctx("explaining the scan")?;
        let mut plan = Vec::new();
        for row in &rows {
            let line: Option<String> = row.try_get(column).ctx("decoding the plan")?;
            plan.push(line.unwrap_or_default());
        }
        Ok(plan.join("\n"))
    }

    pub(super) fn count(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Takes what a log holds (a panic while it was held leaves it usable).
fn drain<T>(log: &std::sync::Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()))
}

/// MariaDB has `SKIP LOCKED` from 10.6, MySQL from 8.0.
fn mysql_has_skip_locked(version: &str) -> bool {
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    if version.contains("MariaDB") {
        (major, minor) >= (10, 6)
    } else {
        major >= 8
    }
}

#[cfg(test)]
mod tests {
    #[test]
    pub(super) fn skip_locked_versions() {
        assert!(super::mysql_has_skip_locked("10.11.19-MariaDB-0+deb12u1"));
        assert!(!super::mysql_has_skip_locked("10.5.2-MariaDB"));
        assert!(super::mysql_has_skip_locked("8.0.36"));
        assert!(!super::mysql_has_skip_locked("5.7.44"));
    }
}
