//! TLS to every service, asked for by the service's own URL in the words
//! its own tools use. A URL so carries everything needed to reach its
//! service: it flows unchanged to the worker processes, `run.json` and the
//! reports, and no separate flag can disagree with it.
//!
//! | service | TLS on | CA (else the system's roots) | client certificate, key |
//! |---|---|---|---|
//! | PostgreSQL | `?sslmode=verify-full` (or `require`, `verify-ca`) | `sslrootcert=` | `sslcert=`, `sslkey=` |
//! | MariaDB / MySQL | `?ssl-mode=VERIFY_IDENTITY` (or `REQUIRED`, `VERIFY_CA`) | `ssl-ca=` | `ssl-cert=`, `ssl-key=` |
//! | Redis | `rediss://` | `cacert=` | `cert=`, `key=` |
//! | RabbitMQ | `amqps://` | `cacertfile=` | `certfile=`, `keyfile=` |
//!
//! PostgreSQL's are libpq's and MariaDB's the `mariadb` client's, both
//! read by sqlx itself; Redis' are `redis-cli`'s flags and RabbitMQ's the
//! query parameters of its own URI spec, which this module takes out of
//! the URL before the client sees it. With `amqps://` the management API
//! is asked over HTTPS on port 15671 with the same files, or at the root
//! the URL's `management=` names ([`MANAGEMENT_PARAM`]).
//!
//! Every client is rustls over `ring`; a refused certificate is an
//! [`Error::Unreachable`](crate::Error::Unreachable) whose hint
//! ([`refusal_hint`]) names the URL parameter that fixes it.

use rustls::pki_types::pem::PemObject;
use std::path::{Path, PathBuf};

/// The TLS files a URL names: the CA that signed the server's
/// certificate, and a client certificate with its key (PEM files).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// A client certificate's and its key's PEM.
struct IdentityPem {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// A service's names for the three files in its URL's query.
#[derive(Debug, Clone, Copy)]
struct Names {
    ca: &'static str,
    cert: &'static str,
    key: &'static str,
}

const POSTGRES: Names = Names {
    ca: "sslrootcert",
    cert: "sslcert",
    key: "sslkey",
};
const MYSQL: Names = Names {
    ca: "ssl-ca",
    cert: "ssl-cert",
    key: "ssl-key",
};
const REDIS: Names = Names {
    ca: "cacert",
    cert: "cert",
    key: "key",
};
const AMQP: Names = Names {
    ca: "cacertfile",
    cert: "certfile",
    key: "keyfile",
};

/// The parameter names of `url`'s service, from its scheme.
fn names_of(url: &str) -> Option<Names> {
    let scheme = url.split("://").next()?;
    Some(match scheme {
        "postgres" | "postgresql" => POSTGRES,
        "mysql" | "mariadb" => MYSQL,
        s if s.starts_with("redis") => REDIS,
        "amqp" | "amqps" => AMQP,
        _ => return None,
    })
}

impl TlsFiles {
    fn is_empty(&self) -> bool {
        self == &TlsFiles::default()
    }

    /// The CA's PEM, if one is named.
    fn ca_pem(&self, names: Names) -> Result<Option<Vec<u8>>, String> {
        self.ca
            .as_deref()
            .map(|p| read(p, names.ca, "CA certificate"))
            .transpose()
    }

    /// The client certificate's and key's PEM, if both are named; one
    /// without the other is an error naming the missing parameter.
    fn identity_pem(&self, names: Names) -> Result<Option<IdentityPem>, String> {
        match (&self.cert, &self.key) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => Ok(Some(IdentityPem {
                cert: read(cert, names.cert, "client certificate")?,
                key: read(key, names.key, "client key")?,
            })),
            (Some(_), None) => Err(format!(
                "`{}=` is given without `{}=`",
                names.cert, names.key
            )),
            (None, Some(_)) => Err(format!(
                "`{}=` is given without `{}=`",
                names.key, names.cert
            )),
        }
    }
}

fn read(path: &Path, param: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path)
        .map_err(|e| format!("{param}=: cannot read the {what} {}: {e}", path.display()))
}

