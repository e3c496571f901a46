//! The engine, its instance pool, the epoch ticker and the compile cache.
//!
//! Invariants:
//! - Pool totals are per-slot maxima times the slots, so no number of
//!   calls of one tool can exhaust what another tool's call needs.
//! - A cache entry is named by the component's digest and the engine's
//!   compatibility key, written atomically into a folder only the operator
//!   can write: a stale or foreign artefact is never loaded as native code.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::epoch::Ticker;
use super::store::HostState;
use super::wasi_config;
use super::{
    LoadError, MAX_CORE_INSTANCES_PER_CALL, MAX_MEMORIES_PER_CALL, MAX_TABLES_PER_CALL,
    SandboxSettings, files,
};
use crate::config::MAX_MEMORY_MIB;

/// How much of each pooled memory and table slot stays mapped between
/// instances; see [`build`].
const RESIDENT_BYTES: usize = 2 * 1024 * 1024;

/// The same when every reset rewrites all of it (no `PAGEMAP_SCAN`).
const FULL_RESET_RESIDENT_BYTES: usize = 64 * 1024;

/// Instances beyond the call limit kept for loading (`describe`) while calls
/// run; loads take one of these each (`Sandbox::load_permits`), so a
/// folder of many files never eats into the calls' share of the pool.
pub(super) const LOAD_SLOTS: u32 = 16;

/// The engine, its linker, and the key of everything that makes a compiled
/// artefact valid besides its input (the engine's settings and this build
/// of toolcage).
pub(super) struct Built {
    pub engine: Engine,
    pub linker: Linker<HostState>,
    pub key: String,
    pub ticker: Ticker,
}

/// Build the engine and linker and start the epoch ticker; `scan`: reset
/// slots with `PAGEMAP_SCAN` (see `reset`).
pub(super) fn build(settings: &SandboxSettings, scan: bool) -> anyhow::Result<Built> {
    let mut config = wasmtime::Config::new();
    config.consume_fuel(settings.fuel_metering);
    config.epoch_interruption(true);
    // Guest stack (512 KiB) well inside the fiber stack (2 MiB) so a deep
    // recursion is a clean stack-overflow trap, not a host crash.
    config.max_wasm_stack(512 * 1024);
    config.async_stack_size(2 * 1024 * 1024);

    let slots = settings.max_concurrent_calls + LOAD_SLOTS + settings.ready_instances;
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
    let memory_mib = profile_memory_mib()?.unwrap_or(MAX_MEMORY_MIB);
    pool.max_memory_size(usize::try_from(memory_mib * 1024 * 1024)?);
    if memory_mib < MAX_MEMORY_MIB {
        // Reserve only what a memory may grow to, so the pool fits in the
        // address space valgrind gives a process (64 GiB) instead of the
        // 1.4 TB its 4 GiB reservations take; guest code then checks its
        // bounds explicitly, so it is a little slower than normally.
        config.memory_reservation(memory_mib * 1024 * 1024);
        config.memory_guard_size(64 * 1024);
    }
    // Keep the first pages of each memory and table slot mapped between
    // instances instead of returning them to the kernel: a fresh
    // instance per call would otherwise fault its working set back in
    // every time (a profile showed page faults and TLB flushes as a
    // visible share of a small call). The rest is still reset with
    // madvise, so a slot never holds more than this much between calls.
    //
    // Without the scan (below) every reset rewrites all of the resident
    // bytes, so it keeps less: 64 KiB against 2 MiB took a read's median
    // from 163 to 63 µs and a listing's from 191 to 62, and pipelined
    // reads and listings went 1.4 times as fast (docs/benchmarks.md,
    // round eighteen).
    let resident = if scan {
        RESIDENT_BYTES
    } else {
        FULL_RESET_RESIDENT_BYTES
    };
    pool.linear_memory_keep_resident(resident);
    pool.table_keep_resident(resident);
    // With PAGEMAP_SCAN (Linux 6.7+), resetting a slot rewrites only the
    // pages the instance dirtied, not all of the resident bytes: a call
    // that touched 300 KiB costs 300 KiB of memset, not 2 MiB. Only where
    // the kernel has it (Linux 6.7+) and swap cannot take a slot's pages:
    // the scan misses swapped-out ones (`reset` decides).
    pool.pagemap_scan(if scan {
        wasmtime::Enabled::Auto
    } else {
        wasmtime::Enabled::No
    });
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));

    let engine = Engine::new(&config)?;
    let key = {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        // The pool's limits decide whether a component compiles at all, and
        // a refusal is cached too: a new limit must not meet an old verdict.
        (
            MAX_CORE_INSTANCES_PER_CALL,
            MAX_MEMORIES_PER_CALL,
            MAX_TABLES_PER_CALL,
            memory_mib,
        )
            .hash(&mut hasher);
        // So are the caps checked before compiling (`compile`).
        (
            super::inspect::MAX_NAME_BYTES,
            super::inspect::MAX_FUNCTION_BRANCHES,
            super::inspect::MAX_FUNCTION_LOCALS,
        )
            .hash(&mut hasher);
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
    // The contract's host imports, in both versions.
    super::contract::add_to_linker(&mut linker)?;
    // Served from the tool's `config` grant (nothing unless granted).
    wasi_config::add_to_linker(&mut linker)?;

    let ticker = Ticker::start(&engine, crate::alloc::give_back);
    Ok(Built {
        engine,
        linker,
        key,
        ticker,
    })
}

