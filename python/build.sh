#!/usr/bin/env bash
# Builds the devspan extension module and places it at python/devspan.abi3.so, where
# python/tests/conftest.py finds it. Extra arguments go to cargo (e.g. --features cuda-13000).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p devspan-python "$@"
target=${CARGO_TARGET_DIR:-target}
cp "$target/release/libdevspan_python.so" python/devspan.abi3.so
echo "built python/devspan.abi3.so"
