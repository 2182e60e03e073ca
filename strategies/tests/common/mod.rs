//! Backends used by the integration tests. They are real servers; a test
//! never skips one silently: an unreachable server fails the test with the
//! URL and how to start it. Override with `DELAYBENCH_PG_URL` and
//! `DELAYBENCH_MYSQL_URL`.
#![allow(dead_code)]

pub fn postgres_url() -> String {
    std::env::var("DELAYBENCH_PG_URL")
        .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".into())
}

pub fn mysql_url() -> String {
    std::env::var("DELAYBENCH_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

pub fn sqlite_url() -> String {
    "sqlite://".into()
}

/// Every database backend, for tests that loop over all three.
pub fn all_databases() -> Vec<String> {
    vec![sqlite_url(), postgres_url(), mysql_url()]
}
