//! `delaybench agent`: the host side.

use super::protocol::{build, token, HELLO};
use crate::child;
use anyhow::{anyhow, bail, Context, Result};
use strategies::system_now_us;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

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
        let (socket, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, say: the agent stays up.
                tracing::warn!("agent: accepting on {listen}: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
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
    let spawned = child::command(kind, spec, skew_us)?.spawn();
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
    // Its stdin is fed by a task of its own through an unbounded queue, so
    // a child that stops reading (a worker with every schedule in flight)
    // never stops this loop from reading `!kill` or the harness's EOF.
    // Dropping the queue at the harness's EOF closes the pipe: a child stops
    // at EOF on its stdin.
    let mut stdin = child.stdin.take().expect("piped stdin");
    let (to_child, mut queued) = tokio::sync::mpsc::unbounded_channel::<String>();
    let feed = tokio::spawn(async move {
        while let Some(line) = queued.recv().await {
            if stdin.write_all(line.as_bytes()).await.is_err() {
                break; // it exited; the wait below reports it
            }
        }
    });
    let mut to_child = Some(to_child);
    let mut stdout = child.stdout.take().expect("piped stdout");
    // The child's output, byte for byte, until it closes it.
    let relay_out = tokio::spawn(async move {
        let copied = tokio::io::copy(&mut stdout, &mut write).await;
        (write, copied)
    });
    // The harness's lines to the child until it hangs up; then the wait for
    // the child to exit, killed if it has not within the grace (the
    // harness kills its own local workers after 60 s), so nothing outlives
    // a harness that went away.
    let mut hung_up: Option<tokio::time::Instant> = None;
    let status = loop {
        let grace = async {
            match hung_up {
                Some(at) => tokio::time::sleep_until(at + EXIT_GRACE).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            status = child.wait() => break status,
            _ = grace => {
                tracing::warn!(pid, "`delaybench {kind}` still running {EXIT_GRACE:?} after the harness hung up; killing it");
                let _ = child.start_kill();
                hung_up = None;
            }
            line = lines.next_line(), if to_child.is_some() => match line {
                Ok(Some(line)) if line == "!kill" => {
                    let _ = strategies::signal::to_process(pid, strategies::signal::Sig::Kill);
                }
                Ok(Some(line)) => {
                    if let Some(queue) = &to_child {
                        let _ = queue.send(format!("{line}\n"));
                    }
                }
                Ok(None) | Err(_) => {
                    to_child = None;
                    hung_up = Some(tokio::time::Instant::now());
                }
            },
        }
    };
    drop(to_child);
    feed.abort();
    let status = match status {
        Ok(status) => status.to_string(),
        Err(e) => format!("unknown exit ({e})"),
    };
    let (mut write, _) = relay_out.await.context("relaying a worker's output")?;
    let _ = write
        .write_all(format!("!exit {status}\n").as_bytes())
        .await;
    let _ = write.shutdown().await;
    // Read what the harness still sends until it hangs up too: closing a
    // socket with unread input makes Linux reset it, and a reset can drop
    // the output not yet delivered (a dead worker's last flush, `!exit`).
    let _ = tokio::time::timeout(EXIT_GRACE, async {
        while let Ok(Some(_)) = lines.next_line().await {}
    })
    .await;
    Ok(())
}

/// How long a child may take to exit after the harness hung up, and how
/// long the agent waits for the harness to hang up after the child exited.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(90);
