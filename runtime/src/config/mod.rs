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

mod auth;
mod components;
mod fields;
mod http;
mod install;
mod policy;
mod raw;
mod tasks;

pub use auth::{CallerRule, DEFAULT_ALGORITHMS, Introspection, OAuthConfig, is_scope_token};

pub use http::{HttpConfig, MetricsAccess, RestConfig};
pub use install::{DEFAULT_MAX_COMPONENT_MIB, Install, LOCK_FILE_NAME, SourceEntry};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
pub use tasks::{StateKeys, TaskSettings, TaskStore};

pub use crate::call::ClientNeeds;
use crate::grants::Grants;
use crate::grants::env::{EnvGrant, EnvVar};
pub use crate::grants::files::{Mode, Root, expand_tilde, normalize};
use crate::grants::network::{NetGrant, NetLimits};
use crate::grants::services::ServicesGrant;

/// Default fuel per call. Fuel counts roughly one unit per WebAssembly
/// instruction; ten billion is several seconds of pure compute, far beyond
/// what a tool that answers a model should need, yet it stops a runaway loop.
pub const DEFAULT_FUEL: u64 = 10_000_000_000;
/// Default wall-clock deadline per call: 30 s, a common client-side timeout
/// for a tool call.
pub const DEFAULT_DEADLINE_MS: u64 = 30_000;

/// Default deadline of a call that runs as a task: ten minutes.
pub const DEFAULT_TASK_DEADLINE_MS: u64 = 600_000;
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
/// Argument keys the journal redacts unless the config says otherwise
/// (compared case-insensitively, at any depth).
pub const DEFAULT_REDACT: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "cookie",
    "private_key",
];

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
    /// Limits of the stdio transport (used with `serve`).
    pub stdio: StdioLimits,
    /// Policy for tools without an override.
    pub defaults: Policy,
    /// Per-tool overrides, by tool name, already merged over `defaults`.
    pub tools: BTreeMap<String, Policy>,
    /// The call journal, if the file asks for one.
    pub journal: Option<JournalConfig>,
    /// How plain components become tools, per file name in the tools
    /// folder (`[components."x.wasm"]`).
    pub components: BTreeMap<String, PlainRules>,
    /// What each caller authenticated by `[http.oauth]` may list, call and
    /// reach (`[[callers]]`), in order, first match wins; empty: every
    /// authenticated caller may use every tool.
    pub callers: Vec<CallerRule>,
    /// How tools are installed (`[install]`, `[[sources]]`).
    pub install: Install,
    /// Tasks: how many, how long they are kept (`[tasks]`).
    pub tasks: TaskSettings,
    /// What resource reads may open (`[resources] roots`, read-only):
    /// nothing by default.
    pub resource_roots: Vec<crate::grants::files::Root>,
    /// The keys that sign and check the `requestState` handed to
    /// 2026-07-28 clients (`server.state_key_file`), shared by every
    /// replica of a fleet; `None`: a random key per process.
    pub state_keys: Option<std::sync::Arc<StateKeys>>,
    /// Where a fleet's replicas share their tasks (`[tasks] store_url`);
    /// `None`: each task lives only in the process that runs it. Read at
    /// start-up.
    pub task_store: Option<TaskStore>,
}

/// What the operator decides about one plain component's functions
/// (`[components."x.wasm"]`). Functions are named by the tool name toolcage
/// gives them, before any renaming (as `toolcage list` shows them without
/// this section).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlainRules {
    /// Only these become tools (`expose`), if set.
    pub expose: Option<Vec<String>>,
    /// Never tools (`hide`).
    pub hide: Vec<String>,
    /// New tool names (`rename`).
    pub rename: BTreeMap<String, String>,
    /// Load the component even when it imports what the sandbox does not
    /// provide; calling a missing import traps (`missing_imports = "trap"`).
    pub trap_missing_imports: bool,
    /// Descriptions and hints, per function (`[components."x.wasm".tools.NAME]`).
    pub tools: BTreeMap<String, ToolOverride>,
}

