//! The call journal: one JSON line per tool call, for incident review.
//!
//! Each line records when, which tool (and the digest of the component that
//! ran it), which client, the arguments (keys the config names redacted,
//! secret values scrubbed; or only their digest, or nothing), the outcome,
//! why a call was refused, the duration, the fuel and peak memory used, the
//! bytes in and out, and what the tool did on the network.
//!
//! Rules, in one place:
//! - Recording never blocks a call: the line is formatted on the caller's
//!   thread and handed to a writer thread through a bounded queue; a full
//!   queue drops the line and counts it.
//! - A journal that cannot be written (folder missing or read-only, disk
//!   full) is an error in the log, loudly: at once, then at most once a
//!   minute with the number of lines lost. Calls go on. Each new line
//!   retries the file, so fixing the folder brings the journal back.
//! - The file is rotated by size: `FILE` → `FILE.1` → … → `FILE.<keep>`,
//!   the oldest deleted. The file is created with mode 0600.
//! - Secrets never reach the journal: configured secret values are replaced
//!   by `[secret]` wherever they appear in the arguments or messages.
//! - No line recorded before exit is lost: [`Journal::flush`] (called when a
//!   transport stops, on stdin EOF and on SIGTERM/SIGINT alike) waits until
//!   every line queued before it is written, and dropping a `Journal` waits
//!   for its writer to drain the queue. Both wait at most [`FLUSH_TIMEOUT`],
//!   so a hung disk cannot hang the exit.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::config::{ArgumentsMode, JournalConfig, JournalStream};
use crate::grants::network::NetRecord;
use crate::redact::Scrub;

/// Lines that may wait for the writer before new ones are dropped.
const QUEUE: usize = 4096;
/// The longest message a line keeps (an error's first line, a refusal).
const MAX_MESSAGE_BYTES: usize = 4096;
/// The longest host name a line keeps (DNS names are at most 253 bytes).
const MAX_HOST_BYTES: usize = 256;
/// How often a failing journal is reported again.
const REPORT_EVERY: Duration = Duration::from_secs(60);
/// The longest a flush (or the drop of a journal) waits for the writer: long
/// enough for a full queue on a slow disk, short enough that a hung disk
/// does not hang the process's exit.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Set while serving MCP over stdio: stdout is the protocol then, and a
/// journal configured to go there (by a config reloaded since) writes
/// nothing to it, loudly.
pub static STDOUT_IS_PROTOCOL: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// What the writer thread is sent.
enum Message {
    /// One line, newline included.
    Line(Vec<u8>),
    /// Write everything queued before this, then answer.
    Flush(SyncSender<()>),
}

/// Who made a call.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ClientId {
    /// `stdio`, `http` or `cli`.
    pub transport: &'static str,
    /// The HTTP session (`Mcp-Session-Id`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The JSON-RPC request id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The client's name and version from its `clientInfo`, if it sent one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Who the access token says is calling (HTTP with `[http.oauth]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<CallerRecord>,
}

/// An authenticated caller, as the journal records it: never the token.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CallerRecord {
    /// The `[[callers]]` entry that applied, if entries exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The token's issuer.
    pub issuer: String,
    /// Its subject.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The client it was issued to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// One call, as the dispatcher saw it.
pub struct Entry<'a> {
    /// The tool.
    pub tool: &'a str,
    /// The digest of the component that ran (or would have run) it.
    pub digest: &'a str,
    /// Who called.
    pub client: &'a ClientId,
    /// The arguments as received.
    pub arguments: &'a Value,
    /// How to record them.
    pub arguments_mode: ArgumentsMode,
    /// Secret values to scrub.
    pub secrets: &'a [&'a str],
    /// `ok`, `error`, `refused`, `input_required`, `cancelled`.
    pub outcome: &'a str,
    /// The error or refusal message, if any.
    pub message: Option<&'a str>,
    /// Time from the call's arrival to its result.
    pub duration: Duration,
    /// Fuel used by the guest.
    pub fuel: u64,
    /// Peak linear memory of the guest, in bytes.
    pub peak_memory: u64,
    /// Size of the arguments, in bytes.
    pub bytes_in: u64,
    /// Size of the tool's result (content and structured output), in
    /// bytes; 0 when it returned none (a trap, a limit, a refusal).
    pub bytes_out: u64,
    /// What the call did on the network.
    pub net: &'a NetRecord,
    /// The MCP task the call ran as, if any.
    pub task: Option<&'a str>,
}

