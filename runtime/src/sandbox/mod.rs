//! The sandbox: the only module that touches wasmtime.
//!
//! One [`Sandbox`] owns the `Engine` (pooling allocator, fuel metering, epoch
//! interruption), the `Linker` (WASI 0.2 plus the `toolcage:tool/host`
//! imports) and the on-disk compile cache. A component is compiled once
//! ([`Sandbox::compile`]) and pre-instantiated once ([`Sandbox::prepare`]);
//! every call then gets a fresh `Store` and instance built from the call's
//! [`Limits`], as `wasmtime serve` does per request.
//!
//! Invariants:
//! - Deny by default: each `WasiCtx` starts from `WasiCtxBuilder::new()`
//!   (no environment, no sockets, no stdin) and preopens only the call's
//!   effective roots (see `roots`), read-only ones read-only. Guest stdout and stderr go to bounded in-memory
//!   buffers, never to the process's stdout (which, over stdio, is the
//!   protocol).
//! - Every call runs under fuel, a memory cap, a deadline and cancellation.
//!   The epoch ticker makes running guests yield every [`EPOCH_TICK`], so the
//!   deadline and cancellation (a `select!` around the call future) also stop
//!   a guest that never calls the host; dropping the future discards the
//!   store, which is never reused.
//! - A trap never escapes as a panic: every failure is a [`CallFailure`].

mod files;

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::config::{EnvVar, Limits, MAX_MEMORY_MIB, Mode};
use crate::json;
use crate::net::{NetGate, NetGrant, NetLimits, NetRecord};
use crate::redact::Scrub;
use crate::roots::EffectiveRoot;

/// Host bindings generated from `guest-sdk/wit/tool.wit`.
#[allow(missing_docs)]
mod bindings {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "tool-component",
        imports: {
            "toolcage:tool/host.elicit": async | trappable,
            "toolcage:tool/host.sample": async | trappable,
        },
        exports: { default: async },
    });
}

/// Host bindings for the `full-component` world: only its `resources` and
/// `prompts` exports are used (the imports and shared types are those of
/// [`bindings`], so one linker serves both worlds).
#[allow(missing_docs)]
mod full_bindings {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "full-component",
        exports: { default: async },
        with: {
            "toolcage:tool/types": super::bindings::toolcage::tool::types,
            "toolcage:tool/host": super::bindings::toolcage::tool::host,
        },
    });
}

pub use bindings::ToolComponentPre;
use full_bindings::exports::toolcage::tool::prompts as wit_prompts;
use full_bindings::exports::toolcage::tool::resources as wit_resources;

/// The export name of the optional resources interface.
const RESOURCES_EXPORT: &str = "toolcage:tool/resources@0.1.0";
/// The export name of the optional prompts interface.
const PROMPTS_EXPORT: &str = "toolcage:tool/prompts@0.1.0";
use bindings::toolcage::tool::host as wit_host;
use bindings::toolcage::tool::host::Level as WitLevel;
use bindings::toolcage::tool::types as wit;

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

/// How much of each pooled memory and table slot stays mapped between
/// instances; see `Sandbox::new`.
const RESIDENT_BYTES: usize = 2 * 1024 * 1024;

/// Instances beyond the call limit kept for loading (`describe`) while calls
/// run; loads take one of these each ([`Sandbox::load_permits`]), so a
/// folder of many files never eats into the calls' share of the pool.
const LOAD_SLOTS: u32 = 16;

/// Core module instances one component instance may create. Measured
/// (wasmtime's own count, per toolchain): a Rust `wasm32-wasip2` component
/// creates 3, componentize-js 4, C with the preview1 adapter 4,
/// componentize-py 14; room is left for Python extension libraries. The
/// pool holds this many per slot, so one call can never take another
/// call's share.
pub const MAX_CORE_INSTANCES_PER_CALL: u32 = 32;
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

/// What one transfer from the guest to the host may carry beyond the
/// result-size limit: the host-side representation of the result's list
/// items (wasmtime counts each lifted list element at its host size).
const TRANSFER_SLACK: u64 = 64 * 1024;

/// Settings the engine is built with.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// Calls that may run at once; sizes the instance pool.
    pub max_concurrent_calls: u32,
    /// Where compiled components are cached; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Meter guest instructions with fuel (on unless the operator turns it
    /// off with `--no-fuel`, e.g. to measure what metering costs; deadline
    /// and memory cap still apply without it).
    pub fuel_metering: bool,
}

/// Owns the engine, the linker and the compile cache.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
    cache_dir: Option<PathBuf>,
    fuel_metering: bool,
    /// Key of everything that makes a compiled artefact valid besides the
    /// input: the engine's settings and this build of toolcage.
    engine_key: String,
    /// One per instance slot kept for loading: `describe` and the listing
    /// of resources and prompts wait for one, so loading a folder of many
    /// files at once never takes the slots calls need.
    load_permits: tokio::sync::Semaphore,
}

impl Sandbox {
    /// Build the engine and linker and start the epoch ticker.
    ///
    /// # Errors
    ///
    /// The engine configuration is rejected (for example, the host cannot
    /// reserve the virtual memory for the instance pool).
    pub fn new(settings: &SandboxSettings) -> anyhow::Result<Self> {
        let mut config = wasmtime::Config::new();
        config.consume_fuel(settings.fuel_metering);
        config.epoch_interruption(true);
        // Guest stack (512 KiB) well inside the fiber stack (2 MiB) so a deep
        // recursion is a clean stack-overflow trap, not a host crash.
        config.max_wasm_stack(512 * 1024);
        config.async_stack_size(2 * 1024 * 1024);

        let slots = settings.max_concurrent_calls + LOAD_SLOTS;
        let mut pool = PoolingAllocationConfig::default();
        // Every slot can hold the largest instance a call may create, so the
        // totals are consistent with the per-instance maxima: no number of
        // calls of one tool can exhaust what another tool's call needs.
        pool.total_component_instances(slots);
        pool.max_core_instances_per_component(MAX_CORE_INSTANCES_PER_CALL);
        pool.max_memories_per_component(MAX_MEMORIES_PER_CALL);
        pool.max_tables_per_component(MAX_TABLES_PER_CALL);
        pool.total_core_instances(slots * MAX_CORE_INSTANCES_PER_CALL);
        pool.total_memories(slots * MAX_MEMORIES_PER_CALL);
        pool.total_tables(slots * MAX_TABLES_PER_CALL);
        pool.total_stacks(slots);
        pool.max_memory_size(usize::try_from(MAX_MEMORY_MIB * 1024 * 1024)?);
        // Keep the first pages of each memory and table slot mapped between
        // instances instead of returning them to the kernel: a fresh
        // instance per call would otherwise fault its working set back in
        // every time (a profile showed page faults and TLB flushes as a
        // visible share of a small call). The rest is still reset with
        // madvise, so a slot never holds more than this much between calls.
        pool.linear_memory_keep_resident(RESIDENT_BYTES);
        pool.table_keep_resident(RESIDENT_BYTES);
        // With PAGEMAP_SCAN (Linux 6.7+), resetting a slot rewrites only the
        // pages the instance dirtied, not all of the resident bytes: a call
        // that touched 300 KiB costs 300 KiB of memset, not 2 MiB. Older
        // kernels fall back to the plain reset.
        pool.pagemap_scan(wasmtime::Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));

