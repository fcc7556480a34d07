#!/usr/bin/env bash
# Builds {{name}}.wasm with ComponentizeJS
# (npm install @bytecodealliance/componentize-js@0.23.0; COMPONENTIZE_JS names
# another binary).
set -euo pipefail
cd "$(dirname "$0")"
# The contract's version, from its package line: the one place it is stated.
version=$(sed -n 's/^package wasmsched:plugin@\([0-9][0-9.]*\);.*/\1/p' wit/deps/plugin.wit)
[ -n "$version" ] || { echo "build.sh: wit/deps/plugin.wit has no package line" >&2; exit 1; }
mkdir -p build
{ printf '// Written by build.sh: app.js with the contract version of wit/deps/plugin.wit.\nconst CONTRACT_VERSION = "%s";\n' "$version"; cat app.js; } >build/app.js
# -d http fetch-event: no wasi:http import (the scheduler has none).
"${COMPONENTIZE_JS:-componentize-js}" --wit wit --world-name {{name}} -d http fetch-event \
  -o {{name}}.wasm build/app.js
