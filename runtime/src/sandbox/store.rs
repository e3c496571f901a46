//! One store per call: the WASI context, the resource table, the limiter,
//! the captured output, and the run under fuel, deadline and cancellation,
//! with every way it can end named as a [`CallFailure`].
//!
//! Invariants:
//! - A store serves one call and is dropped after it (its instance may be
//!   made ahead of the call, with nothing granted, then bound to it:
//!   `ready`); nothing of a call outlives it but its [`Run`]'s figures and
//!   captured output.
//! - The model gets a cause, never a wasm backtrace: `classify` maps every
//!   error to a failure that names the limit or the guest's own message.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::epoch::Ticker;
use super::{
    CAPTURE_BYTES, MAX_CORE_INSTANCES_PER_CALL, MAX_HTTP_FIELDS_BYTES, MAX_MEMORIES_PER_CALL,
    MAX_RANDOM_BYTES, MAX_RESOURCES, MAX_TABLES_PER_CALL,
};
use crate::call::{CallFailure, CapturedOutput, EventSink, InputRequired};
use crate::config::Limits;
use crate::grants::CallGrants;
use crate::grants::handles::HandleLimit;
use crate::grants::network::NetRecord;
use crate::redact::Scrub;

/// What one transfer from the guest to the host may carry beyond the
/// result-size limit: the host-side representation of the result's list
/// items (wasmtime counts each lifted list element at its host size).
const TRANSFER_SLACK: u64 = 64 * 1024;

/// Per-store state: WASI, the resource table, the limiter and where guest
/// events go.
pub struct HostState {
    /// The run's WASI context, made from `grants` the first time the guest
    /// uses WASI: an instance made ahead of its call, which must not touch
    /// the host before it is bound, never makes one for the grants it is
    /// bound away from (a context is a dozen allocations and a seeded
    /// random generator).
    wasi: Option<WasiCtx>,
    /// The run's captures of the guest's stdout and stderr, for that
    /// context.
    stdio: (Capture, Capture),
    pub(super) table: ResourceTable,
    http: wasmtime_wasi_http::WasiHttpCtx,
    /// What the call may reach beyond WASI's context: the network gate,
    /// the client services, the secrets to scrub.
    pub(super) grants: CallGrants,
    limiter: CallLimiter,
    pub(super) events: Option<EventSink>,
    pub(super) log_messages: u32,
    pub(super) progress_events: u32,
    /// Questions asked so far without a key of the guest's, per kind
    /// (elicit, sample, roots): the next one's key is `elicit-N`, ...
    pub(super) asked: [u32; 3],
    /// Whether the guest has called `begin-task`.
    pub(super) began_task: bool,
    /// The call's roots as opened directories, each with the path the
    /// guest sees: opened the first time the guest asks for its preopens
    /// (`files`), from `grants.files`; `None` until then.
    pub(super) preopens: Option<Vec<(wasmtime_wasi::filesystem::Dir, String)>>,
    /// Whether the guest has called into the host (WASI, HTTP, config
    /// values, the toolcage host) since the store was made. An instance
    /// made ahead of its call must not have: what the call binds at
    /// hand-over (roots, environment, services) is then all it ever sees.
    touched: bool,
}

impl HostState {
    /// Note that the guest called into the host.
    pub(super) fn touch(&mut self) {
        self.touched = true;
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.touched = true;
        let (stdout, stderr) = &self.stdio;
        let ctx = self
            .wasi
            .get_or_insert_with(|| wasi_context(stdout, stderr, &self.grants));
        WasiCtxView {
            ctx,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for HostState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        self.touched = true;
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.grants.network,
        }
    }
}

/// One call in progress: the store and what is read back from it.
pub(super) struct Run {
    store: Option<Store<HostState>>,
    /// Keeps the epoch advancing while [`Run::run`] runs guest code.
    ticker: Ticker,
    pub stdout: Capture,
    pub stderr: Capture,
    pub fuel_used: u64,
    pub peak_memory: u64,
    /// Whether the engine meters fuel (`SandboxSettings::fuel_metering`).
    metered: bool,
    /// Fuel between yields, besides the epoch ticks: set for a call that
    /// starts on the thread that reads requests, so it gives that thread
    /// back soon (`dispatch::lanes`).
    pub yield_fuel: Option<u64>,
    /// What the guest did on the network.
    pub net: NetRecord,
}

