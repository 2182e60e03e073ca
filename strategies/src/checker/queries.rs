//! The invariants, each as the query that finds its violations: one id
//! column, `?` placeholders as noted (the table of [`super::Anomaly`] says
//! which binds each takes). A query that is not an anomaly sits here too
//! when the checker reads a figure with it ([`PAID_AFTER_DEADLINE`]).

/// A cancel that happened before the order's deadline: stamped before it,
/// or found already CANCELLED by a payment callback before it on the
/// payer's clock. The second catches a canceller whose clock runs ahead
/// (another host's, uncorrected): it cancels early but stamps the cancel
/// on time. It sees only the orders a callback reached in that window.
/// Bind: how far apart the payer's and the canceller's corrected clocks
/// may be (µs; 0 on one host), which a seen-cancelled stamp must beat.
pub const EARLY_CANCELS: &str = "SELECT o.id FROM orders o WHERE o.status = 'CANCELLED' \
     AND (o.cancelled_at_us < o.expire_at_us OR EXISTS (SELECT 1 FROM payments p \
     WHERE p.order_id = o.id AND p.seen_cancelled_at_us < o.expire_at_us - ?)) ORDER BY o.id";
/// A paid order that ended up CANCELLED.
pub const PAID_THEN_CANCELLED: &str = "SELECT o.id FROM orders o WHERE o.status = 'CANCELLED' \
     AND (o.paid_at_us IS NOT NULL OR EXISTS (SELECT 1 FROM payments p \
     WHERE p.order_id = o.id AND p.outcome = 'APPLIED')) ORDER BY o.id";
/// An order whose stock was released more than once.
pub const DUPLICATE_RELEASES: &str = "SELECT order_id FROM stock_moves WHERE kind = 'RELEASE' \
     GROUP BY order_id HAVING COUNT(*) > 1 ORDER BY order_id";
/// A cancelled order whose stock was never released.
pub const UNRELEASED_CANCELS: &str = "SELECT o.id FROM orders o WHERE o.status = 'CANCELLED' \
     AND NOT EXISTS (SELECT 1 FROM stock_moves m WHERE m.order_id = o.id AND m.kind = 'RELEASE') \
     ORDER BY o.id";
/// Stock released for an order that is not cancelled.
pub const ORPHAN_RELEASES: &str = "SELECT DISTINCT m.order_id FROM stock_moves m \
     JOIN orders o ON o.id = m.order_id WHERE m.kind = 'RELEASE' AND o.status <> 'CANCELLED' \
     ORDER BY m.order_id";
/// Paid after its deadline: the canceller had not cancelled it by then.
pub const PAID_AFTER_DEADLINE: &str = "SELECT id FROM orders WHERE status = 'PAID' \
     AND paid_at_us > expire_at_us ORDER BY id";
/// Still PENDING `drain` after its deadline. Binds: drain_us, check_time_us.
pub const MISSED_CANCELS: &str = "SELECT id FROM orders WHERE status = 'PENDING' \
     AND expire_at_us + ? <= ? ORDER BY id";
/// A callback whose capture was not applied-or-refunded exactly once,
/// or a refund recorded for an order that is still PENDING.
pub const REFUND_ERRORS: &str = "SELECT MIN(order_id) FROM payments GROUP BY callback_id \
     HAVING SUM(CASE WHEN outcome IN ('APPLIED', 'REFUNDED') THEN 1 ELSE 0 END) <> 1 \
     UNION SELECT p.order_id FROM payments p JOIN orders o ON o.id = p.order_id \
     WHERE p.outcome = 'REFUNDED' AND o.status = 'PENDING'";
/// A SKU whose available stock is not `initial` minus what its
/// non-cancelled orders hold (returns SKU ids).
pub const STOCK_MISMATCHES: &str = "SELECT s.sku FROM stock s LEFT JOIN \
     (SELECT sku, SUM(qty) AS held FROM orders WHERE status <> 'CANCELLED' GROUP BY sku) h \
     ON h.sku = s.sku WHERE s.available <> s.initial - COALESCE(h.held, 0) ORDER BY s.sku";
