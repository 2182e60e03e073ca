//! A steady network link a proxy holds for a whole run (`[network]`): the
//! round trip, its jitter and a bandwidth between the application side and
//! one service, on top of which the latency fault's window still adds.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What every chunk through a proxy pays, in both directions, for as long
/// as the proxy runs. [`Link::LOOPBACK`] adds nothing.
///
/// A chunk's one-way hold is `rtt / 2`, moved up or down by a uniform draw
/// in `±jitter / 2`, so a request/response round trip is `rtt ± jitter`
/// (netem's `delay` with a uniform jitter, split over the two directions).
/// Chunks are never reordered: one drawn shorter than the chunk before it
/// waits for it, as TCP would deliver them. A bandwidth makes each chunk
/// also wait for the bytes ahead of it in its direction to be sent, shared
/// by every connection through the proxy, as on one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Link {
    /// The round trip added to every request/response.
    #[serde(with = "humantime_serde")]
    pub rtt: Duration,
    /// The round trip varies uniformly within `rtt ± jitter` (at most `rtt`).
    #[serde(with = "humantime_serde")]
    pub jitter: Duration,
    /// Bits per second in each direction; `None` is no limit but the
    /// proxy's own.
    pub bandwidth_bps: Option<u64>,
}

impl Link {
    /// Nothing added: the proxy only relays.
    pub const LOOPBACK: Link = Link {
        rtt: Duration::ZERO,
        jitter: Duration::ZERO,
        bandwidth_bps: None,
    };

    /// Whether the link adds nothing at all.
    pub fn is_loopback(&self) -> bool {
        *self == Link::LOOPBACK
    }

    /// One direction's hold for one chunk, `draw` a uniform number in
    /// `[0, 1)`: `rtt / 2 + (draw - 0.5) * jitter`, never below zero.
    pub fn one_way(&self, draw: f64) -> Duration {
        let half = self.rtt.as_secs_f64() / 2.0;
        let moved = (draw - 0.5) * self.jitter.as_secs_f64();
        Duration::from_secs_f64((half + moved).max(0.0))
    }

    /// How long `bytes` take to go out at the link's bandwidth.
    pub fn wire_time(&self, bytes: usize) -> Duration {
        match self.bandwidth_bps {
            Some(bps) if bps > 0 => Duration::from_secs_f64(bytes as f64 * 8.0 / bps as f64),
            _ => Duration::ZERO,
        }
    }

    /// `rtt 0.5ms ± 0.05ms, 1 Gbit/s`, for logs and reports.
    pub fn label(&self) -> String {
        if self.is_loopback() {
            return "loopback (nothing added)".into();
        }
        let mut label = format!("rtt {}", ms(self.rtt));
        if !self.jitter.is_zero() {
            label.push_str(&format!(" ± {}", ms(self.jitter)));
        }
        if let Some(bps) = self.bandwidth_bps {
            label.push_str(&format!(", {}", bandwidth_label(bps)));
        }
        label
    }
}

/// `0.5 ms`, `2 ms`, `0.05 ms`.
fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    let text = format!("{ms:.3}");
    format!("{} ms", text.trim_end_matches('0').trim_end_matches('.'))
}

/// `1 Gbit/s`, `100 Mbit/s`, `512 kbit/s`, `800 bit/s`.
fn bandwidth_label(bps: u64) -> String {
    for (unit, name) in [
        (1_000_000_000, "Gbit/s"),
        (1_000_000, "Mbit/s"),
        (1_000, "kbit/s"),
    ] {
        if bps >= unit && bps.is_multiple_of((unit / 1000).max(1)) {
            let value = bps as f64 / unit as f64;
            let text = format!("{value:.3}");
            return format!(
                "{} {name}",
                text.trim_end_matches('0').trim_end_matches('.')
            );
        }
    }
    format!("{bps} bit/s")
}

/// Parses tc's spelling of a rate: `1gbit`, `100mbit`, `512kbit`, `800bit`
/// (bits per second, decimal units, case ignored; a fraction allowed).
pub fn parse_bandwidth(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(unit, scale)| lower.strip_suffix(unit).map(|n| (n.trim(), *scale)))
        .ok_or_else(|| {
            format!("{text:?} is not a rate: write it as tc does, e.g. \"1gbit\", \"100mbit\", \"512kbit\"")
        })?;
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?}: {number:?} is not a number"))?;
    let bps = value * scale;
    if !bps.is_finite() || bps < 1.0 {
        return Err(format!("{text:?}: a rate must be at least 1bit"));
    }
    Ok(bps.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_way_is_half_the_round_trip_moved_by_half_the_jitter() {
        let link = Link {
            rtt: Duration::from_micros(500),
            jitter: Duration::from_micros(100),
            bandwidth_bps: None,
        };
        assert_eq!(link.one_way(0.5), Duration::from_micros(250));
        assert_eq!(link.one_way(0.0), Duration::from_micros(200));
        assert!(link.one_way(0.999_999) <= Duration::from_micros(300));
        // A jitter above the round trip never makes a negative hold.
        let wild = Link {
            rtt: Duration::from_micros(100),
            jitter: Duration::from_millis(10),
            bandwidth_bps: None,
        };
        assert_eq!(wild.one_way(0.0), Duration::ZERO);
    }

    #[test]
    fn bandwidth_parses_like_tc_and_prices_bytes() {
        assert_eq!(parse_bandwidth("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_bandwidth("100Mbit"), Ok(100_000_000));
        assert_eq!(parse_bandwidth("2.5mbit"), Ok(2_500_000));
        assert_eq!(parse_bandwidth("512kbit"), Ok(512_000));
        assert!(parse_bandwidth("10MB/s")
            .unwrap_err()
            .contains("not a rate"));
        assert!(parse_bandwidth("fastgbit")
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_bandwidth("0bit").unwrap_err().contains("at least"));
        let link = Link {
            bandwidth_bps: Some(8_000_000),
            ..Link::LOOPBACK
        };
        assert_eq!(link.wire_time(1_000), Duration::from_millis(1));
        assert_eq!(Link::LOOPBACK.wire_time(1_000), Duration::ZERO);
    }

    #[test]
    fn labels() {
        assert_eq!(Link::LOOPBACK.label(), "loopback (nothing added)");
        let link = Link {
            rtt: Duration::from_micros(500),
            jitter: Duration::from_micros(50),
            bandwidth_bps: Some(1_000_000_000),
        };
        assert_eq!(link.label(), "rtt 0.5 ms ± 0.05 ms, 1 Gbit/s");
        assert_eq!(bandwidth_label(100_000_000), "100 Mbit/s");
        assert_eq!(bandwidth_label(2_500_000), "2.5 Mbit/s");
        assert_eq!(bandwidth_label(800), "800 bit/s");
    }
}