        let engine = Engine::new(&config)?;
        let engine_key = {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            format!("{}-{:016x}", env!("CARGO_PKG_VERSION"), hasher.finish())
        };

        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        // `open-at` that never blocks on a special file (see `files`).
        files::add_to_linker(&mut linker)?;
        // Every tool may import `wasi:http`; what it can reach is decided
        // per request by its grant (`net::NetGate`), so a tool without a
        // grant still loads and gets a clear refusal.
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        bindings::ToolComponent::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |state| {
            state
        })?;

        spawn_epoch_ticker(&engine);
        Ok(Sandbox {
            engine,
            linker,
            cache_dir: settings.cache_dir.clone(),
            fuel_metering: settings.fuel_metering,
            engine_key,
            load_permits: tokio::sync::Semaphore::new(LOAD_SLOTS as usize),
        })
    }

    /// Compile `bytes` (whose SHA-256 is `digest`), from the cache when it
    /// holds them. Blocking and CPU-heavy: run it on the blocking pool.
    ///
    /// # Errors
    ///
    /// The bytes are not a component or do not compile.
    pub fn compile(&self, bytes: &[u8], digest: &str) -> Result<Compiled, LoadError> {
        check_component_header(bytes)?;
        let cache_file = self
            .cache_dir
            .as_ref()
            .map(|dir| dir.join(format!("{digest}-{}.cwasm", self.engine_key)));
        if let Some(path) = cache_file.as_ref().filter(|path| path.exists()) {
            // SAFETY: the cache directory is the operator's (created by
            // toolcage, mode 0700); its files are artefacts we serialised
            // with this exact engine configuration (the key in the name).
            // A truncated or foreign file fails to deserialise, and we
            // fall back to compiling.
            match unsafe { Component::deserialize_file(&self.engine, path) } {
                Ok(component) => {
                    return Ok(Compiled {
                        component,
                        from_cache: true,
                    });
                }
                Err(error) => tracing::warn!(
                    file = %path.display(),
                    %error,
                    "discarding unreadable compile-cache entry"
                ),
            }
        }

        let component = Component::new(&self.engine, bytes)
            .map_err(|error| LoadError::Compile(format!("{error:#}")))?;
        if let Some(path) = &cache_file
            && let Err(error) = write_cache(path, &component)
        {
            tracing::warn!(file = %path.display(), %error, "cannot write compile cache");
        }
        Ok(Compiled {
            component,
            from_cache: false,
        })
    }

    /// Link `component` against WASI and the host interface, once.
    ///
    /// # Errors
    ///
    /// The component imports something the host does not provide, or does
    /// not export `toolcage:tool/tool@0.1.0`.
    pub fn prepare(&self, component: &Component) -> Result<ToolComponentPre<HostState>, LoadError> {
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|error| LoadError::Link(format!("{error:#}")))?;
        ToolComponentPre::new(pre).map_err(|error| LoadError::Contract(format!("{error:#}")))
    }

    /// Call `describe` in a fresh instance under `limits`.
    ///
    /// # Errors
    ///
    /// The call fails as a tool call can (trap, limits).
    pub async fn describe(
        &self,
        pre: &ToolComponentPre<HostState>,
        limits: &Limits,
    ) -> Result<Vec<RawDescriptor>, CallFailure> {
        // The semaphore is never closed.
        let _slot = self.load_permits.acquire().await;
        let mut run = self.start(limits, &[], &Access::none(), None, None, false);
        let cancel = CancellationToken::new();
        let outcome = run
            .run(limits, &cancel, async |store| {
                let instance = pre.instantiate_async(&mut *store).await?;
                instance
                    .toolcage_tool_tool()
                    .call_describe(&mut *store)
                    .await
            })
            .await;
        outcome.map(|descriptors| descriptors.into_iter().map(RawDescriptor::from).collect())
    }

    /// Run one call in a fresh instance; see [`CallSpec`].
    pub async fn call(&self, spec: CallSpec<'_>) -> CallReport {
        let CallSpec {
            pre,
            name,
            arguments,
            limits,
            roots,
            events,
            services,
            sampling_allowed,
            access,
            cancel,
        } = spec;
        let started = Instant::now();
        let mut run = self.start(limits, roots, &access, events, services, sampling_allowed);
        let outcome = run
            .run(limits, cancel, async |store| {
                let instance = pre.instantiate_async(&mut *store).await?;
                instance
                    .toolcage_tool_tool()
                    .call_call(&mut *store, name, arguments)
                    .await
            })
            .await;
        let outcome = outcome.and_then(|result| ToolResult::from_wit(result, limits));
        CallReport {
            outcome,
            fuel_used: run.fuel_used,
            peak_memory_bytes: run.peak_memory,
            duration: started.elapsed(),
            stdout: run.stdout.take(),
            stderr: run.stderr.take(),
            net: run.net,
        }
    }

    /// The interfaces `component` imports, without versions, sorted and
    /// deduplicated.
    pub fn imports(&self, component: &Component) -> Vec<String> {
        let mut imports: Vec<String> = component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| match name.split_once('@') {
                Some((name, _version)) => name.to_owned(),
                None => name.to_owned(),
            })
            .collect();
        imports.sort();
        imports.dedup();
        imports
    }

    /// Which optional interfaces (`resources`, `prompts`) `pre`'s component
    /// exports, with their export indices looked up once.
    ///
    /// # Errors
    ///
    /// An interface is exported but lacks one of its functions.
    pub fn extras(&self, pre: &ToolComponentPre<HostState>) -> Result<Extras, LoadError> {
        let component = pre.instance_pre().component();
        let contract = |error: wasmtime::Error| LoadError::Contract(format!("{error:#}"));
        let resources = match component.get_export_index(None, RESOURCES_EXPORT) {
            Some(_) => {
                Some(wit_resources::GuestIndices::new(pre.instance_pre()).map_err(contract)?)
            }
            None => None,
        };
        let prompts = match component.get_export_index(None, PROMPTS_EXPORT) {
            Some(_) => Some(wit_prompts::GuestIndices::new(pre.instance_pre()).map_err(contract)?),
            None => None,
        };
        Ok(Extras { resources, prompts })
    }

    /// Call `list-resources`, `list-templates` and `list-prompts` (those the
    /// component exports) in one fresh instance under `limits`.
    ///
    /// # Errors
    ///
    /// The calls fail as a tool call can (trap, limits, mistyped export).
    pub async fn list_extras(
        &self,
        pre: &ToolComponentPre<HostState>,
        extras: &Extras,
        limits: &Limits,
    ) -> Result<RawExtras, CallFailure> {
        if extras.resources.is_none() && extras.prompts.is_none() {
            return Ok(RawExtras::default());
        }
        let _slot = self.load_permits.acquire().await;
        let mut run = self.start(limits, &[], &Access::none(), None, None, false);
        let cancel = CancellationToken::new();
        run.run(limits, &cancel, async |store| {
            let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
            let mut raw = RawExtras::default();
            if let Some(indices) = &extras.resources {
                let guest = indices.load(&mut *store, &instance)?;
                raw.resources = guest
                    .call_list_resources(&mut *store)
                    .await?
                    .into_iter()
                    .map(RawResource::from)
                    .collect();
                raw.templates = guest
                    .call_list_templates(&mut *store)
                    .await?
                    .into_iter()
                    .map(RawTemplate::from)
                    .collect();
            }
            if let Some(indices) = &extras.prompts {
                let guest = indices.load(&mut *store, &instance)?;
                raw.prompts = guest
                    .call_list_prompts(&mut *store)
                    .await?
                    .into_iter()
                    .map(RawPrompt::from)
                    .collect();
            }
            Ok(raw)
        })
        .await
    }

    /// Read resource `uri` from the component in a fresh instance under
    /// `limits`, with no roots and no client services. `Ok(Err(message))` is
    /// the component's own refusal.
    ///
    /// # Errors
    ///
    /// The read fails as a tool call can (trap, limits, result too large),
    /// or the component does not export `resources`.
    pub async fn read_resource(
        &self,
        pre: &ToolComponentPre<HostState>,
        extras: &Extras,
        uri: &str,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Result<Vec<ResourceContent>, String>, CallFailure> {
        let Some(indices) = &extras.resources else {
            return Err(CallFailure::Trap("does not export resources".into()));
        };
        let mut run = self.start(limits, &[], &Access::none(), None, None, false);
        let outcome = run
            .run(limits, cancel, async |store| {
                let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
                let guest = indices.load(&mut *store, &instance)?;
                guest.call_read(&mut *store, uri).await
            })
            .await;
        run.log_output();
        let contents = match outcome? {
            Ok(contents) => contents,
            Err(message) => return Ok(Err(message)),
        };
        let size: u64 = contents
            .iter()
            .map(|c| {
                (ITEM_FRAMING
                    + json::escaped_len(&c.uri)
                    + c.mime_type.as_deref().map_or(0, json::escaped_len)
                    + body_len(&c.body)) as u64
            })
            .sum();
        check_size(size, limits)?;
        Ok(Ok(contents
            .into_iter()
            .map(|c| ResourceContent {
                uri: c.uri,
                mime_type: c.mime_type,
                body: body_from_wit(c.body),
            })
            .collect()))
    }

    /// Get prompt `name` with `arguments` (a JSON object as text) from the
    /// component in a fresh instance under `limits`. `Ok(Err(message))` is
    /// the component's own refusal.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::read_resource`].
    pub async fn get_prompt(
        &self,
        pre: &ToolComponentPre<HostState>,
        extras: &Extras,
        name: &str,
        arguments: &str,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Result<PromptOutput, String>, CallFailure> {
        let Some(indices) = &extras.prompts else {
            return Err(CallFailure::Trap("does not export prompts".into()));
        };
        let mut run = self.start(limits, &[], &Access::none(), None, None, false);
        let outcome = run
            .run(limits, cancel, async |store| {
                let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
                let guest = indices.load(&mut *store, &instance)?;
                guest.call_get(&mut *store, name, arguments).await
            })
            .await;
        run.log_output();
        let result = match outcome? {
            Ok(result) => result,
            Err(message) => return Ok(Err(message)),
        };
        let size: u64 = result
            .description
            .as_deref()
            .map_or(0, |d| json::escaped_len(d) as u64)
            + result
                .messages
                .iter()
                .map(|m| content_len(&m.content))
                .sum::<u64>();
        check_size(size, limits)?;
        Ok(Ok(PromptOutput {
            description: result.description,
            messages: result
                .messages
                .into_iter()
                .map(|m| PromptMessage {
                    role: match m.role {
                        wit_prompts::Role::User => PromptRole::User,
                        wit_prompts::Role::Assistant => PromptRole::Assistant,
                    },
                    content: content_from_wit(m.content),
                })
                .collect(),
        }))
    }

    fn start(
        &self,
        limits: &Limits,
        roots: &[EffectiveRoot],
        access: &Access<'_>,
        events: Option<EventSink>,
        services: Option<Arc<dyn ClientServices>>,
        sampling_allowed: bool,
    ) -> Run {
        let stdout = Capture::new();
        let stderr = Capture::new();
        // Deny by default: no args, no sockets, no name lookup, stdin
        // closed; only the granted environment; files only under the
        // effective roots; HTTP only to granted hosts (`NetGate`). Clocks
        // and random numbers are on (WasiCtxBuilder's default).
        let mut builder = WasiCtxBuilder::new();
        builder
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .max_random_size(MAX_RANDOM_BYTES);
        for var in access.env {
            builder.env(&var.name, &var.value);
        }
        // File operations run inline on the runtime thread instead of hopping
        // to the blocking pool for each one: a `read_text_file` makes a dozen
        // of them, and the hops cost more than local disk I/O does. The
        // epoch ticker still bounds everything between host calls.
        builder.allow_blocking_current_thread(true);
        builder.stdout(stdout.clone()).stderr(stderr.clone());
        for root in roots {
            if let Err(error) = preopen(&mut builder, root) {
                tracing::warn!(root = %root.path.display(), %error, "cannot open root; the call runs without it");
            }
        }
        let wasi = builder.build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let state = HostState {
            wasi,
            table,
            limiter: CallLimiter {
                memory_limit: limits.memory_bytes,
                memory_used: 0,
                memory_denied: false,
            },
            events,
            log_messages: 0,
            progress_events: 0,
            services,
            sampling_allowed,
            http: {
                let mut http = wasmtime_wasi_http::WasiHttpCtx::new();
                http.set_field_size_limit(MAX_HTTP_FIELDS_BYTES);
                http
            },
            net: NetGate::new(
                Arc::from(access.tool),
                Arc::clone(access.network),
                NetLimits {
                    request_bytes: limits.http_request_bytes,
                    response_bytes: limits.http_response_bytes,
                    timeout: Duration::from_millis(limits.http_timeout_ms),
                },
                Arc::clone(access.secrets),
            ),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        // One transfer from the guest (a lifted argument of a host call, or
        // the call's result) may not exceed the result-size limit: wasmtime
        // counts the bytes before it allocates them, so a guest cannot make
        // the host copy one buffer a million times through an aliased list.
        let transfer = limits.max_result_bytes.saturating_add(TRANSFER_SLACK);
        store.set_hostcall_fuel(usize::try_from(transfer).unwrap_or(usize::MAX));
        store.set_max_component_handles(MAX_RESOURCES);
        Run {
            store: Some(store),
            stdout,
            stderr,
            fuel_used: 0,
            peak_memory: 0,
            metered: self.fuel_metering,
            net: NetRecord::default(),
        }
    }
}

/// Preopen `root` at its own absolute path. A root narrower than its grant
/// is opened beneath the grant (no `..`, no symlink out) and handed to
/// wasmtime as `/proc/self/fd/N`, which names the opened directory itself,
/// so nothing can be swapped between the check and the open.
fn preopen(builder: &mut WasiCtxBuilder, root: &EffectiveRoot) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd as _;

    let guest_path = root
        .path
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("the path is not UTF-8"))?;
    let perms = match root.mode {
        Mode::ReadOnly => FsPerms::ReadOnly,
        Mode::ReadWrite => FsPerms::ReadWrite,
    };
    let relative = root.relative();
    if relative.as_os_str().is_empty() {
        builder.preopened_dir(&root.grant, guest_path, perms)?;
        return Ok(());
    }
    let grant =
        cap_primitives::fs::open_ambient_dir(&root.grant, cap_primitives::ambient_authority())?;
    let dir = cap_primitives::fs::open_dir(&grant, relative)?;
    builder.preopened_dir(
        format!("/proc/self/fd/{}", dir.as_raw_fd()),
        guest_path,
        perms,
    )?;
    // `dir` closes here; wasmtime holds its own descriptor of the directory.
    Ok(())
}

