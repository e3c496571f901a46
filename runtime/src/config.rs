//! The operator's configuration: where the tools are, and what each tool may
//! consume.
//!
//! Parsing happens in two steps, as in ripgrep: the TOML file is read into
//! `Raw*` structs that mirror the file (serde, `deny_unknown_fields`), then
//! validated and converted into [`Config`], the type the rest of the program
//! runs on. Every error names the file, the key and the offending value.
//!
//! Policy belongs to the operator: nothing a tool component says can widen
//! what this file grants.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Default fuel per call. Fuel counts roughly one unit per WebAssembly
/// instruction; ten billion is several seconds of pure compute, far beyond
/// what a tool that answers a model should need, yet it stops a runaway loop.
pub const DEFAULT_FUEL: u64 = 10_000_000_000;
/// Default wall-clock deadline per call: 30 s, a common client-side timeout
/// for a tool call.
pub const DEFAULT_DEADLINE_MS: u64 = 30_000;
/// Default cap on a call's linear memory: 128 MiB is ample for text tools and
/// keeps 64 concurrent calls within a few GiB.
pub const DEFAULT_MEMORY_MIB: u64 = 128;
/// Default cap on a result's size (content plus structured output): 16 MiB,
/// more than any model context can use.
pub const DEFAULT_MAX_RESULT_KIB: u64 = 16 * 1024;
/// Default number of calls of one tool that may run at once; more wait.
pub const DEFAULT_MAX_CONCURRENT: u32 = 8;
/// Default number of calls, across all tools, that may run at once; more
/// wait. It also sizes the instance pool.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 64;

/// The largest memory cap a tool can be given: the 32-bit address space.
pub const MAX_MEMORY_MIB: u64 = 4096;

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    /// The folder of tool components, if the file sets one (relative paths
    /// already resolved against the file's folder).
    pub tools_dir: Option<PathBuf>,
    /// Where compiled components are cached, if the file sets one.
    pub cache_dir: Option<PathBuf>,
    /// Server-wide settings.
    pub server: ServerSettings,
    /// Streamable HTTP settings (used with `serve --http`).
    pub http: HttpConfig,
    /// Policy for tools without an override.
    pub defaults: Policy,
    /// Per-tool overrides, by tool name, already merged over `defaults`.
    pub tools: BTreeMap<String, Policy>,
}

/// Settings of the Streamable HTTP transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Extra accepted `Host` values (loopback names are always accepted).
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values; requests with any other `Origin` get 403.
    pub allowed_origins: Vec<String>,
    /// The bearer token, read from `token_file` or `token_env`.
    pub token: Option<String>,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Requests in progress at once.
    pub max_concurrent_requests: usize,
    /// How long shutdown waits for requests in flight, in milliseconds.
    pub shutdown_grace_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            token: None,
            // 4 MiB: tool arguments are small; a bigger body is a mistake
            // or an attack.
            max_body_bytes: 4 * 1024 * 1024,
            max_concurrent_requests: 256,
            shutdown_grace_ms: 10_000,
        }
    }
}

/// What one tool may reach and consume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Per-call limits.
    pub limits: Limits,
    /// Host directories the tool may reach (before narrowing by the client's
    /// roots). Empty: no files at all.
    pub roots: Vec<Grant>,
    /// Whether the tool may ask the client's model for completions (it
    /// spends the user's tokens). Off unless the operator turns it on.
    pub allow_sampling: bool,
}

/// A directory granted to a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Absolute, lexically normalised host path; also the path the tool
    /// sees, so paths a model sees in the client work unchanged.
    pub path: PathBuf,
    /// Read-only or read-write.
    pub mode: Mode,
}

/// Access mode of a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read files and list directories only.
    ReadOnly,
    /// Also create, write, rename and delete.
    ReadWrite,
}

impl Mode {
    /// `ro` or `rw`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "ro",
            Mode::ReadWrite => "rw",
        }
    }
}

impl Grant {
    /// Parse a command-line grant, `PATH`, `PATH:ro` or `PATH:rw` (read-only
    /// when no mode is given), resolving relative paths against `cwd`.
    ///
    /// # Errors
    ///
    /// The path does not exist or is not a directory.
    pub fn parse_flag(text: &str, cwd: &Path) -> Result<Grant, String> {
        let (path, mode) = match text.rsplit_once(':') {
            Some((path, "ro")) => (path, Mode::ReadOnly),
            Some((path, "rw")) => (path, Mode::ReadWrite),
            _ => (text, Mode::ReadOnly),
        };
        Grant::new(Path::new(path), mode, cwd)
    }

