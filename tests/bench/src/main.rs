//! `toolcage-bench`: measures real MCP server processes over stdio and
//! Streamable HTTP.
//!
//! It spawns the server command given after `--` and speaks MCP to it with
//! a client of its own. Over stdio: raw newline-delimited JSON-RPC
//! (`initialize` with protocol version `2025-11-25`,
//! `notifications/initialized`, then requests). Over HTTP (`--http`, for
//! `latency` and `throughput`): protocol `2026-07-28`, stateless, one
//! `POST /mcp` per request over keep-alive HTTP/1.1 connections (hyper's
//! client connection API, `TCP_NODELAY`); the server command must contain
//! `{port}` where the port goes, and the benchmark picks a free loopback
//! port; `--http --rest` calls toolcage's REST face (`POST /tool`) over the
//! same connections instead, to show what the MCP layer costs. The client
//! is deliberately minimal and runs on one thread (each request is
//! pre-encoded but for its id, one JSON parse per reply) so that it is not
//! the bottleneck, and it needs no Python.
//!
//! Benchmarks, each over several runs with a fresh server per run:
//!
//! - `latency`: sequential `tools/call`s (send, wait for the reply, send the
//!   next) after a warm-up; per run p50/p90/p99/max in microseconds and
//!   calls/s, then the median across runs of each.
//! - `throughput`: `tools/call`s pipelined over one connection with K
//!   requests in flight; calls/s per run and the median, plus the server's
//!   peak resident memory (`VmHWM`, which counts from process start, so it
//!   includes loading the tools).
//! - `startup`: time from spawn to the `tools/list` reply, handshake
//!   included; min/median/max in milliseconds. With `--idle-rss`, the
//!   server's resident memory 500 ms after that.
//! - `reload`: hot-reload latency. The server serves `--tools-dir DIR`
//!   (the server command must name the same folder; the benchmark creates
//!   it if missing). Before the server starts, component B is put in
//!   `DIR/bench.wasm`; then, per change, component A or B (alternately, so
//!   every change is a real content change) is written to
//!   `DIR/bench.wasm.part` and renamed to `DIR/bench.wasm`. The time runs
//!   from the moment the rename returns (the file is complete) to the moment
//!   the `notifications/tools/list_changed` line is read; it includes the
//!   server's debounce, rescan and compile-or-cache-load. After each
//!   notification the benchmark waits `--settle-ms` (300) so that changes
//!   never merge, and counts any notification it did not expect (`extra`).
//!   No notification within 30 s is an error. `--warmup` (2) untimed
//!   changes come first, so that with a compile cache both components are
//!   in it before timing starts. Per run p50/p90/max in milliseconds, then
//!   the median across runs of each. `bench.wasm` is removed after each
//!   run.
//!
//! - `side-by-side`: several servers (`--server LABEL=CMD`, repeated)
//!   and operations (`--op TOOL=JSON`) in one run: per round, latency then
//!   pipelined throughput (and with `--startup`, start-up and idle memory)
//!   of every server, the servers' order rotating between rounds; the
//!   medians over rounds and each server's ratio to the first. The
//!   reference filesystem server against toolcage; fuel on against off.
//! - `floor-server`: not a measurement: the smallest MCP stdio server,
//!   answering from one thread with blocking I/O; `latency` and
//!   `throughput` against it give the floor set by the client, the pipes
//!   and the scheduler. With `--http ADDR`, the same over hyper on tokio's
//!   multi-thread runtime: the floor for HTTP.
//! - `copies`: not a measurement: N copies of a component, each with a
//!   custom section appended so that its digest differs, optionally with
//!   its tool names made distinct (`--rename`), for the many-tools
//!   start-up.
//! - `native` (with the `native` cargo feature): in-process, no transport:
//!   fs tool operations through toolcage's dispatcher, through the sandbox
//!   alone, and as the fs tool's own Rust code run natively; see
//!   `native.rs`.
//!
//! `tests/bench/run` builds everything in release mode and runs the whole
//! set (docs/benchmarks.md has its figures); `tests/bench/smoke` is the
//! seconds-long check in `tests/run` that the benchmark works.
//!
//! Every `tools/call` reply must have a `result` with `isError` not true, or
//! the benchmark stops with the reply in the error. The server's stderr is
//! discarded unless `--server-stderr FILE`. `--json` prints one JSON object
//! (the top-level numbers are medians across runs, `runs` has each run)
//! instead of a table.
//!
//! A server argument containing `{fresh_dir}` is replaced, in each run, by a
//! new empty temporary folder removed afterwards: `--cache-dir {fresh_dir}`
//! measures a cold compile cache on every run. (It cannot be the tools
//! folder of `reload`, which must be known to the benchmark: give that one
//! with `--tools-dir`.)
//!
//! # Running
//!
//! ```text
//! cargo build --release -p toolcage -p toolcage-bench
//! cargo build --release --target wasm32-wasip2 -p time-tool
//! mkdir -p /tmp/tc/tools && cp target/wasm32-wasip2/release/time_tool.wasm /tmp/tc/tools/
//! SERVER="target/release/toolcage serve --tools /tmp/tc/tools --cache-dir /tmp/tc/cache"
//!
//! target/release/toolcage-bench latency --tool convert_timezone \
//!     --args '{"time":"2026-07-01T12:00:00Z","timezone":"Asia/Tokyo"}' -- $SERVER
//! target/release/toolcage-bench throughput --tool convert_timezone --in-flight 8 \
//!     --args '{"time":"2026-07-01T12:00:00Z","timezone":"Asia/Tokyo"}' -- $SERVER
//! target/release/toolcage-bench throughput --http --tool get_current_time --in-flight 64 \
//!     -- $SERVER --http '127.0.0.1:{port}'
//! target/release/toolcage-bench startup --idle-rss -- $SERVER     # warm cache
//! target/release/toolcage-bench startup -- target/release/toolcage serve \
//!     --tools /tmp/tc/tools --cache-dir '{fresh_dir}'              # cold cache
//!
//! cargo build --release --target wasm32-wasip2 -p versioned
//! cp target/wasm32-wasip2/release/versioned.wasm /tmp/tc/versioned_v1.wasm
//! cargo build --release --target wasm32-wasip2 -p versioned --features v2
//! cp target/wasm32-wasip2/release/versioned.wasm /tmp/tc/versioned_v2.wasm
//! target/release/toolcage-bench reload --tools-dir /tmp/tc/reload \
//!     --component-a /tmp/tc/versioned_v1.wasm --component-b /tmp/tc/versioned_v2.wasm \
//!     -- target/release/toolcage serve --tools /tmp/tc/reload --cache-dir /tmp/tc/cache
//! ```
//!
//! Build the server in release mode: a debug build measures the debug build.

