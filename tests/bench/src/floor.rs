//! `floor-server`: the smallest MCP server over stdio, for a floor.
//!
//! One thread, blocking reads and writes, one JSON parse per line and a
//! constant reply: it answers `initialize`, `tools/list` (one tool, `echo`)
//! and `tools/call` (`{"content":[{"type":"text","text":"ok"}]}`), and
//! ignores notifications. Against it, `latency` measures what the
//! benchmark's client, two pipes and two wake-ups cost with next to no
//! server: no server can answer a call over stdio faster on the same
//! machine.

use std::io::{BufRead as _, Write as _};

use anyhow::Context as _;
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
        reply.clear();
        serde_json::to_writer(
            &mut reply,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )
        .context("cannot encode a reply")?;
        reply.push(b'\n');
        stdout.write_all(&reply).context("cannot write stdout")?;
        stdout.flush().context("cannot write stdout")?;
    }
    Ok(())
}
