//! The library's one error type.
//!
//! It never exposes a driver's types (sqlx, lapin, redis): callers see what
//! went wrong in words, and the [`Canceller`](crate::Canceller) trait stays
//! independent of any backend crate.

/// Everything that can go wrong inside the strategies library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A service could not be reached. `hint` says how to start one.
    #[error("cannot reach {service} at {url}: {reason}\n  hint: {hint}")]
    Unreachable {
        service: &'static str,
        /// The URL with any password removed.
        url: String,
        reason: String,
        hint: String,
    },
    /// A statement or transaction failed.
    #[error("database error while {context}: {message}")]
    Database {
        context: &'static str,
        message: String,
        /// True when retrying the whole transaction may succeed
        /// (deadlock, serialization failure, SQLite busy).
        retryable: bool,
    },
    /// A message broker or cache (RabbitMQ, Redis) refused or failed an
    /// operation after it was reached.
    #[error("{service} error while {context}: {message}")]
    Broker {
        service: &'static str,
        context: &'static str,
        message: String,
    },
    /// A configuration value is invalid; the message names the field.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A strategy name that the registry does not know.
    #[error("unknown strategy `{name}`; known strategies: {known}")]
    UnknownStrategy { name: String, known: String },
}

/// Result alias used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Adds a context to a sqlx error and classifies it as retryable or not.
pub(crate) trait DbContext<T> {
    fn ctx(self, context: &'static str) -> Result<T>;
}

impl<T> DbContext<T> for std::result::Result<T, sqlx::Error> {
    fn ctx(self, context: &'static str) -> Result<T> {
        self.map_err(|e| db_error(context, &e))
    }
}

pub(crate) fn db_error(context: &'static str, e: &sqlx::Error) -> Error {
    let retryable = match e {
        sqlx::Error::Database(db) => matches!(
            db.code().as_deref(),
            // PostgreSQL deadlock / serialization failure.
            Some("40P01") | Some("40001")
            // MySQL/MariaDB deadlock (1213) and lock wait timeout (1205).
            | Some("1213") | Some("1205")
            // SQLite SQLITE_BUSY / SQLITE_LOCKED (and their extended codes).
            | Some("5") | Some("6") | Some("517") | Some("261")
        ),
        sqlx::Error::PoolTimedOut => true,
        _ => false,
    };
    Error::Database {
        context,
        message: e.to_string(),
        retryable,
    }
}

impl Error {
    /// [`Error::Unreachable`]: `service` at `url` (already redacted) failed
    /// with `reason`; `start_hint` says how to start it. When `reason` is a
    /// refused TLS connection the hint says instead what fixes that, naming
    /// the URL parameter ([`crate::tls::refusal_hint`]), and when it is a
    /// refused login it says that ([`login_refused_hint`]): starting a
    /// server that answered would not help.
    pub fn unreachable(
        service: &'static str,
        url: String,
        reason: String,
        start_hint: String,
    ) -> Error {
        let hint = crate::tls::refusal_hint(&url, &reason)
            .or_else(|| login_refused_hint(&reason))
            .unwrap_or(start_hint);
        Error::Unreachable {
            service,
            url,
            reason,
            hint,
        }
    }

    /// Whether retrying the failed transaction may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Database {
                retryable: true,
                ..
            }
        )
    }
}

/// What fixes a login the server refused, when `reason` (the client's
/// error) is one: PostgreSQL, MariaDB/MySQL, RabbitMQ and Redis each word
/// it their own way. `None` for other failures.
pub fn login_refused_hint(reason: &str) -> Option<String> {
    const REFUSALS: [&str; 7] = [
        "password authentication failed", // PostgreSQL
        "no pg_hba.conf entry",           // PostgreSQL, a host or user not let in
        "Access denied for user",         // MariaDB / MySQL
        "ACCESS_REFUSED",                 // RabbitMQ
        "WRONGPASS",                      // Redis 6+ with ACLs
        "NOAUTH",                         // Redis asking for a password
        "invalid username-password",      // Redis before 6
    ];
    REFUSALS.iter().any(|r| reason.contains(r)).then(|| {
        "the server answered and refused the login: put the right user and password in the \
         URL (user:password@host; its --db / --amqp / --redis flag or DELAYBENCH_* variable), \
         and check that the user exists and may connect from this host"
            .to_string()
    })
}

#[cfg(test)]
mod login_tests {
    use super::*;

    #[test]
    fn a_refused_login_is_told_from_a_server_that_is_down() {
        for reason in [
            "error returned from database: 1045 (28000): Access denied for user 'root'@'127.0.0.1' (using password: YES)",
            "protocol error: AMQP soft error: ACCESS-REFUSED: ACCESS_REFUSED - Login was refused",
            "WRONGPASS invalid username-password pair or user is disabled.",
            "error returned from database: password authentication failed for user \"x\"",
        ] {
            let e = Error::unreachable("S", "u".into(), reason.into(), "start it".into());
            let Error::Unreachable { hint, .. } = e else {
                unreachable!()
            };
            assert!(hint.contains("refused the login"), "{reason}: {hint}");
        }
        let e = Error::unreachable(
            "S",
            "u".into(),
            "Connection refused (os error 111)".into(),
            "start it".into(),
        );
        assert!(e.to_string().ends_with("hint: start it"), "{e}");
    }
}
