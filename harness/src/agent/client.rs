//! The harness side: reading an agent's clock and starting a worker there.

use super::protocol::{build, token, CLOCK_SAMPLES, HELLO, TOKEN_ENV};
use crate::model::records::ClockReading;
use anyhow::{anyhow, bail, Context, Result};
use std::time::Duration;
use strategies::now_us;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

const CONNECT_WITHIN: Duration = Duration::from_secs(5);
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// One request's connection, greeted and accepted.
async fn open(
    agent: &str,
    request: &str,
) -> Result<(Lines<BufReader<OwnedReadHalf>>, OwnedWriteHalf)> {
    let token = token()?;
    let socket = tokio::time::timeout(CONNECT_WITHIN, TcpStream::connect(agent))
        .await
        .map_err(|_| anyhow!("no answer within {CONNECT_WITHIN:?}"))
        .and_then(|r| r.map_err(anyhow::Error::from))
        .with_context(|| {
            format!(
                "cannot reach the delaybench agent at {agent}; start it there with \
                 `{}=<token> delaybench agent --listen {agent}`",
                TOKEN_ENV
            )
        })?;
    socket.set_nodelay(true)?;
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    write
        .write_all(format!("{HELLO} {token}\n").as_bytes())
        .await?;
    let answer = next_line(&mut lines, agent).await?;
    match answer.split_once(' ').unwrap_or((answer.as_str(), "")) {
        ("ok", theirs) if theirs == build() => {}
        ("ok", theirs) => bail!(
            "the agent at {agent} runs delaybench {theirs}, this harness {}: they exchange this \
             build's specs, so start the same build there (an agent keeps running the binary it \
             started from, even after a rebuild)",
            build()
        ),
        ("error", why) => bail!("the delaybench agent at {agent} refused the connection: {why}"),
        _ => bail!("{agent} is not a delaybench agent (it said {answer:?})"),
    }
    write.write_all(format!("{request}\n").as_bytes()).await?;
    Ok((lines, write))
}

async fn next_line(lines: &mut Lines<BufReader<OwnedReadHalf>>, agent: &str) -> Result<String> {
    tokio::time::timeout(ANSWER_WITHIN, lines.next_line())
        .await
        .map_err(|_| anyhow!("the agent at {agent} did not answer within {ANSWER_WITHIN:?}"))?
        .with_context(|| format!("reading from the agent at {agent}"))?
        .ok_or_else(|| anyhow!("the agent at {agent} closed the connection"))
}

/// Reads the agent's clock [`CLOCK_SAMPLES`] times over one connection.
pub async fn read_clock(agent: &str) -> Result<ClockReading> {
    let (mut lines, mut write) = open(agent, "clock").await?;
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..CLOCK_SAMPLES {
        // The round trip on the monotonic clock (a wall clock stepped
        // meanwhile must not make it read short); the midpoint on the wall
        // clock, which is what the offset is of.
        let (sent, started) = (now_us(), std::time::Instant::now());
        write.write_all(b"t\n").await?;
        let answer = next_line(&mut lines, agent).await?;
        let rtt = started.elapsed().as_micros() as u64;
        let received = sent + rtt as i64;
        let theirs: i64 = answer.trim().parse().with_context(|| {
            format!("the agent at {agent} answered a clock probe with {answer:?}")
        })?;
        let offset = theirs - (sent + received) / 2;
        if best.is_none_or(|(b, _)| rtt < b) {
            best = Some((rtt, offset));
        }
    }
    let _ = write.shutdown().await;
    let (rtt, offset_us) = best.expect("at least one sample");
    Ok(ClockReading {
        offset_us,
        uncertainty_us: rtt.div_ceil(2),
        samples: CLOCK_SAMPLES,
    })
}

/// A process an agent started (a worker or a generator shard), with the
/// connection its lines travel on.
#[derive(Debug)]
pub struct Remote {
    /// The agent's address.
    pub agent: String,
    /// Its pid on the agent's host.
    pub pid: u32,
    pub output: Lines<BufReader<OwnedReadHalf>>,
    pub input: OwnedWriteHalf,
}

impl Remote {
    /// Its next line, within [`ANSWER_WITHIN`].
    pub async fn next_line(&mut self) -> Result<String> {
        next_line(&mut self.output, &self.agent).await
    }
}

/// Asks the agent at `agent` to start `delaybench <kind>` (`worker` or
/// `generate`) with `spec` (the JSON it finds in its environment).
pub async fn spawn(agent: &str, kind: &str, spec: &str) -> Result<Remote> {
    let (mut output, input) = open(agent, &format!("{kind} {spec}")).await?;
    let answer = next_line(&mut output, agent).await?;
    let pid = match answer.split_once(' ') {
        Some(("pid", pid)) => pid
            .parse()
            .with_context(|| format!("the agent at {agent} said {answer:?}"))?,
        Some(("error", why)) => bail!("the agent at {agent} could not start `{kind}`: {why}"),
        _ => bail!("the agent at {agent} said {answer:?} instead of a pid"),
    };
    Ok(Remote {
        agent: agent.to_string(),
        pid,
        output,
        input,
    })
}
