//! The command line: every command, its flags and their help.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use toolcage::config::expand_tilde;

/// An MCP server that runs every tool as a sandboxed WebAssembly component.
///
/// Drop `.wasm` tool components into the tools folder; toolcage lists their
/// tools to MCP clients and runs each call in a fresh sandbox with only the
/// access and the CPU, memory and time the operator grants.
#[derive(Debug, Parser)]
#[command(name = "toolcage", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
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
    pub(crate) log_format: LogFormat,
}

/// What `toolcage list` prints (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ListFormat {
    Text,
    Json,
    Openai,
    Anthropic,
    Gemini,
}

/// The log's format (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// Replace a tool whose installed version was signed (the lock's
        /// `signed_by`) even by a version that key did not sign: unsigned,
        /// signed by another key, or not checked. Without it such an
        /// update is refused and nothing is replaced.
        #[arg(long)]
        allow_signature_change: bool,
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
pub(crate) struct Common {
    /// The tools folder [default: the config's `tools_dir`, else
    /// ~/.local/share/toolcage/tools]
    #[arg(long, value_name = "DIR", env = "TOOLCAGE_TOOLS")]
    pub(crate) tools: Option<PathBuf>,
    /// The config file [default: ~/.config/toolcage/config.toml, if it
    /// exists]
    #[arg(long, value_name = "FILE", env = "TOOLCAGE_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// Where compiled components are cached [default: the config's
    /// `cache_dir`, else ~/.cache/toolcage]
    #[arg(long, value_name = "DIR", env = "TOOLCAGE_CACHE_DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Do not read or write the compile cache.
    #[arg(long)]
    pub(crate) no_cache: bool,
    /// Grant every tool this directory, read-only unless `:rw` is given
    /// (repeatable): `--root ~/project:rw --root /data`.
    #[arg(long, value_name = "PATH[:ro|:rw]")]
    pub(crate) root: Vec<String>,
    /// Turn fuel metering off for every tool (calls stay bounded by their
    /// deadline and memory cap); for measuring what metering costs.
    #[arg(long)]
    pub(crate) no_fuel: bool,
}

/// `toolcage agent`'s model and limits.
#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// The model's name, as the API knows it.
    #[arg(long, env = "TOOLCAGE_AGENT_MODEL")]
    pub(crate) model: String,
    /// The API's base URL (`https`, or `http` to this machine), up to
    /// `/chat/completions`.
    #[arg(
        long,
        value_name = "URL",
        env = "TOOLCAGE_AGENT_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub(crate) base_url: String,
    /// The environment variable holding the API key (never a flag: argv is
    /// visible to every user of the machine); unset: no key is sent.
    #[arg(long, value_name = "NAME", default_value = "OPENAI_API_KEY")]
    pub(crate) api_key_env: String,
    /// A file holding the API key, instead of the environment variable.
    #[arg(long, value_name = "FILE", conflicts_with = "api_key_env")]
    pub(crate) api_key_file: Option<PathBuf>,
    /// A system prompt.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,
    /// A file holding the system prompt.
    #[arg(long, value_name = "FILE", conflicts_with = "system")]
    pub(crate) system_file: Option<PathBuf>,
    /// Model turns at most, per prompt.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) max_steps: u32,
    /// Seconds of wall clock at most, per prompt.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) max_seconds: u64,
    /// Tokens at most, per prompt, as the API's `usage` counts them
    /// [default: no budget].
    #[arg(long)]
    pub(crate) max_tokens: Option<u64>,
    /// Confirm destructive calls up front; without it, each is asked on the
    /// terminal, and refused when there is none.
    #[arg(long)]
    pub(crate) yes: bool,
}

/// Which signatures to trust when installing.
#[derive(Debug, Args)]
pub(crate) struct Trust {
    /// A public key (PEM) whose signatures are accepted, instead of
    /// `[install] keys` (repeatable).
    #[arg(long = "key", value_name = "FILE")]
    pub(crate) keys: Vec<PathBuf>,
    /// Refuse an artifact no accepted key signed.
    #[arg(long)]
    pub(crate) require_signature: bool,
}

impl Trust {
    pub(crate) fn flags(&self) -> toolcage::source::commands::Flags {
        toolcage::source::commands::Flags {
            keys: self.keys.iter().map(|k| expand_tilde(k)).collect(),
            require_signature: self.require_signature,
        }
    }
}
