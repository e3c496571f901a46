//! A minimal MCP client over Streamable HTTP, for a server process the
//! benchmark starts itself.
//!
//! It speaks protocol `2026-07-28`, which is stateless over HTTP: no
//! `initialize`, no session; every request is one `POST /mcp` carrying its
//! revision in the `MCP-Protocol-Version` header and in `params._meta`, its
//! method in `Mcp-Method` and, for `tools/call`, the tool in `Mcp-Name`
//! (toolcage refuses a request whose headers and body disagree). The server
//! answers with plain JSON (`json_response`), never SSE, for these.
//!
//! One [`Connection`] is one HTTP/1.1 keep-alive connection driven through
//! hyper's connection API, with `TCP_NODELAY`; requests in flight over HTTP
//! means that many connections, each with one request outstanding (HTTP/1.1
//! has no multiplexing, and pipelining is not something clients do). Each
//! request body is pre-encoded but for its id, as on stdio.
//!
//! The same connections can speak toolcage's REST face instead
//! ([`HttpRequest::rest_call`]: `POST /tool` with `{"tool", "parameters"}`,
//! no JSON-RPC, no MCP headers): the same dispatcher behind the same
//! router, without the MCP library, so the two side by side show what the
//! MCP layer costs per call.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::client::{ServerCommand, check_call, open_stderr, proc_status_kib};

/// The MCP revision the HTTP client speaks: stateless, no handshake.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// A server argument containing this gets the port the benchmark picked:
/// `--http 127.0.0.1:{port}`.
pub const PORT: &str = "{port}";

/// The MCP endpoint's path.
const ENDPOINT: &str = "/mcp";

/// The REST face's call path (`[http.rest] enabled = true`).
const REST_TOOL: &str = "/tool";

/// How long a server gets to start listening.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);

/// How long to wait for any one response.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a server gets to exit after SIGTERM before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// A server process serving HTTP on a port the benchmark chose.
pub struct HttpServer {
    child: Child,
    pid: u32,
    addr: SocketAddr,
}

impl HttpServer {
    /// Pick a free loopback port, put it in place of `{port}` in the
    /// command, start the server and wait until it accepts connections.
    ///
    /// # Errors
    ///
    /// No argument contains `{port}`, the server cannot start, exits, or
    /// does not listen within a minute.
    pub async fn spawn(command: &ServerCommand) -> anyhow::Result<HttpServer> {
        ensure!(
            command.argv.iter().any(|a| a.contains(PORT)),
            "over HTTP the server command must contain `{PORT}` where the port goes, \
             e.g. `--http 127.0.0.1:{PORT}`; the benchmark picks a free one"
        );
        let port = free_port()?;
        let argv: Vec<String> = command
            .argv
            .iter()
            .map(|a| a.replace(PORT, &port.to_string()))
            .collect();
        let (program, args) = argv
            .split_first()
            .context("no server command given after `--`")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(open_stderr(command.stderr.as_deref())?)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the server `{}`", argv.join(" ")))?;
        let pid = child.id().context("the server exited at once")?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        // Polling, not an event: the server's log may go anywhere (or
        // nowhere), and the port accepting a connection is what counts.
        loop {
            if TcpStream::connect(addr).await.is_ok() {
                break;
            }
            if let Some(status) = child.try_wait().context("cannot check on the server")? {
                bail!(
                    "the server exited ({status}) before listening on {addr}; rerun with \
                     --server-stderr FILE to see why"
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the server did not listen on {addr} within {} s",
                    LISTEN_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(HttpServer { child, pid, addr })
    }

    /// A new keep-alive connection to the server.
    ///
    /// # Errors
    ///
    /// The connection or the HTTP handshake failed.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        Connection::open(self.addr).await
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's peak resident memory so far (`VmHWM`), in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.pid, "VmHWM")
    }

    /// SIGTERM (the server's cue to drain and exit), then wait; SIGKILL if
    /// it is still running after 10 s. Warns on stderr when it did not exit
    /// cleanly.
    ///
    /// # Errors
    ///
    /// The server cannot be signalled or waited for.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        // `kill(1)`, not a libc binding: one process per run, not worth a
        // dependency.
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .context("cannot run `kill`")?;
        if !sent.success() {
            eprintln!("warning: `kill -TERM {}` failed: {sent}", self.pid);
        }
        match tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            Ok(status) => {
                let status = status.context("cannot wait for the server")?;
                if !status.success() {
                    eprintln!("warning: the server exited with {status}");
                }
            }
            Err(_) => {
                eprintln!(
                    "warning: the server (pid {}) did not exit within {} s of SIGTERM; killing it",
                    self.pid,
                    EXIT_GRACE.as_secs()
                );
                self.child.kill().await.context("cannot kill the server")?;
            }
        }
        Ok(())
    }
}

