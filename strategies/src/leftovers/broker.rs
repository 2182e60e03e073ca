//! The project's queues and exchanges on a RabbitMQ broker: listed from
//! the management HTTP API when it answers, else with `rabbitmqctl` when
//! the broker is on this host (AMQP cannot list queues), and deleted over
//! AMQP.

use super::management::list_over_http;
use super::objects::{broker_prefix, BrokerKind, BrokerObject};
use crate::error::{Error, Result};
use crate::redact;
use std::time::Duration;

/// The project's (`dlb.*`) queues and exchanges on the broker of
/// `amqp_url`'s virtual host, and which source listed them (the
/// management API's URL or `rabbitmqctl`).
pub async fn list_broker(amqp_url: &str) -> Result<(Vec<BrokerObject>, String)> {
    // The management API and rabbitmqctl found from a URL's host would
    // answer for whichever broker owns port 15672 / the default node there,
    // not necessarily the listed cluster's.
    if crate::rabbit::nodes::split(amqp_url).len() > 1 {
        return Err(Error::unreachable(
            "RabbitMQ (listing queues)",
            redact::url(amqp_url),
            "listing the leftovers of a cluster given as several URLs is not supported".into(),
            "list them on one node, e.g. `scripts/rabbitmq-cluster.sh ctl 1 list_queues \
                   name messages` for the local cluster"
                .into(),
        ));
    }
    let address = BrokerAddress::of(amqp_url).await?;
    let (root, uri, client) = (&address.api_root, &address.uri, address.api_client()?);
    let api = format!("{root}/api");
    let http_error = match list_over_http(root, uri, client).await {
        Ok(objects) => return Ok((objects, format!("management API {api}"))),
        Err(e) => e,
    };
    if address.default_node {
        match list_with_rabbitmqctl(&uri.vhost).await {
            Ok(objects) => return Ok((objects, "rabbitmqctl".into())),
            Err(e) => {
                return Err(unlisted(
                    amqp_url,
                    format!("management API {api}: {http_error}; rabbitmqctl: {e}"),
                ))
            }
        }
    }
    Err(unlisted(
        amqp_url,
        format!(
            "management API {api}: {http_error}; rabbitmqctl answers only for the default \
             node of the broker's own host"
        ),
    ))
}

/// Where a broker given by one AMQP URL is, for the ways of reading it
/// that AMQP lacks: its management API, and `rabbitmqctl` when it is this
/// host's default node.
pub(super) struct BrokerAddress {
    pub uri: amq_protocol::uri::AMQPUri,
    /// The management API's root (`https://host:15671`, or the URL's
    /// `management=`).
    pub api_root: String,
    /// Whether `rabbitmqctl` reaches it: this host's default node serves
    /// 5672 (and 5671 over TLS); for a broker on another port (a node of
    /// the local cluster, a test node) or one whose API was named, it would
    /// read another broker.
    pub default_node: bool,
    url: String,
}

impl BrokerAddress {
    /// Parses `amqp_url` and checks the broker answers on its port.
    pub async fn of(amqp_url: &str) -> Result<BrokerAddress> {
        let config =
            |e: String| Error::Config(format!("AMQP URL `{}`: {e}", redact::url(amqp_url)));
        let uri: amq_protocol::uri::AMQPUri = crate::tls::amqp_url_without_files(amqp_url)
            .map_err(config)?
            .parse()
            .map_err(config)?;
        let host = uri.authority.host.clone();
        let reachable = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect((host.as_str(), uri.authority.port)),
        )
        .await;
        if let Err(reason) = reachable
            .map_err(|_| "no connection within 5s".to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
        {
            return Err(Error::unreachable(
                "RabbitMQ",
                redact::url(amqp_url),
                reason,
                "start RabbitMQ: `docker compose up -d --wait rabbitmq`, or on a Debian host \
                       `rabbitmq-server -detached`; or pass --amqp / DELAYBENCH_AMQP"
                    .into(),
            ));
        }
        let api_root =
            crate::tls::management_root(amqp_url, &host, uri.authority.port).map_err(config)?;
        let default_node = matches!(host.as_str(), "127.0.0.1" | "localhost" | "::1")
            && matches!(uri.authority.port, 5672 | 5671)
            && crate::tls::management_given(amqp_url).is_none();
        Ok(BrokerAddress {
            uri,
            api_root,
            default_node,
            url: amqp_url.to_string(),
        })
    }

    /// A client for the management API, with the URL's TLS files.
    pub fn api_client(&self) -> Result<reqwest::ClientBuilder> {
        crate::tls::management_client(&self.url)
            .map_err(|e| Error::Config(format!("AMQP URL `{}`: {e}", redact::url(&self.url))))
    }
}

