//! What every section's validation shares: [`FieldError`] (a bad value
//! and its dotted key), [`range`], and the grant lists more than one
//! section writes (`roots`, `network`), parsed one way.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ClientNeeds, Mode, Root};
use crate::grants::network::HostPattern;

/// `value` if it lies in `lo..=hi`, else the error for `key`.
pub(super) fn range(
    key: &str,
    value: Option<u64>,
    lo: u64,
    hi: u64,
) -> Result<Option<u64>, FieldError> {
    match value {
        Some(v) if !(lo..=hi).contains(&v) => Err(FieldError::new(
            key.to_owned(),
            v.to_string(),
            format!("must be between {lo} and {hi}"),
        )),
        other => Ok(other),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoot {
    pub(super) path: PathBuf,
    #[serde(default)]
    mode: Option<String>,
}

/// An invalid value: its key (dotted, relative to the table it is in until
/// [`FieldError::under`] names the table), the value as written, and what
/// it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FieldError {
    pub(super) key: String,
    pub(super) value: String,
    pub(super) reason: String,
}

impl FieldError {
    pub(super) fn new(key: String, value: String, reason: String) -> Self {
        FieldError { key, value, reason }
    }

    /// The same error, its key inside `table`.
    pub(super) fn under(self, table: &str) -> Self {
        FieldError {
            key: format!("{table}.{}", self.key),
            ..self
        }
    }
}

/// `roots = [...]`, each checked and resolved against `dir`.
pub(super) fn parse_roots(raw: &[RawRoot], dir: &Path) -> Result<Vec<Root>, FieldError> {
    let mut roots = Vec::with_capacity(raw.len());
    for (i, root) in raw.iter().enumerate() {
        let mode = match root.mode.as_deref() {
            None | Some("ro" | "read-only") => Mode::ReadOnly,
            Some("rw" | "read-write") => Mode::ReadWrite,
            Some(other) => {
                return Err(FieldError::new(
                    format!("roots[{i}].mode"),
                    format!("{other:?}"),
                    "must be \"ro\" or \"rw\"".into(),
                ));
            }
        };
        let grant = Root::new(&root.path, mode, dir).map_err(|reason| {
            FieldError::new(
                format!("roots[{i}].path"),
                format!("{:?}", root.path.display().to_string()),
                format!("is invalid: {reason}"),
            )
        })?;
        roots.push(grant);
    }
    Ok(roots)
}

/// `requires_client = [...]`, each entry a client capability's name.
pub(super) fn parse_client_needs(entries: &[String]) -> Result<ClientNeeds, FieldError> {
    let mut needs = ClientNeeds::default();
    for (i, entry) in entries.iter().enumerate() {
        if !needs.set(entry) {
            return Err(FieldError::new(
                format!("requires_client[{i}]"),
                format!("{entry:?}"),
                format!(
                    "is not a client capability: use {}",
                    ClientNeeds::NAMES.map(|n| format!("\"{n}\"")).join(", ")
                ),
            ));
        }
    }
    Ok(needs)
}

/// `network = [...]`, each entry a host pattern.
pub(super) fn parse_hosts(entries: &[String]) -> Result<Vec<HostPattern>, FieldError> {
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            HostPattern::parse(entry).map_err(|reason| {
                FieldError::new(format!("network[{i}]"), format!("{entry:?}"), reason)
            })
        })
        .collect()
}
