//! The `toolcage` command: `serve`, `list`, `call`, `agent`, `add`,
//! `update`, `remove`, `publish`, `pin`, `journal`, `new` and `embed-docs`. One file
//! (about 1,000 lines): each command is one arm of `run` and the helpers
//! it alone uses; the work itself is the library's (installing is
//! `toolcage::source::commands`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolcage::call::{
    Answer, Ask, ClientServices, ElicitAnswer, GuestEvent, PendingInput, ServiceError,
    ServiceFuture,
};
use toolcage::catalog::{FileStatus, LoadedTool, ToolStatus};
use toolcage::config::{Config, Root, expand_tilde, toml_key};
use toolcage::dispatch::CallContext;
use toolcage::journal::ClientId;
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
    /// How log lines are written to stderr: `text` for people, `json` for
    /// a log pipeline (one JSON object a line: `timestamp`, `level`,
    /// `target`, `fields`).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "TOOLCAGE_LOG_FORMAT"
    )]
    log_format: LogFormat,
}

/// What `toolcage list` prints (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ListFormat {
    Text,
    Json,
    Openai,
    Anthropic,
    Gemini,
}

/// Print the served tools as `api` function declarations on stdout (a JSON
/// array; Gemini's wrapped in `{"functionDeclarations": ...}`), and on
/// stderr the names a declaration had to change.
fn print_declarations(host: &Host, api: toolcage::agent::formats::Format) -> anyhow::Result<()> {
    use toolcage::agent::formats::{Format, declare};
    let catalog = host.registry.snapshot();
    let declarations = declare(catalog.tools.values().map(|t| &t.spec.descriptor), api);
    for (function, tool) in &declarations.names {
        if function != tool {
            eprintln!("toolcage: tool `{tool}` is declared as `{function}` (the API's name rules)");
        }
    }
    let out = match api {
        Format::Gemini => json!({ "functionDeclarations": declarations.functions }),
        Format::OpenAi | Format::Anthropic => Value::Array(declarations.functions),
    };
    let text = serde_json::to_string_pretty(&out)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{text}")?;
    Ok(())
}

