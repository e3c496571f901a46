//! Test-only tools that misbehave on purpose, one way each, plus a few
//! well-behaved probes (`echo`, `slow`) the tests use to observe the host.
//! Never ship these.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use toolcage_guest::{JsonSchema, Output, export, http, tool};

/// Spin forever without calling the host. Only fuel (or the deadline) stops it.
#[tool]
fn spin() -> Result<Output, String> {
    let mut x: u64 = 0;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// Allocate memory without bound, touching every page.
#[tool]
fn grow_memory() -> Result<Output, String> {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1u8; 1024 * 1024]);
        std::hint::black_box(&hoard);
    }
}

#[inline(never)]
#[allow(unconditional_recursion)] // the point of the tool
fn recurse_in_linear_memory(depth: u64, pad: [u64; 16]) -> u64 {
    // The array lives on the shadow stack in linear memory.
    let pad = std::hint::black_box(pad);
    recurse_in_linear_memory(depth + 1, pad) + pad[(depth % 16) as usize]
}

#[inline(never)]
#[allow(unconditional_recursion)] // the point of the tool
fn recurse_natively(depth: u64) -> u64 {
    // Scalars only: every frame is on the WebAssembly stack itself.
    std::hint::black_box(recurse_natively(std::hint::black_box(depth + 1))) + 1
}

#[derive(Deserialize, JsonSchema)]
struct RecurseArgs {
    /// `native` (WebAssembly stack) or `linear` (the stack Rust keeps in
    /// linear memory).
    stack: String,
}

/// Recurse without bound until the stack overflows.
#[tool]
fn recurse(args: RecurseArgs) -> Result<Output, String> {
    let depth = match args.stack.as_str() {
        "native" => recurse_natively(0),
        _ => recurse_in_linear_memory(0, [1; 16]),
    };
    Ok(Output::text(depth.to_string()))
}

#[derive(Deserialize, JsonSchema)]
struct PanicArgs {
    /// The panic message.
    message: String,
}

/// Panic with the given message.
#[tool]
fn panic(args: PanicArgs) -> Result<Output, String> {
    panic!("{}", args.message);
}

#[derive(Deserialize, JsonSchema)]
struct HugeArgs {
    /// Size of the text result in MiB.
    mib: usize,
}

/// Return a text result of the given size.
#[tool]
fn huge_result(args: HugeArgs) -> Result<Output, String> {
    Ok(Output::text("x".repeat(args.mib * 1024 * 1024)))
}

/// Write to stdout (which must never reach the protocol stream), to stderr,
/// then answer normally.
#[tool]
fn chatty() -> Result<Output, String> {
    println!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"forged by the guest\"}}");
    print!("no newline at the end");
    for i in 0..10_000 {
        println!("line {i} of stdout noise");
        eprintln!("line {i} of stderr noise");
    }
    Ok(Output::text("chatty done"))
}

