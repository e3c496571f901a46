//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout.
//!
//! rmcp's own stdio transport silently drops a line that is not JSON. A
//! client that sent one would wait forever, so this transport answers it
//! with a JSON-RPC parse error (-32700, `id: null`) and one that is JSON but
//! not a JSON-RPC message with invalid request (-32600, echoing the `id`
//! when there is one), then keeps serving.
//!
//! A client that sends requests but does not read the replies must not make
//! the server buffer without bound, so reading is gated ([`Admission`]):
//! the next line is read only while fewer than `stdio.max_requests_in_flight`
//! requests are unanswered and less than `stdio.max_pending_output_mib` of
//! replies wait to be written, and every request holds its share of the
//! server's request budget (`server.max_pending_request_mib`, shared with
//! HTTP) until it is answered or cancelled. A stalled client thus stalls
//! only itself; the kernel's pipe buffer is the rest of the backpressure.
//!
//! Invariant: every byte written to stdout is a complete JSON-RPC message
//! followed by `\n`. Writes take a lock on stdout for the whole line.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::RoleServer;
use rmcp::ServiceExt as _;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use super::shutdown_signal;
use crate::Host;
use crate::config::StdioLimits;
use crate::protocol::{CLOSED_DRAIN, McpServer, STOPPED_DRAIN, SessionCalls};

/// This transport's name in the journal.
pub const NAME: &str = "stdio";

/// Serve one MCP session on stdin/stdout until the client closes stdin or
/// SIGTERM/SIGINT arrives.
///
/// # Errors
///
/// The session failed to start (other than by the client closing stdin
/// first) or the transport failed.
pub async fn serve(host: &Host) -> anyhow::Result<()> {
    if host
        .options
        .config
        .journal
        .as_ref()
        .is_some_and(|journal| journal.to == Some(crate::config::JournalStream::Stdout))
    {
        anyhow::bail!(
            "the journal cannot go to stdout while serving over stdio, where stdout is the \
             protocol: set `journal.to = \"stderr\"`, a `journal.path`, or serve with --http"
        );
    }
    crate::journal::STDOUT_IS_PROTOCOL.store(true, std::sync::atomic::Ordering::Relaxed);
    let server = McpServer::new(
        Arc::clone(&host.dispatcher),
        Arc::clone(&host.notifier),
        Arc::clone(&host.tasks),
        NAME,
    );
    // Plain `tools/call`s are run beside rmcp's loop once it has started
    // the session (`protocol::session`).
    let calls = Arc::new(SessionCalls::new(server.clone()));
    let transport = LineTransport::stdio(
        Admission::new(host.options.config.stdio, Arc::clone(&host.request_budget)),
        Arc::clone(&calls),
    );
    let running = tokio::select! {
        running = server.serve(transport) => running,
        () = shutdown_signal() => {
            tracing::info!("signal received before a session started; exiting");
            return Ok(());
        }
    };
    let running = match running {
        Ok(running) => running,
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("client closed stdin before starting a session");
            return Ok(());
        }
        Err(error) => return Err(error).context("MCP session failed to start"),
    };
    calls.open(running.peer().clone());
    let session = running.cancellation_token();
    // The calls are stopped inside the signal's branch, before `select!`
    // drops the session (which cancels every request on its own), so they
    // are recorded as ended by the shutdown, not by their client.
    let signalled = async {
        shutdown_signal().await;
        host.dispatcher.stop_calls();
    };
    let reason = tokio::select! {
        reason = running.waiting() => reason,
        () = signalled => {
            tracing::info!("signal received; ending the session");
            session.cancel();
            calls.close(STOPPED_DRAIN).await;
            return Ok(());
        }
    };
    calls.close(CLOSED_DRAIN).await;
    let reason = reason.context("MCP session failed")?;
    tracing::info!(?reason, "MCP session ended");
    Ok(())
}

/// Longest line accepted, in bytes: 16 MiB, rmcp's own limit. A longer line
/// is answered with an error and skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

type Writer = Arc<Out>;

