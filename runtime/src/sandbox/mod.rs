//! The sandbox: the only module that runs guest code.
//!
//! One [`Sandbox`] owns the `Engine` (pooling allocator, fuel metering, epoch
//! interruption), the `Linker` (WASI 0.2, `wasi:http` and the
//! `toolcage:tool/host` imports) and the on-disk compile cache. A component
//! is compiled, linked and checked against its kind's contract once
//! ([`Sandbox::load`], giving a [`Prepared`]); every call then gets a fresh
//! `Store` and instance built from the call's [`Limits`] and
//! [`CallGrants`], as `wasmtime serve` does per request.
//!
//! Rooms:
//! - `engine`: the engine and its pool, the linker, the epoch ticker, the
//!   compile cache.
//! - `reset`: how a used slot is made fresh for the next instance, and
//!   when the fast way (`PAGEMAP_SCAN`) is safe.
//! - `store`: one store per call (WASI context, limiter, captured output),
//!   the run under fuel, deadline and cancellation, and the naming of
//!   every way it ends.
//! - `host`: the `toolcage:tool/host` imports (log, progress, elicit,
//!   sample).
//! - `files`: `open-at` that never blocks on a special file.
//! - the component kinds, one file each: `contract` (components that
//!   export `toolcage:tool/tool`). A kind turns a component into
//!   descriptors and results; [`Prepared`] hides which kind it is.
//!
//! Invariants:
//! - Deny by default: each `WasiCtx` starts from `WasiCtxBuilder::new()`
//!   (no environment, no sockets, no stdin) and gets only what the call's
//!   [`CallGrants`] apply. Guest stdout and stderr go to bounded in-memory
//!   buffers, never to the process's stdout (which, over stdio, is the
//!   protocol).
//! - Every call runs under fuel, a memory cap, a deadline and cancellation.
//!   The epoch ticker makes running guests yield every [`EPOCH_TICK`], so the
//!   deadline and cancellation (a `select!` around the call future) also stop
//!   a guest that never calls the host; dropping the future discards the
//!   store, which is never reused. The ticker runs while any guest code
//!   runs (`epoch`: every `store::Run::run` holds it) and sleeps when none
//!   has for 30 seconds.
//! - A fresh instance never sees an earlier one's memory: a slot is wiped
//!   with the scan only where swap cannot have taken its pages, and once
//!   swap reaches a scanning server no instance is made (`reset`).
//! - A trap never escapes as a panic: every failure is a [`CallFailure`].
//! - Nothing wasmtime-shaped leaves this module: what goes in and out are
//!   [`crate::call`]'s types, [`CallGrants`], [`Limits`] and the opaque
//!   [`Prepared`].

mod contract;
mod engine;
mod epoch;
mod files;
mod host;
mod inspect;
mod plain;
mod ready;
mod reset;
mod store;
mod wasi_config;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::call::{
    CallFailure, CallReport, EventSink, PromptOutput, RawDescriptor, RawExtras, ResourceContent,
};
use crate::config::{Limits, MemoryReset, PlainRules};
use crate::grants::CallGrants;
use contract::Contract;
pub use inspect::Missing;
use inspect::{Inspected, inspect};
pub use plain::Skipped;
pub use plain::docs::embed as embed_docs;
use plain::{Plain, PlainTools};
use ready::ReadyInstance;
use store::{HostState, Run};

/// How often the epoch advances. Running guests yield to the async executor
/// at every tick, so this bounds how late a deadline or a cancellation can
/// be noticed, and how long a guest can hold a runtime thread.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How much of a guest's stdout and of its stderr is kept per call. Past it,
/// output is dropped (the guest does not notice).
pub const CAPTURE_BYTES: usize = 64 * 1024;

/// How many `log` calls one call may make; later ones are dropped, so a
/// guest cannot flood the client.
pub const MAX_LOG_MESSAGES: u32 = 1_000;

/// Longest log message forwarded, in bytes; longer ones are truncated.
pub const MAX_LOG_MESSAGE_BYTES: usize = 16 * 1024;

/// How many `progress` calls one call may make; later ones are dropped.
pub const MAX_PROGRESS_EVENTS: u32 = 10_000;

/// Longest progress message forwarded, in bytes; longer ones are truncated.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;

