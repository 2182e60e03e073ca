//! `delaybench run`: every selected strategy in turn on a fresh namespace,
//! the same plan for each, then the checker, then `summary.json` and the
//! report, rewritten after every strategy so a crash loses nothing measured.

use crate::backlog;
use crate::db_stats;
use crate::driver;
use crate::faults;
use crate::instance::{Pool, WorkerSpec};
use crate::model::lateness;
use crate::model::records::{BacklogRecord, OutboxRecord};
use crate::model::run_info::{self, Machine, RunInfo};
use crate::model::summary::{self, Cost, DatabaseInfo, MeasurementCost, Status, Summary};
use crate::model::WorkerReport;
use crate::redis_stats;
use crate::report;
use crate::resources;
use crate::scenario::Scenario;
use crate::service_args::{self, ServiceArgs};
use crate::workload::{self, Plan};
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use strategies::leftovers::TeardownGuard;
use strategies::registry::{self, Deployment, Variant, STRATEGIES};
use strategies::{
    checker, now_us, Canceller, DbKind, DbLocation, DbServer, OrderId, OrderStore, Service,
    StoreStats,
};
use tokio::time::Instant;

/// What `run` and `sweep` share on the command line: the scenario, the
/// strategies, the services and where results go. Each service URL comes
/// from its flag, else its environment variable, else the scenario (whose
/// defaults are this machine's services).
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Scenario: a TOML file, or a bundled preset by name (quick, busy, chaos, ...;
    /// `delaybench scenario list`). Default: quick for `run`, sweep for `sweep`.
    #[arg(long)]
    pub scenario: Option<String>,
    /// Comma-separated strategies, variants such as redis-zset+fallback, or `all` (every
    /// strategy, teaching variants left out). Default for `run`: those needing only the
    /// database (the others are listed as skipped); for `sweep`: `all`.
    #[arg(long)]
    pub strategies: Option<String>,
    #[command(flatten)]
    pub services: ServiceArgs,
    /// Folder that receives <run-id>/.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
}

impl CommonArgs {
    /// The scenario named by `--scenario` (or `default_preset`), with the
    /// service URLs of the flags and environment put in, and where it came from.
    pub fn scenario(&self, default_preset: &str) -> Result<(Scenario, String)> {
        let (mut scenario, origin) = Scenario::load(self.scenario.as_deref(), default_preset)?;
        self.services.apply(&mut scenario.strategies);
        scenario.validate()?;
        Ok((scenario, origin))
    }

    /// Whether `--strategies` chose what runs (rather than the default).
    pub fn strategies_named(&self) -> bool {
        self.strategies.is_some()
    }
}

/// What `delaybench run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunArgs {
    pub common: CommonArgs,
    /// Run each strategy this many times, interleaved (A B C A B C).
    pub repeat: u32,
}

