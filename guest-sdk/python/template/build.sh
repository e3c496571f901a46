#!/usr/bin/env bash
# Builds {{name}}.wasm from app.py with componentize-py, installed into
# .venv on first use (or the one COMPONENTIZE_PY names).
set -euo pipefail
cd "$(dirname "$0")"
componentize=${COMPONENTIZE_PY:-.venv/bin/componentize-py}
if [[ ! -x $componentize ]]; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check componentize-py==0.25.1
fi
"$componentize" -d wit -w tool-component componentize app -p . -o {{name}}.wasm
echo "built {{name}}.wasm"