/// A free loopback port: bind port 0, read what the kernel gave, let it go.
/// (Another process could take it in between; on a benchmark machine that
/// does not happen, and the server then fails to bind, loudly.)
fn free_port() -> anyhow::Result<u16> {
    let listener = StdListener::bind("127.0.0.1:0").context("cannot bind a loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// What a request is: its method (and tool, for `tools/call`) for the
/// headers, and its body but for the id.
#[derive(Clone)]
pub struct HttpRequest {
    method: &'static str,
    tool: Option<String>,
    prefix: Bytes,
    suffix: Bytes,
    /// A REST call (`POST /tool`, no JSON-RPC id) rather than MCP.
    rest: bool,
    /// The `Accept` header of an MCP request, if not the plain one.
    accept: Option<String>,
}

impl HttpRequest {
    /// `tools/call` of `tool` with `arguments` (a JSON object).
    ///
    /// # Errors
    ///
    /// The arguments cannot be encoded.
    pub fn call(tool: &str, arguments: &Value) -> anyhow::Result<HttpRequest> {
        HttpRequest::new(
            "tools/call",
            Some(tool),
            json!({"name": tool, "arguments": arguments, "_meta": meta()}),
        )
    }

    /// `tools/list`.
    ///
    /// # Errors
    ///
    /// Never in practice (the parameters are fixed).
    pub fn list_tools() -> anyhow::Result<HttpRequest> {
        HttpRequest::new("tools/list", None, json!({"_meta": meta()}))
    }

    /// A call of `tool` with `arguments` through the REST face.
    ///
    /// # Errors
    ///
    /// The arguments cannot be encoded.
    pub fn rest_call(tool: &str, arguments: &Value) -> anyhow::Result<HttpRequest> {
        let body = json!({"tool": tool, "parameters": arguments});
        Ok(HttpRequest {
            method: "tools/call",
            tool: Some(tool.to_owned()),
            prefix: Bytes::from(serde_json::to_vec(&body).context("cannot encode a request")?),
            suffix: Bytes::new(),
            rest: true,
            accept: None,
        })
    }

    fn new(method: &'static str, tool: Option<&str>, params: Value) -> anyhow::Result<HttpRequest> {
        let params = serde_json::to_string(&params).context("cannot encode a request")?;
        Ok(HttpRequest {
            method,
            tool: tool.map(str::to_owned),
            prefix: Bytes::from_static(br#"{"jsonrpc":"2.0","id":"#),
            suffix: Bytes::from(format!(r#","method":"{method}","params":{params}}}"#)),
            rest: false,
            accept: None,
        })
    }

    /// The same request with `accept` as its `Accept` header (MCP only).
    #[must_use]
    pub fn with_accept(mut self, accept: Option<&str>) -> HttpRequest {
        self.accept = accept.map(str::to_owned);
        self
    }

    fn body(&self, id: u64) -> Bytes {
        if self.rest {
            return self.prefix.clone();
        }
        let id = id.to_string();
        let mut body = Vec::with_capacity(self.prefix.len() + id.len() + self.suffix.len());
        body.extend_from_slice(&self.prefix);
        body.extend_from_slice(id.as_bytes());
        body.extend_from_slice(&self.suffix);
        Bytes::from(body)
    }
}

/// What a 2026-07-28 request carries in `params._meta`.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "toolcage-bench", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// One keep-alive HTTP/1.1 connection, one request at a time.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    next_id: u64,
}

impl Connection {
    async fn open(addr: SocketAddr) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        // Small requests and replies: without it, Nagle and delayed ACKs
        // add milliseconds to a round trip.
        stream.set_nodelay(true).context("cannot set TCP_NODELAY")?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("the HTTP handshake failed")?;
        // The connection's I/O runs as its own task; it ends when `sender`
        // is dropped or the server closes the connection.
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                eprintln!("warning: an HTTP connection ended with an error: {error}");
            }
        });
        Ok(Connection {
            sender,
            host: addr.to_string(),
            next_id: 1,
        })
    }

    /// Send `request` and read the whole response; returns the JSON-RPC
    /// message and the time from just before sending to just after the
    /// body was read (parsing not counted).
    ///
    /// # Errors
    ///
    /// The connection failed, the status is not 200, or the body is not
    /// JSON.
    pub async fn send(&mut self, request: &HttpRequest) -> anyhow::Result<(Value, Duration)> {
        let id = self.next_id;
        self.next_id += 1;
        let mut builder = Request::post(if request.rest { REST_TOOL } else { ENDPOINT })
            .header(hyper::header::HOST, &self.host)
            .header(hyper::header::CONTENT_TYPE, "application/json");
        if !request.rest {
            builder = builder
                .header(
                    hyper::header::ACCEPT,
                    request
                        .accept
                        .as_deref()
                        .unwrap_or("application/json, text/event-stream"),
                )
                .header("MCP-Protocol-Version", PROTOCOL_VERSION)
                .header("Mcp-Method", request.method);
            if let Some(tool) = &request.tool {
                builder = builder.header("Mcp-Name", tool);
            }
        }
        let http_request = builder
            .body(Full::new(request.body(id)))
            .context("cannot build the HTTP request")?;
        let start = Instant::now();
        let exchange = async {
            self.sender
                .ready()
                .await
                .context("the connection is closed")?;
            let response = self
                .sender
                .send_request(http_request)
                .await
                .context("the HTTP request failed")?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .context("cannot read the response body")?
                .to_bytes();
            anyhow::Ok((status, body))
        };
        let (status, body) = tokio::time::timeout(REPLY_TIMEOUT, exchange)
            .await
            .with_context(|| format!("no response in {} s", REPLY_TIMEOUT.as_secs()))??;
        let elapsed = start.elapsed();
        if status != StatusCode::OK {
            bail!(
                "HTTP {status} for `{}`: {}",
                request.method,
                String::from_utf8_lossy(&body).trim_end()
            );
        }
        let message: Value = serde_json::from_slice(&body).with_context(|| {
            format!(
                "the response is not JSON: {}",
                String::from_utf8_lossy(&body).trim_end()
            )
        })?;
        ensure!(
            request.rest || message.get("id").and_then(Value::as_u64) == Some(id),
            "expected the reply to id {id}, got: {message}"
        );
        Ok((message, elapsed))
    }

    /// One `tools/call`; an error reply or an error result is an error.
    ///
    /// # Errors
    ///
    /// As [`Connection::send`], or the call failed.
    pub async fn timed_call(&mut self, call: &HttpRequest) -> anyhow::Result<Duration> {
        let (reply, elapsed) = self.send(call).await?;
        if call.rest {
            check_rest_call(&reply)?;
        } else {
            check_call(&reply).with_context(|| format!("call id {} failed", reply["id"]))?;
        }
        Ok(elapsed)
    }

    /// `tools/list` (first page only); returns the tool names.
    ///
    /// # Errors
    ///
    /// As [`Connection::send`], or the reply has no tools.
    pub async fn list_tools(&mut self) -> anyhow::Result<Vec<String>> {
        let (reply, _) = self.send(&HttpRequest::list_tools()?).await?;
        if let Some(error) = reply.get("error") {
            bail!("`tools/list` failed: {error}");
        }
        let result = reply
            .get("result")
            .with_context(|| format!("the `tools/list` reply has no result: {reply}"))?;
        crate::client::tool_names(result)
    }
}