/// A moment in an MCP task's life: the journal's record of tasks beside
/// the lines of the calls they run.
pub struct TaskEvent<'a> {
    /// The task's id.
    pub task: &'a str,
    /// Its tool.
    pub tool: &'a str,
    /// Who created it.
    pub client: &'a ClientId,
    /// `created`, `completed`, `failed`, `cancelled` or `expired`.
    pub event: &'a str,
    /// Why, where there is something to say.
    pub message: Option<&'a str>,
}

/// An open journal. Dropping it lets the writer finish the queued lines and
/// waits for it (at most [`FLUSH_TIMEOUT`]).
pub struct Journal {
    config: JournalConfig,
    /// The writer itself, in `durable` mode: lines are written on the
    /// recording thread, before the call's reply.
    inline: Option<std::sync::Mutex<Writer>>,
    /// `None` only while dropping (and in `durable` mode).
    tx: Option<SyncSender<Message>>,
    dropped: Arc<AtomicU64>,
    /// Signalled by the writer thread when it stops. In a mutex only
    /// because a `Receiver` is not `Sync`; it is touched once, in `drop`.
    stopped: std::sync::Mutex<Receiver<()>>,
}

impl Journal {
    /// Start the writer for `config`. Never fails: a file that cannot be
    /// opened is reported (loudly) and retried on every line.
    pub fn open(config: JournalConfig) -> Journal {
        if config.durable {
            let mut writer = Writer::new(config.clone(), Arc::new(AtomicU64::new(0)));
            writer.ensure_open();
            let (_, stopped) = std::sync::mpsc::sync_channel(1);
            return Journal {
                config,
                inline: Some(std::sync::Mutex::new(writer)),
                tx: None,
                dropped: Arc::new(AtomicU64::new(0)),
                stopped: std::sync::Mutex::new(stopped),
            };
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let (stopped_tx, stopped) = std::sync::mpsc::sync_channel(1);
        let dropped = Arc::new(AtomicU64::new(0));
        let mut writer = Writer::new(config.clone(), Arc::clone(&dropped));
        // Open now, so a bad path is reported at start-up, not at the first
        // call.
        writer.ensure_open();
        let spawned = std::thread::Builder::new()
            .name("toolcage-journal".into())
            .spawn(move || {
                writer.run(rx);
                let _ = stopped_tx.send(());
            });
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the call journal writer; calls will not be journaled");
        }
        Journal {
            config,
            inline: None,
            tx: Some(tx),
            dropped,
            stopped: std::sync::Mutex::new(stopped),
        }
    }

    /// Wait until every line recorded before this call is written to the
    /// file (at most [`FLUSH_TIMEOUT`]); `false` if that did not happen in
    /// time. Blocking: call it off the async runtime's threads, or at exit.
    pub fn flush(&self) -> bool {
        let Some(tx) = &self.tx else {
            return true;
        };
        let (ack_tx, ack) = std::sync::mpsc::sync_channel(1);
        let deadline = Instant::now() + FLUSH_TIMEOUT;
        // The queue may be full: wait for room, but not past the deadline.
        let mut message = Message::Flush(ack_tx);
        loop {
            match tx.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    message = back;
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(TrySendError::Full(_)) => return false,
            }
        }
        let flushed = ack
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok();
        if !flushed {
            tracing::error!(
                path = %self.config.path.display(),
                "the call journal did not finish writing in time; its last lines may be lost"
            );
        }
        flushed
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &JournalConfig {
        &self.config
    }

