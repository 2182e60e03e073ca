//! Queue and exchange names and declarations for one run's namespace.
//!
//! ```text
//! rabbit-ttl:     publish -> dlb.<ns>.wait.<ttl> --(TTL, dead-letter)--> dlb.<ns>.work
//! rabbit-delayed: publish -> dlb.<ns>.delayed (x-delayed-message) --(x-delay)--> dlb.<ns>.work
//! single-queue:   publish -> dlb.<ns>.single (per-message expiration) --> dlb.<ns>.work
//! malformed:      dlb.<ns>.work --(reject, dead-letter)--> dlb.<ns>.dead
//! ```
//!
//! With `shards = n` above 1, rabbit-ttl and rabbit-delayed have n work
//! queues, `dlb.<ns>.work` and `dlb.<ns>.work.<k>` for k in 1..n, and
//! rabbit-ttl n wait queues per TTL (`dlb.<ns>.wait.<ttl>` and
//! `….<ttl>.<k>`), shard k's wait queue dead-lettering into shard k's work
//! queue; the delayed exchange binds each work queue under its own name.
//! An order's shard is its id modulo n. One dead-letter queue serves all.

use super::config::{Mode, QueueType, RabbitConfig};
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

    /// Shard `k`'s work queue; shard 0's is `work`.
    pub fn work_shard(&self, k: u16) -> String {
        match k {
            0 => self.work.clone(),
            k => format!("{}.{k}", self.work),
        }
    }

    /// Shard `k`'s wait queue for `ttl_ms`; shard 0's is `wait(ttl_ms)`.
    pub fn wait_shard(&self, ttl_ms: u64, k: u16) -> String {
        match k {
            0 => self.wait(ttl_ms),
            k => format!("{}.{k}", self.wait(ttl_ms)),
        }
    }
}

/// The shard an order's messages go through: its id modulo `shards`
/// ([`crate::domain::slot_of`], as an instance's share).
pub fn shard_of(order_id: i64, shards: u16) -> u16 {
    crate::domain::slot_of(order_id, u32::from(shards)) as u16
}

