//! Every SQL statement the store issues, written once with `?` placeholders
//! and rendered per dialect (PostgreSQL wants `$1, $2, ...`; MariaDB quotes
//! the reserved word `by` with backticks; only SQLite lacks `FOR UPDATE`).

use super::location::DbKind;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};
use std::sync::Arc;

/// The outbox table, created with the schema.
const OUTBOX_DDL: &str = "CREATE TABLE outbox (order_id BIGINT PRIMARY KEY, \
     expire_at_us BIGINT NOT NULL, created_at_us BIGINT NOT NULL, \
     leased_until_us BIGINT NOT NULL)";

/// The INSERT the creating transaction adds.
const INSERT_OUTBOX: &str = "INSERT INTO outbox (order_id, expire_at_us, \
     created_at_us, leased_until_us) VALUES (?, ?, ?, 0)";

/// The rendered statements for one dialect. Built once per store.
#[derive(Debug)]
pub(crate) struct Sql {
    pub schema: Vec<String>,
    pub insert_stock: SqlStr,
    pub reserve_stock: SqlStr,
    pub insert_order: SqlStr,
    pub insert_move: SqlStr,
    pub insert_outbox: SqlStr,
    pub cancel_update: SqlStr,
    pub select_sku_qty: SqlStr,
    pub release_stock: SqlStr,
    pub select_status: SqlStr,
    pub pay_update: SqlStr,
    pub select_status_for_update: SqlStr,
    pub count_captures: SqlStr,
    pub insert_payment: SqlStr,
    /// The db-scan query; claims rows with `FOR UPDATE SKIP LOCKED` where the
    /// database has it (see [`Sql::scan_due_skip_locked`]).
    pub scan_due: SqlStr,
    pub scan_due_skip_locked: Option<SqlStr>,
    pub pending_orders: SqlStr,
    /// The PENDING orders of one share: `id % of = index`.
    pub pending_orders_of_share: SqlStr,
    /// db-timer's next wake: the earliest PENDING deadline after the
    /// claim's bound, one row off the `(status, expire_at_us)` index.
    /// Written as `ORDER BY ... LIMIT 1`, not `MIN(...)`: PostgreSQL's
    /// min/max rewrite is a plan choice, and a plan made while the table was
    /// small (kept by the prepared statement) aggregated every PENDING
    /// entry after the bound instead, about 300 rows read per call at the
    /// busy preset (auto_explain showed it).
    pub earliest_pending: SqlStr,
}

impl Sql {
    pub fn new(kind: DbKind, skip_locked: bool) -> Sql {
        let by = match kind {
            DbKind::Mysql => "`by`",
            _ => "\"by\"",
        };
        let r = |sql: &str| audited(render(kind, &sql.replace("{by}", by)));
        let scan = "SELECT id FROM orders WHERE status = 'PENDING' AND expire_at_us <= ? \
                    ORDER BY expire_at_us LIMIT ?";
        Sql {
            schema: schema(kind),
            insert_stock: r("INSERT INTO stock (sku, initial, available) VALUES (?, ?, ?)"),
            reserve_stock: r(
                "UPDATE stock SET available = available - ? WHERE sku = ? AND available >= ?",
            ),
            insert_order: r("INSERT INTO orders (id, sku, qty, status, created_at_us, expire_at_us) \
                 VALUES (?, ?, ?, 'PENDING', ?, ?)"),
            insert_move: r(
                "INSERT INTO stock_moves (order_id, kind, qty, at_us, {by}) VALUES (?, ?, ?, ?, ?)",
            ),
            insert_outbox: r(INSERT_OUTBOX),
            // The status and deadline test sits inside a CASE so that no
            // index but the primary key can serve it. Written plainly, a
            // generic plan PostgreSQL caches for this prepared statement
            // (planned while the table was small) could take the
            // (status, expire_at_us) index instead and read every overdue
            // PENDING order on each cancel: seen as 64 rows per cancel with
            // 64 orders left behind by a dead node.
            cancel_update: r("UPDATE orders SET status = 'CANCELLED', cancelled_at_us = ?, cancelled_by = ? \
                 WHERE id = ? AND CASE WHEN status = 'PENDING' AND expire_at_us <= ? THEN 1 END = 1"),
            select_sku_qty: r("SELECT sku, qty FROM orders WHERE id = ?"),
            release_stock: r("UPDATE stock SET available = available + ? WHERE sku = ?"),
            select_status: r("SELECT status FROM orders WHERE id = ?"),
            pay_update: r(
                "UPDATE orders SET status = 'PAID', paid_at_us = ? WHERE id = ? AND status = 'PENDING'",
            ),
            select_status_for_update: match kind {
                // SQLite serialises writers: the UPDATE before it already holds the write lock.
                DbKind::Sqlite => r("SELECT status FROM orders WHERE id = ?"),
                _ => r("SELECT status FROM orders WHERE id = ? FOR UPDATE"),
            },
            count_captures: r("SELECT COUNT(*) FROM payments WHERE callback_id = ? \
                 AND outcome IN ('APPLIED', 'REFUNDED')"),
            insert_payment: r(
                "INSERT INTO payments (order_id, callback_id, at_us, outcome, seen_cancelled_at_us) \
                 VALUES (?, ?, ?, ?, ?)",
            ),
            scan_due: r(scan),
            scan_due_skip_locked: (skip_locked && kind != DbKind::Sqlite)
                .then(|| r(&format!("{scan} FOR UPDATE SKIP LOCKED"))),
            pending_orders: r("SELECT id, expire_at_us FROM orders WHERE status = 'PENDING'"),
            pending_orders_of_share: r("SELECT id, expire_at_us FROM orders WHERE status = 'PENDING' \
                 AND id % ? = ?"),
            earliest_pending: r("SELECT expire_at_us, id FROM orders WHERE status = 'PENDING' \
                 AND expire_at_us > ? ORDER BY expire_at_us LIMIT 1"),
        }
    }
}