impl Run {
    /// A fresh store for one run under `limits`, reaching only what
    /// `grants` give, with guest events going to `events`.
    pub fn start(
        engine: &Engine,
        ticker: &Ticker,
        metered: bool,
        limits: &Limits,
        grants: CallGrants,
        events: Option<EventSink>,
    ) -> Run {
        let stdout = Capture::new();
        let stderr = Capture::new();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let mut http = wasmtime_wasi_http::WasiHttpCtx::new();
        http.set_field_size_limit(MAX_HTTP_FIELDS_BYTES);
        let state = HostState {
            wasi: None,
            stdio: (stdout.clone(), stderr.clone()),
            table,
            http,
            grants,
            limiter: CallLimiter {
                memory_limit: limits.memory_bytes,
                memory_used: 0,
                memory_denied: false,
            },
            events,
            log_messages: 0,
            progress_events: 0,
            asked: [0; 3],
            began_task: false,
            preopens: None,
            touched: false,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.limiter);
        // One transfer from the guest (a lifted argument of a host call, or
        // the call's result) may not exceed the result-size limit: wasmtime
        // counts the bytes before it allocates them, so a guest cannot make
        // the host copy one buffer a million times through an aliased list.
        store.set_hostcall_fuel(transfer_limit(limits));
        store.set_max_component_handles(MAX_RESOURCES);
        Run {
            store: Some(store),
            ticker: ticker.clone(),
            stdout,
            stderr,
            fuel_used: 0,
            peak_memory: 0,
            metered,
            yield_fuel: None,
            net: NetRecord::default(),
        }
    }

    /// Bind a call to this run's store, made ahead of it with nothing
    /// granted: its grants (a new WASI context with its roots and
    /// environment, writing to the same captures), its events and its
    /// limits. Only for a store whose guest has not touched the host
    /// ([`Run::touched`]), so nothing of the placeholder was seen.
    pub fn bind(&mut self, limits: &Limits, grants: CallGrants, events: Option<EventSink>) {
        let Some(store) = self.store.as_mut() else {
            return;
        };
        let state = store.data_mut();
        // Made from these grants when the guest first uses WASI.
        state.wasi = None;
        state.grants = grants;
        state.preopens = None;
        state.events = events;
        state.limiter.memory_limit = limits.memory_bytes;
        store.set_hostcall_fuel(transfer_limit(limits));
    }

    /// Whether the guest has called into the host since the store was
    /// made (so it cannot be bound to a call).
    pub fn touched(&self) -> bool {
        self.store.as_ref().is_none_or(|store| store.data().touched)
    }

    /// Memory the instance holds, in bytes.
    pub fn memory_used(&self) -> u64 {
        self.store
            .as_ref()
            .map_or(0, |store| store.data().limiter.memory_used)
    }

