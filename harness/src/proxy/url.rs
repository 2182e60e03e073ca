//! Sending a backend URL through the proxy: the upstream `host:port` a
//! proxy forwards to, and the same URL pointed at the proxy instead.

use anyhow::{anyhow, bail, Result};
use std::net::{IpAddr, SocketAddr};
use url::{Host, Url};

/// Default port of each scheme the proxy can stand in front of; `None` for
/// the rest (sqlite has no link to cut).
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "postgres" | "postgresql" => Some(5432),
        "mysql" | "mariadb" => Some(3306),
        "redis" | "rediss" => Some(6379),
        "amqp" => Some(5672),
        "amqps" => Some(5671),
        _ => None,
    }
}

/// Query parameters by which a driver would connect somewhere other than
/// the URL's host and port (libpq's and sqlx's `host`/`hostaddr`/`port`,
/// MySQL's `socket`), silently bypassing the proxy.
const BYPASS_PARAMS: [&str; 4] = ["host", "hostaddr", "port", "socket"];

/// The parsed URL and its upstream `host:port`, or an error naming the URL
/// (password hidden) and what is wrong with it.
fn parse_backend_url(url: &str) -> Result<(Url, String)> {
    let shown = strategies::redact::url(url);
    let parsed = Url::parse(url).map_err(|e| anyhow!("{shown} is not a valid URL: {e}"))?;
    let Some(port) = default_port(parsed.scheme()) else {
        bail!(
            "{shown}: scheme {:?} cannot go through the fault proxy \
             (postgres, postgresql, mysql, mariadb, redis, rediss, amqp, amqps can)",
            parsed.scheme()
        );
    };
    if let Some((key, _)) = parsed
        .query_pairs()
        .find(|(k, _)| BYPASS_PARAMS.contains(&k.as_ref()))
    {
        bail!("{shown}: its query parameter {key:?} would make the driver bypass the fault proxy");
    }
    let host = match parsed.host() {
        Some(Host::Domain(d)) if !d.is_empty() => d.to_string(),
        Some(Host::Ipv4(ip)) => ip.to_string(),
        Some(Host::Ipv6(ip)) => format!("[{ip}]"),
        _ => bail!("{shown} has no host for the fault proxy to forward to (a Unix socket cannot be proxied)"),
    };
    let port = parsed.port().unwrap_or(port);
    Ok((parsed, format!("{host}:{port}")))
}

/// The same URL with its host and port replaced by the proxy's
/// (`127.0.0.1:port`); user, password, path and query kept, so the worker
/// connects exactly as before, only through the proxy. For postgres(ql),
/// mysql, mariadb, redis(s) and amqp(s). With `rediss`/`amqps` the TLS
/// handshake passes through untouched but the client then checks the
/// certificate against 127.0.0.1, so those work only with verification off
/// or a certificate for 127.0.0.1. Errors name the URL, password hidden.
pub fn route_through(url: &str, proxy: SocketAddr) -> Result<String> {
    let (mut parsed, _) = parse_backend_url(url)?;
    let host = match proxy.ip() {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    };
    parsed.set_host(Some(&host)).map_err(|e| {
        anyhow!(
            "{}: cannot set its host to {host}: {e}",
            strategies::redact::url(url)
        )
    })?;
    parsed.set_port(Some(proxy.port())).map_err(|()| {
        anyhow!(
            "{}: cannot set its port to {}",
            strategies::redact::url(url),
            proxy.port()
        )
    })?;
    Ok(parsed.into())
}

/// The `host:port` a proxy for this URL must forward to, the scheme's
/// default port filled in (postgres 5432, mysql/mariadb 3306, redis 6379,
/// amqp 5672, amqps 5671): what [`FaultProxy::start`] takes. Errors name
/// the URL, password hidden.
pub fn upstream_of(url: &str) -> Result<String> {
    parse_backend_url(url).map(|(_, upstream)| upstream)
}
