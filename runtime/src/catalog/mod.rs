//! The catalog: which tools exist, where each came from, and why any file
//! was turned away.
//!
//! [`load_dir`] reads every `*.wasm` in the tools folder, compiles each on
//! the blocking pool (from the compile cache when it can), calls `describe`
//! once and validates what comes back. The result is an immutable
//! [`Catalog`]; the [`Registry`] holds the current one behind an `Arc`, so a
//! call clones the `Arc` of its tool and never holds a lock while the guest
//! runs.
//!
//! Rules, in one place:
//! - A file that is not a component, fails to compile or link, does not
//!   export the contract, traps in `describe`, or describes an invalid tool
//!   is skipped as a whole, with the reason in [`FileReport`]; others load.
//! - Tool names are 1–128 characters of `A-Za-z0-9_-.` (MCP's rule); input
//!   and output schemas are JSON objects with `"type": "object"` that
//!   compile as JSON Schema.
//! - When two files declare the same tool name, the file whose name sorts
//!   first (bytewise) wins; the other file's tool is listed as shadowed in
//!   its report. The rule is deterministic and never depends on load order.
//! - Resources, resource templates and prompts (from components that export
//!   the optional `resources`/`prompts` interfaces) are listed once at load
//!   too and follow the same rules: URIs and templates non-empty, template
//!   variables well formed, prompt names by the tool-name rule, a duplicate
//!   within a file rejects the file, a duplicate across files is resolved
//!   first-file-wins (logged). A file must provide at least one tool,
//!   resource, template or prompt.
//!
//! Rooms: `load` (one file on its own: read, compile, describe, keep the
//! last good version, pins and capability changes), `validate` (the checks
//! on what `describe` returned), `names` (who serves a name declared
//! twice), `assemble` (the catalog from the loaded files). This module
//! holds the types they share and the [`Registry`].

mod assemble;
mod load;
mod names;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};
use tokio::sync::Semaphore;

use crate::call::{Annotations, CallFailure, RawPrompt, RawResource, RawTemplate};
use crate::config::{Config, PlainRules};
use crate::sandbox::{LoadError, Prepared, Sandbox};
use crate::schema::Schema;
use crate::template::UriTemplate;
pub use assemble::assemble;
pub use load::{FileLoad, LoadRules, load_file};
pub use validate::{
    MAX_DESCRIPTION_BYTES, MAX_ENTRIES_PER_FILE, MAX_NAME_BYTES, MAX_PROMPT_ARGUMENTS,
    MAX_TITLE_BYTES, MAX_TOOLS_PER_FILE, MAX_URI_BYTES, check_tool_name,
};

/// One loaded component file.
pub struct LoadedComponent {
    /// Its path.
    pub path: PathBuf,
    /// SHA-256 of its bytes, lowercase hex.
    pub digest: String,
    /// Compiled, linked and checked, ready to instantiate per call.
    pub prepared: Prepared,
    /// The interfaces it imports, without versions, sorted
    /// (`wasi:http/outgoing-handler`, `wasi:filesystem/types`, ...): what
    /// it could use if granted. A new version that imports more is
    /// reported as a capability change.
    pub imports: Vec<String>,
    /// The operator's rules it was loaded under (`[components."x.wasm"]`).
    pub rules: PlainRules,
}

/// A resource template as the component listed it, and compiled.
#[derive(Debug)]
pub struct Template {
    /// As listed (validated).
    pub raw: RawTemplate,
    /// Compiled, for matching URIs.
    pub uri: UriTemplate,
}

/// A resource, template or prompt with the component that serves it.
pub struct Served<D> {
    /// What the component listed (validated).
    pub descriptor: Arc<D>,
    /// The component that serves it.
    pub component: Arc<LoadedComponent>,
}

