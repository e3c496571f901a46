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

mod names;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::call::{Annotations, CallFailure, RawExtras, RawPrompt, RawResource, RawTemplate};
use crate::config::{Config, Limits};
use crate::sandbox::{LoadError, Prepared, Sandbox};
use crate::schema::Schema;
use crate::template::UriTemplate;
use names::{Owner, resolve_names};
pub use validate::{
    MAX_DESCRIPTION_BYTES, MAX_ENTRIES_PER_FILE, MAX_NAME_BYTES, MAX_PROMPT_ARGUMENTS,
    MAX_TITLE_BYTES, MAX_TOOLS_PER_FILE, MAX_URI_BYTES, check_tool_name,
};
use validate::{validate_descriptors, validate_extras};

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
    /// The file could not be read.
    #[error("cannot read: {0}")]
    Read(String),
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

/// A file loaded on its own, before names are resolved across files.
pub struct FileLoad {
    /// SHA-256 of its bytes, when it could be read.
    pub digest: Option<String>,
    /// Whether compiled code came from the cache (or was reused as is).
    pub from_cache: bool,
    /// The component and its validated tools, or why not.
    pub result: Result<LoadedFile, FileError>,
    /// Set when this is the last good version, kept because the file's
    /// current contents failed for this reason.
    pub rejected_update: Option<FileError>,
    /// Imports the file's current contents add over the last good version.
    pub capability_change: Vec<String>,
}

/// What loading a file must respect, from the config.
pub struct LoadRules {
    /// Tool names to the digest their component must have.
    pub pins: BTreeMap<String, String>,
    /// The limits `describe` and the listing of resources and prompts run
    /// under: the defaults (a file cannot choose its own), with the result
    /// cap set to `server.max_describe_kib`.
    pub limits: Limits,
}

impl LoadRules {
    /// The rules `config` sets.
    pub fn from_config(config: &Config) -> Self {
        LoadRules {
            pins: config
                .tools
                .iter()
                .filter_map(|(name, policy)| Some((name.clone(), policy.pin.clone()?)))
                .collect(),
            limits: Limits {
                max_result_bytes: config.server.max_describe_bytes,
                ..Limits::default()
            },
        }
    }
}

/// Read, compile, link and describe one file. `last_good` is the version
/// currently served from this path, if any: reused when the digest is the
/// same, kept when the new contents fail. `None` if the file is gone.
pub async fn load_file(
    sandbox: &Arc<Sandbox>,
    path: &Path,
    last_good: Option<LoadedFile>,
    rules: &LoadRules,
) -> Option<FileLoad> {
    let pins = &rules.pins;
    let bytes = match tokio::fs::read(path).await {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            return Some(fallback(
                last_good,
                None,
                FileError::Read(error.to_string()),
                pins,
            ));
        }
    };
    let digest = hex(&Sha256::digest(&bytes));
    if let Some(good) = last_good.as_ref().filter(|g| g.component.digest == digest) {
        tracing::debug!(file = %path.display(), %digest, "unchanged; reusing the loaded component");
        // The config's pins may have changed since it loaded.
        if let Some(reason) = pin_mismatch(good, pins) {
            return Some(FileLoad {
                digest: Some(digest),
                from_cache: true,
                result: Err(reason),
                rejected_update: None,
                capability_change: Vec::new(),
            });
        }
        return Some(FileLoad {
            digest: Some(digest),
            from_cache: true,
            result: Ok(good.clone()),
            rejected_update: None,
            capability_change: Vec::new(),
        });
    }
    // A new version of a file whose tools are pinned is refused before any
    // of it runs (not even `describe`).
    if let Some(good) = &last_good
        && let Some(reason) = pin_mismatch_for(&good.tools, &digest, pins)
    {
        // Compiling runs none of its code, and tells what it would import.
        let imports = {
            let sandbox = Arc::clone(sandbox);
            let digest = digest.clone();
            tokio::task::spawn_blocking(move || sandbox.imports_of(&bytes, &digest)).await
        };
        let added = match &imports {
            Ok(Some(imports)) => added_imports(imports, &good.component.imports),
            _ => Vec::new(),
        };
        return Some(refused_update(last_good, digest, reason, added, pins));
    }
    match compile_and_describe(sandbox, path, bytes, &digest, &rules.limits).await {
        Ok((file, from_cache)) => {
            let added = match &last_good {
                Some(good) => added_imports(&file.component.imports, &good.component.imports),
                None => Vec::new(),
            };
            if !added.is_empty() {
                tracing::warn!(
                    file = %path.display(),
                    added = %added.join(", "),
                    "capability change: the new version imports more than the one it replaces"
                );
            }
            if let Some(reason) = pin_mismatch(&file, pins) {
                return Some(refused_update(last_good, digest, reason, added, pins));
            }
            Some(FileLoad {
                digest: Some(digest),
                from_cache,
                result: Ok(file),
                rejected_update: None,
                capability_change: added,
            })
        }
        Err(reason) => Some(fallback(last_good, Some(digest), reason, pins)),
    }
}