/// Stdout, and the lines waiting for it. Whoever holds `sink` writes every
/// line pending, so replies that finish while a write is in progress go
/// out together in the next one (fewer writes, fewer wake-ups of the
/// client), and a lone reply is still written at once by its own sender.
/// A sender that finds the sink taken leaves its line to the holder and
/// goes on: waiting for the holder to finish would park its thread only
/// to find its line written (a wake-up between threads per reply under
/// load, `docs/benchmarks.md`, round three).
struct Out {
    pending: std::sync::Mutex<Vec<u8>>,
    sink: Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    /// Counts the bytes queued and not yet written.
    admission: Arc<Admission>,
}

/// A line-based JSON-RPC transport that answers malformed input.
pub struct LineTransport {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    writer: Writer,
    admission: Arc<Admission>,
}

/// What the reader waits on before it reads another line: requests not yet
/// answered (each holding its bytes of the request budget) and replies not
/// yet written.
pub struct Admission {
    limits: StdioLimits,
    budget: Arc<crate::RequestBudget>,
    state: std::sync::Mutex<AdmissionState>,
    /// Woken when a request is answered or output is written.
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct AdmissionState {
    /// Unanswered requests by id (a client may reuse an id), each with its
    /// share of the budget. Keyed by the id itself: `7` and `"7"` differ,
    /// and a key costs no allocation (a string id is shared, not copied).
    in_flight: std::collections::HashMap<
        rmcp::model::RequestId,
        smallvec::SmallVec<[tokio::sync::OwnedSemaphorePermit; 1]>,
    >,
    requests: usize,
    pending_output: usize,
}

impl Admission {
    /// A gate with `limits`, drawing on the server-wide `budget`.
    pub fn new(limits: StdioLimits, budget: Arc<crate::RequestBudget>) -> Self {
        Admission {
            limits,
            budget,
            state: std::sync::Mutex::default(),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, AdmissionState> {
        lock(&self.state)
    }

    /// Wait until another line may be read.
    async fn ready(&self) {
        loop {
            let notified = self.changed.notified();
            {
                let state = self.state();
                if state.requests < self.limits.max_requests_in_flight
                    && state.pending_output < self.limits.max_pending_output
                {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Hold `bytes` of the budget for a message just read (waiting while
    /// other clients hold it); `None` if the budget is closed.
    async fn reserve(&self, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.budget.reserve(bytes).await
    }

    /// A request `id` was read, holding `permit` until it is answered.
    fn admit(&self, id: rmcp::model::RequestId, permit: tokio::sync::OwnedSemaphorePermit) {
        let mut state = self.state();
        state.requests += 1;
        state.in_flight.entry(id).or_default().push(permit);
    }

    /// Request `id` was answered or cancelled: release it (once).
    fn settle(&self, id: &rmcp::model::RequestId) {
        let mut state = self.state();
        let Some(permits) = state.in_flight.get_mut(id) else {
            return;
        };
        permits.pop();
        if permits.is_empty() {
            state.in_flight.remove(id);
        }
        state.requests = state.requests.saturating_sub(1);
        drop(state);
        self.changed.notify_waiters();
    }

    fn output_queued(&self, bytes: usize) {
        self.state().pending_output += bytes;
    }

    fn output_written(&self, bytes: usize) {
        let mut state = self.state();
        state.pending_output = state.pending_output.saturating_sub(bytes);
        drop(state);
        self.changed.notify_waiters();
    }
}

impl LineTransport {
    /// Over the process's stdin and stdout. When they are pipes (as MCP
    /// clients start servers), they are read and written non-blocking on the
    /// runtime's own threads: `tokio::io::stdin`/`stdout` do every read and
    /// write on the blocking pool, a thread hand-off each way per message.
    /// Anything else (a terminal, a file, a socket) goes through those.
    pub fn stdio(admission: Admission, calls: Arc<SessionCalls>) -> Self {
        let reader: Box<dyn AsyncRead + Send + Unpin> = match pipe_reader() {
            Some(pipe) => Box::new(pipe),
            None => Box::new(tokio::io::stdin()),
        };
        let writer: Box<dyn AsyncWrite + Send + Unpin> = match pipe_writer() {
            Some(pipe) => Box::new(pipe),
            None => Box::new(tokio::io::stdout()),
        };
        LineTransport::new(reader, writer, admission, calls)
    }

    /// Over any reader and writer (tests use pipes). The `tools/call`s
    /// `calls` takes are run there, the rest go to rmcp.
    pub fn new(
        reader: impl AsyncRead + Send + Unpin + 'static,
        writer: impl AsyncWrite + Send + Unpin + 'static,
        admission: Admission,
        calls: Arc<SessionCalls>,
    ) -> Self {
        let admission = Arc::new(admission);
        let writer: Writer = Arc::new(Out {
            pending: std::sync::Mutex::new(Vec::new()),
            sink: Mutex::new(Box::new(writer)),
            admission: Arc::clone(&admission),
        });
        // A small queue: reading pauses when the server falls behind.
        let (tx, incoming) = mpsc::channel(64);
        let replies = Arc::clone(&writer);
        let gate = Arc::clone(&admission);
        tokio::spawn(async move {
            let input = Input {
                gate,
                tx,
                calls,
                replies,
            };
            let gate = &input.gate;
            let replies = &input.replies;
            let mut reader = BufReader::new(reader);
            let mut line = Vec::new();
            loop {
                gate.ready().await;
                line.clear();
                match read_line(&mut reader, &mut line).await {
                    Ok(LineRead::Eof) | Err(_) => {
                        crate::phases::write_out();
                        input.calls.input_closed();
                        break;
                    }
                    Ok(LineRead::TooLong) => {
                        let reply = error_reply(
                            Value::Null,
                            -32600,
                            &format!("message longer than {MAX_LINE_BYTES} bytes"),
                        );
                        if write_line(replies, &reply).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    Ok(LineRead::Line) => {}
                }
                crate::phases::mark(crate::phases::Phase::Read);
                let text = line.trim_ascii();
                let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
                if text.is_empty() {
                    continue;
                }
                // Its share of the budget, held from before it is parsed
                // until it is answered.
                let Some(permit) = gate.reserve(text.len()).await else {
                    break;
                };
                // The usual case, a valid message, is parsed once; only a
                // line that is not one is parsed again to say why.
                let parsed = crate::protocol::client_message(text);
                crate::phases::mark(crate::phases::Phase::Parsed);
                if let Ok(message) = parsed {
                    if !input.forward(message, permit).await {
                        break;
                    }
                    continue;
                }
                let reply = match serde_json::from_slice::<Value>(text) {
                    Err(error) => {
                        error_reply(Value::Null, -32700, &format!("parse error: {error}"))
                    }
                    Ok(value) => {
                        let id = value.get("id").cloned().unwrap_or(Value::Null);
                        match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                            // Parsed from a value but not from the text: a
                            // duplicate key, say. Take it as the value reads.
                            Ok(message) => {
                                if !input.forward(message, permit).await {
                                    break;
                                }
                                continue;
                            }
                            Err(error) => {
                                error_reply(id, -32600, &format!("invalid request: {error}"))
                            }
                        }
                    }
                };
                if write_line(replies, &reply).await.is_err() {
                    break;
                }
            }
            // Dropping `tx` ends `receive`, which rmcp treats as EOF.
        });
        LineTransport {
            incoming,
            writer,
            admission,
        }
    }
}

/// How long the reader waits for rmcp to open the session after handing
/// it `notifications/initialized` (it does so at once; a session whose
/// handshake failed never opens).
const HANDSHAKE_END: std::time::Duration = std::time::Duration::from_secs(5);

/// What the reader hands each message to.
struct Input {
    gate: Arc<Admission>,
    /// To rmcp's loop.
    tx: mpsc::Sender<ClientJsonRpcMessage>,
    /// The calls run beside it.
    calls: Arc<SessionCalls>,
    replies: Writer,
}

impl Input {
    /// Run `message` beside rmcp if [`SessionCalls::take`] takes it, else
    /// hand it to rmcp: a request keeps `permit` until it is answered; a
    /// cancellation settles the request it names (which may then go
    /// unanswered). `false` once rmcp has stopped reading.
    async fn forward(
        &self,
        message: ClientJsonRpcMessage,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> bool {
        // rmcp ends the handshake on it: the next line is read once the
        // session is open, so a call after it runs here
        // (`SessionCalls::opened`).
        let initialized = matches!(
            &message,
            ClientJsonRpcMessage::Notification(n)
                if matches!(n.notification, rmcp::model::ClientNotification::InitializedNotification(_))
        );
        let message = match message {
            ClientJsonRpcMessage::Request(request) => {
                self.gate.admit(request.id.clone(), permit);
                let (writer, gate) = (Arc::clone(&self.replies), Arc::clone(&self.gate));
                let answer = move |answer| async move {
                    // As rmcp's loop does, a failed write is logged.
                    if let Err(error) = send(&writer, &gate, answer).await {
                        tracing::error!(%error, "fail to response message");
                    }
                };
                match self.calls.take(request, answer) {
                    Ok(()) => return true,
                    Err(request) => ClientJsonRpcMessage::Request(request),
                }
            }
            ClientJsonRpcMessage::Notification(notification) => {
                if let rmcp::model::ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.gate.settle(id);
                    self.calls.cancelled(id);
                }
                match self.calls.take_notification(notification) {
                    Ok(()) => return true,
                    Err(notification) => ClientJsonRpcMessage::Notification(notification),
                }
            }
            other => other,
        };
        let sent = self.tx.send(message).await.is_ok();
        if sent && initialized {
            self.calls.opened(HANDSHAKE_END).await;
        }
        sent
    }
}

/// Queue `item` for writing (see [`write_line`]), and settle the request it
/// answers: its reply's bytes count against the output gate until they
/// are written.
async fn send(
    writer: &Writer,
    admission: &Admission,
    item: ServerJsonRpcMessage,
) -> std::io::Result<()> {
    let answers = match &item {
        ServerJsonRpcMessage::Response(response) => Some(response.id.clone()),
        ServerJsonRpcMessage::Error(error) => error.id.clone(),
        _ => None,
    };
    crate::json::with_serialized(&item, |line| queue(writer, &[line, b"\n"]))
        .map_err(std::io::Error::other)?;
    let written = write_queued(writer).await;
    if let Some(id) = answers {
        admission.settle(&id);
    }
    written
}

/// The capacity the server asks of its stdin and stdout pipes (Linux makes
/// a pipe 64 KiB). A reply larger than the pipe is written a pipe's worth at
/// a time, each piece waiting for the client to read the last, so a reply of
/// a few hundred KiB costs several wake-ups of each side where a larger pipe
/// takes it in one write (a 1,000-entry listing's reply is about 170 KB;
/// docs/benchmarks.md, round twenty-two). The kernel gives a pipe its pages
/// only as they fill, so an idle pipe costs nothing more. An unprivileged
/// process cannot go past `/proc/sys/fs/pipe-max-size` (1 MiB by default),
/// and once one user's pipes together pass `pipe-user-pages-soft` (64 MiB
/// by default) that user's new pipes are made small, so this stays a
/// fraction of both.
const PIPE_BYTES: usize = 256 * 1024;

/// Ask for [`PIPE_BYTES`] of capacity on `pipe` unless it has that much.
/// Best effort: a pipe left at its size works the same, only slower for
/// large messages.
fn grow_pipe(pipe: &impl std::os::fd::AsFd) {
    #[cfg(target_os = "linux")]
    {
        let size = rustix::pipe::fcntl_getpipe_size(pipe).unwrap_or(0);
        if size < PIPE_BYTES
            && let Err(error) = rustix::pipe::fcntl_setpipe_size(pipe, PIPE_BYTES)
        {
            tracing::debug!(%error, size, "cannot grow a stdio pipe; it stays as it is");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pipe;
}

/// Stdin as a non-blocking pipe, if it is a pipe.
fn pipe_reader() -> Option<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd as _;
    let file = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned().ok()?);
    // Fails (and we fall back) unless it is a FIFO open for reading.
    let receiver = tokio::net::unix::pipe::Receiver::from_file(file).ok()?;
    grow_pipe(&receiver);
    Some(receiver)
}

/// Stdout as a non-blocking pipe, if it is a pipe that is not also stderr
/// (non-blocking is a property of the open pipe, and log lines written to
/// a shared one could then be cut short).
fn pipe_writer() -> Option<tokio::net::unix::pipe::Sender> {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::MetadataExt as _;
    let out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned().ok()?);
    let err = std::fs::File::from(std::io::stderr().as_fd().try_clone_to_owned().ok()?);
    let (out_meta, err_meta) = (out.metadata().ok()?, err.metadata().ok()?);
    if (out_meta.dev(), out_meta.ino()) == (err_meta.dev(), err_meta.ino()) {
        return None;
    }
    let sender = tokio::net::unix::pipe::Sender::from_file(out).ok()?;
    grow_pipe(&sender);
    Some(sender)
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Read one line into `buf`, without ever holding more than
/// [`MAX_LINE_BYTES`]: the rest of an over-long line is consumed and
/// discarded.
async fn read_line(
    reader: &mut (impl AsyncBufReadExt + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                LineRead::Eof
            } else if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let used = chunk.len();
        if !too_long {
            if buf.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if done {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

fn error_reply(id: Value, code: i64, message: &str) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

/// Queue `line` (which ends with `\n`), then write everything queued
/// unless another sender holds the sink: that sender writes it, and this
/// one returns at once. Lines are queued whole, so the stream only ever
/// holds complete lines, in the order they were queued. Queued bytes count
/// against the output gate ([`Admission`]) until they are written (or
/// their write failed). An error is the error of a write this call made;
/// a line left to another sender is reported as queued.
async fn write_line(writer: &Writer, line: &[u8]) -> std::io::Result<()> {
    queue(writer, &[line]);
    write_queued(writer).await
}

/// Queue the line made of `parts` for [`write_queued`].
fn queue(writer: &Writer, parts: &[&[u8]]) {
    // Counted before it is queued: a holder may write it at once.
    writer
        .admission
        .output_queued(parts.iter().map(|part| part.len()).sum());
    let mut pending = lock(&writer.pending);
    for part in parts {
        pending.extend_from_slice(part);
    }
}

/// Write everything queued unless another sender holds the sink (see
/// [`write_line`]).
async fn write_queued(writer: &Writer) -> std::io::Result<()> {
    loop {
        let Ok(mut sink) = writer.sink.try_lock() else {
            // The holder writes it: it looks at the queue again after it
            // lets go of the sink (below), so no line is left behind.
            return Ok(());
        };
        let mut batch = std::mem::take(&mut *lock(&writer.pending));
        if !batch.is_empty() {
            crate::phases::mark(crate::phases::Phase::Write);
            let written = match sink.write_all(&batch).await {
                Ok(()) => sink.flush().await,
                Err(error) => Err(error),
            };
            crate::phases::mark(crate::phases::Phase::Written);
            writer.admission.output_written(batch.len());
            written?;
            // The buffer goes back for the next lines, unless some were
            // queued meanwhile (they are in a buffer of their own) or it
            // grew large.
            if batch.capacity() <= crate::json::KEPT_BUFFER_BYTES {
                batch.clear();
                let mut pending = lock(&writer.pending);
                if pending.is_empty() {
                    std::mem::swap(&mut *pending, &mut batch);
                }
            }
        }
        drop(sink);
        // Lines queued meanwhile by senders that found the sink taken:
        // write them (unless another sender has taken the sink since).
        if lock(&writer.pending).is_empty() {
            return Ok(());
        }
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        let admission = Arc::clone(&self.admission);
        async move { send(&writer, &admission, item).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut sink = self.writer.sink.lock().await;
        sink.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8]) -> Vec<String> {
        let mut reader = BufReader::new(input);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match read_line(&mut reader, &mut buf).await.expect("read") {
                LineRead::Eof => break,
                LineRead::TooLong => out.push("<too long>".to_owned()),
                LineRead::Line => out.push(String::from_utf8_lossy(&buf).into_owned()),
            }
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_the_last_unterminated_one() {
        assert_eq!(lines(b"a\nbc\nd").await, ["a\n", "bc\n", "d"]);
        assert!(lines(b"").await.is_empty());
    }

    fn admission() -> Arc<Admission> {
        let limits = StdioLimits {
            max_requests_in_flight: 8,
            max_pending_output: 64 << 20,
            one_thread: None,
        };
        Arc::new(Admission::new(
            limits,
            Arc::new(crate::RequestBudget::new(8 << 10)),
        ))
    }

    #[tokio::test]
    async fn a_request_is_settled_once_under_its_own_id() {
        let admission = admission();
        let seven = rmcp::model::RequestId::Number(7);
        let quoted = rmcp::model::RequestId::String("7".into());
        // A client may reuse an id while a request under it is in flight.
        for id in [&seven, &seven, &quoted] {
            let permit = admission.reserve(2 << 10).await.expect("budget");
            admission.admit(id.clone(), permit);
        }
        assert_eq!(admission.state().requests, 3);
        // `"7"` is not `7`, and settling twice releases it once.
        admission.settle(&quoted);
        admission.settle(&quoted);
        assert_eq!(admission.state().requests, 2);
        admission.settle(&rmcp::model::RequestId::Number(8));
        assert_eq!(admission.state().requests, 2);
        admission.settle(&seven);
        assert_eq!(admission.state().requests, 1);
        admission.settle(&seven);
        assert_eq!(admission.state().requests, 0);
        assert!(admission.state().in_flight.is_empty());
        // Every permit is back: the whole budget can be held again.
        let whole = admission.budget.reserve(8 << 10);
        assert!(
            tokio::time::timeout(std::time::Duration::from_secs(5), whole)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn replies_go_out_whole_and_no_large_buffer_stays() {
        use rmcp::model::{CallToolResult, ContentBlock, ServerResult};
        let admission = admission();
        let (client, server) = tokio::io::duplex(1 << 20);
        let writer: Writer = Arc::new(Out {
            pending: std::sync::Mutex::new(Vec::new()),
            sink: Mutex::new(Box::new(server)),
            admission: Arc::clone(&admission),
        });
        let reply = |id: i64, text: String| {
            ServerJsonRpcMessage::response(
                ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text(
                    text,
                )])),
                rmcp::model::RequestId::Number(id),
            )
        };
        let big = "x".repeat(4 * crate::json::KEPT_BUFFER_BYTES);
        let reading = tokio::spawn(async move {
            let mut lines = BufReader::new(client).lines();
            let mut texts = Vec::new();
            while let Some(line) = lines.next_line().await.expect("read") {
                let value: Value = serde_json::from_str(&line).expect("one JSON reply a line");
                texts.push((
                    value["id"].as_i64().expect("id"),
                    value["result"]["content"][0]["text"]
                        .as_str()
                        .expect("text")
                        .len(),
                ));
                if texts.len() == 3 {
                    break;
                }
            }
            texts
        });
        for (id, text) in [
            (1, "small".to_owned()),
            (2, big.clone()),
            (3, "small".to_owned()),
        ] {
            send(&writer, &admission, reply(id, text))
                .await
                .expect("written");
        }
        assert_eq!(
            reading.await.expect("reader"),
            [(1, 5), (2, big.len()), (3, 5)]
        );
        // The buffers kept for the next replies stay small.
        assert!(lock(&writer.pending).capacity() <= crate::json::KEPT_BUFFER_BYTES);
        assert_eq!(admission.state().pending_output, 0);
    }

    #[tokio::test]
    async fn over_long_lines_are_skipped_not_buffered() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&input).await, ["<too long>", "ok\n"]);
    }
}