/// The operator's description and hints for one plain tool; `None` keeps
/// what toolcage derives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ToolOverride {
    pub description: Option<String>,
    pub title: Option<String>,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

/// Where and how the call journal is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalConfig {
    /// The file (rotated to `FILE.1`, `FILE.2`, ...); unused when `to`
    /// names a stream.
    pub path: PathBuf,
    /// A standard stream to write the lines to instead of a file (`to =
    /// "stdout"` or `"stderr"`), for a platform's log collector.
    pub to: Option<JournalStream>,
    /// Write each line before the call's reply goes out (`durable =
    /// true`), on the call's own thread, instead of through the writer
    /// thread's queue: a process killed at any moment has journaled every
    /// call it answered.
    pub durable: bool,
    /// Rotate when the file would grow past this many bytes.
    pub max_bytes: u64,
    /// Rotated files kept.
    pub keep: u32,
    /// How arguments are recorded (tools may override).
    pub arguments: ArgumentsMode,
    /// Argument keys whose values are replaced by `"[redacted]"`
    /// (lowercase).
    pub redact: Vec<String>,
}

/// A standard stream the journal can go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalStream {
    /// Standard output (never while serving over stdio: that is the protocol).
    Stdout,
    /// Standard error, beside the log.
    Stderr,
}

/// How the journal records a call's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgumentsMode {
    /// The arguments, with redacted keys and secret values replaced.
    Full,
    /// Only the SHA-256 of the arguments (enough to match a known call).
    Digest,
    /// Nothing.
    None,
}

impl ArgumentsMode {
    fn parse(text: &str) -> Option<ArgumentsMode> {
        match text {
            "full" => Some(ArgumentsMode::Full),
            "digest" => Some(ArgumentsMode::Digest),
            "none" => Some(ArgumentsMode::None),
            _ => None,
        }
    }
}

/// The limits of one stdio connection (`[stdio]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioLimits {
    /// Requests read but not answered at once; past it, reading pauses.
    pub max_requests_in_flight: usize,
    /// Bytes of replies waiting to be written; past it, reading pauses.
    pub max_pending_output: usize,
    /// Read, run and answer requests on one thread, calls that overlap
    /// going to worker threads (`dispatch::Lanes`). `None` (the default):
    /// only when the process may use one CPU, where it wins on latency and
    /// throughput alike; on more, it lowers latency for calls one at a
    /// time and pipelined throughput with it (`docs/benchmarks.md`, "Calls
    /// on one thread"). Read once, at start; see [`StdioLimits::one_thread`].
    pub one_thread: Option<bool>,
}

impl Default for StdioLimits {
    fn default() -> Self {
        StdioLimits {
            max_requests_in_flight: 256,
            max_pending_output: 16 * 1024 * 1024,
            one_thread: None,
        }
    }
}

impl StdioLimits {
    /// Whether to serve on one thread: as configured, else when this
    /// process may run on one CPU only (its affinity mask or cgroup quota,
    /// as `std::thread::available_parallelism` reads them).
    pub fn one_thread(&self) -> bool {
        self.one_thread
            .unwrap_or_else(|| std::thread::available_parallelism().is_ok_and(|n| n.get() == 1))
    }
}

/// What one tool may reach and consume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Per-call limits.
    pub limits: Limits,
    /// What it may reach: directories, hosts, variables, client services.
    pub grants: Grants,
    /// Ask the user before each call: `Some` when the config says so,
    /// `None` to follow the tool's annotations (on for destructive tools).
    pub confirm: Option<bool>,
    /// The SHA-256 (lowercase hex) the providing component must have.
    pub pin: Option<String>,
    /// How the journal records this tool's arguments, if not the default.
    pub journal_arguments: Option<ArgumentsMode>,
    /// The file that alone may provide this tool (`file = "x.wasm"`): a
    /// name as it appears in the tools folder, or an absolute path.
    pub file: Option<PathBuf>,
    /// The client capabilities a call of this tool needs
    /// (`requires_client`): a 2026-07-28 request that does not declare
    /// them is refused before anything runs.
    pub requires_client: ClientNeeds,
    /// Whether its calls run as tasks (`tasks`), overriding what the
    /// component declares; `None` follows the component.
    pub tasks: Option<crate::call::TaskSupport>,
}

