//! The stdio session's hand-over from rmcp's handshake to the calls run
//! beside its loop (`protocol::session`), with the ordering forced: the
//! session is opened late, so a reader that read on past
//! `notifications/initialized` would hand the calls after it to rmcp,
//! whose pool keys answers by id alone.
//!
//! Uses the `misbehave` test guest (see `common`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use toolcage::config::StdioLimits;
use toolcage::protocol::{McpServer, SessionCalls};
use toolcage::transport::stdio::{Admission, LineTransport};

/// How long the session is held closed after rmcp's handshake, and how long
/// the second call takes: the first call's cancellation ends it within
/// milliseconds, so its answer is ready long before the second call's.
const HELD_CLOSED: Duration = Duration::from_millis(300);
const SECOND_CALL_MS: u64 = 500;

#[tokio::test(flavor = "multi_thread")]
async fn a_call_read_before_the_session_opens_is_run_beside_rmcp() {
    let (host, dir) = common::load("misbehave", "[tools.slow]\ndeadline_ms = 60000\n").await;

    // As `transport::stdio::serve` wires them, over an in-memory pipe.
    let server = McpServer::new(
        Arc::clone(&host.dispatcher),
        Arc::clone(&host.notifier),
        Arc::clone(&host.tasks),
        "stdio",
    );
    let calls = Arc::new(SessionCalls::new(server.clone()));
    let (client, ours) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(ours);
    let limits = StdioLimits {
        max_requests_in_flight: 8,
        max_pending_output: 1 << 20,
        one_thread: None,
    };
    let transport = LineTransport::new(
        read,
        write,
        Admission::new(limits, Arc::clone(&host.request_budget)),
        Arc::clone(&calls),
    );
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut answers = BufReader::new(client_read).lines();

    // The handshake, a call, its cancellation and a second call under the
    // same id (as a client may send once the first is cancelled), in one
    // write: all of it is there to read as soon as rmcp has read
    // `initialized`.
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"ms": 20000}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "changed my mind"}}),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"ms": SECOND_CALL_MS}}}),
    ];
    let mut text = String::new();
    for line in lines {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    client_write
        .write_all(text.as_bytes())
        .await
        .expect("write the requests");

    let running = server.serve(transport).await.expect("the handshake");
    // Held closed: what the reader read meanwhile went to rmcp's loop,
    // which keys a request's answer by its id alone, so the cancelled
    // call's answer goes out as the second call's.
    tokio::time::sleep(HELD_CLOSED).await;
    calls.open(running.peer().clone());

    let mut seen = Vec::new();
    let mut read = async |until: Value| loop {
        let line = tokio::time::timeout(Duration::from_secs(30), answers.next_line())
            .await
            .expect("an answer within 30 s")
            .expect("read an answer")
            .expect("the server answers");
        let message: Value = serde_json::from_str(&line).expect("an answer is JSON");
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        seen.push(message);
        if id == until {
            break;
        }
    };
    read(json!(7)).await;
    let ping = json!({"jsonrpc": "2.0", "id": 8, "method": "ping"});
    client_write
        .write_all(format!("{ping}\n").as_bytes())
        .await
        .expect("write the ping");
    read(json!(8)).await;

    let sevens: Vec<&Value> = seen
        .iter()
        .filter(|m| m.get("id") == Some(&json!(7)))
        .collect();
    assert_eq!(sevens.len(), 1, "one answer to id 7: {seen:#?}");
    let result = sevens[0].get("result").expect("a result");
    assert_ne!(
        result.get("isError"),
        Some(&json!(true)),
        "id 7 was answered with the cancelled call's outcome: {seen:#?}"
    );
    assert!(
        result.get("structuredContent").is_some(),
        "the second call's own result: {seen:#?}"
    );

    running.cancellation_token().cancel();
    calls.close(Duration::from_secs(2)).await;
    let _ = std::fs::remove_dir_all(&dir);
}