    /// Record one call. Never blocks.
    pub fn record(&self, entry: &Entry<'_>) {
        let line = self.format(entry, SystemTime::now());
        self.send(line);
    }

    /// Record a task's creation or end. Never blocks. Its line has
    /// `"event": "task"` and no `outcome`, so a reader of call lines can
    /// tell the two apart.
    pub fn record_task(&self, event: &TaskEvent<'_>) {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut line = Map::new();
        line.insert("time".into(), json!(rfc3339_ms(unix_ms)));
        line.insert("unix_ms".into(), json!(unix_ms));
        line.insert("event".into(), json!("task"));
        line.insert("task".into(), json!(event.task));
        line.insert("tool".into(), json!(event.tool));
        line.insert("client".into(), json!(event.client));
        line.insert("status".into(), json!(event.event));
        if let Some(message) = event.message {
            line.insert(
                "message".into(),
                json!(crate::redact::truncate(message, MAX_MESSAGE_BYTES)),
            );
        }
        let mut bytes = Value::Object(line).to_string().into_bytes();
        bytes.push(b'\n');
        self.send(bytes);
    }

    /// Record the end of an agent run (`toolcage agent`): `fields` (the
    /// run's id, model, steps, tokens, how it ended) with `"event":
    /// "agent"`. Never blocks. Its calls have their own lines.
    pub fn record_agent_run(&self, fields: Map<String, Value>) {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut line = Map::new();
        line.insert("time".into(), json!(rfc3339_ms(unix_ms)));
        line.insert("unix_ms".into(), json!(unix_ms));
        line.insert("event".into(), json!("agent"));
        for (key, value) in fields {
            let value = match value {
                Value::String(text) => json!(crate::redact::truncate(&text, MAX_MESSAGE_BYTES)),
                other => other,
            };
            line.insert(key, value);
        }
        let mut bytes = Value::Object(line).to_string().into_bytes();
        bytes.push(b'\n');
        self.send(bytes);
    }

