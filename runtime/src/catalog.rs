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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use crate::config::{Config, Limits};
use crate::sandbox::{Annotations, HostState, RawDescriptor, Sandbox, ToolComponentPre};

/// One loaded component file.
pub struct LoadedComponent {
    /// Its path.
    pub path: PathBuf,
    /// SHA-256 of its bytes, lowercase hex.
    pub digest: String,
    /// Pre-linked, ready to instantiate.
    pub pre: ToolComponentPre<HostState>,
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

/// A tool ready to call: its descriptor, compiled schemas, component and
/// concurrency permits.
pub struct LoadedTool {
    /// The descriptor.
    pub descriptor: ToolDescriptor,
    /// Compiled once per tool version, not per call.
    pub input_validator: jsonschema::Validator,
    /// Compiled output schema, if declared.
    pub output_validator: Option<jsonschema::Validator>,
    /// The component that provides it.
    pub component: Arc<LoadedComponent>,
    /// Calls of this tool that may run at once.
    pub permits: Arc<Semaphore>,
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
}

/// The outcome of loading one file.
#[derive(Debug, Clone)]
pub enum FileStatus {
    /// Loaded; the tools it declares, each with whether it is served or
    /// shadowed by an earlier file.
    Loaded(Vec<ToolEntry>),
    /// Skipped, and why.
    Failed(String),
}

/// A tool a loaded file declares.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    /// The descriptor.
    pub descriptor: ToolDescriptor,
    /// `None` if served; the winning file if shadowed.
    pub shadowed_by: Option<PathBuf>,
}

/// An immutable snapshot of the tool set.
#[derive(Default)]
pub struct Catalog {
    /// Served tools by name.
    pub tools: BTreeMap<String, Arc<LoadedTool>>,
    /// Every `*.wasm` file seen, in name order.
    pub files: Vec<FileReport>,
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
pub async fn load_dir(sandbox: &Arc<Sandbox>, dir: &Path, config: &Config) -> Catalog {
    let files = match wasm_files(dir) {
        Ok(files) => files,
        Err(error) => {
            tracing::error!(dir = %dir.display(), %error, "cannot read the tools folder");
            return Catalog::default();
        }
    };
    let mut loads = Vec::with_capacity(files.len());
    for path in files {
        let sandbox = Arc::clone(sandbox);
        loads.push(tokio::spawn(async move {
            let outcome = load_file(&sandbox, &path).await;
            (path, outcome)
        }));
    }
    let mut outcomes = Vec::with_capacity(loads.len());
    for load in loads {
        match load.await {
            Ok(outcome) => outcomes.push(outcome),
            Err(error) => tracing::error!(%error, "a component load task failed"),
        }
    }
    assemble(outcomes, config)
}

/// A file loaded on its own, before names are resolved across files.
pub struct FileLoad {
    /// SHA-256 of its bytes, when it could be read.
    pub digest: Option<String>,
    /// Whether compiled code came from the cache.
    pub from_cache: bool,
    /// The component and its validated tools, or why not.
    pub result: Result<(Arc<LoadedComponent>, Vec<ValidatedTool>), String>,
}

/// A descriptor with its compiled schemas.
pub struct ValidatedTool {
    descriptor: ToolDescriptor,
    input_validator: jsonschema::Validator,
    output_validator: Option<jsonschema::Validator>,
}

/// Read, compile, link and describe one file.
pub async fn load_file(sandbox: &Arc<Sandbox>, path: &Path) -> FileLoad {
    let bytes = match tokio::fs::read(path).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return FileLoad {
                digest: None,
                from_cache: false,
                result: Err(format!("cannot read: {error}")),
            };
        }
    };
    let digest = hex(&Sha256::digest(&bytes));
    let compiled = {
        let sandbox = Arc::clone(sandbox);
        let digest = digest.clone();
        tokio::task::spawn_blocking(move || sandbox.compile(&bytes, &digest)).await
    };
    let fail = |message: String, from_cache: bool| FileLoad {
        digest: Some(digest.clone()),
        from_cache,
        result: Err(message),
    };
    let compiled = match compiled {
        Ok(Ok(compiled)) => compiled,
        Ok(Err(error)) => return fail(error.to_string(), false),
        Err(error) => return fail(format!("compilation task failed: {error}"), false),
    };
    let from_cache = compiled.from_cache;
    let pre = match sandbox.prepare(&compiled.component) {
        Ok(pre) => pre,
        Err(error) => return fail(error.to_string(), from_cache),
    };
    // `describe` runs under the default limits: it should be cheap, and a
    // file cannot choose its own limits.
    let raw = match sandbox.describe(&pre, &Limits::default()).await {
        Ok(raw) => raw,
        Err(error) => return fail(format!("`describe` {error}"), from_cache),
    };
    let tools = match validate_descriptors(raw) {
        Ok(tools) => tools,
        Err(error) => return fail(error, from_cache),
    };
    let component = Arc::new(LoadedComponent {
        path: path.to_owned(),
        digest: digest.clone(),
        pre,
    });
    FileLoad {
        digest: Some(digest),
        from_cache,
        result: Ok((component, tools)),
    }
}