/// The imports in `new` that are not in `old`.
fn added_imports(new: &[String], old: &[String]) -> Vec<String> {
    new.iter().filter(|i| !old.contains(i)).cloned().collect()
}

/// A new version refused (for `reason`, which asked for `added` on top of
/// the last good version's imports): the last good version if any.
fn refused_update(
    last_good: Option<LoadedFile>,
    digest: String,
    reason: FileError,
    added: Vec<String>,
    pins: &BTreeMap<String, String>,
) -> FileLoad {
    let reason = if added.is_empty() {
        reason
    } else {
        FileError::AsksForMore {
            reason: Box::new(reason),
            added: added.clone(),
        }
    };
    let mut load = fallback(last_good, Some(digest), reason, pins);
    load.capability_change = added;
    load
}

/// Why `file` may not serve under `pins`, if it may not.
fn pin_mismatch(file: &LoadedFile, pins: &BTreeMap<String, String>) -> Option<FileError> {
    pin_mismatch_for(&file.tools, &file.component.digest, pins)
}

/// Why a component with `digest` providing `tools` may not serve under
/// `pins`, if it may not.
fn pin_mismatch_for(
    tools: &[Arc<ToolSpec>],
    digest: &str,
    pins: &BTreeMap<String, String>,
) -> Option<FileError> {
    tools.iter().find_map(|spec| {
        let name = &spec.descriptor.name;
        let pin = pins.get(name)?;
        (pin != digest).then(|| FileError::Pinned {
            tool: name.clone(),
            pin: pin.clone(),
            digest: digest.to_owned(),
        })
    })
}

/// The outcome for a file whose current contents failed: its last good
/// version if there is one (and it still satisfies the pins), else the
/// failure.
fn fallback(
    last_good: Option<LoadedFile>,
    digest: Option<String>,
    reason: FileError,
    pins: &BTreeMap<String, String>,
) -> FileLoad {
    match last_good.filter(|good| pin_mismatch(good, pins).is_none()) {
        Some(good) => FileLoad {
            digest: Some(good.component.digest.clone()),
            from_cache: true,
            result: Ok(good),
            rejected_update: Some(reason),
            capability_change: Vec::new(),
        },
        None => FileLoad {
            digest,
            from_cache: false,
            result: Err(reason),
            rejected_update: None,
            capability_change: Vec::new(),
        },
    }
}