/// The variable that lowers every memory's cap and reservation, for
/// instruction-count profiles under valgrind (`docs/benchmarks.md`,
/// "Counting instructions"); unset in every normal run.
const PROFILE_MEMORY_VAR: &str = "TOOLCAGE_PROFILE_MEMORY_MIB";

/// The cap [`PROFILE_MEMORY_VAR`] sets, if it is set: a number of MiB from
/// 1 up to the normal cap. It can only lower the cap, never raise it.
fn profile_memory_mib() -> anyhow::Result<Option<u64>> {
    let Some(text) = std::env::var_os(PROFILE_MEMORY_VAR) else {
        return Ok(None);
    };
    let mib = text
        .to_str()
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|m| (1..=MAX_MEMORY_MIB).contains(m))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{PROFILE_MEMORY_VAR} must be a number of MiB from 1 to {MAX_MEMORY_MIB}, not {text:?}"
            )
        })?;
    Ok(Some(mib))
}

/// The interfaces the linker built by [`build`] provides, each with the
/// version prefix it serves (wasmtime links any `0.2.x` of WASI 0.2). A
/// component importing anything else is refused before it is compiled,
/// with the whole list of what is missing; the link itself stays the final
/// authority.
pub(super) const PROVIDED_INTERFACES: &[(&str, &str)] = &[
    ("wasi:io/error", "0.2."),
    ("wasi:io/poll", "0.2."),
    ("wasi:io/streams", "0.2."),
    ("wasi:clocks/monotonic-clock", "0.2."),
    ("wasi:clocks/wall-clock", "0.2."),
    ("wasi:filesystem/types", "0.2."),
    ("wasi:filesystem/preopens", "0.2."),
    ("wasi:random/random", "0.2."),
    ("wasi:random/insecure", "0.2."),
    ("wasi:random/insecure-seed", "0.2."),
    ("wasi:sockets/network", "0.2."),
    ("wasi:sockets/instance-network", "0.2."),
    ("wasi:sockets/tcp", "0.2."),
    ("wasi:sockets/tcp-create-socket", "0.2."),
    ("wasi:sockets/udp", "0.2."),
    ("wasi:sockets/udp-create-socket", "0.2."),
    ("wasi:sockets/ip-name-lookup", "0.2."),
    ("wasi:cli/environment", "0.2."),
    ("wasi:cli/exit", "0.2."),
    ("wasi:cli/stdin", "0.2."),
    ("wasi:cli/stdout", "0.2."),
    ("wasi:cli/stderr", "0.2."),
    ("wasi:cli/terminal-input", "0.2."),
    ("wasi:cli/terminal-output", "0.2."),
    ("wasi:cli/terminal-stdin", "0.2."),
    ("wasi:cli/terminal-stdout", "0.2."),
    ("wasi:cli/terminal-stderr", "0.2."),
    ("wasi:http/types", "0.2."),
    ("wasi:http/outgoing-handler", "0.2."),
    ("wasi:config/store", "0.2.0-draft"),
    ("wasi:config/store", "0.2.0-rc.1"),
    ("toolcage:tool/types", "0.1."),
    ("toolcage:tool/host", "0.1."),
    ("toolcage:tool/types", "0.2."),
    ("toolcage:tool/host", "0.2."),
];