/// One call: run tool `name` of the component `pre` with `arguments` (JSON
/// text) under `limits`, with `roots` preopened, forwarding `log`/`progress`
/// to `events`, stopping when `cancel` fires.
pub struct CallSpec<'a> {
    /// The pre-linked component.
    pub pre: &'a ToolComponentPre<HostState>,
    /// The tool's name.
    pub name: &'a str,
    /// The arguments, a JSON object as text.
    pub arguments: &'a str,
    /// The limits.
    pub limits: &'a Limits,
    /// The effective roots.
    pub roots: &'a [EffectiveRoot],
    /// Where guest events go.
    pub events: Option<EventSink>,
    /// Elicitation and sampling through the client, if it has a client.
    pub services: Option<Arc<dyn ClientServices>>,
    /// Whether the operator lets this tool sample.
    pub sampling_allowed: bool,
    /// Hosts and environment the tool is granted.
    pub access: Access<'a>,
    /// Cancellation.
    pub cancel: &'a CancellationToken,
}

/// What a run may reach beyond its roots: hosts over HTTP and environment
/// variables. Loading (`describe`, listing resources) and serving
/// resources and prompts get none.
pub struct Access<'a> {
    /// The tool's name, for refusal messages.
    pub tool: &'a str,
    /// Hosts it may reach over HTTP(S), and pinned addresses.
    pub network: &'a Arc<NetGrant>,
    /// Its environment.
    pub env: &'a [EnvVar],
    /// The values of its secrets, scrubbed from what the host logs.
    pub secrets: &'a Arc<[String]>,
}