/// Resolve names across files (first file by name wins) and build the
/// catalog. `outcomes` must be in file-name order.
pub fn assemble(outcomes: Vec<(PathBuf, FileLoad)>, config: &Config) -> Catalog {
    let mut catalog = Catalog::default();
    let mut owners: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (path, load) in outcomes {
        let status = match load.result {
            Err(reason) => {
                tracing::warn!(file = %path.display(), %reason, "skipping tool component");
                FileStatus::Failed(reason)
            }
            Ok((component, tools)) => {
                let mut entries = Vec::with_capacity(tools.len());
                for tool in tools {
                    let name = tool.descriptor.name.clone();
                    if let Some(winner) = owners.get(&name) {
                        tracing::warn!(
                            tool = %name,
                            file = %path.display(),
                            winner = %winner.display(),
                            "tool name declared twice; the file that sorts first wins"
                        );
                        entries.push(ToolEntry {
                            descriptor: tool.descriptor,
                            shadowed_by: Some(winner.clone()),
                        });
                        continue;
                    }
                    owners.insert(name.clone(), path.clone());
                    let limits = config.limits_for(&name);
                    entries.push(ToolEntry {
                        descriptor: tool.descriptor.clone(),
                        shadowed_by: None,
                    });
                    catalog.tools.insert(
                        name,
                        Arc::new(LoadedTool {
                            descriptor: tool.descriptor,
                            input_validator: tool.input_validator,
                            output_validator: tool.output_validator,
                            component: Arc::clone(&component),
                            permits: Arc::new(Semaphore::new(limits.max_concurrent as usize)),
                        }),
                    );
                }
                tracing::info!(
                    file = %path.display(),
                    digest = %component.digest,
                    tools = entries.len(),
                    cached = load.from_cache,
                    "loaded tool component"
                );
                FileStatus::Loaded(entries)
            }
        };
        catalog.files.push(FileReport {
            path,
            digest: load.digest,
            status,
            from_cache: load.from_cache,
        });
    }
    for name in config.tools.keys() {
        if !catalog.tools.contains_key(name) {
            tracing::warn!(tool = %name, "the config sets limits for a tool no component provides");
        }
    }
    catalog
}