/// `url` without the TLS file parameters `names` takes out, and the
/// files they named. A URL without them is returned as it was, byte for
/// byte.
fn take_files(url: &str, names: Names) -> Result<(String, TlsFiles), String> {
    let Some((_, query)) = url.split_once('?') else {
        return Ok((url.to_string(), TlsFiles::default()));
    };
    let ours = |k: &str| k == names.ca || k == names.cert || k == names.key;
    if !url::form_urlencoded::parse(query.as_bytes()).any(|(k, _)| ours(&k)) {
        return Ok((url.to_string(), TlsFiles::default()));
    }
    let mut parsed = url::Url::parse(url)
        .map_err(|e| format!("`{}` is not a URL: {e}", crate::redact::url(url)))?;
    let mut files = TlsFiles::default();
    let mut kept = Vec::new();
    for (k, v) in parsed.query_pairs() {
        let path = Some(PathBuf::from(v.as_ref()));
        match k.as_ref() {
            k if k == names.ca => files.ca = path,
            k if k == names.cert => files.cert = path,
            k if k == names.key => files.key = path,
            _ => kept.push((k.into_owned(), v.into_owned())),
        }
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok((parsed.into(), files))
}

/// The URL a database client connects with: `url` itself when it names a
/// TLS mode (`sslmode=` on PostgreSQL, `ssl-mode=` on MariaDB/MySQL), else
/// `url` with TLS off (`sslmode=disable`, `ssl-mode=DISABLED`).
///
/// sqlx's own default is to prefer TLS, which, with TLS built in, would
/// quietly encrypt every connection to a server that offers it (this
/// machine's PostgreSQL does): a run's figures would change with the
/// server's settings rather than the user's URL, and no longer compare with
/// the runs made before TLS support. So TLS is what the URL asks for, and
/// only that. Other URLs (SQLite) are returned as they were.
pub fn database_url(url: &str) -> String {
    let mode = match url.split("://").next() {
        Some("postgres" | "postgresql") => ("sslmode", "disable"),
        Some("mysql" | "mariadb") => ("ssl-mode", "DISABLED"),
        _ => return url.to_string(),
    };
    let named = url.split_once('?').is_some_and(|(_, query)| {
        url::form_urlencoded::parse(query.as_bytes()).any(|(k, _)| k == mode.0)
    });
    if named {
        url.to_string()
    } else {
        let joint = if url.contains('?') { '&' } else { '?' };
        format!("{url}{joint}{}={}", mode.0, mode.1)
    }
}

/// The TLS files `url` names in its service's words (none for SQLite or a
/// scheme this module does not know).
pub fn files_of(url: &str) -> Result<TlsFiles, String> {
    match names_of(url) {
        Some(names) => take_files(url, names).map(|(_, files)| files),
        None => Ok(TlsFiles::default()),
    }
}

/// A Redis client for `url` (`redis://`, or `rediss://` with `cacert=`,
/// `cert=` and `key=` as `redis-cli` takes them); the error says what is
/// wrong with the URL or its files.
pub fn redis_client(url: &str) -> Result<redis::Client, String> {
    let (plain, files) = take_files(url, REDIS)?;
    if files.is_empty() {
        return redis::Client::open(plain.as_str()).map_err(|e| e.to_string());
    }
    if !plain.starts_with("rediss://") {
        return Err("cacert=, cert= and key= need a rediss:// URL (TLS)".into());
    }
    let certificates = redis::TlsCertificates {
        client_tls: files.identity_pem(REDIS)?.map(|id| redis::ClientTlsConfig {
            client_cert: id.cert,
            client_key: id.key,
        }),
        root_cert: files.ca_pem(REDIS)?,
    };
    redis::Client::build_with_tls(plain.as_str(), certificates).map_err(|e| e.to_string())
}

/// Connects to the broker at `url` (`amqp://`, or `amqps://` with
/// `cacertfile=`, `certfile=` and `keyfile=` as RabbitMQ's URI spec
/// names them); the error is the client's, with its causes.
pub async fn amqp_connect(
    url: &str,
    properties: lapin::ConnectionProperties,
) -> Result<lapin::Connection, String> {
    let (plain, files) = take_files(url, AMQP)?;
    if files.is_empty() {
        return lapin::Connection::connect(&plain, properties)
            .await
            .map_err(|e| crate::causes::with_causes(&e));
    }
    if !plain.starts_with("amqps://") {
        return Err("cacertfile=, certfile= and keyfile= need an amqps:// URL (TLS)".into());
    }
    let config = lapin::tcp::OwnedTLSConfig {
        identity: files
            .identity_pem(AMQP)?
            .map(|id| lapin::tcp::OwnedIdentity::PKCS8 {
                pem: id.cert,
                key: id.key,
            }),
        cert_chain: files
            .ca_pem(AMQP)?
            .map(|pem| String::from_utf8_lossy(&pem).into_owned()),
    };
    let runtime = lapin::runtime::default_runtime().map_err(|e| crate::causes::with_causes(&e))?;
    lapin::Connection::connect_with_config(&plain, properties, config, runtime)
        .await
        .map_err(|e| crate::causes::with_causes(&e))
}

/// `url` (an AMQP URL) without the TLS file parameters, for a parser that
/// does not know them.
pub fn amqp_url_without_files(url: &str) -> Result<String, String> {
    take_files(url, AMQP).map(|(plain, _)| plain)
}

/// The AMQP URL's query parameter naming the management API's root, for a
/// broker that does not serve it on the default port of its own host (a
/// managed broker answers on 443, often at another name):
/// `amqps://u:p@broker:5671/%2f?management=https://console.example:443`.
/// Not in RabbitMQ's URI spec; the AMQP client ignores parameters it does
/// not know, so the URL stays one string that reaches every part.
pub const MANAGEMENT_PARAM: &str = "management";

/// The `management=` root `amqp_url` names, if it names one.
pub fn management_given(amqp_url: &str) -> Option<String> {
    let (_, query) = amqp_url.split_once('?')?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == MANAGEMENT_PARAM)
        .map(|(_, v)| v.into_owned())
}

