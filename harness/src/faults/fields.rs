//! Reading the fields of one `[[faults]]` table into its kind's
//! configuration with serde, so that what goes wrong is told apart by
//! field: a field the kind does not take, one it needs and lacks, a value
//! it cannot read. `fault.rs` turns each into a message naming
//! `faults[i].<field>`; serde's own messages name neither the table nor,
//! for a missing field, an example.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Value};
use std::fmt;

/// Why a table's fields did not make its kind's configuration.
#[derive(Debug)]
pub enum FieldError {
    /// A field the kind does not take, and the fields it takes.
    Unknown(String, &'static [&'static str]),
    /// A field the kind needs.
    Missing(&'static str),
    /// A message that already names the field (a value that does not
    /// read), or another serde error.
    Other(String),
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::Unknown(field, _) => write!(f, "unknown field `{field}`"),
            FieldError::Missing(field) => write!(f, "missing field `{field}`"),
            FieldError::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for FieldError {}

impl de::Error for FieldError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        FieldError::Other(message.to_string())
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        FieldError::Unknown(field.to_string(), expected)
    }

    fn missing_field(field: &'static str) -> Self {
        FieldError::Missing(field)
    }
}

/// The fields of `[[faults]]` table `index` (its `kind` and `at` taken
/// out), as a deserializer of a kind's configuration.
#[derive(Debug)]
pub struct Fields {
    pub index: usize,
    pub map: Map<String, Value>,
}

impl<'de> de::Deserializer<'de> for Fields {
    type Error = FieldError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        visitor.visit_map(Entries {
            index: self.index,
            entries: self.map.into_iter(),
            value: None,
        })
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The entries of [`Fields`], each value read by serde_json and its error
/// prefixed with the field it is in.
struct Entries {
    index: usize,
    entries: serde_json::map::IntoIter,
    value: Option<(String, Value)>,
}

impl<'de> MapAccess<'de> for Entries {
    type Error = FieldError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, FieldError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        let read = seed.deserialize(key.clone().into_deserializer());
        self.value = Some((key, value));
        read.map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, FieldError> {
        let (key, value) = self
            .value
            .take()
            .ok_or_else(|| FieldError::Other("a value without its field".into()))?;
        let shown = value.to_string();
        seed.deserialize(value).map_err(|e| {
            FieldError::Other(format!(
                "field `faults[{}].{key}` = {shown} is invalid: {e}",
                self.index
            ))
        })
    }
}
