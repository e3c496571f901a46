//! The server's memory allocator: mimalloc, set to give memory back as
//! soon as it is free.
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
//! they are used and free pages go back at once (about 0.1 `madvise` a
//! call), which leaves the idle server 2–3 MiB above glibc's. The first arena
//! is reserved before `main` runs, so [`use_allocator!`] also runs
//! [`configure`] from the ELF start-up list ahead of mimalloc's own
//! start-up. Options set in the environment (`MIMALLOC_PURGE_DELAY`, …)
//! still win: these are defaults.
//!
//! What glibc's allocator has and this one, outside its `secure` build,
//! does not: checks of its free lists that abort the process on some heap
//! corruptions. Only the host's own code touches this heap; a guest's
//! memory is its linear memory, a slot of wasmtime's pool mapped apart
//! from it.
//!
//! [`use_allocator!`]: crate::use_allocator

use libmimalloc_sys::{mi_option_set_default, mi_option_t, mi_version};

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
    use std::ffi::c_long;

    use libmimalloc_sys::mi_option_get;

    use super::*;

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
        if std::env::vars().any(|(name, _)| name.to_ascii_lowercase().starts_with("mimalloc_")) {
            eprintln!("skipped: mimalloc options set in the environment");
            return;
        }
        assert_eq!(option(ARENA_EAGER_COMMIT - 1), 1);
        assert_eq!(option(ARENA_EAGER_COMMIT), 2);
        assert_eq!(option(ARENA_EAGER_COMMIT + 1), 1);
        assert_eq!(option(PURGE_DELAY - 1), 1);
        assert_eq!(option(PURGE_DELAY), 1_000);
        assert_eq!(option(PURGE_DELAY + 1), 0);
        configure();
        assert_eq!(option(ARENA_EAGER_COMMIT), 0);
        assert_eq!(option(PURGE_DELAY), 0);
        assert_eq!(check(), Ok(()));
    }
}