/// A validated tool descriptor.
#[derive(Debug, Clone)]
pub struct ToolDescriptor {
    /// Unique name.
    pub name: String,
    /// Title.
    pub title: Option<String>,
    /// Description.
    pub description: String,
    /// Input schema (a JSON object).
    pub input_schema: Arc<Map<String, Value>>,
    /// Output schema, if declared.
    pub output_schema: Option<Arc<Map<String, Value>>>,
    /// Hints.
    pub annotations: Annotations,
    /// Icons (checked).
    pub icons: Vec<crate::call::Icon>,
    /// Whether and when calls run as tasks, as the component declared it
    /// (the operator's `tasks` overrides it: `Policy::tasks`).
    pub execution: crate::call::Execution,
    /// What the client must be able to do, as the component declared it
    /// (the operator's `requires_client` adds to it).
    pub needs: crate::config::ClientNeeds,
}

/// A validated descriptor with its compiled schemas: built once per file
/// version, shared by every catalog that serves that version.
pub struct ToolSpec {
    /// The descriptor.
    pub descriptor: ToolDescriptor,
    /// Compiled once per tool version, not per call.
    pub input_validator: Schema,
    /// Compiled output schema, if declared.
    pub output_validator: Option<Schema>,
    /// Whether the input schema mentions `x-mcp-header` anywhere: rmcp
    /// checks `Mcp-Param-*` headers against such annotations, so HTTP
    /// calls of this tool are left to it (`protocol::direct`).
    pub header_annotated: bool,
}

/// A tool ready to call: its spec, component and concurrency permits.
pub struct LoadedTool {
    /// Descriptor and schemas.
    pub spec: Arc<ToolSpec>,
    /// The component that provides it.
    pub component: Arc<LoadedComponent>,
    /// Calls of this tool that may run at once (shared across reloads).
    pub permits: Arc<Semaphore>,
    /// How many permits `permits` was made with.
    pub max_concurrent: u32,
}

/// A file that loaded: its component and the tools it declares.
#[derive(Clone)]
pub struct LoadedFile {
    /// The component.
    pub component: Arc<LoadedComponent>,
    /// Its tools, in `describe` order.
    pub tools: Vec<Arc<ToolSpec>>,
    /// Its resources, in listed order.
    pub resources: Vec<Arc<RawResource>>,
    /// Its resource templates, in listed order.
    pub templates: Vec<Arc<Template>>,
    /// Its prompts, in listed order.
    pub prompts: Vec<Arc<RawPrompt>>,
}

/// What happened to one file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// SHA-256 of its bytes, when it could be read.
    pub digest: Option<String>,
    /// Loaded (with the tools it provides) or failed (with why).
    pub status: FileStatus,
    /// Whether the compiled code came from the cache.
    pub from_cache: bool,
    /// When a newer version of the file failed to load and the last good
    /// version keeps serving: why the newer one failed.
    pub rejected_update: Option<FileError>,
    /// Imports a new version of the file added over the version served
    /// before it (empty if none, or on first load).
    pub capability_change: Vec<String>,
}

/// The outcome of loading one file.
#[derive(Debug, Clone)]
pub enum FileStatus {
    /// Loaded; the tools it declares, each with whether it is served or
    /// shadowed by an earlier file.
    Loaded(Vec<ToolEntry>),
    /// Skipped, and why.
    Failed(FileError),
}

/// A tool a loaded file declares.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    /// The descriptor.
    pub descriptor: ToolDescriptor,
    /// Whether this file serves it.
    pub status: ToolStatus,
}

/// Whether a declared tool is served from the file that declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolStatus {
    /// Served from this file.
    Served,
    /// Another file that sorts first serves it.
    Shadowed(PathBuf),
    /// Not served from this file (and maybe from none), for this reason.
    Refused(String),
}

