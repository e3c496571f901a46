//! Instances made ahead of their calls. Every call still runs in a fresh
//! instance that serves no other; the instance is just built before the
//! call arrives (after the previous call of the same component has been
//! answered), so a call starts with its store and instance ready and pays
//! only for binding what it may reach.
//!
//! Invariants:
//! - One instance serves exactly one call: a ready instance is taken out
//!   of its pool by the call that uses it and dropped after that call.
//! - What a call reaches is bound at hand-over (`Run::bind`: roots,
//!   environment, network gate, services, limits), and only into an
//!   instance whose guest has not called into the host since its store was
//!   made ([`Run::touched`]). A component whose instantiation calls the
//!   host (a constructor reading its environment or preopens) never gets
//!   ready instances: its calls instantiate inline, with their grants bound
//!   from the start, as before. Nor does one whose instantiation is not
//!   cheap ([`MAX_INSTANTIATION`], [`SLOW_STRIKES`] times in a row): there,
//!   making the next instance while a call runs slows that call more than
//!   it saves the next. One slow instantiation proves nothing (the first
//!   of a slot faults its pages in; on a busy machine any can be
//!   preempted), and a verdict is for the component's lifetime.
//! - Bounded: at most `server.ready_instances` ready instances exist at
//!   once across all components (the engine's instance pool has slots for
//!   them beside the calls' own; 0 turns them off), at most [`PER_COMPONENT`] per component, and only
//!   for components that have been called. A reload drops the old
//!   component's pool with it.
//! - An instance made under one tool's limits serves another tool of the
//!   same component only if the memory it already holds fits that tool's
//!   limit; its instantiation's fuel counts against the call's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use wasmtime::component::Instance;

use super::contract::ContractInstance;
use super::store::Run;

/// Ready instances of one component: one for calls that come one at a
/// time, a second for a call that arrives while the first is used.
const PER_COMPONENT: usize = 2;

/// Instantiating longer than this, a component gets no ready instances:
/// an interpreter's instance (Python, JavaScript) is mostly page faults
/// on its heap snapshot, which happen when the call touches the pages, not
/// when the instance is made; making the next one while a call runs only
/// contends with that call for the same memory (measured: +35% and +7% on
/// the median `word_count` of the Python and JavaScript SDK examples).
pub(super) const MAX_INSTANTIATION: std::time::Duration = std::time::Duration::from_micros(500);

/// How many instantiations in a row over [`MAX_INSTANTIATION`] make a
/// component's instantiation "not cheap". A single one did, before: the
/// first instantiation of a fresh slot, or one preempted on a busy
/// machine, took a component's ready instances away for good (measured:
/// 2.8 ms for the bundled fs tool's first, under load, against ~10 µs).
pub(super) const SLOW_STRIKES: u32 = 3;

/// An instance made ahead of its call, in its own store.
pub(super) struct Ready {
    pub run: Run,
    pub instance: ReadyInstance,
    /// Its share of `server.ready_instances`, released when it is taken.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

/// The instance, as its component kind calls it.
pub(super) enum ReadyInstance {
    Contract(ContractInstance),
    Plain(Instance),
}

/// A component's ready instances.
#[derive(Default)]
pub(super) struct Pool {
    ready: Mutex<Vec<Ready>>,
    /// Set for good when an instantiation of the component calls into the
    /// host, or [`SLOW_STRIKES`] in a row are slow.
    ineligible: AtomicBool,
    /// Slow instantiations in a row (a cheap one starts the count again).
    slow: AtomicU32,
}

impl Pool {
    /// A ready instance whose memory fits `memory_limit`, if there is one.
    /// One that does not fit (made for a tool of the component with a
    /// larger limit) is dropped, so it cannot hold its slot for good.
    pub fn take(&self, memory_limit: u64) -> Option<Ready> {
        let ready = self.ready.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
        (ready.run.memory_used() <= memory_limit).then_some(ready)
    }

    /// Whether another ready instance is wanted.
    pub fn wants_more(&self) -> bool {
        !self.ineligible.load(Ordering::Relaxed)
            && self.ready.lock().is_ok_and(|r| r.len() < PER_COMPONENT)
    }

    /// Keep `run` (with `instance`, holding `slot`, made in `took`) for a
    /// call to come, or drop it and stop making more if its guest called
    /// into the host or instantiating it is not cheap.
    pub fn offer(
        &self,
        run: Run,
        instance: ReadyInstance,
        slot: tokio::sync::OwnedSemaphorePermit,
        took: std::time::Duration,
    ) {
        if self.rule_out(run.touched(), took) {
            return;
        }
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if ready.len() < PER_COMPONENT {
            ready.push(Ready {
                run,
                instance,
                _slot: slot,
            });
        }
    }

    /// Whether an instantiation that `touched` the host, or took `took`,
    /// rules the component out of ready instances (for good, once it
    /// does).
    fn rule_out(&self, touched: bool, took: std::time::Duration) -> bool {
        let why = if self.ineligible.load(Ordering::Relaxed) {
            return true;
        } else if touched {
            "the component calls the host while it is instantiated"
        } else if took <= MAX_INSTANTIATION {
            self.slow.store(0, Ordering::Relaxed);
            return false;
        } else if self.slow.fetch_add(1, Ordering::Relaxed) + 1 >= SLOW_STRIKES {
            "instantiating the component is not cheap"
        } else {
            // Slow this once: the instance is made, so it serves.
            return false;
        };
        if !self.ineligible.swap(true, Ordering::Relaxed) {
            tracing::debug!(?took, "{why}; its calls instantiate inline");
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: std::time::Duration = std::time::Duration::from_micros(20);
    const SLOW: std::time::Duration = std::time::Duration::from_millis(3);

    #[test]
    fn one_slow_instantiation_is_not_a_verdict() {
        let pool = Pool::default();
        for _ in 0..10 {
            // A cold slot, a preemption: then cheap again.
            for _ in 1..SLOW_STRIKES {
                assert!(!pool.rule_out(false, SLOW));
            }
            assert!(!pool.rule_out(false, FAST));
        }
        assert!(pool.wants_more());
    }

    #[test]
    fn slow_every_time_or_touching_the_host_rules_out() {
        let pool = Pool::default();
        let verdicts: Vec<bool> = (0..SLOW_STRIKES)
            .map(|_| pool.rule_out(false, SLOW))
            .collect();
        assert_eq!(verdicts.last(), Some(&true));
        assert!(!verdicts[..verdicts.len() - 1].contains(&true));
        assert!(!pool.wants_more());
        assert!(pool.rule_out(false, FAST), "for good");

        let touching = Pool::default();
        assert!(touching.rule_out(true, FAST));
        assert!(!touching.wants_more());
    }
}
