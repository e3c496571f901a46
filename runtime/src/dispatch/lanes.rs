//! Which thread runs a request's handler and a call's guest code.
//!
//! Over stdio with `stdio.one_thread` the server runs on one thread (a
//! current-thread runtime, see `main.rs`): reading a request, rmcp's service loop, the handler and the
//! reply hand the request from task to task, and on one thread those
//! hand-offs wake no other core, which on a VM can cost more than the call
//! itself (`docs/benchmarks.md`, "Calls on one thread"). So a `tools/call`
//! whose handler finds no other call on that thread runs there whole
//! (*inline*), and its guest continues on the spill workers (a multi-thread
//! runtime) from the first time it waits: at a fuel yield or an epoch tick
//! (it has run long), or on host I/O. A call that arrives while one runs
//! inline is handled on the spill workers from the start, so concurrent
//! calls still use every core.
//!
//! Invariant: guest code runs on the serving thread only for a call that
//! is alone there, until its first yield (`sandbox::INLINE_YIELD_FUEL`, or
//! one epoch tick without fuel metering), so no guest holds the thread that
//! reads requests for longer than that.
//!
//! Without a spill runtime (the default stdio server, HTTP, the CLI)
//! everything runs where it is started, each call in its own task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// Where requests and calls run; see the module documentation.
#[derive(Debug, Default)]
pub struct Lanes {
    /// The spill workers, when the requests are read on a one-thread
    /// runtime.
    spill: Option<Handle>,
    /// Whether a call runs inline now.
    inline: Arc<AtomicBool>,
}

/// Where a call's handler runs, handed down to its guest.
#[derive(Debug)]
pub enum Lane {
    /// In its own task on a multi-thread runtime, or on the spill workers:
    /// the guest runs in place.
    Pooled,
    /// On the serving thread, holding the inline lane: the guest starts
    /// here and moves to the spill workers at its first wait.
    Inline(InlineSlot),
}

impl Lane {
    /// Whether the call's guest starts on the serving thread.
    pub fn is_inline(&self) -> bool {
        matches!(self, Lane::Inline(_))
    }
}

impl Lanes {
    /// Calls run inline when alone, else on `spill`.
    pub fn inline_first(spill: Handle) -> Self {
        Lanes {
            spill: Some(spill),
            inline: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Handle a call: `make` builds its handler for the lane it gets. With
    /// spill workers, the handler runs here holding the inline lane if no
    /// other call holds it, else it is spawned on the spill workers.
    /// Dropping the returned future drops the handler wherever it is (a
    /// spilled one is aborted on its worker).
    ///
    /// # Panics
    ///
    /// Re-raises a panic of the handler.
    pub async fn handle<F>(&self, make: impl FnOnce(Lane) -> F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let Some(spill) = &self.spill else {
            return make(Lane::Pooled).await;
        };
        if self
            .inline
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            make(Lane::Inline(InlineSlot(Arc::clone(&self.inline)))).await
        } else {
            Spilled(spill.spawn(make(Lane::Pooled))).await
        }
    }

    /// Run a call's guest (`guest`, made knowing whether it starts on the
    /// serving thread) on `lane`: in place when pooled; when inline, here
    /// until its first wait, then on the spill workers, freeing the lane.
    /// Dropping the returned future drops the guest wherever it is.
    ///
    /// # Panics
    ///
    /// Re-raises a panic of the guest.
    pub async fn run_guest<F>(&self, lane: Lane, guest: impl FnOnce(bool) -> F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match (lane, &self.spill) {
            (Lane::Inline(slot), Some(spill)) => {
                Inline::new(guest(true), Some(slot), spill.clone()).await
            }
            (lane, _) => {
                drop(lane);
                guest(false).await
            }
        }
    }

    /// Run `work` (guest code that is not a tool call: a resource read, a
    /// prompt) on the spill workers when there are some, so it never holds
    /// the serving thread; else in place. Dropping the returned future
    /// drops `work` wherever it is.
    ///
    /// # Panics
    ///
    /// Re-raises a panic of `work`.
    pub async fn pooled<F>(&self, work: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.spill {
            Some(spill) => Spilled(spill.spawn(work)).await,
            None => work.await,
        }
    }

    /// Start `work` (a call that outlives its request: an MCP task) on its
    /// own, on the spill workers when there are some (never on the thread
    /// that reads requests), else on the current runtime.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.spill {
            Some(spill) => spill.spawn(work),
            None => tokio::spawn(work),
        }
    }

    /// Start a call's after-work off its path, as a task: `teardown` (drop
    /// its store, then its permits) and then `guest` (make the component's
    /// next instance, made knowing whether it starts on the serving thread:
    /// it runs the component's constructors). For a call handled inline,
    /// the task first lets the tasks ready now run (the call's reply among
    /// them), so calls one at a time are answered first and wake no other
    /// thread; its guest part runs there as an inline guest does, moving to
    /// the spill workers at its first wait. Otherwise it starts at once,
    /// where the call ran, so the store and its instance slot are freed as
    /// early as possible.
    pub fn after_call<F>(
        &self,
        inline: bool,
        teardown: impl FnOnce() + Send + 'static,
        guest: impl FnOnce(bool) -> F + Send + 'static,
    ) where
        F: Future<Output = ()> + Send + 'static,
    {
        match (&self.spill, inline) {
            (Some(spill), true) => {
                let spill = spill.clone();
                drop(tokio::spawn(async move {
                    tokio::task::yield_now().await;
                    teardown();
                    crate::phases::mark(crate::phases::Phase::TornDown);
                    Inline::new(guest(true), None, spill).await;
                }));
            }
            _ => drop(tokio::spawn(async move {
                teardown();
                crate::phases::mark(crate::phases::Phase::TornDown);
                guest(false).await;
            })),
        }
    }
}

