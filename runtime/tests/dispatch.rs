//! Dispatch at its boundary, case by case: a config, a tool, its arguments,
//! and what the caller gets back, through `Host::load` and
//! `Dispatcher::call` with the test guests (`tests/run` builds them into
//! `target/wasm32-wasip2/debug` before `cargo test`; `TOOLCAGE_GUESTS`
//! names another folder).
//!
//! A case that needs a guest that was not built fails and says how to
//! build it: it never passes by skipping.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolcage::config::Config;
use toolcage::dispatch::{CallContext, DispatchError};
use toolcage::journal::ClientId;
use toolcage::{Host, Options};

fn guests() -> PathBuf {
    match std::env::var_os("TOOLCAGE_GUESTS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wasm32-wasip2/debug"),
    }
}

/// Load `guest` under `config` and call `tool` with `arguments`; the
/// outcome in one line: `ok: <structured or text>`, `error: <text>`, or
/// `unknown tool <name>`.
async fn call(config: &str, guest: &str, tool: &str, arguments: Value) -> String {
    let component = guests().join(format!("{guest}.wasm"));
    assert!(
        component.is_file(),
        "`{}` is missing: build the test guests first (`tests/run` does, or \
         `cargo build --target wasm32-wasip2 -p {}`)",
        component.display(),
        guest.replace('_', "-"),
    );
    let dir = tempdir();
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).expect("tools folder");
    std::fs::copy(&component, tools.join(format!("{guest}.wasm"))).expect("copy the guest");
    let config = Config::parse(config, &dir.join("config.toml")).expect("a valid config");
    let host = Host::load(Options {
        tools_dir: tools,
        // Shared by the cases, so each guest compiles once.
        cache_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache")),
        config,
        cli_grants: Vec::new(),
        fuel_metering: true,
        spill: None,
    })
    .await
    .expect("the host loads");
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

fn tempdir() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "toolcage-dispatch-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
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