/// Core module instances one component instance may create. Measured
/// (wasmtime's own count, per toolchain): a Rust `wasm32-wasip2` component
/// creates 3, componentize-js 4, C with the preview1 adapter 4,
/// componentize-py 14, and 38 (0.25) to 41 (0.17) with `--stub-wasi`, as
/// wassette's eval-py is built; room is left for Python extension
/// libraries. The pool holds this many per slot (its metadata is reserved
/// address space, touched only as instances use it), so one call can
/// never take another call's share.
pub const MAX_CORE_INSTANCES_PER_CALL: u32 = 64;
/// Linear memories one component instance may define: every toolchain above
/// defines one; room for two components composed into one.
pub const MAX_MEMORIES_PER_CALL: u32 = 4;
/// Tables one component instance may define: every toolchain above defines
/// two; room for two components composed into one.
pub const MAX_TABLES_PER_CALL: u32 = 8;

/// Host resources (WASI handles: files, directories, streams, pollables,
/// HTTP requests and bodies) one call may hold at once. Each costs host
/// memory; real tools hold a few dozen.
pub const MAX_RESOURCES: usize = 10_000;

/// The most one set of HTTP header fields (a request's or a response's
/// headers, as the host holds them) may take, in bytes: 128 KiB, far above
/// the 8 KiB proxies allow, since it counts the in-memory form too.
pub const MAX_HTTP_FIELDS_BYTES: usize = 128 * 1024;

/// The largest `get-random-bytes` / `get-insecure-random-bytes` answer, in
/// bytes (the host allocates it): 1 MiB.
pub const MAX_RANDOM_BYTES: u64 = 1024 * 1024;

/// Settings the engine is built with.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// Calls that may run at once; sizes the instance pool.
    pub max_concurrent_calls: u32,
    /// Instances made ahead of their calls, at most (0: none).
    pub ready_instances: u32,
    /// Where compiled components are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Meter guest instructions with fuel (on unless the operator turns it
    /// off with `--no-fuel`, e.g. to measure what metering costs; deadline
    /// and memory cap still apply without it).
    pub fuel_metering: bool,
    /// How instance slots are reset after a call (`server.memory_reset`).
    pub memory_reset: MemoryReset,
}

/// Owns the engine, the linker and the compile cache.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
    /// Advances the engine's epoch while guest code runs.
    ticker: epoch::Ticker,
    cache_dir: Option<PathBuf>,
    fuel_metering: bool,
    /// Key of everything that makes a compiled artefact valid besides the
    /// input: the engine's settings and this build of toolcage.
    engine_key: String,
    /// One per instance slot kept for loading: `describe` and the listing
    /// of resources and prompts wait for one, so loading a folder of many
    /// files at once never takes the slots calls need.
    load_permits: tokio::sync::Semaphore,
    /// One per instance slot kept for instances made ahead of their calls
    /// (`SandboxSettings::ready_instances`).
    ready_slots: std::sync::Arc<tokio::sync::Semaphore>,
    /// How slots are reset, and whether a new instance may still be made.
    reset: reset::ResetGuard,
}

/// A component compiled, linked and checked against its kind's contract,
/// ready to be instantiated once per call.
pub struct Prepared {
    kind: Kind,
    /// Instances made ahead of calls to come.
    ready: ready::Pool,
}

/// The kinds of component the sandbox runs.
enum Kind {
    /// Exports `toolcage:tool/tool` (and maybe `resources`, `prompts`).
    Contract(Contract),
    /// Any other component: its exported functions are the tools.
    Plain(Plain),
}

impl Prepared {
    /// Whether the component serves resources.
    pub fn has_resources(&self) -> bool {
        match &self.kind {
            Kind::Contract(c) => c.has_resources(),
            Kind::Plain(_) => false,
        }
    }

    /// Whether the component serves prompts.
    pub fn has_prompts(&self) -> bool {
        match &self.kind {
            Kind::Contract(c) => c.has_prompts(),
            Kind::Plain(_) => false,
        }
    }

    /// Whether it serves completions (exports contract 0.2.0's
    /// `completions`).
    pub fn has_completions(&self) -> bool {
        match &self.kind {
            Kind::Contract(c) => c.has_completions(),
            Kind::Plain(_) => false,
        }
    }