impl Access<'static> {
    /// No network and no environment.
    pub fn none() -> Self {
        static NONE: std::sync::OnceLock<(Arc<NetGrant>, Arc<[String]>)> =
            std::sync::OnceLock::new();
        let (network, secrets) =
            NONE.get_or_init(|| (Arc::new(NetGrant::default()), Arc::from(Vec::new())));
        Access {
            tool: "(loading or serving a resource or prompt)",
            network,
            env: &[],
            secrets,
        }
    }
}

/// A compiled component.
pub struct Compiled {
    /// The component.
    pub component: Component,
    /// Whether it came from the compile cache.
    pub from_cache: bool,
}

/// One call in progress: the store and what is read back from it.
struct Run {
    store: Option<Store<HostState>>,
    stdout: Capture,
    stderr: Capture,
    fuel_used: u64,
    peak_memory: u64,
    /// Whether the engine meters fuel (`SandboxSettings::fuel_metering`).
    metered: bool,
    /// What the guest did on the network.
    net: NetRecord,
}

impl Run {
    /// Log what the guest wrote to stdout and stderr (debug level).
    fn log_output(&self) {
        for (stream, capture) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let bytes = capture.peek();
            if !bytes.is_empty() {
                tracing::debug!(stream, output = %String::from_utf8_lossy(&bytes).trim_end(), "guest output");
            }
        }
    }

    /// Run `body` on the store under the limits, mapping every way it can
    /// fail to a [`CallFailure`].
    async fn run<R>(
        &mut self,
        limits: &Limits,
        cancel: &CancellationToken,
        body: impl AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallFailure> {
        let Some(mut store) = self.store.take() else {
            return Err(CallFailure::Trap("store already used".into()));
        };
        if self.metered
            && let Err(error) = store.set_fuel(limits.fuel)
        {
            return Err(CallFailure::Trap(format!("cannot set fuel: {error}")));
        }
        // Yield to the executor at every epoch tick, so the select! below
        // regains control even from a guest spinning in a tight loop.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|_| Ok(wasmtime::UpdateDeadline::Yield(1)));

        let deadline = Duration::from_millis(limits.deadline_ms);
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(CallFailure::Cancelled),
            () = tokio::time::sleep(deadline) => Err(CallFailure::Deadline { limit_ms: limits.deadline_ms }),
            result = body(&mut store) => result.map_err(|error| self.classify(error, &store, limits)),
        };
        if self.metered {
            self.fuel_used = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        }
        self.peak_memory = store.data().limiter.memory_used;
        self.net = store.data().net.record();
        result
    }

    fn classify(
        &self,
        error: wasmtime::Error,
        store: &Store<HostState>,
        limits: &Limits,
    ) -> CallFailure {
        if let Some(pending) = error.downcast_ref::<PendingInput>() {
            return CallFailure::InputRequired(pending.clone());
        }
        let full = format!("{error:?}");
        if tracing::enabled!(tracing::Level::DEBUG) {
            // The error can carry what the guest handed the host.
            let scrub = Scrub::new(store.data().net.secrets());
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
            // 32-bit space.
            Some(Trap::MemoryOutOfBounds) if full.contains("wasm address 0xffff") => {
                return CallFailure::StackOverflow;
            }
            _ => {}
        }
        // A refused memory growth the tool handled does not explain a later
        // panic; the panic message does (and says the limit was hit).
        let memory_denied = store.data().limiter.memory_denied;
        if let Some(message) = panic_message(&self.stderr.peek()) {
            return CallFailure::Panic(if memory_denied {
                format!(
                    "{message} (after its memory limit of {} MiB refused to grow)",
                    limits.memory_bytes / (1024 * 1024)
                )
            } else {
                message
            });
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
}

/// The limit of the host's own a failure names, if it is one of them:
/// wasmtime's cap on one transfer from the guest (set from the result-size
/// limit), the resource table, the random-bytes cap.
fn host_limit(error: &wasmtime::Error, limits: &Limits) -> Option<CallFailure> {
    let root = error.root_cause();
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
fn panic_message(stderr: &[u8]) -> Option<String> {
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

/// Why a call (or `describe`) did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallFailure {
    /// Ran out of fuel.
    #[error("ran out of fuel (limit {limit})")]
    Fuel {
        /// The fuel it had.
        limit: u64,
    },
    /// Ran past its wall-clock deadline.
    #[error("exceeded its deadline (limit {limit_ms} ms)")]
    Deadline {
        /// The deadline.
        limit_ms: u64,
    },
    /// Tried to grow its memory past the cap.
    #[error("exceeded its memory limit (limit {} MiB)", limit_bytes / (1024 * 1024))]
    Memory {
        /// The cap.
        limit_bytes: u64,
    },
    /// Recursed past the guest stack.
    #[error("overflowed its stack (unbounded or too deep recursion)")]
    StackOverflow,
    /// Panicked; the message comes from its stderr.
    #[error("panicked: {0}")]
    Panic(String),
    /// Trapped for another reason.
    #[error("crashed: {0}")]
    Trap(String),
    /// Returned a result larger than the cap.
    #[error(
        "returned a result {}over the result size limit (limit {limit} bytes)",
        size.map(|size| format!("of {size} bytes, ")).unwrap_or_default()
    )]
    ResultTooLarge {
        /// Its size, when known (a result too large to copy out of the guest
        /// is refused before it is measured).
        size: Option<u64>,
        /// The cap.
        limit: u64,
    },
    /// Handed the host more than one transfer may carry (a host call's
    /// argument larger than the result-size limit).
    #[error(
        "passed more than {limit} bytes to the host in one call (the result size limit bounds every transfer)"
    )]
    Transfer {
        /// The cap.
        limit: u64,
    },
    /// Held too many host resources at once.
    #[error(
        "held more than {limit} host resources at once (files, streams, pollables, HTTP requests; limit {limit})"
    )]
    Resources {
        /// The cap.
        limit: usize,
    },
    /// Built HTTP headers or trailers larger than the host keeps.
    #[error(
        "built HTTP header fields larger than allowed (limit {limit} bytes for one request's or response's headers)"
    )]
    HttpFields {
        /// The cap.
        limit: usize,
    },
    /// Asked for more random bytes at once than the host gives.
    #[error("asked for more random bytes at once than allowed (limit {limit} bytes per request)")]
    Random {
        /// The cap.
        limit: u64,
    },
    /// Was cancelled by the client.
    #[error("was cancelled")]
    Cancelled,
    /// Stopped to ask the client something first (2026-07-28 replay).
    #[error("needs input from the client")]
    InputRequired(PendingInput),
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
    /// Does not export the toolcage contract.
    #[error("does not export the toolcage contract `toolcage:tool/tool@0.1.0`: {0}")]
    Contract(String),
}