mod client;
mod compare;
mod copies;
mod floor;
mod http;
#[cfg(feature = "native")]
mod native;
mod stats;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

use crate::client::{
    CallTemplate, Server, ServerCommand, TOOLS_LIST_CHANGED, proc_cpu, proc_status_kib,
};
use crate::http::{HttpRequest, HttpServer};
use crate::stats::Latency;

/// Measure MCP servers over stdio and Streamable HTTP: call latency,
/// throughput, start-up time, hot-reload latency, several servers side by
/// side.
#[derive(Debug, Parser)]
#[command(name = "toolcage-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sequential calls, one at a time: per-call latency percentiles.
    Latency(LatencyArgs),
    /// Pipelined calls with K in flight over one connection: calls/s.
    Throughput(ThroughputArgs),
    /// Time from spawn to the `tools/list` reply.
    Startup(StartupArgs),
    /// Hot reload: time from a component file landing in the tools folder
    /// to the `notifications/tools/list_changed` it causes.
    Reload(ReloadArgs),
    /// The same operations against several servers in one run, alternating:
    /// latency, throughput, peak memory (and start-up), as ratios to the
    /// first server.
    SideBySide(SideBySideArgs),
    /// Write N distinct copies of a component (for the many-tools start-up).
    Copies(CopiesArgs),
    /// Not a benchmark: the smallest MCP server (over stdio: one thread,
    /// blocking I/O; with `--http`: hyper on tokio's multi-thread runtime; a
    /// constant result for every `tools/call` of `echo`), to measure what
    /// the client and the transport cost on their own.
    FloorServer(FloorArgs),
    /// In-process: fs tool operations natively, in the sandbox, and through
    /// the dispatcher (needs the `native` feature).
    #[cfg(feature = "native")]
    Native(NativeArgs),
}

#[derive(Debug, Args)]
struct FloorArgs {
    /// Serve `POST /mcp` on this address instead of stdio (e.g.
    /// `127.0.0.1:{port}`, which the benchmark fills in).
    #[arg(long)]
    http: Option<std::net::SocketAddr>,
}

