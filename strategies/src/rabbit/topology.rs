//! Queue and exchange names and declarations for one run's namespace.
//!
//! ```text
//! rabbit-ttl:     publish -> dlb.<ns>.wait.<ttl> --(TTL, dead-letter)--> dlb.<ns>.work
//! rabbit-delayed: publish -> dlb.<ns>.delayed (x-delayed-message) --(x-delay)--> dlb.<ns>.work
//! single-queue:   publish -> dlb.<ns>.single (per-message expiration) --> dlb.<ns>.work
//! malformed:      dlb.<ns>.work --(reject, dead-letter)--> dlb.<ns>.dead
//! ```

use super::config::{QueueType, RabbitConfig};
use super::Mode;
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, ExchangeKind};

/// The exchange type the project's plugin (or the community one) provides.
pub const DELAYED_EXCHANGE_TYPE: &str = "x-delayed-message";

/// Every name one strategy run uses.
#[derive(Debug, Clone)]
pub struct Names {
    pub work: String,
    pub dead: String,
    pub single: String,
    pub delayed_exchange: String,
    prefix: String,
}

impl Names {
    pub fn new(prefix: &str) -> Names {
        Names {
            work: format!("dlb.{prefix}.work"),
            dead: format!("dlb.{prefix}.dead"),
            single: format!("dlb.{prefix}.single"),
            delayed_exchange: format!("dlb.{prefix}.delayed"),
            prefix: prefix.to_string(),
        }
    }

    pub fn wait(&self, ttl_ms: u64) -> String {
        format!("dlb.{}.wait.{ttl_ms}ms", self.prefix)
    }
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

fn queue_args(config: &RabbitConfig, dead_letter_to: Option<&str>) -> FieldTable {
    let mut args = FieldTable::default();
    if let Some(target) = dead_letter_to {
        args.insert(ShortString::from("x-dead-letter-exchange"), text(""));
        args.insert(ShortString::from("x-dead-letter-routing-key"), text(target));
    }
    if config.queue_type == QueueType::Quorum {
        args.insert(ShortString::from("x-queue-type"), text("quorum"));
        if dead_letter_to.is_some() {
            args.insert(
                ShortString::from("x-dead-letter-strategy"),
                text("at-least-once"),
            );
            args.insert(ShortString::from("x-overflow"), text("reject-publish"));
        }
    }
    args
}

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    }
}

/// Declares everything `mode` needs (idempotent).
pub async fn declare(
    ch: &Channel,
    names: &Names,
    mode: Mode,
    config: &RabbitConfig,
) -> lapin::Result<()> {
    ch.queue_declare(&names.dead, durable(), queue_args(config, None))
        .await?;
    ch.queue_declare(
        &names.work,
        durable(),
        queue_args(config, Some(&names.dead)),
    )
    .await?;
    match mode {
        Mode::Ttl => {
            for ttl in config.ttl_ms() {
                let mut args = queue_args(config, Some(&names.work));
                args.insert(
                    ShortString::from("x-message-ttl"),
                    AMQPValue::LongLongInt(ttl as i64),
                );
                ch.queue_declare(&names.wait(ttl), durable(), args).await?;
            }
        }
        Mode::Delayed => {
            let mut args = FieldTable::default();
            args.insert(ShortString::from("x-delayed-type"), text("direct"));
            ch.exchange_declare(
                &names.delayed_exchange,
                ExchangeKind::Custom(DELAYED_EXCHANGE_TYPE.into()),
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                args,
            )
            .await?;
            ch.queue_bind(
                &names.work,
                &names.delayed_exchange,
                &names.work,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        }
        Mode::SingleQueue => {
            ch.queue_declare(
                &names.single,
                durable(),
                queue_args(config, Some(&names.work)),
            )
            .await?;
        }
    }
    Ok(())
}

/// Deletes everything `mode` declared.
pub async fn delete(
    ch: &Channel,
    names: &Names,
    mode: Mode,
    config: &RabbitConfig,
) -> lapin::Result<()> {
    let mut queues = vec![names.work.clone(), names.dead.clone()];
    match mode {
        Mode::Ttl => queues.extend(config.ttl_ms().into_iter().map(|t| names.wait(t))),
        Mode::Delayed => {
            ch.exchange_delete(&names.delayed_exchange, Default::default())
                .await?;
        }
        Mode::SingleQueue => queues.push(names.single.clone()),
    }
    for q in queues {
        ch.queue_delete(&q, Default::default()).await?;
    }
    Ok(())
}
