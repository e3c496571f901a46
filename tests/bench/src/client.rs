//! A minimal MCP client over a child process's stdio: newline-delimited
//! JSON-RPC, nothing else. It does as little as it can per message (one
//! `write` per request, one JSON parse per reply) so that the numbers are
//! the server's, not the client's.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

/// The MCP revision the client announces.
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// A server argument equal to or containing this is replaced, per spawn, by
/// a new empty temporary folder that is removed after the server exits; as
/// `--cache-dir {fresh_dir}` it gives every run a cold compile cache.
pub const FRESH_DIR: &str = "{fresh_dir}";

/// What a server sends when the tools it serves change.
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";

/// How long to wait for any one reply. A hung server then fails the
/// benchmark with an error instead of hanging it forever.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a server gets to exit after its stdin is closed before it is
/// killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// How to start the server under test.
#[derive(Debug, Clone)]
pub struct ServerCommand {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Where the server's stderr goes (appended); `None` discards it.
    pub stderr: Option<PathBuf>,
}

/// A running server and the client end of its stdio.
pub struct Server {
    // Declared before `fresh_dir`: fields drop in order, so on an error path
    // the child is killed (kill_on_drop) before its folder is removed.
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    reader: Replies,
    next_id: u64,
    fresh_dir: Option<FreshDir>,
}

impl Server {
    /// Start the server. Time starts before this call for a startup
    /// measurement, so it does no more than spawn.
    pub fn spawn(command: &ServerCommand) -> anyhow::Result<Server> {
        let (program, _) = command
            .argv
            .split_first()
            .context("no server command given after `--`")?;
        let fresh_dir = if command.argv.iter().any(|a| a.contains(FRESH_DIR)) {
            Some(FreshDir::create()?)
        } else {
            None
        };
        let argv: Vec<String> = match &fresh_dir {
            Some(dir) => {
                let path = dir.0.to_string_lossy();
                command
                    .argv
                    .iter()
                    .map(|a| a.replace(FRESH_DIR, &path))
                    .collect()
            }
            None => command.argv.clone(),
        };
        let stderr = open_stderr(command.stderr.as_deref())?;
        let mut child = Command::new(program)
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            // Error paths just return; this makes sure no server outlives them.
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the server `{}`", argv.join(" ")))?;
        let pid = child.id().context("the server exited at once")?;
        let stdin = child.stdin.take().context("the server has no stdin pipe")?;
        let stdout = child
            .stdout
            .take()
            .context("the server has no stdout pipe")?;
        Ok(Server {
            child,
            pid,
            stdin: Some(stdin),
            reader: Replies::new(stdout),
            next_id: 0,
            fresh_dir,
        })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Reserve `count` consecutive request ids; returns the first.
    pub fn reserve_ids(&mut self, count: u64) -> u64 {
        let first = self.next_id;
        self.next_id += count;
        first
    }

    /// The write and read halves, borrowed separately so that a writer and a
    /// reader can run concurrently.
    fn io(&mut self) -> anyhow::Result<(&mut ChildStdin, &mut Replies)> {
        let stdin = self
            .stdin
            .as_mut()
            .context("the server's stdin is already closed")?;
        Ok((stdin, &mut self.reader))
    }

    /// Write bytes (whole lines) to the server. The pipe is unbuffered on
    /// our side: `write_all` hands them to the kernel, no flush needed.
    pub async fn send(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let (stdin, _) = self.io()?;
        stdin
            .write_all(bytes)
            .await
            .context("cannot write to the server's stdin (did it exit?)")
    }

    /// Send a request and wait for its reply's `result`; a JSON-RPC error is
    /// an error.
    pub async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.reserve_ids(1);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = serde_json::to_vec(&message).context("cannot encode a request")?;
        line.push(b'\n');
        self.send(&line).await?;
        let (mut reply, _) = self.reader.reply_to(id).await?;
        if let Some(error) = reply.get("error") {
            bail!("`{method}` failed: {error}");
        }
        reply
            .get_mut("result")
            .map(Value::take)
            .with_context(|| format!("the reply to `{method}` has no `result`: {reply}"))
    }

