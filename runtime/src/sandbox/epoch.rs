//! The epoch ticker: while guest code runs, it advances the engine's epoch
//! every [`EPOCH_TICK`], so a running guest yields at each tick and the
//! deadline and cancellation around it get a chance to stop it
//! (`store::Run::run`). While no guest runs, it sleeps.
//!
//! A ticker that never stopped woke an idle server a hundred times a
//! second to advance an epoch no guest was waiting on. Now every run of
//! guest code holds a [`Ticking`] guard; once no guard has been held for
//! [`IDLE_TICKS`] ticks (30 s) the ticker parks, and the next guard wakes
//! it.
//!
//! Invariant: while a guard is held, the ticker runs. A guard counts
//! itself and then looks for a parked ticker; the ticker marks itself
//! parked and then looks for a guard (both `SeqCst`), so at least one of
//! the two sees the other: the ticker does not park, or the guard wakes it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use wasmtime::Engine;

use super::EPOCH_TICK;

/// Ticks without a guard before the ticker parks: 30 seconds. Waking it
/// costs the call that does so more than the wake-up's system call: on a
/// 2-vCPU VM, a read 1.5 s after the last reply took 540–580 µs at the
/// median with a ticker that parked after one second, against 390–420 µs
/// with one that never parked (docs/benchmarks.md, round sixteen). An
/// agent's calls come seconds apart, so they keep the ticker running; a
/// server left idle stops waking after half a minute.
pub(super) const IDLE_TICKS: u32 = 3_000;

/// How often a parked ticker checks that its engine still exists, so its
/// thread ends soon after the engine does.
const ALIVE_CHECK: Duration = Duration::from_secs(5);

/// The handle guest runs take guards from; cheap to clone.
#[derive(Clone, Debug)]
pub struct Ticker {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Guards held now.
    active: AtomicUsize,
    /// Whether the ticker is parked (or about to park).
    parked: AtomicBool,
    /// The ticker's thread, to wake it.
    thread: OnceLock<Thread>,
}

/// Held while guest code may run; see the module documentation.
#[derive(Debug)]
pub struct Ticking<'a>(&'a Shared);

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ticker {
    /// Start ticking `engine`'s epoch on a thread of its own, which ends
    /// once the engine is dropped.
    pub fn start(engine: &Engine) -> Ticker {
        Self::start_with(engine, IDLE_TICKS)
    }

    fn start_with(engine: &Engine, idle_ticks: u32) -> Ticker {
        let shared = Arc::new(Shared::default());
        let ticker = Arc::clone(&shared);
        let weak = engine.weak();
        let spawned = std::thread::Builder::new()
            .name("toolcage-epoch".into())
            .spawn(move || {
                let mut idle = 0;
                loop {
                    // A tick after a wake-up comes a full tick after it, as
                    // any tick does: a guest that has just started (and woke
                    // the ticker) is not made to yield at once, which would
                    // cost a short call a trip through the scheduler and the
                    // arming of its deadline's timer.
                    std::thread::sleep(EPOCH_TICK);
                    let Some(engine) = weak.upgrade() else {
                        return;
                    };
                    engine.increment_epoch();
                    drop(engine);
                    if ticker.active.load(Ordering::SeqCst) > 0 {
                        idle = 0;
                        continue;
                    }
                    idle += 1;
                    if idle < idle_ticks {
                        continue;
                    }
                    ticker.parked.store(true, Ordering::SeqCst);
                    while ticker.active.load(Ordering::SeqCst) == 0 {
                        if weak.upgrade().is_none() {
                            return;
                        }
                        std::thread::park_timeout(ALIVE_CHECK);
                    }
                    ticker.parked.store(false, Ordering::SeqCst);
                    idle = 0;
                }
            });
        match spawned {
            Ok(handle) => {
                let _ = shared.thread.set(handle.thread().clone());
            }
            // Without the ticker, guests never yield; deadlines then only
            // fire when a guest waits on the host. Loud, but not fatal.
            Err(error) => tracing::error!(%error, "cannot start the epoch ticker thread"),
        }
        Ticker { shared }
    }

    /// A guard to hold while guest code may run: the ticker runs until it
    /// and every other guard are dropped.
    pub fn hold(&self) -> Ticking<'_> {
        self.shared.active.fetch_add(1, Ordering::SeqCst);
        if self.shared.parked.load(Ordering::SeqCst)
            && let Some(thread) = self.shared.thread.get()
        {
            thread.unpark();
        }
        Ticking(&self.shared)
    }

    /// Whether the ticker is parked (or about to park).
    #[cfg(test)]
    fn is_parked(&self) -> bool {
        self.shared.parked.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        Engine::new(&config).expect("engine")
    }

    /// Wait up to `limit` for `done`; whether it came true.
    fn eventually(limit: Duration, done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        done()
    }

    #[test]
    fn an_idle_ticker_parks_and_a_guard_wakes_it() {
        let engine = engine();
        let ticker = Ticker::start_with(&engine, 3);
        assert!(eventually(Duration::from_secs(10), || ticker.is_parked()));
        let guard = ticker.hold();
        assert!(eventually(Duration::from_secs(10), || !ticker.is_parked()));
        // Held for many times the idle ticks: it keeps ticking.
        std::thread::sleep(EPOCH_TICK * 10);
        assert!(!ticker.is_parked());
        drop(guard);
        assert!(eventually(Duration::from_secs(10), || ticker.is_parked()));
    }

    #[test]
    fn a_guard_taken_while_the_ticker_decides_to_park_is_never_missed() {
        // Guards taken and dropped as fast as possible while the ticker
        // parks after every tick: whenever a guard is held long enough to
        // be seen, the ticker must be running.
        let engine = engine();
        let ticker = Ticker::start_with(&engine, 1);
        for _ in 0..200 {
            let guard = ticker.hold();
            assert!(
                eventually(Duration::from_secs(10), || !ticker.is_parked()),
                "a held guard left the ticker parked"
            );
            drop(guard);
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}
