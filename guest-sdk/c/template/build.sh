#!/usr/bin/env bash
# Builds {{name}}.wasm (a WebAssembly component) from tool.c with
# toolcage/build: zig (from PyPI) compiles, wasm-tools (from PyPI) encodes
# the component, with the WASI reactor adapter (from crates.io). The first
# build installs them into ~/.cache/toolcage/components (needs python3 with
# pip, and cargo or curl); later builds reuse them.
# More C files: list them after tool.c; compiler flags go after `--`.
set -euo pipefail
cd "$(dirname "$0")"
toolcage/build {{name}}.wasm tool.c
echo "built {{name}}.wasm"
