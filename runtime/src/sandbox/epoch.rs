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
//!
//! The ticker also says when the server has gone quiet: once no guest run
//! has started for [`QUIET_TICKS`] ticks since the last time it said so
//! (and once at start-up), and again as it parks, it calls the hook it was
//! started with. The server's hook hands the memory its allocator holds
//! back to the system (`crate::alloc::give_back`), which the allocator
//! itself does only while it is in use.

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

/// Ticks without a new guest run before the quiet hook is called: 100 ms.
/// Long enough that a burst of calls is over, short against the half
/// second after which the benchmark reads an idle server's memory.
pub(super) const QUIET_TICKS: u32 = 10;

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
    /// Guards ever taken, so the ticker sees runs that began and ended
    /// between two of its ticks.
    runs: AtomicUsize,
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
    /// once the engine is dropped; `on_quiet` runs on that thread whenever
    /// guest runs stop (see the module documentation).
    pub fn start(engine: &Engine, on_quiet: fn()) -> Ticker {
        Self::start_with(engine, IDLE_TICKS, on_quiet)
    }

    fn start_with(engine: &Engine, idle_ticks: u32, on_quiet: fn()) -> Ticker {
        let shared = Arc::new(Shared::default());
        let ticker = Arc::clone(&shared);
        let weak = engine.weak();
        let spawned = std::thread::Builder::new()
            .name("toolcage-epoch".into())
            .spawn(move || {
                let mut idle = 0;
                let mut quiet = Quiet::default();
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
                    if quiet.tick(ticker.runs.load(Ordering::Relaxed)) {
                        on_quiet();
                    }
                    if ticker.active.load(Ordering::SeqCst) > 0 {
                        idle = 0;
                        continue;
                    }
                    idle += 1;
                    if idle < idle_ticks {
                        continue;
                    }
                    // Once more on the way to sleep, due or not: what
                    // threads freed as they ended since (the blocking
                    // pool's end 10 s after their last task) goes back too.
                    quiet.settle();
                    on_quiet();
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
        self.shared.runs.fetch_add(1, Ordering::Relaxed);
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

/// When the quiet hook is due: [`QUIET_TICKS`] ticks after the last new
/// run, once per stretch of runs, and once after start-up.
#[derive(Debug)]
struct Quiet {
    /// The run count at the last tick.
    seen: usize,
    /// Ticks since it changed.
    still: u32,
    /// Whether runs (or the start) came since the hook last ran.
    due: bool,
}

impl Default for Quiet {
    fn default() -> Quiet {
        Quiet {
            seen: 0,
            still: 0,
            due: true,
        }
    }
}

impl Quiet {
    /// One tick, with the count of runs so far: whether to call the hook.
    fn tick(&mut self, runs: usize) -> bool {
        if runs != self.seen {
            self.seen = runs;
            self.still = 0;
            self.due = true;
            return false;
        }
        self.still = self.still.saturating_add(1);
        self.still >= QUIET_TICKS && self.settle()
    }

    /// The hook is no longer due; whether it was.
    fn settle(&mut self) -> bool {
        std::mem::take(&mut self.due)
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
        let ticker = Ticker::start_with(&engine, 3, || {});
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
        let ticker = Ticker::start_with(&engine, 1, || {});
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

    #[test]
    fn the_quiet_hook_is_due_once_after_start_and_once_after_each_stretch_of_runs() {
        let mut quiet = Quiet::default();
        let hooks = |quiet: &mut Quiet, runs: usize, ticks: u32| {
            (0..ticks).filter(|_| quiet.tick(runs)).count()
        };
        // Start-up: once, after the quiet ticks, and not again.
        assert_eq!(hooks(&mut quiet, 0, QUIET_TICKS - 1), 0);
        assert_eq!(hooks(&mut quiet, 0, 1), 1);
        assert_eq!(hooks(&mut quiet, 0, 10 * QUIET_TICKS), 0);
        // Runs at every tick: never, however long they go on.
        for runs in 1..=10 * QUIET_TICKS as usize {
            assert!(!quiet.tick(runs));
        }
        // Then still: once.
        let runs = 10 * QUIET_TICKS as usize;
        assert_eq!(hooks(&mut quiet, runs, 10 * QUIET_TICKS), 1);
        // A run, then parking before the quiet ticks: the park settles it.
        assert!(!quiet.tick(runs + 1));
        assert!(quiet.settle());
        assert_eq!(hooks(&mut quiet, runs + 1, 10 * QUIET_TICKS), 0);
    }

    #[test]
    fn the_ticker_calls_the_quiet_hook_after_runs_stop() {
        static CALLED: AtomicUsize = AtomicUsize::new(0);
        let engine = engine();
        let ticker = Ticker::start_with(&engine, IDLE_TICKS, || {
            CALLED.fetch_add(1, Ordering::SeqCst);
        });
        let called = || CALLED.load(Ordering::SeqCst);
        assert!(eventually(Duration::from_secs(10), || called() == 1));
        drop(ticker.hold());
        assert!(eventually(Duration::from_secs(10), || called() == 2));
        std::thread::sleep(EPOCH_TICK * QUIET_TICKS * 3);
        assert_eq!(called(), 2, "a quiet server's hook runs once");
    }
}
