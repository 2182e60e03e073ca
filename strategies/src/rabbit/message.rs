//! The message every RabbitMQ strategy carries: the order and its deadline.
//! A consumer never trusts it: it only says which order to look at.

use crate::domain::{Micros, OrderId};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelMessage {
    pub order_id: OrderId,
    pub expire_at_us: Micros,
}

impl CancelMessage {
    pub fn to_bytes(self) -> Vec<u8> {
        serde_json::to_vec(&self).expect("serialisable")
    }

    /// `None` for anything that is not exactly this message.
    pub fn parse(bytes: &[u8]) -> Option<CancelMessage> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Milliseconds from `now_us` until `expire_at_us`, rounded up (never early).
pub fn remaining_ms(expire_at_us: Micros, now_us: Micros) -> u64 {
    ((expire_at_us - now_us).max(0) as u64).div_ceil(1000)
}

/// The wait queue for a delay: the shortest TTL not shorter than it (so the
/// message is never early), or the longest TTL when none is long enough
/// (the consumer then re-delays it for the rest).
pub fn pick_ttl(ttls_ms: &[u64], remaining_ms: u64) -> u64 {
    debug_assert!(!ttls_ms.is_empty() && ttls_ms.windows(2).all(|w| w[0] < w[1]));
    ttls_ms
        .iter()
        .copied()
        .find(|&t| t >= remaining_ms)
        .unwrap_or(*ttls_ms.last().expect("at least one TTL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_reject_garbage() {
        let m = CancelMessage {
            order_id: 7,
            expire_at_us: 1_000,
        };
        assert_eq!(CancelMessage::parse(&m.to_bytes()), Some(m));
        assert_eq!(CancelMessage::parse(b"{\"order_id\":\"x\"}"), None);
        assert_eq!(CancelMessage::parse(b"not json"), None);
    }

    #[test]
    fn ttl_choice_is_never_early() {
        let ttls = [1000, 3000];
        assert_eq!(pick_ttl(&ttls, 0), 1000);
        assert_eq!(pick_ttl(&ttls, 1000), 1000);
        assert_eq!(pick_ttl(&ttls, 1001), 3000);
        assert_eq!(pick_ttl(&ttls, 9000), 3000);
        assert_eq!(remaining_ms(2_500, 1_000), 2);
        assert_eq!(remaining_ms(0, 1_000), 0);
    }
}
