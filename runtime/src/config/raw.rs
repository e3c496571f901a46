//! The file as written: `Raw*` structs that mirror it (serde,
//! `deny_unknown_fields`), and their validation into [`Config`]. Every
//! error names the dotted key and the value ([`FieldError`] until the
//! table is known, then `ConfigError::Invalid`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::fields::{FieldError, RawRoot, parse_roots, range};
use super::policy::RawPolicy;
use super::*;

impl Config {
    /// Read and validate the file at `path`.
    ///
    /// # Errors
    ///
    /// The file cannot be read, is not valid TOML, has an unknown key, or a
    /// value is out of range; the error names the file, the key and the value.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Validate `text`, the contents of the file at `path` (used to name the
    /// file in errors and to resolve relative paths).
    ///
    /// # Errors
    ///
    /// As for [`Config::load`].
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|error| ConfigError::Syntax {
            path: path.to_owned(),
            message: error.to_string().trim_end().to_owned(),
        })?;
        let invalid_field = |e: FieldError| ConfigError::Invalid {
            path: path.to_owned(),
            key: e.key,
            value: e.value,
            reason: e.reason,
        };
        let invalid = |key: String, value: String, reason: &str| {
            invalid_field(FieldError::new(key, value, reason.to_owned()))
        };
        let base = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: PathBuf| -> PathBuf {
            let p = expand_tilde(&p);
            if p.is_absolute() { p } else { base.join(p) }
        };

        let server = ServerSettings {
            max_concurrent_calls: raw
                .server
                .max_concurrent_calls
                .unwrap_or(DEFAULT_MAX_CONCURRENT_CALLS),
            max_describe_bytes: raw
                .server
                .max_describe_kib
                .unwrap_or(DEFAULT_MAX_DESCRIBE_KIB)
                * 1024,
            ready_instances: raw
                .server
                .ready_instances
                .unwrap_or(DEFAULT_READY_INSTANCES),
            max_pending_request_bytes: raw
                .server
                .max_pending_request_mib
                .unwrap_or(DEFAULT_MAX_PENDING_REQUEST_MIB)
                * 1024
                * 1024,
            memory_reset: match raw.server.memory_reset.as_deref() {
                None => MemoryReset::Auto,
                Some(value) => MemoryReset::parse(value).ok_or_else(|| {
                    invalid(
                        "server.memory_reset".into(),
                        value.to_owned(),
                        &format!("must be {}", MemoryReset::NAMES),
                    )
                })?,
            },
        };
        if let Some(mib) = raw.server.max_pending_request_mib
            && !(1..=64 * 1024).contains(&mib)
        {
            return Err(invalid(
                "server.max_pending_request_mib".into(),
                mib.to_string(),
                "must be between 1 and 65536",
            ));
        }
        let stdio = raw
            .stdio
            .resolve()
            .map_err(|e| invalid_field(e.under("stdio")))?;
        if let Some(kib) = raw.server.max_describe_kib
            && !(64..=1024 * 1024).contains(&kib)
        {
            return Err(invalid(
                "server.max_describe_kib".into(),
                kib.to_string(),
                "must be between 64 and 1048576 (1 GiB)",
            ));
        }
        if server.ready_instances > 256 {
            return Err(invalid(
                "server.ready_instances".into(),
                server.ready_instances.to_string(),
                "must be between 0 and 256",
            ));
        }
        if !(1..=10_000).contains(&server.max_concurrent_calls) {
            return Err(invalid(
                "server.max_concurrent_calls".into(),
                server.max_concurrent_calls.to_string(),
                "must be between 1 and 10000",
            ));
        }

        let http = raw
            .http
            .resolve(base)
            .map_err(|e| invalid_field(e.under("http")))?;
        if let Some(file) = &raw.defaults.file {
            return Err(invalid(
                "defaults.file".into(),
                format!("{:?}", file.display().to_string()),
                "binds one tool to its file; set it under `[tools.NAME]`",
            ));
        }
        if let Some(pin) = &raw.defaults.pin {
            return Err(invalid(
                "defaults.pin".into(),
                format!("{pin:?}"),
                "pins one tool's component; set it under `[tools.NAME]`",
            ));
        }
        let defaults = raw
            .defaults
            .apply(&Policy::default(), base)
            .map_err(|e| invalid_field(e.under("defaults")))?;
        let journal = match &raw.journal {
            None => None,
            Some(journal) => Some(
                journal
                    .resolve(base)
                    .map_err(|e| invalid_field(e.under("journal")))?,
            ),
        };
        let mut tools = BTreeMap::new();
        for (name, overrides) in raw.tools {
            let policy = overrides
                .apply(&defaults, base)
                .map_err(|e| invalid_field(e.under(&format!("tools.{}", toml_key(&name)))))?;
            tools.insert(name, policy);
        }
        let mut components = BTreeMap::new();
        for (file, raw) in raw.components {
            let rules = raw
                .resolve()
                .map_err(|e| invalid_field(e.under(&format!("components.{}", toml_key(&file)))))?;
            components.insert(file, rules);
        }
        let callers = super::auth::resolve_callers(&raw.callers, base)
            .map_err(|(i, e)| invalid_field(e.under(&format!("callers[{i}]"))))?;
        if !callers.is_empty() && http.oauth.is_none() {
            return Err(invalid(
                "callers".into(),
                format!("({} entries)", callers.len()),
                "applies to callers authenticated by `[http.oauth]`, which is not set (stdio and \
                 the static token have no caller identity to match)",
            ));
        }
        let mut install =
            super::install::resolve(&raw.install, &raw.sources, base).map_err(invalid_field)?;
        install
            .lock_file
            .get_or_insert_with(|| base.join(super::install::LOCK_FILE_NAME));
        let tasks = raw
            .tasks
            .resolve()
            .map_err(|e| invalid_field(e.under("tasks")))?;
        // A task is kept for `ttl_ms` from its creation, so a call that runs
        // as one must end before that.
        for (key, policy) in std::iter::once(("defaults".to_owned(), &defaults)).chain(
            tools
                .iter()
                .map(|(name, p)| (format!("tools.{}", toml_key(name)), p)),
        ) {
            if policy.limits.task_deadline_ms > tasks.ttl_ms {
                return Err(invalid(
                    format!("{key}.task_deadline_ms"),
                    policy.limits.task_deadline_ms.to_string(),
                    &format!(
                        "must be at most `tasks.ttl_ms` ({}): a task is kept that long from its creation",
                        tasks.ttl_ms
                    ),
                ));
            }
        }
        let resource_roots = raw
            .resources
            .resolve(base)
            .map_err(|e| invalid_field(e.under("resources")))?;
        let state_keys = match &raw.server.state_key_file {
            None => None,
            Some(file) => {
                let path = {
                    let p = expand_tilde(file);
                    if p.is_absolute() { p } else { base.join(p) }
                };
                let shown = format!("{:?}", path.display().to_string());
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    invalid(
                        "server.state_key_file".into(),
                        shown.clone(),
                        &format!("cannot be read: {e}"),
                    )
                })?;
                let keys = StateKeys::parse(&text)
                    .map_err(|why| invalid("server.state_key_file".into(), shown, &why))?;
                Some(Arc::new(keys))
            }
        };
        let task_store = match &raw.tasks.store_url {
            None => {
                if raw.tasks.store_password_file.is_some() || raw.tasks.store_prefix.is_some() {
                    return Err(invalid(
                        "tasks.store_url".into(),
                        "(none)".into(),
                        "is needed for `store_password_file` and `store_prefix`",
                    ));
                }
                None
            }
            Some(url) => {
                let shown = format!("{url:?}");
                super::TaskStore::check_url(url)
                    .map_err(|why| invalid("tasks.store_url".into(), shown, &why))?;
                let password = match &raw.tasks.store_password_file {
                    None => None,
                    Some(file) => {
                        let path = resolve(file.clone());
                        let shown = format!("{:?}", path.display().to_string());
                        let text = std::fs::read_to_string(&path).map_err(|e| {
                            invalid(
                                "tasks.store_password_file".into(),
                                shown.clone(),
                                &format!("cannot be read: {e}"),
                            )
                        })?;
                        let password = text.trim().to_owned();
                        if password.is_empty() || password.chars().any(char::is_control) {
                            return Err(invalid(
                                "tasks.store_password_file".into(),
                                shown,
                                "must hold one line, the password",
                            ));
                        }
                        Some(password)
                    }
                };
                let prefix = raw
                    .tasks
                    .store_prefix
                    .clone()
                    .unwrap_or_else(|| "toolcage".into());
                if prefix.is_empty()
                    || prefix.len() > 64
                    || !prefix
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                {
                    return Err(invalid(
                        "tasks.store_prefix".into(),
                        format!("{prefix:?}"),
                        "must be 1 to 64 of `A-Za-z0-9._-`",
                    ));
                }
                Some(super::TaskStore {
                    url: url.clone(),
                    password,
                    prefix,
                })
            }
        };
        let mut config = Config {
            task_store,
            state_keys,
            resource_roots,
            tasks,
            callers,
            install,
            source: Some(path.to_owned()),
            components,
            tools_dir: raw.tools_dir.map(resolve),
            cache_dir: raw.cache_dir.map(resolve),
            server,
            http,
            stdio,
            defaults,
            tools,
            journal,
        };
        config.resolve_roots();
        Ok(config)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    tools_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    http: RawHttp,
    #[serde(default)]
    stdio: RawStdio,
    #[serde(default)]
    defaults: RawPolicy,
    #[serde(default)]
    tools: BTreeMap<String, RawPolicy>,
    journal: Option<RawJournal>,
    #[serde(default)]
    components: BTreeMap<String, super::components::RawComponent>,
    #[serde(default)]
    callers: Vec<super::auth::RawCaller>,
    #[serde(default)]
    install: super::install::RawInstall,
    #[serde(default)]
    sources: Vec<super::install::RawSource>,
    #[serde(default)]
    tasks: RawTasks,
    #[serde(default)]
    resources: RawResources,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResources {
    roots: Option<Vec<RawRoot>>,
}

