//! The checks themselves. Each takes a fresh [`Fixture`] and returns `Err`
//! with what it saw; which of them apply to a strategy is decided in
//! [`super::suite`] from its capabilities.
//!
//! Delays: checks that every strategy runs use delays a strategy without
//! `arbitrary_delay` must be configured for: 100, 250, 500 and 1000 ms and
//! sums of them (`rabbit-ttl` chains a longer delay through its longest
//! queue); `tests/conformance.rs` declares exactly those TTLs. Checks with
//! other delays are gated on `arbitrary_delay`.

use super::fixture::{ensure, start_instances, CheckResult, Fixture, Running, LATENESS_BOUND};
use crate::domain::{now_us, CancelOutcome, OrderStatus, PaymentOutcome};
use std::time::Duration;

/// Instances in the several-instance checks.
const INSTANCES: usize = 3;
/// Orders in [`several_instances_stay_correct`].
const MANY: i64 = 150;

/// Orders fire after their deadline and never before.
pub async fn fires_after_deadline_never_before(f: &Fixture) -> CheckResult {
    let running = Running::start(f.instance().await);
    let mut orders = Vec::new();
    for i in 0..20 {
        let order = f
            .create_scheduled(i + 1, 400 + 40 * i, &*running.instance)
            .await;
        orders.push(order);
    }
    // Halfway to the first deadline nothing may have fired. Judged by the
    // row's own cancel time, not by the clock before the read: an order
    // whose deadline passes while its row is being read is rightly
    // cancelled by then, and a loaded machine makes that read slow.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for o in &orders {
        let row = f.orders.order(o.id).await.unwrap().unwrap();
        if let Some(cancelled_at_us) = row.cancelled_at_us {
            ensure!(
                cancelled_at_us >= o.expire_at_us,
                "{}: order {} fired early: cancelled at {} µs, {} µs before its deadline",
                f.describe(),
                o.id,
                cancelled_at_us,
                o.expire_at_us - cancelled_at_us
            );
        }
    }
    f.try_wait_for_due_cancels(orders.last().unwrap().expire_at_us)
        .await?;
    running.try_stop().await?;
    for o in &orders {
        let row = f.orders.order(o.id).await.unwrap().unwrap();
        ensure!(
            row.status == OrderStatus::Cancelled,
            "{}: order {} is {}",
            f.describe(),
            o.id,
            row.status.as_str()
        );
        ensure!(
            row.cancelled_at_us.unwrap() >= o.expire_at_us,
            "{}: order {} cancelled early",
            f.describe(),
            o.id
        );
    }
    f.verdict_if_clean().await?;
    Ok(())
}

/// An order paid before its deadline is never cancelled; its unpaid
/// neighbours are. Where the order service tells the strategy of payments
/// (it drops paid orders' timers), none of the orders paid in time costs
/// a cancel attempt.
pub async fn paid_order_never_cancelled(f: &Fixture) -> CheckResult {
    let running = Running::start(f.instance().await);
    let hears_payments = f.hears_payments();
    let mut last = 0;
    let mut expected = std::collections::BTreeMap::new();
    let (mut paid_in_time, mut paid_late) = (0, 0);
    for i in 0..20 {
        // A second of headroom, so a loaded machine still pays in time.
        let order = f
            .create_scheduled(i + 1, 1_000 + 10 * i, &*running.instance)
            .await;
        last = order.expire_at_us;
        if order.id % 2 == 0 {
            expected.insert(order.id, OrderStatus::Cancelled);
            continue;
        }
        let paid_at = now_us();
        let outcome = f
            .orders
            .pay(order.id, &format!("cb-{}", order.id), paid_at)
            .await
            .unwrap();
        if paid_at < order.expire_at_us {
            assert_eq!(outcome, PaymentOutcome::Applied, "order {}", order.id);
            expected.insert(order.id, OrderStatus::Paid);
            paid_in_time += 1;
            if hears_payments {
                if let Err(e) = running.instance.paid(order.id).await {
                    return Err(format!("{}: paid({}) failed: {e}", f.describe(), order.id));
                }
            }
        } else {
            paid_late += 1;
            // The machine stalled past this deadline: the strategy may
            // rightly cancel first (the payment is then refunded). The
            // order tests nothing; its status follows the payment's outcome.
            let status = match outcome {
                PaymentOutcome::Applied => OrderStatus::Paid,
                _ => OrderStatus::Cancelled,
            };
            expected.insert(order.id, status);
        }
    }
    // The machine stalling past every deadline is the test's fault, not
    // the strategy's: panic rather than report a failure.
    assert!(
        paid_in_time > 0,
        "the machine stalled past every paid order's deadline: nothing was tested"
    );
    f.try_wait_for_due_cancels(last).await?;
    // Give a misbehaving strategy time to cancel a paid order anyway.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let attempts_on_paid = running.instance.store_stats().already_paid;
    running.try_stop().await?;
    // A payment that came after its deadline may meet a firing timer;
    // every other paid order's timer was dropped before it was due.
    ensure!(
        !hears_payments || attempts_on_paid <= paid_late,
        "{}: told of {paid_in_time} payments in time, it still tried {attempts_on_paid} paid \
         order(s) (at most {paid_late} paid late may be tried)",
        f.describe()
    );
    f.verdict_if_clean().await?;
    for (&id, &expected) in &expected {
        let status = f.status(id).await;
        ensure!(
            status == expected,
            "{}: order {id} is {} instead of {}",
            f.describe(),
            status.as_str(),
            expected.as_str()
        );
    }
    Ok(())
}

