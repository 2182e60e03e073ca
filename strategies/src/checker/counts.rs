//! What the checker found per anomaly: a count and example ids, one slot
//! per row of the table, and their JSON. `summary.json` holds each as an
//! object keyed by the rows' keys in the table's order (a contract outside
//! checkers read); reading one, a key it lacks is 0 or no examples (older
//! files predate some rows) and a key no row has is skipped.

use super::anomaly::{Anomaly, Source, COUNT};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;

/// How many times each anomaly occurred. Every count must be zero for a
/// correct strategy.
#[derive(Clone, PartialEq, Eq)]
pub struct Anomalies([u64; COUNT]);

impl Default for Anomalies {
    fn default() -> Self {
        Anomalies([0; COUNT])
    }
}

impl Anomalies {
    /// One anomaly's count. Callers name it by its variant
    /// (`get(Anomaly::MissedCancels)`), not by a method per row generated
    /// from the table: the variant is the table's own name for it, which
    /// grep and go-to-definition find (a generated method lands in the
    /// macro), and one accessor keeps the macro down to the enum and rows.
    pub fn get(&self, anomaly: Anomaly) -> u64 {
        self.0[anomaly.index()]
    }

    pub fn set(&mut self, anomaly: Anomaly, count: u64) {
        self.0[anomaly.index()] = count;
    }

    /// These counts with `anomaly`'s set to `count`.
    pub fn with(mut self, anomaly: Anomaly, count: u64) -> Anomalies {
        self.set(anomaly, count);
        self
    }

    /// Each anomaly with its count, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (Anomaly, u64)> + '_ {
        Anomaly::ALL.into_iter().map(|a| (a, self.get(a)))
    }

    /// Anomaly by anomaly, the larger of `self` and `other`: the worst of
    /// several repetitions, so a repeated run never reads cleaner than its
    /// worst repetition.
    pub fn worst(&self, other: &Anomalies) -> Anomalies {
        Anomalies(std::array::from_fn(|i| self.0[i].max(other.0[i])))
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// Up to [`super::MAX_EXAMPLES`] ids per anomaly the checker queries
/// (order ids; SKUs for stock).
#[derive(Clone, PartialEq, Eq)]
pub struct AnomalyExamples([Vec<i64>; COUNT]);

impl Default for AnomalyExamples {
    fn default() -> Self {
        AnomalyExamples(std::array::from_fn(|_| Vec::new()))
    }
}

impl AnomalyExamples {
    pub fn get(&self, anomaly: Anomaly) -> &[i64] {
        &self.0[anomaly.index()]
    }

    pub fn set(&mut self, anomaly: Anomaly, ids: Vec<i64>) {
        self.0[anomaly.index()] = ids;
    }

    /// Each anomaly that can have examples (those the checker queries:
    /// the instances' counts carry no ids), with its ids, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (Anomaly, &[i64])> + '_ {
        Anomaly::ALL
            .into_iter()
            .filter(|a| matches!(a.source(), Source::Query { .. }))
            .map(|a| (a, self.get(a)))
    }
}

// Debug as the structs with one field per anomaly read before the table,
// so a failing test's `{:#?}` names each anomaly.
impl fmt::Debug for Anomalies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_by_key(f, "Anomalies", self.iter())
    }
}

impl fmt::Debug for AnomalyExamples {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_by_key(f, "AnomalyExamples", self.iter())
    }
}

fn debug_by_key<V: fmt::Debug>(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    slots: impl Iterator<Item = (Anomaly, V)>,
) -> fmt::Result {
    let mut s = f.debug_struct(name);
    for (anomaly, value) in slots {
        s.field(anomaly.key(), &value);
    }
    s.finish()
}

impl Serialize for Anomalies {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter().map(|(a, count)| (a.key(), count)))
    }
}

impl Serialize for AnomalyExamples {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter().map(|(a, ids)| (a.key(), ids)))
    }
}

impl<'de> Deserialize<'de> for Anomalies {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(ByKey(PhantomData))
            .map(Anomalies)
    }
}

impl<'de> Deserialize<'de> for AnomalyExamples {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(ByKey(PhantomData))
            .map(AnomalyExamples)
    }
}