/// The wasm binary header: magic, then version and layer. Core modules are
/// version 1 layer 0; components are version 0xd layer 1.
fn check_component_header(bytes: &[u8]) -> Result<(), LoadError> {
    match bytes {
        [0, b'a', b's', b'm', 0x0d, 0, 1, 0, ..] => Ok(()),
        [0, b'a', b's', b'm', 1, 0, 0, 0, ..] => Err(LoadError::NotAComponent(
            "is a core WebAssembly module, not a component; build it for \
             `wasm32-wasip2`, or wrap it with `wasm-tools component new`"
                .into(),
        )),
        [0, b'a', b's', b'm', ..] => Err(LoadError::NotAComponent(
            "is WebAssembly of an unsupported version or layer".into(),
        )),
        _ => Err(LoadError::NotAComponent(
            "is not a WebAssembly component (no `\\0asm` header)".into(),
        )),
    }
}

/// Write a serialised component atomically: to a temporary file in the same
/// folder, then rename, so a concurrent reader never sees half a file.
fn write_cache(path: &Path, component: &Component) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;

    use anyhow::Context as _;
    let bytes = component.serialize()?;
    let dir = path.parent().context("cache path has no folder")?;
    if !dir.is_dir() {
        // Private: a compiled artefact is trusted native code, so nobody else
        // may plant one here.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating `{}`", dir.display()))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing `{}`", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to `{}`", path.display()))?;
    Ok(())
}

/// Advance the engine's epoch every [`EPOCH_TICK`] until the engine is
/// dropped.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("toolcage-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        });
    if let Err(error) = spawned {
        // Without the ticker, guests never yield; deadlines then only fire
        // when a guest waits on the host. Loud, but not fatal.
        tracing::error!(%error, "cannot start the epoch ticker thread");
    }
}

/// Per-store state: WASI, the resource table, the limiter and where guest
/// events go.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: wasmtime_wasi_http::WasiHttpCtx,
    net: NetGate,
    limiter: CallLimiter,
    events: Option<EventSink>,
    log_messages: u32,
    progress_events: u32,
    services: Option<Arc<dyn ClientServices>>,
    sampling_allowed: bool,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for HostState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl bindings::toolcage::tool::types::Host for HostState {}