    /// The contract version it was built against (`"0.1"`, `"0.2"`); `None`
    /// for a plain component.
    pub fn contract_version(&self) -> Option<&'static str> {
        match &self.kind {
            Kind::Contract(c) => Some(c.version()),
            Kind::Plain(_) => None,
        }
    }

    /// `"contract"` or `"plain"`.
    pub fn kind(&self) -> &'static str {
        match &self.kind {
            Kind::Contract(_) => "contract",
            Kind::Plain(_) => "plain",
        }
    }

    /// A plain component's exported functions that are not tools, and why.
    pub fn skipped(&self) -> &[Skipped] {
        match &self.kind {
            Kind::Contract(_) => &[],
            Kind::Plain(p) => p.skipped(),
        }
    }

    /// A plain component's exports, as it names them (empty for the
    /// contract, whose exports are fixed).
    pub fn exports(&self) -> &[String] {
        match &self.kind {
            Kind::Contract(_) => &[],
            Kind::Plain(p) => p.exports(),
        }
    }
}

/// A loaded component: prepared, with what the catalog shows of it.
pub struct Loaded {
    /// Ready to run.
    pub prepared: Prepared,
    /// The interfaces it imports, without versions, sorted.
    pub imports: Vec<String>,
    /// Whether its compiled form came from the compile cache.
    pub from_cache: bool,
}

/// Arguments as [`Sandbox::check_arguments`] converted them for the
/// component's kind (a plain component's typed values), handed to the call
/// so it does not parse and convert them again. Opaque outside the sandbox.
#[derive(Default)]
pub struct Checked(Option<Vec<wasmtime::component::Val>>);

/// One call: tool `name` with `arguments` (JSON text) under `limits`,
/// reaching what `grants` give, forwarding `log`/`progress` to `events`,
/// stopping when `cancel` fires.
pub struct CallSpec<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// The arguments, a JSON object as text.
    pub arguments: &'a str,
    /// The same, as `check_arguments` converted them (or the default).
    pub checked: Checked,
    /// The limits.
    pub limits: &'a Limits,
    /// The tool's grants, prepared for this call.
    pub grants: CallGrants,
    /// Where guest events go.
    pub events: Option<EventSink>,
    /// Cancellation.
    pub cancel: &'a CancellationToken,
    /// The call starts on the thread that reads requests and must yield
    /// every [`INLINE_YIELD_FUEL`] (besides the epoch ticks) so it can
    /// move off it (`dispatch::lanes`).
    pub inline: bool,
}

/// Fuel between yields for a call that starts on the thread that reads
/// requests: a few milliseconds of guest code at most. Short calls (a file
/// read, a clock) use a small part of it and never yield; a call that
/// reaches it moves to the spill workers.
pub const INLINE_YIELD_FUEL: u64 = 2_000_000;

impl Sandbox {
    /// Build the engine and linker and start the epoch ticker.
    ///
    /// # Errors
    ///
    /// The engine configuration is rejected (for example, the host cannot
    /// reserve the virtual memory for the instance pool).
    pub fn new(settings: &SandboxSettings) -> anyhow::Result<Self> {
        let reset = reset::ResetGuard::new(settings.memory_reset);
        let built = engine::build(settings, reset.scans)?;
        Ok(Sandbox {
            engine: built.engine,
            linker: built.linker,
            ticker: built.ticker,
            cache_dir: settings.cache_dir.clone(),
            fuel_metering: settings.fuel_metering,
            engine_key: built.key,
            load_permits: tokio::sync::Semaphore::new(engine::LOAD_SLOTS as usize),
            ready_slots: std::sync::Arc::new(tokio::sync::Semaphore::new(
                settings.ready_instances as usize,
            )),
            reset,
        })
    }

