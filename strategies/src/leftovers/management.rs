//! Listing a broker's queues and exchanges through the RabbitMQ
//! management HTTP API (`GET /api/queues/<vhost>`, `/api/exchanges/<vhost>`
//! on port 15672 of the broker's host), with the AMQP URL's credentials.

use super::objects::{BrokerKind, BrokerObject};
use std::time::Duration;

/// GET `/api/queues/<vhost>` and `/api/exchanges/<vhost>` with the AMQP
/// URL's credentials, over plain HTTP/1.0.
pub(super) async fn list_over_http(
    uri: &amq_protocol::uri::AMQPUri,
) -> std::result::Result<Vec<BrokerObject>, String> {
    let vhost = url::form_urlencoded::byte_serialize(uri.vhost.as_bytes())
        .collect::<String>()
        .replace('/', "%2F");
    let auth = base64(&format!(
        "{}:{}",
        uri.authority.userinfo.username, uri.authority.userinfo.password
    ));
    let mut objects = Vec::new();
    for (kind, path) in [
        (
            BrokerKind::Queue,
            format!("/api/queues/{vhost}?columns=name,messages"),
        ),
        (
            BrokerKind::Exchange,
            format!("/api/exchanges/{vhost}?columns=name"),
        ),
    ] {
        let body = http_get(&uri.authority.host, 15672, &path, &auth).await?;
        let items: Vec<serde_json::Value> =
            serde_json::from_str(&body).map_err(|e| format!("unexpected answer to {path}: {e}"))?;
        objects.extend(items.iter().filter_map(|item| {
            let name = item["name"].as_str()?;
            name.starts_with("dlb.").then(|| BrokerObject {
                kind,
                name: name.to_string(),
                messages: item["messages"].as_u64(),
            })
        }));
    }
    Ok(objects)
}

async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    auth: &str,
) -> std::result::Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await?;
        let request = format!(
            "GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nAuthorization: Basic {auth}\r\n\
             Accept: application/json\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no answer within 5s".to_string())?
        .map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| "malformed HTTP answer".to_string())?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(format!("{path}: {status}"));
    }
    Ok(body.to_string())
}

/// The Basic authorization value of `text` (`user:password`).
fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_pads() {
        assert_eq!(base64("guest:guest"), "Z3Vlc3Q6Z3Vlc3Q=");
        assert_eq!(base64("a"), "YQ==");
        assert_eq!(base64("abc"), "YWJj");
    }
}
