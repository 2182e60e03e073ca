//! The order domain: states, outcomes and the application clock.
//!
//! Order states are `PENDING -> PAID` and `PENDING -> CANCELLED`, nothing
//! else. Every transition is a conditional UPDATE naming the old state (see
//! [`crate::store`]); the affected-row count decides who won.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Orders are identified by a 64-bit id chosen by the workload generator, so
/// the same seed yields the same ids for every strategy.
pub type OrderId = i64;

/// Microseconds since the Unix epoch. Time always comes from the application
/// as a parameter, never from the database's `NOW()`.
pub type Micros = i64;

/// The application clock: wall-clock microseconds since the Unix epoch,
/// plus this process's [`set_clock_correction`].
///
/// Wall clock (not monotonic) because deadlines are stored in the database and
/// compared across processes and restarts.
pub fn now_us() -> Micros {
    system_now_us() + CLOCK_CORRECTION_US.load(Ordering::Relaxed)
}

/// The host's wall clock, uncorrected: what an agent answers a clock probe
/// with.
pub fn system_now_us() -> Micros {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("system clock is before 1970");
    i64::try_from(d.as_micros()).expect("clock beyond year 292277")
}

static CLOCK_CORRECTION_US: AtomicI64 = AtomicI64::new(0);

/// Moves this process's [`now_us`] by `us`. A process on another host than
/// the harness (an agent's worker or generator shard) is set once, at its
/// start, to minus its host's measured offset, so that every deadline and
/// stamp it writes is on the harness's clock; 0 everywhere else.
pub fn set_clock_correction(us: Micros) {
    CLOCK_CORRECTION_US.store(us, Ordering::Relaxed);
}

/// Which of `n` slots an order belongs to: its id modulo `n` (slot 0 when
/// `n` is 0). The one rule behind an instance's [`Share`], the pool's
/// choice of the instance an order's `schedule` goes to, and a RabbitMQ
/// strategy's queue shard: they must agree, or an instance would reload
/// orders another one holds.
pub fn slot_of(order_id: OrderId, n: u32) -> u32 {
    // rem_euclid: never negative, and below n, so it fits in a u32.
    order_id.rem_euclid(i64::from(n.max(1))) as u32
}

/// One instance's share of the orders: those whose id modulo `of` is
/// `index` ([`slot_of`]), the instance the harness's pool sends an order's
/// `schedule` to while every instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Share {
    pub index: u32,
    pub of: u32,
}

impl Share {
    pub fn owns(&self, order_id: OrderId) -> bool {
        slot_of(order_id, self.of) == self.index
    }
}

/// The three order states of the schema contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    Pending,
    Paid,
    Cancelled,
}

impl OrderStatus {
    /// The text stored in `orders.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Pending => "PENDING",
            OrderStatus::Paid => "PAID",
            OrderStatus::Cancelled => "CANCELLED",
        }
    }

    /// Parses the text stored in `orders.status`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "PENDING" => Some(OrderStatus::Pending),
            "PAID" => Some(OrderStatus::Paid),
            "CANCELLED" => Some(OrderStatus::Cancelled),
            _ => None,
        }
    }
}

/// What one `cancel_if_due` call found. Only [`CancelOutcome::Cancelled`]
/// changed anything; every other outcome is an absorbed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// This call moved the order to CANCELLED and released its stock.
    Cancelled,
    /// The order was paid first; nothing changed.
    AlreadyPaid,
    /// Someone else cancelled it first (duplicate delivery, another instance).
    AlreadyCancelled,
    /// The deadline has not passed yet; nothing changed.
    NotDue,
    /// No such order.
    Missing,
}

/// What one payment callback did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaymentOutcome {
    /// The order moved PENDING -> PAID.
    Applied,
    /// The order was already cancelled (or paid by another capture): the
    /// captured money is refunded, exactly once per callback id.
    Refunded,
    /// A retry of a callback already applied or refunded.
    Duplicate,
    /// No such order (for example its creation was refused for lack of stock).
    Missing,
}

impl PaymentOutcome {
    /// The text stored in `payments.outcome` (`Missing` is never stored).
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentOutcome::Applied => "APPLIED",
            PaymentOutcome::Refunded => "REFUNDED",
            PaymentOutcome::Duplicate => "DUPLICATE",
            PaymentOutcome::Missing => "MISSING",
        }
    }
}

/// An order to create: it is inserted PENDING and reserves `qty` of `sku`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewOrder {
    pub id: OrderId,
    pub sku: i64,
    pub qty: i32,
    pub created_at_us: Micros,
    pub expire_at_us: Micros,
}

/// What creating an order did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CreateOutcome {
    Created,
    /// Refused: not enough stock available for the SKU. Nothing was written.
    OutOfStock,
    /// Written, then rolled back on purpose (the checkout failed after the
    /// order was written): the order never existed for anyone else.
    RolledBack,
}