/// `rabbitmqctl ARGS` on this host's default node: its output, or why it
/// gave none (no answer within `limit`, not runnable, a failed status with
/// what it printed on stderr).
pub(super) async fn rabbitmqctl(
    args: &[&str],
    limit: Duration,
) -> std::result::Result<String, String> {
    let output = tokio::time::timeout(
        limit,
        tokio::process::Command::new("rabbitmqctl")
            .args(args)
            .output(),
    )
    .await
    .map_err(|_| format!("no answer within {}s", limit.as_secs()))?
    .map_err(|e| format!("cannot run it: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn unlisted(amqp_url: &str, reason: String) -> Error {
    // (A refused certificate gets the hint naming the URL parameter
    // instead: Error::unreachable.)
    let hint = format!(
        "start RabbitMQ (`docker compose up -d --wait rabbitmq`, or on a Debian host \
             `rabbitmq-server -detached`) and enable its management API \
             (`rabbitmq-plugins enable rabbitmq_management`), or run on the broker's host; \
             an API at another address is named in the URL with `{}=https://host:port`",
        crate::tls::MANAGEMENT_PARAM
    );
    Error::unreachable(
        "RabbitMQ (listing queues)",
        redact::url(amqp_url),
        reason,
        hint,
    )
}

async fn list_with_rabbitmqctl(vhost: &str) -> std::result::Result<Vec<BrokerObject>, String> {
    let run = |args: Vec<&'static str>| {
        let mut all = vec!["-q", "--no-table-headers", "-p", vhost];
        all.extend(args);
        async move { rabbitmqctl(&all, Duration::from_secs(30)).await }
    };
    let mut objects = Vec::new();
    for line in run(vec!["list_queues", "name", "messages"]).await?.lines() {
        let mut fields = line.split('\t');
        let name = fields.next().unwrap_or_default().trim();
        if name.starts_with("dlb.") {
            objects.push(BrokerObject {
                kind: BrokerKind::Queue,
                name: name.to_string(),
                messages: fields.next().and_then(|m| m.trim().parse().ok()),
            });
        }
    }
    for line in run(vec!["list_exchanges", "name"]).await?.lines() {
        let name = line.trim();
        if name.starts_with("dlb.") {
            objects.push(BrokerObject {
                kind: BrokerKind::Exchange,
                name: name.to_string(),
                messages: None,
            });
        }
    }
    Ok(objects)
}

/// Deletes `objects` over AMQP (a queue with its messages); returns how
/// many went. One failure does not stop the others: the first is returned
/// after all were tried.
pub async fn delete_broker(amqp_url: &str, objects: &[BrokerObject]) -> Result<usize> {
    if objects.is_empty() {
        return Ok(0);
    }
    let urls = crate::rabbit::nodes::split(amqp_url);
    let (conn, _) = crate::rabbit::nodes::connect_first(&urls, 0)
        .await
        .map_err(|reason| {
            Error::unreachable(
                "RabbitMQ",
                redact::url(amqp_url),
                reason,
                "start RabbitMQ: `docker compose up -d --wait rabbitmq`, or on a Debian host \
                   `rabbitmq-server -detached`"
                    .into(),
            )
        })?;
    let broker_error = |e: lapin::Error| Error::Broker {
        service: "RabbitMQ",
        context: "deleting leftover queues and exchanges",
        message: e.to_string(),
    };
    let (mut deleted, mut first_error) = (0, None);
    for object in objects {
        // A failed delete closes its channel: one channel per object.
        let outcome = match conn.create_channel().await {
            Ok(ch) => {
                let done = match object.kind {
                    BrokerKind::Queue => ch
                        .queue_delete(object.name.as_str().into(), Default::default())
                        .await
                        .map(drop),
                    BrokerKind::Exchange => {
                        ch.exchange_delete(object.name.as_str().into(), Default::default())
                            .await
                    }
                };
                let _ = ch.close(200, "deleted".into()).await;
                done
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => deleted += 1,
            Err(e) => {
                first_error.get_or_insert(broker_error(e));
            }
        }
    }
    let _ = conn.close(200, "leftovers deleted".into()).await;
    match first_error {
        Some(e) => Err(e),
        None => Ok(deleted),
    }
}

/// Deletes every queue and exchange of the run with resource prefix
/// `prefix` that the broker lists (see [`list_broker`]).
pub async fn delete_broker_prefix(amqp_url: &str, prefix: &str) -> Result<usize> {
    let (objects, _) = list_broker(amqp_url).await?;
    let start = broker_prefix(prefix);
    let mine: Vec<BrokerObject> = objects
        .into_iter()
        .filter(|o| o.name.starts_with(&start))
        .collect();
    delete_broker(amqp_url, &mine).await
}