    /// Log what the guest wrote to stdout and stderr (debug level).
    pub fn log_output(&self) {
        for (stream, capture) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let bytes = capture.peek();
            if !bytes.is_empty() {
                tracing::debug!(stream, output = %String::from_utf8_lossy(&bytes).trim_end(), "guest output");
            }
        }
    }

    /// Run `body` on the store under the limits, mapping every way it can
    /// fail to a [`CallFailure`].
    pub async fn run<R>(
        &mut self,
        limits: &Limits,
        cancel: &CancellationToken,
        body: impl AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallFailure> {
        // The epoch advances (and the guest yields at each tick) only
        // while some run holds this.
        let _ticking = self.ticker.hold();
        let metered = self.metered;
        // What an instantiation made ahead of the call spent counts
        // against the call's fuel.
        let budget = limits.fuel.saturating_sub(self.fuel_used);
        let Some(store) = self.store.as_mut() else {
            return Err(CallFailure::Trap("store already dropped".into()));
        };
        if metered && let Err(error) = store.set_fuel(budget) {
            return Err(CallFailure::Trap(format!("cannot set fuel: {error}")));
        }
        if metered && let Err(error) = store.fuel_async_yield_interval(self.yield_fuel) {
            return Err(CallFailure::Trap(format!(
                "cannot set fuel yields: {error}"
            )));
        }
        // Yield to the executor at every epoch tick, so the select! below
        // regains control even from a guest spinning in a tight loop.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|_| Ok(wasmtime::UpdateDeadline::Yield(1)));

        let deadline = Duration::from_millis(limits.deadline_ms);
        let result = match bounded(body(&mut *store), cancel, deadline).await {
            Ok(result) => result.map_err(|error| classify(error, store, &self.stderr, limits)),
            Err(Stop::Cancelled) => Err(CallFailure::Cancelled),
            Err(Stop::Deadline) => Err(CallFailure::Deadline {
                limit_ms: limits.deadline_ms,
            }),
        };
        if metered {
            self.fuel_used += budget.saturating_sub(store.get_fuel().unwrap_or(0));
        }
        self.peak_memory = store.data().limiter.memory_used;
        self.net = store.data().grants.network.record();
        result
    }
}

/// Why [`bounded`] stopped a body before it finished.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    Cancelled,
    Deadline,
}

