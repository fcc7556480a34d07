#!/usr/bin/env bash
# Builds {{name}}.wasm with componentize-py (pip install componentize-py==0.25.1;
# COMPONENTIZE_PY names another binary).
set -euo pipefail
cd "$(dirname "$0")"
# The contract's version, from its package line: the one place it is stated.
version=$(sed -n 's/^package wasmsched:plugin@\([0-9][0-9.]*\);.*/\1/p' wit/deps/plugin.wit)
[ -n "$version" ] || { echo "build.sh: wit/deps/plugin.wit has no package line" >&2; exit 1; }
printf '# Written by build.sh from wit/deps/plugin.wit.\nCONTRACT_VERSION = "%s"\n' "$version" >contract.py
# --stub-wasi: the component imports only the scheduler's host interface
# (print goes nowhere; log through wit_world.imports.host.log).
"${COMPONENTIZE_PY:-componentize-py}" -d wit -w {{name}} componentize --stub-wasi -p . app -o {{name}}.wasm
