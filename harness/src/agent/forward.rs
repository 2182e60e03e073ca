//! `delaybench forward`: a plain TCP forwarder, for services that listen on
//! loopback only and must be reached from agents on other hosts (the
//! multi-host test's namespaces reach this machine's services through it).

use anyhow::{Context, Result};
use tokio::net::{TcpListener, TcpStream};

/// Forwards every connection to `listen` to `to`, until killed.
pub async fn forward_main(listen: &str, to: &str) -> Result<()> {
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    eprintln!("delaybench forward: {} -> {to}", listener.local_addr()?);
    loop {
        let (mut inbound, _) = listener.accept().await.context("accepting")?;
        let to = to.to_string();
        tokio::spawn(async move {
            match TcpStream::connect(&to).await {
                Ok(mut outbound) => {
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
                Err(e) => tracing::warn!("forward: cannot reach {to}: {e}"),
            }
        });
    }
}
