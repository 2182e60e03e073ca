//! `--set key=value` (and `--rate`, `--duration`, ... which are spelt the
//! same way): a scenario field changed from the command line.
//!
//! The change is made on the scenario as TOML, at the field's own path
//! (`payments.pay-ratio`, `timeouts[0].after`, `strategies.db-scan.interval`),
//! and the result is read back and checked exactly as a scenario file is:
//! an unknown field, a wrong type and a value out of range give the same
//! errors, naming the field, and the run folder's `scenario.toml` records
//! the value that ran.

use anyhow::{anyhow, bail, Result};

/// One `key=value` of `--set`.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    /// The dotted path, as in the scenario file (`payments.pay-ratio`).
    pub key: String,
    /// The value as typed (`0.8`, `5s`, `true`, `[100, 200]`).
    pub value: String,
}

impl std::str::FromStr for Set {
    type Err = String;

    /// `key=value`; the value may itself hold `=`.
    fn from_str(text: &str) -> std::result::Result<Set, String> {
        let (key, value) = text.split_once('=').ok_or_else(|| {
            format!("`{text}` is not key=value (e.g. --set payments.pay-ratio=0.8)")
        })?;
        let key = key.trim();
        if key.is_empty() {
            return Err(format!(
                "`{text}` names no field (e.g. payments.pay-ratio=0.8)"
            ));
        }
        Ok(Set {
            key: key.to_string(),
            value: value.trim().to_string(),
        })
    }
}

impl std::fmt::Display for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// One step of a key: a table's field or an array's element.
enum Step<'a> {
    Field(&'a str),
    Index(usize),
}

/// `timeouts[0].after` → `timeouts`, `[0]`, `after`.
fn steps(key: &str) -> Result<Vec<Step<'_>>> {
    let mut steps = Vec::new();
    for part in key.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() {
            bail!("`{key}`: an empty field name");
        }
        steps.push(Step::Field(name));
        while let Some(inner) = rest.strip_prefix('[') {
            let (index, after) = inner
                .split_once(']')
                .ok_or_else(|| anyhow!("`{key}`: `[` without `]`"))?;
            let index = index
                .parse()
                .map_err(|_| anyhow!("`{key}`: `[{index}]` is not an index (0, 1, ...)"))?;
            steps.push(Step::Index(index));
            rest = after;
        }
        if !rest.is_empty() {
            bail!("`{key}`: unexpected `{rest}`");
        }
    }
    Ok(steps)
}

/// The value typed, read as a TOML value where it is one (`0.8`, `true`,
/// `[1, 2]`, `"x"`), else as a string (`5s`, `db-scan`), and shaped after
/// the value it replaces: an integer where a float was (`--rate 30`), a
/// string where a string was (`name=2026`).
fn value_of(text: &str, old: Option<&toml::Value>) -> toml::Value {
    let parsed = toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut t| t.remove("v"));
    match (parsed, old) {
        (Some(toml::Value::Integer(i)), Some(toml::Value::Float(_))) => {
            toml::Value::Float(i as f64)
        }
        (Some(v), Some(toml::Value::String(_))) if !v.is_str() => {
            toml::Value::String(text.to_string())
        }
        (Some(v), _) => v,
        (None, _) => toml::Value::String(text.to_string()),
    }
}

/// Makes every change of `sets` on `root` (a scenario as TOML), in order;
/// the error names the `--set`. Whether the result is a scenario is for
/// the caller to check, by reading it back ([`crate::scenario::Scenario::with_sets`]).
pub fn put_all(root: &mut toml::Value, sets: &[Set]) -> Result<()> {
    for set in sets {
        put(root, set).map_err(|e| anyhow!("--set {set}: {e}"))?;
    }
    Ok(())
}

/// `sets` as typed, for messages: `a=1 b=2`.
pub fn listed(sets: &[Set]) -> String {
    sets.iter()
        .map(Set::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// serde's message, on one line (toml writes a multi-line snippet of the
/// whole document for some errors).
pub fn field_error(e: toml::de::Error) -> String {
    e.message().trim().replace('\n', " ")
}

fn put(root: &mut toml::Value, set: &Set) -> Result<()> {
    let steps = steps(&set.key)?;
    let mut at = root;
    let mut path = String::new();
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        match step {
            Step::Field(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                let table = at.as_table_mut().ok_or_else(|| {
                    anyhow!("`{path}`: its parent is not a table, so it has no fields")
                })?;
                if last {
                    let value = value_of(&set.value, table.get(*name));
                    table.insert(name.to_string(), value);
                    return Ok(());
                }
                // A table left out of the file (all its defaults) or an
                // optional one (`[storm]`) is made; serde then says whether
                // the field exists.
                at = table
                    .entry(name.to_string())
                    .or_insert_with(|| toml::Value::Table(Default::default()));
            }
            Step::Index(index) => {
                path.push_str(&format!("[{index}]"));
                let array = at
                    .as_array_mut()
                    .ok_or_else(|| anyhow!("`{path}`: not a list, so it has no [{index}]"))?;
                let len = array.len();
                let element = array
                    .get_mut(*index)
                    .ok_or_else(|| anyhow!("`{path}`: the list has {len} element(s), from [0]"))?;
                if last {
                    *element = value_of(&set.value, Some(element));
                    return Ok(());
                }
                at = element;
            }
        }
    }
    Ok(())
}
