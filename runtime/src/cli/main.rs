//! The `toolcage` command: `serve`, `list`, `call`, `agent`, `add`,
//! `update`, `remove`, `publish`, `pin`, `journal`, `new` and
//! `embed-docs`. `args` is the command line; `run` dispatches each command
//! to its module (or, for the short ones, does it in place); the work
//! itself is the library's (installing is `toolcage::source::commands`).
//!
//! Whatever a command prints that others wrote (a tool's description or
//! log, a client's name in the journal, an error quoting either) goes
//! through `toolcage::terminal`'s guard: a terminal shows escape sequences
//! and bidirectional overrides from there instead of obeying them.

mod agent;
mod args;
mod call;
mod journal;
mod list;
mod options;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser as _;
use toolcage::config::expand_tilde;
use toolcage::terminal::{self, Form};
use toolcage::{Host, Options};

use crate::args::{Cli, Command, LogFormat};
use crate::options::options;

toolcage::use_allocator!();

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
    if let Err(problem) = toolcage::alloc::check() {
        tracing::warn!("{problem}");
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
            // It may quote a tool, a registry or a client.
            eprintln!("toolcage: {}", terminal::escaped(&format!("{error:#}")));
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

/// Logs go to stderr, never stdout: over stdio, stdout is the protocol;
/// through `terminal::Guard`, like everything else the CLI prints.
/// `quiet` (every command but `serve`, and `serve` on a terminal):
/// warnings and errors only, unless `TOOLCAGE_LOG` says otherwise.
fn init_tracing(quiet: bool, format: LogFormat) {
    let wanted = std::env::var("TOOLCAGE_LOG")
        .unwrap_or_else(|_| if quiet { "warn".into() } else { String::new() });
    let filter = tracing_subscriber::EnvFilter::try_new(log_filter(&wanted))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_filter("")));
    // A log line can quote a file name anyone who can write to the tools
    // folder chose, or a registry's text: shown escaped, never obeyed.
    let form = match format {
        LogFormat::Text => Form::Text,
        LogFormat::Json => Form::Json,
    };
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || terminal::stderr(form))
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
        } => list::run(&common, json, format).await,
        Command::Agent {
            common,
            agent: args,
            prompt,
        } => agent::agent(&common, &args, prompt).await,
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
                &mut terminal::stdout(Form::Text),
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
            allow_signature_change,
            trust,
        } => {
            use toolcage::source::commands::{UpdateFlags, update};
            let all_ok = update(
                &mut terminal::stdout(Form::Text),
                &options(&common)?,
                &trust.flags(),
                name.as_deref(),
                UpdateFlags {
                    yes,
                    allow_signature_change,
                },
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
            toolcage::source::commands::remove(
                &mut terminal::stdout(Form::Text),
                &options(&common)?,
                &name,
            )
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
                &mut terminal::stdout(Form::Text),
                &options(&common)?,
                &file,
                &reference,
                sign.as_deref(),
            )
            .await
            .map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Pin { common } => list::pin(&common).await,
        Command::Journal {
            common,
            tool,
            since,
            outcome,
            file,
            json,
        } => journal::run(&common, tool, since, outcome, file, json),
        Command::Call {
            common,
            tool,
            arguments,
            yes,
        } => call::run(&common, &tool, &arguments, yes).await,
    }
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
