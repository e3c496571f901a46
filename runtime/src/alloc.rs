//! The server's memory allocator: mimalloc, set to commit memory as it is
//! used and to give freed memory back soon after, and at once when the
//! server goes quiet.
//!
//! A call makes and frees about 180 allocations (its messages, the
//! guest's structured output parsed for its schema check, the fresh
//! instance's bookkeeping), and glibc's allocator took 14% of a listing's
//! instructions: past its per-thread cache of seven blocks per size, each
//! allocation and free goes through its bins, and the call's one large
//! allocation (its boxed future, about 9 KiB) first consolidates every
//! small free block. With mimalloc a call takes 4–8% fewer instructions
//! and a pipelined listing 13–21% less of the server's CPU
//! (docs/benchmarks.md, round fourteen).
//!
//! Its defaults suit a program that owns the machine: on Linux it commits
//! an arena's memory as it reserves it, and keeps freed pages for a second
//! before returning them, which left the idle server with the bundled
//! tools at 43–59 MiB (glibc: 31–35). [`configure`] makes arenas commit as
//! they are used and free pages go back at once while the server starts
//! (a thread's, when that thread next calls the allocator: a blocking
//! thread that loaded a component gives its back at once with
//! [`give_back_own`], and [`give_back`] takes the rest when serving
//! starts); once it serves ([`serving`]), after [`PURGE_DELAY_MS`].
//! Giving them back at once cost every page a call reused an `madvise`, a
//! TLB flush on the other CPU and a page fault to get it back: 16% of the
//! server's time in a 1,000-entry listing and 2.5 µs of an HTTP call's
//! CPU; a delay from the start left 2 MiB more in the idle server
//! (docs/benchmarks.md, round nineteen). mimalloc returns pages whose
//! delay has passed only when it is called again, so a server that stops
//! would keep them; the epoch ticker calls [`give_back`] once calls stop
//! (`sandbox::epoch`). The first arena is reserved before `main` runs, so
//! [`use_allocator!`] also runs [`configure`] from the ELF start-up list
//! ahead of mimalloc's own start-up. Options set in the environment
//! (`MIMALLOC_PURGE_DELAY`, …) still win: these are defaults.
//!
//! What glibc's allocator has and this one, outside its `secure` build,
//! does not: checks of its free lists that abort the process on some heap
//! corruptions. Only the host's own code touches this heap; a guest's
//! memory is its linear memory, a slot of wasmtime's pool mapped apart
//! from it.
//!
//! [`use_allocator!`]: crate::use_allocator

use std::ffi::c_long;

use libmimalloc_sys::{
    mi_collect, mi_option_set, mi_option_set_default, mi_option_t, mi_thread_init, mi_version,
};

/// The allocator [`use_allocator!`](crate::use_allocator) declares.
pub use mimalloc::MiMalloc as Allocator;

/// Declare mimalloc as the binary's `#[global_allocator]` and configure it
/// before its start-up (see the module docs). Once, in a binary crate.
#[macro_export]
macro_rules! use_allocator {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::alloc::Allocator = $crate::alloc::Allocator;

        // Runs before mimalloc's own start-up, which is in the unnumbered
        // `.init_array` that numbered entries precede.
        #[cfg(target_os = "linux")]
        #[used]
        #[unsafe(link_section = ".init_array.00100")]
        static CONFIGURE_ALLOCATOR: extern "C" fn() = $crate::alloc::configure;
    };
}

/// The mimalloc release whose option numbers are below (3.3.x, the one
/// Cargo.lock pins): the C library numbers its options by their position
/// in an enum, and the Rust bindings name only those every release shares.
const VERSION: (i32, i32) = (3, 3);

/// `mi_option_arena_eager_commit`: commit an arena's memory when it is
/// reserved (2, the default: only where the OS overcommits, as Linux does).
const ARENA_EAGER_COMMIT: mi_option_t = 4;

/// `mi_option_purge_delay`: milliseconds before free pages go back to the
/// OS (1,000 by default; 0: at once).
const PURGE_DELAY: mi_option_t = 15;

/// How long freed pages stay with the server before they go back: long
/// enough that pages a stream of calls frees and reuses stay, short enough
/// that a burst's extra memory does not. Against a delay of 0 it took a
/// 1,000-entry listing's median from 2.7 to 2.1 ms and raised its peak
/// memory from 45 to 65 MiB (10 ms: 2.3 ms, 56 MiB; docs/benchmarks.md,
/// round nineteen).
pub const PURGE_DELAY_MS: c_long = 100;

/// Set the defaults described in the module docs. Runs before anything
/// else in the process (no Rust runtime, no allocation); calling it again
/// later is harmless but does not reach an arena already reserved. A
/// mimalloc other than the release the numbers are for keeps its own
/// defaults ([`check`] says so, for the log).
pub extern "C" fn configure() {
    if release() == VERSION {
        // SAFETY: plain C calls that set two integers in mimalloc's option
        // table; valid at any time, before its start-up included.
        unsafe {
            mi_option_set_default(ARENA_EAGER_COMMIT, 0);
            mi_option_set_default(PURGE_DELAY, 0);
        }
    }
}