async fn compile_and_describe(
    sandbox: &Arc<Sandbox>,
    path: &Path,
    bytes: Vec<u8>,
    digest: &str,
    limits: &Limits,
) -> Result<(LoadedFile, bool), FileError> {
    let loaded = {
        let sandbox = Arc::clone(sandbox);
        let digest = digest.to_owned();
        tokio::task::spawn_blocking(move || sandbox.load(&bytes, &digest)).await
    };
    let loaded = match loaded {
        Ok(Ok(loaded)) => loaded,
        Ok(Err(error)) => return Err(FileError::Load(error)),
        Err(error) => return Err(FileError::Task(format!("compilation task failed: {error}"))),
    };
    let limit = limits.max_result_bytes;
    let raw = sandbox
        .describe(&loaded.prepared, limits)
        .await
        .map_err(|failure| FileError::Describe { failure, limit })?;
    let listed = sandbox
        .list_extras(&loaded.prepared, limits)
        .await
        .map_err(|failure| FileError::Listing { failure, limit })?;
    // Checking what a guest described (schemas compiled, templates parsed)
    // is CPU work on its data: off the runtime's threads.
    let checked = tokio::task::spawn_blocking(move || {
        let templates = validate_extras(&listed)?;
        let provides_extras = !(listed.resources.is_empty()
            && listed.templates.is_empty()
            && listed.prompts.is_empty());
        let tools = if raw.is_empty() && provides_extras {
            Vec::new()
        } else {
            validate_descriptors(raw)?
        };
        Ok::<_, String>((tools, listed, templates))
    })
    .await;
    let (tools, listed, compiled_templates) = match checked {
        Ok(checked) => checked.map_err(FileError::Invalid)?,
        Err(error) => {
            return Err(FileError::Task(format!(
                "checking the descriptors failed: {error}"
            )));
        }
    };
    let component = Arc::new(LoadedComponent {
        path: path.to_owned(),
        digest: digest.to_owned(),
        prepared: loaded.prepared,
        imports: loaded.imports,
    });
    let RawExtras {
        resources,
        templates,
        prompts,
    } = listed;
    Ok((
        LoadedFile {
            component,
            tools: tools.into_iter().map(Arc::new).collect(),
            resources: resources.into_iter().map(Arc::new).collect(),
            templates: templates
                .into_iter()
                .zip(compiled_templates)
                .map(|(raw, uri)| Arc::new(Template { raw, uri }))
                .collect(),
            prompts: prompts.into_iter().map(Arc::new).collect(),
        },
        loaded.from_cache,
    ))
}

/// Resolve names across files and build the catalog. `outcomes` must be in
/// file-name order; `previous` is the catalog served before (a reload).
///
/// Who serves a tool name declared by more than one file (see
/// `docs/security.md`): the file `[tools.NAME] file = "…"` binds it to, if
/// set; else, when `[tools.NAME]` gives the name a policy of its own (its
/// grants, limits, confirmation), the file that served it before, and none
/// when there was none (a new file never takes over a policy meant for
/// another file); else the file that sorts first.
pub fn assemble(
    outcomes: Vec<(PathBuf, FileLoad)>,
    config: &Config,
    previous: Option<&Catalog>,
) -> Catalog {
    let winners = resolve_names(&outcomes, config, previous);
    let mut catalog = Catalog::default();
    let mut template_owners: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (path, load) in outcomes {
        if let Some(reason) = &load.rejected_update {
            tracing::warn!(
                file = %path.display(),
                %reason,
                "the new version failed to load; the last good version keeps serving"
            );
        }
        let status = match load.result {
            Err(reason) => {
                tracing::warn!(file = %path.display(), %reason, "skipping tool component");
                FileStatus::Failed(reason)
            }
            Ok(file) => {
                let mut entries = Vec::with_capacity(file.tools.len());
                for spec in &file.tools {
                    let name = spec.descriptor.name.clone();
                    let status = match winners.get(&name) {
                        Some(Owner::File(winner, _)) if *winner == path => ToolStatus::Served,
                        Some(Owner::File(_, Some(reason))) => ToolStatus::Refused(reason.clone()),
                        Some(Owner::File(winner, None)) => ToolStatus::Shadowed(winner.clone()),
                        Some(Owner::None(reason)) => ToolStatus::Refused(reason.clone()),
                        None => ToolStatus::Refused("not resolved".into()),
                    };
                    match &status {
                        ToolStatus::Served => {}
                        ToolStatus::Shadowed(winner) => tracing::warn!(
                            tool = %name,
                            file = %path.display(),
                            winner = %winner.display(),
                            "tool name declared twice; the file that sorts first wins"
                        ),
                        ToolStatus::Refused(reason) => tracing::warn!(
                            tool = %name,
                            file = %path.display(),
                            %reason,
                            "tool not served from this file"
                        ),
                    }
                    let served = status == ToolStatus::Served;
                    entries.push(ToolEntry {
                        descriptor: spec.descriptor.clone(),
                        status,
                    });
                    if !served {
                        continue;
                    }
                    let limits = config.limits_for(&name);
                    catalog.tools.insert(
                        name.clone(),
                        Arc::new(LoadedTool {
                            spec: Arc::clone(spec),
                            component: Arc::clone(&file.component),
                            permits: tool_permits(previous, &name, limits.max_concurrent),
                            max_concurrent: limits.max_concurrent,
                        }),
                    );
                }
                add_extras(&mut catalog, &file, &path, &mut template_owners);
                tracing::info!(
                    file = %path.display(),
                    digest = %file.component.digest,
                    tools = entries.len(),
                    resources = file.resources.len() + file.templates.len(),
                    prompts = file.prompts.len(),
                    cached = load.from_cache,
                    "loaded tool component"
                );
                catalog.loaded.insert(path.clone(), file);
                FileStatus::Loaded(entries)
            }
        };
        catalog.files.push(FileReport {
            path,
            digest: load.digest,
            status,
            from_cache: load.from_cache,
            rejected_update: load.rejected_update,
            capability_change: load.capability_change,
        });
    }
    for name in config.tools.keys() {
        if !catalog.tools.contains_key(name) {
            tracing::warn!(tool = %name, "the config sets a policy for a tool no component provides");
        }
    }
    catalog
}