#[derive(Debug, Args)]
struct SideBySideArgs {
    /// A server: `LABEL=COMMAND ARGS...` (split on whitespace, no quoting).
    /// Repeat; ratios are to the first.
    #[arg(long = "server", value_name = "LABEL=CMD", required = true)]
    servers: Vec<String>,
    /// An operation: `TOOL=JSON` arguments. Repeat.
    #[arg(long = "op", value_name = "TOOL=JSON")]
    ops: Vec<String>,
    /// Server LABEL serves the operations' TOOL under NAME (same
    /// arguments). Repeat.
    #[arg(long = "tool-name", value_name = "LABEL:TOOL=NAME")]
    tool_names: Vec<String>,
    /// Timed sequential calls per latency run.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    calls: u64,
    /// Untimed calls before each latency and throughput run. Enough for a
    /// server on a JIT to reach its steady state: the reference server,
    /// on Node.js, answered a read in 474 µs after 200 calls and 287 µs
    /// after 5,000, and listed a folder in 275 µs after 200 and 124 µs
    /// after 20,000; pipelined, it read 5,270 calls/s in a 3,000-call run
    /// after 200 and 9,663 after 20,000, and listed 16,410 after 5,000,
    /// 19,436 after 20,000 and 19,446 after 50,000.
    #[arg(long, default_value_t = 20_000)]
    warmup: u64,
    /// Calls per throughput run (0: no throughput runs).
    #[arg(long, default_value_t = 10_000)]
    throughput_calls: u64,
    /// Requests in flight in the throughput runs (pipelined over stdio).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    in_flight: u32,
    /// Rounds; each measures every server once per figure.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Also measure start-up (spawn to `tools/list`) and idle memory.
    #[arg(long)]
    startup: bool,
    /// Append the servers' stderr to FILE [default: discard it].
    #[arg(long, value_name = "FILE")]
    server_stderr: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CopiesArgs {
    /// The component to copy.
    #[arg(long, value_name = "FILE")]
    component: PathBuf,
    /// How many copies.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    count: u32,
    /// A tool name in the component to make distinct in each copy (same
    /// length, ending in the copy's index). Repeat for several.
    #[arg(long, value_name = "NAME")]
    rename: Vec<String>,
    /// The folder to write `copy-NN.wasm` into (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

#[cfg(feature = "native")]
#[derive(Debug, Args)]
struct NativeArgs {
    /// The tools folder holding the fs tool component.
    #[arg(long, value_name = "DIR")]
    tools: PathBuf,
    /// The compile cache folder.
    #[arg(long, value_name = "DIR")]
    cache_dir: PathBuf,
    /// The folder granted read-only (the native tool's root).
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// An operation: `TOOL=JSON` arguments (a tool of the fs tool). Repeat.
    #[arg(long = "op", value_name = "TOOL=JSON", required = true)]
    ops: Vec<String>,
    /// Timed calls per way per run.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    calls: u64,
    /// Untimed calls per way before them.
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    /// Runs.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Run only this way (`native`, `sandbox`, `ready` or `dispatcher`);
    /// repeat for more. All four by default. One way alone is for a
    /// profiler (`valgrind --tool=callgrind`), which then counts nothing
    /// but that way's calls.
    #[arg(long = "way", value_name = "WAY")]
    ways: Vec<String>,
}

#[derive(Debug, Args)]
struct LatencyArgs {
    #[command(flatten)]
    call: CallOpts,
    /// Timed calls per run.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    calls: u64,
    /// Untimed calls per run before the timed ones.
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    /// Milliseconds to wait after each timed call's reply before the next
    /// call (at least: tokio's timer counts whole milliseconds). 0, the
    /// default, calls back to back; a gap measures a call that finds the
    /// server idle, as an agent's calls do, with whatever the server
    /// prepares between calls ready. calls/s then counts the gaps.
    #[arg(long, default_value_t = 0)]
    gap_ms: u64,
    /// Runs, each with a fresh server.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    #[command(flatten)]
    transport: TransportOpts,
    #[command(flatten)]
    server: ServerOpts,
}

#[derive(Debug, Args)]
struct ThroughputArgs {
    #[command(flatten)]
    call: CallOpts,
    /// Timed calls per run.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    calls: u64,
    /// Requests outstanding at any time (over HTTP: that many connections,
    /// each with one request outstanding).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    in_flight: u32,
    /// Untimed calls per run (pipelined the same way) before the timed ones.
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    /// Runs, each with a fresh server.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    #[command(flatten)]
    transport: TransportOpts,
    #[command(flatten)]
    server: ServerOpts,
}

#[derive(Debug, Args)]
struct TransportOpts {
    /// Speak Streamable HTTP (protocol 2026-07-28, stateless) instead of
    /// stdio. The server command must contain `{port}` where the port
    /// goes (`--http 127.0.0.1:{port}`); the benchmark picks a free one.
    #[arg(long)]
    http: bool,
    /// With `--http`: call through toolcage's REST face (`POST /tool`; the
    /// server needs `[http.rest] enabled = true`) instead of MCP.
    #[arg(long, requires = "http")]
    rest: bool,
    /// With `--http`: the `Accept` header of MCP requests (default
    /// `application/json, text/event-stream`). toolcage answers a plain
    /// 2026-07-28 `tools/call` without rmcp's per-request service, but
    /// leaves a weighted `Accept` (`application/json,
    /// text/event-stream;q=1`, which means the same) to rmcp: how the
    /// benchmark measures both paths in one server.
    #[arg(long, requires = "http", conflicts_with = "rest")]
    accept: Option<String>,
}

impl TransportOpts {
    /// The HTTP request for a call of `tool` with `arguments`.
    fn http_call(&self, tool: &str, arguments: &Value) -> anyhow::Result<HttpRequest> {
        if self.rest {
            HttpRequest::rest_call(tool, arguments)
        } else {
            Ok(HttpRequest::call(tool, arguments)?.with_accept(self.accept.as_deref()))
        }
    }
}

#[derive(Debug, Args)]
struct StartupArgs {
    /// Runs, each with a fresh server.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Also read the server's resident memory (VmRSS) 500 ms after
    /// `tools/list`.
    #[arg(long)]
    idle_rss: bool,
    #[command(flatten)]
    server: ServerOpts,
}

#[derive(Debug, Args)]
struct ReloadArgs {
    /// The tools folder the server command serves (created if missing).
    /// The benchmark writes `bench.wasm` in it and removes it after each
    /// run; other files in it are left alone (and served).
    #[arg(long, value_name = "DIR")]
    tools_dir: PathBuf,
    /// One component; changes alternate A and B over `bench.wasm`.
    #[arg(long, value_name = "FILE")]
    component_a: PathBuf,
    /// Another component, with different bytes from A (it is in
    /// `bench.wasm` when the server starts).
    #[arg(long, value_name = "FILE")]
    component_b: PathBuf,
    /// Timed changes per run.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    changes: u32,
    /// Untimed changes per run before the timed ones (the same alternation):
    /// with a compile cache, they make sure both components are in it.
    #[arg(long, default_value_t = 2)]
    warmup: u32,
    /// Milliseconds to wait after each notification before the next change,
    /// so that two changes never fall into one debounced reload.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    settle_ms: u64,
    /// Runs, each with a fresh server.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    #[command(flatten)]
    server: ServerOpts,
}

#[derive(Debug, Args)]
struct CallOpts {
    /// The tool to call.
    #[arg(long)]
    tool: String,
    /// The call's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
}

#[derive(Debug, Args)]
struct ServerOpts {
    /// Append the server's stderr to FILE [default: discard it].
    #[arg(long, value_name = "FILE")]
    server_stderr: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// The server's command line, after `--`. An argument containing
    /// `{fresh_dir}` gets a new empty temporary folder in each run
    /// (`--cache-dir {fresh_dir}`: a cold compile cache every run).
    #[arg(last = true, required = true, value_name = "SERVER CMD")]
    server: Vec<String>,
}

impl ServerOpts {
    fn command(&self) -> ServerCommand {
        ServerCommand {
            argv: self.server.clone(),
            stderr: self.server_stderr.clone(),
        }
    }
}

impl CallOpts {
    fn template(&self) -> anyhow::Result<(Value, CallTemplate)> {
        let arguments: Value = serde_json::from_str(&self.args)
            .with_context(|| format!("--args `{}` is not JSON", self.args))?;
        if !arguments.is_object() {
            bail!("--args must be a JSON object, like '{{\"timezone\":\"UTC\"}}'");
        }
        let template = CallTemplate::new(&self.tool, &arguments)?;
        Ok((arguments, template))
    }
}

// Built with `native`, the benchmark runs the sandbox in-process: with the
// server's allocator, so that its figures are the server's.
#[cfg(feature = "native")]
toolcage::use_allocator!();

fn main() -> ExitCode {
    let cli = Cli::parse();
    // These are not async, or bring a runtime of their own.
    let result = match cli.command {
        Command::Copies(args) => copies(&args),
        Command::FloorServer(FloorArgs { http: None }) => floor::serve(),
        Command::FloorServer(FloorArgs { http: Some(addr) }) => floor::serve_http(addr),
        #[cfg(feature = "native")]
        Command::Native(args) => args
            .ops
            .iter()
            .map(|o| compare::Operation::parse(o).map(|op| (op.tool, op.arguments)))
            .collect::<anyhow::Result<Vec<_>>>()
            .and_then(|ops| {
                native::run(native::NativePlan {
                    tools_dir: args.tools,
                    cache_dir: args.cache_dir,
                    root: args.root,
                    ops,
                    calls: args.calls,
                    warmup: args.warmup,
                    runs: args.runs,
                    json: args.json,
                    ways: args.ways,
                })
            }),
        command => return run_async(command),
    };
    finish(result)
}

fn run_async(command: Command) -> ExitCode {
    // One thread: the client's work per message is tiny, and on a small
    // machine every other core is better left to the server under test.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolcage-bench: cannot start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Latency(args) => latency(args).await,
            Command::Throughput(args) => throughput(args).await,
            Command::Startup(args) => startup(args).await,
            Command::Reload(args) => reload(args).await,
            Command::SideBySide(args) => side_by_side(args).await,
            // Handled in `main`.
            Command::Copies(_) | Command::FloorServer(_) => Ok(()),
            #[cfg(feature = "native")]
            Command::Native(_) => Ok(()),
        }
    });
    finish(result)
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolcage-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// An error unless `tools` (a server's `tools/list`) has `tool`.
fn check_serves(tools: &[String], tool: &str) -> anyhow::Result<()> {
    if !tools.iter().any(|t| t == tool) {
        bail!(
            "the server does not serve `{tool}`; it serves: {}",
            if tools.is_empty() {
                "nothing".to_owned()
            } else {
                tools.join(", ")
            }
        );
    }
    Ok(())
}

