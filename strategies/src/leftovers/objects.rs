//! What a run leaves and how it is named: every queue and exchange of a
//! run is `dlb.<p>.<role>` ([`broker_prefix`]), every Redis key
//! `dlb:{<p>:<shard>}:<role>` or `dlb:{<p>}:<role>` ([`redis_patterns`]),
//! `<p>` the run's resource prefix; a listed queue or exchange is a
//! [`BrokerObject`].

/// The name prefix of every queue and exchange of the run with resource
/// prefix `prefix` (`dlb.<prefix>.`).
pub fn broker_prefix(prefix: &str) -> String {
    format!("dlb.{prefix}.")
}

/// The SCAN patterns of every Redis key of the run with resource prefix
/// `prefix`: sharded keys `dlb:{<prefix>:<k>}:...` and unsharded ones
/// `dlb:{<prefix>}:...` (the closing brace or colon keeps `t_1` from
/// matching `t_10`).
pub fn redis_patterns(prefix: &str) -> [String; 2] {
    [format!("dlb:{{{prefix}:*"), format!("dlb:{{{prefix}}}*")]
}

/// A queue or an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BrokerKind {
    Queue,
    Exchange,
}

impl BrokerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BrokerKind::Queue => "queue",
            BrokerKind::Exchange => "exchange",
        }
    }
}

/// One `dlb.*` queue or exchange on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerObject {
    pub kind: BrokerKind,
    pub name: String,
    /// Ready messages in a queue, when the listing said.
    pub messages: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_scope_one_run() {
        assert_eq!(broker_prefix("t_1"), "dlb.t_1.");
        assert_eq!(redis_patterns("t_1"), ["dlb:{t_1:*", "dlb:{t_1}*"]);
    }
}