/// The permits of tool `name`: the previous catalog's when their number is
/// unchanged, so a reload never lets more calls of one tool run at once
/// than its `max_concurrent` (calls in flight hold the old permits).
fn tool_permits(previous: Option<&Catalog>, name: &str, max_concurrent: u32) -> Arc<Semaphore> {
    match previous.and_then(|p| p.tools.get(name)) {
        Some(tool) if tool.max_concurrent == max_concurrent => Arc::clone(&tool.permits),
        _ => Arc::new(Semaphore::new(max_concurrent as usize)),
    }
}

/// Add `file`'s resources, templates and prompts to `catalog`, first file
/// wins (files arrive in name order).
fn add_extras(
    catalog: &mut Catalog,
    file: &LoadedFile,
    path: &Path,
    template_owners: &mut BTreeMap<String, PathBuf>,
) {
    let shadowed = |kind: &str, key: &str, winner: &Path| {
        tracing::warn!(
            %kind,
            key,
            file = %path.display(),
            winner = %winner.display(),
            "declared twice; the file that sorts first wins"
        );
    };
    for resource in &file.resources {
        if let Some(winner) = catalog.resources.get(&resource.uri) {
            shadowed("resource", &resource.uri, &winner.component.path);
            continue;
        }
        catalog.resources.insert(
            resource.uri.clone(),
            Served {
                descriptor: Arc::clone(resource),
                component: Arc::clone(&file.component),
            },
        );
    }
    for template in &file.templates {
        let key = &template.raw.uri_template;
        if let Some(winner) = template_owners.get(key) {
            shadowed("resource template", key, winner);
            continue;
        }
        template_owners.insert(key.clone(), path.to_owned());
        catalog.templates.push(Served {
            descriptor: Arc::clone(template),
            component: Arc::clone(&file.component),
        });
    }
    for prompt in &file.prompts {
        if let Some(winner) = catalog.prompts.get(&prompt.name) {
            shadowed("prompt", &prompt.name, &winner.component.path);
            continue;
        }
        catalog.prompts.insert(
            prompt.name.clone(),
            Served {
                descriptor: Arc::clone(prompt),
                component: Arc::clone(&file.component),
            },
        );
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