/// Compile `bytes` (whose SHA-256 is `digest`), from the cache in
/// `cache_dir` when it holds them; the flag says whether it did. Blocking
/// and CPU-heavy.
pub(super) fn compile(
    engine: &Engine,
    engine_key: &str,
    cache_dir: Option<&Path>,
    bytes: &[u8],
    digest: &str,
) -> Result<(Component, bool), LoadError> {
    check_component_header(bytes)?;
    let cache_file: Option<PathBuf> =
        cache_dir.map(|dir| dir.join(format!("{digest}-{engine_key}.cwasm")));
    if let Some(path) = cache_file.as_ref().filter(|path| path.exists()) {
        // SAFETY: the cache directory is the operator's (created by
        // toolcage, mode 0700); its files are artefacts we serialised
        // with this exact engine configuration (the key in the name).
        // A truncated or foreign file fails to deserialise, and we
        // fall back to compiling.
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(component) => return Ok((component, true)),
            Err(error) => tracing::warn!(
                file = %path.display(),
                %error,
                "discarding unreadable compile-cache entry"
            ),
        }
    }

    // A file that failed to compile fails again: its verdict is cached
    // beside the artefacts, so a large component that cannot load costs
    // its compile once, not on every reload and `toolcage list`.
    let refused_file = cache_file
        .as_ref()
        .map(|path| path.with_extension("refused"));
    if let Some(message) = refused_file
        .as_ref()
        .and_then(|path| std::fs::read_to_string(path).ok())
    {
        return Err(LoadError::Compile(message));
    }
    // What makes compiling (or a trap's backtrace) cost more than the file
    // warrants is refused before compiling, here, where every compile
    // passes, and only here: a cached artefact passed them under the same
    // key, which includes the caps, so a warm start reads no code body.
    super::inspect::check_names(bytes)?;
    super::inspect::check_functions(bytes)?;
    let component = match Component::new(engine, bytes) {
        Ok(component) => component,
        Err(error) => {
            let message = format!("{error:#}");
            if let Some(path) = &refused_file
                && let Err(error) = write_atomically(path, message.as_bytes())
            {
                tracing::warn!(file = %path.display(), %error, "cannot write compile cache");
            }
            return Err(LoadError::Compile(message));
        }
    };
    if let Some(path) = &cache_file
        && let Err(error) = write_cache(path, &component)
    {
        tracing::warn!(file = %path.display(), %error, "cannot write compile cache");
    }
    Ok((component, false))
}

/// The interfaces `component` imports, without versions, sorted and
/// deduplicated.
pub(super) fn imports(engine: &Engine, component: &Component) -> Vec<String> {
    let mut imports: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(name, _)| match name.split_once('@') {
            Some((name, _version)) => name.to_owned(),
            None => name.to_owned(),
        })
        .collect();
    imports.sort();
    imports.dedup();
    imports
}

/// The wasm binary header: magic, then version and layer. Core modules are
/// version 1 layer 0; components are version 0xd layer 1.
pub(super) fn check_component_header(bytes: &[u8]) -> Result<(), LoadError> {
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
    write_atomically(path, &component.serialize()?)
}

/// Write `bytes` to `path` in the cache folder (made private if new),
/// through a temporary file and a rename, so a reader never sees half.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;

    use anyhow::Context as _;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_told_apart() {
        assert!(check_component_header(b"\0asm\x0d\0\x01\0rest").is_ok());
        let module = check_component_header(b"\0asm\x01\0\0\0").expect_err("module");
        assert!(module.to_string().contains("core WebAssembly module"));
        let garbage = check_component_header(b"hello").expect_err("garbage");
        assert!(garbage.to_string().contains("not a WebAssembly component"));
    }
}
