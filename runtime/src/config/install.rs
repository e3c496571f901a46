//! `[install]` (how tools are fetched and what their signatures must be)
//! and `[[sources]]` (tools `serve` fetches before serving), as written and
//! validated. Keys are read and parsed here, so a bad key file is a config
//! error at start-up, not a surprise at the first install.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::expand_tilde;
use super::fields::{FieldError, range};
use crate::source::{Digest, Source, check_name};

/// The lock's file name, beside the config.
pub const LOCK_FILE_NAME: &str = "toolcage.lock";

/// The default cap on a component's size.
pub const DEFAULT_MAX_COMPONENT_MIB: u64 = 256;

/// The default bound on one source's whole fetch (every request it takes:
/// manifests, signatures, the component), in milliseconds: ten minutes,
/// what a single download of the largest component was already allowed at
/// the default `timeout_ms` (20 × 30 s), now for all of a source's
/// requests together.
pub const DEFAULT_FETCH_DEADLINE_MS: u64 = 600_000;

/// How tools are installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    /// The lock file (`lock_file`; default `toolcage.lock` beside the
    /// config).
    pub lock_file: Option<PathBuf>,
    /// Public keys (PEM files) that may sign artifacts.
    pub keys: Vec<PathBuf>,
    /// Refuse an OCI artifact no configured key signed.
    pub require_signature: bool,
    /// The largest component fetched, in bytes.
    pub max_component_bytes: u64,
    /// Each registry request's waits, in milliseconds.
    pub timeout_ms: u64,
    /// One source's whole fetch (every request of an `add`, of one tool's
    /// `update`, of one `[[sources]]` entry), in milliseconds.
    pub fetch_deadline_ms: u64,
    /// Tools `serve` fetches before serving, in order.
    pub sources: Vec<SourceEntry>,
}

impl Default for Install {
    fn default() -> Self {
        Install {
            lock_file: None,
            keys: Vec::new(),
            require_signature: false,
            max_component_bytes: DEFAULT_MAX_COMPONENT_MIB * 1024 * 1024,
            timeout_ms: 30_000,
            fetch_deadline_ms: DEFAULT_FETCH_DEADLINE_MS,
            sources: Vec::new(),
        }
    }
}

/// One `[[sources]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    /// The source, parsed.
    pub source: Source,
    /// As written (what the lock records).
    pub text: String,
    /// The tool file's name (without `.wasm`).
    pub name: String,
    /// The digest an `https://` source's bytes must have.
    pub digest: Option<Digest>,
    /// This source's keys, instead of `[install] keys`, if set.
    pub keys: Option<Vec<PathBuf>>,
    /// Over `[install] require_signature`, if set.
    pub require_signature: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInstall {
    lock_file: Option<PathBuf>,
    keys: Option<Vec<PathBuf>>,
    require_signature: Option<bool>,
    max_component_mib: Option<u64>,
    timeout_ms: Option<u64>,
    fetch_deadline_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSource {
    source: String,
    name: Option<String>,
    digest: Option<String>,
    keys: Option<Vec<PathBuf>>,
    require_signature: Option<bool>,
}

/// Resolve `[install]` and `[[sources]]` (paths against `base`).
pub(super) fn resolve(
    raw: &RawInstall,
    sources: &[RawSource],
    base: &Path,
) -> Result<Install, FieldError> {
    let path = |p: &PathBuf| {
        let p = expand_tilde(p);
        if p.is_absolute() { p } else { base.join(p) }
    };
    let keys = match &raw.keys {
        Some(keys) => check_keys(keys.iter().map(path).collect(), "install.keys")?,
        None => Vec::new(),
    };
    let max_mib = range("install.max_component_mib", raw.max_component_mib, 1, 4096)?
        .unwrap_or(DEFAULT_MAX_COMPONENT_MIB);
    let timeout_ms = range("install.timeout_ms", raw.timeout_ms, 100, 600_000)?.unwrap_or(30_000);
    // A second to a day.
    let fetch_deadline_ms = range(
        "install.fetch_deadline_ms",
        raw.fetch_deadline_ms,
        1_000,
        86_400_000,
    )?
    .unwrap_or(DEFAULT_FETCH_DEADLINE_MS);
    let mut entries: Vec<SourceEntry> = Vec::new();
    for (i, raw) in sources.iter().enumerate() {
        let key = |field: &str| format!("sources[{i}].{field}");
        let bad = |field: &str, value: &str, why: String| {
            FieldError::new(key(field), format!("{value:?}"), why)
        };
        let source = Source::parse(&raw.source).map_err(|why| bad("source", &raw.source, why))?;
        let name = match &raw.name {
            Some(name) => {
                check_name(name).map_err(|why| bad("name", name, why))?;
                name.clone()
            }
            None => source.default_name().ok_or_else(|| {
                bad(
                    "source",
                    &raw.source,
                    "gives no usable file name; set `name`".into(),
                )
            })?,
        };
        if entries.iter().any(|e| e.name == name) {
            return Err(bad(
                "name",
                &name,
                "is already the name of an earlier source".into(),
            ));
        }
        let digest = match &raw.digest {
            Some(d) => Some(Digest::parse(d).map_err(|why| bad("digest", d, why))?),
            None => None,
        };
        if matches!(source, Source::Url { .. }) && digest.is_none() {
            return Err(bad(
                "digest",
                "",
                "an https:// source needs the digest its bytes must have".into(),
            ));
        }
        if matches!(source, Source::Path(_)) {
            return Err(bad(
                "source",
                &raw.source,
                "a source fetched at start-up is oci:// or https://; a local file goes into the \
                 tools folder"
                    .into(),
            ));
        }
        let keys = match &raw.keys {
            Some(keys) => Some(check_keys(keys.iter().map(path).collect(), &key("keys"))?),
            None => None,
        };
        entries.push(SourceEntry {
            text: raw.source.clone(),
            source,
            name,
            digest,
            keys,
            require_signature: raw.require_signature,
        });
    }
    Ok(Install {
        lock_file: raw.lock_file.as_ref().map(path),
        keys,
        require_signature: raw.require_signature.unwrap_or(false),
        max_component_bytes: max_mib * 1024 * 1024,
        timeout_ms,
        fetch_deadline_ms,
        sources: entries,
    })
}

/// Every key file readable and a public key toolcage can check with.
fn check_keys(keys: Vec<PathBuf>, field: &str) -> Result<Vec<PathBuf>, FieldError> {
    for key in &keys {
        crate::source::keys::read_public_key(key).map_err(|why| {
            FieldError::new(
                field.to_owned(),
                format!("{:?}", key.display().to_string()),
                why,
            )
        })?;
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fetch_deadline_defaults_to_ten_minutes_and_is_bounded() {
        let with = |ms: Option<u64>| {
            let raw = RawInstall {
                fetch_deadline_ms: ms,
                ..RawInstall::default()
            };
            resolve(&raw, &[], Path::new("/")).map(|install| install.fetch_deadline_ms)
        };
        assert_eq!(with(None), Ok(600_000));
        assert_eq!(with(Some(3_000)), Ok(3_000));
        for bad in [0, 999, 86_400_001] {
            let error = with(Some(bad)).expect_err("out of range");
            assert_eq!(error.key, "install.fetch_deadline_ms");
            assert!(error.reason.contains("between 1000"), "{bad}: {error:?}");
        }
    }
}
