//! What one run's queues hold on a broker, for a backlog's holdings: the
//! messages in its queues, the messages in the delayed-message store, and
//! the broker's memory.
//!
//! On this host's default node one `rabbitmqctl eval` reads all three at
//! once. Any other broker (a remote one, a node of the local cluster, one
//! in a container) is read through its management API and AMQP: the API
//! names the run's queues and the nodes' memory, a passive declare over
//! AMQP gives each queue's count as it is now (the API's counts are its
//! last statistics collection, 5 s old by default). The plugin's store
//! has no reading there.

use super::broker::{rabbitmqctl, BrokerAddress};
use super::management::{build_client, get_list, list_with};
use super::objects::{broker_prefix, BrokerKind};
use crate::error::{Error, Result};
use crate::redact;
use std::time::Duration;

/// What [`broker_holdings`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerHoldings {
    /// Messages in the run's queues.
    pub queued: u64,
    /// Messages in the delayed-message store; `None` when its plugin's
    /// store is not running or could not be read (see `notes`).
    pub delayed: Option<u64>,
    /// Bytes the broker's nodes use, summed; with the API, as of its last
    /// statistics collection.
    pub memory: u64,
    /// How it was read (`rabbitmqctl`, or the API's URL).
    pub source: String,
    /// What could not be read, in words.
    pub notes: Vec<String>,
}

/// The holdings of the run whose resource prefix is `prefix` on the broker
/// of `amqp_url`. A cluster's list of URLs is read through the first node
/// that answers (one node's API answers for the whole cluster: every
/// node's memory, every queue); the error is the first node's.
pub async fn broker_holdings(amqp_url: &str, prefix: &str) -> Result<BrokerHoldings> {
    let mut first_error = None;
    for node in crate::rabbit::nodes::split(amqp_url) {
        match node_holdings(node, prefix).await {
            Ok(held) => return Ok(held),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error
        .unwrap_or_else(|| Error::Config(format!("no AMQP URL in `{}`", redact::url(amqp_url)))))
}

async fn node_holdings(amqp_url: &str, prefix: &str) -> Result<BrokerHoldings> {
    let address = BrokerAddress::of(amqp_url).await?;
    let mut ctl_error = None;
    if address.default_node {
        match with_rabbitmqctl(prefix).await {
            Ok(held) => return Ok(held),
            Err(e) => ctl_error = Some(e),
        }
    }
    let api = format!("{}/api", address.api_root);
    match over_api(&address, amqp_url, prefix).await {
        Ok(held) => Ok(held),
        Err(http_error) => {
            let reason = match ctl_error {
                Some(ctl) => format!("rabbitmqctl: {ctl}; management API {api}: {http_error}"),
                None => format!(
                    "management API {api}: {http_error}; rabbitmqctl answers only for the \
                     default node of the broker's own host"
                ),
            };
            Err(Error::unreachable(
                "RabbitMQ (reading its holdings)",
                redact::url(amqp_url),
                reason,
                format!(
                    "enable the broker's management API (`rabbitmq-plugins enable \
                     rabbitmq_management`), or name it in the URL with `{}=https://host:port`",
                    crate::tls::MANAGEMENT_PARAM
                ),
            ))
        }
    }
}

async fn over_api(
    address: &BrokerAddress,
    amqp_url: &str,
    prefix: &str,
) -> std::result::Result<BrokerHoldings, String> {
    let root = &address.api_root;
    let client = build_client(address.api_client().map_err(|e| e.to_string())?)?;
    let start = broker_prefix(prefix);
    let queues: Vec<String> = list_with(&client, root, &address.uri)
        .await?
        .into_iter()
        .filter(|o| o.kind == BrokerKind::Queue && o.name.starts_with(&start))
        .map(|o| o.name)
        .collect();
    let nodes = get_list(
        &client,
        root,
        "/api/nodes?columns=name,mem_used",
        &address.uri,
    )
    .await?;
    let memory = nodes.iter().filter_map(|n| n["mem_used"].as_u64()).sum();
    let queued = count_over_amqp(amqp_url, &queues).await?;
    Ok(BrokerHoldings {
        queued,
        delayed: None,
        memory,
        source: format!("management API {root}/api and AMQP"),
        notes: vec![
            "the delayed-message store's count is read with rabbitmqctl on the broker's \
             host only: not read"
                .into(),
            "the broker's memory is its nodes' `mem_used` as the API reports it (by default \
             the resident size the OS gives), where rabbitmqctl reads `erlang:memory(total)`: \
             the two are not the same measure"
                .into(),
        ],
    })
}

/// Each queue's messages now, by a passive declare (which fails, and
/// closes its channel, for a queue that is gone: counted as none).
async fn count_over_amqp(amqp_url: &str, queues: &[String]) -> std::result::Result<u64, String> {
    if queues.is_empty() {
        return Ok(0);
    }
    let (conn, _) = crate::rabbit::nodes::connect_first(&[amqp_url], 0).await?;
    let mut total = 0;
    for name in queues {
        let channel = conn.create_channel().await.map_err(|e| e.to_string())?;
        let options = lapin::options::QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        if let Ok(queue) = channel
            .queue_declare(name.as_str().into(), options, Default::default())
            .await
        {
            total += u64::from(queue.message_count());
            let _ = channel.close(200, "counted".into()).await;
        }
    }
    let _ = conn.close(200, "holdings read".into()).await;
    Ok(total)
}

/// Messages in the run's queues, in the delayed store (`-1` when the
/// plugin's store is not running), and the node's memory, in one eval.
async fn with_rabbitmqctl(prefix: &str) -> std::result::Result<BrokerHoldings, String> {
    let expr = format!(
        "Qs = [Q || Q <- rabbit_amqqueue:list(), \
               binary:match(element(4, amqqueue:get_name(Q)), <<\"{}\">>) =/= nomatch], \
         Msgs = lists:sum([N || Q <- Qs, {{messages, N}} <- rabbit_amqqueue:info(Q, [messages])]), \
         Delayed = try delaybench_delayed_store:count() catch _:_ -> -1 end, \
         {{Msgs, Delayed, erlang:memory(total)}}.",
        broker_prefix(prefix)
    );
    let text = rabbitmqctl(&["-q", "eval", &expr], Duration::from_secs(60))
        .await
        .map_err(|e| format!("rabbitmqctl eval: {e}"))?;
    let numbers: Vec<i64> = text
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    match numbers[..] {
        [queued, delayed, memory] => Ok(BrokerHoldings {
            queued: queued.max(0) as u64,
            delayed: (delayed >= 0).then_some(delayed as u64),
            memory: memory.max(0) as u64,
            source: "rabbitmqctl".into(),
            notes: Vec::new(),
        }),
        _ => Err(format!("unexpected rabbitmqctl reply {:?}", text.trim())),
    }
}