/// Validate a component's descriptors; any invalid one rejects the file.
fn validate_descriptors(raw: Vec<RawDescriptor>) -> Result<Vec<ValidatedTool>, String> {
    if raw.is_empty() {
        return Err("`describe` returned no tools".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut tools = Vec::with_capacity(raw.len());
    for d in raw {
        check_tool_name(&d.name)?;
        if !seen.insert(d.name.clone()) {
            return Err(format!("describes tool `{}` twice", d.name));
        }
        let input_schema = object_schema(&d.name, "input", &d.input_schema)?;
        let output_schema = match &d.output_schema {
            Some(text) => Some(object_schema(&d.name, "output", text)?),
            None => None,
        };
        let compile = |kind: &str, schema: &Map<String, Value>| {
            jsonschema::validator_for(&Value::Object(schema.clone()))
                .map_err(|error| format!("tool `{}` has an invalid {kind} schema: {error}", d.name))
        };
        let input_validator = compile("input", &input_schema)?;
        let output_validator = match &output_schema {
            Some(schema) => Some(compile("output", schema)?),
            None => None,
        };
        tools.push(ValidatedTool {
            descriptor: ToolDescriptor {
                name: d.name,
                title: d.title,
                description: d.description,
                input_schema: Arc::new(input_schema),
                output_schema: output_schema.map(Arc::new),
                annotations: d.annotations,
            },
            input_validator,
            output_validator,
        });
    }
    Ok(tools)
}

/// MCP's tool-name rule: 1 to 128 characters from `A-Za-z0-9_-.`.
///
/// # Errors
///
/// The name breaks the rule; the message names it and says why.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err(format!(
            "tool name `{}` must be 1 to 128 characters long (it has {})",
            name.escape_default(),
            name.chars().count()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(format!(
            "tool name `{}` contains `{}`; names may use only A-Z, a-z, 0-9, `_`, `-` and `.`",
            name.escape_default(),
            bad.escape_default()
        ));
    }
    Ok(())
}

fn object_schema(tool: &str, kind: &str, text: &str) -> Result<Map<String, Value>, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|error| format!("tool `{tool}` has an {kind} schema that is not JSON: {error}"))?;
    let Value::Object(map) = value else {
        return Err(format!(
            "tool `{tool}` has an {kind} schema that is not a JSON object"
        ));
    };
    if map.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "tool `{tool}` has an {kind} schema whose root is not `\"type\": \"object\"`"
        ));
    }
    Ok(map)
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

    fn raw(name: &str, input: &str, output: Option<&str>) -> RawDescriptor {
        RawDescriptor {
            name: name.into(),
            title: None,
            description: "d".into(),
            input_schema: input.into(),
            output_schema: output.map(str::to_owned),
            annotations: Annotations::default(),
        }
    }

    const OBJ: &str = r#"{"type":"object"}"#;

    #[test]
    fn names_follow_the_mcp_rule() {
        for good in ["a", "get_current_time", "x.y-z_1", &"n".repeat(128)] {
            assert!(check_tool_name(good).is_ok(), "{good}");
        }
        for (bad, needle) in [
            ("", "1 to 128"),
            (&"n".repeat(129) as &str, "1 to 128"),
            ("has space", "contains ` `"),
            ("slash/name", "contains `/`"),
            ("ünï", "contains"),
        ] {
            let error = check_tool_name(bad).expect_err(bad);
            assert!(error.contains(needle), "{bad}: {error}");
        }
    }

    #[test]
    fn descriptors_are_checked() {
        let check = |descriptors: Vec<RawDescriptor>| {
            validate_descriptors(descriptors).err().unwrap_or_default()
        };
        assert_eq!(check(vec![raw("a", OBJ, None)]), "");
        assert!(check(vec![]).contains("no tools"));
        assert!(check(vec![raw("a", OBJ, None), raw("a", OBJ, None)]).contains("twice"));
        assert!(check(vec![raw("a", "not json", None)]).contains("not JSON"));
        assert!(check(vec![raw("a", "[1]", None)]).contains("not a JSON object"));
        assert!(check(vec![raw("a", r#"{"type":"string"}"#, None)]).contains("root"));
        assert!(check(vec![raw("a", OBJ, Some("{}"))]).contains("output schema"));
        assert!(
            check(vec![raw(
                "a",
                r#"{"type":"object","minProperties":"x"}"#,
                None
            )])
            .contains("invalid input schema")
        );
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }
}
