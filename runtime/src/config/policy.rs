//! A tool's policy as written (`[defaults]`, `[tools.NAME]`), applied over
//! the one it inherits: limits one by one, grants as the keys say (roots
//! replaced as a whole, variables merged), each value checked against its
//! range with the dotted key in the error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::fields::{FieldError, RawRoot, parse_client_needs, parse_hosts, parse_roots};
use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    fuel: Option<u64>,
    deadline_ms: Option<u64>,
    memory_mib: Option<u64>,
    max_result_kib: Option<u64>,
    max_concurrent: Option<u32>,
    roots: Option<Vec<RawRoot>>,
    allow_sampling: Option<bool>,
    network: Option<Vec<String>>,
    resolve: Option<BTreeMap<String, Vec<String>>>,
    http_max_request_kib: Option<u64>,
    http_max_response_kib: Option<u64>,
    http_timeout_ms: Option<u64>,
    env: Option<BTreeMap<String, RawEnv>>,
    config: Option<BTreeMap<String, RawEnv>>,
    confirm: Option<bool>,
    pub(super) pin: Option<String>,
    journal_arguments: Option<String>,
    pub(super) file: Option<PathBuf>,
    requires_client: Option<Vec<String>>,
    tasks: Option<String>,
    task_deadline_ms: Option<u64>,
}

/// An environment variable's source: a literal, toolcage's own variable,
/// or a file (a secret).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawEnv {
    Literal(String),
    Source(RawEnvSource),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvSource {
    from_env: Option<String>,
    file: Option<PathBuf>,
}