/// Scheduling one order three times, and delivering its cancel again after
/// it happened, release its stock once.
pub async fn duplicates_release_once(f: &Fixture) -> CheckResult {
    let running = Running::start(f.instance().await);
    let mut last = 0;
    for i in 0..10 {
        let order = f.create(i + 1, 200 + 20 * i).await;
        for _ in 0..3 {
            running
                .instance
                .schedule(order.id, order.expire_at_us)
                .await
                .expect("schedule");
        }
        last = order.expire_at_us;
    }
    f.try_wait_for_due_cancels(last).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.try_stop().await?;
    // A late duplicate delivery reaches the one cancel function: absorbed.
    let again = f.orders.cancel_if_due(1, "duplicate").await.unwrap();
    ensure!(
        again == CancelOutcome::AlreadyCancelled,
        "{}: a late duplicate cancel of order 1 gave {again:?}",
        f.describe()
    );
    let verdict = f.verdict_if_clean().await?;
    ensure!(
        verdict.orders.cancelled == 10 && verdict.releases == 10,
        "{}: {} cancelled, {} releases; expected 10 and 10 (one release per cancelled order)",
        f.describe(),
        verdict.orders.cancelled,
        verdict.releases
    );
    Ok(())
}

/// A long delay scheduled first does not hold back shorter ones scheduled
/// after it: every order is cancelled within [`LATENESS_BOUND`] of its
/// deadline. Catches head-of-line blocking (`rabbit-ttl-single-queue`):
/// behind the 3 s order, the 100 ms ones would be about 2.9 s late, far
/// above the bound and any slack a fixture adds to it.
pub async fn long_delay_does_not_hold_back_short_ones(f: &Fixture) -> CheckResult {
    let running = Running::start(f.instance().await);
    let mut orders = vec![f.create(1, 3_000).await];
    for (i, due_in) in [100, 250, 500, 1_000, 100, 250, 500, 1_000]
        .into_iter()
        .enumerate()
    {
        orders.push(f.create(i as i64 + 2, due_in).await);
    }
    for o in &orders {
        running
            .instance
            .schedule(o.id, o.expire_at_us)
            .await
            .expect("schedule");
    }
    let last = orders.iter().map(|o| o.expire_at_us).max().unwrap();
    f.try_wait_for_due_cancels(last).await?;
    running.try_stop().await?;
    // Shortest delays first: the message names the most-blocked order.
    orders.sort_by_key(|o| o.expire_at_us - o.created_at_us);
    f.cancelled_within(&orders, LATENESS_BOUND).await?;
    f.verdict_if_clean().await?;
    Ok(())
}

