//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout.
//!
//! rmcp's own stdio transport silently drops a line that is not JSON. A
//! client that sent one would wait forever, so this transport answers it
//! with a JSON-RPC parse error (-32700, `id: null`) and one that is JSON but
//! not a JSON-RPC message with invalid request (-32600, echoing the `id`
//! when there is one), then keeps serving.
//!
//! Invariant: every byte written to stdout is a complete JSON-RPC message
//! followed by `\n`. Writes take a lock on stdout for the whole line.

use std::future::Future;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

/// Longest line accepted, in bytes: 16 MiB, rmcp's own limit. A longer line
/// is answered with an error and skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

type Writer = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// A line-based JSON-RPC transport that answers malformed input.
pub struct LineTransport {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    writer: Writer,
}

impl LineTransport {
    /// Over the process's stdin and stdout.
    pub fn stdio() -> Self {
        LineTransport::new(tokio::io::stdin(), tokio::io::stdout())
    }

    /// Over any reader and writer (tests use pipes).
    pub fn new(
        reader: impl AsyncRead + Send + Unpin + 'static,
        writer: impl AsyncWrite + Send + Unpin + 'static,
    ) -> Self {
        let writer: Writer = Arc::new(Mutex::new(Box::new(writer)));
        // A small queue: reading pauses when the server falls behind.
        let (tx, incoming) = mpsc::channel(64);
        let replies = Arc::clone(&writer);
        tokio::spawn(async move {
            let mut reader = BufReader::new(reader);
            let mut line = Vec::new();
            loop {
                line.clear();
                match read_line(&mut reader, &mut line).await {
                    Ok(LineRead::Eof) | Err(_) => break,
                    Ok(LineRead::TooLong) => {
                        let reply = error_reply(
                            Value::Null,
                            -32600,
                            &format!("message longer than {MAX_LINE_BYTES} bytes"),
                        );
                        if write_line(&replies, &reply).await.is_err() {
                            break;
                        }
                        continue;
                    }
                    Ok(LineRead::Line) => {}
                }
                let text = line.trim_ascii();
                let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
                if text.is_empty() {
                    continue;
                }
                let reply = match serde_json::from_slice::<Value>(text) {
                    Err(error) => {
                        error_reply(Value::Null, -32700, &format!("parse error: {error}"))
                    }
                    Ok(value) => {
                        let id = value.get("id").cloned().unwrap_or(Value::Null);
                        match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                            Ok(message) => {
                                if tx.send(message).await.is_err() {
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
                if write_line(&replies, &reply).await.is_err() {
                    break;
                }
            }
            // Dropping `tx` ends `receive`, which rmcp treats as EOF.
        });
        LineTransport { incoming, writer }
    }
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
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes()
}

async fn write_line(writer: &Writer, bytes: &[u8]) -> std::io::Result<()> {
    let mut out = writer.lock().await;
    out.write_all(bytes).await?;
    out.write_all(b"\n").await?;
    out.flush().await
}

impl Transport<RoleServer> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move {
            let bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            write_line(&writer, &bytes).await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut out = self.writer.lock().await;
        out.flush().await
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

    #[tokio::test]
    async fn over_long_lines_are_skipped_not_buffered() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(lines(&input).await, ["<too long>", "ok\n"]);
    }
}