impl RawResources {
    /// The folders resource reads may open: read-only, always.
    fn resolve(&self, dir: &Path) -> Result<Vec<crate::grants::files::Root>, FieldError> {
        let roots = parse_roots(self.roots.as_deref().unwrap_or_default(), dir)?;
        if let Some((i, root)) = roots
            .iter()
            .enumerate()
            .find(|(_, r)| r.mode != crate::grants::files::Mode::ReadOnly)
        {
            return Err(FieldError::new(
                format!("roots[{i}].mode"),
                format!("{:?}", root.path.display().to_string()),
                "must be \"ro\": a resource read never writes".into(),
            ));
        }
        Ok(roots)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTasks {
    max_per_client: Option<u64>,
    max_total: Option<u64>,
    ttl_ms: Option<u64>,
    poll_interval_ms: Option<u64>,
    max_retained_mib: Option<u64>,
    store_url: Option<String>,
    store_password_file: Option<PathBuf>,
    store_prefix: Option<String>,
}

impl RawTasks {
    fn resolve(&self) -> Result<TaskSettings, FieldError> {
        let mut tasks = TaskSettings::default();
        if let Some(n) = range("max_per_client", self.max_per_client, 1, 100_000)? {
            tasks.max_per_client = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = range("max_total", self.max_total, 1, 1_000_000)? {
            tasks.max_total = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(ms) = range("ttl_ms", self.ttl_ms, 1_000, 7 * 86_400_000)? {
            tasks.ttl_ms = ms;
        }
        if let Some(ms) = range("poll_interval_ms", self.poll_interval_ms, 1, 3_600_000)? {
            tasks.poll_interval_ms = ms;
        }
        if let Some(mib) = range("max_retained_mib", self.max_retained_mib, 1, 1024 * 1024)? {
            tasks.max_retained_bytes = mib * 1024 * 1024;
        }
        Ok(tasks)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJournal {
    path: Option<PathBuf>,
    to: Option<String>,
    durable: Option<bool>,
    max_mib: Option<u64>,
    keep: Option<u32>,
    arguments: Option<String>,
    redact: Option<Vec<String>>,
}

impl RawJournal {
    fn resolve(&self, base: &Path) -> Result<JournalConfig, FieldError> {
        let to = match self.to.as_deref() {
            None => None,
            Some("stdout") => Some(JournalStream::Stdout),
            Some("stderr") => Some(JournalStream::Stderr),
            Some(other) => {
                return Err(FieldError::new(
                    "to".into(),
                    format!("{other:?}"),
                    "must be \"stdout\" or \"stderr\" (or set `path` instead, for a file)".into(),
                ));
            }
        };
        let path = match (&self.path, to) {
            (Some(path), None) => {
                let p = expand_tilde(path);
                normalize(&if p.is_absolute() { p } else { base.join(p) })
            }
            (None, Some(_)) => PathBuf::new(),
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "to".into(),
                    "(with path)".into(),
                    "conflicts with `journal.path`: the journal goes to a file or a stream".into(),
                ));
            }
            (None, None) => {
                return Err(FieldError::new(
                    "path".into(),
                    "(missing)".into(),
                    "is needed: the file the journal is written to (or `to = \"stderr\"`)".into(),
                ));
            }
        };
        let max_mib = self.max_mib.unwrap_or(64);
        if !(1..=1024 * 1024).contains(&max_mib) {
            return Err(FieldError::new(
                "max_mib".into(),
                max_mib.to_string(),
                "must be between 1 and 1048576".into(),
            ));
        }
        let keep = self.keep.unwrap_or(5);
        if keep > 1000 {
            return Err(FieldError::new(
                "keep".into(),
                keep.to_string(),
                "must be at most 1000".into(),
            ));
        }
        let arguments = match &self.arguments {
            None => ArgumentsMode::Full,
            Some(text) => ArgumentsMode::parse(text).ok_or_else(|| {
                FieldError::new(
                    "arguments".to_owned(),
                    format!("{text:?}"),
                    "must be \"full\", \"digest\" or \"none\"".to_owned(),
                )
            })?,
        };
        let redact = match &self.redact {
            None => DEFAULT_REDACT.iter().map(|k| (*k).to_owned()).collect(),
            Some(keys) => keys.iter().map(|k| k.to_ascii_lowercase()).collect(),
        };
        Ok(JournalConfig {
            path,
            to,
            durable: self.durable.unwrap_or(false),
            max_bytes: max_mib * 1024 * 1024,
            keep,
            arguments,
            redact,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    state_key_file: Option<PathBuf>,
    max_concurrent_calls: Option<u32>,
    ready_instances: Option<u32>,
    memory_reset: Option<String>,
    max_describe_kib: Option<u64>,
    max_pending_request_mib: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStdio {
    max_requests_in_flight: Option<u64>,
    max_pending_output_mib: Option<u64>,
    one_thread: Option<bool>,
}

impl RawStdio {
    fn resolve(&self) -> Result<StdioLimits, FieldError> {
        let mut limits = StdioLimits::default();
        if let Some(n) = range(
            "max_requests_in_flight",
            self.max_requests_in_flight,
            1,
            100_000,
        )? {
            limits.max_requests_in_flight = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(mib) = range(
            "max_pending_output_mib",
            self.max_pending_output_mib,
            1,
            4096,
        )? {
            limits.max_pending_output = usize::try_from(mib * 1024 * 1024).unwrap_or(usize::MAX);
        }
        limits.one_thread = self.one_thread;
        Ok(limits)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    allowed_origins: Vec<String>,
    token_file: Option<PathBuf>,
    token_env: Option<String>,
    max_body_kib: Option<u64>,
    max_concurrent_requests: Option<u64>,
    shutdown_grace_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    body_timeout_ms: Option<u64>,
    max_connections: Option<u64>,
    max_sessions: Option<u64>,
    drain_delay_ms: Option<u64>,
    metrics: Option<String>,
    replica_name: Option<String>,
    replica_name_env: Option<String>,
    oauth: Option<super::auth::RawOAuth>,
    #[serde(default)]
    rest: RawRest,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRest {
    enabled: Option<bool>,
    #[serde(default)]
    unconfirmed: Vec<String>,
}

impl RawHttp {
    fn resolve(&self, base: &Path) -> Result<HttpConfig, FieldError> {
        let mut http = HttpConfig {
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            ..HttpConfig::default()
        };
        if let Some(kib) = range("max_body_kib", self.max_body_kib, 1, 1024 * 1024)? {
            http.max_body_bytes = usize::try_from(kib * 1024).unwrap_or(usize::MAX);
        }
        if let Some(n) = range(
            "max_concurrent_requests",
            self.max_concurrent_requests,
            1,
            100_000,
        )? {
            http.max_concurrent_requests = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(ms) = range("shutdown_grace_ms", self.shutdown_grace_ms, 0, 3_600_000)? {
            http.shutdown_grace_ms = ms;
        }
        if let Some(ms) = range("idle_timeout_ms", self.idle_timeout_ms, 100, 3_600_000)? {
            http.idle_timeout_ms = ms;
        }
        if let Some(ms) = range("body_timeout_ms", self.body_timeout_ms, 100, 3_600_000)? {
            http.body_timeout_ms = ms;
        }
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        if let Some(n) = range("max_connections", self.max_connections, 1, 1_000_000)? {
            http.max_connections = count(n);
        }
        if let Some(n) = range("max_sessions", self.max_sessions, 1, 1_000_000)? {
            http.max_sessions = count(n);
        }
        if let Some(ms) = range("drain_delay_ms", self.drain_delay_ms, 0, 600_000)? {
            http.drain_delay_ms = ms;
        }
        http.replica_name = match (&self.replica_name, &self.replica_name_env) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "replica_name".into(),
                    "(with replica_name_env)".into(),
                    "conflicts with `http.replica_name_env`: set one".into(),
                ));
            }
            (Some(prefix), None) => Some(("replica_name", prefix.clone())),
            (None, Some(var)) => Some((
                "replica_name_env",
                std::env::var(var).map_err(|_| {
                    FieldError::new(
                        "replica_name_env".into(),
                        format!("{var:?}"),
                        "names an environment variable that is not set".into(),
                    )
                })?,
            )),
            (None, None) => None,
        }
        .map(|(key, prefix)| {
            let well_formed = (1..=63).contains(&prefix.len())
                && prefix
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if well_formed {
                Ok(prefix)
            } else {
                Err(FieldError::new(
                    key.into(),
                    format!("{prefix:?}"),
                    "must be 1 to 63 characters from `A-Z a-z 0-9 - _` (a replica's name)".into(),
                ))
            }
        })
        .transpose()?;
        http.metrics = match self.metrics.as_deref() {
            None | Some("token") => MetricsAccess::Token,
            Some("open") => MetricsAccess::Open,
            Some("off") => MetricsAccess::Off,
            Some(other) => {
                return Err(FieldError::new(
                    "metrics".into(),
                    format!("{other:?}"),
                    "must be \"token\", \"open\" or \"off\"".into(),
                ));
            }
        };
        http.token = match (&self.token_file, &self.token_env) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "token_file".into(),
                    "(with token_env)".into(),
                    "conflicts with `http.token_env`: set one".into(),
                ));
            }
            (Some(file), None) => {
                let path = {
                    let p = expand_tilde(file);
                    if p.is_absolute() { p } else { base.join(p) }
                };
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    FieldError::new(
                        "token_file".into(),
                        format!("{:?}", path.display().to_string()),
                        format!("cannot be read: {e}"),
                    )
                })?;
                Some(text.trim().to_owned())
            }
            (None, Some(var)) => {
                let value = std::env::var(var).map_err(|_| {
                    FieldError::new(
                        "token_env".into(),
                        format!("{var:?}"),
                        "names an environment variable that is not set".into(),
                    )
                })?;
                Some(value.trim().to_owned())
            }
            (None, None) => None,
        };
        http.rest = RestConfig {
            enabled: self.rest.enabled.unwrap_or(false),
            unconfirmed: self.rest.unconfirmed.clone(),
        };
        if let Some((i, name)) = http.rest.unconfirmed.iter().enumerate().find(|(_, name)| {
            name.as_str() != "*" && crate::catalog::check_tool_name(name).is_err()
        }) {
            return Err(FieldError::new(
                format!("rest.unconfirmed[{i}]"),
                format!("{name:?}"),
                "must be a tool name, or \"*\" for every tool".into(),
            ));
        }
        if let Some(oauth) = &self.oauth {
            if http.token.is_some() {
                return Err(FieldError::new(
                    "oauth".into(),
                    "(with a token)".into(),
                    "conflicts with `http.token_file`/`http.token_env`: the static token is the \
                     simple mode, `[http.oauth]` the full one; set one"
                        .into(),
                ));
            }
            http.oauth = Some(oauth.resolve(base).map_err(|e| e.under("oauth"))?);
        }
        if http.token.as_deref() == Some("") {
            return Err(FieldError::new(
                "token".into(),
                "\"\"".into(),
                "is empty".into(),
            ));
        }
        Ok(http)
    }
}