    /// `initialize`, then `notifications/initialized`.
    pub async fn handshake(&mut self) -> anyhow::Result<()> {
        self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "toolcage-bench", "version": env!("CARGO_PKG_VERSION")},
            }),
        )
        .await
        .context("the MCP handshake failed")?;
        self.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
    }

    /// `tools/list` (first page only); returns the tool names.
    pub async fn list_tools(&mut self) -> anyhow::Result<Vec<String>> {
        let result = self.request("tools/list", json!({})).await?;
        tool_names(&result)
    }

    /// One `tools/call`, sent then awaited; returns the time from just
    /// before the write to just after the reply's line was read (JSON
    /// parsing of the reply is not counted). `buf` is reused between calls.
    pub async fn timed_call(
        &mut self,
        call: &CallTemplate,
        buf: &mut Vec<u8>,
    ) -> anyhow::Result<Duration> {
        let id = self.reserve_ids(1);
        buf.clear();
        call.write(buf, id);
        let start = Instant::now();
        self.send(buf).await?;
        let (reply, read_at) = self.reader.reply_to(id).await?;
        check_call(&reply).with_context(|| format!("call id {id} failed"))?;
        Ok(read_at.duration_since(start))
    }

    /// `calls` `tools/call`s pipelined over the one connection, keeping up
    /// to `in_flight` outstanding: a writer sends whenever a slot is free, a
    /// reader checks each reply and frees its slot. Returns the time from
    /// the first write to the last reply read.
    pub async fn pipelined(
        &mut self,
        call: &CallTemplate,
        calls: u64,
        in_flight: usize,
    ) -> anyhow::Result<Duration> {
        let first_id = self.reserve_ids(calls);
        let seen_len = usize::try_from(calls).context("too many calls")?;
        let (stdin, replies) = self.io()?;
        let slots = Semaphore::new(in_flight);
        let start = Instant::now();
        let writer = async {
            let mut buf = Vec::with_capacity(4096);
            let mut sent = 0;
            while sent < calls {
                slots.acquire().await.context("slots closed")?.forget();
                buf.clear();
                call.write(&mut buf, first_id + sent);
                sent += 1;
                // Take every other free slot without waiting: when several
                // replies came in at once, their successors go out in one
                // write instead of one syscall each.
                while sent < calls {
                    let Ok(slot) = slots.try_acquire() else { break };
                    slot.forget();
                    call.write(&mut buf, first_id + sent);
                    sent += 1;
                }
                stdin
                    .write_all(&buf)
                    .await
                    .context("cannot write to the server's stdin (did it exit?)")?;
            }
            anyhow::Ok(())
        };
        let reader = async {
            // Each id must come back exactly once.
            let mut seen = vec![false; seen_len];
            let mut last = start;
            for _ in 0..calls {
                let (reply, read_at) = replies.next_reply().await?;
                let id = reply.get("id").and_then(Value::as_u64);
                let slot = id
                    .and_then(|id| id.checked_sub(first_id))
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| seen.get_mut(i));
                match slot {
                    Some(seen) if !*seen => *seen = true,
                    _ => bail!("a reply with an unexpected or repeated id: {reply}"),
                }
                check_call(&reply).with_context(|| format!("call id {} failed", reply["id"]))?;
                slots.add_permits(1);
                last = read_at;
            }
            anyhow::Ok(last)
        };
        // try_join: if either side fails the other is dropped, so a dead
        // server cannot leave the writer waiting for a slot forever.
        let ((), end) = tokio::try_join!(writer, reader)?;
        Ok(end.duration_since(start))
    }

    /// The instant the next notification `method` from the server was
    /// read, or `None` if none came by `deadline`; other messages are
    /// skipped. For use with no request outstanding.
    pub async fn notification_by(
        &mut self,
        method: &str,
        deadline: Instant,
    ) -> anyhow::Result<Option<Instant>> {
        self.reader.notification_by(method, deadline).await
    }

    /// Close stdin (the server's cue to exit) and wait; kill it if it is
    /// still running after 5 s. Warns on stderr when it did not exit cleanly.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let status: ExitStatus = match tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            Ok(status) => status.context("cannot wait for the server")?,
            Err(_) => {
                eprintln!(
                    "warning: the server (pid {}) did not exit within {} s of stdin closing; killing it",
                    self.pid,
                    EXIT_GRACE.as_secs()
                );
                self.child.kill().await.context("cannot kill the server")?;
                return Ok(());
            }
        };
        if !status.success() {
            eprintln!("warning: the server exited with {status}");
        }
        // The folder goes only once the server is gone (drop order).
        drop(self.fresh_dir.take());
        Ok(())
    }
}

