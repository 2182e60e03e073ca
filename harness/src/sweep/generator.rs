//! The generator alone (creates and payments, no canceller), driven at
//! twice the highest rate a strategy sustained: so a limit of the harness
//! is never read as a limit of a strategy.

use super::discovery::bisect;
use super::step::StepContext;
use crate::instance::Pool;
use crate::model::sweep::{GeneratorProbe, GeneratorStep, SweepResult};
use crate::run::folder::namespace_name;
use crate::session::{Bench, Load};
use crate::workload;
use anyhow::{Context, Result};
use strategies::registry::Role;

/// The generator alone (creates and payments, no canceller) at twice
/// the highest rate a strategy (not the ceiling) sustained; when it
/// cannot drive that, bisected down to the rate it can.
pub(super) async fn probe(
    ctx: &StepContext<'_>,
    result: &SweepResult,
) -> Result<Option<GeneratorProbe>> {
    let Some(best) = result
        .strategies
        .iter()
        .filter(|s| s.strategy.info.role != Role::Baseline)
        .filter_map(|s| s.max_rate)
        .max_by(f64::total_cmp)
    else {
        return Ok(None);
    };
    let target = 2.0 * best;
    let mut steps = vec![step(ctx, target).await?];
    let (mut held, mut failed) = (None, Some(target));
    for _ in 0..ctx.scenario.sweep.bisect {
        let lo = held.unwrap_or(best / 2.0);
        let Some(mid) = failed.and_then(|hi| bisect(lo, hi)) else {
            break;
        };
        let step = step(ctx, mid).await?;
        if step.holds {
            held = Some(mid);
        } else {
            failed = Some(mid);
        }
        steps.push(step);
    }
    let first = &steps[0];
    let ms = |us: u64| us as f64 / 1000.0;
    let verdict = if first.holds {
        format!(
            "drove {target:.0} orders/s, twice the best strategy's {best:.0}, with p99 lag \
             to commit {:.1} ms: the generator did not limit any strategy",
            ms(first.lag_p99_us)
        )
    } else {
        format!(
            "could not drive {target:.0} orders/s, twice the best strategy's {best:.0} (p99 \
             lag to commit {:.1} ms, {} errors); alone it held {}. The generator and the \
             database's commit path it waits on were the bottleneck from about that rate: \
             read the maxima of strategies near it as lower bounds of what they could do \
             on a bigger database",
            ms(first.lag_p99_us),
            first.errors,
            match held {
                Some(h) => format!("{h:.0} orders/s"),
                None => format!("no rate tried down to {:.0} orders/s", best / 2.0),
            }
        )
    };
    Ok(Some(GeneratorProbe {
        rate: target,
        holds: first.holds,
        max_rate: if first.holds { Some(target) } else { held },
        verdict,
        steps,
    }))
}

/// The generator alone at `rate`, on a namespace of its own (dropped).
async fn step(ctx: &StepContext<'_>, rate: f64) -> Result<GeneratorStep> {
    let mut scenario = ctx.scenario.clone();
    scenario.rate = rate;
    scenario.backlog = None;
    let plan = workload::plan(&scenario);
    let dir = ctx.run_dir.join("generator");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let namespace = namespace_name(
        ctx.run_id,
        &format!("generator_{}", rate.to_string().replace('.', "_")),
    );
    let location = ctx.server.create_namespace(&namespace, &dir).await?;
    // The namespace is dropped whatever the step returns.
    let measured = async {
        let bench = Bench::open(&location, &scenario).await?;
        // No instances: every created order is "unscheduled", nothing cancels.
        let pool = Pool::spawn(Vec::new(), None).await?;
        let load = Load::start("generator", &plan, &scenario, &pool);
        let health = load.drive(&plan, &bench, &pool).await;
        let cpu = load.finish().await?;
        bench.store.close().await;
        let _ = pool.stop().await;
        anyhow::Ok((health, cpu))
    }
    .await;
    ctx.drop_namespace(&location.namespace).await;
    let (health, cpu) = measured?;
    let errors = health.create_errors + health.payment_errors;
    let holds = errors == 0 && health.lag_us_p99 <= ctx.scenario.sweep.keep_up.as_micros() as u64;
    eprintln!(
        "delaybench: generator alone at {rate} orders/s: {} (lag p99 {:.1} ms, {errors} errors{})",
        if holds { "keeps up" } else { "FALLS BEHIND" },
        health.lag_us_p99 as f64 / 1000.0,
        cpu.as_ref()
            .map(|c| format!(", {}", c.describe()))
            .unwrap_or_default()
    );
    Ok(GeneratorStep {
        rate,
        holds,
        created: health.created,
        planned: health.orders_planned,
        errors,
        lag_p50_us: health.lag_us_p50,
        lag_p99_us: health.lag_us_p99,
        cpu,
    })
}
