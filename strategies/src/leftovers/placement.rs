//! Where a run's queues live on a RabbitMQ cluster: the node hosting each
//! (a quorum queue's leader, a classic queue's home node), from the
//! management API of the cluster's first listed node. A fault aimed at
//! "the broker node hosting the queue" asks it when it fires.

use super::broker::BrokerAddress;
use super::management::{build_client, get_list};

/// Each of the run's queues (`dlb.<prefix>.*`) with the node hosting it,
/// from the management API that `amqp_url`'s first node names
/// (`?management=`, or the default port of its host), sorted by name.
/// The error says why it could not be told.
pub async fn queue_nodes(
    amqp_url: &str,
    prefix: &str,
) -> std::result::Result<Vec<(String, String)>, String> {
    let first = crate::rabbit::nodes::split(amqp_url)
        .into_iter()
        .next()
        .ok_or_else(|| "no broker URL".to_string())?;
    let address = BrokerAddress::of(first).await.map_err(|e| e.to_string())?;
    let client = build_client(address.api_client().map_err(|e| e.to_string())?)?;
    let vhost = url::form_urlencoded::byte_serialize(address.uri.vhost.as_bytes())
        .collect::<String>()
        .replace('/', "%2F");
    let path = format!("/api/queues/{vhost}?columns=name,type,node,leader");
    let items = get_list(&client, &address.api_root, &path, &address.uri).await?;
    Ok(hosts(&items, prefix))
}

/// The queues of `items` (the API's answer) named `dlb.<prefix>.*`, each
/// with its host: `leader` where the API gives one (a quorum queue), else
/// `node` (a classic queue's home).
fn hosts(items: &[serde_json::Value], prefix: &str) -> Vec<(String, String)> {
    let own = format!("dlb.{prefix}.");
    let mut found: Vec<(String, String)> = items
        .iter()
        .filter_map(|item| {
            let name = item["name"].as_str()?;
            let host = item["leader"]
                .as_str()
                .filter(|l| !l.is_empty())
                .or_else(|| item["node"].as_str())?;
            name.starts_with(&own)
                .then(|| (name.to_string(), host.to_string()))
        })
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::hosts;
    use serde_json::json;

    #[test]
    fn a_quorum_queue_is_hosted_by_its_leader_and_a_classic_one_by_its_node() {
        let items = [
            json!({"name": "dlb.r1.work", "type": "quorum", "node": "dlb2@localhost", "leader": "dlb1@localhost"}),
            json!({"name": "dlb.r1.wait.2000ms", "type": "classic", "node": "dlb3@localhost"}),
            json!({"name": "dlb.r2.work", "type": "classic", "node": "dlb2@localhost"}),
            json!({"name": "other", "type": "classic", "node": "dlb2@localhost"}),
        ];
        assert_eq!(
            hosts(&items, "r1"),
            vec![
                (
                    "dlb.r1.wait.2000ms".to_string(),
                    "dlb3@localhost".to_string()
                ),
                ("dlb.r1.work".to_string(), "dlb1@localhost".to_string()),
            ]
        );
    }
}
