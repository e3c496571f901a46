//! The operating-system handles one call holds: files and directories it
//! opened, directory listings in progress, HTTP connections.
//!
//! Each is a file descriptor of the server process, and the process has a
//! fixed number of those (`RLIMIT_NOFILE`), shared with everything else it
//! does: accepting connections, writing the journal, the compile cache.
//! Without a cap per call, one guest opening the same file in a loop (the
//! resource table alone allows 10,000 handles) could take every descriptor
//! the process has, and every other call and client would fail. So:
//!
//! - [`budget`] raises the process's soft limit to its hard limit at start
//!   and sets the per-call cap so that every call at its cap, plus what
//!   the server keeps for itself, fits;
//! - [`OsHandles`] counts what one call holds, by the lifetime of the
//!   handle itself (a file stays open while any stream of it lives, not
//!   only while its descriptor does), and refuses the next one at the cap.
//!
//! Invariant: every place a guest makes the host open a descriptor goes
//! through [`OsHandles::hold`] or [`OsHandles::ticket`] (the sandbox's
//! `open-at` and `read-directory`, the network gate's connections);
//! preopened roots are the operator's and are not counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The cap per call when the process's limit allows it: far above what
/// real tools hold (a few), far below what a process may open.
const MAX_PER_CALL: usize = 256;

/// The cap per call below which the budget warns: a tool that walks a
/// folder tree holds one listing per level.
const MIN_PER_CALL: usize = 16;

/// The cap new calls get, set by [`budget`].
static PER_CALL: AtomicUsize = AtomicUsize::new(MAX_PER_CALL);

/// A call reached its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("holds {limit} open files, directories and connections already, its limit")]
pub struct HandleLimit {
    /// The cap.
    pub limit: usize,
}

/// What one call holds, counted by the handles' own lifetimes.
#[derive(Debug)]
pub struct OsHandles {
    limit: usize,
    /// One entry per handle taken; dead ones are swept at the next take.
    held: Mutex<Vec<Weak<dyn Send + Sync>>>,
}

impl Default for OsHandles {
    fn default() -> Self {
        OsHandles::with_limit(PER_CALL.load(Ordering::Relaxed))
    }
}

impl OsHandles {
    /// A count with its own cap.
    pub fn with_limit(limit: usize) -> Self {
        OsHandles {
            limit,
            held: Mutex::new(Vec::new()),
        }
    }

    /// Count `handle` as held for as long as it (any clone of the `Arc`)
    /// lives, if the call is under its cap. Refused, the caller drops the
    /// handle, which closes it.
    ///
    /// # Errors
    ///
    /// The call holds its cap already.
    pub fn hold<T: Send + Sync + 'static>(&self, handle: &Arc<T>) -> Result<(), HandleLimit> {
        let weak: Weak<dyn Send + Sync> = Arc::downgrade(handle) as Weak<dyn Send + Sync>;
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        // At most `limit` entries to look at: bounded work per take.
        held.retain(|handle| handle.strong_count() > 0);
        if held.len() >= self.limit {
            return Err(HandleLimit { limit: self.limit });
        }
        held.push(weak);
        Ok(())
    }

    /// A token counted as one handle until it (every clone) is dropped:
    /// for a handle the host does not own as an `Arc` (a connection that
    /// lives in its own task).
    ///
    /// # Errors
    ///
    /// The call holds its cap already.
    pub fn ticket(&self) -> Result<Arc<()>, HandleLimit> {
        let ticket = Arc::new(());
        self.hold(&ticket)?;
        Ok(ticket)
    }

    /// How many are open now.
    #[cfg(test)]
    fn held(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.iter()
            .filter(|handle| handle.strong_count() > 0)
            .count()
    }
}

/// What [`budget`] settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The process's limit on open files, after raising it.
    pub process: u64,
    /// What it was before.
    pub before: u64,
    /// The cap of each call.
    pub per_call: usize,
    /// Whether the cap is below what the budget aims for (the limit is too
    /// low for `calls` calls and the reserve).
    pub short: bool,
}

/// Raise the process's limit on open files to its hard limit, and set the
/// cap of every call made from now on so that `calls` calls at their cap,
/// plus `reserved` descriptors for the server itself (its connections,
/// journal, cache, watches), fit.
pub fn budget(calls: u32, reserved: u64) -> Budget {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

    let limits = getrlimit(Resource::Nofile);
    let before = limits.current.unwrap_or(u64::MAX);
    let mut process = before;
    if limits.current != limits.maximum {
        let raised = Rlimit {
            current: limits.maximum,
            maximum: limits.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            process = limits.maximum.unwrap_or(u64::MAX);
        }
    }
    let (per_call, short) = share(process, reserved, calls);
    PER_CALL.store(per_call, Ordering::Relaxed);
    Budget {
        process,
        before,
        per_call,
        short,
    }
}

/// Each of `calls` calls' cap in a process limit of `process` with
/// `reserved` kept for the server, and whether it is below the floor (which
/// it is then raised to).
fn share(process: u64, reserved: u64, calls: u32) -> (usize, bool) {
    let share = process.saturating_sub(reserved) / u64::from(calls.max(1));
    let fits = usize::try_from(share).unwrap_or(usize::MAX);
    (fits.clamp(MIN_PER_CALL, MAX_PER_CALL), fits < MIN_PER_CALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_count_while_they_live_and_the_cap_refuses_the_next() {
        let handles = OsHandles::with_limit(2);
        let first = Arc::new(1u8);
        handles.hold(&first).expect("first");
        let ticket = handles.ticket().expect("second");
        assert_eq!(handles.held(), 2);
        assert_eq!(handles.ticket(), Err(HandleLimit { limit: 2 }));
        // A clone keeps it open; dropping every clone frees its place.
        let clone = Arc::clone(&first);
        drop(first);
        assert_eq!(handles.held(), 2);
        drop(clone);
        assert_eq!(handles.held(), 1);
        handles.ticket().expect("room again");
        drop(ticket);
        assert_eq!(handles.held(), 0);
    }

    #[test]
    fn the_cap_fits_every_call_and_the_reserve_in_the_process_limit() {
        assert_eq!(share(1_048_576, 1280, 64), (MAX_PER_CALL, false));
        assert_eq!(share(20_000, 1280, 64), (MAX_PER_CALL, false));
        assert_eq!(share(8192, 1280, 64), (108, false));
        // Too low for the calls: the floor, and the budget says so.
        assert_eq!(share(1024, 1280, 64), (MIN_PER_CALL, true));
        assert_eq!(share(u64::MAX, 0, 0), (MAX_PER_CALL, false));
    }
}