/// Runs the comparison and returns the run folder.
pub async fn run(args: &RunArgs) -> Result<PathBuf> {
    let (scenario, scenario_source) = args.common.scenario(crate::presets::RUN_DEFAULT)?;
    let names = select(args.common.strategies.as_deref())?;
    if let Some(b) = scenario.backlog.as_ref().filter(|b| b.pending.len() > 1) {
        anyhow::bail!(
            "field `backlog.pending` lists {} sizes; `delaybench run` holds one backlog \
             (`pending = [{}]`), and `delaybench sweep --scenario ...` runs one step per size",
            b.pending.len(),
            b.pending[0]
        );
    }
    let server = DbServer::parse(args.common.services.database(service_args::SQLITE)?)?;
    // Before the run folder exists: a database that is down leaves nothing behind.
    let database_version = server.server_version().await?;
    let (run_id, run_dir) = new_run_dir(&args.common.out, &scenario.name)?;
    start_run_info(
        &run_id,
        args.repeat,
        scenario_source,
        &scenario,
        &names,
        (&server, database_version),
        args.common.strategies_named(),
    )
    .await?
    .write(&run_dir)?;
    let plan = workload::plan(&scenario);
    eprintln!(
        "delaybench: run {run_id}: scenario {} ({} orders, {} payment callbacks, timeouts {}), database {}, strategies {}",
        scenario.name,
        plan.orders,
        plan.callbacks,
        scenario.timeouts_label(),
        server.display_url(),
        names.join(", ")
    );
    let repeat = args.repeat.max(1);
    // Each strategy, and with `measure.unmeasured-twin` the same strategy
    // with every probe and recorder off beside it: `(folder, strategy,
    // scenario)`.
    let unmeasured = Scenario {
        measure: crate::scenario::Measure::nothing(),
        ..scenario.clone()
    };
    let items_of = |rep: u32| {
        let mut items: Vec<(String, &str, &Scenario)> = Vec::new();
        for name in &names {
            let measured = (name.clone(), name.as_str(), &scenario);
            if scenario.measure.unmeasured_twin {
                let twin = (summary::twin_folder(name), name.as_str(), &unmeasured);
                // Each goes first every other repetition, so neither
                // always runs on the other's warm caches.
                if rep % 2 == 1 {
                    items.extend([measured, twin]);
                } else {
                    items.extend([twin, measured]);
                }
            } else {
                items.push(measured);
            }
        }
        items
    };
    let mut reps: std::collections::BTreeMap<&str, (Vec<Summary>, Vec<String>)> =
        Default::default();
    let mut summaries = Vec::new();
    // Interleaved (A B C A B C), so a drift of the machine spreads over
    // every strategy instead of favouring the one that ran first.
    let items: Vec<Vec<(String, &str, &Scenario)>> = (1..=repeat).map(items_of).collect();
    for rep in 1..=repeat {
        summaries.clear();
        for (folder_name, name, scenario) in &items[rep as usize - 1] {
            let folder = format!("repeat-{rep}");
            let (dir, namespace) = if repeat == 1 {
                (
                    run_dir.join(folder_name),
                    namespace_name(&run_id, folder_name),
                )
            } else {
                (
                    run_dir.join(folder_name).join(&folder),
                    namespace_name(&run_id, &format!("{folder_name}_r{rep}")),
                )
            };
            let summary = run_one(
                name,
                args.common.strategies_named(),
                scenario,
                &plan,
                &server,
                &namespace,
                &dir,
            )
            .await?;
            summary.write(&dir)?;
            eprintln!(
                "delaybench: {}{}",
                one_line(&summary),
                if scenario.measure.is_nothing() {
                    " (unmeasured twin)"
                } else {
                    ""
                }
            );
            let shown = if repeat == 1 {
                summary
            } else {
                // The strategy's own summary.json folds the repetitions so
                // far, rewritten after each, so a crash loses nothing.
                let (done, folders) = reps.entry(folder_name).or_default();
                done.push(summary.clone());
                folders.push(folder);
                let strategy_dir = run_dir.join(folder_name);
                let agg = summary::aggregate(done, folders).unwrap_or(summary);
                agg.write(&strategy_dir)?;
                // The pooled distribution stands for the strategy.
                if let Some(h) = agg
                    .lateness_us
                    .histogram
                    .as_deref()
                    .and_then(lateness::decode_histogram)
                {
                    let path = strategy_dir.join("lateness.hgrm");
                    std::fs::write(&path, lateness::hgrm(&h))
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                agg
            };
            report::write(&run_dir)?;
            if !scenario.measure.is_nothing() {
                summaries.push(shown);
            }
        }
    }
    println!("\n{}", report::terminal_table(&summaries));
    println!("{}", report::written_to(&run_dir));
    Ok(run_dir)
}

/// `run.json` for a run or sweep starting now. Service versions are read
/// only for strategies that were named (the default selection skips them).
pub(crate) async fn start_run_info(
    run_id: &str,
    repeat: u32,
    scenario_source: String,
    scenario: &Scenario,
    names: &[String],
    (server, database_version): (&DbServer, String),
    explicitly_selected: bool,
) -> Result<RunInfo> {
    Ok(RunInfo {
        run_id: run_id.to_string(),
        started_at: chrono::Local::now().to_rfc3339(),
        delaybench_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: run_info::git_commit(),
        build_profile: Some(run_info::build_profile().to_string()),
        command: std::env::args().collect(),
        repeat: repeat.max(1),
        scenario_source,
        seed: scenario.seed,
        scenario: scenario.clone(),
        strategies: names.to_vec(),
        database_kind: server.kind().as_str().to_string(),
        database_url: server.display_url(),
        database_version,
        services: if explicitly_selected {
            services_of(names, &scenario.strategy_options()).await
        } else {
            Default::default()
        },
        machine: Machine::detect(),
    })
}

/// Why `run` exits non-zero: a strategy that failed, or a strategy that is
/// not a teaching variant with an anomaly (unless `allow_anomalies`).
pub fn problems(summaries: &[Summary], allow_anomalies: bool) -> Vec<String> {
    let mut problems = Vec::new();
    for s in summaries {
        if s.status == Status::Failed {
            problems.push(format!("{} failed", s.strategy));
        }
        for failed in s.repeats.iter().flat_map(|r| &r.not_measured) {
            if !failed.contains(": skipped: ") {
                problems.push(format!("{} {failed}", s.strategy));
            }
        }
        let teaching = Variant::parse(&s.strategy).is_ok_and(|v| v.info.is_teaching());
        if !allow_anomalies && !teaching && s.anomalies.total() > 0 {
            problems.push(format!(
                "{} has {} anomalies (pass --allow-anomalies if the scenario is meant to break it)",
                s.strategy,
                s.anomalies.total()
            ));
        }
    }
    problems
}

/// One strategy once: skipped with the reason, failed, or measured.
pub(crate) async fn run_one(
    name: &str,
    explicitly_selected: bool,
    scenario: &Scenario,
    plan: &Plan,
    server: &DbServer,
    namespace: &str,
    dir: &Path,
) -> Result<Summary> {
    let database = DatabaseInfo {
        kind: server.kind().as_str().to_string(),
        url: server.display_url(),
        namespace: None,
    };
    if let Some(reason) = skip_reason(name, explicitly_selected)? {
        return Ok(Summary::not_run(name, Status::Skipped, reason, database));
    }
    // The scenario's command before each strategy (say, one that makes a
    // cluster whole again); when it fails the strategy does not run, and
    // its row says why.
    let hook = match &scenario.before_each_strategy {
        Some(hook) => {
            eprintln!(
                "delaybench: {name}: running before-each-strategy `{}`",
                hook.label()
            );
            let record = crate::hook::run(hook, dir).await;
            eprintln!("delaybench: {name}: {}", record.describe());
            if let Some(error) = record.error.clone() {
                let mut summary = Summary::not_run(name, Status::Failed, error, database);
                summary.before_strategy = Some(record);
                return Ok(summary);
            }
            Some(record)
        }
        None => None,
    };
    let mut summary = match run_strategy(name, scenario, plan, server, namespace, dir).await {
        Ok(summary) => summary,
        Err(e) => not_measured(name, &e, database),
    };
    summary.before_strategy = hook;
    Ok(summary)
}

/// Validates `--strategies`; every strategy (teaching variants and the
/// ceiling left out) when absent or `all`.
pub(crate) fn select(list: Option<&str>) -> Result<Vec<String>> {
    let every_strategy = || {
        STRATEGIES
            .iter()
            .filter(|s| s.role == registry::Role::Strategy)
            .map(|s| s.name.to_string())
            .collect()
    };
    let Some(list) = list else {
        return Ok(every_strategy());
    };
    if list.trim() == "all" {
        return Ok(every_strategy());
    }
    let mut names = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let name = Variant::parse(name)?.name();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    anyhow::ensure!(
        !names.is_empty(),
        "--strategies is empty; known strategies: {}",
        known()
    );
    Ok(names)
}

/// Why `name` will not run, if it will not. With no `--strategies` the
/// embedded default runs only what needs no service besides the database.
fn skip_reason(name: &str, explicitly_selected: bool) -> Result<Option<String>> {
    let info = Variant::parse(name)?.info;
    if !explicitly_selected && !info.requires.is_empty() {
        let needs: Vec<&str> = info.requires.iter().map(|s| s.name()).collect();
        return Ok(Some(format!(
            "needs {}, which the embedded default does not use; run it with \
             `delaybench run --strategies {name}` once {} is up (`docker compose up -d --wait`)",
            needs.join(" and "),
            needs.join(" and ")
        )));
    }
    Ok(None)
}

/// Versions of the services the selected strategies use.
async fn services_of(
    names: &[String],
    options: &strategies::StrategyOptions,
) -> std::collections::BTreeMap<String, String> {
    let (rabbit_url, redis_url) = (&options.rabbit.url, &options.redis_zset.url);
    let mut services = std::collections::BTreeMap::new();
    let uses = |service| {
        names
            .iter()
            .any(|n| Variant::parse(n).is_ok_and(|v| v.info.requires.contains(&service)))
    };
    if uses(strategies::Service::RabbitMq) {
        services.insert(
            "rabbitmq".to_string(),
            run_info::rabbitmq_description(rabbit_url).await,
        );
    }
    if uses(strategies::Service::Redis) {
        let version = match redis_stats::version(redis_url).await {
            Ok(v) => v,
            Err(e) => format!("unknown ({e:#})"),
        };
        services.insert("redis".to_string(), version);
    }
    services
}

fn is_unreachable(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<strategies::Error>(),
            Some(strategies::Error::Unreachable { .. })
        )
    })
}