/// Spawn, handshake, and check that the server serves `tool`.
async fn start_with_tool(command: &ServerCommand, tool: &str) -> anyhow::Result<Server> {
    let mut server = Server::spawn(command)?;
    server.handshake().await?;
    let tools = server.list_tools().await?;
    check_serves(&tools, tool)?;
    Ok(server)
}

// ---------------------------------------------------------------- latency

struct LatencyRun {
    latency: Latency,
    calls_per_s: f64,
}

async fn latency(args: LatencyArgs) -> anyhow::Result<()> {
    let (arguments, call) = args.call.template()?;
    let command = args.server.command();
    let plan = Sequential {
        calls: args.calls,
        warmup: args.warmup,
        gap: Duration::from_millis(args.gap_ms),
    };
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let result = if args.transport.http {
            let call = args.transport.http_call(&args.call.tool, &arguments)?;
            http_latency_run(&command, &args.call.tool, &call, &plan).await
        } else {
            latency_run(&command, &args.call.tool, &call, &plan).await
        };
        let result = result.with_context(|| format!("latency run {run}"))?;
        runs.push(result);
    }
    let median_of = |f: &dyn Fn(&LatencyRun) -> f64| {
        stats::median(&runs.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let p50 = median_of(&|r| us(r.latency.p50_ns));
    let p90 = median_of(&|r| us(r.latency.p90_ns));
    let p99 = median_of(&|r| us(r.latency.p99_ns));
    let max = median_of(&|r| us(r.latency.max_ns));
    let rate = median_of(&|r| r.calls_per_s);

    if args.server.json {
        let runs: Vec<Value> = runs
            .iter()
            .map(|r| {
                json!({
                    "p50_us": us(r.latency.p50_ns),
                    "p90_us": us(r.latency.p90_ns),
                    "p99_us": us(r.latency.p99_ns),
                    "max_us": us(r.latency.max_ns),
                    "calls_per_s": round1(r.calls_per_s),
                })
            })
            .collect();
        return print_json(&json!({
            "benchmark": "latency",
            "transport": transport_name(&args.transport),
            "server": args.server.server,
            "tool": args.call.tool,
            "arguments": arguments,
            "calls": args.calls,
            "warmup": args.warmup,
            "gap_ms": args.gap_ms,
            "p50_us": round1(p50),
            "p90_us": round1(p90),
            "p99_us": round1(p99),
            "max_us": round1(max),
            "calls_per_s": round1(rate),
            "runs": runs,
        }));
    }
    println!(
        "latency over {}: `{}`, {} sequential calls after {} warm-up{}, {} runs\nserver: {}\n",
        transport_name(&args.transport),
        args.call.tool,
        args.calls,
        args.warmup,
        if args.gap_ms == 0 {
            String::new()
        } else {
            format!(", {} ms between calls", args.gap_ms)
        },
        args.runs,
        args.server.server.join(" ")
    );
    println!(
        "{:<8}{:>10}{:>10}{:>10}{:>10}{:>12}",
        "run", "p50 µs", "p90 µs", "p99 µs", "max µs", "calls/s"
    );
    let row = |label: &str, p50: f64, p90: f64, p99: f64, max: f64, rate: f64| {
        println!("{label:<8}{p50:>10.1}{p90:>10.1}{p99:>10.1}{max:>10.1}{rate:>12.0}");
    };
    for (i, r) in runs.iter().enumerate() {
        let l = &r.latency;
        row(
            &(i + 1).to_string(),
            us(l.p50_ns),
            us(l.p90_ns),
            us(l.p99_ns),
            us(l.max_ns),
            r.calls_per_s,
        );
    }
    row("median", p50, p90, p99, max, rate);
    Ok(())
}

/// How a latency run calls: `calls` timed after `warmup` untimed, one at
/// a time, waiting `gap` after each timed reply.
struct Sequential {
    calls: u64,
    warmup: u64,
    gap: Duration,
}

async fn latency_run(
    command: &ServerCommand,
    tool: &str,
    call: &CallTemplate,
    plan: &Sequential,
) -> anyhow::Result<LatencyRun> {
    let &Sequential { calls, warmup, gap } = plan;
    let mut server = start_with_tool(command, tool).await?;
    let mut buf = Vec::with_capacity(512);
    for _ in 0..warmup {
        server
            .timed_call(call, &mut buf)
            .await
            .context("during the warm-up")?;
    }
    let capacity = usize::try_from(calls).context("too many calls")?;
    let mut samples = Vec::with_capacity(capacity);
    let start = Instant::now();
    for _ in 0..calls {
        let elapsed = server.timed_call(call, &mut buf).await?;
        samples.push(nanos(elapsed));
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    let total = start.elapsed();
    server.shutdown().await?;
    let latency = Latency::from_samples(&mut samples).context("no samples")?;
    Ok(LatencyRun {
        latency,
        calls_per_s: calls as f64 / total.as_secs_f64(),
    })
}

// ------------------------------------------------------------- throughput

struct ThroughputRun {
    elapsed: Duration,
    calls_per_s: f64,
    peak_rss_kib: Option<u64>,
    /// CPU used during the timed calls, when `/proc` could be read.
    cpu: Option<CpuUse>,
}

/// CPU time the server and this client (the benchmark process, every
/// thread) used over a run's timed calls: on a machine where both share
/// the CPUs, what each call costs each side, and so what a target
/// throughput leaves to the server.
#[derive(Clone, Copy)]
struct CpuUse {
    server: Duration,
    client: Duration,
}

impl CpuUse {
    /// Readings of both sides, taken together.
    fn read(server_pid: u32) -> Option<(Duration, Duration)> {
        Some((proc_cpu(Some(server_pid))?, proc_cpu(None)?))
    }

    /// The CPU used between `before` and now.
    fn since(before: Option<(Duration, Duration)>, server_pid: u32) -> Option<Self> {
        let (server0, client0) = before?;
        let (server1, client1) = Self::read(server_pid)?;
        Some(CpuUse {
            server: server1.saturating_sub(server0),
            client: client1.saturating_sub(client0),
        })
    }
}

/// Microseconds of CPU per call, from `cpu` over `calls`.
fn us_per_call(cpu: Duration, calls: u64) -> f64 {
    cpu.as_secs_f64() * 1e6 / calls as f64
}

async fn throughput(args: ThroughputArgs) -> anyhow::Result<()> {
    let (arguments, call) = args.call.template()?;
    let command = args.server.command();
    let in_flight = usize::try_from(args.in_flight).context("--in-flight is too large")?;
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let result = if args.transport.http {
            let call = args.transport.http_call(&args.call.tool, &arguments)?;
            http_throughput_run(
                &command,
                &args.call.tool,
                &call,
                args.calls,
                args.warmup,
                in_flight,
            )
            .await
        } else {
            throughput_run(
                &command,
                &args.call.tool,
                &call,
                args.calls,
                args.warmup,
                in_flight,
            )
            .await
        };
        let result = result.with_context(|| format!("throughput run {run}"))?;
        runs.push(result);
    }
    let rates: Vec<f64> = runs.iter().map(|r| r.calls_per_s).collect();
    let rate = stats::median(&rates).unwrap_or(f64::NAN);
    let peaks: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.peak_rss_kib)
        .map(|k| k as f64)
        .collect();
    // Only when every run could read it; a partial median would mislead.
    let peak = if peaks.len() == runs.len() {
        stats::median(&peaks)
    } else {
        None
    };
    // CPU per call, each side's median over the runs (again only when every
    // run could read it).
    let cpus: Vec<CpuUse> = runs.iter().filter_map(|r| r.cpu).collect();
    let cpu_median = |side: fn(&CpuUse) -> Duration| {
        let per_call: Vec<f64> = cpus
            .iter()
            .map(|c| us_per_call(side(c), args.calls))
            .collect();
        (cpus.len() == runs.len())
            .then(|| stats::median(&per_call))
            .flatten()
    };
    let server_cpu = cpu_median(|c| c.server);
    let client_cpu = cpu_median(|c| c.client);
    // One reading is exact to a clock tick; a difference of two, to two.
    let resolution = us_per_call(
        Duration::from_millis(2 * 1000 / client::USER_HZ),
        args.calls,
    );

    if args.server.json {
        let runs: Vec<Value> = runs
            .iter()
            .map(|r| {
                json!({
                    "calls_per_s": round1(r.calls_per_s),
                    "elapsed_ms": round1(r.elapsed.as_secs_f64() * 1e3),
                    "peak_rss_kib": r.peak_rss_kib,
                    "server_cpu_us_per_call": r.cpu.map(|c| round1(us_per_call(c.server, args.calls))),
                    "client_cpu_us_per_call": r.cpu.map(|c| round1(us_per_call(c.client, args.calls))),
                })
            })
            .collect();
        return print_json(&json!({
            "benchmark": "throughput",
            "transport": transport_name(&args.transport),
            "server": args.server.server,
            "tool": args.call.tool,
            "arguments": arguments,
            "calls": args.calls,
            "warmup": args.warmup,
            "in_flight": args.in_flight,
            "calls_per_s": round1(rate),
            "peak_rss_kib": peak.map(|k| k.round() as u64),
            "server_cpu_us_per_call": server_cpu.map(round1),
            "client_cpu_us_per_call": client_cpu.map(round1),
            "cpu_resolution_us_per_call": round1(resolution),
            "runs": runs,
        }));
    }
    println!(
        "throughput over {}: `{}`, {} calls with {} in flight after {} warm-up, {} runs\nserver: {}\n",
        transport_name(&args.transport),
        args.call.tool,
        args.calls,
        args.in_flight,
        args.warmup,
        args.runs,
        args.server.server.join(" ")
    );
    println!(
        "{:<8}{:>12}{:>12}{:>16}{:>18}{:>18}",
        "run", "calls/s", "elapsed ms", "peak RSS MiB", "server CPU µs", "client CPU µs"
    );
    let cpu_cell = |us: Option<f64>| us.map_or_else(|| "-".to_owned(), |us| format!("{us:.1}"));
    for (i, r) in runs.iter().enumerate() {
        println!(
            "{:<8}{:>12.0}{:>12.1}{:>16}{:>18}{:>18}",
            i + 1,
            r.calls_per_s,
            r.elapsed.as_secs_f64() * 1e3,
            mib(r.peak_rss_kib.map(|k| k as f64)),
            cpu_cell(r.cpu.map(|c| us_per_call(c.server, args.calls))),
            cpu_cell(r.cpu.map(|c| us_per_call(c.client, args.calls))),
        );
    }
    println!(
        "{:<8}{:>12.0}{:>12}{:>16}{:>18}{:>18}",
        "median",
        rate,
        "",
        mib(peak),
        cpu_cell(server_cpu),
        cpu_cell(client_cpu)
    );
    println!(
        "\nCPU µs: per timed call, from /proc (user + system, every thread), exact to ±{resolution:.1} µs a call \
         at {} calls; the server is the process started (a wrapper that forks \
         the server instead of exec'ing it hides it), the client is this benchmark",
        args.calls
    );
    Ok(())
}

