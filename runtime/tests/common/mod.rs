//! What the integration tests share: a host loaded with one of the test
//! guests (`tests/run` builds them into `target/wasm32-wasip2/debug`
//! before `cargo test`; `TOOLCAGE_GUESTS` names another folder).
//!
//! A test that needs a guest that was not built fails and says how to
//! build it: it never passes by skipping.

use std::path::{Path, PathBuf};

use toolcage::config::Config;
use toolcage::{Host, Options};

fn guests() -> PathBuf {
    match std::env::var_os("TOOLCAGE_GUESTS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wasm32-wasip2/debug"),
    }
}

/// A host with `guest` alone in its tools folder, under `config` (TOML),
/// and the folder it was set up in (the caller removes it).
pub async fn load(guest: &str, config: &str) -> (Host, PathBuf) {
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
        // Shared by the tests, so each guest compiles once.
        cache_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("compile-cache")),
        config,
        cli_grants: Vec::new(),
        fuel_metering: true,
        spill: None,
    })
    .await
    .expect("the host loads");
    (host, dir)
}

fn tempdir() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "toolcage-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
