//! Rows the database server itself read, from its own statistics: the
//! server-side half of what a strategy cost the database (the app-side half
//! is the statements the canceller counted).
//!
//! - PostgreSQL: `seq_tup_read + idx_tup_fetch` of `pg_stat_user_tables` for
//!   the strategy's own schema, so nothing else on the server counts.
//!   Backends publish their counts when they go idle or exit, so a reading
//!   is repeated until it stops moving.
//! - MariaDB: the sum of `Handler_read_*` (`information_schema.GLOBAL_STATUS`),
//!   which is server-wide: another client of the same server inflates it.
//! - SQLite has no server; the figure is absent.

use anyhow::{Context, Result};
use std::time::Duration;
use strategies::{DbKind, OrderStore};

const PG_ROWS_READ: &str =
    "SELECT CAST(COALESCE(SUM(seq_tup_read + COALESCE(idx_tup_fetch, 0)), 0) AS BIGINT) \
     FROM pg_stat_user_tables WHERE schemaname = current_schema()";
const MARIADB_ROWS_READ: &str = "SELECT CAST(COALESCE(SUM(VARIABLE_VALUE), 0) AS SIGNED) \
     FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME LIKE 'HANDLER_READ%'";

/// Rows read so far, or `None` on SQLite.
pub async fn rows_read(store: &OrderStore) -> Result<Option<u64>> {
    let sql = match store.location().kind {
        DbKind::Postgres => PG_ROWS_READ,
        DbKind::Mysql => MARIADB_ROWS_READ,
        DbKind::Sqlite => return Ok(None),
    };
    let read = || async {
        let v = store
            .query_i64s(sql, &[])
            .await
            .context("reading the database's row statistics")?;
        Ok::<u64, anyhow::Error>(v.first().copied().unwrap_or(0).max(0) as u64)
    };
    if store.location().kind == DbKind::Mysql {
        return Ok(Some(read().await?));
    }
    // PostgreSQL: wait (up to ~3 s) until exiting and idle backends have
    // published their counts.
    let mut last = read().await?;
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = read().await?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(Some(last))
}
