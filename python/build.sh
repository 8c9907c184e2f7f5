#!/usr/bin/env bash
# Builds the devspan extension module with cargo alone and places it at
# python/devspan/_devspan.abi3.so, inside the source package python/devspan/, which
# python/tests/conftest.py imports. Extra arguments go to cargo (e.g. --features cuda-13000).
# `pip install ./python` builds and installs the whole package instead.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p devspan-python "$@"
target=${CARGO_TARGET_DIR:-target}
cp "$target/release/libdevspan_python.so" python/devspan/_devspan.abi3.so
echo "built python/devspan/_devspan.abi3.so"
