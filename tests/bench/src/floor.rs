//! `floor-server`: the smallest MCP server, for a floor.
//!
//! Over stdio ([`serve`]): one thread, blocking reads and writes, one JSON
//! parse per line and a constant reply: it answers `initialize`,
//! `tools/list` (one tool, `echo`) and `tools/call`
//! (`{"content":[{"type":"text","text":"ok"}]}`), and ignores
//! notifications. Against it, `latency` measures what the benchmark's
//! client, two pipes and two wake-ups cost with next to no server: no
//! server can answer a call over stdio faster on the same machine.
//!
//! Over HTTP ([`serve_http`]): the same answers to `POST /mcp`, from hyper's
//! HTTP/1.1 server on tokio's multi-thread runtime, the stack toolcage
//! serves HTTP with, one task per connection, and nothing else (no header
//! checks, no MCP library, no sandbox). Against it, `throughput --http`
//! gives what the client, loopback TCP and hyper cost on this machine: the
//! ceiling for any server built on them.

use std::io::{BufRead as _, Write as _};
use std::net::SocketAddr;

use anyhow::Context as _;
use http_body_util::{BodyExt as _, Full};
use serde_json::{Value, json};

/// Serve stdin/stdout until stdin closes.
///
/// # Errors
///
/// Reading stdin or writing stdout failed.
pub fn serve() -> anyhow::Result<()> {
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut reply = Vec::with_capacity(256);
    for line in stdin.split(b'\n') {
        let line = line.context("cannot read stdin")?;
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let Some(id) = message.get("id") else {
            continue;
        };
        reply.clear();
        serde_json::to_writer(&mut reply, &answer(&message, id))
            .context("cannot encode a reply")?;
        reply.push(b'\n');
        stdout.write_all(&reply).context("cannot write stdout")?;
        stdout.flush().context("cannot write stdout")?;
    }
    Ok(())
}

/// The JSON-RPC reply to `message`, a request with `id`.
fn answer(message: &Value, id: &Value) -> Value {
    let result = match message.get("method").and_then(Value::as_str) {
        Some("initialize") => json!({
            "protocolVersion": message.pointer("/params/protocolVersion").cloned().unwrap_or(Value::Null),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "floor", "version": env!("CARGO_PKG_VERSION")},
        }),
        Some("tools/list") => json!({
            "tools": [{"name": "echo", "description": "Answers ok.", "inputSchema": {"type": "object"}}],
        }),
        Some("tools/call") => {
            json!({"content": [{"type": "text", "text": "ok"}], "isError": false})
        }
        _ => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Serve `POST /mcp` on `addr` until SIGTERM or SIGINT.
///
/// # Errors
///
/// The runtime cannot start or the address cannot be bound.
pub fn serve_http(addr: SocketAddr) -> anyhow::Result<()> {
    // Like toolcage's: a worker per CPU.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .context("cannot handle SIGTERM")?;
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => accepted.context("accept failed")?.0,
                _ = terminate.recv() => return Ok(()),
                _ = tokio::signal::ctrl_c() => return Ok(()),
            };
            stream.set_nodelay(true).context("cannot set TCP_NODELAY")?;
            let service = hyper::service::service_fn(reply);
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// The HTTP answer to one request: the reply to a JSON-RPC request, 202 to
/// a notification, 400 to what is not JSON.
async fn reply(
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<bytes::Bytes>>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return Ok(empty(hyper::StatusCode::BAD_REQUEST));
    };
    let Some(id) = message.get("id") else {
        return Ok(empty(hyper::StatusCode::ACCEPTED));
    };
    let encoded = serde_json::to_vec(&answer(&message, id)).unwrap_or_default();
    let mut response = hyper::Response::new(Full::new(bytes::Bytes::from(encoded)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// A response with `status` and no body.
fn empty(status: hyper::StatusCode) -> hyper::Response<Full<bytes::Bytes>> {
    let mut response = hyper::Response::new(Full::default());
    *response.status_mut() = status;
    response
}