impl bindings::toolcage::tool::host::Host for HostState {
    fn log(&mut self, level: WitLevel, message: String) {
        if self.log_messages >= MAX_LOG_MESSAGES {
            return;
        }
        self.log_messages += 1;
        let message = if self.log_messages == MAX_LOG_MESSAGES {
            format!("{MAX_LOG_MESSAGES} log messages in one call; dropping the rest")
        } else {
            truncate(message, MAX_LOG_MESSAGE_BYTES)
        };
        let level = LogLevel::from(level);
        if tracing::enabled!(tracing::Level::DEBUG) {
            let scrub = Scrub::new(self.net.secrets());
            tracing::debug!(?level, message = %scrub.text(&message, MAX_LOG_MESSAGE_BYTES), "guest log");
        }
        if let Some(events) = &self.events {
            events(GuestEvent::Log { level, message });
        }
    }

    async fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> wasmtime::Result<Result<wit_host::ElicitResponse, String>> {
        let Some(services) = self.services.clone() else {
            return Ok(Err("elicitation is not available here (no client)".into()));
        };
        // Whether the client can be asked at all comes first, before the
        // host spends anything on the request.
        if let Err(reason) = services.can(Ask::Elicit) {
            return Ok(Err(reason));
        }
        let schema = match check_elicitation(&message, &requested_schema) {
            Ok(schema) => schema,
            Err(reason) => return Ok(Err(reason)),
        };
        match services.elicit(message, schema).await {
            Ok(ElicitAnswer::Accept(values)) => {
                Ok(Ok(wit_host::ElicitResponse::Accept(values.to_string())))
            }
            Ok(ElicitAnswer::Decline) => Ok(Ok(wit_host::ElicitResponse::Decline)),
            Ok(ElicitAnswer::Cancel) => Ok(Ok(wit_host::ElicitResponse::Cancel)),
            Err(ServiceError::Refused(reason)) => Ok(Err(reason)),
            Err(ServiceError::InputRequired(pending)) => Err(wasmtime::Error::new(pending)),
        }
    }

    async fn sample(
        &mut self,
        request: wit_host::SamplingRequest,
    ) -> wasmtime::Result<Result<wit_host::SamplingResponse, String>> {
        if !self.sampling_allowed {
            return Ok(Err(
                "this tool may not sample: it spends the user's tokens, and the operator \
                 has not allowed it (`allow_sampling = true` in the tool's config)"
                    .into(),
            ));
        }
        let Some(services) = self.services.clone() else {
            return Ok(Err("sampling is not available here (no client)".into()));
        };
        if let Err(reason) = services.can(Ask::Sample) {
            return Ok(Err(reason));
        }
        if let Err(reason) = check_sampling(&request) {
            return Ok(Err(reason));
        }
        let request = SampleRequest {
            messages: request
                .messages
                .into_iter()
                .map(|m| {
                    let role = match m.role {
                        wit_host::Role::User => "user",
                        wit_host::Role::Assistant => "assistant",
                    };
                    (role.to_owned(), m.text)
                })
                .collect(),
            system_prompt: request.system_prompt,
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        };
        match services.sample(request).await {
            Ok(answer) => Ok(Ok(wit_host::SamplingResponse {
                text: answer.text,
                model: answer.model,
                stop_reason: answer.stop_reason,
            })),
            Err(ServiceError::Refused(reason)) => Ok(Err(reason)),
            Err(ServiceError::InputRequired(pending)) => Err(wasmtime::Error::new(pending)),
        }
    }

    fn progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        if !done.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return;
        }
        if self.progress_events >= MAX_PROGRESS_EVENTS {
            return;
        }
        self.progress_events += 1;
        if let Some(events) = &self.events {
            events(GuestEvent::Progress {
                done,
                total,
                message: message.map(|m| truncate(m, MAX_PROGRESS_MESSAGE_BYTES)),
            });
        }
    }
}

/// Longest elicitation message a guest may send, in bytes.
pub const MAX_ELICIT_MESSAGE_BYTES: usize = 16 * 1024;
/// Largest requested schema of an elicitation, in bytes of JSON text.
pub const MAX_ELICIT_SCHEMA_BYTES: usize = 64 * 1024;
/// Most messages in one sampling request.
pub const MAX_SAMPLE_MESSAGES: usize = 100;
/// Most text (all messages and the system prompt) in one sampling request,
/// in bytes.
pub const MAX_SAMPLE_TEXT_BYTES: usize = 1024 * 1024;

/// Check an elicitation a guest asks for and parse its schema: within the
/// size caps, and a flat object of primitive properties, as MCP requires
/// of elicitation forms. The error is the message for the guest.
fn check_elicitation(message: &str, schema: &str) -> Result<serde_json::Value, String> {
    if message.len() > MAX_ELICIT_MESSAGE_BYTES {
        return Err(format!(
            "the elicitation message is {} bytes, over the limit of {MAX_ELICIT_MESSAGE_BYTES}",
            message.len()
        ));
    }
    if schema.len() > MAX_ELICIT_SCHEMA_BYTES {
        return Err(format!(
            "the requested schema is {} bytes, over the limit of {MAX_ELICIT_SCHEMA_BYTES}",
            schema.len()
        ));
    }
    // Within the text cap, so the parsed form is bounded by the budget too.
    let schema = json::parse(schema, MAX_ELICIT_SCHEMA_BYTES * 4)
        .map_err(|error| format!("the requested schema is not valid JSON: {error}"))?;
    let flat = schema.get("type").and_then(serde_json::Value::as_str) == Some("object")
        && schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .is_none_or(|properties| {
                properties.values().all(|property| {
                    property.get("properties").is_none()
                        && matches!(
                            property.get("type").and_then(serde_json::Value::as_str),
                            Some("string" | "number" | "integer" | "boolean" | "array") | None
                        )
                })
            });
    if !flat {
        return Err(
            "the requested schema must be an object of primitive properties (string, number, \
             integer, boolean, or an array of enum strings), as MCP requires of elicitation forms"
                .into(),
        );
    }
    Ok(schema)
}