/// An immutable snapshot of the tool set.
#[derive(Default)]
pub struct Catalog {
    /// Served tools by name.
    pub tools: BTreeMap<String, Arc<LoadedTool>>,
    /// Served resources by URI.
    pub resources: BTreeMap<String, Served<RawResource>>,
    /// Served resource templates, in file-name then listed order (the
    /// order a URI is matched against them).
    pub templates: Vec<Served<Template>>,
    /// Served prompts by name.
    pub prompts: BTreeMap<String, Served<RawPrompt>>,
    /// Every `*.wasm` file seen, in name order.
    pub files: Vec<FileReport>,
    /// The version of each file being served (possibly an older one than
    /// on disk), kept so a reload reuses unchanged files and falls back to
    /// the last good version of broken ones.
    pub loaded: BTreeMap<PathBuf, LoadedFile>,
}

impl Catalog {
    /// Served tool names with the digest of the component serving each:
    /// what clients can observe of the tool set.
    pub fn served(&self) -> BTreeMap<&str, &str> {
        self.tools
            .iter()
            .map(|(name, tool)| (name.as_str(), tool.component.digest.as_str()))
            .collect()
    }

    /// Served resource URIs and templates with the digest of the component
    /// serving each: a change means `notifications/resources/list_changed`.
    /// (A component's lists are a function of its bytes.)
    pub fn served_resources(&self) -> Vec<(&str, &str)> {
        self.resources
            .iter()
            .map(|(uri, r)| (uri.as_str(), r.component.digest.as_str()))
            .chain(self.templates.iter().map(|t| {
                (
                    t.descriptor.raw.uri_template.as_str(),
                    t.component.digest.as_str(),
                )
            }))
            .collect()
    }

    /// Served prompt names with the digest of the component serving each.
    pub fn served_prompts(&self) -> BTreeMap<&str, &str> {
        self.prompts
            .iter()
            .map(|(name, p)| (name.as_str(), p.component.digest.as_str()))
            .collect()
    }

    /// The component that serves `uri`: a listed resource, else the first
    /// template the URI matches.
    pub fn resource_component(&self, uri: &str) -> Option<Arc<LoadedComponent>> {
        if let Some(served) = self.resources.get(uri) {
            return Some(Arc::clone(&served.component));
        }
        self.templates
            .iter()
            .find(|t| t.descriptor.uri.matches(uri))
            .map(|t| Arc::clone(&t.component))
    }
}

/// Holds the current [`Catalog`]; swapping it is atomic, and readers keep
/// the snapshot they took.
#[derive(Default)]
pub struct Registry {
    current: RwLock<Arc<Catalog>>,
}

impl Registry {
    /// A registry serving `catalog`.
    pub fn new(catalog: Catalog) -> Self {
        Registry {
            current: RwLock::new(Arc::new(catalog)),
        }
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Catalog> {
        // A poisoned lock only means a writer panicked mid-swap; the Arc
        // inside is still a complete catalog.
        match self.current.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replace the snapshot.
    pub fn replace(&self, catalog: Catalog) {
        let catalog = Arc::new(catalog);
        match self.current.write() {
            Ok(mut guard) => *guard = catalog,
            Err(poisoned) => *poisoned.into_inner() = catalog,
        }
    }
}

/// The `*.wasm` files directly in `dir`, sorted bytewise by file name.
///
/// # Errors
///
/// The folder cannot be read.
pub fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "wasm") && path.is_file())
        .collect();
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