/// Delays nobody declared up front (odd milliseconds, one beyond every
/// test TTL, one already overdue when scheduled) are cancelled within
/// [`LATENESS_BOUND`], never early. Gated on `arbitrary_delay`.
pub async fn undeclared_delays_on_time(f: &Fixture) -> CheckResult {
    let running = Running::start(f.instance().await);
    let mut orders = Vec::new();
    for (i, due_in) in [-150, 37, 163, 420, 777, 1_333].into_iter().enumerate() {
        let order = f
            .create_scheduled(i as i64 + 1, due_in, &*running.instance)
            .await;
        orders.push(order);
    }
    let last = orders.iter().map(|o| o.expire_at_us).max().unwrap();
    f.try_wait_for_due_cancels(last).await?;
    running.try_stop().await?;
    // The overdue order was due before it was scheduled: judge the others'
    // lateness, and that one only for being cancelled at all.
    f.cancelled_within(&orders[..1], Duration::from_secs(3600))
        .await?;
    f.cancelled_within(&orders[1..], LATENESS_BOUND).await?;
    f.verdict_if_clean().await?;
    Ok(())
}

/// Three instances at once cancel every order exactly once, and split the
/// work: attempts the conditional UPDATE absorbed as already cancelled stay
/// under a tenth of the cancels (instances that each try every order are
/// correct but multiply the database load by their number). Gated on
/// `multi_instance_safe`.
pub async fn several_instances_stay_correct(f: &Fixture) -> CheckResult {
    let instances = start_instances(f, INSTANCES).await;
    let mut last = 0;
    for i in 0..MANY {
        // Round-robin, as the harness does: with instance-owned schedules
        // each order lives in exactly one instance.
        let owner = &instances[i as usize % instances.len()];
        let order = f
            .create_scheduled(i + 1, 200 + 5 * i, &*owner.instance)
            .await;
        last = order.expire_at_us;
    }
    f.try_wait_for_due_cancels(last).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mut attempts, mut absorbed) = (0, 0);
    for running in instances {
        let stats = running.instance.store_stats();
        attempts += stats.cancel_attempts;
        absorbed += stats.already_cancelled;
        running.try_stop().await?;
    }
    let verdict = f.verdict_if_clean().await?;
    let n = MANY as u64;
    ensure!(
        verdict.orders.cancelled == n && verdict.releases == n,
        "{}: {} cancelled, {} releases; expected {n} and {n}",
        f.describe(),
        verdict.orders.cancelled,
        verdict.releases
    );
    ensure!(
        attempts >= n,
        "{}: instances reported {attempts} attempts for {n} cancels",
        f.describe()
    );
    ensure!(
        absorbed * 10 <= n,
        "{}: {INSTANCES} instances made {attempts} cancel attempts for {n} orders, {absorbed} \
         of them on orders another instance had already cancelled: the instances repeat each \
         other's work instead of splitting it",
        f.describe()
    );
    Ok(())
}

/// Orders scheduled through an instance that never runs are cancelled on
/// time by another instance that does. Gated on `!instance_owns_its_orders`.
///
/// The running instance first cancels one warm-up order scheduled the same
/// way ([`Fixture::warm_up`]): the subject is who cancels, and an instance
/// just spawned may still be connecting when the first 250 ms deadline
/// passes (once in CI, on the three-node RabbitMQ cluster, the first
/// order was cancelled 954 ms after its 250 ms deadline).
pub async fn any_instance_cancels_any_order(f: &Fixture) -> CheckResult {
    let scheduler = f.instance().await;
    let running = Running::start(f.instance().await);
    f.warm_up(100, 250, &*scheduler).await?;
    let mut orders = Vec::new();
    for i in 0..10 {
        let order = f
            .create_scheduled(i + 1, [250, 500][i as usize % 2], &*scheduler)
            .await;
        orders.push(order);
    }
    let last = orders.iter().map(|o| o.expire_at_us).max().unwrap();
    f.try_wait_for_due_cancels(last).await?;
    running.try_stop().await?;
    f.cancelled_within(&orders, LATENESS_BOUND).await?;
    f.verdict_if_clean().await?;
    Ok(())
}

/// Kill and restart, without a fallback: see [`kill_and_restart`]. Gated on
/// `durable_across_restart`.
pub async fn kill_every_instance_then_restart(f: &Fixture) -> CheckResult {
    kill_and_restart(f, false).await
}