fn known() -> String {
    STRATEGIES
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn new_run_dir(out: &Path, scenario: &str) -> Result<(String, PathBuf)> {
    let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S").to_string();
    for n in 1.. {
        let run_id = if n == 1 {
            format!("{stamp}-{scenario}")
        } else {
            format!("{stamp}-{scenario}-{n}")
        };
        let dir = out.join(&run_id);
        if !dir.exists() {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            return Ok((run_id, dir));
        }
    }
    unreachable!()
}

/// `dlb_<run id>_<strategy>` in `[a-z0-9_]`, at most 63 characters; a
/// longer one keeps its first 54 and ends in a hash of the whole, so two
/// long names (a strategy's repetitions, its twin) never meet.
pub(crate) fn namespace_name(run_id: &str, strategy: &str) -> String {
    let full = strategies::store::identifier(&format!("dlb_{run_id}_{strategy}"));
    if full.len() <= 63 {
        return full;
    }
    // FNV-1a: stable across builds and platforms.
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{}_{:08x}", &full[..54], hash as u32)
}

pub(crate) fn progress_bar(name: &str, len: u64) -> ProgressBar {
    let quiet = std::env::var_os("CI").is_some() || !std::io::stderr().is_terminal();
    let bar = ProgressBar::with_draw_target(
        Some(len),
        if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    bar.set_style(
        ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} events {elapsed} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(name.to_string());
    bar
}

/// Connections in the harness's own pool for orders and payment callbacks,
/// sized for the offered rate so the workload is not held up waiting for
/// one (the generator's lag, measured to commit, shows it if it still is).
/// SQLite serialises writers, so more connections there only add waiting.
pub(crate) fn harness_connections(rate: f64, kind: DbKind) -> u32 {
    match kind {
        DbKind::Sqlite => 16,
        _ => ((rate / 50.0).ceil() as u32).clamp(16, 64),
    }
}

/// A strategy that could not measure. A service it needs being down is a
/// skip that says how to start it, not a failure of the strategy.
fn not_measured(name: &str, e: &anyhow::Error, database: DatabaseInfo) -> Summary {
    let status = if is_unreachable(e) {
        Status::Skipped
    } else {
        Status::Failed
    };
    Summary::not_run(name, status, format!("{e:#}"), database)
}

/// Runs one strategy on a fresh namespace. Once the namespace exists,
/// whatever goes wrong is reported with it, so the data can be inspected.
async fn run_strategy(
    name: &str,
    scenario: &Scenario,
    plan: &Plan,
    server: &DbServer,
    namespace: &str,
    dir: &Path,
) -> Result<Summary> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let location = server.create_namespace(namespace, dir).await?;
    match measure(name, scenario, plan, &location, dir).await {
        Ok(summary) => Ok(summary),
        Err(e) => Ok(not_measured(
            name,
            &e,
            DatabaseInfo {
                kind: location.kind.as_str().to_string(),
                url: location.display_url(),
                namespace: Some(location.namespace.clone()),
            },
        )),
    }
}

/// Measures one strategy with its teardown on every exit path: the guard
/// is armed before `setup` (which may fail halfway) and finished after the
/// measurement, whatever it returned; a panic or a dropped future tears
/// down from the guard's `Drop`. A failed teardown is logged and recorded
/// in the summary, never in place of the measurement's own error.
async fn measure(
    name: &str,
    scenario: &Scenario,
    plan: &Plan,
    location: &DbLocation,
    dir: &Path,
) -> Result<Summary> {
    let guard = TeardownGuard::new(name, &scenario.strategy_options(), location);
    // The instance that ran `setup` tears down, so a server-wide setting it
    // changed is restored; when none was built, a fresh one does.
    let mut set_up = None;
    let measured = measure_set_up(name, scenario, plan, location, dir, &mut set_up).await;
    let teardown_error = guard
        .finish(set_up.as_deref())
        .await
        .err()
        .map(|e| format!("{e:#}"));
    let mut summary = measured?;
    summary.teardown_error = teardown_error;
    summary.warnings = summary::warnings(&summary);
    Ok(summary)
}

/// The measurement proper; `set_up` receives the instance that runs
/// `setup`, for [`measure`] to tear down with.
async fn measure_set_up(
    name: &str,
    scenario: &Scenario,
    plan: &Plan,
    location: &DbLocation,
    dir: &Path,
    set_up: &mut Option<Box<dyn Canceller>>,
) -> Result<Summary> {
    let started = Instant::now();
    let connections = harness_connections(scenario.rate, location.kind);
    let store = OrderStore::connect(location, connections).await?;
    store
        .install_schema(scenario.stock.skus, scenario.stock.initial)
        .await?;
    // The backlog goes into the database before any instance starts (a
    // wheel reloads it on start), then to the instances through `schedule`.
    let backlog_size = scenario
        .backlog
        .as_ref()
        .and_then(|b| b.pending.first().copied())
        .unwrap_or(0);
    let mut backlog_record = None;
    let mut backlog_expire = 0;
    // A backlog of 0 is measured too: the baseline of every holding and
    // recovery figure.
    if let Some(b) = &scenario.backlog {
        let (expire, insert_s) =
            backlog::insert(&store, backlog_size, b.after, scenario.stock.skus).await?;
        backlog_expire = expire;
        backlog_record = Some(BacklogRecord {
            pending: backlog_size,
            insert_s,
            ..BacklogRecord::default()
        });
    }
    let options = scenario.strategy_options();
    let deployment = Deployment::new(Variant::parse(name)?, &options);
    // Setup runs on a connection of its own whose row counts are flushed
    // before the reading that starts the whole-run count: PostgreSQL
    // publishes a backend's counts up to 10 s late otherwise, and an index
    // built in setup (db-scan's `index` option: a heap scan of a 1M-order
    // backlog) read as 700 rows per cancel of run cost.
    let setup_store = OrderStore::connect(location, 1).await?;
    set_up
        .insert(deployment.instance(setup_store.clone())?)
        .setup()
        .await
        .context("strategy setup")?;
    setup_store.flush_statistics().await;
    setup_store.close().await;
    let control = deployment.instance(OrderStore::connect(location, 2).await?)?;
    let mut capabilities = control.capabilities();
    let points: Vec<&str> = control.crash_points().iter().map(|p| p.as_str()).collect();
    capabilities.notes.push(format!(
        "crash points its path has (crash-at, pause-instance): {}",
        if points.is_empty() {
            "none".to_string()
        } else {
            points.join(", ")
        }
    ));
    capabilities.notes.extend(deployment.notes());
    // The order service writes the outbox row in the creating transaction
    // (+outbox), and announces the deadline where the strategy listens.
    let store = deployment.order_service_store(store);

    let rows_before = db_stats::rows_read(&store).await?;
    let (proxies, worker_location, worker_options) =
        faults::route(&scenario.faults, &capabilities.requires, location, &options).await?;
    let session = strategies::store::identifier(&format!("{}_w", location.resource_prefix()));
    let specs: Vec<WorkerSpec> = (0..scenario.instances)
        .map(|instance| WorkerSpec {
            strategy: deployment.variant(),
            instance,
            location: worker_location.clone(),
            options: worker_options.clone(),
            session: session.clone(),
            retry: scenario.schedule_retry.clone(),
            measure: scenario.measure.clone(),
        })
        .collect();
    let pool = Pool::spawn(specs.clone(), scenario.restart_dead_instances).await?;
    let backends = backlog::Backends::of(
        &capabilities,
        &options.redis_zset.url,
        location.resource_prefix(),
    );
    if let Some(held) = &mut backlog_record {
        held.handoff_s = backlog::hand_off(&pool, backlog_size, backlog_expire).await;
        held.handoff_errors = pool.schedule_errors();
        held.held = backlog::holdings(&backends, &pool).await;
    }
    let progress = progress_bar(name, plan.events.len() as u64);
    let (t0, t0_us) = (Instant::now(), now_us());
    pool.set_t0(t0);
    // Redis cost is read on the server over the measured window: INFO
    // commandstats when the warm-up ends and after the drain.
    let redis_url = capabilities
        .requires
        .contains(&strategies::Service::Redis)
        .then(|| options.redis_zset.url.clone());
    let redis_before = tokio::spawn({
        let url = redis_url.clone();
        let warmup_end = t0 + Duration::from_micros(plan.measured_from_us as u64);
        async move {
            tokio::time::sleep_until(warmup_end).await;
            match url {
                Some(url) => redis_stats::snapshot(&url).await.map(Some),
                None => Ok(None),
            }
        }
    });
    // CPU over the arrival window, when the load is on.
    let cpu = resources::measure_window(
        t0 + Duration::from_micros(plan.measured_from_us as u64),
        t0 + scenario.warmup + scenario.duration,
    );
    let faults = tokio::spawn(faults::inject(
        scenario.faults.clone(),
        faults::FaultContext {
            pool: Arc::clone(&pool),
            proxies: proxies.clone(),
            db: OrderStore::connect(location, 1).await?,
            session,
            crash_points: control.crash_points(),
            t0,
            give_up_at: t0 + scenario.warmup + scenario.duration,
            requires: capabilities.requires.clone(),
            redis: capabilities
                .requires
                .contains(&strategies::Service::Redis)
                .then(|| {
                    (
                        options.redis_zset.url.clone(),
                        location.resource_prefix(),
                        options.redis_zset.shards,
                    )
                }),
        },
    ));
    let stop_sampling = tokio_util::sync::CancellationToken::new();
    let outbox_samples = deployment
        .relays_outbox()
        .then(|| tokio::spawn(sample_outbox(store.clone(), t0, stop_sampling.clone())));
    let generator = driver::drive(plan, &store, &pool, t0, &progress, connections).await;

    // Every order has had `drain` past its (actual) deadline when we stop.
    progress.set_message("draining");
    let drain_end = t0
        + Duration::from_micros(plan.last_deadline_us as u64 + generator.lag_us_max)
        + scenario.drain;
    tokio::time::sleep_until(drain_end).await;
    let faults = faults.await.context("fault injection")?;
    let outbox = match outbox_samples {
        Some(task) => {
            stop_sampling.cancel();
            let samples = task.await.unwrap_or_default();
            Some(OutboxRecord::of(samples, store.outbox_len().await.ok()))
        }
        None => None,
    };

    let cpu = cpu.await.context("reading CPU use")?;
    progress.finish_and_clear();
    let record = pool.stop().await?;
    // After the instances stopped, so their last calls still get through.
    for proxy in proxies.values() {
        proxy.shutdown();
    }
    let mut faults = faults;
    // Only where every attempt was noted: without the recorder a count
    // of 0 would read as "no duplicates".
    if scenario.measure.commit_times {
        faults::count_duplicates(&mut faults, &record.cancel_commits, &record.absorbed, t0_us);
    }
    let redis_commands = match (&redis_url, redis_before.await.context("reading Redis")?) {
        (Some(url), Ok(Some(before))) => redis_stats::snapshot(url)
            .await
            .map(|after| after.since(&before)),
        (Some(_), Err(e)) => Err(e),
        _ => Ok(redis_stats::Delta::NotUsed),
    };
    // Closing the harness's own connections makes PostgreSQL publish their
    // counts; the checker then reads on fresh ones, after the reading.
    store.close().await;
    let store = OrderStore::connect(location, 4).await?;
    let server_rows_read = match (rows_before, db_stats::rows_read(&store).await?) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };

    let drain_us = scenario.drain.as_micros() as i64;
    let checked_at_us = now_us();
    let verdict = checker::check(&store, drain_us, checked_at_us).await?;
    let timings = checker::cancel_timings(&store).await?;
    let paid_late = checker::paid_after_deadline_timings(&store).await?;
    let pending = checker::pending_timings(&store).await?;
    if let (Some(held), Some(b)) = (&mut backlog_record, &scenario.backlog) {
        held.recovery = backlog::recover(backlog::RecoveryInput {
            specs,
            backlog: b,
            pending: backlog_size,
            store: &store,
            backends: &backends,
            before: &held.held,
            probe_wait: (!capabilities.arbitrary_delay)
                .then(|| options.rabbit.ttls.iter().min().copied())
                .flatten(),
        })
        .await?;
    }
    store.close().await;
    // Teardown follows in `measure`, so the backlog's restarts found the
    // queues and keys in place.
    let timeouts_us: Vec<i64> = scenario
        .timeouts
        .iter()
        .map(|t| t.after.as_micros() as i64)
        .collect();
    let measured_from_us = t0_us + plan.measured_from_us;
    let lateness = lateness::lateness(&timings, measured_from_us, t0_us, &timeouts_us);
    let histogram = &lateness.histogram;
    std::fs::write(dir.join("lateness.hgrm"), lateness::hgrm(histogram))
        .with_context(|| format!("writing {}", dir.join("lateness.hgrm").display()))?;
    if let Some(lag) = &generator.lag_histogram {
        let path = dir.join("generator_lag.hgrm");
        std::fs::write(&path, lateness::hgrm(lag))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let committed = committed_lateness(&timings, &record.cancel_commits, measured_from_us);
    let measured_ids: std::collections::HashSet<OrderId> = plan.measured_order_ids().collect();
    let schedule_path = (!record.schedules.is_empty()).then(|| {
        lateness::stats_of(
            record
                .schedules
                .iter()
                .filter(|(id, _)| measured_ids.contains(id))
                .map(|(_, us)| *us),
        )
    });
    let censored = lateness::stats_of(
        paid_late
            .iter()
            .filter(|t| t.created_at_us >= measured_from_us)
            .map(|t| (t.at_us - t.expire_at_us) as u64),
    );

    // The measured orders fall due from the warm-up's end plus the shortest
    // timeout until the last arrival plus the shortest timeout.
    let shortest_us = timeouts_us.iter().copied().min().unwrap_or(0);
    let arrivals_end_us = t0_us + (scenario.warmup + scenario.duration).as_micros() as i64;
    let overdue = lateness::overdue_trend(
        timings
            .iter()
            .chain(&paid_late)
            .chain(&pending)
            .map(|t| (t.expire_at_us, t.at_us)),
        measured_from_us + shortest_us,
        arrivals_end_us + shortest_us,
        t0_us,
    );

    // The checker's missed cancels (PENDING past deadline + drain), each
    // put down to the fault in effect while it lived.
    let missed_by_fault = if faults.is_empty() {
        Vec::new()
    } else {
        let ms = |us: i64| ((us - t0_us).max(0) / 1000) as u64;
        let missed: Vec<(u64, u64)> = pending
            .iter()
            .filter(|t| t.expire_at_us + drain_us <= checked_at_us)
            .map(|t| (ms(t.created_at_us), ms(t.expire_at_us)))
            .collect();
        faults::missed_by_fault(&missed, &faults, ms(checked_at_us))
    };
    let cost = cost(
        &record.reports,
        &capabilities,
        redis_commands,
        server_rows_read,
        location.kind,
    );
    let mut summary = Summary {
        strategy: name.to_string(),
        status: Status::Ok,
        reason: None,
        database: DatabaseInfo {
            kind: location.kind.as_str().to_string(),
            url: location.display_url(),
            namespace: Some(location.namespace.clone()),
        },
        orders: verdict.orders,
        lateness_us: lateness::stats(histogram),
        // Attempts on orders that never existed: a row the database cannot see.
        anomalies: verdict.anomalies.with(
            strategies::checker::Anomaly::PhantomSchedules,
            record.reports.iter().map(|r| r.total.missing).sum(),
        ),
        anomaly_examples: verdict.anomaly_examples,
        cancelled_by: verdict.cancelled_by,
        payments: verdict.payments,
        releases: verdict.releases,
        lateness_over_time: lateness.over_time,
        lateness_by_timeout: lateness.by_timeout,
        committed_lateness_us: committed.as_ref().map(|c| c.0.clone()),
        commit_gap_us: committed.map(|c| c.1),
        censored_lateness_us: Some(censored),
        schedule_path_us: schedule_path,
        overdue,
        cpu,
        backlog: backlog_record,
        missed_by_fault,
        outbox,
        cost,
        generator,
        worker_events: record.events,
        warnings: Vec::new(),
        faults,
        teardown_error: None,
        before_strategy: None,
        capabilities: Some(capabilities),
        instances: scenario.instances,
        timeouts: scenario.timeouts_label(),
        drain_ms: scenario.drain.as_millis() as u64,
        elapsed_s: started.elapsed().as_secs_f64(),
        repeats: None,
        measure: Some(scenario.measure.clone()),
    };
    summary.warnings = summary::warnings(&summary);
    Ok(summary)
}

/// The outbox's length every [`OUTBOX_SAMPLE_EVERY`] from `t0` until
/// `stop`: `(ms after t0, rows)`. A failed count is skipped, not zero.
async fn sample_outbox(
    store: OrderStore,
    t0: Instant,
    stop: tokio_util::sync::CancellationToken,
) -> Vec<(u64, u64)> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(OUTBOX_SAMPLE_EVERY);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return samples,
            _ = tick.tick() => {}
        }
        if let Ok(rows) = store.outbox_len().await {
            samples.push((t0.elapsed().as_millis() as u64, rows));
        }
    }
}

