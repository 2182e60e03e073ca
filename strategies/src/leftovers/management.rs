//! Listing a broker's queues and exchanges through the RabbitMQ
//! management HTTP API (`GET /api/queues/<vhost>`, `/api/exchanges/<vhost>`
//! on port 15672 of the broker's host, or over HTTPS on 15671 under
//! `amqps://`), with the AMQP URL's credentials and TLS files,
//! over reqwest.
//!
//! The credentials go in the `Authorization` header (reqwest marks it
//! sensitive), never in the URL, so no URL an error names holds a
//! password. The client asks the broker's host itself: no proxy from the
//! environment and no redirect, as the API answers these paths directly.

use super::objects::{BrokerKind, BrokerObject};
use std::time::Duration;

/// How long one request may take, from connecting to the end of its body.
const ANSWER_LIMIT: Duration = Duration::from_secs(5);

/// The project's (`dlb.*`) queues and exchanges of `uri`'s virtual host,
/// from the management API at `root` ([`crate::tls::management_root`]),
/// asked with `uri`'s user and password through `client` (with the
/// broker URL's TLS files: [`crate::tls::management_client`]). An error
/// names the request and why it failed.
pub(super) async fn list_over_http(
    root: &str,
    uri: &amq_protocol::uri::AMQPUri,
    client: reqwest::ClientBuilder,
) -> std::result::Result<Vec<BrokerObject>, String> {
    list_with(&build_client(client)?, root, uri).await
}

/// The API's client from `builder` (the broker URL's TLS files): each
/// answer within [`ANSWER_LIMIT`], the broker's host asked directly (no
/// proxy from the environment, no redirect).
pub(super) fn build_client(
    builder: reqwest::ClientBuilder,
) -> std::result::Result<reqwest::Client, String> {
    builder
        .timeout(ANSWER_LIMIT)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("no HTTP client: {}", with_causes(e)))
}

/// [`list_over_http`] with a client already built ([`build_client`]).
pub(super) async fn list_with(
    client: &reqwest::Client,
    root: &str,
    uri: &amq_protocol::uri::AMQPUri,
) -> std::result::Result<Vec<BrokerObject>, String> {
    let vhost = url::form_urlencoded::byte_serialize(uri.vhost.as_bytes())
        .collect::<String>()
        .replace('/', "%2F");
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
        let items = get_list(client, root, &path, uri).await?;
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

/// GET `root` + `path`: the JSON list the API answers with `200 OK`.
pub(super) async fn get_list(
    client: &reqwest::Client,
    root: &str,
    path: &str,
    uri: &amq_protocol::uri::AMQPUri,
) -> std::result::Result<Vec<serde_json::Value>, String> {
    let failed = |e: reqwest::Error| {
        if e.is_timeout() {
            format!("{path}: no answer within {}s", ANSWER_LIMIT.as_secs())
        } else if e.is_decode() {
            format!("unexpected answer to {path}: {}", with_causes(e))
        } else {
            format!("{path}: {}", with_causes(e))
        }
    };
    let user = &uri.authority.userinfo;
    let response = client
        .get(format!("{root}{path}"))
        .basic_auth(&user.username, Some(&user.password))
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        return Err(format!("{path}: HTTP {status}"));
    }
    response.json().await.map_err(failed)
}

/// `e` and its causes, `: `-separated (`error sending request: client
/// error (Connect): tcp connect error: Connection refused (os error
/// 111)`; [`crate::causes::with_causes`]), without the URL reqwest adds:
/// the caller names the request.
fn with_causes(e: reqwest::Error) -> String {
    crate::causes::with_causes(&e.without_url())
}

#[cfg(test)]
mod tests {
    //! The client against a tiny local HTTP server that answers with
    //! canned replies in the management API's format (a fixture of the
    //! API, not a stand-in for the broker's behaviour: the tests of
    //! `tests/leftovers.rs` list a real broker).

    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// `GET /api/queues/%2F?columns=name,messages` and
    /// `/api/exchanges/%2F?columns=name` as RabbitMQ answers them: a JSON
    /// list of objects holding the asked columns (`messages` absent for a
    /// queue whose statistics are not in yet).
    const QUEUES: &str = r#"[{"messages":3,"name":"dlb.t_1.delay"},{"messages":0,"name":"orders.paid"},{"name":"dlb.t_1.fresh"}]"#;
    const EXCHANGES: &str =
        r#"[{"name":""},{"name":"amq.direct"},{"name":"dlb.t_1.dlx"},{"name":"dlb.t_1.delayed"}]"#;