/// The log's format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
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
        /// Print JSON instead of text (the same as `--format json`).
        #[arg(long)]
        json: bool,
        /// What to print: `text`, `json` (every file and tool, with why),
        /// or the served tools as function declarations for a model API:
        /// `openai`, `anthropic` or `gemini`.
        #[arg(long, value_enum, default_value = "text")]
        format: ListFormat,
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
        /// Confirm the call up front when the tool needs the user's
        /// confirmation (destructive tools); without it, the question is
        /// asked on the terminal, and refused when there is none.
        #[arg(long)]
        yes: bool,
    },
    /// Install a tool from an OCI registry (`oci://REGISTRY/REPO:TAG` or
    /// `@sha256:…`), a URL (`https://…/tool.wasm` with `--digest`) or a
    /// file: fetched, every digest checked, loaded in the sandbox, its
    /// imports and the grants they would need shown, locked, then put in
    /// the tools folder. It never adds a grant.
    Add {
        #[command(flatten)]
        common: Common,
        /// Where the tool comes from.
        source: String,
        /// The tool file's name (without `.wasm`) [default: from the source]
        #[arg(long)]
        name: Option<String>,
        /// The digest a URL's bytes must have (`sha256:…`).
        #[arg(long)]
        digest: Option<String>,
        #[command(flatten)]
        trust: Trust,
    },
    /// Fetch installed tools' sources again (tags resolved anew) and, per
    /// tool whose bytes changed, show the old and new digests and the new
    /// imports, then replace it if you say so (or with `--yes`).
    Update {
        #[command(flatten)]
        common: Common,
        /// Only this tool file [default: every one in the lock]
        name: Option<String>,
        /// Replace without asking.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        trust: Trust,
    },
    /// Uninstall a tool `toolcage add` installed: its file and its lock
    /// entry.
    Remove {
        #[command(flatten)]
        common: Common,
        /// The tool file's name (without `.wasm`).
        name: String,
    },
    /// Push a component to an OCI registry as a Wasm artifact
    /// (`oci://REGISTRY/REPO:TAG`), signed with `--sign KEY` (a PKCS#8 PEM
    /// ECDSA P-256 private key) as cosign signs.
    Publish {
        #[command(flatten)]
        common: Common,
        /// The component file.
        file: PathBuf,
        /// Where to push it.
        reference: String,
        /// Sign it with this private key.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
    },
    /// Print a pin (the SHA-256 of the providing component) for every tool,
    /// as config lines to paste under `[tools.NAME]`.
    Pin {
        #[command(flatten)]
        common: Common,
    },
    /// Show the call journal (`[journal] path` in the config), oldest
    /// first: what each tool did, when, for whom, and how it ended.
    Journal {
        #[command(flatten)]
        common: Common,
        /// Only calls of this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only calls newer than this: `90s`, `15m`, `1h`, `2d`.
        #[arg(long, value_name = "AGE")]
        since: Option<String>,
        /// Only calls with this outcome: ok, error, refused, cancelled,
        /// input_required.
        #[arg(long)]
        outcome: Option<String>,
        /// The journal file, instead of the config's.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Print the matching JSON lines as they are.
        #[arg(long)]
        json: bool,
    },
    /// Run an agent: ask a model behind an OpenAI-compatible Chat
    /// Completions API (OpenAI, vLLM, llama.cpp's server, Ollama, Groq, ...)
    /// PROMPT, with the tools of the tools folder as its function tools,
    /// each call run in the sandbox like any other. The answer streams to
    /// stdout, the tool calls to stderr. Without PROMPT: a conversation, a
    /// line a turn, on a terminal; else stdin is the prompt.
    Agent {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        agent: AgentArgs,
        /// What to ask.
        prompt: Option<String>,
    },
    /// For tool authors: write a new tool project (source, SDK, build
    /// script, README) into `./NAME` or `--dir`.
    New {
        /// The tool's name: lowercase letters, digits and `_`.
        name: String,
        /// The language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: toolcage::scaffold::Lang,
        /// Where to write the project [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// For tool authors: embed the doc comments of a WIT package into a
    /// plain component (its `package-docs` section), so its functions'
    /// docs become the tools' descriptions and its field docs the schema
    /// descriptions.
    EmbedDocs {
        /// The component.
        component: PathBuf,
        /// The folder with the WIT package the component was built from.
        #[arg(long, value_name = "DIR")]
        wit: PathBuf,
        /// Where to write the result [default: over the component].
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
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

/// `toolcage agent`'s model and limits.
#[derive(Debug, Args)]
struct AgentArgs {
    /// The model's name, as the API knows it.
    #[arg(long, env = "TOOLCAGE_AGENT_MODEL")]
    model: String,
    /// The API's base URL (`https`, or `http` to this machine), up to
    /// `/chat/completions`.
    #[arg(
        long,
        value_name = "URL",
        env = "TOOLCAGE_AGENT_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    base_url: String,
    /// The environment variable holding the API key (never a flag: argv is
    /// visible to every user of the machine); unset: no key is sent.
    #[arg(long, value_name = "NAME", default_value = "OPENAI_API_KEY")]
    api_key_env: String,
    /// A file holding the API key, instead of the environment variable.
    #[arg(long, value_name = "FILE", conflicts_with = "api_key_env")]
    api_key_file: Option<PathBuf>,
    /// A system prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// A file holding the system prompt.
    #[arg(long, value_name = "FILE", conflicts_with = "system")]
    system_file: Option<PathBuf>,
    /// Model turns at most, per prompt.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_steps: u32,
    /// Seconds of wall clock at most, per prompt.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    max_seconds: u64,
    /// Tokens at most, per prompt, as the API's `usage` counts them
    /// [default: no budget].
    #[arg(long)]
    max_tokens: Option<u64>,
    /// Confirm destructive calls up front; without it, each is asked on the
    /// terminal, and refused when there is none.
    #[arg(long)]
    yes: bool,
}

/// Which signatures to trust when installing.
#[derive(Debug, Args)]
struct Trust {
    /// A public key (PEM) whose signatures are accepted, instead of
    /// `[install] keys` (repeatable).
    #[arg(long = "key", value_name = "FILE")]
    keys: Vec<PathBuf>,
    /// Refuse an artifact no accepted key signed.
    #[arg(long)]
    require_signature: bool,
}

impl Trust {
    fn flags(&self) -> toolcage::source::commands::Flags {
        toolcage::source::commands::Flags {
            keys: self.keys.iter().map(|k| expand_tilde(k)).collect(),
            require_signature: self.require_signature,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A person who types `toolcage serve` in a terminal sees why nothing
    // happens, and not the log an MCP client's operator would read.
    let on_terminal = matches!(cli.command, Command::Serve { http: None, .. })
        && std::io::IsTerminal::is_terminal(&std::io::stdin());
    // Every command but `serve` prints what it has to say itself; its log
    // shows warnings and errors only unless asked.
    init_tracing(
        on_terminal || !matches!(cli.command, Command::Serve { .. }),
        cli.log_format,
    );
    if on_terminal {
        eprintln!("{TERMINAL_HINT}");
    }
    let runtime = match runtime(&mut tokio::runtime::Builder::new_multi_thread()) {
        Ok(runtime) => runtime,
        Err(error) => return cannot_start(&error),
    };
    // `serve` over stdio reads its options first: `stdio.one_thread`
    // decides which runtime it runs on.
    let ran = match &cli.command {
        Command::Serve { common, http: None } => {
            match runtime.block_on(async { options(common) }) {
                Ok(options) if options.config.stdio.one_thread() => {
                    drop(runtime);
                    run_on_one_thread(cli, options)
                }
                prepared => runtime.block_on(run(cli, Some(prepared))),
            }
        }
        _ => runtime.block_on(run(cli, None)),
    };
    match ran {
        Ok(code) => code,
        // The reader went away (`toolcage journal | head`): as for `cat`
        // and ripgrep, that is not a failure of ours.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolcage: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// A runtime from `builder` with what every thread of ours needs.
fn runtime(builder: &mut tokio::runtime::Builder) -> std::io::Result<tokio::runtime::Runtime> {
    builder
        .enable_all()
        // Validating against a tool's schema recurses once per level of the
        // instance and of the schema's in-place applicators, both bounded
        // (`schema::MAX_INPLACE_DEPTH`, serde_json's nesting limit); the
        // deepest such validation measured needs under 4 MiB. Untouched
        // stack pages cost nothing.
        .thread_stack_size(toolcage::schema::THREAD_STACK_BYTES)
        .build()
}

fn cannot_start(error: &std::io::Error) -> ExitCode {
    eprintln!("toolcage: cannot start the async runtime: {error}");
    ExitCode::from(2)
}

/// `serve` over stdio with `stdio.one_thread` (set, or by default on one
/// CPU): one thread reads, runs and
/// answers requests (a current-thread runtime, so handing a request from
/// the reader to rmcp to the handler and back wakes no other core), and
/// calls that overlap go to a pool of workers (`toolcage::dispatch::Lanes`).
/// The thread is ours, not `main`'s, so it has the stack schema validation
/// needs whatever the process's stack limit.
fn run_on_one_thread(cli: Cli, mut options: Options) -> anyhow::Result<ExitCode> {
    let workers = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let spill = runtime(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("toolcage-call"),
    )
    .context("cannot start the async runtime")?;
    options.spill = Some(spill.handle().clone());
    let front = std::thread::Builder::new()
        .name("toolcage-serve".into())
        .stack_size(toolcage::schema::THREAD_STACK_BYTES)
        .spawn(move || {
            let front = runtime(&mut tokio::runtime::Builder::new_current_thread())
                .context("cannot start the async runtime")?;
            front.block_on(run(cli, Some(Ok(options))))
        })
        .context("cannot start the server thread")?;
    let ran = front
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    // A call abandoned at shutdown may still be running there; the journal
    // is written out by now.
    spill.shutdown_background();
    ran
}

/// Whether `error` comes from writing to a pipe nobody reads.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// What `toolcage serve` says when its stdin is a terminal.
const TERMINAL_HINT: &str = "toolcage serve speaks MCP on stdin/stdout and waits for an MCP \
    client there: give a client `toolcage serve` as its stdio server command, or try it with \
    the MCP Inspector (`npx @modelcontextprotocol/inspector toolcage serve`); \
    `toolcage list` shows the tools and `toolcage call TOOL '{...}'` runs one. Ctrl-D ends it.";

/// Logs go to stderr, never stdout: over stdio, stdout is the protocol.
/// `quiet` (every command but `serve`, and `serve` on a terminal):
/// warnings and errors only, unless `TOOLCAGE_LOG` says otherwise.
fn init_tracing(quiet: bool, format: LogFormat) {
    let wanted = std::env::var("TOOLCAGE_LOG")
        .unwrap_or_else(|_| if quiet { "warn".into() } else { String::new() });
    let filter = tracing_subscriber::EnvFilter::try_new(log_filter(&wanted))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter("")));
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => subscriber.init(),
        // Stable names: `timestamp`, `level`, `target`, `fields` (with
        // `message`); no spans (toolcage's lines carry their context as
        // fields).
        LogFormat::Json => subscriber
            .json()
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}

/// The log filter for `TOOLCAGE_LOG`: a bare level (`debug`) applies to
/// toolcage's own targets only; every other crate logs at `warn` unless the
/// operator names it (`rmcp=debug`). Third-party crates' debug output
/// carries what tools send and receive (wasmtime-wasi logs the bytes a
/// guest writes, rmcp every message) unscrubbed, so asking toolcage for
/// debug must not turn it on.
fn log_filter(wanted: &str) -> String {
    let mut own = "info".to_owned();
    let mut named = Vec::new();
    for directive in wanted.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = ["off", "error", "warn", "info", "debug", "trace"]
            .iter()
            .any(|level| directive.eq_ignore_ascii_case(level));
        if bare {
            own = directive.to_ascii_lowercase();
        } else {
            named.push(directive);
        }
    }
    // Everyone else at warn, or quieter if the operator asked for quieter.
    let others = match own.as_str() {
        "off" | "error" => own.as_str(),
        _ => "warn",
    };
    let mut filter = format!("{others},toolcage={own}");
    for directive in named {
        filter.push(',');
        filter.push_str(directive);
    }
    filter
}

/// Run `cli`'s command; `serve` over stdio comes with its options already
/// read (`main`).
async fn run(cli: Cli, prepared: Option<anyhow::Result<Options>>) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { common, http } => {
            let options = match prepared {
                Some(options) => options?,
                None => options(&common)?,
            };
            toolcage::source::commands::sync_sources(&options).await;
            let host = Arc::new(Host::load(options).await?);
            match http {
                Some(addr) => host.serve(toolcage::Transport::Http(addr)).await?,
                None => host.serve(toolcage::Transport::Stdio).await?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::List {
            common,
            json,
            format,
        } => {
            let options = options(&common)?;
            if !options.tools_dir.is_dir() {
                bail!(
                    "the tools folder `{}` does not exist; create it or pass --tools DIR",
                    options.tools_dir.display()
                );
            }
            let host = Host::load(options).await?;
            let api = match format {
                ListFormat::Openai => Some(toolcage::agent::formats::Format::OpenAi),
                ListFormat::Anthropic => Some(toolcage::agent::formats::Format::Anthropic),
                ListFormat::Gemini => Some(toolcage::agent::formats::Format::Gemini),
                ListFormat::Text | ListFormat::Json => None,
            };
            if let Some(api) = api {
                print_declarations(&host, api)?;
                return Ok(ExitCode::SUCCESS);
            }
            // Every file is shown either way; a file that failed makes the
            // exit status 1, so a script or CI notices.
            Ok(if list(&host, json || format == ListFormat::Json)? {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Agent {
            common,
            agent: args,
            prompt,
        } => agent(&common, &args, prompt).await,
        Command::New { name, lang, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let files = toolcage::scaffold::create(&dir, &name, lang)?;
            println!("wrote {} ({} files):", dir.display(), files.len());
            for file in &files {
                println!("  {}", file.display());
            }
            println!(
                "next: {}/build.sh, then copy {name}.wasm into the tools folder",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::EmbedDocs {
            component,
            wit,
            out,
        } => {
            let bytes = std::fs::read(&component)
                .with_context(|| format!("cannot read `{}`", component.display()))?;
            let with_docs = toolcage::sandbox::embed_docs(&bytes, &wit)
                .map_err(|error| anyhow::anyhow!("`{}` {error}", component.display()))?;
            let out = out.unwrap_or(component);
            std::fs::write(&out, with_docs)
                .with_context(|| format!("cannot write `{}`", out.display()))?;
            eprintln!(
                "embedded the docs of `{}` into `{}`",
                wit.display(),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Add {
            common,
            source,
            name,
            digest,
            trust,
        } => {
            use toolcage::source::commands::add;
            add(
                &mut std::io::stdout(),
                &options(&common)?,
                &trust.flags(),
                &source,
                name.as_deref(),
                digest.as_deref(),
            )
            .await
            .map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Update {
            common,
            name,
            yes,
            trust,
        } => {
            use toolcage::source::commands::update;
            let all_ok = update(
                &mut std::io::stdout(),
                &options(&common)?,
                &trust.flags(),
                name.as_deref(),
                yes,
            )
            .await
            .map_err(anyhow::Error::msg)?;
            Ok(if all_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Remove { common, name } => {
            toolcage::source::commands::remove(&mut std::io::stdout(), &options(&common)?, &name)
                .map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Publish {
            common,
            file,
            reference,
            sign,
        } => {
            let sign = sign.map(|k| expand_tilde(&k));
            toolcage::source::commands::publish(
                &mut std::io::stdout(),
                &options(&common)?,
                &file,
                &reference,
                sign.as_deref(),
            )
            .await
            .map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Pin { common } => {
            // Pins describe the folder as it is, whatever the config pins now.
            let mut options = options(&common)?;
            for policy in options.config.tools.values_mut() {
                policy.pin = None;
            }
            let host = Host::load(options).await?;
            let catalog = host.registry.snapshot();
            let mut stdout = std::io::stdout().lock();
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
        Command::Journal {
            common,
            tool,
            since,
            outcome,
            file,
            json,
        } => {
            let path = match file {
                Some(file) => file,
                None => {
                    let options = options(&common)?;
                    match options.config.journal {
                        Some(journal) if journal.to.is_some() => bail!(
                            "the journal goes to {} (`journal.to`), not to a file; read it where \
                             that stream is collected, or pass --file FILE",
                            if journal.to == Some(toolcage::config::JournalStream::Stdout) {
                                "stdout"
                            } else {
                                "stderr"
                            }
                        ),
                        Some(journal) => journal.path,
                        None => bail!(
                            "the config has no `[journal]` section (or pass --file FILE); \
                             add `[journal]\\npath = \"~/.local/state/toolcage/journal.jsonl\"`"
                        ),
                    }
                }
            };
            let since_ms = match since {
                None => None,
                Some(age) => {
                    let age = parse_age(&age)
                        .with_context(|| format!("--since {age}: use 90s, 15m, 1h or 2d"))?;
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)?
                        .as_millis();
                    Some(u64::try_from(now.saturating_sub(age.as_millis())).unwrap_or(0))
                }
            };
            journal(&path, tool.as_deref(), since_ms, outcome.as_deref(), json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call {
            common,
            tool,
            arguments,
            yes,
        } => {
            let arguments: Value = serde_json::from_str(&arguments)
                .with_context(|| format!("the arguments `{arguments}` are not JSON"))?;
            let Value::Object(arguments) = arguments else {
                bail!("the arguments must be a JSON object, like '{{\"timezone\": \"UTC\"}}'");
            };
            let host = Host::load(options(&common)?).await?;
            let events: toolcage::call::EventSink = Arc::new(|event| match event {
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
                GuestEvent::BeginTask => {}
            });
            let cancel = CancellationToken::new();
            let services: Arc<dyn ClientServices> = Arc::new(Terminal::new(yes));
            let context = CallContext {
                events: Some(events),
                cancel: &cancel,
                client_roots: None,
                services: Some(services),
                client: &|| ClientId {
                    transport: "cli",
                    ..ClientId::default()
                },
                caller: None,
                lane: toolcage::dispatch::Lane::Pooled,
                declared: None,
                task: None,
            };
            let output = host.dispatcher.call(&tool, Some(arguments), context).await;
            // The call's journal line is written before anything else happens.
            host.dispatcher.shutdown().await;
            let output = match output {
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
        // Absolute, so paths in it resolve against its folder whatever the
        // working directory is later.
        Some(path) => Some(std::path::absolute(expand_tilde(path))?),
        None => dirs_config()
            .map(|dir| dir.join("toolcage/config.toml"))
            .filter(|path| path.is_file()),
    };
    let mut config = match &config_path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if config.install.lock_file.is_none() {
        // No config file: the lock goes where the default config would.
        config.install.lock_file =
            dirs_config().map(|dir| dir.join("toolcage").join(toolcage::config::LOCK_FILE_NAME));
    }
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let mut cli_grants = Vec::new();
    for flag in &common.root {
        let grant =
            Root::parse_flag(flag, &cwd).map_err(|e| anyhow::anyhow!("--root {flag}: {e}"))?;
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
        spill: None,
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

/// Print the folder's report; whether every file loaded.
fn list(host: &Host, as_json: bool) -> anyhow::Result<bool> {
    let catalog = host.registry.snapshot();
    let all_loaded = catalog
        .files
        .iter()
        .all(|file| matches!(file.status, FileStatus::Loaded(_)));
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

/// The most a prompt read from stdin may be, in bytes.
const MAX_PROMPT_BYTES: u64 = 1024 * 1024;

/// `toolcage agent`: one prompt (an argument, or stdin when it is not a
/// terminal), or a conversation on the terminal. Exits 0 when the model
/// answered, 1 when a limit or the model ended the run.
async fn agent(
    common: &Common,
    args: &AgentArgs,
    prompt: Option<String>,
) -> anyhow::Result<ExitCode> {
    use std::io::{IsTerminal as _, Read as _};
    use toolcage::agent::run::{Agent, Settings};
    let api_key = match &args.api_key_file {
        Some(path) => {
            let path = expand_tilde(path);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the API key file `{}`", path.display()))?;
            let key = text.trim().to_owned();
            if key.is_empty() {
                bail!("the API key file `{}` is empty", path.display());
            }
            Some(key)
        }
        None => std::env::var(&args.api_key_env)
            .ok()
            .map(|key| key.trim().to_owned())
            .filter(|key| !key.is_empty()),
    };
    if api_key
        .as_deref()
        .is_some_and(|key| key.chars().any(|c| c.is_control()))
    {
        bail!("the API key holds a control character");
    }
    toolcage::outbound::check_url(&args.base_url)
        .map_err(|why| anyhow::anyhow!("--base-url `{}` {why}", args.base_url))?;
    let system =
        match &args.system_file {
            Some(path) => {
                let path = expand_tilde(path);
                Some(std::fs::read_to_string(&path).with_context(|| {
                    format!("cannot read the system prompt `{}`", path.display())
                })?)
            }
            None => args.system.clone(),
        };
    let interactive = prompt.is_none() && std::io::stdin().is_terminal();
    let prompt = match prompt {
        Some(prompt) => Some(prompt),
        None if interactive => None,
        None => {
            let mut text = String::new();
            std::io::stdin()
                .take(MAX_PROMPT_BYTES + 1)
                .read_to_string(&mut text)
                .context("cannot read the prompt from stdin")?;
            if text.len() as u64 > MAX_PROMPT_BYTES {
                bail!("the prompt on stdin is over {MAX_PROMPT_BYTES} bytes");
            }
            if text.trim().is_empty() {
                bail!("no prompt: pass one, or pipe it to stdin");
            }
            Some(text)
        }
    };
    let host = Host::load(options(common)?).await?;
    let max_duration = std::time::Duration::from_secs(args.max_seconds);
    let settings = Settings {
        base_url: args.base_url.clone(),
        model: args.model.clone(),
        api_key,
        system,
        max_steps: args.max_steps,
        max_duration,
        max_tokens: args.max_tokens,
        request_timeout: std::time::Duration::from_secs(120),
    };
    let services: Arc<dyn ClientServices> = Arc::new(Terminal::new(args.yes));
    let mut agent = Agent::new(Arc::clone(&host.dispatcher), settings, services);
    let mut answered = true;
    match prompt {
        Some(prompt) => answered = agent_turn(&mut agent, &prompt).await,
        None => loop {
            let line = tokio::task::spawn_blocking(|| {
                eprint!("> ");
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map(|read| (read, line))
            })
            .await??;
            match line {
                (0, _) => break,
                (_, line) if matches!(line.trim(), "exit" | "quit") => break,
                (_, line) if line.trim().is_empty() => {}
                (_, line) => answered = agent_turn(&mut agent, line.trim()).await,
            }
        },
    }
    // Every call's journal line, and the run's, are written before exiting.
    host.dispatcher.shutdown().await;
    Ok(if answered {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One prompt of `toolcage agent`: whether the model answered.
async fn agent_turn(agent: &mut toolcage::agent::run::Agent, prompt: &str) -> bool {
    let report = agent
        .ask(prompt, &mut std::io::stdout(), &mut std::io::stderr())
        .await;
    println!();
    if let Some(message) = report.ending.message() {
        eprintln!("toolcage: {message}");
    }
    report.ending == toolcage::agent::run::Ending::Answered
}

/// `toolcage call`'s and `toolcage agent`'s client services: the terminal
/// can confirm a call (or `--yes` does), but cannot answer a tool's own
/// questions.
struct Terminal {
    yes: bool,
    /// One question on the terminal at a time (an agent's calls run
    /// together).
    asking: Arc<tokio::sync::Mutex<()>>,
}

impl Terminal {
    fn new(yes: bool) -> Terminal {
        Terminal {
            yes,
            asking: Arc::new(tokio::sync::Mutex::new(())),
        }
    }
}

impl ClientServices for Terminal {
    fn ask(&self, questions: Vec<PendingInput>) -> ServiceFuture<Vec<Result<Answer, String>>> {
        let answers = questions
            .iter()
            .map(|question| {
                Err(match question.ask.kind() {
                    Ask::Sample => "`toolcage call` has no model to sample; use an MCP client",
                    Ask::Elicit | Ask::Roots => {
                        "`toolcage call` cannot answer a tool's questions; use an MCP client"
                    }
                }
                .to_owned())
            })
            .collect();
        Box::pin(async move { Ok(answers) })
    }

    fn confirm(
        &self,
        _key: String,
        message: String,
        _schema: Value,
    ) -> ServiceFuture<ElicitAnswer> {
        let yes = self.yes;
        let asking = Arc::clone(&self.asking);
        Box::pin(async move {
            use std::io::IsTerminal as _;
            if yes {
                return Ok(ElicitAnswer::Accept(json!({"confirm": true})));
            }
            if !std::io::stdin().is_terminal() {
                return Err(ServiceError::Refused(
                    "there is no terminal to ask on; pass --yes to confirm it".into(),
                ));
            }
            let _turn = asking.lock().await;
            // What the tool's arguments put in the message cannot move the
            // cursor, reorder or rewrite the question.
            let message = toolcage::agent::run::for_terminal(&message);
            let answer = tokio::task::spawn_blocking(move || {
                eprint!("{message}\nRun it? [y/N] ");
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await;
            match answer {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes") => {
                    Ok(ElicitAnswer::Accept(json!({"confirm": true})))
                }
                _ => Ok(ElicitAnswer::Decline),
            }
        })
    }
}

/// `90s`, `15m`, `1h`, `2d`.
fn parse_age(text: &str) -> Option<std::time::Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let seconds = match unit {
        "s" => number,
        "m" => number.checked_mul(60)?,
        "h" => number.checked_mul(3600)?,
        "d" => number.checked_mul(86_400)?,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(seconds))
}

/// Print the journal at `path` (rotated files first), filtered.
fn journal(
    path: &Path,
    tool: Option<&str>,
    since_ms: Option<u64>,
    outcome: Option<&str>,
    as_json: bool,
) -> anyhow::Result<()> {
    use std::io::BufRead as _;
    let files = toolcage::journal::files(path);
    if files.is_empty() {
        bail!("no journal at `{}` yet", path.display());
    }
    let mut stdout = std::io::stdout().lock();
    for file in files {
        let reader = std::io::BufReader::new(
            std::fs::File::open(&file)
                .with_context(|| format!("cannot open `{}`", file.display()))?,
        );
        for line in reader.lines() {
            let line = line.with_context(|| format!("cannot read `{}`", file.display()))?;
            let Ok(entry) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if tool.is_some_and(|t| entry["tool"] != t)
                || outcome.is_some_and(|o| entry["outcome"] != o)
                || since_ms.is_some_and(|s| entry["unix_ms"].as_u64().unwrap_or(0) < s)
            {
                continue;
            }
            if as_json {
                writeln!(stdout, "{line}")?;
                continue;
            }
            let text = |key: &str| entry[key].as_str().unwrap_or("").to_owned();
            let message = entry["message"]
                .as_str()
                .map(|m| format!("  — {m}"))
                .unwrap_or_default();
            match entry["event"].as_str() {
                Some("agent") => {
                    writeln!(
                        stdout,
                        "{}  agent run {}  model {}  {} turns, {} calls, {} tokens  {}{message}",
                        text("time"),
                        text("run"),
                        text("model"),
                        entry["steps"],
                        entry["calls"],
                        entry["tokens"],
                        text("ending"),
                    )?;
                    continue;
                }
                Some(_) => {
                    writeln!(
                        stdout,
                        "{}  {:<20} task {} {}{message}",
                        text("time"),
                        text("tool"),
                        text("task"),
                        text("status"),
                    )?;
                    continue;
                }
                None => {}
            }
            let client = &entry["client"];
            let who = [
                client["transport"].as_str(),
                client["name"].as_str(),
                client["session"].as_str(),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
            let arguments = entry
                .get("arguments")
                .map(Value::to_string)
                .or_else(|| {
                    entry
                        .get("arguments_sha256")
                        .map(|d| format!("sha256:{}", d.as_str().unwrap_or("")))
                })
                .unwrap_or_default();
            let cut = arguments.chars().nth(80).is_some();
            let mut arguments: String = arguments.chars().take(80).collect();
            if cut {
                arguments.push('…');
            }
            writeln!(
                stdout,
                "{}  {:<20} {:<14} {:>9.1} ms  fuel {:>12}  mem {:>6.1} MiB  [{who}]  {arguments}{}",
                text("time"),
                text("tool"),
                text("outcome"),
                entry["duration_ms"].as_f64().unwrap_or(0.0),
                entry["fuel"].as_u64().unwrap_or(0),
                entry["peak_memory_bytes"].as_u64().unwrap_or(0) as f64 / 1048576.0,
                message,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_level_is_toolcages_and_named_targets_are_kept() {
        assert_eq!(log_filter(""), "warn,toolcage=info");
        assert_eq!(log_filter("debug"), "warn,toolcage=debug");
        assert_eq!(log_filter("TRACE"), "warn,toolcage=trace");
        assert_eq!(log_filter("error"), "error,toolcage=error");
        assert_eq!(
            log_filter("info,toolcage=debug,rmcp=warn"),
            "warn,toolcage=info,toolcage=debug,rmcp=warn"
        );
        assert_eq!(
            log_filter("debug,rmcp=debug"),
            "warn,toolcage=debug,rmcp=debug"
        );
    }
}