impl RawPolicy {
    /// These overrides applied over `base`: limits one by one, `roots` as a
    /// whole (a tool's own list replaces the default list).
    pub(super) fn apply(&self, base: &Policy, dir: &Path) -> Result<Policy, FieldError> {
        let limits = self.limits(base.limits)?;
        let files = match &self.roots {
            None => base.grants.files.clone(),
            Some(raw) => parse_roots(raw, dir)?,
        };
        let hosts = match &self.network {
            None => base.grants.network.hosts.clone(),
            Some(entries) => parse_hosts(entries)?,
        };
        let pinned = match &self.resolve {
            None => base.grants.network.pinned.clone(),
            Some(table) => {
                let mut pinned = BTreeMap::new();
                for (name, addresses) in table {
                    let (host, ips) = NetGrant::parse_pin(name, addresses).map_err(|reason| {
                        FieldError::new(
                            format!("resolve.{}", toml_key(name)),
                            format!("{addresses:?}"),
                            reason,
                        )
                    })?;
                    pinned.insert(host, ips);
                }
                pinned
            }
        };
        let net_limits = self.net_limits(base.grants.network.limits)?;
        let network = if self.network.is_none()
            && self.resolve.is_none()
            && net_limits == base.grants.network.limits
        {
            Arc::clone(&base.grants.network)
        } else {
            Arc::new(NetGrant {
                hosts,
                pinned,
                limits: net_limits,
            })
        };
        let env = merge_values("env", &base.grants.env, self.env.as_ref(), dir)?;
        let config = merge_values("config", &base.grants.config, self.config.as_ref(), dir)?;
        if let Some(pin) = &self.pin {
            let hex = pin.strip_prefix("sha256:").unwrap_or(pin);
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(FieldError::new(
                    "pin".into(),
                    format!("{pin:?}"),
                    "must be a SHA-256 digest, `sha256:` and 64 hex digits (`toolcage pin` prints them)".into(),
                ));
            }
        }
        let journal_arguments = match &self.journal_arguments {
            None => base.journal_arguments,
            Some(text) => Some(ArgumentsMode::parse(text).ok_or_else(|| {
                FieldError::new(
                    "journal_arguments".to_owned(),
                    format!("{text:?}"),
                    "must be \"full\", \"digest\" or \"none\"".to_owned(),
                )
            })?),
        };
        Ok(Policy {
            limits,
            grants: Grants {
                files,
                network,
                env,
                config,
                services: ServicesGrant {
                    sampling: self.allow_sampling.unwrap_or(base.grants.services.sampling),
                },
            },
            confirm: self.confirm.or(base.confirm),
            pin: self.pin.as_ref().map(|pin| {
                pin.strip_prefix("sha256:")
                    .unwrap_or(pin)
                    .to_ascii_lowercase()
            }),
            journal_arguments,
            requires_client: match &self.requires_client {
                None => base.requires_client,
                Some(names) => parse_client_needs(names)?,
            },
            tasks: match &self.tasks {
                None => base.tasks,
                Some(text) => Some(
                    crate::call::TaskSupport::NAMES
                        .iter()
                        .zip([
                            crate::call::TaskSupport::Forbidden,
                            crate::call::TaskSupport::Optional,
                            crate::call::TaskSupport::Required,
                        ])
                        .find_map(|(name, support)| (*name == text).then_some(support))
                        .ok_or_else(|| {
                            FieldError::new(
                                "tasks".into(),
                                format!("{text:?}"),
                                "must be \"forbidden\", \"optional\" or \"required\"".into(),
                            )
                        })?,
                ),
            },
            file: match &self.file {
                None => None,
                Some(file) if file.as_os_str().is_empty() => {
                    return Err(FieldError::new(
                        "file".into(),
                        "\"\"".into(),
                        "is empty".into(),
                    ));
                }
                Some(file) if !file.is_absolute() && file.components().count() != 1 => {
                    return Err(FieldError::new(
                        "file".into(),
                        format!("{:?}", file.display().to_string()),
                        "must be a file name in the tools folder, or an absolute path".into(),
                    ));
                }
                Some(file) => Some(file.clone()),
            },
        })
    }

    /// The limit overrides applied over `base`, each checked against its range.
    fn limits(&self, base: Limits) -> Result<Limits, FieldError> {
        let mut limits = base;
        if let Some(fuel) = check("fuel", self.fuel, 1..=u64::MAX, "must be at least 1")? {
            limits.fuel = fuel;
        }
        if let Some(ms) = check(
            "deadline_ms",
            self.deadline_ms,
            1..=86_400_000,
            "must be between 1 and 86400000 (one day)",
        )? {
            limits.deadline_ms = ms;
        }
        if let Some(ms) = check(
            "task_deadline_ms",
            self.task_deadline_ms,
            1..=7 * 86_400_000,
            "must be between 1 and 604800000 (one week)",
        )? {
            limits.task_deadline_ms = ms;
        }
        if let Some(mib) = check(
            "memory_mib",
            self.memory_mib,
            1..=MAX_MEMORY_MIB,
            "must be between 1 and 4096",
        )? {
            limits.memory_bytes = mib * 1024 * 1024;
        }
        if let Some(kib) = check(
            "max_result_kib",
            self.max_result_kib,
            1..=1024 * 1024,
            "must be between 1 and 1048576 (1 GiB)",
        )? {
            limits.max_result_bytes = kib * 1024;
        }
        if let Some(n) = check(
            "max_concurrent",
            self.max_concurrent.map(u64::from),
            1..=10_000,
            "must be between 1 and 10000",
        )? {
            // In range 1..=10_000, so it fits in a u32.
            limits.max_concurrent = u32::try_from(n).unwrap_or(u32::MAX);
        }
        Ok(limits)
    }

    /// The HTTP caps (`http_*`) applied over `base`, each checked against
    /// its range.
    fn net_limits(&self, base: NetLimits) -> Result<NetLimits, FieldError> {
        let mut limits = base;
        if let Some(kib) = check(
            "http_max_request_kib",
            self.http_max_request_kib,
            0..=1024 * 1024,
            "must be between 0 and 1048576 (1 GiB)",
        )? {
            limits.request_bytes = kib * 1024;
        }
        if let Some(kib) = check(
            "http_max_response_kib",
            self.http_max_response_kib,
            1..=1024 * 1024,
            "must be between 1 and 1048576 (1 GiB)",
        )? {
            limits.response_bytes = kib * 1024;
        }
        if let Some(ms) = check(
            "http_timeout_ms",
            self.http_timeout_ms,
            1..=3_600_000,
            "must be between 1 and 3600000 (one hour)",
        )? {
            limits.timeout = std::time::Duration::from_millis(ms);
        }
        Ok(limits)
    }
}

