//! When each phase of a stdio call begins, for `tests/bench/phases`.
//!
//! Built only with the `phases` feature. Without it, [`mark`] is an empty
//! inline function and nothing is recorded. With it, and with
//! `TOOLCAGE_PHASES_OUT` set, every mark is a timestamp (nanoseconds since
//! the first mark) and the thread it was taken on, kept in memory (at
//! most [`MAX_MARKS`]; later ones are dropped) and written to that file,
//! one `TAG NANOS THREAD` line each, when stdin closes. The benchmark's
//! calls come one at a time, so the marks of one call follow each other
//! and `tests/bench/phases` can take them apart.

/// Where a call is.
#[derive(Debug, Clone, Copy)]
pub enum Phase {
    /// The reader has the request's line.
    Read = b'r' as isize,
    /// The line is parsed into a message.
    Parsed = b'p' as isize,
    /// The call's handler task has started.
    Handler = b'd' as isize,
    /// The guest call starts (arguments checked, permits held).
    Guest = b'c' as isize,
    /// The guest call has returned.
    GuestDone = b'e' as isize,
    /// The handler has returned its result (output checked, journaled).
    Handled = b'h' as isize,
    /// The reply is serialised and its write to stdout starts.
    Write = b'b' as isize,
    /// The reply is written.
    Written = b'o' as isize,
    /// After the reply: the call's store is dropped.
    TornDown = b't' as isize,
    /// After the reply: the component's next instance is made (or none
    /// was wanted).
    NextReady = b'a' as isize,
}

/// Marks kept at most (24 bytes each in memory: 96 MiB at most).
pub const MAX_MARKS: usize = 1 << 22;

#[cfg(feature = "phases")]
mod on {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{LazyLock, Mutex};
    use std::time::Instant;

    static OUT: LazyLock<Option<std::ffi::OsString>> =
        LazyLock::new(|| std::env::var_os("TOOLCAGE_PHASES_OUT"));
    static START: LazyLock<Instant> = LazyLock::new(Instant::now);
    static MARKS: Mutex<Vec<(u8, u64, u64)>> = Mutex::new(Vec::new());
    static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
    }

    pub fn mark(phase: super::Phase) {
        if OUT.is_none() {
            return;
        }
        let nanos = u64::try_from(START.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let thread = THREAD.with(|thread| *thread);
        let mut marks = MARKS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if marks.len() < super::MAX_MARKS {
            marks.push((phase as u8, nanos, thread));
        }
    }

    pub fn write_out() {
        let Some(path) = OUT.as_ref() else { return };
        let marks = std::mem::take(
            &mut *MARKS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut text = String::with_capacity(marks.len() * 16);
        for (tag, nanos, thread) in marks {
            use std::fmt::Write as _;
            let _ = writeln!(text, "{} {nanos} {thread}", char::from(tag));
        }
        if let Err(error) = std::fs::write(path, text) {
            tracing::warn!(%error, "cannot write the phase marks");
        }
    }
}

/// Mark that the call being served reaches `phase` (see the module
/// documentation).
#[inline(always)]
pub fn mark(phase: Phase) {
    #[cfg(feature = "phases")]
    on::mark(phase);
    #[cfg(not(feature = "phases"))]
    let _ = phase;
}

/// Write the marks out (stdin has closed).
#[inline(always)]
pub fn write_out() {
    #[cfg(feature = "phases")]
    on::write_out();
}