/// Reads an object keyed by the rows' keys into one slot per row: a key
/// it lacks is `T::default()`, a key no row has is skipped.
struct ByKey<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de> + Default> Visitor<'de> for ByKey<T> {
    type Value = [T; COUNT];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object keyed by anomaly")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut slots: [T; COUNT] = std::array::from_fn(|_| T::default());
        while let Some(key) = map.next_key::<String>()? {
            match Anomaly::from_key(&key) {
                Some(anomaly) => slots[anomaly.index()] = map.next_value()?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `anomalies` and `anomaly_examples` as `summary.json` has always
    /// written them for [`found`] (the keys outside checkers read, DESIGN.md
    /// "Results"). A new row adds its key; these entries stay, in this order.
    const WRITTEN: &str = r#"{"early_cancels":1,"paid_then_cancelled":0,"duplicate_releases":0,"missed_cancels":7,"refund_errors":0,"stock_mismatches":0,"unreleased_cancels":0,"orphan_releases":0,"phantom_schedules":2}"#;
    const EXAMPLES: &str = r#"{"early_cancels":[11],"paid_then_cancelled":[],"duplicate_releases":[],"missed_cancels":[4,5],"refund_errors":[],"stock_mismatches":[],"unreleased_cancels":[],"orphan_releases":[]}"#;

    fn found() -> (Anomalies, AnomalyExamples) {
        let counts = Anomalies::default()
            .with(Anomaly::EarlyCancels, 1)
            .with(Anomaly::MissedCancels, 7)
            .with(Anomaly::PhantomSchedules, 2);
        let mut examples = AnomalyExamples::default();
        examples.set(Anomaly::EarlyCancels, vec![11]);
        examples.set(Anomaly::MissedCancels, vec![4, 5]);
        (counts, examples)
    }

    /// The `"key":value` entries of a compact JSON object, in order.
    fn entries(object: &str) -> Vec<&str> {
        let inner = &object[1..object.len() - 1];
        let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
        for (at, c) in inner.char_indices() {
            match c {
                '[' | '{' => depth += 1,
                ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(&inner[start..at]);
                    start = at + 1;
                }
                _ => {}
            }
        }
        out.push(&inner[start..]);
        out
    }

    /// `json` holds each entry of `expected`, in its order, and nothing but
    /// entries of the table's rows.
    fn assert_written_as(json: &str, expected: &str) {
        let written = entries(json);
        let mut from = 0;
        for entry in entries(expected) {
            let at = written[from..]
                .iter()
                .position(|e| *e == entry)
                .unwrap_or_else(|| panic!("{entry} missing or out of order in {json}"));
            from += at + 1;
        }
        for entry in written {
            let key = entry.split(':').next().unwrap().trim_matches('"');
            assert!(Anomaly::from_key(key).is_some(), "{entry} in {json}");
        }
    }

    #[test]
    fn written_in_the_contracts_order_with_examples_only_where_a_query_counts() {
        let (counts, examples) = found();
        let written = serde_json::to_string(&counts).unwrap();
        assert_written_as(&written, WRITTEN);
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&written).unwrap();
        assert_eq!(object.len(), COUNT, "every row once: {written}");

        let written_examples = serde_json::to_string(&examples).unwrap();
        assert_written_as(&written_examples, EXAMPLES);
        let queried = Anomaly::ALL
            .into_iter()
            .filter(|a| matches!(a.source(), Source::Query { .. }))
            .count();
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&written_examples).unwrap();
        assert_eq!(object.len(), queried, "{written_examples}");
        assert!(!object.contains_key("phantom_schedules"));

        assert_eq!(serde_json::from_str::<Anomalies>(&written).unwrap(), counts);
        assert_eq!(
            serde_json::from_str::<AnomalyExamples>(&written_examples).unwrap(),
            examples
        );
    }

    #[test]
    fn an_older_file_reads_missing_keys_as_zero_and_skips_unknown_ones() {
        let old = r#"{"missed_cancels": 3, "retired_anomaly": {"any": [1]}}"#;
        let counts: Anomalies = serde_json::from_str(old).unwrap();
        assert_eq!(counts, Anomalies::default().with(Anomaly::MissedCancels, 3));
        let examples: AnomalyExamples = serde_json::from_str(r#"{"early_cancels":[9]}"#).unwrap();
        assert_eq!(examples.get(Anomaly::EarlyCancels), [9]);
        assert!(examples.get(Anomaly::MissedCancels).is_empty());
        assert!(serde_json::from_str::<Anomalies>(r#"{"missed_cancels": -1}"#).is_err());
    }

    #[test]
    fn worst_is_the_larger_count_of_each_and_total_sums_them() {
        let (a, _) = found();
        let b = Anomalies::default()
            .with(Anomaly::EarlyCancels, 4)
            .with(Anomaly::OrphanReleases, 1);
        let worst = a.worst(&b);
        let expected: Vec<u64> = Anomaly::ALL
            .into_iter()
            .map(|x| a.get(x).max(b.get(x)))
            .collect();
        assert_eq!(worst.iter().map(|(_, n)| n).collect::<Vec<_>>(), expected);
        assert_eq!(worst.get(Anomaly::EarlyCancels), 4);
        assert_eq!(worst.total(), 4 + 7 + 2 + 1);
        assert_eq!(Anomalies::default().total(), 0);
    }
}