/// Run `body` until it finishes, `cancel` fires or `deadline` passes. Each
/// time the body is about to run, cancellation wins over the deadline and
/// both over the body, as in a biased `select!` in that order.
///
/// Unlike such a `select!`, the cancellation waiter and the timer are armed
/// only once the body has waited. Most calls finish in the body's first
/// poll (a guest's file operations run inline), and a timer armed for them
/// cost more than the rest of their bounding: inserting one into an empty
/// timer wheel (calls are brief, so it usually is empty) writes the I/O
/// driver's eventfd to wake whichever thread parks on it, and dropping one
/// takes the driver's lock. Until the body waits, the clock is read instead.
async fn bounded<F: Future>(
    body: F,
    cancel: &CancellationToken,
    deadline: Duration,
) -> Result<F::Output, Stop> {
    // tokio's clock, so that a test's paused time moves both.
    let until = tokio::time::Instant::now() + deadline;
    let mut body = pin!(body);
    let mut cancelled = pin!(None::<WaitForCancellationFuture<'_>>);
    let mut timer = pin!(None::<tokio::time::Sleep>);
    std::future::poll_fn(|cx| {
        if cancel.is_cancelled() {
            return Poll::Ready(Err(Stop::Cancelled));
        }
        if tokio::time::Instant::now() >= until {
            return Poll::Ready(Err(Stop::Deadline));
        }
        if let Poll::Ready(output) = body.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        // The body waits: from now on, both wake this future.
        if cancelled.is_none() {
            cancelled.set(Some(cancel.cancelled()));
        }
        if timer.is_none() {
            timer.set(Some(tokio::time::sleep_until(until)));
        }
        if let Some(cancelled) = cancelled.as_mut().as_pin_mut()
            && cancelled.poll(cx).is_ready()
        {
            return Poll::Ready(Err(Stop::Cancelled));
        }
        if let Some(timer) = timer.as_mut().as_pin_mut()
            && timer.poll(cx).is_ready()
        {
            return Poll::Ready(Err(Stop::Deadline));
        }
        Poll::Pending
    })
    .await
}

/// The WASI context of a run reaching only what `grants` give, writing
/// to the run's captures.
fn wasi_context(stdout: &Capture, stderr: &Capture, grants: &CallGrants) -> WasiCtx {
    // Deny by default: no args, no sockets, no name lookup, stdin
    // closed; only what the grants add (files under the effective
    // roots, the granted environment; HTTP goes through the grant's
    // gate). Clocks and random numbers are on (WasiCtxBuilder's
    // default).
    let mut builder = WasiCtxBuilder::new();
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .max_random_size(MAX_RANDOM_BYTES);
    // File operations run inline on the runtime thread instead of hopping
    // to the blocking pool for each one: a `read_text_file` makes a dozen
    // of them, and the hops cost more than local disk I/O does. The
    // epoch ticker still bounds everything between host calls, and
    // `files` keeps special files from blocking an open.
    builder.allow_blocking_current_thread(true);
    builder.stdout(stdout.clone()).stderr(stderr.clone());
    grants.apply(&mut builder);
    builder.build()
}

/// What one transfer from the guest (a lifted argument of a host call, or
/// the call's result) may carry: the result-size limit. wasmtime counts
/// the bytes before it allocates them, so a guest cannot make the host
/// copy one buffer a million times through an aliased list.
fn transfer_limit(limits: &Limits) -> usize {
    let transfer = limits.max_result_bytes.saturating_add(TRANSFER_SLACK);
    usize::try_from(transfer).unwrap_or(usize::MAX)
}

/// The lowest address a store through a stack pointer wrapped below zero
/// faults at: the last 64 KiB of the 32-bit space (a frame is smaller), or
/// beyond it.
const WRAPPED_STACK: u64 = 0xffff_0000;

/// The address of a memory fault, from the context wasmtime attaches to
/// the trap (`WasmFault`, whose type is not public: its text is "memory
/// fault at wasm address 0x… in linear memory of size 0x…"). Read from
/// that context alone: the backtrace beside it carries names the guest
/// chose.
fn fault_address(error: &wasmtime::Error) -> Option<u64> {
    error.chain().find_map(|cause| {
        // The backtrace is formatted too: at most 20 names of at most
        // `MAX_NAME_BYTES` each (`inspect::check_names`).
        let text = cause.to_string();
        let rest = text.strip_prefix("memory fault at wasm address 0x")?;
        let digits = rest.split(|c: char| !c.is_ascii_hexdigit()).next()?;
        u64::from_str_radix(digits, 16).ok()
    })
}

/// Every way a run can fail, named.
fn classify(
    error: wasmtime::Error,
    store: &Store<HostState>,
    stderr: &Capture,
    limits: &Limits,
) -> CallFailure {
    if let Some(InputRequired(pending)) = error.downcast_ref::<InputRequired>() {
        return CallFailure::InputRequired(pending.clone());
    }
    if tracing::enabled!(tracing::Level::DEBUG) {
        // The error can carry what the guest handed the host. Its
        // backtrace is at most 20 frames of names of at most
        // `MAX_NAME_BYTES` (`inspect::check_names`), so this text is
        // bounded before it is cut.
        let full = format!("{error:?}");
        let scrub = Scrub::new(store.data().grants.secrets.iter().map(String::as_str));
        tracing::debug!(error = %scrub.text(&full, 64 * 1024), "guest trapped");
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => {
            return CallFailure::Fuel { limit: limits.fuel };
        }
        Some(Trap::StackOverflow) => return CallFailure::StackOverflow,
        // Rust and C keep most of their stack in linear memory, growing
        // down from a fixed size; overflowing it wraps the stack pointer
        // below zero, and the first store faults near the top of the
        // 32-bit space, or just past it (the wrapped pointer plus the
        // store's offset).
        Some(Trap::MemoryOutOfBounds)
            if fault_address(&error).is_some_and(|address| address >= WRAPPED_STACK) =>
        {
            return CallFailure::StackOverflow;
        }
        _ => {}
    }
    // A refused memory growth the tool handled does not explain a later
    // panic; the panic message does (and says the limit was hit).
    let memory_denied = store.data().limiter.memory_denied;
    let stderr = stderr.peek();
    // An exception a Python or JavaScript runtime printed before it
    // aborted: the author's message, not the runtime's own panic.
    let explained = |message: String| {
        if memory_denied {
            format!(
                "{message} (after its memory limit of {} MiB refused to grow)",
                limits.memory_bytes / (1024 * 1024)
            )
        } else {
            message
        }
    };
    if let Some(message) = raised_message(&stderr) {
        return CallFailure::Raised(explained(message));
    }
    if let Some(message) = panic_message(&stderr) {
        return CallFailure::Panic(explained(message));
    }
    if memory_denied {
        return CallFailure::Memory {
            limit_bytes: limits.memory_bytes,
        };
    }
    if let Some(failure) = host_limit(&error, limits) {
        return failure;
    }
    // The model gets the cause, never the wasm backtrace (that stays in
    // the debug log): the trap itself, or the innermost error.
    match error.downcast_ref::<Trap>() {
        Some(trap) => CallFailure::Trap(trap.to_string()),
        None => CallFailure::Trap(error.root_cause().to_string()),
    }
}

/// The limit of the host's own a failure names, if it is one of them:
/// wasmtime's cap on one transfer from the guest (set from the result-size
/// limit), the resource table, open handles, the random-bytes cap.
fn host_limit(error: &wasmtime::Error, limits: &Limits) -> Option<CallFailure> {
    let root = error.root_cause();
    if let Some(HandleLimit { limit }) = root.downcast_ref::<HandleLimit>() {
        return Some(CallFailure::OpenHandles { limit: *limit });
    }
    if let Some(wasmtime::component::ResourceTableError::Full) =
        root.downcast_ref::<wasmtime::component::ResourceTableError>()
    {
        return Some(CallFailure::Resources {
            limit: MAX_RESOURCES,
        });
    }
    let text = root.to_string();
    // wasmtime's `HostcallFuelExhausted` is private; its text is stable.
    if text.starts_with("too much data is being copied between the host and the guest") {
        // Lifting a host call's arguments happens inside wasm, which leaves
        // a wasm backtrace on the error; lifting the call's result does not.
        return Some(
            if error.downcast_ref::<wasmtime::WasmBacktrace>().is_some() {
                CallFailure::Transfer {
                    limit: limits.max_result_bytes,
                }
            } else {
                CallFailure::ResultTooLarge {
                    size: None,
                    limit: limits.max_result_bytes,
                }
            },
        );
    }
    if text.starts_with("total size of fields exceeds limit") {
        return Some(CallFailure::HttpFields {
            limit: MAX_HTTP_FIELDS_BYTES,
        });
    }
    if text.starts_with("requested len") && text.contains("exceeds limit") {
        return Some(CallFailure::Random {
            limit: MAX_RANDOM_BYTES,
        });
    }
    None
}

/// The Rust standard library's panic hook prints
/// `thread '<name>' panicked at <file>:<line>:<col>:\n<message>` to stderr;
/// take the message (and where) from the last such report.
pub(super) fn panic_message(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let start = text.rfind("panicked at ")?;
    let report = &text[start + "panicked at ".len()..];
    let (location, rest) = report.split_once(":\n")?;
    let message: Vec<&str> = rest
        .lines()
        .take_while(|line| !line.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    Some(format!("{} (at {location})", message.join("\n").trim()))
}

/// The longest exception message reported, in bytes.
const MAX_RAISED_BYTES: usize = 1024;

/// The exception a language runtime printed to stderr before it trapped:
/// Python's last traceback line (`ValueError: bad input`, as componentize-py
/// prints it before its own panic), or the message before a JavaScript
/// `Stack:` report (componentize-js / StarlingMonkey).
pub(super) fn raised_message(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let message = if let Some(start) = text.rfind("Traceback (most recent call last):") {
        // The exception line is the first unindented line after the frames.
        text[start..]
            .lines()
            .skip(1)
            .find(|line| !line.starts_with(' ') && !line.trim().is_empty())?
            .trim()
            .to_owned()
    } else if let Some(end) = text.rfind("\nStack:\n") {
        let before = &text[..end];
        let paragraph = before.rsplit("\n\n").next().unwrap_or(before);
        paragraph.trim().to_owned()
    } else {
        return None;
    };
    if message.is_empty() {
        return None;
    }
    let mut cut = message.len().min(MAX_RAISED_BYTES);
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    Some(message[..cut].to_owned())
}

/// Caps the total linear memory of one call and records the peak. Growth
/// past the cap is refused (the guest sees `memory.grow` fail, which Rust
/// turns into an allocation-failure abort); `memory_denied` lets the host
/// name the limit instead of reporting a bare trap.
struct CallLimiter {
    memory_limit: u64,
    memory_used: u64,
    memory_denied: bool,
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = (desired as u64).saturating_sub(current as u64);
        let total = self.memory_used.saturating_add(grow);
        if total > self.memory_limit {
            self.memory_denied = true;
            return Ok(false);
        }
        self.memory_used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Function tables in real tools hold a few thousand entries.
        Ok(desired <= 1_000_000)
    }

    // The pool already refuses a component that needs more than its slot;
    // these say the same for instances a guest creates at run time.
    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES_PER_CALL as usize
    }

    fn tables(&self) -> usize {
        MAX_TABLES_PER_CALL as usize
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_CALL as usize
    }
}