    /// What the server answers a request whose head is the argument:
    /// `None` never answers (holds the connection open).
    type Answer = fn(&str) -> Option<(&'static str, String)>;

    /// Serves `answer` on 127.0.0.1 until the test ends; returns the API
    /// root and the request heads received.
    async fn serve(answer: Answer) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let root = format!("http://{}", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    seen.lock().unwrap().push(head.clone());
                    let Some((status, body)) = answer(&head) else {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        (root, heads)
    }

    /// A client for a plain-HTTP API.
    fn plain() -> reqwest::ClientBuilder {
        crate::tls::management_client("amqp://127.0.0.1/%2f").unwrap()
    }

    fn uri() -> amq_protocol::uri::AMQPUri {
        "amqp://guest:s3cret@127.0.0.1:5672/%2f".parse().unwrap()
    }

    fn the_api(head: &str) -> Option<(&'static str, String)> {
        let body = if head.starts_with("GET /api/queues/") {
            QUEUES
        } else {
            EXCHANGES
        };
        Some(("200 OK", body.to_string()))
    }

    #[tokio::test]
    async fn lists_the_projects_queues_and_exchanges_with_the_urls_credentials() {
        let (root, heads) = serve(the_api).await;
        let objects = list_over_http(&root, &uri(), plain()).await.unwrap();
        let queue = |name: &str, messages| BrokerObject {
            kind: BrokerKind::Queue,
            name: name.into(),
            messages,
        };
        let exchange = |name: &str| BrokerObject {
            kind: BrokerKind::Exchange,
            name: name.into(),
            messages: None,
        };
        assert_eq!(
            objects,
            [
                queue("dlb.t_1.delay", Some(3)),
                queue("dlb.t_1.fresh", None),
                exchange("dlb.t_1.dlx"),
                exchange("dlb.t_1.delayed"),
            ]
        );
        let heads = heads.lock().unwrap().clone();
        let lines: Vec<&str> = heads.iter().map(|h| h.lines().next().unwrap()).collect();
        assert_eq!(
            lines,
            [
                "GET /api/queues/%2F?columns=name,messages HTTP/1.1",
                "GET /api/exchanges/%2F?columns=name HTTP/1.1",
            ]
        );
        for head in &heads {
            let head = head.to_ascii_lowercase();
            // base64("guest:s3cret")
            assert!(
                head.contains("authorization: basic z3vlc3q6cznjcmv0\r\n"),
                "{head}"
            );
            assert!(head.contains("accept: application/json\r\n"), "{head}");
        }
    }

    #[tokio::test]
    async fn a_refused_request_is_named_with_its_status_and_no_password() {
        let (root, _) = serve(|_| Some(("401 Unauthorized", "{}".into()))).await;
        let error = list_over_http(&root, &uri(), plain()).await.unwrap_err();
        assert_eq!(
            error,
            "/api/queues/%2F?columns=name,messages: HTTP 401 Unauthorized"
        );
    }

    #[tokio::test]
    async fn an_answer_that_is_not_the_apis_list_is_named() {
        let (root, _) = serve(|_| Some(("200 OK", "<html>login</html>".into()))).await;
        let error = list_over_http(&root, &uri(), plain()).await.unwrap_err();
        assert!(
            error.starts_with("unexpected answer to /api/queues/%2F?columns=name,messages: "),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_closed_port_names_the_cause() {
        // A port that was free a moment ago: nothing listens there.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let root = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let error = list_over_http(&root, &uri(), plain()).await.unwrap_err();
        assert!(error.contains("refused"), "{error}");
        assert!(!error.contains("s3cret"), "{error}");
    }

    #[tokio::test]
    async fn a_silent_server_is_given_up_after_the_limit() {
        let (root, _) = serve(|_| None).await;
        let started = std::time::Instant::now();
        let error = list_over_http(&root, &uri(), plain()).await.unwrap_err();
        assert_eq!(
            error,
            "/api/queues/%2F?columns=name,messages: no answer within 5s"
        );
        assert!(
            started.elapsed() < ANSWER_LIMIT * 2,
            "{:?}",
            started.elapsed()
        );
    }
}