/// Sleep forever (a blocking host call, not a loop).
#[tool]
fn sleep_forever() -> Result<Output, String> {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

#[derive(Deserialize, JsonSchema)]
struct SlowArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

/// When a call ran, in nanoseconds since the Unix epoch.
#[derive(Serialize, JsonSchema)]
struct Interval {
    start_ns: u64,
    end_ns: u64,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Sleep for `ms` milliseconds and report when the call started and ended,
/// so a test can tell how many calls overlapped. A progress report at the
/// start (sent only to a client that asked for progress) tells a test that
/// the guest is running.
#[tool]
fn slow(args: SlowArgs) -> Result<Interval, String> {
    let start_ns = now_ns();
    toolcage_guest::progress(0.0, None, Some("started"));
    std::thread::sleep(Duration::from_millis(args.ms));
    Ok(Interval {
        start_ns,
        end_ns: now_ns(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// Text to echo back.
    text: String,
    /// How many progress reports to send first.
    #[serde(default)]
    progress_steps: u32,
}

#[derive(Serialize, JsonSchema)]
struct Echoed {
    text: String,
    /// Environment variables the tool can see.
    env_count: usize,
    /// Whether `/` can be listed.
    sees_root: bool,
}

/// Echo `text` back, logging at each level and reporting progress, and say
/// how much of the host the tool can see.
#[tool(read_only)]
fn echo(args: EchoArgs) -> Result<Echoed, String> {
    toolcage_guest::debug!("debug: {}", args.text);
    toolcage_guest::info!("info: {}", args.text);
    toolcage_guest::warn!("warning: {}", args.text);
    for step in 1..=args.progress_steps {
        toolcage_guest::progress(
            f64::from(step),
            Some(f64::from(args.progress_steps)),
            Some(&format!("step {step}")),
        );
    }
    Ok(Echoed {
        text: args.text,
        env_count: std::env::vars().count(),
        sees_root: std::fs::read_dir("/").is_ok(),
    })
}

#[derive(Deserialize, JsonSchema)]
struct SymlinkArgs {
    /// What the link points to (any text; it need not exist).
    target: String,
    /// Where to create the link.
    link: String,
}

/// Create a symbolic link, as a hostile tool would to try to escape its roots.
#[tool]
fn make_symlink(args: SymlinkArgs) -> Result<Output, String> {
    // Straight through WASI (`symlink-at` on the preopen holding the link),
    // as hostile code would, not through any helper that might check.
    let link = std::path::Path::new(&args.link);
    for (dir, root) in wasi::filesystem::preopens::get_directories() {
        if let Ok(relative) = link.strip_prefix(&root) {
            let relative = relative.to_str().ok_or("link path is not UTF-8")?;
            return dir
                .symlink_at(&args.target, relative)
                .map(|()| Output::text("created"))
                .map_err(|e| format!("symlink failed: {e:?}"));
        }
    }
    Err(format!("`{}` is under no preopened directory", args.link))
}

#[derive(Deserialize, JsonSchema)]
struct Person {
    /// Your name.
    name: String,
    /// Your age.
    age: u32,
}

#[derive(Serialize, JsonSchema)]
struct Greeting {
    greeting: String,
}

/// Ask the user for their name and age, then greet them.
#[tool]
fn ask_user() -> Result<Greeting, String> {
    match toolcage_guest::ask::<Person>("Who are you?")? {
        Some(person) => Ok(Greeting {
            greeting: format!("Hello {}, {}!", person.name, person.age),
        }),
        None => Ok(Greeting {
            greeting: "The user would not say.".into(),
        }),
    }
}

#[derive(Deserialize, JsonSchema)]
struct SummarizeArgs {
    /// Text to summarise.
    text: String,
}

/// Ask the client's model to summarise a text, after confirming with the user.
#[tool]
fn summarize(args: SummarizeArgs) -> Result<Output, String> {
    if !toolcage_guest::confirm("Spend tokens on a summary?")? {
        return Err("the user said no".into());
    }
    let summary = toolcage_guest::sample(&format!("Summarise: {}", args.text), 100)?;
    Ok(Output::text(format!("summary: {summary}")))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FetchArgs {
    /// The URL to request.
    url: String,
    /// The HTTP method (default `GET`).
    #[serde(default)]
    method: Option<String>,
    /// Read at most this many bytes of the body (default: the SDK's).
    #[serde(default)]
    max_body_bytes: Option<usize>,
    /// A request body to send.
    #[serde(default)]
    body: Option<String>,
    /// Request headers to send, name to value.
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, JsonSchema)]
struct Fetched {
    /// The final response's status.
    status: u16,
    /// The length of its body.
    bytes: usize,
    /// Its `location` header (a redirect that was not followed).
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<String>,
}

/// Request a URL through `toolcage_guest::http` (following redirects for
/// GET and HEAD), and say what came back. A failed request is an error
/// result with the SDK error's text.
#[tool]
fn fetch(args: FetchArgs) -> Result<Fetched, String> {
    let method = match args.method.as_deref() {
        Some(method) => method.parse()?,
        None => http::Method::Get,
    };
    let mut request = http::Request::new(method, args.url);
    if let Some(limit) = args.max_body_bytes {
        request = request.max_body_bytes(limit);
    }
    if let Some(body) = args.body {
        request = request.body(body);
    }
    for (name, value) in &args.headers {
        request = request.header(name, value);
    }
    let response = request.send()?;
    Ok(Fetched {
        status: response.status,
        bytes: response.body.len(),
        location: response.header("location").map(str::to_owned),
    })
}

#[derive(Deserialize, JsonSchema)]
struct ReadEnvArgs {
    /// The variable's name.
    name: String,
}

#[derive(Serialize, JsonSchema)]
struct EnvValue {
    name: String,
    /// `null` when the variable is not set (or not valid UTF-8).
    value: Option<String>,
}

/// Read one environment variable, as a tool sees it.
#[tool(read_only)]
fn read_env(args: ReadEnvArgs) -> Result<EnvValue, String> {
    let value = std::env::var(&args.name).ok();
    Ok(EnvValue {
        name: args.name,
        value,
    })
}

#[derive(Serialize, JsonSchema)]
struct EnvNames {
    /// Every environment variable's name, sorted.
    names: Vec<String>,
}

/// List the names of all environment variables the tool can see.
#[tool(read_only)]
fn env_names() -> Result<EnvNames, String> {
    let mut names: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(EnvNames { names })
}

#[derive(Deserialize, JsonSchema)]
struct AddressArgs {
    /// `host:port`.
    address: String,
}

/// Open a raw TCP connection (wasi:sockets), as a tool that wants to get
/// around its HTTP grant would. Returns what happened.
#[tool]
fn tcp_connect(args: AddressArgs) -> Result<Output, String> {
    match std::net::TcpStream::connect(args.address.as_str()) {
        Ok(_) => Ok(Output::text(format!("connected to {}", args.address))),
        Err(error) => Err(format!("tcp connect failed: {error}")),
    }
}

/// Resolve a host name (wasi:sockets ip-name-lookup).
#[tool]
fn resolve(args: AddressArgs) -> Result<Output, String> {
    use std::net::ToSocketAddrs as _;
    match args.address.as_str().to_socket_addrs() {
        Ok(addrs) => Ok(Output::text(format!(
            "resolved to {:?}",
            addrs.collect::<Vec<_>>()
        ))),
        Err(error) => Err(format!("lookup failed: {error}")),
    }
}

export!(
    tcp_connect,
    resolve,
    fetch,
    read_env,
    env_names,
    ask_user,
    summarize,
    make_symlink,
    spin,
    grow_memory,
    recurse,
    panic,
    huge_result,
    chatty,
    sleep_forever,
    slow,
    echo
);