/// Held while a call runs inline; frees the inline lane when dropped.
#[derive(Debug)]
pub struct InlineSlot(Arc<AtomicBool>);

impl Drop for InlineSlot {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

enum State<T> {
    /// Polled on this thread; the slot (if it holds the lane) frees the
    /// lane when it ends or moves.
    Inline(Boxed<T>, Option<InlineSlot>),
    /// Moved to the spill workers.
    Moved(Spilled<T>),
    /// Taken out while moving.
    Moving,
}

/// A guest polled inline until it first returns `Pending`, then spawned on
/// the spill workers and awaited from here.
struct Inline<T> {
    state: State<T>,
    spill: Handle,
}

impl<T: Send + 'static> Inline<T> {
    /// `guest`, polled here until its first wait; `slot`, if it holds the
    /// inline lane, is freed when the guest ends or moves.
    fn new(
        guest: impl Future<Output = T> + Send + 'static,
        slot: Option<InlineSlot>,
        spill: Handle,
    ) -> Self {
        Inline {
            state: State::Inline(Box::pin(guest), slot),
            spill,
        }
    }
}

impl<T: Send + 'static> Future for Inline<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        if let State::Inline(call, _) = &mut this.state {
            match call.as_mut().poll(cx) {
                Poll::Ready(output) => return Poll::Ready(output),
                Poll::Pending => {
                    // It waits (a yield or host I/O): from here on it runs
                    // on the spill workers, and the lane is free. The
                    // wake-up it registered with this task's waker only
                    // polls the join handle once, harmlessly.
                    if let State::Inline(call, slot) =
                        std::mem::replace(&mut this.state, State::Moving)
                    {
                        drop(slot);
                        this.state = State::Moved(Spilled(this.spill.spawn(call)));
                    }
                }
            }
        }
        match &mut this.state {
            State::Moved(spilled) => Pin::new(spilled).poll(cx),
            State::Inline(..) | State::Moving => unreachable!("an inline call is moved or done"),
        }
    }
}

/// Work on the spill workers, aborted when this is dropped before it ends
/// (the client cancelled, the server shut down).
struct Spilled<T>(JoinHandle<T>);

