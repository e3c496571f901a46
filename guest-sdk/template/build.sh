#!/usr/bin/env bash
# Builds {{name}}.wasm (a WebAssembly component) with cargo.
set -euo pipefail
cd "$(dirname "$0")"
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
cargo build --release --target wasm32-wasip2
target=${CARGO_TARGET_DIR:-target}
cp "$target/wasm32-wasip2/release/{{name}}.wasm" {{name}}.wasm
echo "built {{name}}.wasm"