/// The read half: replies from the server's stdout, one JSON message per
/// line.
pub struct Replies {
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl Replies {
    fn new(stdout: ChildStdout) -> Replies {
        Replies {
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            line: Vec::with_capacity(4096),
        }
    }

    /// The next message, with the instant its line was read, or `None` if
    /// no whole line came by `deadline`. A line cut off by the deadline is
    /// kept (`read_until` appends what it read before being cancelled) and
    /// completed by the next call, so waiting with a deadline never loses or
    /// splits a message.
    async fn next_message(
        &mut self,
        deadline: Instant,
    ) -> anyhow::Result<Option<(Value, Instant)>> {
        let read = match tokio::time::timeout_at(
            deadline.into(),
            self.stdout.read_until(b'\n', &mut self.line),
        )
        .await
        {
            Err(_) => return Ok(None),
            Ok(read) => read.context("cannot read the server's stdout")?,
        };
        let read_at = Instant::now();
        if read == 0 {
            bail!(
                "the server closed its stdout (exited?); rerun with --server-stderr FILE to see why"
            );
        }
        let message = serde_json::from_slice(&self.line).with_context(|| {
            format!(
                "the server wrote a line that is not JSON: {}",
                String::from_utf8_lossy(&self.line).trim_end()
            )
        });
        self.line.clear();
        Ok(Some((message?, read_at)))
    }

    /// The next message that is a reply (it has an `id` and no `method`),
    /// with the instant its line was read. Notifications and requests from
    /// the server are skipped: this client declared no capabilities, so it
    /// owes them nothing that the benchmark cares about.
    pub async fn next_reply(&mut self) -> anyhow::Result<(Value, Instant)> {
        loop {
            let deadline = Instant::now() + REPLY_TIMEOUT;
            let (message, read_at) = self.next_message(deadline).await?.with_context(|| {
                format!(
                    "no message from the server in {} s",
                    REPLY_TIMEOUT.as_secs()
                )
            })?;
            if message.get("method").is_none() && message.get("id").is_some() {
                return Ok((message, read_at));
            }
        }
    }

    /// The instant the next notification `method` (a message with that
    /// `method` and no `id`) was read, or `None` if none came by
    /// `deadline`. Every other message is skipped.
    pub async fn notification_by(
        &mut self,
        method: &str,
        deadline: Instant,
    ) -> anyhow::Result<Option<Instant>> {
        while let Some((message, read_at)) = self.next_message(deadline).await? {
            if message.get("id").is_none()
                && message.get("method").and_then(Value::as_str) == Some(method)
            {
                return Ok(Some(read_at));
            }
        }
        Ok(None)
    }

    /// The reply to request `id`. With one request outstanding any other
    /// reply is a protocol error, so it is one here too.
    pub async fn reply_to(&mut self, id: u64) -> anyhow::Result<(Value, Instant)> {
        let (reply, read_at) = self.next_reply().await?;
        ensure!(
            reply.get("id").and_then(Value::as_u64) == Some(id),
            "expected the reply to id {id}, got: {reply}"
        );
        Ok((reply, read_at))
    }
}

/// A `tools/call` request with everything but the id encoded once, so each
/// call costs a couple of `memcpy`s rather than a JSON serialisation.
pub struct CallTemplate {
    prefix: Vec<u8>,
    suffix: Vec<u8>,
}

impl CallTemplate {
    /// For `tool` with `arguments` (a JSON object).
    pub fn new(tool: &str, arguments: &Value) -> anyhow::Result<CallTemplate> {
        let params = serde_json::to_string(&json!({"name": tool, "arguments": arguments}))
            .context("cannot encode the call's arguments")?;
        let mut suffix = format!(r#","method":"tools/call","params":{params}}}"#).into_bytes();
        suffix.push(b'\n');
        Ok(CallTemplate {
            prefix: br#"{"jsonrpc":"2.0","id":"#.to_vec(),
            suffix,
        })
    }

    /// Append the request line for `id` to `buf`.
    pub fn write(&self, buf: &mut Vec<u8>, id: u64) {
        buf.extend_from_slice(&self.prefix);
        buf.extend_from_slice(id.to_string().as_bytes());
        buf.extend_from_slice(&self.suffix);
    }
}

/// Where a server's stderr goes: appended to `path` (so the stderr of every
/// run of a benchmark is kept), or discarded.
pub fn open_stderr(path: Option<&Path>) -> anyhow::Result<Stdio> {
    Ok(match path {
        Some(path) => Stdio::from(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open `{}` for stderr", path.display()))?,
        ),
        None => Stdio::null(),
    })
}

/// A `tools/call` reply must have a `result` whose `isError` is not true.
pub fn check_call(reply: &Value) -> anyhow::Result<()> {
    if let Some(error) = reply.get("error") {
        bail!("JSON-RPC error: {error}");
    }
    let result = reply
        .get("result")
        .with_context(|| format!("the reply has no `result`: {reply}"))?;
    if result.get("isError") == Some(&Value::Bool(true)) {
        let content = result.get("content").unwrap_or(&Value::Null);
        bail!("the tool returned an error (isError: true): {content}");
    }
    Ok(())
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in KiB; `None`
/// when it cannot be read (not Linux, process gone).
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_kib(&text, field)
}

/// The value of `field` in the text of `/proc/<pid>/status`, e.g.
/// `VmHWM:\t   12345 kB` -> 12345.
fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// CPU time a process has used so far (user and system, every thread, in
/// `/proc/<pid>/stat`), or `None` when it cannot be read. `pid` `None` is
/// this process. Linux reports it in clock ticks (`USER_HZ`, 100 a second on
/// every architecture the benchmark runs on), so a figure over a window is
/// exact to 10 ms per reading: the caller says so next to it.
pub fn proc_cpu(pid: Option<u32>) -> Option<Duration> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let ticks = parse_stat_ticks(&std::fs::read_to_string(path).ok()?)?;
    Some(Duration::from_millis(ticks * (1000 / USER_HZ)))
}

/// Clock ticks a second in `/proc` times.
pub const USER_HZ: u64 = 100;

/// `utime + stime` of a `/proc/<pid>/stat` line. The command name (field 2)
/// is in parentheses and may hold spaces and parentheses, so the fields are
/// counted from the last `)`: utime and stime are fields 14 and 15, the
/// 12th and 13th after it.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A temporary folder this process created, removed on drop.
struct FreshDir(PathBuf);

impl FreshDir {
    fn create() -> anyhow::Result<FreshDir> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("toolcage-bench-{}-{n}", std::process::id()));
        // `create_dir`, not `create_dir_all`: it fails on an existing
        // folder, so we only ever remove what we made.
        std::fs::create_dir(&path)
            .with_context(|| format!("cannot create the folder `{}`", path.display()))?;
        Ok(FreshDir(path))
    }
}