/// Bounded, shared capture of one guest output stream. Past
/// [`CAPTURE_BYTES`] the bytes are dropped but reported as written, so a
/// chatty guest neither fails nor fills the host's memory.
#[derive(Clone)]
pub(super) struct Capture(Arc<std::sync::Mutex<CaptureBuf>>);

#[derive(Default)]
struct CaptureBuf {
    bytes: Vec<u8>,
    dropped: u64,
}

impl Capture {
    fn new() -> Self {
        Capture(Arc::new(std::sync::Mutex::new(CaptureBuf::default())))
    }

    fn peek(&self) -> Vec<u8> {
        self.0.lock().map(|b| b.bytes.clone()).unwrap_or_default()
    }

    pub fn take(&self) -> CapturedOutput {
        match self.0.lock() {
            Ok(mut buf) => CapturedOutput {
                bytes: std::mem::take(&mut buf.bytes),
                dropped: buf.dropped,
            },
            Err(_) => CapturedOutput::default(),
        }
    }
}

impl wasmtime_wasi::cli::IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for Capture {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if let Ok(mut buf) = self.0.lock() {
            let room = CAPTURE_BYTES.saturating_sub(buf.bytes.len());
            let keep = room.min(data.len());
            buf.bytes.extend_from_slice(&data[..keep]);
            buf.dropped += (data.len() - keep) as u64;
        }
        std::task::Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_runs_a_body_that_finishes_at_once() {
        let cancel = CancellationToken::new();
        let finished = bounded(async { 7 }, &cancel, Duration::from_secs(30)).await;
        assert_eq!(finished, Ok(7));
    }

