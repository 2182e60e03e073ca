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
    raise_open_files_limit();
    loop {
        let mut inbound = match listener.accept().await {
            Ok((inbound, _)) => inbound,
            Err(e) => {
                // Out of file descriptors under a burst of connections:
                // the forwarder stays up, and the clients see the refusal.
                tracing::warn!("forward: accepting on {listen}: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
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

/// Two descriptors per forwarded connection: the soft limit (1024 here)
/// ran out at 4000 orders/s; the hard limit is the most the process may
/// ask for.
fn raise_open_files_limit() {
    #[cfg(unix)]
    {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}