async fn throughput_run(
    command: &ServerCommand,
    tool: &str,
    call: &CallTemplate,
    calls: u64,
    warmup: u64,
    in_flight: usize,
) -> anyhow::Result<ThroughputRun> {
    let mut server = start_with_tool(command, tool).await?;
    if warmup > 0 {
        server
            .pipelined(call, warmup, in_flight)
            .await
            .context("during the warm-up")?;
    }
    let before = CpuUse::read(server.pid());
    let elapsed = server.pipelined(call, calls, in_flight).await?;
    let cpu = CpuUse::since(before, server.pid());
    // Before closing stdin: once the server exits its /proc entry is gone.
    let peak_rss_kib = proc_status_kib(server.pid(), "VmHWM");
    server.shutdown().await?;
    Ok(ThroughputRun {
        elapsed,
        calls_per_s: calls as f64 / elapsed.as_secs_f64(),
        peak_rss_kib,
        cpu,
    })
}

/// Start an HTTP server and check that it serves `tool`.
async fn start_http_with_tool(command: &ServerCommand, tool: &str) -> anyhow::Result<HttpServer> {
    let server = HttpServer::spawn(command).await?;
    let tools = server.connect().await?.list_tools().await?;
    check_serves(&tools, tool)?;
    Ok(server)
}

