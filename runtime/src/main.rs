//! The `toolcage` command: `serve`, `list` and `call`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolcage::catalog::{FileStatus, LoadedTool};
use toolcage::config::{Config, Grant, expand_tilde};
use toolcage::dispatch::CallContext;
use toolcage::sandbox::GuestEvent;
use toolcage::{Host, Options};

/// An MCP server that runs every tool as a sandboxed WebAssembly component.
///
/// Drop `.wasm` tool components into the tools folder; toolcage lists their
/// tools to MCP clients and runs each call in a fresh sandbox with only the
/// access and the CPU, memory and time the operator grants.
#[derive(Debug, Parser)]
#[command(name = "toolcage", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP with the tools in the tools folder: over stdio
    /// (stdin/stdout), or over Streamable HTTP with `--http`.
    Serve {
        #[command(flatten)]
        common: Common,
        /// Serve Streamable HTTP at `http://ADDR/mcp` instead of stdio, e.g.
        /// `127.0.0.1:8080`. Non-loopback addresses need a bearer token
        /// (`http.token_file` or `http.token_env` in the config).
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
    },
    /// List the tools folder: every tool, and every file that failed to load
    /// with the reason.
    List {
        #[command(flatten)]
        common: Common,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool once and print the result (MCP `CallToolResult` JSON) on
    /// stdout. Exits 1 when the result is an error.
    Call {
        #[command(flatten)]
        common: Common,
        /// The tool's name.
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
}

#[derive(Debug, Args)]
struct Common {
    /// The tools folder [default: the config's `tools_dir`, else
    /// ~/.local/share/toolcage/tools]
    #[arg(long, value_name = "DIR", env = "TOOLCAGE_TOOLS")]
    tools: Option<PathBuf>,
    /// The config file [default: ~/.config/toolcage/config.toml, if it
    /// exists]
    #[arg(long, value_name = "FILE", env = "TOOLCAGE_CONFIG")]
    config: Option<PathBuf>,
    /// Where compiled components are cached [default: the config's
    /// `cache_dir`, else ~/.cache/toolcage]
    #[arg(long, value_name = "DIR", env = "TOOLCAGE_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Do not read or write the compile cache.
    #[arg(long)]
    no_cache: bool,
    /// Grant every tool this directory, read-only unless `:rw` is given
    /// (repeatable): `--root ~/project:rw --root /data`.
    #[arg(long, value_name = "PATH[:ro|:rw]")]
    root: Vec<String>,
    /// Turn fuel metering off for every tool (calls stay bounded by their
    /// deadline and memory cap); for measuring what metering costs.
    #[arg(long)]
    no_fuel: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolcage: cannot start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("toolcage: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr, never stdout: over stdio, stdout is the protocol.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLCAGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter)
        .init();
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { common, http } => {
            let host = Arc::new(Host::load(options(&common)?).await?);
            match http {
                Some(addr) => host.serve_http(addr).await?,
                None => host.serve_stdio().await?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::List { common, json } => {
            let options = options(&common)?;
            if !options.tools_dir.is_dir() {
                bail!(
                    "the tools folder `{}` does not exist; create it or pass --tools DIR",
                    options.tools_dir.display()
                );
            }
            let host = Host::load(options).await?;
            list(&host, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call {
            common,
            tool,
            arguments,
        } => {
            let arguments: Value = serde_json::from_str(&arguments)
                .with_context(|| format!("the arguments `{arguments}` are not JSON"))?;
            let Value::Object(arguments) = arguments else {
                bail!("the arguments must be a JSON object, like '{{\"timezone\": \"UTC\"}}'");
            };
            let host = Host::load(options(&common)?).await?;
            let events: toolcage::sandbox::EventSink = Arc::new(|event| match event {
                GuestEvent::Log { level, message } => eprintln!("[{level:?}] {message}"),
                GuestEvent::Progress {
                    done,
                    total,
                    message,
                } => eprintln!(
                    "[progress] {done}{} {}",
                    total.map(|t| format!("/{t}")).unwrap_or_default(),
                    message.unwrap_or_default()
                ),
            });
            let cancel = CancellationToken::new();
            let context = CallContext {
                events: Some(events),
                cancel: &cancel,
                client_roots: None,
                services: None,
            };
            let output = match host.dispatcher.call(&tool, Some(arguments), context).await {
                Ok(output) => output,
                Err(error) => bail!("{error}; `toolcage list` shows the available tools"),
            };
            let is_error = output.is_error;
            let result = toolcage::protocol::to_mcp_result(output);
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut stdout, &result)?;
            writeln!(stdout)?;
            Ok(if is_error {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// Flags over the config file over defaults.
fn options(common: &Common) -> anyhow::Result<Options> {
    let config_path = match &common.config {
        Some(path) => Some(expand_tilde(path)),
        None => dirs_config()
            .map(|dir| dir.join("toolcage/config.toml"))
            .filter(|path| path.is_file()),
    };
    let mut config = match &config_path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let mut cli_grants = Vec::new();
    for flag in &common.root {
        let grant =
            Grant::parse_flag(flag, &cwd).map_err(|e| anyhow::anyhow!("--root {flag}: {e}"))?;
        config.grant_to_all(grant.clone());
        cli_grants.push(grant);
    }
    let tools_dir = match (&common.tools, &config.tools_dir) {
        (Some(dir), _) => expand_tilde(dir),
        (None, Some(dir)) => dir.clone(),
        (None, None) => data_dir()
            .context("cannot find a home folder for the default tools folder; pass --tools DIR")?
            .join("toolcage/tools"),
    };
    let cache_dir = if common.no_cache {
        None
    } else {
        match (&common.cache_dir, &config.cache_dir) {
            (Some(dir), _) => Some(expand_tilde(dir)),
            (None, Some(dir)) => Some(dir.clone()),
            (None, None) => cache_dir().map(|dir| dir.join("toolcage")),
        }
    };
    Ok(Options {
        tools_dir,
        cache_dir,
        config,
        cli_grants,
        fuel_metering: !common.no_fuel,
    })
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn xdg(var: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(fallback)))
}

fn dirs_config() -> Option<PathBuf> {
    xdg("XDG_CONFIG_HOME", ".config")
}

fn data_dir() -> Option<PathBuf> {
    xdg("XDG_DATA_HOME", ".local/share")
}

fn cache_dir() -> Option<PathBuf> {
    xdg("XDG_CACHE_HOME", ".cache")
}

fn list(host: &Host, as_json: bool) -> anyhow::Result<()> {
    let catalog = host.registry.snapshot();
    let mut stdout = std::io::stdout().lock();
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
                                let d = &entry.descriptor;
                                json!({
                                    "name": d.name,
                                    "title": d.title,
                                    "description": d.description,
                                    "inputSchema": *d.input_schema,
                                    "outputSchema": d.output_schema.as_deref(),
                                    "annotations": {
                                        "readOnlyHint": d.annotations.read_only,
                                        "destructiveHint": d.annotations.destructive,
                                        "idempotentHint": d.annotations.idempotent,
                                        "openWorldHint": d.annotations.open_world,
                                    },
                                    "status": if entry.shadowed_by.is_some() { "shadowed" } else { "served" },
                                    "shadowedBy": entry.shadowed_by.as_ref().map(|p| p.display().to_string()),
                                })
                            })
                            .collect::<Vec<_>>(),
                    ),
                    FileStatus::Failed(reason) => ("failed", Some(reason.clone()), Vec::new()),
                };
                json!({
                    "file": file.path.display().to_string(),
                    "digest": file.digest,
                    "status": status,
                    "error": error,
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
        return Ok(());
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
                writeln!(stdout, "\n{name}  (sha256 {digest}…)  loaded")?;
                for entry in entries {
                    let tool: Option<Arc<LoadedTool>> =
                        catalog.tools.get(&entry.descriptor.name).cloned();
                    let summary = entry.descriptor.description.lines().next().unwrap_or("");
                    match &entry.shadowed_by {
                        None if tool.is_some() => {
                            writeln!(stdout, "  {:<24} {summary}", entry.descriptor.name)?
                        }
                        _ => writeln!(
                            stdout,
                            "  {:<24} SHADOWED by {}",
                            entry.descriptor.name,
                            entry
                                .shadowed_by
                                .as_ref()
                                .map(|p| p.display().to_string())
                                .unwrap_or_default()
                        )?,
                    }
                }
            }
            FileStatus::Failed(reason) => {
                writeln!(stdout, "\n{name}  (sha256 {digest}…)  FAILED: {reason}")?;
            }
        }
    }
    Ok(())
}