/// The management API's root for a broker reached at `amqp_url` on
/// `host:port`: the URL's `management=` ([`MANAGEMENT_PARAM`]) when it
/// names one, else, for a broker on AMQP's own port (5672, 5671 under
/// `amqps://`), `https://<host>:15671` under `amqps://` and
/// `http://<host>:15672` under `amqp://` (an IPv6 address in brackets).
/// The error names a `management=` that is not an `http(s)://` root, that
/// carries credentials (the API is asked with the AMQP URL's), or that is
/// plain `http://` under `amqps://` (the credentials would cross in clear
/// text); and a broker on another port without one: the API on its host's
/// default port would be another broker's (a node of a local cluster, a
/// test node beside the host's broker).
pub fn management_root(amqp_url: &str, host: &str, port: u16) -> Result<String, String> {
    if let Some(given) = management_given(amqp_url) {
        let parsed = url::Url::parse(&given)
            .map_err(|e| format!("`{MANAGEMENT_PARAM}={given}` is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(format!(
                "`{MANAGEMENT_PARAM}={given}`: the management API's root is an http:// or \
                 https:// URL with a host, e.g. `{MANAGEMENT_PARAM}=https://broker.example:443`"
            ));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!(
                "`{MANAGEMENT_PARAM}=` carries a user: the API is asked with the AMQP URL's \
                 user and password, so leave them out of `{MANAGEMENT_PARAM}=`"
            ));
        }
        if parsed.scheme() == "http" && amqp_url.starts_with("amqps://") {
            return Err(format!(
                "`{MANAGEMENT_PARAM}={given}` is plain http:// under amqps://: the API is asked \
                 with the AMQP URL's user and password, which would cross in clear text; give \
                 its https:// root"
            ));
        }
        return Ok(given.trim_end_matches('/').to_string());
    }
    if !matches!(port, 5672 | 5671) {
        return Err(format!(
            "the broker listens on port {port}, not AMQP's 5672/5671, so its management API \
             is not assumed to be on {host}'s default port (that one would be another \
             broker's); name it in the URL with `{MANAGEMENT_PARAM}=http(s)://host:port`"
        ));
    }
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    Ok(if amqp_url.starts_with("amqps://") {
        format!("https://{host}:15671")
    } else {
        format!("http://{host}:15672")
    })
}

/// An HTTP client builder that trusts the CA of `amqp_url` and presents
/// its client certificate, for the broker's management API.
pub fn management_client(amqp_url: &str) -> Result<reqwest::ClientBuilder, String> {
    install_ring();
    let files = take_files(amqp_url, AMQP)?.1;
    let mut builder = reqwest::Client::builder();
    if let Some(pem) = files.ca_pem(AMQP)? {
        let ca = reqwest::Certificate::from_pem(&pem).map_err(|e| format!("cacertfile=: {e}"))?;
        builder = builder.tls_certs_merge([ca]);
    }
    if let Some(IdentityPem { mut cert, key }) = files.identity_pem(AMQP)? {
        // reqwest takes the certificate and the key in one PEM.
        cert.push(b'\n');
        cert.extend_from_slice(&key);
        let identity = reqwest::Identity::from_pem(&cert).map_err(|e| format!("certfile=: {e}"))?;
        builder = builder.identity(identity);
    }
    Ok(builder)
}

/// A TCP or TLS stream, as one type.
pub trait ByteStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> ByteStream for T {}