/// Sequential calls over one keep-alive connection.
async fn http_latency_run(
    command: &ServerCommand,
    tool: &str,
    call: &HttpRequest,
    plan: &Sequential,
) -> anyhow::Result<LatencyRun> {
    let &Sequential { calls, warmup, gap } = plan;
    let server = start_http_with_tool(command, tool).await?;
    let mut connection = server.connect().await?;
    for _ in 0..warmup {
        connection
            .timed_call(call)
            .await
            .context("during the warm-up")?;
    }
    let capacity = usize::try_from(calls).context("too many calls")?;
    let mut samples = Vec::with_capacity(capacity);
    let start = Instant::now();
    for _ in 0..calls {
        samples.push(nanos(connection.timed_call(call).await?));
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }
    let total = start.elapsed();
    drop(connection);
    server.shutdown().await?;
    let latency = Latency::from_samples(&mut samples).context("no samples")?;
    Ok(LatencyRun {
        latency,
        calls_per_s: calls as f64 / total.as_secs_f64(),
    })
}

/// `in_flight` connections, each with one call outstanding.
async fn http_throughput_run(
    command: &ServerCommand,
    tool: &str,
    call: &HttpRequest,
    calls: u64,
    warmup: u64,
    in_flight: usize,
) -> anyhow::Result<ThroughputRun> {
    let server = start_http_with_tool(command, tool).await?;
    if warmup > 0 {
        http::concurrent(&server, call, warmup, in_flight)
            .await
            .context("during the warm-up")?;
    }
    let before = CpuUse::read(server.pid());
    let elapsed = http::concurrent(&server, call, calls, in_flight).await?;
    let cpu = CpuUse::since(before, server.pid());
    let peak_rss_kib = server.peak_rss_kib();
    server.shutdown().await?;
    Ok(ThroughputRun {
        elapsed,
        calls_per_s: calls as f64 / elapsed.as_secs_f64(),
        peak_rss_kib,
        cpu,
    })
}

fn transport_name(transport: &TransportOpts) -> &'static str {
    match (transport.http, transport.rest) {
        (true, true) => "rest",
        (true, false) if transport.accept.is_some() => "http (Accept as given)",
        (true, false) => "http",
        _ => "stdio",
    }
}

// ---------------------------------------------------------------- startup

struct StartupRun {
    ready: Duration,
    tools: usize,
    idle_rss_kib: Option<u64>,
}

/// How long the server idles after `tools/list` before its RSS is read: long
/// enough for start-up work still running in the background to settle.
const IDLE_WAIT: Duration = Duration::from_millis(500);

