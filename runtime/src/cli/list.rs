//! `toolcage list` (the folder's report, or the tools as a model API's
//! function declarations) and `toolcage pin`.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use serde_json::{Value, json};
use toolcage::Host;
use toolcage::agent::formats::{Format, declare};
use toolcage::catalog::{FileStatus, LoadedTool, ToolStatus};
use toolcage::config::toml_key;
use toolcage::terminal::{self, Form};

use crate::args::{Common, ListFormat};
use crate::options::options;

/// `toolcage list`: the folder's report as text or JSON (exit 1 when a
/// file failed to load, so a script or CI notices), or the served tools
/// as a model API's function declarations.
pub(crate) async fn run(
    common: &Common,
    json: bool,
    format: ListFormat,
) -> anyhow::Result<ExitCode> {
    let options = options(common)?;
    if !options.tools_dir.is_dir() {
        bail!(
            "the tools folder `{}` does not exist; create it or pass --tools DIR",
            options.tools_dir.display()
        );
    }
    let host = Host::load(options).await?;
    let api = match format {
        ListFormat::Openai => Some(Format::OpenAi),
        ListFormat::Anthropic => Some(Format::Anthropic),
        ListFormat::Gemini => Some(Format::Gemini),
        ListFormat::Text | ListFormat::Json => None,
    };
    if let Some(api) = api {
        print_declarations(&host, api)?;
        return Ok(ExitCode::SUCCESS);
    }
    Ok(if list(&host, json || format == ListFormat::Json)? {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `toolcage pin`: a pin line for every tool, as the folder is (whatever
/// the config pins now).
pub(crate) async fn pin(common: &Common) -> anyhow::Result<ExitCode> {
    let mut options = options(common)?;
    for policy in options.config.tools.values_mut() {
        policy.pin = None;
    }
    let host = Host::load(options).await?;
    let catalog = host.registry.snapshot();
    let mut stdout = terminal::stdout(Form::Text);
    for (name, tool) in &catalog.tools {
        writeln!(
            stdout,
            "[tools.{}]\npin = \"sha256:{}\"  # {}\n",
            toml_key(name),
            tool.component.digest,
            tool.component
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Print the served tools as `api` function declarations on stdout (a JSON
/// array; Gemini's wrapped in `{"functionDeclarations": ...}`), and on
/// stderr the names a declaration had to change.
fn print_declarations(host: &Host, api: Format) -> anyhow::Result<()> {
    let catalog = host.registry.snapshot();
    let declarations = declare(catalog.tools.values().map(|t| &t.spec.descriptor), api);
    for (function, tool) in &declarations.names {
        if function != tool {
            // Both names are checked ones (tool names at load, function
            // names by the API's pattern): nothing to escape.
            eprintln!("toolcage: tool `{tool}` is declared as `{function}` (the API's name rules)");
        }
    }
    let out = match api {
        Format::Gemini => json!({ "functionDeclarations": declarations.functions }),
        Format::OpenAi | Format::Anthropic => Value::Array(declarations.functions),
    };
    let text = serde_json::to_string_pretty(&out)?;
    let mut stdout = terminal::stdout(Form::Json);
    writeln!(stdout, "{text}")?;
    Ok(())
}

/// Print the folder's report; whether every file loaded.
fn list(host: &Host, as_json: bool) -> anyhow::Result<bool> {
    let catalog = host.registry.snapshot();
    let all_loaded = catalog
        .files
        .iter()
        .all(|file| matches!(file.status, FileStatus::Loaded(_)));
    // A component's descriptions, export names and the reasons a file
    // failed are its author's text.
    let mut stdout = terminal::stdout(if as_json { Form::Json } else { Form::Text });
    if as_json {
        let files: Vec<Value> = catalog
            .files
            .iter()
            .map(|file| {
                let (status, error, tools) = match &file.status {
                    FileStatus::Loaded(entries) => (
                        "loaded",
                        None,
                        entries
                            .iter()
                            .map(|entry| {
                                // The tool as `tools/list` shows it, and
                                // how it fares in this folder.
                                let mut tool =
                                    serde_json::to_value(toolcage::protocol::to_mcp_tool(
                                        &entry.descriptor,
                                        host.dispatcher
                                            .config()
                                            .policy_for(&entry.descriptor.name)
                                            .tasks
                                            .unwrap_or(entry.descriptor.execution.task_support),
                                    ))
                                    .unwrap_or_default();
                                let fate = json!({
                                    "status": match &entry.status {
                                        ToolStatus::Served => "served",
                                        ToolStatus::Shadowed(_) => "shadowed",
                                        ToolStatus::Refused(_) => "refused",
                                    },
                                    "shadowedBy": match &entry.status {
                                        ToolStatus::Shadowed(by) => Some(by.display().to_string()),
                                        _ => None,
                                    },
                                    "refusedBecause": match &entry.status {
                                        ToolStatus::Refused(why) => Some(why.as_str()),
                                        _ => None,
                                    },
                                });
                                if let (Some(tool), Value::Object(fate)) =
                                    (tool.as_object_mut(), fate)
                                {
                                    tool.extend(fate);
                                }
                                tool
                            })
                            .collect::<Vec<_>>(),
                    ),
                    FileStatus::Failed(reason) => ("failed", Some(reason.to_string()), Vec::new()),
                };
                let loaded = catalog.loaded.get(&file.path);
                let imports = loaded
                    .map(|f| f.component.imports.clone())
                    .unwrap_or_default();
                let prepared = loaded.map(|f| &f.component.prepared);
                let skipped: Vec<Value> = prepared
                    .map(|p| p.skipped())
                    .unwrap_or_default()
                    .iter()
                    .map(|s| json!({"function": s.function, "reason": s.reason}))
                    .collect();
                json!({
                    "file": file.path.display().to_string(),
                    "digest": file.digest,
                    "status": status,
                    "kind": prepared.map(|p| p.kind()),
                    "contract": prepared.and_then(|p| p.contract_version()),
                    "exports": prepared.map(|p| p.exports()),
                    "skipped": skipped,
                    "error": error,
                    "rejectedUpdate": file.rejected_update.as_ref().map(ToString::to_string),
                    "imports": imports,
                    "capabilityChange": file.capability_change,
                    "tools": tools,
                })
            })
            .collect();
        let out = json!({
            "toolsDir": host.options.tools_dir.display().to_string(),
            "files": files,
        });
        serde_json::to_writer_pretty(&mut stdout, &out)?;
        writeln!(stdout)?;
        return Ok(all_loaded);
    }
    writeln!(stdout, "tools folder: {}", host.options.tools_dir.display())?;
    if catalog.files.is_empty() {
        writeln!(stdout, "(no .wasm files)")?;
    }
    for file in &catalog.files {
        let name = file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let digest = file
            .digest
            .as_deref()
            .map(|d| &d[..12.min(d.len())])
            .unwrap_or("-");
        match &file.status {
            FileStatus::Loaded(entries) => {
                let loaded = catalog.loaded.get(&file.path);
                let kind = loaded.map_or(String::new(), |f| {
                    let prepared = &f.component.prepared;
                    match prepared.contract_version() {
                        Some(version) => format!("{} {version}", prepared.kind()),
                        None => prepared.kind().to_owned(),
                    }
                });
                writeln!(
                    stdout,
                    "\n{name}  (sha256 {digest}…)  loaded, {kind} component"
                )?;
                if let Some(loaded) = loaded {
                    let prepared = &loaded.component.prepared;
                    if !prepared.exports().is_empty() {
                        writeln!(stdout, "  exports: {}", prepared.exports().join(", "))?;
                    }
                    writeln!(
                        stdout,
                        "  may use, if granted: {}",
                        capability_summary(&loaded.component.imports)
                    )?;
                }
                if let Some(reason) = &file.rejected_update {
                    writeln!(
                        stdout,
                        "  NEWER VERSION REFUSED (this one keeps serving): {reason}"
                    )?;
                }
                if !file.capability_change.is_empty() {
                    writeln!(
                        stdout,
                        "  CAPABILITY CHANGE: the new version also imports {}",
                        file.capability_change.join(", ")
                    )?;
                }
                for entry in entries {
                    let tool: Option<Arc<LoadedTool>> =
                        catalog.tools.get(&entry.descriptor.name).cloned();
                    let summary = entry.descriptor.description.lines().next().unwrap_or("");
                    match &entry.status {
                        ToolStatus::Served if tool.is_some() => {
                            writeln!(stdout, "  {:<24} {summary}", entry.descriptor.name)?
                        }
                        ToolStatus::Served => {}
                        ToolStatus::Shadowed(by) => writeln!(
                            stdout,
                            "  {:<24} SHADOWED by {}",
                            entry.descriptor.name,
                            by.display()
                        )?,
                        ToolStatus::Refused(why) => {
                            writeln!(stdout, "  {:<24} REFUSED: {why}", entry.descriptor.name)?
                        }
                    }
                }
                for skipped in loaded
                    .map(|f| f.component.prepared.skipped())
                    .unwrap_or_default()
                {
                    writeln!(
                        stdout,
                        "  {:<24} NOT A TOOL: {}",
                        skipped.function, skipped.reason
                    )?;
                }
            }
            FileStatus::Failed(reason) => {
                writeln!(stdout, "\n{name}  (sha256 {digest}…)  FAILED: {reason}")?;
            }
        }
    }
    Ok(all_loaded)
}

/// What the imports let a component ask for, in words.
fn capability_summary(imports: &[String]) -> String {
    let mut uses = Vec::new();
    let has = |prefix: &str| imports.iter().any(|i| i.starts_with(prefix));
    if has("wasi:filesystem/") {
        uses.push("files (under granted roots)");
    }
    if has("wasi:http/outgoing-handler") {
        uses.push("HTTP (to granted hosts)");
    }
    if has("wasi:cli/environment") {
        uses.push("environment (granted variables)");
    }
    if has("wasi:config/store") {
        uses.push("configuration values (granted `config`)");
    }
    if has("wasi:sockets/") {
        uses.push("sockets (always denied)");
    }
    if imports.iter().any(|i| i == "toolcage:tool/host") {
        uses.push("log/progress/elicit/sample");
    }
    if uses.is_empty() {
        "nothing beyond clocks and randomness".into()
    } else {
        uses.join(", ")
    }
}