impl<T> Future for Spilled<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match Pin::new(&mut self.0).poll(cx) {
            Poll::Ready(Ok(output)) => Poll::Ready(output),
            Poll::Ready(Err(error)) => match error.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Only this handle aborts the task, and only when dropped;
                // otherwise the runtime is shutting down with the process.
                Err(_) => Poll::Pending,
            },
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for Spilled<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spill() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lone_call_that_never_waits_runs_inline() {
        let workers = spill();
        let lanes = Arc::new(Lanes::inline_first(workers.handle().clone()));
        let here = std::thread::current().id();
        let inner = Arc::clone(&lanes);
        let (inline, handler, guest) = lanes
            .handle(move |lane| async move {
                let handler = std::thread::current().id();
                let inline = lane.is_inline();
                let guest = inner
                    .run_guest(lane, |_| async { std::thread::current().id() })
                    .await;
                (inline, handler, guest)
            })
            .await;
        assert!(inline);
        assert_eq!((handler, guest), (here, here));
        assert!(
            !lanes.inline.load(Ordering::Acquire),
            "the lane is free again"
        );
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_guest_moves_to_the_spill_workers_when_it_first_waits() {
        let workers = spill();
        let lanes = Arc::new(Lanes::inline_first(workers.handle().clone()));
        let here = std::thread::current().id();
        let inner = Arc::clone(&lanes);
        let (before, after, handler_after) = lanes
            .handle(move |lane| async move {
                let (before, after) = inner
                    .run_guest(lane, |inline| async move {
                        assert!(inline);
                        let before = std::thread::current().id();
                        tokio::task::yield_now().await;
                        (before, std::thread::current().id())
                    })
                    .await;
                (before, after, std::thread::current().id())
            })
            .await;
        assert_eq!(before, here);
        assert_ne!(after, here);
        // The handler itself stays; only the guest moved.
        assert_eq!(handler_after, here);
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_lane_is_free_once_the_guest_has_moved() {
        let workers = spill();
        let lanes = Arc::new(Lanes::inline_first(workers.handle().clone()));
        let inner = Arc::clone(&lanes);
        let observer = Arc::clone(&lanes);
        let free_while_moved = lanes
            .handle(move |lane| async move {
                inner
                    .run_guest(lane, move |_| async move {
                        tokio::task::yield_now().await;
                        // Now on a spill worker: the lane is free for the
                        // next call.
                        !observer.inline.load(Ordering::Acquire)
                    })
                    .await
            })
            .await;
        assert!(free_while_moved);
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_that_arrives_while_one_runs_inline_is_handled_on_the_spill_workers() {
        let workers = spill();
        let lanes = Lanes::inline_first(workers.handle().clone());
        let here = std::thread::current().id();
        // As if a call ran inline (one that does cannot be interrupted to
        // start another on this thread).
        lanes.inline.store(true, Ordering::Release);
        let (inline, thread) = lanes
            .handle(|lane| async move { (lane.is_inline(), std::thread::current().id()) })
            .await;
        assert!(!inline);
        assert_ne!(thread, here);
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_a_moved_guest_aborts_it() {
        let workers = spill();
        let lanes = Lanes::inline_first(workers.handle().clone());
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        struct Signal(Option<tokio::sync::oneshot::Sender<()>>);
        impl Drop for Signal {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(());
                }
            }
        }
        let signal = Signal(Some(dropped_tx));
        let slot = InlineSlot(Arc::clone(&lanes.inline));
        lanes.inline.store(true, Ordering::Release);
        let guest = lanes.run_guest(Lane::Inline(slot), move |_| async move {
            let _signal = signal;
            tokio::task::yield_now().await;
            std::future::pending::<()>().await;
        });
        // Poll it until it has moved, then drop it.
        let _ = tokio::time::timeout(std::time::Duration::from_millis(50), guest).await;
        dropped_rx.await.expect("the moved guest was dropped");
        assert!(!lanes.inline.load(Ordering::Acquire));
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn without_spill_workers_everything_runs_in_place() {
        let lanes = Lanes::default();
        let here = std::thread::current().id();
        let inline = lanes.handle(|lane| async move { lane.is_inline() }).await;
        assert!(!inline);
        let thread = lanes
            .run_guest(Lane::Pooled, |inline| async move {
                assert!(!inline);
                std::thread::current().id()
            })
            .await;
        assert_eq!(thread, here);
    }
}