async fn startup(args: StartupArgs) -> anyhow::Result<()> {
    let command = args.server.command();
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let result = startup_run(&command, args.idle_rss)
            .await
            .with_context(|| format!("startup run {run}"))?;
        runs.push(result);
    }
    let ready_ms: Vec<f64> = runs.iter().map(|r| ms(r.ready)).collect();
    let (min, median, max) = stats::min_median_max(&ready_ms).context("no runs")?;
    let rss: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.idle_rss_kib)
        .map(|k| k as f64)
        .collect();
    let rss_median = stats::median(&rss);

    if args.server.json {
        let runs: Vec<Value> = runs
            .iter()
            .map(|r| {
                json!({
                    "ready_ms": round2(ms(r.ready)),
                    "tools": r.tools,
                    "idle_rss_kib": r.idle_rss_kib,
                })
            })
            .collect();
        return print_json(&json!({
            "benchmark": "startup",
            "server": args.server.server,
            "min_ms": round2(min),
            "median_ms": round2(median),
            "max_ms": round2(max),
            "idle_rss_kib": rss_median.map(|k| k.round() as u64),
            "runs": runs,
        }));
    }
    println!(
        "startup: spawn to `tools/list` reply, {} runs\nserver: {}\n",
        args.runs,
        args.server.server.join(" ")
    );
    println!(
        "{:<8}{:>12}{:>8}{:>16}",
        "run", "ready ms", "tools", "idle RSS MiB"
    );
    for (i, r) in runs.iter().enumerate() {
        println!(
            "{:<8}{:>12.2}{:>8}{:>16}",
            i + 1,
            ms(r.ready),
            r.tools,
            mib(r.idle_rss_kib.map(|k| k as f64))
        );
    }
    println!("\nready ms: min {min:.2}, median {median:.2}, max {max:.2}");
    if args.idle_rss {
        println!("idle RSS: median {} MiB", mib(rss_median));
    }
    Ok(())
}

async fn startup_run(command: &ServerCommand, idle_rss: bool) -> anyhow::Result<StartupRun> {
    let start = Instant::now();
    let mut server = Server::spawn(command)?;
    server.handshake().await?;
    let tools = server.list_tools().await?.len();
    let ready = start.elapsed();
    let idle_rss_kib = if idle_rss {
        tokio::time::sleep(IDLE_WAIT).await;
        let rss = proc_status_kib(server.pid(), "VmRSS").with_context(|| {
            format!(
                "cannot read VmRSS from /proc/{}/status (Linux only)",
                server.pid()
            )
        })?;
        Some(rss)
    } else {
        None
    };
    server.shutdown().await?;
    Ok(StartupRun {
        ready,
        tools,
        idle_rss_kib,
    })
}

// ----------------------------------------------------------------- reload

/// The file each change replaces, in the tools folder.
const RELOAD_FILE: &str = "bench.wasm";
/// Where a change is written before it is renamed to [`RELOAD_FILE`]: in the
/// same folder (so the rename is atomic) and without the `.wasm` extension
/// (so the server ignores it).
const RELOAD_TEMP: &str = "bench.wasm.part";
/// How long to wait for the notification a change should cause.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(30);

struct ReloadRun {
    /// Per change, from the rename to the notification, in order.
    samples_ns: Vec<u64>,
    latency: Latency,
    /// `tools/list_changed` notifications that came while none was
    /// expected (after start-up, or during a settle wait): a reload split
    /// in two, or one not caused by the benchmark.
    extra: u32,
}