/// How many shards `mode` uses: the configured count, except for the
/// single-queue teaching variant, whose one queue is its point.
pub fn shards(mode: Mode, config: &RabbitConfig) -> u16 {
    match mode {
        Mode::SingleQueue => 1,
        Mode::Ttl | Mode::Delayed => config.shards.max(1),
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
    if let (QueueType::Classic, Some(version)) = (config.queue_type, config.queue_version) {
        args.insert(
            ShortString::from("x-queue-version"),
            AMQPValue::LongLongInt(i64::from(version)),
        );
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
    ch.queue_declare(
        names.dead.as_str().into(),
        durable(),
        queue_args(config, None),
    )
    .await?;
    let shards = shards(mode, config);
    for k in 0..shards {
        ch.queue_declare(
            names.work_shard(k).as_str().into(),
            durable(),
            queue_args(config, Some(&names.dead)),
        )
        .await?;
    }
    match mode {
        Mode::Ttl => {
            for ttl in config.ttl_ms() {
                for k in 0..shards {
                    let mut args = queue_args(config, Some(&names.work_shard(k)));
                    args.insert(
                        ShortString::from("x-message-ttl"),
                        AMQPValue::LongLongInt(ttl as i64),
                    );
                    ch.queue_declare(names.wait_shard(ttl, k).as_str().into(), durable(), args)
                        .await?;
                }
            }
        }
        Mode::Delayed => {
            let mut args = FieldTable::default();
            args.insert(ShortString::from("x-delayed-type"), text("direct"));
            ch.exchange_declare(
                names.delayed_exchange.as_str().into(),
                ExchangeKind::Custom(DELAYED_EXCHANGE_TYPE.into()),
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                args,
            )
            .await?;
            for k in 0..shards {
                let work = names.work_shard(k);
                ch.queue_bind(
                    work.as_str().into(),
                    names.delayed_exchange.as_str().into(),
                    work.as_str().into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await?;
            }
        }
        Mode::SingleQueue => {
            ch.queue_declare(
                names.single.as_str().into(),
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
    let shards = shards(mode, config);
    let mut queues: Vec<String> = (0..shards).map(|k| names.work_shard(k)).collect();
    queues.push(names.dead.clone());
    match mode {
        Mode::Ttl => {
            for ttl in config.ttl_ms() {
                queues.extend((0..shards).map(|k| names.wait_shard(ttl, k)));
            }
        }
        Mode::Delayed => {
            ch.exchange_delete(names.delayed_exchange.as_str().into(), Default::default())
                .await?;
        }
        Mode::SingleQueue => queues.push(names.single.clone()),
    }
    for q in queues {
        ch.queue_delete(q.as_str().into(), Default::default())
            .await?;
    }
    Ok(())
}

/// What a broker says about itself over AMQP, so a compose user (no
/// `rabbitmqctl` on the host) gets the same facts as a local one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerFacts {
    /// `product` and `version` from the connection's server properties,
    /// e.g. `RabbitMQ 3.10.8`.
    pub version: String,
    /// Whether an `x-delayed-message` exchange can be declared (a plugin
    /// serves the type).
    pub delayed_exchange: bool,
}

/// Reads the server properties and tries to declare a throw-away,
/// auto-deleted `x-delayed-message` exchange (deleted at once). `url` may
/// list a cluster's nodes: the first that answers is probed.
pub async fn broker_facts(url: &str) -> crate::error::Result<BrokerFacts> {
    let list = url;
    let unreachable = |reason: String| {
        crate::error::Error::unreachable(
            "RabbitMQ",
            crate::redact::url(list),
            reason,
            "start RabbitMQ: `docker compose up -d --wait rabbitmq`, or on a Debian host \
               `rabbitmq-server -detached`; or pass --amqp / DELAYBENCH_AMQP"
                .into(),
        )
    };
    let broker_error = |e: lapin::Error| crate::error::Error::Broker {
        service: "RabbitMQ",
        context: "probing the broker",
        message: e.to_string(),
    };
    let urls = super::nodes::split(list);
    let (connection, index) = super::nodes::connect_first(&urls, 0)
        .await
        .map_err(unreachable)?;
    let url = urls[index];
    let version = match server_properties(url).await {
        Ok(properties) => {
            let property = |key: &str| match properties.inner().get(key) {
                Some(AMQPValue::LongString(s)) => Some(s.to_string()),
                Some(AMQPValue::ShortString(s)) => Some(s.to_string()),
                _ => None,
            };
            format!(
                "{} {}",
                property("product").unwrap_or_else(|| "AMQP broker".into()),
                property("version").unwrap_or_else(|| "(version not announced)".into())
            )
        }
        Err(e) => format!("AMQP broker (version unknown: {e})"),
    };
    let channel = connection.create_channel().await.map_err(broker_error)?;
    let name = format!("dlb.probe.{}", std::process::id());
    let mut args = FieldTable::default();
    args.insert(ShortString::from("x-delayed-type"), text("direct"));
    let declared = channel
        .exchange_declare(
            name.as_str().into(),
            ExchangeKind::Custom(DELAYED_EXCHANGE_TYPE.into()),
            ExchangeDeclareOptions {
                auto_delete: true,
                ..ExchangeDeclareOptions::default()
            },
            args,
        )
        .await;
    let delayed_exchange = declared.is_ok();
    if delayed_exchange {
        channel
            .exchange_delete(
                name.as_str().into(),
                lapin::options::ExchangeDeleteOptions::default(),
            )
            .await
            .map_err(broker_error)?;
    }
    // An unknown exchange type closes the channel, not the connection.
    let _ = connection.close(200, "probe done".into()).await;
    Ok(BrokerFacts {
        version,
        delayed_exchange,
    })
}

/// The `server-properties` of the broker's `connection.start`, which lapin
/// reads but does not keep: open a TCP connection, send the protocol
/// header, parse the first frame with lapin's own protocol crate, hang up.
/// Under `amqps://` the stream is TLS with the URL's CA and client
/// certificate ([`crate::tls::amqp_stream`]).
async fn server_properties(url: &str) -> std::result::Result<FieldTable, String> {
    use amq_protocol::frame::{parsing::parse_frame, AMQPFrame};
    use amq_protocol::protocol::{connection, AMQPClass};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let read = async {
        let mut stream = crate::tls::amqp_stream(url)
            .await
            .map_err(std::io::Error::other)?;
        stream.write_all(b"AMQP\x00\x00\x09\x01").await?;
        // type (1), channel (2), payload size (4); then payload and 0xCE.
        let mut frame = vec![0u8; 7];
        stream.read_exact(&mut frame).await?;
        let size = u32::from_be_bytes([frame[3], frame[4], frame[5], frame[6]]) as usize;
        if size > 1 << 20 {
            return Err(std::io::Error::other("first frame larger than 1 MiB"));
        }
        frame.resize(7 + size + 1, 0);
        stream.read_exact(&mut frame[7..]).await?;
        Ok(frame)
    };
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), read)
        .await
        .map_err(|_| "no connection.start within 5s".to_string())?
        .map_err(|e| e.to_string())?;
    match parse_frame(frame.as_slice()) {
        Ok((
            _,
            AMQPFrame::Method(_, AMQPClass::Connection(connection::AMQPMethod::Start(start))),
        )) => Ok(start.server_properties),
        Ok((_, other)) => Err(format!("unexpected first frame {other:?}")),
        Err(e) => Err(format!("unparsable first frame: {e:?}")),
    }
}