const OUTBOX_SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Lateness at COMMIT (measured orders whose commit time a worker sent) and,
/// per order, how much later the commit returned than the row's stamp.
fn committed_lateness(
    timings: &[checker::CancelTiming],
    commits: &[(OrderId, i64)],
    measured_from_us: i64,
) -> Option<(lateness::LatenessStats, lateness::LatenessStats)> {
    if commits.is_empty() {
        return None;
    }
    let commit_of: std::collections::HashMap<OrderId, i64> = commits.iter().copied().collect();
    let (mut late, mut gap) = (Vec::new(), Vec::new());
    for t in timings
        .iter()
        .filter(|t| t.created_at_us >= measured_from_us)
    {
        if let Some(&at) = commit_of.get(&t.id) {
            late.push((at - t.expire_at_us).max(0) as u64);
            gap.push((at - t.at_us).max(0) as u64);
        }
    }
    Some((lateness::stats_of(late), lateness::stats_of(gap)))
}

/// Cost over the measured window (after the warm-up), divided by the cancels
/// the instances made in that same window. A dead process contributes its
/// last flush, numerator and denominator alike.
fn cost(
    reports: &[WorkerReport],
    capabilities: &strategies::Capabilities,
    redis: Result<redis_stats::Delta>,
    server_rows_read: Option<u64>,
    kind: DbKind,
) -> Cost {
    let mut store = StoreStats::default();
    let mut strategy_counters = std::collections::BTreeMap::new();
    for r in reports {
        store.add(&r.measured);
        for (k, v) in &r.counters_measured {
            *strategy_counters.entry(k.clone()).or_insert(0) += v;
        }
    }
    let per_cancel = |n: u64| (store.cancelled > 0).then(|| n as f64 / store.cancelled as f64);
    let cpu_ms = reports.iter().map(|r| r.cpu_ms).sum();
    // Workers measure their own server reads where the database can tell,
    // and where the probe ran. The instances' sums are added first and
    // divided here, once: a ratio of sums, not a sum of ratios.
    let probed = kind == DbKind::Postgres && store.server_reads_probes > 0;
    let estimate = probed.then(|| store.server_rows_read_estimate()).flatten();
    let canceller_rows = estimate.map(|e| e.total.round() as u64);
    let ci95 = estimate
        .zip(per_cancel(1))
        .map(|(e, one)| 1.96 * e.variance.sqrt() * one);
    let probe_us = store.server_reads_probe_us;
    let flush_us: u64 = reports.iter().map(|r| r.flush_us).sum();
    let us_per_cancel = per_cancel(probe_us + flush_us);
    let cpu_us_per_cancel = per_cancel(cpu_ms * 1000);
    let measurement = MeasurementCost {
        transactions: store.transactions,
        server_reads_probes: store.server_reads_probes,
        probe_us,
        flush_us,
        us_per_cancel,
        share_of_cpu: us_per_cancel
            .zip(cpu_us_per_cancel)
            .filter(|(_, cpu)| *cpu > 0.0)
            .map(|(m, cpu)| m / cpu),
    };
    let broker_messages = capabilities.requires.contains(&Service::RabbitMq).then(|| {
        ["published", "consumed"]
            .iter()
            .map(|k| strategy_counters.get(*k).copied().unwrap_or(0))
            .sum()
    });
    let (redis_commands, redis_note) = match redis {
        Ok(redis_stats::Delta::NotUsed) => (None, None),
        Ok(redis_stats::Delta::Calls(n)) => (Some(n), None),
        Ok(redis_stats::Delta::Restarted) => (
            None,
            Some("unknown: Redis restarted during the measured window (its run_id changed), so INFO commandstats started again from zero".to_string()),
        ),
        Err(e) => (None, Some(format!("unknown: {e:#}"))),
    };
    Cost {
        statements_per_cancel: per_cancel(store.statements),
        rows_read_per_cancel: per_cancel(store.rows_read),
        absorbed_attempts: store.cancel_attempts - store.cancelled,
        cpu_ms,
        cpu_us_per_cancel,
        peak_rss_kib: reports.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0),
        store,
        strategy_counters,
        redis_commands,
        redis_commands_per_cancel: redis_commands.and_then(per_cancel),
        redis_note,
        broker_messages,
        broker_messages_per_cancel: broker_messages.and_then(per_cancel),
        server_rows_read,
        server_rows_read_per_cancel: server_rows_read.and_then(per_cancel),
        canceller_server_rows_read: canceller_rows,
        canceller_server_rows_read_per_cancel: canceller_rows.and_then(per_cancel),
        canceller_server_rows_read_ci95_per_cancel: ci95,
        measurement: Some(measurement),
        instances: reports.to_vec(),
    }
}

