//! A call's guest events (log lines, progress) as notifications to its
//! client, forwarded by a task that is drained before the call's response
//! is returned, so nothing about a request arrives after its response.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;

use super::NOTIFY_TIMEOUT;
use crate::call::{GuestEvent, LogLevel};

/// Events of one call that may wait for the client at once; past it, log
/// messages are dropped (and counted) and progress is coalesced to the
/// latest report, so a guest cannot make the host buffer without bound
/// however slowly its client reads.
const EVENT_QUEUE: usize = 64;

/// Turns a call's [`GuestEvent`]s into notifications to its client.
pub(super) struct EventForwarder {
    /// `None` when the client asked for nothing a guest could send.
    inner: Option<Arc<ForwarderInner>>,
}

struct ForwarderInner {
    peer: Peer<RoleServer>,
    progress_token: Option<ProgressToken>,
    min_level: Option<LogLevel>,
    /// The queue to the draining task and the task, once an event needed it.
    running: std::sync::Mutex<Option<(mpsc::Sender<GuestEvent>, tokio::task::JoinHandle<()>)>>,
    /// The latest progress report that found the queue full.
    overflow_progress: Arc<Mutex<Option<GuestEvent>>>,
    /// Log messages dropped because the queue was full.
    dropped_logs: Arc<std::sync::atomic::AtomicU32>,
}

impl EventForwarder {
    pub(super) fn new(
        peer: Peer<RoleServer>,
        progress_token: Option<ProgressToken>,
        min_level: Option<LogLevel>,
    ) -> Self {
        let wanted = progress_token.is_some() || min_level.is_some();
        EventForwarder {
            inner: wanted.then(|| {
                Arc::new(ForwarderInner {
                    peer,
                    progress_token,
                    min_level,
                    running: std::sync::Mutex::new(None),
                    overflow_progress: Arc::default(),
                    dropped_logs: Arc::default(),
                })
            }),
        }
    }

    /// The sink for the sandbox: drops what the client did not ask for,
    /// queues the rest (never blocks, never grows past [`EVENT_QUEUE`]),
    /// starting the task on first use.
    pub(super) fn sink(&self) -> Option<crate::call::EventSink> {
        let inner = Arc::clone(self.inner.as_ref()?);
        Some(Arc::new(move |event: GuestEvent| {
            let wanted = match &event {
                GuestEvent::Log { level, .. } => inner.min_level.is_some_and(|min| *level >= min),
                GuestEvent::Progress { .. } => inner.progress_token.is_some(),
                // For the host (`protocol::tasks`), never the client.
                GuestEvent::BeginTask => false,
            };
            if !wanted {
                return;
            }
            let Ok(mut running) = inner.running.lock() else {
                return;
            };
            let (tx, _) = running.get_or_insert_with(|| {
                let (tx, rx) = mpsc::channel(EVENT_QUEUE);
                let task = tokio::spawn(drain(
                    inner.peer.clone(),
                    inner.progress_token.clone(),
                    rx,
                    Arc::clone(&inner.overflow_progress),
                    Arc::clone(&inner.dropped_logs),
                ));
                (tx, task)
            });
            match tx.try_send(event) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(event @ GuestEvent::Progress { .. })) => {
                    if let Ok(mut slot) = inner.overflow_progress.lock() {
                        *slot = Some(event);
                    }
                }
                Err(mpsc::error::TrySendError::Full(GuestEvent::Log { .. })) => {
                    inner
                        .dropped_logs
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // The client went away, or the event is not for it.
                Err(
                    mpsc::error::TrySendError::Closed(_)
                    | mpsc::error::TrySendError::Full(GuestEvent::BeginTask),
                ) => {}
            }
        }))
    }

    /// Wait until every queued notification is written, so none trails the
    /// response.
    pub(super) async fn finish(self) {
        let running = self
            .inner
            .and_then(|inner| inner.running.lock().ok().and_then(|mut r| r.take()));
        if let Some((tx, task)) = running {
            drop(tx);
            let _ = task.await;
        }
    }
}

async fn drain(
    peer: Peer<RoleServer>,
    progress_token: Option<ProgressToken>,
    mut rx: mpsc::Receiver<GuestEvent>,
    overflow_progress: Arc<Mutex<Option<GuestEvent>>>,
    dropped_logs: Arc<std::sync::atomic::AtomicU32>,
) {
    let mut last_progress = f64::NEG_INFINITY;
    let mut stalled = false;
    let take_overflow = || {
        overflow_progress
            .lock()
            .ok()
            .and_then(|mut slot| slot.take())
    };
    loop {
        // The queue first, then a progress report that found it full (the
        // latest only: progress supersedes progress).
        let event = match rx.recv().await {
            Some(event) => event,
            None => match take_overflow() {
                Some(event) => event,
                None => break,
            },
        };
        for event in std::iter::once(event).chain(take_overflow()) {
            // A client that let one notification time out is not reading:
            // the rest are dropped rather than each waiting its timeout.
            if !stalled {
                stalled = !notify(&peer, progress_token.as_ref(), &mut last_progress, event).await;
            }
        }
    }
    let dropped = dropped_logs.load(std::sync::atomic::Ordering::Relaxed);
    if dropped > 0 && !stalled {
        let message = GuestEvent::Log {
            level: LogLevel::Warning,
            message: format!(
                "{dropped} log messages of this call were dropped: the client was not reading fast enough"
            ),
        };
        notify(&peer, progress_token.as_ref(), &mut last_progress, message).await;
    }
}

/// Send one guest event to the client, bounded by [`NOTIFY_TIMEOUT`];
/// `false` if the client did not take it in time.
async fn notify(
    peer: &Peer<RoleServer>,
    progress_token: Option<&ProgressToken>,
    last_progress: &mut f64,
    event: GuestEvent,
) -> bool {
    match event {
        // Said to the host, not the client (see `protocol::tasks`).
        GuestEvent::BeginTask => true,
        GuestEvent::Log { level, message } => {
            let param = LoggingMessageNotificationParam::new(
                to_mcp_level(level),
                serde_json::Value::String(message),
            )
            .with_logger("tool");
            tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_logging_message(param))
                .await
                .is_ok()
        }
        GuestEvent::Progress {
            done,
            total,
            message,
        } => {
            // MCP requires progress to increase; drop reports that do not.
            let Some(token) = progress_token else {
                return true;
            };
            if done <= *last_progress {
                return true;
            }
            *last_progress = done;
            let mut param = ProgressNotificationParam::new(token.clone(), done);
            param.total = total;
            param.message = message;
            tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_progress(param))
                .await
                .is_ok()
        }
    }
}

pub(super) fn to_mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

pub(super) fn from_mcp_level(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}