    /// Compile `bytes` (whose SHA-256 is `digest`; from the cache when it
    /// holds them), link them and check them against the contract.
    /// Blocking and CPU-heavy: run it on the blocking pool.
    ///
    /// # Errors
    ///
    /// The bytes are not a component, do not compile, import something the
    /// sandbox does not provide, or do not export the contract.
    pub fn load(
        &self,
        bytes: &[u8],
        digest: &str,
        rules: &PlainRules,
    ) -> Result<Loaded, LoadError> {
        // Before compiling: what the file is and whether it can link.
        let (inspected, missing) = inspect(bytes)?;
        if let Inspected::Contract(Err(export)) = &inspected {
            return Err(LoadError::UnsupportedContract(export.clone()));
        }
        if !missing.is_empty() && !rules.trap_missing_imports {
            return Err(LoadError::Missing(missing));
        }
        let (component, from_cache) = engine::compile(
            &self.engine,
            &self.engine_key,
            self.cache_dir.as_deref(),
            bytes,
            digest,
        )?;
        let imports = engine::imports(&self.engine, &component);
        // The operator's opt-in: what the sandbox lacks traps when called.
        let trapping;
        let linker = if missing.is_empty() {
            &self.linker
        } else {
            let names: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
            tracing::warn!(
                imports = %names.join(", "),
                "loading with missing imports that trap when called (`missing_imports = \"trap\"`)"
            );
            let mut linker = self.linker.clone();
            linker
                .define_unknown_imports_as_traps(&component)
                .map_err(|error| LoadError::Link(format!("{error:#}")))?;
            trapping = linker;
            &trapping
        };
        let kind = match inspected {
            Inspected::Contract(Ok(version)) => {
                Kind::Contract(Contract::prepare(linker, &component, version)?)
            }
            Inspected::Contract(Err(export)) => return Err(LoadError::UnsupportedContract(export)),
            Inspected::Plain(resolve, world) => {
                let tools = PlainTools::from_world(&resolve, world, rules);
                Kind::Plain(Plain::prepare(linker, &component, tools)?)
            }
            Inspected::Undecoded(why) => Kind::Contract(
                // Its exports' names still say which version it is.
                Contract::prepare(
                    linker,
                    &component,
                    if component
                        .get_export_index(None, "toolcage:tool/tool@0.1.0")
                        .is_some()
                    {
                        contract::Version::V1
                    } else {
                        contract::Version::V2
                    },
                )
                .map_err(|error| match error {
                    LoadError::Contract(message) => LoadError::Contract(format!(
                        "{message} (and its type could not be read as WIT: {why})"
                    )),
                    other => other,
                })?,
            ),
        };
        Ok(Loaded {
            prepared: Prepared {
                kind,
                ready: ready::Pool::default(),
            },
            imports,
            from_cache,
        })
    }

    /// The interfaces the component in `bytes` imports, if it compiles:
    /// what a file that failed to load asked for.
    pub fn imports_of(&self, bytes: &[u8], digest: &str) -> Option<Vec<String>> {
        engine::compile(
            &self.engine,
            &self.engine_key,
            self.cache_dir.as_deref(),
            bytes,
            digest,
        )
        .ok()
        .map(|(component, _)| engine::imports(&self.engine, &component))
    }

    /// Whether a fresh instance may be made now (`reset::ResetGuard::check`).
    fn fresh(&self) -> Result<(), CallFailure> {
        self.reset.check().map_err(CallFailure::Refused)
    }

    /// A fresh store for a run with nothing granted.
    fn bare(&self, limits: &Limits) -> Run {
        Run::start(
            &self.engine,
            &self.ticker,
            self.fuel_metering,
            limits,
            CallGrants::none(),
            None,
        )
    }

    /// What the component describes (its tools), in a fresh instance under
    /// `limits`.
    ///
    /// # Errors
    ///
    /// The call fails as a tool call can (trap, limits).
    pub async fn describe(
        &self,
        component: &Prepared,
        limits: &Limits,
    ) -> Result<Vec<RawDescriptor>, CallFailure> {
        self.fresh()?;
        // The semaphore is never closed.
        let _slot = self.load_permits.acquire().await;
        let mut run = self.bare(limits);
        let cancel = CancellationToken::new();
        match &component.kind {
            Kind::Contract(c) => c.describe(&mut run, limits, &cancel).await,
            // Read from its WIT at load: nothing runs.
            Kind::Plain(p) => Ok(p.describe()),
        }
    }

    /// The resources, templates and prompts the component lists, in one
    /// fresh instance under `limits` (none without a fresh instance if it
    /// serves neither).
    ///
    /// # Errors
    ///
    /// The calls fail as a tool call can (trap, limits, mistyped export).
    pub async fn list_extras(
        &self,
        component: &Prepared,
        limits: &Limits,
    ) -> Result<RawExtras, CallFailure> {
        if !component.has_resources() && !component.has_prompts() {
            return Ok(RawExtras::default());
        }
        self.fresh()?;
        let _slot = self.load_permits.acquire().await;
        let mut run = self.bare(limits);
        let cancel = CancellationToken::new();
        match &component.kind {
            Kind::Contract(c) => c.list_extras(&mut run, limits, &cancel).await,
            Kind::Plain(_) => Ok(RawExtras::default()),
        }
    }

