//! A run's folder: its id and place, the database namespace of each
//! strategy in it, and `run.json`, written before anything is measured.

use crate::model::run_info::{self, Machine, PluginBuild, RunInfo};
use crate::redis_stats;
use crate::scenario::Scenario;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use strategies::registry::Variant;
use strategies::{DbServer, Service, StrategyOptions};

/// `run.json` for a run or sweep starting now. Service versions are read
/// only for strategies that were named (the default selection skips them).
pub async fn start_run_info(
    run_id: &str,
    repeat: u32,
    scenario_source: String,
    scenario: &Scenario,
    strategies: &[Variant],
    (server, database_version): (&DbServer, String),
    explicitly_selected: bool,
) -> Result<RunInfo> {
    let (services, plugin) = if explicitly_selected {
        services_of(strategies, &scenario.strategy_options()).await
    } else {
        Default::default()
    };
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
        strategies: strategies.iter().map(|v| v.name().to_string()).collect(),
        database_kind: server.kind().as_str().to_string(),
        database_url: server.display_url(),
        database_version,
        services,
        plugin,
        machine: Machine::detect(),
    })
}

/// Versions of the services the selected strategies use, and with
/// RabbitMQ the build of the plugin serving `x-delayed-message` as the
/// broker reports it.
async fn services_of(
    strategies: &[Variant],
    options: &StrategyOptions,
) -> (BTreeMap<String, String>, Option<PluginBuild>) {
    let (rabbit_url, redis_url) = (&options.rabbit.url, &options.redis_zset.url);
    let mut services = BTreeMap::new();
    let mut plugin = None;
    let uses = |service| {
        strategies
            .iter()
            .any(|v| v.info.requires.contains(&service))
    };
    if uses(Service::RabbitMq) {
        services.insert(
            "rabbitmq".to_string(),
            run_info::rabbitmq_description(rabbit_url).await,
        );
        plugin = Some(run_info::delayed_plugin_build(rabbit_url).await);
    }
    if uses(Service::Redis) {
        let version = match redis_stats::version(redis_url).await {
            Ok(v) => v,
            Err(e) => format!("unknown ({e:#})"),
        };
        services.insert("redis".to_string(), version);
    }
    (services, plugin)
}

/// A new folder `<stamp>-<scenario>[-n]` under `out`: its run id and path.
pub fn new_run_dir(out: &Path, scenario: &str) -> Result<(String, PathBuf)> {
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
pub fn namespace_name(run_id: &str, strategy: &str) -> String {
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
}
