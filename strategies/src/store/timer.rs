//! What `db-timer` needs from the store: the earliest PENDING deadline
//! (read with the claim, see [`OrderStore::scan_and_cancel_due_then_peek`]),
//! and on PostgreSQL a `NOTIFY` carrying each new order's deadline, sent
//! inside the order's creating transaction so it is delivered only if the
//! order committed, plus the `LISTEN`ing connection that receives it.

use super::handle::OrderStore;
use super::location::DbKind;
use crate::domain::{Micros, OrderId};
use crate::error::{DbContext, Error, Result};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{AnyConnection, Row};
use std::str::FromStr;

/// PostgreSQL truncates identifiers (channel and application names) to 63 bytes.
const PG_NAME_MAX: usize = 63;

impl OrderStore {
    /// From now on, [`OrderStore::create_order`] on this handle (and its
    /// clones made after this call) also sends `NOTIFY` on
    /// [`OrderStore::deadline_channel`] with the order's deadline as
    /// payload, in the creating transaction (PostgreSQL delivers it at
    /// COMMIT, and never for a rolled-back order). No-op on MariaDB and
    /// SQLite, which have no notifications: db-timer polls there.
    pub fn with_deadline_notify(mut self) -> OrderStore {
        self.notifies_deadlines = self.location.kind == DbKind::Postgres;
        self
    }

    /// Whether `create_order` sends deadline notifications (see
    /// [`OrderStore::with_deadline_notify`]).
    pub fn notifies_deadlines(&self) -> bool {
        self.notifies_deadlines
    }

    /// The channel deadline notifications go to: the namespace's resource
    /// prefix, so runs and tests sharing a server do not wake each other.
    pub fn deadline_channel(&self) -> String {
        let mut channel = format!("dlb_{}", self.location.resource_prefix());
        channel.truncate(PG_NAME_MAX);
        channel
    }

    /// Sends the deadline notification inside the creating transaction.
    /// `pg_notify` returns `void`, which the `Any` driver cannot decode, so
    /// it is called in `FROM` and counted.
    pub(super) async fn notify_deadline(
        &self,
        conn: &mut AnyConnection,
        expire_at_us: Micros,
    ) -> Result<()> {
        self.count(&self.counters.statements, 1);
        sqlx::query("SELECT COUNT(*) FROM pg_notify($1, $2)")
            .bind(self.deadline_channel())
            .bind(expire_at_us.to_string())
            .execute(&mut *conn)
            .await
            .ctx("notifying the order's deadline")?;
        Ok(())
    }

    /// The earliest PENDING order due after `after_us` as `conn` sees it,
    /// as `(deadline, id)`, or `None`.
    pub(super) async fn earliest_pending_in(
        &self,
        conn: &mut AnyConnection,
        after_us: Micros,
    ) -> Result<Option<(Micros, OrderId)>> {
        self.count(&self.counters.statements, 1);
        self.count(&self.counters.rows_read, 1);
        let row = sqlx::query(self.sql.earliest_pending.clone())
            .bind(after_us)
            .fetch_optional(&mut *conn)
            .await
            .ctx("reading the next deadline")?;
        row.map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .transpose()
            .ctx("reading the next deadline")
    }

    /// Tries to take the namespace's timer lead: a session advisory lock,
    /// keyed by [`OrderStore::deadline_channel`], on the `listener`'s own
    /// connection. Held until released or until that session ends (a lost
    /// connection, a killed backend, a dead process), so the lead can never
    /// outlive the listening it depends on. Reads no rows.
    pub async fn try_take_timer_lead(&self, listener: &mut PgListener) -> Result<bool> {
        self.count(&self.counters.statements, 1);
        sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
            .bind(self.timer_lead_key())
            .fetch_one(&mut *listener)
            .await
            .ctx("taking the timer lead")
    }

    /// Gives the lead back (before a clean stop, so a standby takes over at
    /// its next try instead of when the session is reaped).
    pub async fn release_timer_lead(&self, listener: &mut PgListener) -> Result<()> {
        self.count(&self.counters.statements, 1);
        sqlx::query_scalar::<_, bool>("SELECT pg_advisory_unlock(hashtextextended($1, 0))")
            .bind(self.timer_lead_key())
            .fetch_one(&mut *listener)
            .await
            .ctx("giving the timer lead back")?;
        Ok(())
    }

    /// What the lead's advisory lock key is hashed from: the namespace's
    /// whole resource prefix (the channel name is truncated to 63 bytes,
    /// and two namespaces must never share one lead).
    pub fn timer_lead_key(&self) -> String {
        format!("dlb_timer_lead_{}", self.location.resource_prefix())
    }

    /// A PostgreSQL connection `LISTEN`ing on [`OrderStore::deadline_channel`],
    /// labelled `application_name` on the server (so a test or an operator
    /// can end it with `pg_terminate_backend`). Receiving is not counted in
    /// the store's statements; the lead's lock statements run on it are.
    pub async fn deadline_listener(&self, application_name: &str) -> Result<PgListener> {
        if self.location.kind != DbKind::Postgres {
            return Err(Error::Config(format!(
                "deadline notifications need PostgreSQL (LISTEN/NOTIFY); {} has none",
                self.location.kind.service_name()
            )));
        }
        let mut name = super::identifier(application_name);
        name.truncate(PG_NAME_MAX);
        let options = PgConnectOptions::from_str(&self.location.connect_url()?)
            .ctx("opening the deadline listener")?
            .application_name(&name);
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(super::location::CONNECT_TIMEOUT)
            .connect_with(options)
            .await
            .ctx("opening the deadline listener")?;
        let mut listener = PgListener::connect_with(&pool)
            .await
            .ctx("opening the deadline listener")?;
        listener
            .listen(&self.deadline_channel())
            .await
            .ctx("listening for deadlines")?;
        Ok(listener)
    }
}