/// A byte stream to the broker of `url`: TCP, and under `amqps://` TLS on
/// it with the URL's CA (else the system's roots) and client certificate,
/// for reading the handshake's first frame ([`crate::rabbit::broker_facts`]).
pub async fn amqp_stream(url: &str) -> Result<Box<dyn ByteStream>, String> {
    let (plain, files) = take_files(url, AMQP)?;
    let uri: amq_protocol::uri::AMQPUri = plain.parse()?;
    let host = uri.authority.host.clone();
    let tcp = tokio::net::TcpStream::connect((host.as_str(), uri.authority.port))
        .await
        .map_err(|e| e.to_string())?;
    if uri.scheme != amq_protocol::uri::AMQPScheme::AMQPS {
        return Ok(Box::new(tcp));
    }
    install_ring();
    let mut roots = rustls::RootCertStore::empty();
    match files.ca_pem(AMQP)? {
        Some(pem) => {
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| format!("cacertfile=: {e}"))?;
                roots.add(cert).map_err(|e| format!("cacertfile=: {e}"))?;
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match files.identity_pem(AMQP)? {
        Some(IdentityPem { cert, key }) => {
            let chain = rustls::pki_types::CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("certfile=: {e}"))?;
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| format!("keyfile=: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("certfile=/keyfile=: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    let name = rustls::pki_types::ServerName::try_from(host.clone())
        .map_err(|e| format!("`{host}` as a TLS server name: {e}"))?;
    let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| crate::causes::with_causes(&e))?;
    Ok(Box::new(tls))
}

/// Makes ring the process's rustls provider, which reqwest (built without
/// its own) needs before any client, HTTP or HTTPS, is built. Idempotent.
fn install_ring() {
    // Deprecated since rustls 0.23.48 for lacking post-quantum key
    // exchange, which aws-lc-rs has; ring keeps the build free of cmake and
    // is what sqlx, redis and lapin use here too. Err: already installed.
    #[allow(deprecated)]
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What fixes a refused TLS connection to `url`, when `reason` (the
/// client's error, causes included) is one; `None` for other failures.
pub fn refusal_hint(url: &str, reason: &str) -> Option<String> {
    let names = names_of(url)?;
    let has = |needle: &str| {
        reason
            .to_ascii_lowercase()
            .contains(&needle.to_ascii_lowercase())
    };
    let hint = if has("UnknownIssuer") || has("unknown issuer") || has("BadSignature") {
        format!(
            "the server's certificate is not signed by a CA this client trusts: name the CA's \
             PEM file in the URL with `{}=/path/ca.pem` (the system's roots are trusted without it)",
            names.ca
        )
    } else if has("NotValidForName") || has("not valid for name") {
        "the server's certificate does not name the host of the URL: connect by a name or \
         address its subjectAltName holds (`openssl x509 -noout -ext subjectAltName -in cert.pem`)"
            .to_string()
    } else if has("Expired") || has("NotValidYet") {
        "the server's certificate is outside its validity dates (expired, or the clocks differ)"
            .to_string()
    } else if has("CertificateRequired") || has("certificate required") || has("HandshakeFailure") {
        format!(
            "the server asks for a client certificate: name it and its key with `{}=` and `{}=`",
            names.cert, names.key
        )
    } else if has("tls") || has("ssl") || has("certificate") || has("handshake") {
        format!(
            "the TLS handshake failed; check that the server speaks TLS on that port and that \
             the URL names its CA (`{}=`)",
            names.ca
        )
    } else {
        return None;
    };
    Some(hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_our_parameters_is_left_as_it_was() {
        for url in [
            "amqp://guest:guest@127.0.0.1:5672/%2f",
            "amqp://guest:guest@127.0.0.1:5672/%2f?heartbeat=10",
            "redis://127.0.0.1:6379",
            "rediss://localhost:6380/?protocol=resp3",
        ] {
            let names = names_of(url).unwrap();
            assert_eq!(
                take_files(url, names).unwrap(),
                (url.to_string(), TlsFiles::default())
            );
        }
    }

    #[test]
    fn the_files_are_taken_out_and_the_rest_kept() {
        let (plain, files) = take_files(
            "amqps://u:p@localhost:5671/%2f?heartbeat=10&cacertfile=/t/ca.pem&certfile=/t/c.pem&keyfile=/t/c.key",
            AMQP,
        )
        .unwrap();
        assert_eq!(plain, "amqps://u:p@localhost:5671/%2f?heartbeat=10");
        assert_eq!(
            files,
            TlsFiles {
                ca: Some("/t/ca.pem".into()),
                cert: Some("/t/c.pem".into()),
                key: Some("/t/c.key".into())
            }
        );
        let (plain, files) = take_files("rediss://localhost:6380?cacert=/t/ca.pem", REDIS).unwrap();
        assert_eq!(plain, "rediss://localhost:6380");
        assert_eq!(files.ca, Some("/t/ca.pem".into()));
        // PostgreSQL's and MariaDB's stay in the URL for sqlx; they are
        // only read for what the run records.
        assert_eq!(
            files_of("postgres://root@localhost/test?sslmode=verify-full&sslrootcert=/t/ca.pem")
                .unwrap()
                .ca,
            Some("/t/ca.pem".into())
        );
    }

    #[test]
    fn a_database_url_without_a_tls_mode_connects_in_plain_text() {
        assert_eq!(
            database_url("postgres://root@127.0.0.1/test"),
            "postgres://root@127.0.0.1/test?sslmode=disable"
        );
        assert_eq!(
            database_url("mysql://root@127.0.0.1:3306/test?charset=utf8mb4"),
            "mysql://root@127.0.0.1:3306/test?charset=utf8mb4&ssl-mode=DISABLED"
        );
        for asked in [
            "postgres://root@localhost/test?sslmode=verify-full&sslrootcert=/t/ca.pem",
            "mysql://root@localhost/test?ssl-mode=REQUIRED",
            "sqlite://",
            "sqlite:///tmp/x.sqlite",
        ] {
            assert_eq!(database_url(asked), asked);
        }
    }

    #[test]
    fn a_half_identity_or_a_missing_file_is_named() {
        let err = redis_client("rediss://localhost:6380?cert=/t/c.pem").unwrap_err();
        assert!(err.contains("`cert=` is given without `key=`"), "{err}");
        let err = redis_client("rediss://localhost:6380?cacert=/nonexistent/ca.pem").unwrap_err();
        assert!(
            err.contains("cacert=: cannot read the CA certificate /nonexistent/ca.pem"),
            "{err}"
        );
        let err = redis_client("redis://localhost:6379?cacert=/t/ca.pem").unwrap_err();
        assert!(err.contains("need a rediss:// URL"), "{err}");
    }

    #[test]
    fn a_refusal_names_the_parameter_that_fixes_it() {
        let hint = refusal_hint(
            "rediss://localhost:6380",
            "invalid peer certificate: UnknownIssuer",
        )
        .unwrap();
        assert!(hint.contains("`cacert=/path/ca.pem`"), "{hint}");
        let hint = refusal_hint(
            "postgres://root@localhost/test?sslmode=verify-full",
            "error occurred while attempting to establish a TLS connection: invalid peer certificate: UnknownIssuer",
        )
        .unwrap();
        assert!(hint.contains("`sslrootcert=/path/ca.pem`"), "{hint}");
        assert!(refusal_hint("amqp://h/%2f", "Connection refused (os error 111)").is_none());
        assert_eq!(
            management_root("amqps://h:5671/%2f", "::1", 5671).unwrap(),
            "https://[::1]:15671"
        );
        assert_eq!(
            management_root("amqp://h/%2f", "h", 5672).unwrap(),
            "http://h:15672"
        );
        // Another port: another broker may own the host's API port.
        let err = management_root("amqp://h:5681/%2f", "h", 5681).unwrap_err();
        assert!(
            err.contains("port 5681") && err.contains("management="),
            "{err}"
        );
    }

    #[test]
    fn a_management_root_given_in_the_url_wins_and_is_checked() {
        let url =
            "amqps://u:p@h:5671/%2f?cacertfile=/t/ca.pem&management=https://console.example:443/";
        assert_eq!(
            management_root(url, "h", 5671).unwrap(),
            "https://console.example:443"
        );
        // The AMQP client never sees the TLS files, and ignores `management=`.
        let plain = amqp_url_without_files(url).unwrap();
        let uri: amq_protocol::uri::AMQPUri = plain.parse().unwrap();
        assert_eq!(
            (uri.authority.host.as_str(), uri.authority.port),
            ("h", 5671)
        );
        let err = management_root("amqp://h/%2f?management=ftp://h", "h", 5672).unwrap_err();
        assert!(err.contains("http:// or https:// URL"), "{err}");
        let err = management_root("amqp://h/%2f?management=https://u:p@h", "h", 5672).unwrap_err();
        assert!(err.contains("carries a user"), "{err}");
        let err =
            management_root("amqps://h/%2f?management=http://h:15672", "h", 5671).unwrap_err();
        assert!(err.contains("clear text"), "{err}");
        // Named, it is used whatever the AMQP port.
        assert_eq!(
            management_root("amqp://h:5681/%2f?management=http://h:15681", "h", 5681).unwrap(),
            "http://h:15681"
        );
    }
}