/// Check a sampling request a guest asks for against the caps.
fn check_sampling(request: &wit_host::SamplingRequest) -> Result<(), String> {
    if request.messages.len() > MAX_SAMPLE_MESSAGES {
        return Err(format!(
            "the sampling request has {} messages, over the limit of {MAX_SAMPLE_MESSAGES}",
            request.messages.len()
        ));
    }
    let text: usize = request.messages.iter().map(|m| m.text.len()).sum::<usize>()
        + request.system_prompt.as_ref().map_or(0, String::len);
    if text > MAX_SAMPLE_TEXT_BYTES {
        return Err(format!(
            "the sampling request holds {text} bytes of text, over the limit of {MAX_SAMPLE_TEXT_BYTES}"
        ));
    }
    Ok(())
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
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
struct Capture(Arc<std::sync::Mutex<CaptureBuf>>);

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

    fn take(&self) -> CapturedOutput {
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

/// What a guest wrote to one output stream during a call.
#[derive(Debug, Clone, Default)]
pub struct CapturedOutput {
    /// The first [`CAPTURE_BYTES`] bytes.
    pub bytes: Vec<u8>,
    /// How many bytes past those were dropped.
    pub dropped: u64,
}

/// Something a running guest sent the host.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestEvent {
    /// A `log` call.
    Log {
        /// Its severity.
        level: LogLevel,
        /// Its text (bounded).
        message: String,
    },
    /// A `progress` call.
    Progress {
        /// Work done so far.
        done: f64,
        /// Total work, if known.
        total: Option<f64>,
        /// A message, if any.
        message: Option<String>,
    },
}

/// A kind of question a guest can put to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `elicitation/create`: a question for the user.
    Elicit,
    /// `sampling/createMessage`: a completion from the client's model.
    Sample,
}

/// Elicitation and sampling through the caller's client. The protocol
/// layer implements it per era: a request to the client (2025-x), or replay
/// with answers gathered so far (2026-07-28).
pub trait ClientServices: Send + Sync {
    /// Whether the client can be asked `ask` at all; checked before the host
    /// does any work on the guest's request. `Err` is the message for the
    /// guest.
    fn can(&self, ask: Ask) -> Result<(), String> {
        let _ = ask;
        Ok(())
    }
    /// Ask the user `message`, with a form described by `schema`.
    fn elicit(&self, message: String, schema: serde_json::Value) -> ServiceFuture<ElicitAnswer>;
    /// Ask the client's model for a completion.
    fn sample(&self, request: SampleRequest) -> ServiceFuture<SampleAnswer>;
    /// Ask the user to confirm a call before it runs (the host's own
    /// question, not the guest's).
    fn confirm(&self, message: String, schema: serde_json::Value) -> ServiceFuture<ElicitAnswer> {
        self.elicit(message, schema)
    }
}

/// What a [`ClientServices`] call returns.
pub type ServiceFuture<T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ServiceError>> + Send>>;

/// The user's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// Accepted, with these values (a JSON object).
    Accept(serde_json::Value),
    /// Declined.
    Decline,
    /// Dismissed.
    Cancel,
}

/// A completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRequest {
    /// `(role, text)` pairs; role is `user` or `assistant`.
    pub messages: Vec<(String, String)>,
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Token cap.
    pub max_tokens: u32,
    /// Temperature.
    pub temperature: Option<f64>,
}

/// A completion.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleAnswer {
    /// Its text.
    pub text: String,
    /// The model.
    pub model: String,
    /// Why it stopped.
    pub stop_reason: Option<String>,
}

/// Why a service call did not return an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ServiceError {
    /// Refused or impossible; the message goes to the guest.
    Refused(String),
    /// Not known yet: stop the call and ask the client (replay).
    InputRequired(PendingInput),
}

/// A question the call stopped on, keyed so a replay can find its answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("input required: `{key}`")]
pub struct PendingInput {
    /// Stable key of the question within the call (`elicit-0`, ...).
    pub key: String,
    /// The question.
    pub ask: PendingAsk,
}

/// The kind of question.
#[derive(Debug, Clone, PartialEq)]
pub enum PendingAsk {
    /// An elicitation.
    Elicit {
        /// The message.
        message: String,
        /// The form schema.
        schema: serde_json::Value,
    },
    /// A completion.
    Sample(SampleRequest),
}

/// Where a call's [`GuestEvent`]s go. Called on the runtime thread running
/// the guest: it must not block.
pub type EventSink = Arc<dyn Fn(GuestEvent) + Send + Sync>;

/// Log severity, in increasing order (syslog levels, as MCP uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl From<WitLevel> for LogLevel {
    fn from(level: WitLevel) -> Self {
        match level {
            WitLevel::Debug => LogLevel::Debug,
            WitLevel::Info => LogLevel::Info,
            WitLevel::Notice => LogLevel::Notice,
            WitLevel::Warning => LogLevel::Warning,
            WitLevel::Error => LogLevel::Error,
            WitLevel::Critical => LogLevel::Critical,
            WitLevel::Alert => LogLevel::Alert,
            WitLevel::Emergency => LogLevel::Emergency,
        }
    }
}

/// A descriptor as the component returned it, not yet validated.
#[derive(Debug, Clone)]
pub struct RawDescriptor {
    /// Tool name.
    pub name: String,
    /// Title.
    pub title: Option<String>,
    /// Description.
    pub description: String,
    /// Input schema, JSON text.
    pub input_schema: String,
    /// Output schema, JSON text.
    pub output_schema: Option<String>,
    /// Hints.
    pub annotations: Annotations,
}

/// Tool behaviour hints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl From<wit::Descriptor> for RawDescriptor {
    fn from(d: wit::Descriptor) -> Self {
        RawDescriptor {
            name: d.name,
            title: d.title,
            description: d.description,
            input_schema: d.input_schema,
            output_schema: d.output_schema,
            annotations: Annotations {
                read_only: d.annotations.read_only,
                destructive: d.annotations.destructive,
                idempotent: d.annotations.idempotent,
                open_world: d.annotations.open_world,
            },
        }
    }
}

/// The result of a call that ran to completion (it may still be an error
/// result the tool chose to return).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// What the model reads.
    pub content: Vec<Content>,
    /// Structured output, JSON text, not yet parsed or checked.
    pub structured: Option<String>,
    /// The tool reported an error.
    pub is_error: bool,
    /// Bytes of content and structured output as they will be sent (see
    /// `content_len`), as checked against the result-size limit.
    pub size: u64,
}

/// One content item of a result.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Content {
    Text(String),
    Image {
        data: Vec<u8>,
        mime_type: String,
    },
    Audio {
        data: Vec<u8>,
        mime_type: String,
    },
    Resource {
        uri: String,
        mime_type: Option<String>,
        body: ResourceBody,
    },
}

/// The body of an embedded resource.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum ResourceBody {
    Text(String),
    Blob(Vec<u8>),
}