    fn send(&self, line: Vec<u8>) {
        if let Some(writer) = &self.inline {
            let mut writer = match writer.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            writer.write(&line, 1);
            return;
        }
        let sent = match &self.tx {
            Some(tx) => tx.try_send(Message::Line(line)).is_ok(),
            None => false,
        };
        if !sent {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The JSON line for `entry`, newline included.
    fn format(&self, entry: &Entry<'_>, now: SystemTime) -> Vec<u8> {
        let unix_ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let scrub = Scrub::new(entry.secrets.iter().copied());
        let mut line = Map::new();
        line.insert("time".into(), json!(rfc3339_ms(unix_ms)));
        line.insert("unix_ms".into(), json!(unix_ms));
        line.insert("tool".into(), json!(entry.tool));
        line.insert("digest".into(), json!(entry.digest));
        line.insert("client".into(), json!(entry.client));
        match entry.arguments_mode {
            ArgumentsMode::Full => {
                let mut arguments = entry.arguments.clone();
                redact(&mut arguments, &self.config.redact, &scrub);
                line.insert("arguments".into(), arguments);
            }
            ArgumentsMode::Digest => {
                let digest = Sha256::digest(entry.arguments.to_string().as_bytes());
                line.insert(
                    "arguments_sha256".into(),
                    json!(crate::catalog::hex(&digest)),
                );
            }
            ArgumentsMode::None => {}
        }
        line.insert("outcome".into(), json!(entry.outcome));
        if let Some(task) = entry.task {
            line.insert("task".into(), json!(task));
        }
        if let Some(message) = entry.message {
            line.insert(
                "message".into(),
                json!(scrub.text(message, MAX_MESSAGE_BYTES)),
            );
        }
        line.insert(
            "duration_ms".into(),
            json!((entry.duration.as_secs_f64() * 1e6).round() / 1e3),
        );
        line.insert("fuel".into(), json!(entry.fuel));
        line.insert("peak_memory_bytes".into(), json!(entry.peak_memory));
        line.insert("bytes_in".into(), json!(entry.bytes_in));
        line.insert("bytes_out".into(), json!(entry.bytes_out));
        let net = entry.net;
        if net.requests > 0 || net.refused > 0 {
            // Hosts are the tool's to choose: scrubbed, and at most
            // `MAX_RECORDED_HOSTS` of them, so the line stays bounded.
            let hosts: Vec<Value> = net
                .hosts
                .iter()
                .map(|(host, counts)| {
                    let mut host = json!({
                        "host": scrub.text(host, MAX_HOST_BYTES),
                        "sent": counts.sent,
                        "refused": counts.refused,
                    });
                    if let Some(why) = counts.why {
                        host["why"] = json!(why);
                    }
                    host
                })
                .collect();
            line.insert(
                "network".into(),
                json!({
                    "requests": net.requests,
                    "refused": net.refused,
                    "bytes_sent": net.bytes_sent,
                    "bytes_received": net.bytes_received,
                    "hosts": hosts,
                    "other_hosts": net.other_hosts,
                }),
            );
        }
        let mut bytes = Value::Object(line).to_string().into_bytes();
        bytes.push(b'\n');
        bytes
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if self.inline.is_some() {
            // Every line was written as it was recorded.
            return;
        }
        // Disconnecting lets the writer drain what is queued and stop.
        drop(self.tx.take());
        let stopped = match self.stopped.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(FLUSH_TIMEOUT) {
            tracing::error!(
                path = %self.config.path.display(),
                "the call journal did not finish writing in time; its last lines may be lost"
            );
        }
    }
}

/// Replace the values of `keys` (lowercase) at any depth by `"[redacted]"`,
/// and every occurrence of a secret in a string by `[secret]`.
fn redact(value: &mut Value, keys: &[String], scrub: &Scrub<'_>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if keys.iter().any(|k| k.eq_ignore_ascii_case(key)) {
                    *value = json!("[redacted]");
                } else {
                    redact(value, keys, scrub);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, keys, scrub)),
        Value::String(text) => {
            if let std::borrow::Cow::Owned(scrubbed) = scrub.replace(text) {
                *text = scrubbed;
            }
        }
        _ => {}
    }
}

struct Writer {
    config: JournalConfig,
    file: Option<std::fs::File>,
    size: u64,
    failing_since: Option<String>,
    last_report: Option<Instant>,
    lost: u64,
    dropped: Arc<AtomicU64>,
}

impl Writer {
    fn new(config: JournalConfig, dropped: Arc<AtomicU64>) -> Self {
        Writer {
            config,
            file: None,
            size: 0,
            failing_since: None,
            last_report: None,
            lost: 0,
            dropped,
        }
    }

    fn run(mut self, rx: Receiver<Message>) {
        let mut batch = Vec::new();
        let mut lines = 0u64;
        while let Ok(first) = rx.recv() {
            // Batch what has queued up into one write; a flush request writes
            // the batch so far, then answers.
            let mut next = Some(first);
            while let Some(message) = next.take() {
                match message {
                    Message::Line(line) => {
                        batch.extend_from_slice(&line);
                        lines += 1;
                    }
                    Message::Flush(ack) => {
                        self.write_batch(&mut batch, &mut lines);
                        let _ = ack.send(());
                    }
                }
                if batch.len() < 1 << 20 {
                    next = rx.try_recv().ok();
                }
            }
            self.write_batch(&mut batch, &mut lines);
        }
    }

    fn write_batch(&mut self, batch: &mut Vec<u8>, lines: &mut u64) {
        if *lines > 0 {
            self.write(batch, *lines);
        }
        batch.clear();
        *lines = 0;
    }

