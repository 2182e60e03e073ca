//! `delaybench agent`: the host side.

use super::protocol::{build, token, HELLO};
use crate::child::{CLOCK_SKEW_ENV, SPEC_ENV};
use anyhow::{anyhow, bail, Context, Result};
use std::process::Stdio;
use strategies::system_now_us;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;

/// Serves the harness's requests on `listen` until killed. `skew_us`
/// (tests only) moves this agent's clock and its workers'.
pub async fn agent_main(listen: &str, skew_us: i64) -> Result<()> {
    let token = token()?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    eprintln!(
        "delaybench agent {} listening on {}{}",
        build(),
        listener.local_addr()?,
        if skew_us != 0 {
            format!(" (its clock moved by {skew_us} µs, --clock-skew)")
        } else {
            String::new()
        }
    );
    loop {
        let (socket, peer) = listener.accept().await.context("accepting")?;
        let token = token.clone();
        tokio::spawn(async move {
            if let Err(e) = serve(socket, &token, skew_us).await {
                tracing::warn!(%peer, "agent connection: {e:#}");
            }
        });
    }
}

async fn serve(socket: TcpStream, token: &str, skew_us: i64) -> Result<()> {
    socket.set_nodelay(true)?;
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    let hello = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
        .await
        .map_err(|_| anyhow!("no greeting within 10 s"))??
        .unwrap_or_default();
    match hello.split_once(' ') {
        Some((HELLO, given)) if given == token => {
            write
                .write_all(format!("ok {}\n", build()).as_bytes())
                .await?
        }
        Some((HELLO, _)) => {
            write.write_all(b"error wrong token\n").await?;
            bail!("refused a connection with the wrong token");
        }
        _ => {
            write
                .write_all(format!("error expected `{HELLO} <token>`\n").as_bytes())
                .await?;
            bail!("refused a connection that is not the harness's");
        }
    }
    let request = lines.next_line().await?.unwrap_or_default();
    let (verb, rest) = request.split_once(' ').unwrap_or((request.as_str(), ""));
    match verb {
        "clock" => {
            while lines.next_line().await?.is_some() {
                let now = system_now_us() + skew_us;
                write.write_all(format!("{now}\n").as_bytes()).await?;
            }
            Ok(())
        }
        "worker" | "generate" => run_child(verb, rest, lines, write, skew_us).await,
        other => {
            write
                .write_all(format!("error unknown request `{other}`\n").as_bytes())
                .await?;
            bail!("unknown request `{other}`")
        }
    }
}

/// Starts `delaybench <kind>` with `spec` and relays its lines until it
/// has exited.
async fn run_child(
    kind: &str,
    spec: &str,
    mut lines: Lines<BufReader<OwnedReadHalf>>,
    mut write: OwnedWriteHalf,
    skew_us: i64,
) -> Result<()> {
    let exe = std::env::current_exe().context("locating the delaybench binary")?;
    let spawned = Command::new(exe)
        .arg(kind)
        .env(SPEC_ENV, spec)
        .env(CLOCK_SKEW_ENV, skew_us.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            write
                .write_all(format!("error starting `delaybench {kind}`: {e}\n").as_bytes())
                .await?;
            return Err(e).with_context(|| format!("starting `delaybench {kind}`"));
        }
    };
    let pid = child.id().unwrap_or(0);
    write.write_all(format!("pid {pid}\n").as_bytes()).await?;
    // Dropped at the harness's EOF: a worker stops at EOF on its stdin
    // (tokio's `shutdown` of a child's stdin leaves the pipe open).
    let mut stdin = Some(child.stdin.take().expect("piped stdin"));
    let mut stdout = child.stdout.take().expect("piped stdout");
    // The worker's output, byte for byte, until it closes it.
    let relay_out = tokio::spawn(async move {
        let copied = tokio::io::copy(&mut stdout, &mut write).await;
        (write, copied)
    });
    // The harness's lines to the worker until it hangs up, and then the
    // wait for the worker to exit.
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            line = lines.next_line(), if stdin.is_some() => match line {
                Ok(Some(line)) if line == "!kill" => {
                    let _ = strategies::signal::to_process(pid, strategies::signal::Sig::Kill);
                }
                Ok(Some(line)) => {
                    if let Some(stdin) = &mut stdin {
                        // A worker that stopped reading is about to exit:
                        // the `wait` branch reports it.
                        let _ = stdin.write_all(format!("{line}\n").as_bytes()).await;
                    }
                }
                Ok(None) | Err(_) => stdin = None,
            },
        }
    };
    drop(stdin);
    let status = match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("unknown exit ({e})"),
    };
    let (mut write, _) = relay_out.await.context("relaying a worker's output")?;
    let _ = write
        .write_all(format!("!exit {status}\n").as_bytes())
        .await;
    let _ = write.shutdown().await;
    Ok(())
}