/// Marks SQL text as safe to send: sqlx 0.9 refuses dynamic SQL unless
/// asserted. Callers pass only text built from constant templates (the
/// dynamic parts being the dialect's placeholders and quoting), namespaces
/// checked by `identifier`, or integers; never a value from outside. Shared,
/// so each query clones a pointer, not the text.
pub(crate) fn audited(sql: String) -> SqlStr {
    AssertSqlSafe(Arc::<str>::from(sql)).into_sql_str()
}

/// Rewrites `?` placeholders to `$n` for PostgreSQL. The statements here
/// never contain a literal `?`, so a plain scan is enough.
pub(crate) fn render(kind: DbKind, sql: &str) -> String {
    if kind != DbKind::Postgres {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// The schema contract of DESIGN.md. `stock_moves` deliberately has no
/// unique constraint: duplicate releases must be countable, not prevented.
fn schema(kind: DbKind) -> Vec<String> {
    let (text, short, serial, by) = match kind {
        DbKind::Postgres => ("TEXT", "TEXT", "BIGSERIAL PRIMARY KEY", "\"by\""),
        // MariaDB's TEXT is a BLOB type; VARCHAR keeps it a string for every driver.
        DbKind::Mysql => (
            "VARCHAR(64)",
            "VARCHAR(16)",
            "BIGINT AUTO_INCREMENT PRIMARY KEY",
            "`by`",
        ),
        DbKind::Sqlite => (
            "TEXT",
            "TEXT",
            "INTEGER PRIMARY KEY AUTOINCREMENT",
            "\"by\"",
        ),
    };
    vec![
        format!(
            "CREATE TABLE orders (id BIGINT PRIMARY KEY, sku BIGINT NOT NULL, qty INT NOT NULL, \
             status {short} NOT NULL, created_at_us BIGINT NOT NULL, expire_at_us BIGINT NOT NULL, \
             paid_at_us BIGINT NULL, cancelled_at_us BIGINT NULL, cancelled_by {text} NULL)"
        ),
        "CREATE INDEX orders_status_expire ON orders (status, expire_at_us)".to_string(),
        "CREATE TABLE stock (sku BIGINT PRIMARY KEY, initial BIGINT NOT NULL, available BIGINT NOT NULL)"
            .to_string(),
        format!(
            "CREATE TABLE stock_moves (id {serial}, order_id BIGINT NOT NULL, kind {short} NOT NULL, \
             qty INT NOT NULL, at_us BIGINT NOT NULL, {by} {text} NOT NULL)"
        ),
        "CREATE INDEX stock_moves_order ON stock_moves (order_id)".to_string(),
        format!(
            "CREATE TABLE payments (id {serial}, order_id BIGINT NOT NULL, callback_id {text} NOT NULL, \
             at_us BIGINT NOT NULL, outcome {short} NOT NULL, seen_cancelled_at_us BIGINT NULL)"
        ),
        "CREATE INDEX payments_callback ON payments (callback_id)".to_string(),
        "CREATE INDEX payments_order ON payments (order_id)".to_string(),
        OUTBOX_DDL.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_placeholders_are_numbered() {
        assert_eq!(
            render(DbKind::Postgres, "UPDATE t SET a = ? WHERE b = ?"),
            "UPDATE t SET a = $1 WHERE b = $2"
        );
        assert_eq!(render(DbKind::Mysql, "a = ?"), "a = ?");
    }

    #[test]
    fn skip_locked_only_where_supported() {
        assert!(Sql::new(DbKind::Postgres, true)
            .scan_due_skip_locked
            .is_some());
        assert!(Sql::new(DbKind::Mysql, false)
            .scan_due_skip_locked
            .is_none());
        assert!(Sql::new(DbKind::Sqlite, true)
            .scan_due_skip_locked
            .is_none());
        assert!(Sql::new(DbKind::Mysql, true)
            .insert_move
            .as_str()
            .contains("`by`"));
    }
}