    /// Check `arguments` for tool `name` the way the component's kind can
    /// before anything runs: a plain component's parameters are typed, so
    /// a value that does not convert is refused with its path and the
    /// expected type (`$.options.limit: expected an integer in 0..=255
    /// (u8), got 300`). The contract's tools check their own.
    ///
    /// # Errors
    ///
    /// The first argument that does not fit, in words.
    pub fn check_arguments(
        &self,
        component: &Prepared,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Result<Checked, String> {
        match &component.kind {
            Kind::Contract(_) => Ok(Checked::default()),
            Kind::Plain(p) => p.check_arguments(name, arguments).map(Checked),
        }
    }

    /// Run one call in a fresh instance; see [`CallSpec`].
    pub async fn call(&self, component: &Prepared, spec: CallSpec<'_>) -> CallReport {
        let CallSpec {
            name,
            arguments,
            checked,
            limits,
            grants,
            events,
            cancel,
            inline,
        } = spec;
        let started = Instant::now();
        // A fresh instance made ahead of this call, bound to it now; else
        // one made here.
        let (mut run, instance) = match component.ready.take(limits.memory_bytes) {
            Some(ready) => {
                tracing::debug!(tool = name, "call on an instance made ahead of it");
                let mut run = ready.run;
                run.bind(limits, grants, events);
                (run, Some(ready.instance))
            }
            None => (
                Run::start(
                    &self.engine,
                    &self.ticker,
                    self.fuel_metering,
                    limits,
                    grants,
                    events,
                ),
                None,
            ),
        };
        run.yield_fuel = inline.then_some(INLINE_YIELD_FUEL);
        // Checked after taking an instance made ahead, so that it too is
        // dropped unused.
        let outcome = match (self.fresh(), &component.kind, instance) {
            (Err(refused), _, _) => Err(refused),
            (Ok(()), Kind::Contract(c), instance) => {
                let instance = match instance {
                    Some(ReadyInstance::Contract(i)) => Some(i),
                    _ => None,
                };
                c.call(&mut run, instance, name, arguments, limits, cancel)
                    .await
            }
            (Ok(()), Kind::Plain(p), instance) => {
                let instance = match instance {
                    Some(ReadyInstance::Plain(i)) => Some(i),
                    _ => None,
                };
                p.call(
                    &mut run,
                    instance,
                    name,
                    (arguments, checked.0),
                    limits,
                    cancel,
                )
                .await
            }
        };
        CallReport {
            outcome,
            fuel_used: run.fuel_used,
            peak_memory_bytes: run.peak_memory,
            duration: started.elapsed(),
            stdout: run.stdout.take(),
            stderr: run.stderr.take(),
            net: std::mem::take(&mut run.net),
            spent: crate::call::Spent::new(run),
        }
    }

    /// Make an instance of `component` ahead of its next call, under
    /// `limits` (the last caller's), if the component may have one and a
    /// ready slot is free; else nothing. Run it after a call, off that
    /// call's path; `inline`: on the thread that reads requests, so it
    /// yields every [`INLINE_YIELD_FUEL`] as an inline call does.
    pub async fn make_ready(&self, component: &Prepared, limits: &Limits, inline: bool) {
        if !component.ready.wants_more() || self.fresh().is_err() {
            return;
        }
        let Ok(slot) = std::sync::Arc::clone(&self.ready_slots).try_acquire_owned() else {
            return;
        };
        let mut run = self.bare(limits);
        run.yield_fuel = inline.then_some(INLINE_YIELD_FUEL);
        // Made ahead, for no call yet: nothing cancels it (a token made
        // once, not one allocated per instance).
        static NEVER: std::sync::LazyLock<CancellationToken> =
            std::sync::LazyLock::new(CancellationToken::new);
        let started = Instant::now();
        let instance = match &component.kind {
            Kind::Contract(c) => c
                .instantiate(&mut run, limits, &NEVER)
                .await
                .map(ReadyInstance::Contract),
            Kind::Plain(p) => p
                .instantiate(&mut run, limits, &NEVER)
                .await
                .map(ReadyInstance::Plain),
        };
        match instance {
            Ok(instance) => component
                .ready
                .offer(run, instance, slot, started.elapsed()),
            Err(failure) => {
                tracing::debug!(%failure, "could not make an instance ahead of a call");
            }
        }
    }

    /// Read resource `uri` from the component in a fresh instance under
    /// `limits`, with nothing granted but `roots` (the operator's
    /// `[resources] roots`, read-only). `Ok(Err(message))` is the
    /// component's own refusal.
    ///
    /// # Errors
    ///
    /// The read fails as a tool call can (trap, limits, result too large),
    /// or the component does not serve resources.
    pub async fn read_resource(
        &self,
        component: &Prepared,
        uri: &str,
        limits: &Limits,
        roots: &[crate::grants::files::Root],
        cancel: &CancellationToken,
    ) -> Result<Result<Vec<ResourceContent>, String>, CallFailure> {
        self.fresh()?;
        let mut run = Run::start(
            &self.engine,
            &self.ticker,
            self.fuel_metering,
            limits,
            CallGrants::files_only(roots),
            None,
        );
        match &component.kind {
            Kind::Contract(c) => c.read_resource(&mut run, uri, limits, cancel).await,
            Kind::Plain(_) => Err(CallFailure::Trap("does not export resources".into())),
        }
    }

    /// Get prompt `name` with `arguments` (a JSON object as text) from the
    /// component in a fresh instance under `limits`, with nothing granted
    /// but the client's `services` (it may ask the user, as a call may).
    /// `Ok(Err(message))` is the component's own refusal.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::read_resource`]; also [`CallFailure::InputRequired`]
    /// when it stopped to ask (replay).
    pub async fn get_prompt(
        &self,
        component: &Prepared,
        name: &str,
        arguments: &str,
        limits: &Limits,
        services: Option<std::sync::Arc<dyn crate::call::ClientServices>>,
        cancel: &CancellationToken,
    ) -> Result<Result<PromptOutput, String>, CallFailure> {
        self.fresh()?;
        let mut run = Run::start(
            &self.engine,
            &self.ticker,
            self.fuel_metering,
            limits,
            CallGrants::client_only(services.as_ref()),
            None,
        );
        match &component.kind {
            Kind::Contract(c) => {
                c.get_prompt(&mut run, name, arguments, limits, cancel)
                    .await
            }
            Kind::Plain(_) => Err(CallFailure::Trap("does not export prompts".into())),
        }
    }

    /// Complete `request` with the component serving its target, in a
    /// fresh instance under `limits` with nothing granted: an empty
    /// completion for a component that does not serve completions.
    /// `Ok(Err(message))` is the component's own refusal.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::read_resource`].
    pub async fn complete(
        &self,
        component: &Prepared,
        request: &crate::call::CompletionRequest,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Result<crate::call::Completion, String>, CallFailure> {
        self.fresh()?;
        let mut run = self.bare(limits);
        match &component.kind {
            Kind::Contract(c) => c.complete(&mut run, request, limits, cancel).await,
            Kind::Plain(_) => Ok(Ok(crate::call::Completion::default())),
        }
    }
}

/// Why a component could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The file is not a WebAssembly component at all.
    #[error("{0}")]
    NotAComponent(String),
    /// Compilation failed.
    #[error("failed to compile: {0}")]
    Compile(String),
    /// Imports something the sandbox does not provide.
    #[error("cannot be linked: {0}")]
    Link(String),
    /// Imports what the sandbox does not provide (found before compiling).
    #[error("{}", missing_message(.0))]
    Missing(Vec<Missing>),
    /// Does not export the toolcage contract.
    #[error("does not export the toolcage contract (`toolcage:tool/tool@0.2.0`, or `@0.1.0`): {0}")]
    Contract(String),
    /// Exports a version of the contract this host does not serve.
    #[error(
        "exports `{0}`, a version of the toolcage contract this toolcage does not serve (it serves \
         0.1 and 0.2); build the tool against `guest-sdk/wit/tool.wit` of this release, or upgrade toolcage"
    )]
    UnsupportedContract(String),
}

/// The message of [`LoadError::Missing`]: every missing import, and what
/// the sandbox provides instead.
fn missing_message(missing: &[Missing]) -> String {
    let names: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    format!(
        "cannot be linked: it imports {} {}, which toolcage does not provide; toolcage provides WASI 0.2 \
         (`wasi:cli`, `wasi:clocks`, `wasi:filesystem`, `wasi:io`, `wasi:random`, `wasi:sockets` denied, \
         `wasi:http` under the tool's network grant), `wasi:config/store` (the tool's `config` grant) \
         and `toolcage:tool/host`",
        if names.len() == 1 {
            "interface"
        } else {
            "interfaces"
        },
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}