impl ToolResult {
    /// Convert from the guest's result, enforcing the result-size limit.
    fn from_wit(result: wit::CallResult, limits: &Limits) -> Result<Self, CallFailure> {
        let size: u64 = result.content.iter().map(content_len).sum::<u64>()
            + result.structured.as_ref().map_or(0, |s| s.len() as u64);
        check_size(size, limits)?;
        Ok(ToolResult {
            content: result.content.into_iter().map(content_from_wit).collect(),
            structured: result.structured,
            is_error: result.is_error,
            size,
        })
    }
}

/// Refuse a result of `size` bytes over the result-size limit.
fn check_size(size: u64, limits: &Limits) -> Result<(), CallFailure> {
    if size > limits.max_result_bytes {
        return Err(CallFailure::ResultTooLarge {
            size: Some(size),
            limit: limits.max_result_bytes,
        });
    }
    Ok(())
}

/// The bytes a content item counts against the result-size limit: its size
/// as MCP sends it (text JSON-escaped, binary data base64-encoded, MIME
/// types and URIs included), plus its JSON framing, so an empty item still
/// costs something.
fn content_len(content: &wit::Content) -> u64 {
    (match content {
        wit::Content::Text(text) => ITEM_FRAMING + json::escaped_len(text),
        wit::Content::Image(media) | wit::Content::Audio(media) => {
            ITEM_FRAMING + json::base64_len(media.data.len()) + json::escaped_len(&media.mime_type)
        }
        wit::Content::Embedded(resource) => {
            ITEM_FRAMING
                + json::escaped_len(&resource.uri)
                + resource.mime_type.as_deref().map_or(0, json::escaped_len)
                + body_len(&resource.body)
        }
    }) as u64
}

/// What the JSON around one content item takes (`{"type":"image","data":,
/// "mimeType":}` and the like).
const ITEM_FRAMING: usize = 48;

/// A resource body as sent: text escaped, a blob base64-encoded.
fn body_len(body: &wit::ResourceBody) -> usize {
    match body {
        wit::ResourceBody::Text(text) => json::escaped_len(text),
        wit::ResourceBody::Blob(bytes) => json::base64_len(bytes.len()),
    }
}

fn body_from_wit(body: wit::ResourceBody) -> ResourceBody {
    match body {
        wit::ResourceBody::Text(t) => ResourceBody::Text(t),
        wit::ResourceBody::Blob(b) => ResourceBody::Blob(b),
    }
}

fn content_from_wit(content: wit::Content) -> Content {
    match content {
        wit::Content::Text(text) => Content::Text(text),
        wit::Content::Image(m) => Content::Image {
            data: m.data,
            mime_type: m.mime_type,
        },
        wit::Content::Audio(m) => Content::Audio {
            data: m.data,
            mime_type: m.mime_type,
        },
        wit::Content::Embedded(r) => Content::Resource {
            uri: r.uri,
            mime_type: r.mime_type,
            body: body_from_wit(r.body),
        },
    }
}

/// The optional interfaces a component exports, with their export indices.
#[derive(Clone, Default)]
pub struct Extras {
    resources: Option<wit_resources::GuestIndices>,
    prompts: Option<wit_prompts::GuestIndices>,
}

impl Extras {
    /// Whether the component exports `resources`.
    pub fn has_resources(&self) -> bool {
        self.resources.is_some()
    }

    /// Whether the component exports `prompts`.
    pub fn has_prompts(&self) -> bool {
        self.prompts.is_some()
    }
}

/// What `list-resources`, `list-templates` and `list-prompts` returned, not
/// yet validated.
#[derive(Debug, Clone, Default)]
pub struct RawExtras {
    /// Concrete resources.
    pub resources: Vec<RawResource>,
    /// Resource templates.
    pub templates: Vec<RawTemplate>,
    /// Prompts.
    pub prompts: Vec<RawPrompt>,
}

/// A resource as the component listed it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct RawResource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
}

impl From<wit_resources::ResourceDescriptor> for RawResource {
    fn from(d: wit_resources::ResourceDescriptor) -> Self {
        RawResource {
            uri: d.uri,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            size: d.size,
        }
    }
}

/// A resource template as the component listed it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct RawTemplate {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

impl From<wit_resources::TemplateDescriptor> for RawTemplate {
    fn from(d: wit_resources::TemplateDescriptor) -> Self {
        RawTemplate {
            uri_template: d.uri_template,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
        }
    }
}

/// A prompt as the component listed it.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct RawPrompt {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgument>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct PromptArgument {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: bool,
}

impl From<wit_prompts::PromptDescriptor> for RawPrompt {
    fn from(d: wit_prompts::PromptDescriptor) -> Self {
        RawPrompt {
            name: d.name,
            title: d.title,
            description: d.description,
            arguments: d
                .arguments
                .into_iter()
                .map(|a| PromptArgument {
                    name: a.name,
                    title: a.title,
                    description: a.description,
                    required: a.required,
                })
                .collect(),
        }
    }
}

/// One part of a read resource.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct ResourceContent {
    pub uri: String,
    pub mime_type: Option<String>,
    pub body: ResourceBody,
}

/// Who speaks a prompt message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum PromptRole {
    User,
    Assistant,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct PromptMessage {
    pub role: PromptRole,
    pub content: Content,
}

/// A built prompt.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct PromptOutput {
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
}

/// Everything known about one call once it ends.
#[derive(Debug)]
pub struct CallReport {
    /// The result, or why there is none.
    pub outcome: Result<ToolResult, CallFailure>,
    /// Fuel consumed.
    pub fuel_used: u64,
    /// Peak linear memory, in bytes.
    pub peak_memory_bytes: u64,
    /// Wall-clock time, including instantiation.
    pub duration: Duration,
    /// The guest's stdout.
    pub stdout: CapturedOutput,
    /// The guest's stderr.
    pub stderr: CapturedOutput,
    /// What the guest did on the network.
    pub net: NetRecord,
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn headers_are_told_apart() {
        assert!(check_component_header(b"\0asm\x0d\0\x01\0rest").is_ok());
        let module = check_component_header(b"\0asm\x01\0\0\0").expect_err("module");
        assert!(module.to_string().contains("core WebAssembly module"));
        let garbage = check_component_header(b"hello").expect_err("garbage");
        assert!(garbage.to_string().contains("not a WebAssembly component"));
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("héllo".into(), 2), "h…");
        assert_eq!(truncate("hi".into(), 2), "hi");
    }
}