impl Policy {
    /// The values of the secrets among this policy's variables.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.grants.secrets()
    }
}

/// Server-wide settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSettings {
    /// Calls that may run at once across all tools.
    pub max_concurrent_calls: u32,
    /// Instances made ahead of their calls, across all components (0: none;
    /// each call instantiates its own).
    pub ready_instances: u32,
    /// The most a file's `describe` (and its lists of resources, templates
    /// and prompts) may hand the host, in bytes.
    pub max_describe_bytes: u64,
    /// Request text the server holds at once across all clients and
    /// transports, in bytes: a request holds its size from when it is read
    /// until it is answered.
    pub max_pending_request_bytes: u64,
    /// How instance slots are reset after a call.
    pub memory_reset: MemoryReset,
}

/// How the sandbox makes an instance slot's memory fresh after a call
/// (`server.memory_reset`; see `sandbox::reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryReset {
    /// Rewrite only the pages a call wrote (`PAGEMAP_SCAN`) while swap
    /// cannot reach this process; every page otherwise.
    #[default]
    Auto,
    /// Always rewrite only the written pages (the operator vouches that
    /// nothing swaps).
    Scan,
    /// Never scan: every slot reset in full.
    Full,
}

impl MemoryReset {
    /// The setting's values, as the config file spells them.
    pub const NAMES: &'static str = "`auto`, `scan` or `full`";

    /// Parse the config file's value.
    pub fn parse(value: &str) -> Option<MemoryReset> {
        Some(match value {
            "auto" => MemoryReset::Auto,
            "scan" => MemoryReset::Scan,
            "full" => MemoryReset::Full,
            _ => return None,
        })
    }
}

/// Default number of instances made ahead of their calls.
pub const DEFAULT_READY_INSTANCES: u32 = 8;

/// Default request budget: 64 MiB of request text in flight.
pub const DEFAULT_MAX_PENDING_REQUEST_MIB: u64 = 64;