/// A REST face's answer: a `result` and a null `error`.
fn check_rest_call(reply: &Value) -> anyhow::Result<()> {
    match reply.get("error") {
        Some(Value::Null) => {}
        Some(error) => bail!("the REST call failed: {error}"),
        None => bail!("the REST reply has no `error` field: {reply}"),
    }
    ensure!(
        reply.get("result").is_some_and(|result| !result.is_null()),
        "the REST reply has no result: {reply}"
    );
    Ok(())
}

/// `calls` `tools/call`s over `connections` connections, each with one
/// request outstanding at a time; returns the time from the first request
/// to the last response.
///
/// # Errors
///
/// Any call failed (the others are abandoned).
pub async fn concurrent(
    server: &HttpServer,
    call: &HttpRequest,
    calls: u64,
    connections: usize,
) -> anyhow::Result<Duration> {
    let mut opened = Vec::with_capacity(connections);
    for _ in 0..connections {
        opened.push(server.connect().await?);
    }
    // Calls are handed out from one counter, so a connection that is
    // served faster does more of them, as with a real client pool.
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for mut connection in opened {
        let next = Arc::clone(&next);
        let call = call.clone();
        tasks.spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                connection.timed_call(&call).await?;
            }
            anyhow::Ok(Instant::now())
        });
    }
    let mut end = start;
    while let Some(joined) = tasks.join_next().await {
        // On an error the JoinSet is dropped here, which aborts the rest.
        let finished = joined.context("a client task panicked")??;
        end = end.max(finished);
    }
    Ok(end.duration_since(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_request_is_a_2026_request() -> anyhow::Result<()> {
        let call = HttpRequest::call("echo", &json!({"text": "a\"b"}))?;
        let body: Value = serde_json::from_slice(&call.body(7))?;
        assert_eq!(body["id"], 7);
        assert_eq!(body["method"], "tools/call");
        assert_eq!(body["params"]["name"], "echo");
        assert_eq!(body["params"]["arguments"], json!({"text": "a\"b"}));
        assert_eq!(
            body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            PROTOCOL_VERSION
        );
        assert_eq!(call.method, "tools/call");
        assert_eq!(call.tool.as_deref(), Some("echo"));
        let list: Value = serde_json::from_slice(&HttpRequest::list_tools()?.body(1))?;
        assert_eq!(list["method"], "tools/list");
        Ok(())
    }

    #[test]
    fn rest_calls_are_plain_bodies_and_answers() -> anyhow::Result<()> {
        let call = HttpRequest::rest_call("echo", &json!({"text": "hi"}))?;
        let body: Value = serde_json::from_slice(&call.body(7))?;
        assert_eq!(body, json!({"tool": "echo", "parameters": {"text": "hi"}}));
        assert!(check_rest_call(&json!({"result": {"a": 1}, "error": null})).is_ok());
        assert!(check_rest_call(&json!({"result": null, "error": "trap"})).is_err());
        assert!(check_rest_call(&json!({"result": 1})).is_err());
        assert!(check_rest_call(&json!({"result": null, "error": null})).is_err());
        Ok(())
    }

    #[test]
    fn free_ports_are_nonzero() -> anyhow::Result<()> {
        assert_ne!(free_port()?, 0);
        Ok(())
    }
}