fn one_line(s: &Summary) -> String {
    match s.status {
        Status::Ok => {
            let l = &s.lateness_us;
            let ms = |v: Option<u64>| {
                v.map(|us| format!("{:.1} ms", us as f64 / 1000.0))
                    .unwrap_or_else(|| "-".into())
            };
            format!(
                "{}: ok in {:.1}s, {} orders, {} cancelled, lateness n={} p90 {} p99 {} max {}, {} anomalies{}",
                s.strategy,
                s.elapsed_s,
                s.orders.created,
                s.orders.cancelled,
                l.count,
                ms(l.shown(lateness::Pct::P90)),
                ms(l.shown(lateness::Pct::P99)),
                ms(l.shown(lateness::Pct::Max)),
                s.anomalies.total(),
                s.warnings
                    .iter()
                    .map(|w| format!("\n  warning: {w}"))
                    .collect::<String>()
            )
        }
        _ => format!(
            "{}: {} ({})",
            s.strategy,
            s.status.as_str(),
            s.reason.as_deref().unwrap_or("")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_safe_identifiers() {
        let ns = namespace_name("20261129-201500-quick", "db-scan");
        assert_eq!(ns, "dlb_20261129_201500_quick_db_scan");
        // Long names stay apart past the 63-character limit.
        let run = "20261129-201500-mixed-timeouts";
        let a = namespace_name(run, "redis-zset+outbox+fallback.unmeasured_r1");
        let b = namespace_name(run, "redis-zset+outbox+fallback.unmeasured_r2");
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, b);
        assert!(
            a.starts_with("dlb_20261129_201500_mixed_timeouts_redis_zset"),
            "{a}"
        );
    }

    #[test]
    fn unknown_strategy_lists_known_ones() {
        let msg = format!("{:#}", select(Some("db-scan,nope")).unwrap_err());
        assert!(
            msg.contains("nope") && msg.contains("db-scan") && msg.contains("redis-zset"),
            "{msg}"
        );
        assert_eq!(select(Some("db-scan, db-scan")).unwrap(), vec!["db-scan"]);
    }
}
