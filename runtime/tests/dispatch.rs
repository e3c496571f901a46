//! Dispatch at its boundary, case by case: a config, a tool, its arguments,
//! and what the caller gets back, through `Host::load` and
//! `Dispatcher::call` with the test guests (see `common`).

mod common;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolcage::dispatch::{CallContext, DispatchError};
use toolcage::journal::ClientId;

/// Load `guest` under `config` and call `tool` with `arguments`; the
/// outcome in one line: `ok: <structured or text>`, `error: <text>`, or
/// `unknown tool <name>`.
async fn call(config: &str, guest: &str, tool: &str, arguments: Value) -> String {
    let (host, dir) = common::load(guest, config).await;
    let cancel = CancellationToken::new();
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    let outcome = host
        .dispatcher
        .call(
            tool,
            arguments.into(),
            CallContext {
                events: None,
                cancel: &cancel,
                client_roots: None,
                services: None,
                client: &ClientId::default,
                caller: None,
                lane: toolcage::dispatch::Lane::Pooled,
                declared: None,
                task: None,
            },
        )
        .await;
    let _ = std::fs::remove_dir_all(&dir);
    match outcome {
        Err(DispatchError::UnknownTool { name, .. }) => format!("unknown tool {name}"),
        Err(
            error @ (DispatchError::NotPermitted { .. }
            | DispatchError::MissingClientCapability { .. }),
        ) => error.to_string(),
        Ok(output) => {
            let text = output
                .content
                .iter()
                .filter_map(|c| match c {
                    toolcage::call::Content::Text(t) => Some(t.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            match (output.is_error, output.structured) {
                (true, _) => format!("error: {text}"),
                (false, Some(structured)) => format!("ok: {structured}"),
                (false, None) => format!("ok: {text}"),
            }
        }
    }
}

/// `call(config, guest, tool, arguments)` starts with `expect`.
async fn check(config: &str, guest: &str, tool: &str, arguments: Value, expect: &str) {
    let got = call(config, guest, tool, arguments).await;
    assert!(
        got.starts_with(expect),
        "\n   config: {config:?}\n     call: {tool}\n      got: {got}\n expected: {expect}…"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_end_as_the_config_and_the_tool_say() {
    let cases: &[(&str, &str, Value, &str)] = &[
        // Deny by default: no variables, no root.
        (
            "",
            "echo",
            json!({"text": "hi"}),
            r#"ok: {"env_count":0,"sees_root":false,"text":"hi"}"#,
        ),
        (
            "[tools.echo.env]\nA = \"1\"\nB = \"2\"\n",
            "echo",
            json!({"text": "hi"}),
            r#"ok: {"env_count":2,"sees_root":false,"text":"hi"}"#,
        ),
        // Another tool's grant is not this one's.
        (
            "[tools.spin.env]\nA = \"1\"\n",
            "echo",
            json!({"text": "hi"}),
            r#"ok: {"env_count":0,"#,
        ),
        (
            "",
            "echo",
            json!({"text": 5}),
            "error: arguments do not match the input schema of tool `echo`:",
        ),
        (
            "",
            "echo",
            json!({"text": "hi", "extra": 1}),
            "error: arguments do not match the input schema of tool `echo`:",
        ),
        ("", "no_such_tool", json!({}), "unknown tool no_such_tool"),
        (
            "[tools.spin]\nfuel = 1000000\n",
            "spin",
            json!({}),
            "error: tool `spin` ran out of fuel (limit 1000000)",
        ),
        (
            "[tools.spin]\ndeadline_ms = 200\nfuel = 1000000000000\n",
            "spin",
            json!({}),
            "error: tool `spin` exceeded its deadline (limit 200 ms)",
        ),
        (
            "[tools.grow_memory]\nmemory_mib = 16\n",
            "grow_memory",
            json!({}),
            "error: tool `grow_memory` exceeded its memory limit (limit 16 MiB)",
        ),
    ];
    for (config, tool, arguments, expect) in cases {
        check(config, "misbehave", tool, arguments.clone(), expect).await;
    }
}