async fn reload(args: ReloadArgs) -> anyhow::Result<()> {
    let read = |path: &Path| {
        std::fs::read(path).with_context(|| format!("cannot read `{}`", path.display()))
    };
    let a = read(&args.component_a)?;
    let b = read(&args.component_b)?;
    if a == b {
        bail!("--component-a and --component-b have the same bytes: a change would change nothing");
    }
    std::fs::create_dir_all(&args.tools_dir).with_context(|| {
        format!(
            "cannot create the tools folder `{}`",
            args.tools_dir.display()
        )
    })?;
    let command = args.server.command();
    let settle = Duration::from_millis(args.settle_ms);
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let result = reload_run(
            &command,
            &args.tools_dir,
            [&a, &b],
            args.warmup,
            args.changes,
            settle,
        )
        .await;
        // Leave the folder as it was found, whether the run worked or not.
        for name in [RELOAD_FILE, RELOAD_TEMP] {
            let _ = std::fs::remove_file(args.tools_dir.join(name));
        }
        runs.push(result.with_context(|| format!("reload run {run}"))?);
    }
    let median_of = |f: &dyn Fn(&ReloadRun) -> u64| {
        stats::median(&runs.iter().map(|r| ns_to_ms(f(r))).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let p50 = median_of(&|r| r.latency.p50_ns);
    let p90 = median_of(&|r| r.latency.p90_ns);
    let max = median_of(&|r| r.latency.max_ns);
    let extra: u32 = runs.iter().map(|r| r.extra).sum();

    if args.server.json {
        let runs: Vec<Value> = runs
            .iter()
            .map(|r| {
                json!({
                    "p50_ms": round2(ns_to_ms(r.latency.p50_ns)),
                    "p90_ms": round2(ns_to_ms(r.latency.p90_ns)),
                    "max_ms": round2(ns_to_ms(r.latency.max_ns)),
                    "extra_notifications": r.extra,
                    "latencies_ms": r.samples_ns.iter().map(|&ns| round2(ns_to_ms(ns))).collect::<Vec<_>>(),
                })
            })
            .collect();
        return print_json(&json!({
            "benchmark": "reload",
            "server": args.server.server,
            "tools_dir": args.tools_dir,
            "component_a": args.component_a,
            "component_b": args.component_b,
            "changes": args.changes,
            "warmup": args.warmup,
            "settle_ms": args.settle_ms,
            "p50_ms": round2(p50),
            "p90_ms": round2(p90),
            "max_ms": round2(max),
            "extra_notifications": extra,
            "runs": runs,
        }));
    }
    println!(
        "reload: `{RELOAD_FILE}` replaced {} times per run (A and B alternately) after {} \
         warm-up, rename to `tools/list_changed`, {} runs\ntools folder: {}\nserver: {}\n",
        args.changes,
        args.warmup,
        args.runs,
        args.tools_dir.display(),
        args.server.server.join(" ")
    );
    println!(
        "{:<8}{:>10}{:>10}{:>10}{:>8}",
        "run", "p50 ms", "p90 ms", "max ms", "extra"
    );
    for (i, r) in runs.iter().enumerate() {
        let l = &r.latency;
        println!(
            "{:<8}{:>10.2}{:>10.2}{:>10.2}{:>8}",
            i + 1,
            ns_to_ms(l.p50_ns),
            ns_to_ms(l.p90_ns),
            ns_to_ms(l.max_ns),
            r.extra
        );
    }
    println!("{:<8}{p50:>10.2}{p90:>10.2}{max:>10.2}{extra:>8}", "median");
    if extra > 0 {
        println!(
            "\nwarning: {extra} notification(s) came when none was expected (a reload split \
             in two, or something else changing the folder); the figures may be off"
        );
    }
    Ok(())
}

/// One run: B in place, start the server, then `warmup + changes` times
/// write the other component over `bench.wasm` and wait for the
/// notification, timing the last `changes`.
async fn reload_run(
    command: &ServerCommand,
    dir: &Path,
    [a, b]: [&[u8]; 2],
    warmup: u32,
    changes: u32,
    settle: Duration,
) -> anyhow::Result<ReloadRun> {
    // In place before the server starts, so every timed change replaces a
    // served component rather than adding the first one.
    replace_file(dir, b)?;
    let mut server = Server::spawn(command)?;
    server.handshake().await?;
    server.list_tools().await?;
    let mut extra = drain_notifications(&mut server, settle).await?;
    let mut samples_ns = Vec::new();
    for change in 1..=warmup.saturating_add(changes) {
        let bytes = if change % 2 == 1 { a } else { b };
        let written = replace_file(dir, bytes)?;
        let notified = server
            .notification_by(TOOLS_LIST_CHANGED, written + RELOAD_TIMEOUT)
            .await?
            .with_context(|| {
                format!(
                    "change {change}: no `{TOOLS_LIST_CHANGED}` within {} s; does the server \
                     serve `{}`? (rerun with --server-stderr FILE to see its log)",
                    RELOAD_TIMEOUT.as_secs(),
                    dir.display()
                )
            })?;
        if change > warmup {
            samples_ns.push(nanos(notified.duration_since(written)));
        }
        extra += drain_notifications(&mut server, settle).await?;
    }
    server.shutdown().await?;
    let mut sorted = samples_ns.clone();
    let latency = Latency::from_samples(&mut sorted).context("no samples")?;
    Ok(ReloadRun {
        samples_ns,
        latency,
        extra,
    })
}

/// Write `bytes` to the temporary name, then rename it to `bench.wasm`:
/// the server only ever sees a complete file. Returns the instant the
/// rename returned, when the change is complete.
fn replace_file(dir: &Path, bytes: &[u8]) -> anyhow::Result<Instant> {
    let temp = dir.join(RELOAD_TEMP);
    let target = dir.join(RELOAD_FILE);
    std::fs::write(&temp, bytes).with_context(|| format!("cannot write `{}`", temp.display()))?;
    std::fs::rename(&temp, &target).with_context(|| {
        format!(
            "cannot rename `{}` to `{}`",
            temp.display(),
            target.display()
        )
    })?;
    Ok(Instant::now())
}

/// Read the server's messages for `period`; the number of
/// `tools/list_changed` notifications among them.
async fn drain_notifications(server: &mut Server, period: Duration) -> anyhow::Result<u32> {
    let until = Instant::now() + period;
    let mut count = 0;
    while server
        .notification_by(TOOLS_LIST_CHANGED, until)
        .await?
        .is_some()
    {
        count += 1;
    }
    Ok(count)
}

// ----------------------------------------------------------- side by side

async fn side_by_side(args: SideBySideArgs) -> anyhow::Result<()> {
    let mut contenders = args
        .servers
        .iter()
        .map(|s| compare::Contender::parse(s, args.server_stderr.as_deref()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    compare::rename_tools(&mut contenders, &args.tool_names)?;
    let operations = args
        .ops
        .iter()
        .map(|o| compare::Operation::parse(o))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = compare::Plan {
        rounds: args.rounds,
        calls: args.calls,
        warmup: args.warmup,
        throughput_calls: args.throughput_calls,
        in_flight: usize::try_from(args.in_flight).context("--in-flight is too large")?,
        startup: args.startup,
    };
    compare::side_by_side(&contenders, &operations, &plan, args.json).await
}

// ----------------------------------------------------------------- copies

fn copies(args: &CopiesArgs) -> anyhow::Result<()> {
    copies::check_names(&args.rename)?;
    let written = copies::write_copies(&args.component, args.count, &args.rename, &args.out)?;
    println!(
        "wrote {} copies of `{}` to `{}`",
        written.len(),
        args.component.display(),
        args.out.display()
    );
    Ok(())
}

// ---------------------------------------------------------------- output

fn print_json(value: &Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("cannot encode the JSON report")?;
    println!("{text}");
    Ok(())
}

fn nanos(duration: Duration) -> u64 {
    // A call would have to take 584 years to overflow.
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds to microseconds, to 0.1 µs.
fn us(ns: u64) -> f64 {
    round1(ns as f64 / 1e3)
}

fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// KiB to MiB for the table, or `-` when unknown.
fn mib(kib: Option<f64>) -> String {
    kib.map_or_else(|| "-".to_owned(), |k| format!("{:.1}", k / 1024.0))
}