    /// A grant of `path` (`~` expanded, relative to `base`), checked to be an
    /// existing directory.
    ///
    /// # Errors
    ///
    /// The path does not exist or is not a directory.
    pub fn new(path: &Path, mode: Mode, base: &Path) -> Result<Grant, String> {
        let expanded = expand_tilde(path);
        let absolute = if expanded.is_absolute() {
            expanded
        } else {
            base.join(expanded)
        };
        let path = normalize(&absolute);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => Ok(Grant { path, mode }),
            Ok(_) => Err(format!("root `{}` is not a directory", path.display())),
            Err(error) => Err(format!("root `{}` cannot be used: {error}", path.display())),
        }
    }
}

/// `path` with `.` removed and `..` applied lexically (never above `/`).
/// Symlinks are not resolved: the sandbox, not this function, decides what a
/// path can reach.
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push("/");
    }
    out
}

/// Server-wide settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSettings {
    /// Calls that may run at once across all tools.
    pub max_concurrent_calls: u32,
}

/// What one call of a tool may consume. Every field is always set: limits
/// are always on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel (roughly, WebAssembly instructions) per call.
    pub fuel: u64,
    /// Wall-clock deadline per call, in milliseconds.
    pub deadline_ms: u64,
    /// Linear memory cap per call, in bytes (the sum over all memories).
    pub memory_bytes: u64,
    /// Result size cap, in bytes.
    pub max_result_bytes: u64,
    /// Calls of this tool that may run at once.
    pub max_concurrent: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: DEFAULT_FUEL,
            deadline_ms: DEFAULT_DEADLINE_MS,
            memory_bytes: DEFAULT_MEMORY_MIB * 1024 * 1024,
            max_result_bytes: DEFAULT_MAX_RESULT_KIB * 1024,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            source: None,
            tools_dir: None,
            cache_dir: None,
            server: ServerSettings {
                max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            },
            http: HttpConfig::default(),
            defaults: Policy::default(),
            tools: BTreeMap::new(),
        }
    }
}

impl Config {
    /// The policy of tool `name`.
    pub fn policy_for(&self, name: &str) -> &Policy {
        self.tools.get(name).unwrap_or(&self.defaults)
    }

    /// The limits that apply to tool `name`.
    pub fn limits_for(&self, name: &str) -> Limits {
        self.policy_for(name).limits
    }

    /// Grant `grant` to every tool (`serve --root`), in addition to what the
    /// file grants.
    pub fn grant_to_all(&mut self, grant: Grant) {
        for policy in std::iter::once(&mut self.defaults).chain(self.tools.values_mut()) {
            if !policy.roots.contains(&grant) {
                policy.roots.push(grant.clone());
            }
        }
    }

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
        let invalid = |key: String, value: String, reason: &str| ConfigError::Invalid {
            path: path.to_owned(),
            key,
            value,
            reason: reason.to_owned(),
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
        };
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
            .map_err(|(key, value, reason)| invalid(format!("http.{key}"), value, &reason))?;
        let defaults = raw
            .defaults
            .apply(&Policy::default(), base)
            .map_err(|(key, value, reason)| invalid(format!("defaults.{key}"), value, &reason))?;
        let mut tools = BTreeMap::new();
        for (name, overrides) in raw.tools {
            let policy = overrides
                .apply(&defaults, base)
                .map_err(|(key, value, reason)| {
                    invalid(format!("tools.{}.{key}", toml_key(&name)), value, &reason)
                })?;
            tools.insert(name, policy);
        }
        Ok(Config {
            source: Some(path.to_owned()),
            tools_dir: raw.tools_dir.map(resolve),
            cache_dir: raw.cache_dir.map(resolve),
            server,
            http,
            defaults,
            tools,
        })
    }
}

/// A configuration error.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or has an unknown key or a value of the
    /// wrong type (the message, from the TOML parser, names it).
    #[error("invalid config file `{}`: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value has the right type but is out of range.
    #[error("invalid config file `{}`: `{key}` = {value} {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The dotted key, e.g. `tools.spin.fuel`.
        key: String,
        /// The offending value.
        value: String,
        /// What it must be.
        reason: String,
    },
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
    defaults: RawPolicy,
    #[serde(default)]
    tools: BTreeMap<String, RawPolicy>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    max_concurrent_calls: Option<u32>,
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
}

