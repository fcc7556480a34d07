#!/usr/bin/env bash
# Builds {{name}}.wasm with clang (wasi-libc), wit-bindgen's C generator and
# jco's `new` (wasm-tools component new). Tools: apt-get install clang-19
# lld-19 wasi-libc libclang-rt-19-dev-wasm32; cargo install wit-bindgen-cli@0.60.0
# --no-default-features --features c; npm install @bytecodealliance/jco@1.35.0.
# CLANG, WIT_BINDGEN and JCO name other binaries.
set -euo pipefail
cd "$(dirname "$0")"
# The contract's version, from its package line: the one place it is stated.
version=$(sed -n 's/^package wasmsched:plugin@\([0-9][0-9.]*\);.*/\1/p' wit/deps/plugin.wit)
[ -n "$version" ] || { echo "build.sh: wit/deps/plugin.wit has no package line" >&2; exit 1; }
rm -rf build && mkdir -p build
"${WIT_BINDGEN:-wit-bindgen}" c --world {{name}} --out-dir build wit >/dev/null
# A reactor (no main): the scheduler calls the exported functions.
"${CLANG:-clang-19}" --target=wasm32-wasi -mexec-model=reactor -Os -std=c11 \
  -Wall -Wextra -Werror -DCONTRACT_VERSION="\"$version\"" -I build -o build/core.wasm \
  plugin.c build/{{name_snake}}.c build/{{name_snake}}_component_type.o -Wl,--strip-debug
# Code that uses stdio imports WASI 0.1: add --adapt with the preview1
# reactor adapter (docs/writing-plugins.md).
"${JCO:-jco}" new build/core.wasm -o {{name}}.wasm >/dev/null
