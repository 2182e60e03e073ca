//! Shared setup for the benchmarks: database URLs and fresh namespaces.

use strategies::{DbServer, OrderStore};

/// PostgreSQL for benchmarks (`DELAYBENCH_PG_URL` overrides).
pub fn postgres_url() -> String {
    std::env::var("DELAYBENCH_PG_URL")
        .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".into())
}

/// A fresh namespace named `name` on `url` with the schema installed.
/// Panics with the server's "how to start it" hint when unreachable.
pub async fn fresh_store(url: &str, name: &str) -> (DbServer, OrderStore) {
    let server = DbServer::parse(url).expect("valid URL");
    let dir = std::env::temp_dir().join("delaybench-bench");
    let location = server
        .create_namespace(name, &dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = OrderStore::connect(&location, 4)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .install_schema(16, i64::MAX / 4)
        .await
        .expect("schema");
    (server, store)
}