/// Start-up is over: from now on freed pages wait [`PURGE_DELAY_MS`]
/// before they go back (see the module docs), unless the environment set
/// the delay.
pub fn serving() {
    let set_outside = std::env::vars_os().any(|(name, _)| {
        name.to_str().is_some_and(|name| {
            let name = name.to_ascii_lowercase();
            name == "mimalloc_purge_delay" || name == "mimalloc_reset_delay"
        })
    });
    if release() == VERSION && !set_outside {
        // SAFETY: sets an integer in mimalloc's option table; valid at any
        // time, and read afresh by every later free.
        unsafe { mi_option_set(PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

/// Give every freed page back to the system now, whatever its delay: for
/// a server that has gone quiet (see the module docs). Costs an `madvise`
/// per run of free pages; call it when calls stop, not per call.
pub fn give_back() {
    // SAFETY: plain C calls. `mi_thread_init` sets up this thread's
    // allocator state if it has none (a thread that never allocated), as
    // `mi_collect` does nothing without it; `mi_collect(true)` then returns
    // every arena's free pages, whichever thread freed them.
    unsafe {
        mi_thread_init();
        mi_collect(true);
    }
}

/// Give back what this thread freed, now: for a thread that has just
/// freed a burst of memory and may not allocate again for a while (a
/// blocking thread after loading a component). mimalloc returns a
/// thread's free pages only when that thread next calls it; a forced
/// collection ([`give_back`]) would also walk every other thread's and
/// cost more.
pub fn give_back_own() {
    // SAFETY: a plain C call on this thread's own heap.
    unsafe { mi_collect(false) };
}

/// Whether [`configure`] applied, for the log.
///
/// # Errors
///
/// The linked mimalloc is not the release the option numbers are for.
pub fn check() -> Result<(), String> {
    let (major, minor) = release();
    if (major, minor) == VERSION {
        return Ok(());
    }
    Err(format!(
        "mimalloc {major}.{minor} is not the release its options were written for ({}.{}): \
         it runs with its defaults, which hold more memory",
        VERSION.0, VERSION.1
    ))
}

/// The linked mimalloc's (major, minor) release.
fn release() -> (i32, i32) {
    // SAFETY: returns a constant.
    let version = unsafe { mi_version() };
    (version / 10_000, version / 100 % 100)
}

#[cfg(test)]
mod tests {
    use std::sync::{Mutex, MutexGuard, PoisonError};

    use libmimalloc_sys::{mi_free, mi_malloc, mi_option_get};

    use super::*;

    /// The process's resident memory, in MiB.
    fn resident_mib() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
        let pages: usize = statm
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect("resident pages");
        pages * 4096 / (1024 * 1024)
    }

    /// Held by the tests that set or depend on mimalloc's options, which
    /// are the process's.
    static OPTIONS: Mutex<()> = Mutex::new(());

    /// The options to themselves, for a test that sets or depends on them;
    /// `None` (the test is skipped, and says so) where the environment
    /// sets them.
    fn options() -> Option<MutexGuard<'static, ()>> {
        let guard = OPTIONS.lock().unwrap_or_else(PoisonError::into_inner);
        if std::env::vars().any(|(name, _)| name.to_ascii_lowercase().starts_with("mimalloc_")) {
            eprintln!("skipped: mimalloc options set in the environment");
            return None;
        }
        Some(guard)
    }

    #[test]
    fn give_back_returns_what_another_thread_freed() {
        // This test binary's own allocator is the system's: only the calls
        // here touch mimalloc, whose purge delay (1,000 ms, or ours once
        // the other test ran `serving`) keeps freed pages resident until
        // mimalloc is next used or `give_back` runs.
        let Some(_options) = options() else {
            return;
        };
        const BLOCKS: usize = 16;
        const BLOCK: usize = 4 << 20;
        let before = resident_mib();
        std::thread::spawn(|| {
            // SAFETY: blocks of BLOCK bytes from mimalloc, each written
            // whole and freed once.
            unsafe {
                let blocks: Vec<_> = (0..BLOCKS).map(|_| mi_malloc(BLOCK)).collect();
                for &block in &blocks {
                    assert!(!block.is_null());
                    block.cast::<u8>().write_bytes(1, BLOCK);
                }
                for block in blocks {
                    mi_free(block);
                }
            }
        })
        .join()
        .expect("the allocating thread");
        let freed = resident_mib();
        assert!(
            freed >= before + 48,
            "freed pages went back before give_back ({before} → {freed} MiB)"
        );
        give_back();
        let after = resident_mib();
        assert!(
            after + 48 <= freed,
            "give_back left them resident ({before} → {freed} → {after} MiB)"
        );
    }

    /// An option's current value.
    fn option(option: mi_option_t) -> c_long {
        // SAFETY: reads mimalloc's option table.
        unsafe { mi_option_get(option) }
    }

    #[test]
    fn the_option_numbers_name_the_options_meant() {
        // This test binary does not run `configure` at start-up, so each
        // number reads its option's default, which its neighbours do not
        // share: 2 for eager commit (a deprecated option before it and
        // `purge_decommits` after it are 1), 1,000 for the purge delay (a
        // deprecated option before it is 1, `use_numa_nodes` after it 0).
        assert_eq!(
            release(),
            VERSION,
            "mimalloc was updated: check the option numbers"
        );
        let Some(_options) = options() else {
            return;
        };
        assert_eq!(option(ARENA_EAGER_COMMIT - 1), 1);
        assert_eq!(option(ARENA_EAGER_COMMIT), 2);
        assert_eq!(option(ARENA_EAGER_COMMIT + 1), 1);
        assert_eq!(option(PURGE_DELAY - 1), 1);
        assert_eq!(option(PURGE_DELAY), 1_000);
        assert_eq!(option(PURGE_DELAY + 1), 0);
        configure();
        assert_eq!(option(ARENA_EAGER_COMMIT), 0);
        assert_eq!(option(PURGE_DELAY), 0);
        serving();
        assert_eq!(option(PURGE_DELAY), PURGE_DELAY_MS);
        assert_eq!(check(), Ok(()));
    }
}