    fn write(&mut self, batch: &[u8], lines: u64) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::error!(
                lines = dropped,
                "the call journal fell behind; lines were dropped"
            );
        }
        if let Some(stream) = self.config.to {
            // A collector reads the stream; a failed write there has nowhere
            // better to go than the log.
            let written = match stream {
                JournalStream::Stdout if STDOUT_IS_PROTOCOL.load(Ordering::Relaxed) => {
                    Err(std::io::Error::other(
                        "stdout carries the MCP protocol (serving over stdio); set `journal.to = \"stderr\"`",
                    ))
                }
                JournalStream::Stdout => std::io::stdout().lock().write_all(batch),
                JournalStream::Stderr => std::io::stderr().lock().write_all(batch),
            };
            if let Err(error) = written {
                self.lost += lines;
                self.fail(&error.to_string());
            }
            return;
        }
        if self.size > 0 && self.size + batch.len() as u64 > self.config.max_bytes {
            self.rotate();
        }
        if !self.ensure_open() {
            self.lost += lines;
            return;
        }
        let result = match self.file.as_mut() {
            Some(file) => file.write_all(batch),
            None => return,
        };
        match result {
            Ok(()) => {
                self.size += batch.len() as u64;
                if self.failing_since.take().is_some() {
                    tracing::warn!(
                        path = %self.config.path.display(),
                        lost = self.lost,
                        "the call journal is being written again"
                    );
                    self.lost = 0;
                }
            }
            Err(error) => {
                self.file = None;
                self.lost += lines;
                self.fail(&error.to_string());
            }
        }
    }

    /// Open the file if it is not open; `false` (reported) if it cannot be.
    fn ensure_open(&mut self) -> bool {
        if self.file.is_some() {
            return true;
        }
        match open_append(&self.config.path) {
            Ok((file, size)) => {
                self.file = Some(file);
                self.size = size;
                true
            }
            Err(error) => {
                self.fail(&error.to_string());
                false
            }
        }
    }

    fn fail(&mut self, error: &str) {
        let due = self
            .last_report
            .is_none_or(|at| at.elapsed() >= REPORT_EVERY);
        if self.failing_since.is_none() || due {
            tracing::error!(
                path = %self.config.path.display(),
                %error,
                lost = self.lost,
                "CANNOT WRITE THE CALL JOURNAL; calls go on but are not journaled"
            );
            self.last_report = Some(Instant::now());
        }
        self.failing_since.get_or_insert_with(|| error.to_owned());
    }

    fn rotate(&mut self) {
        self.file = None;
        let path = &self.config.path;
        let numbered = |n: u32| -> PathBuf {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        let result = if self.config.keep == 0 {
            std::fs::remove_file(path)
        } else {
            let _ = std::fs::remove_file(numbered(self.config.keep));
            for n in (1..self.config.keep).rev() {
                let _ = std::fs::rename(numbered(n), numbered(n + 1));
            }
            std::fs::rename(path, numbered(1))
        };
        if let Err(error) = result {
            self.fail(&format!("cannot rotate: {error}"));
        }
        self.size = 0;
    }
}

fn open_append(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    let size = file.metadata()?.len();
    Ok((file, size))
}

/// The journal files at `path`, oldest first: `path.N`, …, `path.1`,
/// `path`, those that exist.
pub fn files(path: &Path) -> Vec<PathBuf> {
    let mut rotated: Vec<(u32, PathBuf)> = Vec::new();
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
        let prefix = format!("{}.", name.to_string_lossy());
        if let Ok(entries) = std::fs::read_dir(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        }) {
            for entry in entries.flatten() {
                let file_name = entry.file_name().to_string_lossy().into_owned();
                if let Some(n) = file_name
                    .strip_prefix(&prefix)
                    .and_then(|n| n.parse::<u32>().ok())
                {
                    rotated.push((n, entry.path()));
                }
            }
        }
    }
    rotated.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    let mut files: Vec<PathBuf> = rotated.into_iter().map(|(_, p)| p).collect();
    if path.exists() {
        files.push(path.to_owned());
    }
    files
}