/// Load every `*.wasm` in `dir` into a new catalog. Never fails as a whole:
/// an unreadable folder gives an empty catalog and a logged error.
///
/// With a `previous` catalog (a reload), a file whose digest has not changed
/// is reused as is (no recompilation, no `describe`), and a file whose new
/// version fails keeps its last good version serving.
pub async fn load_dir(
    sandbox: &Arc<Sandbox>,
    dir: &Path,
    config: &Config,
    previous: Option<&Catalog>,
) -> Catalog {
    let files = match wasm_files(dir) {
        Ok(files) => files,
        Err(error) => {
            if dir.exists() || previous.is_none() {
                tracing::error!(dir = %dir.display(), %error, "cannot read the tools folder");
            }
            return assemble(Vec::new(), config, previous);
        }
    };
    let rules = Arc::new(LoadRules::from_config(config));
    let mut loads = Vec::with_capacity(files.len());
    for path in files {
        let sandbox = Arc::clone(sandbox);
        let last_good = previous.and_then(|p| p.loaded.get(&path)).cloned();
        let rules = Arc::clone(&rules);
        loads.push(tokio::spawn(async move {
            let outcome = load_file(&sandbox, &path, last_good, &rules).await;
            (path, outcome)
        }));
    }
    let mut outcomes = Vec::with_capacity(loads.len());
    for load in loads {
        match load.await {
            Ok((path, Some(outcome))) => outcomes.push((path, outcome)),
            // Gone between listing and reading: it was removed.
            Ok((_, None)) => {}
            Err(error) => tracing::error!(%error, "a component load task failed"),
        }
    }
    assemble(outcomes, config, previous)
}

/// Why a file serves nothing (or why its new version was refused).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FileError {
    /// The file could not be read (or is not a regular file).
    #[error("cannot read: {0}")]
    Read(String),
    /// The file is larger than toolcage reads (it was not read).
    #[error(
        "not read: it is larger than {} MiB, the most a component may be \
         (`[install] max_component_mib`)", .max / (1024 * 1024)
    )]
    TooLarge {
        /// The cap, in bytes.
        max: u64,
    },
    /// Not a component, or it does not compile, link or meet the contract.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `describe` failed.
    #[error("{}", run_failure("`describe`", .failure, *.limit))]
    Describe {
        /// How.
        failure: CallFailure,
        /// The describe cap (`server.max_describe_kib`), in bytes.
        limit: u64,
    },
    /// Listing resources, templates or prompts failed.
    #[error("{}", run_failure("listing resources and prompts", .failure, *.limit))]
    Listing {
        /// How.
        failure: CallFailure,
        /// The describe cap, in bytes.
        limit: u64,
    },
    /// What it described is not valid (the message says what and where).
    #[error("{0}")]
    Invalid(String),
    /// A tool it provides is pinned to another digest.
    #[error(
        "pinned: `tools.{tool}.pin` is sha256:{pin}, but this file is sha256:{digest}; \
         to accept it, set the pin to the new digest (`toolcage pin` prints it)"
    )]
    Pinned {
        /// The pinned tool.
        tool: String,
        /// The digest its pin names.
        pin: String,
        /// The file's digest.
        digest: String,
    },
    /// A file `toolcage add` installed whose bytes are not what the lock
    /// records.
    #[error(
        "does not match the lock: `{file}` was installed as sha256:{locked}, but this file is \
         sha256:{digest}; `toolcage update` fetches its source again, `toolcage remove` \
         uninstalls it"
    )]
    Locked {
        /// The file's name.
        file: String,
        /// The digest the lock records.
        locked: String,
        /// The file's digest.
        digest: String,
    },
    /// The lock could not be read, so which files it locks is unknown.
    #[error("not served: the lock cannot be read ({0})")]
    Lock(String),
    /// A new version refused for `reason` that also imports more than the
    /// version it would replace.
    #[error("{reason}; it also asks for more: {}", .added.join(", "))]
    AsksForMore {
        /// Why it was refused.
        reason: Box<FileError>,
        /// What it imports beyond the last good version.
        added: Vec<String>,
    },
    /// A task of the loader failed (a panic in a blocking task).
    #[error("{0}")]
    Task(String),
}

/// How a load-time run (`describe`, listing) failed, in words.
fn run_failure(what: &str, failure: &CallFailure, limit: u64) -> String {
    match failure {
        CallFailure::ResultTooLarge { .. } | CallFailure::Transfer { .. } => format!(
            "{what} returned more than {limit} bytes, the limit (`server.max_describe_kib`)"
        ),
        other => format!("{what} {other}"),
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            // Writing to a String cannot fail.
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }
}
