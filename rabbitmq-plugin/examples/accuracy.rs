//! Accuracy of the `x-delayed-message` plugin with many pending messages.
//!
//! Publishes N messages (default 10 000) with `x-delay` drawn uniformly
//! from [MIN_MS, MAX_MS] (default 5000..=10000), in random order, to a
//! delayed direct exchange; consumes them and prints the lateness
//! (arrival − (publish instant + x-delay)) percentiles.
//!
//! Publishes are confirmed one by one, so the broker computed each due
//! time between the publish instant used here and its confirm: the figures
//! are upper bounds, too high by at most the confirm round trip (printed).
//!
//! ```text
//! CARGO_TARGET_DIR=/tmp/plugin-target cargo run --release \
//!     -p delaybench-rabbitmq-plugin --example accuracy -- [N [MIN_MS MAX_MS]]
//! ```

use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::BasicProperties;
use rabbitmq_plugin::{
    amqp_url, check_plugin, connect, declare_delayed_exchange, delay_headers, unique_name,
};
use rand::seq::SliceRandom;
use rand::RngExt;

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map(|s| s.parse().expect("numeric argument"))
        .unwrap_or(default)
}

fn pct(sorted: &[i64], p: f64) -> i64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = arg(1, 10_000) as usize;
    let (min_ms, max_ms) = (arg(2, 5_000), arg(3, 10_000));
    assert!(n > 0 && min_ms > 0 && min_ms <= max_ms, "bad arguments");

    let url = amqp_url();
    check_plugin(&url).await?;
    let conn = connect(&url).await?;
    let pub_ch = conn.create_channel().await?;
    let sub_ch = conn.create_channel().await?;

    let x = unique_name("accuracy-x");
    let options = ExchangeDeclareOptions {
        auto_delete: true,
        ..Default::default()
    };
    declare_delayed_exchange(&pub_ch, &x, "direct", options).await?;
    let q = sub_ch
        .queue_declare(
            "".into(),
            QueueDeclareOptions {
                exclusive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let q = q.name().as_str().to_owned();
    sub_ch
        .queue_bind(
            q.as_str().into(),
            x.as_str().into(),
            "k".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let mut consumer = sub_ch
        .basic_consume(
            q.as_str().into(),
            "".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;

    let mut rng = rand::rng();
    let mut delays: Vec<u64> = (0..n).map(|_| rng.random_range(min_ms..=max_ms)).collect();
    delays.shuffle(&mut rng);

    println!(
        "publishing {n} messages, x-delay uniform in [{min_ms}, {max_ms}] ms, random order, to {x}"
    );
    let start = Instant::now();
    pub_ch
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    // The broker's due time of message i lies in [due[i], due_hi[i]].
    let mut due = Vec::with_capacity(n);
    let mut due_hi = Vec::with_capacity(n);
    let mut confirm_rtt = Vec::with_capacity(n);
    for (i, d) in delays.iter().enumerate() {
        let sent = Instant::now();
        pub_ch
            .basic_publish(
                x.as_str().into(),
                "k".into(),
                BasicPublishOptions::default(),
                i.to_string().as_bytes(),
                BasicProperties::default().with_headers(delay_headers(*d as i64)),
            )
            .await?
            .await?;
        let confirmed = Instant::now();
        confirm_rtt.push(confirmed.duration_since(sent).as_micros() as i64);
        due.push(sent + Duration::from_millis(*d));
        due_hi.push(confirmed + Duration::from_millis(*d));
    }
    let published_in = start.elapsed();
    confirm_rtt.sort_unstable();
    println!(
        "published (each confirmed) in {published_in:?} ({:.0} msg/s); confirm round trip p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms, > 2 ms: {}",
        n as f64 / published_in.as_secs_f64(),
        pct(&confirm_rtt, 0.5) as f64 / 1000.0,
        pct(&confirm_rtt, 0.99) as f64 / 1000.0,
        *confirm_rtt.last().expect("non-empty") as f64 / 1000.0,
        confirm_rtt.iter().filter(|r| **r > 2000).count(),
    );
    if published_in.as_millis() as u64 >= min_ms {
        println!("warning: publishing took longer than the shortest delay; messages were released while publishing");
    }

    let mut lateness_us = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut out_of_order = 0usize;
    let mut last_due: Option<Instant> = None;
    let deadline = Duration::from_millis(max_ms) + Duration::from_secs(30);
    while lateness_us.len() < n {
        let left = deadline.saturating_sub(start.elapsed());
        let delivery = match tokio::time::timeout(left, consumer.next()).await {
            Ok(Some(d)) => d?,
            Ok(None) => return Err("consumer ended".into()),
            Err(_) => {
                return Err(format!(
                    "only {} of {n} messages arrived within {deadline:?}",
                    lateness_us.len()
                )
                .into())
            }
        };
        let arrived = Instant::now();
        let i: usize = std::str::from_utf8(&delivery.data)?.parse()?;
        assert!(!seen[i], "message {i} delivered twice");
        seen[i] = true;
        // Arrived after a message that was surely due later than itself?
        if let Some(prev) = last_due {
            if due_hi[i] < prev {
                out_of_order += 1;
            }
        }
        last_due = Some(last_due.map_or(due[i], |p| p.max(due[i])));
        let late = if arrived >= due[i] {
            arrived.duration_since(due[i]).as_micros() as i64
        } else {
            -(due[i].duration_since(arrived).as_micros() as i64)
        };
        lateness_us.push(late);
    }
    lateness_us.sort_unstable();
    let early = lateness_us.iter().filter(|l| **l < 0).count();
    let ms = |us: i64| us as f64 / 1000.0;
    println!(
        "lateness over {n} messages (ms): min {:.3}, p50 {:.3}, p90 {:.3}, p99 {:.3}, p99.9 {:.3}, max {:.3}",
        ms(lateness_us[0]),
        ms(pct(&lateness_us, 0.50)),
        ms(pct(&lateness_us, 0.90)),
        ms(pct(&lateness_us, 0.99)),
        ms(pct(&lateness_us, 0.999)),
        ms(*lateness_us.last().expect("non-empty")),
    );
    println!("early (before due): {early}; out of due-time order: {out_of_order}");
    let _ = conn.close(200, "done".into()).await;
    Ok(())
}