/// `unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, UTC).
pub fn rfc3339_ms(unix_ms: u64) -> String {
    let timestamp = i64::try_from(unix_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    timestamp.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(path: PathBuf, max_bytes: u64, keep: u32) -> JournalConfig {
        JournalConfig {
            to: None,
            durable: false,
            path,
            max_bytes,
            keep,
            arguments: ArgumentsMode::Full,
            redact: vec!["password".into(), "token".into()],
        }
    }

    fn writer(config: JournalConfig) -> Writer {
        Writer::new(config, Arc::default())
    }

    fn entry<'a>(
        arguments: &'a Value,
        client: &'a ClientId,
        net: &'a NetRecord,
        secrets: &'a [&'a str],
    ) -> Entry<'a> {
        Entry {
            tool: "t",
            digest: "d",
            client,
            arguments,
            arguments_mode: ArgumentsMode::Full,
            secrets,
            outcome: "ok",
            message: Some("failed with hunter22 inside"),
            duration: Duration::from_micros(1500),
            fuel: 7,
            peak_memory: 65536,
            bytes_in: 10,
            bytes_out: 20,
            net,
            task: None,
        }
    }

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_ms(1_795_000_000_000), "2026-11-18T11:06:40.000Z");
    }

    #[test]
    fn lines_redact_keys_and_scrub_secrets() {
        let dir = std::env::temp_dir().join(format!("toolcage-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let journal = Journal::open(config(dir.join("j.jsonl"), 1 << 20, 2));
        let arguments = json!({"path": "/x", "Password": "p", "nested": [{"token": 1}], "note": "key=hunter22!"});
        let client = ClientId {
            transport: "stdio",
            request: Some("7".into()),
            ..ClientId::default()
        };
        let net = NetRecord::default();
        let line = journal.format(&entry(&arguments, &client, &net, &["hunter22"]), UNIX_EPOCH);
        let value: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(value["arguments"]["Password"], "[redacted]");
        assert_eq!(value["arguments"]["nested"][0]["token"], "[redacted]");
        assert_eq!(value["arguments"]["path"], "/x");
        assert_eq!(value["arguments"]["note"], "key=[secret]!");
        assert_eq!(value["message"], "failed with [secret] inside");
        assert_eq!(
            value["client"],
            json!({"transport": "stdio", "request": "7"})
        );
        assert_eq!(value["duration_ms"], 1.5);
        assert!(value.get("network").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_durable_journal_has_the_line_when_record_returns() {
        let dir = std::env::temp_dir().join(format!("toolcage-durable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("j.jsonl");
        let journal = Journal::open(JournalConfig {
            durable: true,
            ..config(path.clone(), 1 << 20, 2)
        });
        let arguments = json!({});
        let client = ClientId::default();
        let net = NetRecord::default();
        for n in 1..=3 {
            journal.record(&entry(&arguments, &client, &net, &[]));
            // No flush, no drop: the line is in the file already.
            let text = std::fs::read_to_string(&path).expect("read");
            assert_eq!(text.lines().count(), n, "{text}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rotation_keeps_the_configured_number_of_files() {
        let dir = std::env::temp_dir().join(format!("toolcage-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("j.jsonl");
        let mut writer = writer(config(path.clone(), 100, 2));
        for i in 0..10 {
            writer.write(format!("{{\"n\":{i:040}}}\n").as_bytes(), 1);
        }
        let found = files(&path);
        assert_eq!(
            found,
            [
                PathBuf::from(format!("{}.2", path.display())),
                PathBuf::from(format!("{}.1", path.display())),
                path.clone()
            ]
        );
        let last = std::fs::read_to_string(&path).expect("read");
        assert!(last.contains(&format!("{:040}", 9)), "{last}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_journal_loses_lines_but_never_fails() {
        let mut writer = writer(config(PathBuf::from("/proc/toolcage-no/j.jsonl"), 100, 2));
        writer.write(b"{}\n", 1);
        writer.write(b"{}\n", 1);
        assert_eq!(writer.lost, 2);
        assert!(writer.failing_since.is_some());
    }
}