/// `value` if it lies in `range`, else the key, the value and `reason`.
fn check(
    key: &'static str,
    value: Option<u64>,
    range: std::ops::RangeInclusive<u64>,
    reason: &'static str,
) -> Result<Option<u64>, FieldError> {
    match value {
        Some(v) if !range.contains(&v) => Err(FieldError::new(
            key.to_owned(),
            v.to_string(),
            reason.to_owned(),
        )),
        other => Ok(other),
    }
}

/// The named values of table `table` (`env` or `config`): the tool's over
/// the defaults' (`base`), by name.
fn merge_values(
    table: &str,
    base: &EnvGrant,
    raw: Option<&BTreeMap<String, RawEnv>>,
    dir: &Path,
) -> Result<EnvGrant, FieldError> {
    let Some(raw) = raw else {
        return Ok(base.clone());
    };
    let mut merged: BTreeMap<String, EnvVar> = base
        .vars
        .iter()
        .map(|v| (v.name.clone(), v.clone()))
        .collect();
    for (name, source) in raw {
        if let Some(var) = resolve_value(table, name, source, dir)? {
            merged.insert(name.clone(), var);
        } else {
            merged.remove(name);
        }
    }
    Ok(EnvGrant::new(merged.into_values().collect()))
}

/// One `env` or `config` entry resolved: `None` for a `from_env` variable
/// that toolcage's own environment lacks (logged; the tool gets none).
fn resolve_value(
    table: &str,
    name: &str,
    source: &RawEnv,
    dir: &Path,
) -> Result<Option<EnvVar>, FieldError> {
    let key = || format!("{table}.{}", toml_key(name));
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(FieldError::new(
            key(),
            format!("{name:?}"),
            format!(
                "is not a valid {} name",
                if table == "env" { "variable" } else { "key" }
            ),
        ));
    }
    let var = match source {
        RawEnv::Literal(value) => EnvVar {
            name: name.to_owned(),
            value: value.clone(),
            secret: false,
        },
        RawEnv::Source(RawEnvSource {
            from_env: Some(var),
            file: None,
        }) => match std::env::var(var) {
            Ok(value) => EnvVar {
                name: name.to_owned(),
                value,
                secret: false,
            },
            Err(_) => {
                tracing::warn!(variable = %var, "`{}` names a variable toolcage's environment lacks; the tool gets none", key());
                return Ok(None);
            }
        },
        RawEnv::Source(RawEnvSource {
            from_env: None,
            file: Some(file),
        }) => {
            let path = {
                let p = expand_tilde(file);
                if p.is_absolute() { p } else { dir.join(p) }
            };
            let text = std::fs::read_to_string(&path).map_err(|e| {
                FieldError::new(
                    key(),
                    format!("{{ file = {:?} }}", path.display().to_string()),
                    format!("cannot be read: {e}"),
                )
            })?;
            EnvVar {
                name: name.to_owned(),
                // A file written by `echo` ends with a newline that is not
                // part of the secret.
                value: text.trim_end_matches(['\n', '\r']).to_owned(),
                secret: true,
            }
        }
        RawEnv::Source(_) => {
            return Err(FieldError::new(
                key(),
                "(a table)".into(),
                "must be a string, `{ from_env = \"VAR\" }` or `{ file = \"PATH\" }`".into(),
            ));
        }
    };
    if var.value.contains('\0') {
        return Err(FieldError::new(
            key(),
            "(its value)".into(),
            "contains a NUL byte".into(),
        ));
    }
    Ok(Some(var))
}