/// The same with `fallback-scan` on every instance, the combination a
/// strategy that is not durable is meant to run in. Gated on
/// `needs_fallback` where `durable_across_restart` is false.
pub async fn kill_every_instance_then_restart_with_fallback(f: &Fixture) -> CheckResult {
    kill_and_restart(f, true).await
}

/// Two instances A and B run; orders are scheduled on them in turn, a first
/// group due in 1 s and a second due in 3 s. A is stopped and dropped at
/// once, before any deadline: B must cancel A's first-group orders within
/// [`LATENESS_BOUND`] (plus the fallback's grace and interval when it runs
/// with one): a dead instance's work does not wait for it to come back. Then B is stopped and dropped too, and the second group's
/// deadlines pass with nothing running (those orders must still be
/// PENDING: a stopped instance cancels nothing). A fresh instance C, never
/// told about any order, then cancels all of them, and the checker is clean.
///
/// "Killed" here is a stop and a drop inside the test process, so the
/// strategy's own state (an in-process wheel, a connection) goes away while
/// the services keep theirs; a real SIGKILL is the harness's fault, and a
/// restart of Redis or RabbitMQ is not part of the suite.
async fn kill_and_restart(f: &Fixture, fallback: bool) -> CheckResult {
    let mut options = f.options().clone();
    let mut bound = LATENESS_BOUND;
    if fallback {
        options.fallback_scan.enabled = true;
        options.fallback_scan.interval = Duration::from_millis(100);
        options.fallback_scan.grace = Duration::from_millis(100);
        bound += options.fallback_scan.interval + options.fallback_scan.grace;
    }
    let a = Running::start(f.instance_with(&options).await);
    let b = Running::start(f.instance_with(&options).await);
    let mut first = Vec::new();
    let mut second = Vec::new();
    for i in 0..10 {
        let (id, due_in, group) = if i < 5 {
            (i + 1, 1_000, &mut first)
        } else {
            (i + 1, 3_000, &mut second)
        };
        let on = if i % 2 == 0 { &a } else { &b };
        let order = f.create_scheduled(id, due_in, &*on.instance).await;
        group.push(order);
    }
    let killed_at = now_us();
    let first_due = first.iter().map(|o| o.expire_at_us).min().unwrap();
    assert!(
        killed_at < first_due,
        "the machine stalled past the first deadline before the kill"
    );
    a.try_stop().await?;
    let first_last = first.iter().map(|o| o.expire_at_us).max().unwrap();
    let give_up = first_last + bound.as_micros() as i64;
    // Either way, the lateness judgement below names what B left behind.
    let _ = f.wait_for_overdue_at_most(0, give_up, first_last).await;
    f.cancelled_within(&first, bound)
        .await
        .map_err(|e| format!("{e} (instance A was stopped before the deadline; B ran)"))?;
    b.try_stop().await?;
    let second_last = second.iter().map(|o| o.expire_at_us).max().unwrap();
    let second_first = second.iter().map(|o| o.expire_at_us).min().unwrap();
    assert!(
        now_us() < second_first,
        "the machine stalled past the second group's deadlines before the last kill"
    );
    tokio::time::sleep(Duration::from_micros(
        (second_last - now_us()).max(0) as u64 + 200_000,
    ))
    .await;
    for o in &second {
        let status = f.status(o.id).await;
        ensure!(
            status == OrderStatus::Pending,
            "{}: order {} is {} although every instance was stopped before its deadline",
            f.describe(),
            o.id,
            status.as_str()
        );
    }
    let c = Running::start(f.instance_with(&options).await);
    let outcome = f.try_wait_for_due_cancels(second_last).await;
    c.try_stop().await?;
    outcome.map_err(|e| {
        format!("{e} (every instance was stopped across their deadlines, then a fresh one started)")
    })?;
    let verdict = f.verdict_if_clean().await?;
    ensure!(
        verdict.orders.cancelled == 10,
        "{}: {} of 10 orders cancelled",
        f.describe(),
        verdict.orders.cancelled
    );
    Ok(())
}
