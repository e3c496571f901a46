//! Loading one file: read, compile (or reuse the last good version when
//! the digest is unchanged), link, describe and validate; keep the last
//! good version when new contents fail, refuse an update that pins or
//! newly needed imports forbid. Files load on their own, in parallel;
//! names are resolved across files afterwards, in `assemble`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use tokio::sync::Semaphore;

use super::validate::{validate_descriptors, validate_extras};
use super::{FileError, LoadedComponent, LoadedFile, Template, ToolSpec, hex};
use crate::call::RawExtras;
use crate::config::{Config, Limits, PlainRules};
use crate::sandbox::Sandbox;
use crate::source::capped::{Links, LocalFileError, read_file};

/// Files loaded at once, in the whole process: the sandbox's instance
/// slots kept for loading (16), so a folder of many files waits here
/// rather than for those. A load holds its file's bytes from the read until
/// it is compiled, so what the loader holds is bounded by this times
/// [`LoadRules::max_file_bytes`], however many files the folder has.
pub const MAX_CONCURRENT_LOADS: usize = 16;

/// One permit per load in progress ([`MAX_CONCURRENT_LOADS`]).
static LOADS: Semaphore = Semaphore::const_new(MAX_CONCURRENT_LOADS);

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
    /// How plain components become tools, by file name.
    pub components: BTreeMap<String, PlainRules>,
    /// The lock's file digests (hex) by file name (`NAME.wasm`), or why the
    /// lock could not be read (then no file is served: which files it
    /// locks is unknown).
    pub locked: Result<BTreeMap<String, String>, String>,
    /// The largest file read (`[install] max_component_mib`): a larger one
    /// is refused by its size, before a byte of it is read.
    pub max_file_bytes: u64,
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
            components: config.components.clone(),
            locked: match &config.install.lock_file {
                Some(path) => crate::source::Lock::read(path).map(|lock| lock.digests()),
                None => Ok(BTreeMap::new()),
            },
            max_file_bytes: config.install.max_component_bytes,
        }
    }

    /// Why the file at `path` with `digest` may not serve under the lock,
    /// if it may not.
    pub fn lock_refusal(&self, path: &Path, digest: &str) -> Option<FileError> {
        let locked = match &self.locked {
            Ok(locked) => locked,
            Err(why) => return Some(FileError::Lock(why.clone())),
        };
        let name = path.file_name()?.to_str()?;
        let expected = locked.get(name)?;
        (expected != digest).then(|| FileError::Locked {
            file: name.to_owned(),
            locked: expected.clone(),
            digest: digest.to_owned(),
        })
    }

    /// The rules for the plain component at `path` (by its file name).
    pub fn plain_for(&self, path: &Path) -> PlainRules {
        path.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| self.components.get(n))
            .cloned()
            .unwrap_or_default()
    }
}

/// Read, compile, link and describe one file. `last_good` is the version
/// currently served from this path, if any: reused when the digest is the
/// same, kept when the new contents fail. `None` if the file is gone.
///
/// At most [`MAX_CONCURRENT_LOADS`] run at once in the process; the file
/// is read only if it is a regular file within `rules.max_file_bytes`.
pub async fn load_file(
    sandbox: &Arc<Sandbox>,
    path: &Path,
    last_good: Option<LoadedFile>,
    rules: &LoadRules,
) -> Option<FileLoad> {
    // The semaphore is never closed.
    let _load = LOADS.acquire().await;
    let pins = &rules.pins;
    let plain = rules.plain_for(path);
    let read = {
        let path = path.to_owned();
        let max = rules.max_file_bytes;
        tokio::task::spawn_blocking(move || read_file(&path, max, Links::Follow)).await
    };
    let bytes = match read {
        Ok(Ok(Some(bytes))) => bytes,
        Ok(Ok(None)) => return None,
        Ok(Err(error)) => {
            let reason = match error {
                LocalFileError::TooLarge { max, .. } => FileError::TooLarge { max },
                other => FileError::Read(other.to_string()),
            };
            return Some(fallback(last_good, None, reason, pins));
        }
        Err(error) => {
            let reason = FileError::Task(format!("the reading task failed: {error}"));
            return Some(fallback(last_good, None, reason, pins));
        }
    };
    let digest = hex(&Sha256::digest(&bytes));
    // A locked file must be the bytes the lock names, before any of it is
    // compiled; the last good version serves on only if it still is.
    if let Some(reason) = rules.lock_refusal(path, &digest) {
        let good = last_good.filter(|g| rules.lock_refusal(path, &g.component.digest).is_none());
        return Some(refused_update(good, digest, reason, Vec::new(), pins));
    }
    // Reused only as it was loaded: the same bytes under the same rules (a
    // changed `[components."x.wasm"]` section reloads it, from the cache).
    if let Some(good) = last_good
        .as_ref()
        .filter(|g| g.component.digest == digest && g.component.rules == plain)
    {
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
    match compile_and_describe(sandbox, path, bytes, &digest, &rules.limits, &plain).await {
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
    rules: &PlainRules,
) -> Result<(LoadedFile, bool), FileError> {
    let loaded = {
        let sandbox = Arc::clone(sandbox);
        let digest = digest.to_owned();
        let rules = rules.clone();
        tokio::task::spawn_blocking(move || {
            let loaded = sandbox.load(&bytes, &digest, &rules);
            drop(bytes);
            // What the load freed on this thread goes back now: the
            // allocator returns a thread's free pages only when that
            // thread next calls it, and a blocking thread may idle until
            // it exits. 100 components loaded: 40.5 MiB of heap 2 s after
            // start without this, 33.9 with it, about 0.1 MiB a component
            // in use (docs/benchmarks.md, round twenty-one).
            crate::alloc::give_back_own();
            loaded
        })
        .await
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
        rules: rules.clone(),
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
