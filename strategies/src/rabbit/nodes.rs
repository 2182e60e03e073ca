//! Several broker URLs for one cluster: `url = "amqp://…:5681,amqp://…:5682"`.
//!
//! RabbitMQ clients do not discover a cluster's nodes; they are given a
//! list and connect to the first that answers. A connection that dies
//! (its node stopped) is replaced by one to the next node in the list, so
//! the strategy goes on as long as one listed node serves AMQP and the
//! queues it needs have a live replica (quorum) or home node (classic).

use crate::redact;
use lapin::{Connection, ConnectionProperties};

/// The URLs of a `url` setting: one, or several separated by commas.
pub fn split(url: &str) -> Vec<&str> {
    url.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect()
}

/// Connects to the first of `urls` that accepts, trying them in order from
/// `first` (wrapping around). Returns the connection and the index of the
/// URL it went to; or, when none accepted, every URL's reason.
pub async fn connect_first(
    urls: &[&str],
    first: usize,
) -> std::result::Result<(Connection, usize), String> {
    let mut reasons = Vec::new();
    for step in 0..urls.len() {
        let index = (first + step) % urls.len();
        match crate::tls::amqp_connect(urls[index], ConnectionProperties::default()).await {
            Ok(connection) => return Ok((connection, index)),
            Err(e) => reasons.push(format!("{}: {e}", redact::url(urls[index]))),
        }
    }
    if reasons.is_empty() {
        return Err("no URL given".into());
    }
    Err(reasons.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_list_and_redacts_every_password() {
        let url = "amqp://guest:secret@127.0.0.1:5681/%2f, amqp://guest:secret@127.0.0.1:5682/%2f";
        assert_eq!(
            split(url),
            [
                "amqp://guest:secret@127.0.0.1:5681/%2f",
                "amqp://guest:secret@127.0.0.1:5682/%2f"
            ]
        );
        assert_eq!(split("amqp://h/%2f"), ["amqp://h/%2f"]);
        let redacted = crate::redact::url(url);
        assert!(!redacted.contains("secret"), "{redacted}");
        assert_eq!(redacted.matches("***").count(), 2, "{redacted}");
    }
}
