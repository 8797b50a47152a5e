#!/usr/bin/env bash
# Runs every test of the project: formatting, clippy, the Rust unit/integration/property/UI
# tests, a build without default features, the abi3 wheel of the `cai` Python package, the
# pytest suites (NumPy oracle, package, fuzzing, checker; in .venv), and the demo.
# Needs no GPU and no CUDA toolkit (the `cuda` feature is compiled and tested against a stub
# libcuda). This is the command README.md names and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt

# The `cuda` feature links libcuda. Without a CUDA installation (CI), link and run against the
# stub from scripts/cuda-stub.sh: tests needing a device then say they were skipped.
if [ -z "${CUDA_LIBRARY_PATH:-}" ] && [ ! -e /usr/local/cuda/include/cuda.h ] && [ ! -e /opt/cuda/include/cuda.h ]; then
    echo "== no CUDA installation: building the libcuda stub"
    scripts/cuda-stub.sh "$PWD/target/cuda-stub"
    export CUDA_LIBRARY_PATH="$PWD/target/cuda-stub"
    export LD_LIBRARY_PATH="$PWD/target/cuda-stub/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings
echo "== cargo build (cai-runtime without default features)"
cargo build -p cai-runtime --no-default-features
echo "== cargo test"
cargo test --workspace --all-features
echo "== abi3 wheel of the cai package"
rm -rf dist
.venv/bin/maturin build --release -m cai-py/Cargo.toml -o dist
.venv/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps dist/cai-*-abi3-*.whl
echo "== pytest"
cargo build -p cai-oracle
CAI_ORACLE="$PWD/target/debug/cai-oracle" .venv/bin/python -m pytest tests/python -q
echo "== demo"
scripts/demo.sh >/dev/null
echo "all tests passed"
