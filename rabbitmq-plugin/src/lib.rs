//! `delaybench-rabbitmq-plugin`: the project's own, clean-room RabbitMQ
//! plugin providing the `x-delayed-message` exchange type, plus the
//! client-side helpers its tests and the accuracy example share.
//!
//! The plugin itself is Erlang, in `rabbitmq-plugin/src/*.erl`; build and
//! enable it on the local broker with `bash rabbitmq-plugin/install.sh`
//! (see `rabbitmq-plugin/README.md`). This crate holds no Erlang: it is the
//! Cargo package that runs the plugin's tests (`tests/plugin.rs`) against
//! the real broker as part of `cargo test --workspace`, and the accuracy
//! measurement (`examples/accuracy.rs`).
//!
//! How the exchange type is used from AMQP:
//! - declare an exchange of type [`EXCHANGE_TYPE`] with the argument
//!   [`ARG_DELAYED_TYPE`] naming the routing type (`direct`, `topic`,
//!   `headers`, `fanout`) — see [`delayed_exchange_args`];
//! - publish with the header [`HEADER_DELAY`] set to a delay in
//!   milliseconds — see [`delay_headers`]; the message is routed by the
//!   underlying type, to the queues bound at that time, once the delay has
//!   passed. Without the header, or with a delay `<= 0`, it is routed at once.

use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Connection, ConnectionProperties};

/// The broker URL used when `DELAYBENCH_AMQP_URL` is not set.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// Environment variable overriding [`DEFAULT_AMQP_URL`].
pub const AMQP_URL_ENV: &str = "DELAYBENCH_AMQP_URL";
/// Name of the Erlang plugin (the OTP application) that `install.sh` enables.
pub const PLUGIN_NAME: &str = "delaybench_delayed_exchange";
/// The exchange type the plugin registers.
pub const EXCHANGE_TYPE: &str = "x-delayed-message";
/// Exchange argument naming the type that routes the messages.
pub const ARG_DELAYED_TYPE: &str = "x-delayed-type";
/// Message header carrying the delay in milliseconds.
pub const HEADER_DELAY: &str = "x-delay";
/// What to run when the plugin is missing.
pub const INSTALL_HINT: &str =
    "run `bash rabbitmq-plugin/install.sh` (as root) to build and enable it";

/// Environment variable naming the broker's Erlang node (e.g.
/// `dlbplug@localhost`) for the `rabbitmqctl` calls of the tests; unset,
/// `rabbitmqctl` picks its default node (`RABBITMQ_NODENAME` or
/// `rabbit@<host>`).
pub const RABBIT_NODE_ENV: &str = "DELAYBENCH_RABBIT_NODE";

/// `["-n", node]` when [`RABBIT_NODE_ENV`] is set (and not empty), else
/// nothing: the arguments that make `rabbitmqctl` talk to the broker under
/// test.
pub fn rabbitmqctl_node_args() -> Vec<String> {
    match std::env::var(RABBIT_NODE_ENV) {
        Ok(node) if !node.is_empty() => vec!["-n".to_owned(), node],
        _ => Vec::new(),
    }
}

/// The broker URL: `DELAYBENCH_AMQP_URL` or [`DEFAULT_AMQP_URL`].
pub fn amqp_url() -> String {
    std::env::var(AMQP_URL_ENV).unwrap_or_else(|_| DEFAULT_AMQP_URL.to_owned())
}

/// Connects to `url`, turning a failure into a message that names the URL
/// and what to do.
pub async fn connect(url: &str) -> Result<Connection, String> {
    Connection::connect(url, ConnectionProperties::default())
        .await
        .map_err(|e| {
            format!(
                "cannot reach the RabbitMQ broker at {url} ({e}); start it \
                 (e.g. `rabbitmq-server -detached`, as root) or set {AMQP_URL_ENV}; \
                 the delayed-message plugin must be enabled too: {INSTALL_HINT}"
            )
        })
}

/// Checks that the broker at `url` serves [`EXCHANGE_TYPE`], by declaring
/// and deleting a throw-away exchange on a connection of its own (an
/// unknown exchange type closes the whole connection).
pub async fn check_plugin(url: &str) -> Result<(), String> {
    let conn = connect(url).await?;
    let result = async {
        let ch = conn.create_channel().await?;
        let name = format!("delaybench-plugin-check-{}", std::process::id());
        let options = lapin::options::ExchangeDeclareOptions {
            auto_delete: true,
            ..Default::default()
        };
        declare_delayed_exchange(&ch, &name, "direct", options).await?;
        ch.exchange_delete(name.as_str().into(), Default::default())
            .await?;
        Ok::<_, lapin::Error>(())
    }
    .await;
    let _ = conn.close(200, "bye".into()).await;
    result.map_err(|e| {
        format!(
            "the broker at {url} does not serve the exchange type {EXCHANGE_TYPE} \
             ({e}): the plugin {PLUGIN_NAME} is not enabled; {INSTALL_HINT}"
        )
    })
}

/// Declares `name` as an [`EXCHANGE_TYPE`] exchange routing as
/// `delayed_type` (`direct`, `topic`, `headers`, `fanout`) with `options`.
pub async fn declare_delayed_exchange(
    ch: &lapin::Channel,
    name: &str,
    delayed_type: &str,
    options: lapin::options::ExchangeDeclareOptions,
) -> Result<(), lapin::Error> {
    ch.exchange_declare(
        name.into(),
        lapin::ExchangeKind::Custom(EXCHANGE_TYPE.into()),
        options,
        delayed_exchange_args(delayed_type),
    )
    .await
}

/// Exchange arguments for an `x-delayed-message` exchange routing as
/// `delayed_type`.
pub fn delayed_exchange_args(delayed_type: &str) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert(
        ShortString::from(ARG_DELAYED_TYPE),
        AMQPValue::LongString(LongString::from(delayed_type)),
    );
    args
}

/// Message headers holding `x-delay: delay_ms` (a signed 64-bit integer).
pub fn delay_headers(delay_ms: i64) -> FieldTable {
    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from(HEADER_DELAY),
        AMQPValue::LongLongInt(delay_ms),
    );
    headers
}

/// A name unique to this process and call, for test exchanges and queues.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "delaybench-{prefix}-{}-{nanos:x}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}