impl RawHttp {
    fn resolve(&self, base: &Path) -> Result<HttpConfig, FieldError> {
        let mut http = HttpConfig {
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            ..HttpConfig::default()
        };
        let range = |key: &str, value: Option<u64>, lo: u64, hi: u64| match value {
            Some(v) if !(lo..=hi).contains(&v) => Err((
                key.to_owned(),
                v.to_string(),
                format!("must be between {lo} and {hi}"),
            )),
            other => Ok(other),
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
        http.token = match (&self.token_file, &self.token_env) {
            (Some(_), Some(_)) => {
                return Err((
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
                    (
                        "token_file".into(),
                        format!("{:?}", path.display().to_string()),
                        format!("cannot be read: {e}"),
                    )
                })?;
                Some(text.trim().to_owned())
            }
            (None, Some(var)) => {
                let value = std::env::var(var).map_err(|_| {
                    (
                        "token_env".into(),
                        format!("{var:?}"),
                        "names an environment variable that is not set".into(),
                    )
                })?;
                Some(value.trim().to_owned())
            }
            (None, None) => None,
        };
        if http.token.as_deref() == Some("") {
            return Err(("token".into(), "\"\"".into(), "is empty".into()));
        }
        Ok(http)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    fuel: Option<u64>,
    deadline_ms: Option<u64>,
    memory_mib: Option<u64>,
    max_result_kib: Option<u64>,
    max_concurrent: Option<u32>,
    roots: Option<Vec<RawRoot>>,
    allow_sampling: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoot {
    path: PathBuf,
    #[serde(default)]
    mode: Option<String>,
}

type FieldError = (String, String, String);

impl RawPolicy {
    /// These overrides applied over `base`: limits one by one, `roots` as a
    /// whole (a tool's own list replaces the default list).
    fn apply(&self, base: &Policy, dir: &Path) -> Result<Policy, FieldError> {
        let limits = self
            .limits(base.limits)
            .map_err(|(key, value, reason)| (key.to_owned(), value, reason.to_owned()))?;
        let roots = match &self.roots {
            None => base.roots.clone(),
            Some(raw) => {
                let mut roots = Vec::with_capacity(raw.len());
                for (i, root) in raw.iter().enumerate() {
                    let mode = match root.mode.as_deref() {
                        None | Some("ro" | "read-only") => Mode::ReadOnly,
                        Some("rw" | "read-write") => Mode::ReadWrite,
                        Some(other) => {
                            return Err((
                                format!("roots[{i}].mode"),
                                format!("{other:?}"),
                                "must be \"ro\" or \"rw\"".into(),
                            ));
                        }
                    };
                    let grant = Grant::new(&root.path, mode, dir).map_err(|reason| {
                        (
                            format!("roots[{i}].path"),
                            format!("{:?}", root.path.display().to_string()),
                            format!("is invalid: {reason}"),
                        )
                    })?;
                    roots.push(grant);
                }
                roots
            }
        };
        Ok(Policy {
            limits,
            roots,
            allow_sampling: self.allow_sampling.unwrap_or(base.allow_sampling),
        })
    }

    /// The limit overrides applied over `base`, each checked against its range.
    fn limits(&self, base: Limits) -> Result<Limits, (&'static str, String, &'static str)> {
        fn check(
            key: &'static str,
            value: Option<u64>,
            range: std::ops::RangeInclusive<u64>,
            reason: &'static str,
        ) -> Result<Option<u64>, (&'static str, String, &'static str)> {
            match value {
                Some(v) if !range.contains(&v) => Err((key, v.to_string(), reason)),
                other => Ok(other),
            }
        }
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
}

/// A tool name as a TOML key: bare if it can be, quoted otherwise.
fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        name.to_owned()
    } else {
        format!("{name:?}")
    }
}

/// `~` and `~/...` expanded with `$HOME`; other paths unchanged.
pub fn expand_tilde(path: &Path) -> PathBuf {
    let Ok(rest) = path.strip_prefix("~") else {
        return path.to_owned();
    };
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(rest),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("/etc/toolcage/config.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn empty_file_gives_the_defaults() {
        let config = parse("").expect("valid");
        assert_eq!(config.defaults, Policy::default());
        assert_eq!(config.limits_for("anything"), Limits::default());
    }

    #[test]
    fn tool_overrides_merge_over_defaults() {
        let config = parse(
            "[defaults]\nfuel = 5000\nmemory_mib = 64\n\n[tools.spin]\nfuel = 10\n\n[tools.\"a.b\"]\ndeadline_ms = 5\n",
        )
        .expect("valid");
        let spin = config.limits_for("spin");
        assert_eq!(spin.fuel, 10);
        assert_eq!(spin.memory_bytes, 64 * 1024 * 1024);
        assert_eq!(config.limits_for("a.b").deadline_ms, 5);
        assert_eq!(config.limits_for("other").fuel, 5000);
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let config = parse("tools_dir = \"tools\"\ncache_dir = \"/var/cache/x\"").expect("valid");
        assert_eq!(config.tools_dir, Some(PathBuf::from("/etc/toolcage/tools")));
        assert_eq!(config.cache_dir, Some(PathBuf::from("/var/cache/x")));
    }

    #[test]
    fn roots_are_checked_resolved_and_replaced_per_tool() {
        let dir = std::env::temp_dir().join(format!("toolcage-config-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).expect("mkdir");
        std::fs::write(dir.join("file"), "").expect("write");
        let config_path = dir.join("config.toml");
        let parse = |text: &str| Config::parse(text, &config_path).map_err(|e| e.to_string());

        let config = parse(
            "[defaults]\nroots = [{ path = \"data\" }, { path = \"./data/../data\", mode = \"rw\" }]\n\
             [tools.writer]\nroots = [{ path = \"data\", mode = \"rw\" }]\n[tools.nothing]\nroots = []\n",
        )
        .expect("valid");
        let data = dir.join("data");
        assert_eq!(
            config.defaults.roots,
            [
                Grant {
                    path: data.clone(),
                    mode: Mode::ReadOnly
                },
                Grant {
                    path: data.clone(),
                    mode: Mode::ReadWrite
                },
            ]
        );
        assert_eq!(
            config.policy_for("writer").roots,
            [Grant {
                path: data.clone(),
                mode: Mode::ReadWrite
            }]
        );
        assert!(config.policy_for("nothing").roots.is_empty());
        assert_eq!(config.policy_for("other").roots.len(), 2);

        for (text, needle) in [
            (
                "[defaults]\nroots = [{ path = \"missing\" }]",
                "`defaults.roots[0].path`",
            ),
            (
                "[defaults]\nroots = [{ path = \"file\" }]",
                "is not a directory",
            ),
            (
                "[tools.x]\nroots = [{ path = \"data\", mode = \"rwx\" }]",
                "`tools.x.roots[0].mode` = \"rwx\"",
            ),
            (
                "[defaults]\nroots = [{ path = \"data\", bogus = 1 }]",
                "bogus",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(needle), "{text}: {error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn flag_grants_parse_their_mode() {
        let tmp = std::env::temp_dir();
        let grant =
            Grant::parse_flag(&format!("{}:rw", tmp.display()), Path::new("/")).expect("ok");
        assert_eq!(grant.mode, Mode::ReadWrite);
        let grant = Grant::parse_flag(&tmp.display().to_string(), Path::new("/")).expect("ok");
        assert_eq!(grant.mode, Mode::ReadOnly);
        assert!(Grant::parse_flag("/no/such/dir:ro", Path::new("/")).is_err());
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c/")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
    }

    #[test]
    fn errors_name_the_file_the_key_and_the_value() {
        let cases = [
            (
                "[defaults]\nfuell = 1",
                &["/etc/toolcage/config.toml", "fuell"][..],
            ),
            (
                "[tools.spin]\nfuel = 0",
                &["`tools.spin.fuel` = 0", "at least 1"],
            ),
            (
                "[tools.\"a b\"]\nmemory_mib = 9999",
                &["`tools.\"a b\".memory_mib` = 9999"],
            ),
            ("[defaults]\nfuel = \"lots\"", &["fuel", "lots"]),
            ("[defaults]\nfuel = -1", &["fuel"]),
            (
                "[server]\nmax_concurrent_calls = 0",
                &["`server.max_concurrent_calls` = 0"],
            ),
            ("bogus = 1", &["bogus"]),
        ];
        for (text, needles) in cases {
            let error = parse(text).expect_err(text);
            for needle in needles {
                assert!(
                    error.contains(needle),
                    "{text:?}: {error:?} lacks {needle:?}"
                );
            }
        }
    }
}