impl Drop for FreshDir {
    fn drop(&mut self) {
        remove_quietly(&self.0);
    }
}

fn remove_quietly(path: &Path) {
    if let Err(error) = std::fs::remove_dir_all(path) {
        eprintln!("warning: cannot remove `{}`: {error}", path.display());
    }
}

/// The tool names in a `tools/list` result.
///
/// # Errors
///
/// The result has no `tools` array.
pub fn tool_names(result: &Value) -> anyhow::Result<Vec<String>> {
    let tools = result
        .get("tools")
        .and_then(Value::as_array)
        .with_context(|| format!("the `tools/list` result has no `tools` array: {result}"))?;
    Ok(tools
        .iter()
        .filter_map(|tool| tool.get("name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_template_is_a_valid_request() -> anyhow::Result<()> {
        let call = CallTemplate::new("echo", &json!({"text": "a\"b\n"}))?;
        let mut buf = Vec::new();
        call.write(&mut buf, 42);
        assert_eq!(buf.last(), Some(&b'\n'));
        assert_eq!(buf.iter().filter(|&&b| b == b'\n').count(), 1);
        let request: Value = serde_json::from_slice(&buf)?;
        assert_eq!(
            request,
            json!({
                "jsonrpc": "2.0",
                "id": 42,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "a\"b\n"}},
            })
        );
        Ok(())
    }

    #[test]
    fn check_call_rejects_errors() {
        assert!(check_call(&json!({"id": 1, "result": {"content": []}})).is_ok());
        assert!(check_call(&json!({"id": 1, "result": {"isError": false}})).is_ok());
        assert!(check_call(&json!({"id": 1, "result": {"isError": true}})).is_err());
        assert!(check_call(&json!({"id": 1, "error": {"code": -32602}})).is_err());
        assert!(check_call(&json!({"id": 1})).is_err());
    }

    /// A "server" that prints `script`'s output (via `sh -c`).
    #[cfg(unix)]
    fn shell(script: &str) -> anyhow::Result<Server> {
        Server::spawn(&ServerCommand {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            stderr: None,
        })
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn waits_for_a_notification_skipping_other_messages() -> anyhow::Result<()> {
        let mut server = shell(concat!(
            r#"printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/message","params":{}}'"#,
            r#" '{"jsonrpc":"2.0","id":7,"result":{}}'"#,
            r#" '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'; exec sleep 5"#,
        ))?;
        let soon = || Instant::now() + Duration::from_secs(5);
        assert!(
            server
                .notification_by(TOOLS_LIST_CHANGED, soon())
                .await?
                .is_some()
        );
        // Nothing more comes: the deadline passes.
        let brief = Instant::now() + Duration::from_millis(100);
        assert_eq!(
            server.notification_by(TOOLS_LIST_CHANGED, brief).await?,
            None
        );
        Ok(())
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_line_cut_by_the_deadline_is_completed_later() -> anyhow::Result<()> {
        let mut server = shell(concat!(
            r#"printf '%s' '{"jsonrpc":"2.0","meth'; sleep 0.5;"#,
            r#" printf '%s\n' 'od":"notifications/tools/list_changed"}'; exec sleep 5"#,
        ))?;
        let brief = Instant::now() + Duration::from_millis(100);
        assert_eq!(
            server.notification_by(TOOLS_LIST_CHANGED, brief).await?,
            None
        );
        let soon = Instant::now() + Duration::from_secs(5);
        assert!(
            server
                .notification_by(TOOLS_LIST_CHANGED, soon)
                .await?
                .is_some()
        );
        Ok(())
    }

    #[test]
    fn parses_proc_stat_cpu_ticks() {
        // A command name with a space and a parenthesis, as `comm` may be.
        let stat = "4242 (tool cage) x) S 1 4242 4242 0 -1 4194560 2917 0 0 0 \
                    731 52 0 0 20 0 9 0 12345 1000 2000";
        assert_eq!(parse_stat_ticks(stat), Some(783));
        assert_eq!(parse_stat_ticks("4242 (x) S 1 2"), None);
        assert_eq!(parse_stat_ticks("no parenthesis"), None);
        // This process has used some CPU by now, and never goes back.
        let (Some(a), Some(b)) = (proc_cpu(None), proc_cpu(None)) else {
            panic!("this process's own /proc/self/stat did not parse");
        };
        assert!(b >= a);
    }

    #[test]
    fn parses_proc_status() {
        let status = "Name:\ttoolcage\nVmHWM:\t   51234 kB\nVmRSS:\t   40960 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM"), Some(51234));
        assert_eq!(parse_status_kib(status, "VmRSS"), Some(40960));
        assert_eq!(parse_status_kib(status, "VmSwap"), None);
        assert_eq!(parse_status_kib(status, "Vm"), None);
    }
}