    #[tokio::test]
    async fn bounded_runs_a_body_that_waits_to_its_end() {
        let cancel = CancellationToken::new();
        let body = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            tokio::task::yield_now().await;
            3
        };
        assert_eq!(bounded(body, &cancel, Duration::from_secs(30)).await, Ok(3));
    }

    #[tokio::test]
    async fn bounded_does_not_start_a_body_cancelled_or_out_of_time() {
        let cancel = CancellationToken::new();
        let started = std::sync::atomic::AtomicBool::new(false);
        let body = || async {
            started.store(true, std::sync::atomic::Ordering::Relaxed);
        };
        assert_eq!(
            bounded(body(), &cancel, Duration::ZERO).await,
            Err(Stop::Deadline)
        );
        cancel.cancel();
        // Cancellation wins over the deadline.
        assert_eq!(
            bounded(body(), &cancel, Duration::ZERO).await,
            Err(Stop::Cancelled)
        );
        assert_eq!(
            bounded(body(), &cancel, Duration::from_secs(30)).await,
            Err(Stop::Cancelled)
        );
        assert!(!started.load(std::sync::atomic::Ordering::Relaxed));
    }

    #[tokio::test]
    async fn bounded_stops_a_waiting_body_at_its_deadline() {
        let cancel = CancellationToken::new();
        let stopped = bounded(
            std::future::pending::<()>(),
            &cancel,
            Duration::from_millis(20),
        );
        assert_eq!(stopped.await, Err(Stop::Deadline));
    }

    #[tokio::test]
    async fn bounded_stops_a_waiting_body_when_cancelled() {
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            canceller.cancel();
        });
        let stopped = bounded(
            std::future::pending::<()>(),
            &cancel,
            Duration::from_secs(30),
        );
        assert_eq!(stopped.await, Err(Stop::Cancelled));
    }

    #[tokio::test]
    async fn bounded_stops_a_body_that_keeps_waking_itself_at_its_deadline() {
        // A guest that yields at every fuel interval wakes itself at once:
        // the deadline must still stop it.
        let cancel = CancellationToken::new();
        let spinning = async {
            loop {
                tokio::task::yield_now().await;
            }
        };
        let stopped = bounded(spinning, &cancel, Duration::from_millis(20));
        assert_eq!(stopped.await, Err(Stop::Deadline));
    }

    #[test]
    fn a_fault_address_is_read_from_wasmtimes_context_not_the_backtrace() {
        // As wasmtime builds it: the trap, the fault, then the backtrace,
        // whose frame names come from the guest.
        let trap = |fault: &str| {
            wasmtime::Error::new(Trap::MemoryOutOfBounds)
                .context(fault.to_owned())
                .context("error while executing at wasm backtrace:\n    0: 0x5c322 - memory fault at wasm address 0xffffffff")
        };
        for (fault, address) in [
            (
                "memory fault at wasm address 0x100000008 in linear memory of size 0x130000",
                0x1_0000_0008,
            ),
            (
                "memory fault at wasm address 0xfffffff0 in linear memory of size 0x130000",
                0xffff_fff0,
            ),
            (
                "memory fault at wasm address 0x10 in linear memory of size 0x10",
                0x10,
            ),
        ] {
            assert_eq!(fault_address(&trap(fault)), Some(address), "{fault}");
        }
        // No fault context: the name in the backtrace is not read.
        let named = wasmtime::Error::new(Trap::MemoryOutOfBounds)
            .context("error while executing at wasm backtrace:\n    0: memory fault at wasm address 0xffffffff");
        assert_eq!(fault_address(&named), None);
    }

    #[test]
    fn panic_messages_are_extracted() {
        let stderr = b"\nthread '<unnamed>' panicked at src/lib.rs:10:5:\nboom: 42\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("boom: 42 (at src/lib.rs:10:5)")
        );
        assert_eq!(panic_message(b"nothing here"), None);
    }

    #[test]
    fn exceptions_of_python_and_javascript_runtimes_are_extracted() {
        // componentize-py: the traceback, then its own Rust panic.
        let python = b"Traceback (most recent call last):\n  File \"app.py\", line 9, in call\n    raise ValueError(\"bad input\")\nValueError: bad input\n\nthread '<unnamed>' panicked at runtime/src/lib.rs:1280:25:\nPython function threw an unexpected exception\n";
        assert_eq!(
            raised_message(python).as_deref(),
            Some("ValueError: bad input")
        );
        // componentize-js (StarlingMonkey).
        let js = b"kaboom: x\nStack:\n  boom@app.js:1:36\n  export_boom@initializer.js:69:15\n\nRedirecting call to abort() to mozalloc_abort\n";
        assert_eq!(raised_message(js).as_deref(), Some("kaboom: x"));
        let later = b"earlier output\n\nfirst: 1\nStack:\n  a@x.js:1:1\n\nsecond\nline two\nStack:\n  b@x.js:2:2\n";
        assert_eq!(raised_message(later).as_deref(), Some("second\nline two"));
        // A Rust panic is not an exception; nothing is nothing.
        assert_eq!(
            raised_message(b"thread 'main' panicked at src/lib.rs:1:1:\nboom\n"),
            None
        );
        assert_eq!(raised_message(b""), None);
        let long = format!("{}\nStack:\n", "\u{e9}".repeat(2000));
        assert!(raised_message(long.as_bytes()).is_some_and(|m| m.len() <= MAX_RAISED_BYTES));
    }
}
