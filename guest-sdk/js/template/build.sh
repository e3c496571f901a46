#!/usr/bin/env bash
# Builds {{name}}.wasm from app.js with componentize-js, installed into
# node_modules on first use (needs Node.js 20 or later and npm).
set -euo pipefail
cd "$(dirname "$0")"
# COMPONENTIZE_JS may name an installed componentize-js's `src/cli.js`.
cli=${COMPONENTIZE_JS:-node_modules/@bytecodealliance/componentize-js/src/cli.js}
if [[ ! -f $cli ]]; then
    npm install --no-audit --no-fund --loglevel=error
fi
# componentize-js runs app.js at build time and snapshots the result, so
# the tools registered at the top level are what the component describes.
node "$cli" app.js --wit wit --world-name tool-component -o {{name}}.wasm
echo "built {{name}}.wasm"