/// Default cap on what one file's `describe` may return: 4 MiB, hundreds of
/// tools with long descriptions and schemas.
pub const DEFAULT_MAX_DESCRIBE_KIB: u64 = 4 * 1024;

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
    /// Wall-clock deadline of a call that runs as a task, in milliseconds
    /// (its client is not waiting on one request, so it may be longer).
    pub task_deadline_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: DEFAULT_FUEL,
            deadline_ms: DEFAULT_DEADLINE_MS,
            memory_bytes: DEFAULT_MEMORY_MIB * 1024 * 1024,
            max_result_bytes: DEFAULT_MAX_RESULT_KIB * 1024,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            task_deadline_ms: DEFAULT_TASK_DEADLINE_MS,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tasks: TaskSettings::default(),
            resource_roots: Vec::new(),
            state_keys: None,
            task_store: None,
            source: None,
            tools_dir: None,
            cache_dir: None,
            server: ServerSettings {
                max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
                ready_instances: DEFAULT_READY_INSTANCES,
                memory_reset: MemoryReset::Auto,
                max_describe_bytes: DEFAULT_MAX_DESCRIBE_KIB * 1024,
                max_pending_request_bytes: DEFAULT_MAX_PENDING_REQUEST_MIB * 1024 * 1024,
            },
            stdio: StdioLimits::default(),
            http: HttpConfig::default(),
            defaults: Policy::default(),
            tools: BTreeMap::new(),
            journal: None,
            components: BTreeMap::new(),
            callers: Vec::new(),
            install: Install::default(),
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
    pub fn grant_to_all(&mut self, grant: Root) {
        for policy in std::iter::once(&mut self.defaults).chain(self.tools.values_mut()) {
            let granted = |root: &Root| root.path == grant.path && root.mode == grant.mode;
            if !policy.grants.files.iter().any(granted) {
                policy.grants.files.push(grant.clone());
            }
        }
        self.resolve_roots();
    }

    /// Resolve where every root of every tool (and every resource root) is
    /// on the host, refusing one whose path goes through a symlink inside
    /// any tool's read-write grant (`grants::files::resolve_hosts`): a
    /// tool with one grant must not be able to redirect another.
    pub fn resolve_roots(&mut self) {
        let policies = std::iter::once(&self.defaults).chain(self.tools.values());
        let writable: Vec<PathBuf> = policies
            .flat_map(|policy| &policy.grants.files)
            .filter(|root| root.mode == Mode::ReadWrite)
            .map(|root| root.path.clone())
            .collect();
        let writable: Vec<&Path> = writable.iter().map(PathBuf::as_path).collect();
        let roots = std::iter::once(&mut self.defaults)
            .chain(self.tools.values_mut())
            .flat_map(|policy| &mut policy.grants.files)
            .chain(&mut self.resource_roots);
        crate::grants::files::resolve_hosts(roots, &writable);
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

/// A tool name as a TOML key: bare if it can be, quoted otherwise.
pub fn toml_key(name: &str) -> String {
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

#[cfg(test)]
mod tests {
    use std::path::Path;

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
    fn requires_client_names_capabilities_and_a_tool_list_replaces_the_default() {
        let config = parse(
            "[defaults]\nrequires_client = [\"roots\"]\n\n\
             [tools.ask]\nrequires_client = [\"sampling\", \"elicitation\", \"sampling\"]\n\n\
             [tools.free]\nrequires_client = []\n",
        )
        .expect("valid");
        let ask = config.policy_for("ask").requires_client;
        assert_eq!(ask.names(), ["sampling", "elicitation"]);
        assert!(config.policy_for("free").requires_client.is_empty());
        assert_eq!(
            config.policy_for("other").requires_client.names(),
            ["roots"]
        );
        // What a request lacks, of what the tool needs.
        let declared = ClientNeeds {
            elicitation: true,
            roots: true,
            ..ClientNeeds::default()
        };
        assert_eq!(ask.missing(declared).names(), ["sampling"]);
        assert!(ask.missing(ask).is_empty());
        let error = parse("[tools.x]\nrequires_client = [\"sampling\", \"telepathy\"]\n")
            .expect_err("unknown capability");
        assert!(
            error.contains("requires_client[1]") && error.contains("not a client capability"),
            "{error}"
        );
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
    fn oauth_and_callers_resolve_with_their_defaults() {
        let config = parse(
            "[http.oauth]\nresource = \"https://tools.example/mcp\"\nissuer = \"https://as.example\"\n\
             required_scopes = [\"mcp\"]\n\n\
             [[callers]]\nname = \"readers\"\nclient_ids = [\"r\"]\ntools = [\"read_*\"]\n\
             roots = [{ path = \"/tmp\" }]\nnetwork = [\"api.example.com\"]\n\n\
             [[callers]]\nname = \"rest\"\ntools = []\n",
        )
        .expect("valid");
        let oauth = config.http.oauth.expect("oauth");
        assert_eq!(oauth.audiences, ["https://tools.example/mcp"]);
        assert_eq!(oauth.authorization_servers, ["https://as.example"]);
        assert_eq!(oauth.algorithms, DEFAULT_ALGORITHMS);
        assert_eq!((oauth.leeway_secs, oauth.jwks_min_refresh_secs), (60, 10));
        assert!(oauth.introspection.is_none());
        assert_eq!(config.callers.len(), 2);
        let readers = &config.callers[0];
        assert_eq!(readers.roots.as_deref().map(<[Root]>::len), Some(1));
        assert_eq!(
            readers.roots.as_ref().map(|r| r[0].mode),
            Some(Mode::ReadOnly)
        );
        assert!(config.callers[1].matches_anyone());
    }

    #[test]
    fn bad_authorization_settings_name_their_key() {
        let oauth = "[http.oauth]\nresource = \"https://t/mcp\"\nissuer = \"https://as\"\n";
        let cases: &[(String, &str)] = &[
            (
                format!("{oauth}jwks_uri = \"http://as.example/jwks\"\n"),
                "`http.oauth.jwks_uri`",
            ),
            (
                format!("{oauth}algorithms = [\"none\"]\n"),
                "`http.oauth.algorithms[0]`",
            ),
            (
                format!("{oauth}algorithms = []\n"),
                "`http.oauth.algorithms`",
            ),
            (
                format!("{oauth}required_scopes = [\"a b\"]\n"),
                "`http.oauth.required_scopes`",
            ),
            (
                format!("{oauth}leeway_secs = 9999\n"),
                "`http.oauth.leeway_secs`",
            ),
            (
                format!("{oauth}introspection_client_id = \"x\"\n"),
                "`http.oauth.introspection_client_id`",
            ),
            (
                format!(
                    "{oauth}introspection_endpoint = \"https://as/i\"\nintrospection_client_id = \"x\"\n"
                ),
                "`http.oauth.introspection_secret_file`",
            ),
            (
                "[http.oauth]\nresource = \"https://u:p@t/mcp\"\nissuer = \"https://as\"\n".into(),
                "`http.oauth.resource`",
            ),
            (
                format!("{oauth}[[callers]]\nname = \"a b\"\ntools = []\n"),
                "`callers[0].name`",
            ),
            (
                format!("{oauth}[[callers]]\nname = \"a\"\n"),
                "`callers[0].tools`",
            ),
            (
                format!(
                    "{oauth}[[callers]]\nname = \"a\"\ntools = []\n[[callers]]\nname = \"a\"\nscopes = [\"x\"]\ntools = []\n"
                ),
                "`callers[1].name`",
            ),
            (
                format!("{oauth}[[callers]]\nname = \"a\"\ntools = []\nnetwork = [\"*\"]\n"),
                "`callers[0].network[0]`",
            ),
            (
                "[[callers]]\nname = \"a\"\ntools = []\n".into(),
                "`callers`",
            ),
        ];
        for (text, key) in cases {
            let error = parse(text).expect_err(text);
            assert!(error.contains(key), "{text}: {error}");
        }
    }

    #[test]
    fn a_task_store_is_a_plain_redis_url_with_its_password_in_a_file() {
        let dir = std::env::temp_dir().join(format!("toolcage-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("pw"), "s3cret\n").expect("write");
        let path = dir.join("config.toml");
        let config = Config::parse(
            "[tasks]\nstore_url = \"redis://10.0.0.5:6380/2\"\nstore_password_file = \"pw\"\n",
            &path,
        )
        .expect("valid");
        let store = config.task_store.expect("a store");
        assert_eq!(store.password.as_deref(), Some("s3cret"));
        assert_eq!(store.prefix, "toolcage");
        assert!(!format!("{store:?}").contains("s3cret"));
        let info = store.connection_info().expect("info");
        assert_eq!(info.redis_settings().password(), Some("s3cret"));
        assert_eq!(info.redis_settings().db(), 2);
        for (text, words) in [
            ("store_url = \"rediss://h\"", "TLS"),
            ("store_url = \"http://h\"", "redis://"),
            ("store_url = \"redis://:pw@h\"", "store_password_file"),
            ("store_url = \"redis://\"", "host"),
            (
                "store_url = \"redis://h\"\nstore_prefix = \"a:b\"",
                "`tasks.store_prefix`",
            ),
            (
                "store_url = \"redis://h\"\nstore_password_file = \"absent\"",
                "cannot be read",
            ),
            ("store_prefix = \"x\"", "`tasks.store_url`"),
        ] {
            let error = Config::parse(&format!("[tasks]\n{text}\n"), &path)
                .expect_err(text)
                .to_string();
            assert!(error.contains(words), "{text}: {error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
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
            config.defaults.grants.files,
            [
                Root {
                    path: data.clone(),
                    mode: Mode::ReadOnly,
                    host: Some(data.clone()),
                },
                Root {
                    path: data.clone(),
                    mode: Mode::ReadWrite,
                    host: Some(data.clone()),
                },
            ]
        );
        assert_eq!(
            config.policy_for("writer").grants.files,
            [Root {
                path: data.clone(),
                mode: Mode::ReadWrite,
                host: Some(data.clone()),
            }]
        );
        assert!(config.policy_for("nothing").grants.files.is_empty());
        assert_eq!(config.policy_for("other").grants.files.len(), 2);

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
        let grant = Root::parse_flag(&format!("{}:rw", tmp.display()), Path::new("/")).expect("ok");
        assert_eq!(grant.mode, Mode::ReadWrite);
        let grant = Root::parse_flag(&tmp.display().to_string(), Path::new("/")).expect("ok");
        assert_eq!(grant.mode, Mode::ReadOnly);
        assert!(Root::parse_flag("/no/such/dir:ro", Path::new("/")).is_err());
    }

    #[test]
    fn transport_limits_and_file_bindings_parse() {
        let config = parse(
            "[server]\nmax_describe_kib = 128\nmax_pending_request_mib = 8\nmemory_reset = \"full\"\n\
             [stdio]\nmax_requests_in_flight = 16\nmax_pending_output_mib = 2\none_thread = true\n\
             [http]\nidle_timeout_ms = 1000\nbody_timeout_ms = 2000\nmax_connections = 10\nmax_sessions = 5\n\
             [tools.read_text_file]\nfile = \"fs_tool.wasm\"\n[tools.x]\nfile = \"/opt/t/x.wasm\"\n",
        )
        .expect("valid");
        assert_eq!(config.server.max_describe_bytes, 128 * 1024);
        assert_eq!(config.server.max_pending_request_bytes, 8 * 1024 * 1024);
        assert_eq!(config.server.memory_reset, MemoryReset::Full);
        assert_eq!(Config::default().server.memory_reset, MemoryReset::Auto);
        assert_eq!(config.stdio.max_requests_in_flight, 16);
        assert_eq!(config.stdio.max_pending_output, 2 * 1024 * 1024);
        assert_eq!(config.stdio.one_thread, Some(true));
        assert_eq!(Config::default().stdio.one_thread, None);
        assert_eq!(
            (config.http.idle_timeout_ms, config.http.body_timeout_ms),
            (1000, 2000)
        );
        assert_eq!(
            (config.http.max_connections, config.http.max_sessions),
            (10, 5)
        );
        assert_eq!(
            config.policy_for("read_text_file").file.as_deref(),
            Some(Path::new("fs_tool.wasm"))
        );
        assert_eq!(
            config.policy_for("x").file.as_deref(),
            Some(Path::new("/opt/t/x.wasm"))
        );
        assert_eq!(config.defaults.file, None);
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
            (
                "[server]\nmemory_reset = \"fast\"",
                &["`server.memory_reset` = fast", "`auto`, `scan` or `full`"],
            ),
            ("bogus = 1", &["bogus"]),
            (
                "[server]\nmax_describe_kib = 1",
                &["`server.max_describe_kib` = 1", "between 64"],
            ),
            (
                "[server]\nmax_pending_request_mib = 0",
                &["`server.max_pending_request_mib` = 0"],
            ),
            (
                "[stdio]\nmax_requests_in_flight = 0",
                &["`stdio.max_requests_in_flight` = 0"],
            ),
            (
                "[stdio]\nmax_pending_output_mib = 9999",
                &["`stdio.max_pending_output_mib`"],
            ),
            (
                "[http]\nidle_timeout_ms = 5",
                &["`http.idle_timeout_ms` = 5"],
            ),
            ("[http]\nmax_sessions = 0", &["`http.max_sessions` = 0"]),
            (
                "[http]\nmax_connections = 0",
                &["`http.max_connections` = 0"],
            ),
            (
                "[defaults]\nfile = \"x.wasm\"",
                &["`defaults.file`", "[tools.NAME]"],
            ),
            (
                "[tools.t]\nfile = \"a/b.wasm\"",
                &["`tools.t.file`", "file name"],
            ),
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

    #[test]
    fn network_env_confirm_pin_and_journal_parse() {
        let dir = std::env::temp_dir().join(format!("toolcage-config-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("key"), "s3cret\n").expect("write");
        let config_path = dir.join("config.toml");
        let parse = |text: &str| Config::parse(text, &config_path).map_err(|e| e.to_string());
        // SAFETY: tests in this module do not read this variable concurrently.
        unsafe { std::env::set_var("TOOLCAGE_CONFIG_TEST_VAR", "from-env") };
        let config = parse(
            "[defaults]\nconfirm = true\n[defaults.env]\nA = \"1\"\n\
             [tools.w]\nnetwork = [\"api.example.com\", \"*.example.org:8443\"]\n\
             http_max_response_kib = 64\nconfirm = false\npin = \"sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"\n\
             journal_arguments = \"digest\"\n\
             [tools.w.env]\nB = { from_env = \"TOOLCAGE_CONFIG_TEST_VAR\" }\nC = { file = \"key\" }\n\
             D = { from_env = \"TOOLCAGE_CONFIG_TEST_UNSET\" }\n\
             [journal]\npath = \"j/journal.jsonl\"\nkeep = 2\nredact = [\"Pin\"]\n",
        )
        .expect("valid");
        let w = config.policy_for("w");
        assert_eq!(
            w.grants
                .network
                .hosts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["api.example.com", "*.example.org:8443"]
        );
        assert_eq!(w.grants.network.limits.response_bytes, 64 * 1024);
        assert_eq!(w.confirm, Some(false));
        assert_eq!(config.policy_for("other").confirm, Some(true));
        assert!(config.policy_for("other").grants.network.hosts.is_empty());
        assert_eq!(
            w.pin.as_deref(),
            Some("abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789")
        );
        assert_eq!(w.journal_arguments, Some(ArgumentsMode::Digest));
        let env: Vec<(&str, &str, bool)> = w
            .grants
            .env
            .vars
            .iter()
            .map(|v| (v.name.as_str(), v.value.as_str(), v.secret))
            .collect();
        assert_eq!(
            env,
            [
                ("A", "1", false),
                ("B", "from-env", false),
                ("C", "s3cret", true)
            ]
        );
        assert_eq!(w.secrets().collect::<Vec<_>>(), ["s3cret"]);
        assert!(
            !format!("{w:?}").contains("s3cret"),
            "a secret in Debug output"
        );
        let journal = config.journal.expect("journal");
        assert_eq!(journal.path, dir.join("j/journal.jsonl"));
        assert_eq!((journal.keep, journal.max_bytes), (2, 64 * 1024 * 1024));
        assert_eq!(journal.redact, ["pin"]);

        for (text, needle) in [
            (
                "[tools.x]\nnetwork = [\"*\"]",
                "`tools.x.network[0]` = \"*\"",
            ),
            ("[tools.x]\npin = \"sha256:12\"", "`tools.x.pin`"),
            ("[defaults]\npin = \"00\"", "`defaults.pin`"),
            (
                "[tools.x.env]\nK = { file = \"missing\" }",
                "`tools.x.env.K`",
            ),
            ("[tools.x.env]\nK = { }", "`tools.x.env.K`"),
            (
                "[journal]\npath = \"j\"\narguments = \"all\"",
                "`journal.arguments`",
            ),
            (
                "[tools.x]\nhttp_timeout_ms = 0",
                "`tools.x.http_timeout_ms` = 0",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(needle), "{text}: {error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
