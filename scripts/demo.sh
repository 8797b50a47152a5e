#!/usr/bin/env bash
# The demo: the Rust half (derived structs and their descriptors) always; the Python half
# (NumPy and Rust sharing memory zero-copy, import, checker) once scripts/test.sh has built
# .venv with the cai package.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --example demo
if .venv/bin/python -c "import cai, numpy" 2>/dev/null; then
    .venv/bin/python examples/demo.py
else
    echo "Python part skipped: run scripts/test.sh first (it builds .venv with numpy and the cai wheel)."
fi
