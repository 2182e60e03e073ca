//! The guards that remove what a run or a test made on every exit path:
//! [`TeardownGuard`] tears a strategy down after a run (or, dropped
//! unfinished, on a fresh runtime); [`TestNamespace`] removes a test's
//! queues, exchanges, Redis keys and namespace, passed or failed.

use super::broker::delete_broker_prefix;
use super::keys::delete_redis_prefix;
use crate::canceller::{Canceller, Service};
use crate::error::Result;
use crate::registry::Deployment;
use crate::store::{DbLocation, DbServer, OrderStore};
use std::future::Future;
use std::time::Duration;

/// Runs the future `make` builds to completion on a fresh runtime in a
/// fresh thread, waiting at most `limit`: for cleanups started from `Drop`
/// (a panic, a cancelled future), where the caller's runtime may be gone,
/// shutting down or blocked on this very thread.
pub fn block_on_fresh_thread<F>(make: impl FnOnce() -> F + Send + 'static, limit: Duration)
where
    F: Future<Output = ()>,
{
    let (done, wait) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("delaybench-cleanup".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(make()),
                Err(e) => tracing::warn!(error = %e, "no runtime for the cleanup"),
            }
            let _ = done.send(());
        });
    match spawned {
        Ok(_) => {
            if wait.recv_timeout(limit).is_err() {
                tracing::warn!(?limit, "cleanup did not finish in time; left running");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot start the cleanup thread"),
    }
}

/// How long a cleanup from `Drop` may take before the caller goes on.
const DROP_CLEANUP_LIMIT: Duration = Duration::from_secs(60);

/// Builds a fresh instance of `deployment` on `location` and tears it down.
async fn teardown_fresh(deployment: &Deployment, location: &DbLocation) -> Result<()> {
    let store = OrderStore::connect(location, 1).await?;
    let instance = deployment.instance(store.clone())?;
    let result = instance.teardown().await;
    store.close().await;
    result
}

/// Runs `step` until it succeeds, at most [`CLEANUP_ATTEMPTS`] times,
/// [`CLEANUP_BACKOFF`] apart (a broker or Redis restarting under another
/// test or a fault); returns the last error.
async fn with_retries<T, F, Fut>(mut step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempt = 1;
    loop {
        match step().await {
            Err(_) if attempt < CLEANUP_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(CLEANUP_BACKOFF).await;
            }
            done => return done,
        }
    }
}

const CLEANUP_ATTEMPTS: u32 = 5;
const CLEANUP_BACKOFF: Duration = Duration::from_secs(2);

/// Arms a strategy's [`Canceller::teardown`] for one run: call
/// [`TeardownGuard::finish`] on every normal path (it returns the teardown's
/// error, if any, for the caller to record beside its own outcome); if the
/// guard is dropped unfinished (a `?` that returned early, a panic, a
/// timeout that dropped the future), it tears down a fresh instance of the
/// strategy on a fresh runtime, logging any failure.
#[derive(Debug)]
pub struct TeardownGuard {
    armed: Option<(Deployment, DbLocation)>,
}

impl TeardownGuard {
    /// Arms the teardown of `deployment` on `location`; arm it before
    /// `setup`, which may fail halfway.
    pub fn new(deployment: &Deployment, location: &DbLocation) -> TeardownGuard {
        TeardownGuard {
            armed: Some((deployment.clone(), location.clone())),
        }
    }

    /// Tears down through `instance` (the one that ran `setup`, so a
    /// setting it changed is restored), or through a fresh one when `None`.
    /// The error is logged and returned, for the caller to record beside
    /// its own outcome, never instead of it.
    pub async fn finish(mut self, instance: Option<&dyn Canceller>) -> Result<()> {
        let Some((deployment, location)) = self.armed.take() else {
            return Ok(());
        };
        let result = match instance {
            Some(instance) => instance.teardown().await,
            None => teardown_fresh(&deployment, &location).await,
        };
        if let Err(e) = &result {
            let strategy = deployment.variant().name();
            tracing::warn!(strategy, error = %e, "teardown failed");
        }
        result
    }
}

impl Drop for TeardownGuard {
    fn drop(&mut self) {
        let Some((deployment, location)) = self.armed.take() else {
            return;
        };
        let strategy = deployment.variant().name();
        tracing::warn!(
            strategy,
            "the run stopped before its teardown; tearing down now"
        );
        block_on_fresh_thread(
            move || async move {
                let teardown = with_retries(|| teardown_fresh(&deployment, &location));
                if let Err(e) = teardown.await {
                    tracing::warn!(strategy, error = %e, "teardown after a failed run failed");
                }
            },
            DROP_CLEANUP_LIMIT,
        );
    }
}

/// Everything a test made in one namespace, removed when the test ends,
/// passed or failed: the strategy's queues, exchanges and Redis keys (by
/// the namespace's prefix), then the namespace itself (schema, database or
/// SQLite file). Call [`TestNamespace::clean`] at the end of a test; if it
/// is dropped instead (the test panicked), `Drop` does the same on a fresh
/// runtime, with the broker listed so queues made with other options go too.
#[derive(Debug)]
pub struct TestNamespace {
    armed: Option<Scope>,
}

#[derive(Debug, Clone)]
struct Scope {
    server: DbServer,
    location: DbLocation,
    deployment: Deployment,
}

impl Scope {
    /// Tests have no log subscriber: what could not be removed is printed.
    async fn clean(self, thorough: bool) {
        let requires = self.deployment.variant().info.requires;
        let prefix = self.location.resource_prefix();
        let (deployment, location) = (&self.deployment, &self.location);
        let options = deployment.options();
        if requires.contains(&Service::RabbitMq) {
            if let Err(e) = with_retries(|| teardown_fresh(deployment, location)).await {
                eprintln!("test cleanup: teardown of {prefix} failed: {e}");
            }
            if thorough {
                let deleted =
                    with_retries(|| delete_broker_prefix(&options.rabbit.url, &prefix)).await;
                if let Err(e) = deleted {
                    eprintln!("test cleanup: broker objects of {prefix} left: {e}");
                }
            }
        }
        // Keys only: a server-wide setting is the strategy's teardown's to
        // restore (the keyspace-expiry variant's tests do).
        if requires.contains(&Service::Redis) {
            let deleted =
                with_retries(|| delete_redis_prefix(&options.redis_zset.url, &prefix)).await;
            if let Err(e) = deleted {
                eprintln!("test cleanup: Redis keys of {prefix} left: {e}");
            }
        }
        if let Err(e) = with_retries(|| self.server.drop_namespace(location)).await {
            eprintln!("test cleanup: namespace {prefix} left: {e}");
        }
    }
}

impl TestNamespace {
    /// Arms the cleanup of `location` (created on `server`) for a test of
    /// `deployment` (whose broker and Redis URLs are used).
    pub fn new(server: &DbServer, location: &DbLocation, deployment: &Deployment) -> TestNamespace {
        TestNamespace {
            armed: Some(Scope {
                server: server.clone(),
                location: location.clone(),
                deployment: deployment.clone(),
            }),
        }
    }

    /// Removes everything now.
    pub async fn clean(mut self) {
        if let Some(scope) = self.armed.take() {
            scope.clean(false).await;
        }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if let Some(scope) = self.armed.take() {
            block_on_fresh_thread(move || scope.clean(true), DROP_CLEANUP_LIMIT);
        }
    }
}
