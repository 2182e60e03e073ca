//! The version of the JSON Schemas in `schema/` that the files this build
//! writes follow, and the writer that puts it in each.

/// The version of `schema/*.schema.json` that the `run.json`,
/// `summary.json` and `sweep.json` this build writes follow; each file
/// says it first, as `schema_version`. Raise it (and copy the schemas) when
/// a key outside checkers read changes meaning or goes away; adding keys
/// keeps it.
pub const SCHEMA_VERSION: u32 = 1;

/// `value` as pretty JSON with `"schema_version": SCHEMA_VERSION` first.
pub fn versioned_json<T: serde::Serialize>(value: &T) -> serde_json::Result<String> {
    #[derive(serde::Serialize)]
    struct Versioned<'a, T: serde::Serialize> {
        schema_version: u32,
        #[serde(flatten)]
        inner: &'a T,
    }
    serde_json::to_string_pretty(&Versioned {
        schema_version: SCHEMA_VERSION,
        inner: value,
    })
}
