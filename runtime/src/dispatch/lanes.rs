//! Which thread runs a call's guest code.
//!
//! Over stdio the server runs on one thread (a current-thread runtime, see
//! `main.rs`): reading a request, rmcp's service loop, the handler and the
//! reply hand the request from task to task, and on one thread those
//! hand-offs cost nothing, while on a multi-thread runtime each can wake
//! the other core, which on a VM costs more than the call itself
//! (`docs/benchmarks.md`, "Calls on one thread"). So a call runs *inline*
//! on that thread when no other call does, and continues on the spill
//! workers (a multi-thread runtime) from the first time it waits: at an
//! epoch tick or a fuel yield (it has run long), or on host I/O. Calls that
//! arrive while one runs inline go to the spill workers at once, so
//! concurrent calls still use every core.
//!
//! Invariant: a call runs inline only while no other call does, and for at
//! most one yield interval (`sandbox::INLINE_YIELD_FUEL`, or one epoch tick
//! without fuel metering), so the thread that reads requests is never held
//! longer than that by a guest.
//!
//! Without a spill runtime (HTTP, the CLI, tests on a multi-thread
//! runtime) a call simply runs in its own task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::runtime::Handle;
use tokio::task::JoinHandle;

/// Where calls run; see the module documentation.
#[derive(Debug, Default)]
pub struct Lanes {
    /// The spill workers, when the requests are read on a one-thread
    /// runtime.
    spill: Option<Handle>,
    /// Whether a call runs inline now.
    inline: Arc<AtomicBool>,
}

/// How a call is being run, for the sandbox to set its yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// In its own task on a multi-thread runtime, or on the spill workers.
    Pooled,
    /// On the thread that reads requests, until it first waits.
    Inline,
}

impl Lanes {
    /// Calls run inline when alone, else on `spill`.
    pub fn inline_first(spill: Handle) -> Self {
        Lanes {
            spill: Some(spill),
            inline: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Run `call` (made by `make` for the lane it will start on) to its end:
    /// inline if no other call runs inline, continuing on the spill workers
    /// from its first wait; on the spill workers at once otherwise.
    /// Dropping the returned future drops the call wherever it is (a
    /// spilled call is aborted on its worker).
    ///
    /// # Panics
    ///
    /// Re-raises a panic of the call.
    pub async fn run<F>(&self, make: impl FnOnce(Lane) -> F) -> F::Output
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
            let slot = InlineSlot(Arc::clone(&self.inline));
            Inline {
                state: State::Inline(Box::pin(make(Lane::Inline)), slot),
                spill: spill.clone(),
            }
            .await
        } else {
            Spilled(spill.spawn(make(Lane::Pooled))).await
        }
    }

    /// Run `work` (guest code that is not a tool call: a resource read, a
    /// prompt) on the spill workers when there are some, so it never holds
    /// the thread that reads requests; else in place. Dropping the returned
    /// future drops `work` wherever it is.
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

    /// The spill workers, for work that must run there whole (a reload,
    /// which describes components in the sandbox).
    pub fn spill(&self) -> Option<&Handle> {
        self.spill.as_ref()
    }

    /// Start `work` off every call's path: on the spill workers when there
    /// are some (the thread that reads requests stays free for the next
    /// one), else as a task of the current runtime.
    pub fn background(&self, work: impl Future<Output = ()> + Send + 'static) {
        match &self.spill {
            Some(spill) => drop(spill.spawn(work)),
            None => drop(tokio::spawn(work)),
        }
    }
}

/// Held while a call runs inline; frees the inline lane when dropped.
struct InlineSlot(Arc<AtomicBool>);

impl Drop for InlineSlot {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

enum State<T> {
    /// Polled on this thread; the slot frees the lane when it ends or moves.
    Inline(Boxed<T>, InlineSlot),
    /// Moved to the spill workers.
    Moved(Spilled<T>),
    /// Taken out while moving.
    Moving,
}

/// A call polled inline until it first returns `Pending`, then spawned on
/// the spill workers and awaited from here.
struct Inline<T> {
    state: State<T>,
    spill: Handle,
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

/// A call on the spill workers, aborted when this is dropped before it
/// ends (the client cancelled, the server shut down).
struct Spilled<T>(JoinHandle<T>);

impl<T> Future for Spilled<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match Pin::new(&mut self.0).poll(cx) {
            Poll::Ready(Ok(output)) => Poll::Ready(output),
            Poll::Ready(Err(error)) => match error.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Only this handle aborts the task, and only when dropped;
                // a runtime shutting down cancels it too, and by then the
                // process is exiting.
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
        let lanes = Lanes::inline_first(workers.handle().clone());
        let here = std::thread::current().id();
        let (lane, thread) = lanes
            .run(|lane| async move { (lane, std::thread::current().id()) })
            .await;
        assert_eq!(lane, Lane::Inline);
        assert_eq!(thread, here);
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_moves_to_the_spill_workers_when_it_first_waits() {
        let workers = spill();
        let lanes = Lanes::inline_first(workers.handle().clone());
        let here = std::thread::current().id();
        let (before, after) = lanes
            .run(|_| async move {
                let before = std::thread::current().id();
                tokio::task::yield_now().await;
                (before, std::thread::current().id())
            })
            .await;
        assert_eq!(before, here);
        assert_ne!(after, here);
        // The lane is free again.
        let lane = lanes.run(|lane| async move { lane }).await;
        assert_eq!(lane, Lane::Inline);
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_that_arrives_while_one_runs_inline_is_spilled() {
        let workers = spill();
        let lanes = Lanes::inline_first(workers.handle().clone());
        let here = std::thread::current().id();
        // As if a call ran inline (one that does cannot be interrupted to
        // start another on this thread).
        lanes.inline.store(true, Ordering::Release);
        let (lane, thread) = lanes
            .run(|lane| async move { (lane, std::thread::current().id()) })
            .await;
        assert_eq!(lane, Lane::Pooled);
        assert_ne!(thread, here);
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_a_spilled_call_aborts_it() {
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
        let call = lanes.run(move |_| async move {
            let _signal = signal;
            tokio::task::yield_now().await;
            std::future::pending::<()>().await;
        });
        // Poll it until it has moved, then drop it.
        let _ = tokio::time::timeout(std::time::Duration::from_millis(50), call).await;
        dropped_rx.await.expect("the spilled call was dropped");
        assert!(!lanes.inline.load(Ordering::Acquire));
        workers.shutdown_background();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn without_spill_workers_a_call_runs_in_place() {
        let lanes = Lanes::default();
        assert_eq!(lanes.run(|lane| async move { lane }).await, Lane::Pooled);
    }
}
