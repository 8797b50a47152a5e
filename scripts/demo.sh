#!/usr/bin/env bash
# The demo, on a fresh clone: the Rust half (derived structs and their descriptors, and the
# device part where there is a CUDA driver), then the Python half (NumPy and Rust sharing memory
# zero-copy, DLPack, import, the checker). It sets up what the Python half needs itself: the
# `cai` package from .venv where scripts/test.sh built it, else in .venv-demo (NumPy and
# maturin from PyPI, the package built in the dev profile: fast to build, slow to run).
# Whatever it skips, it says why.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
echo "== Rust (cargo run --example demo)"
cargo run --quiet --example demo
echo
echo "== Python (examples/demo.py)"
PYTHON=${PYTHON:-python3}
if .venv/bin/python -c "import cai, numpy" 2>/dev/null; then
    py=.venv/bin/python
elif ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "Python part skipped: it needs Python 3.11 or newer as \$PYTHON (now: $("$PYTHON" --version 2>&1))."
    exit 0
else
    py=.venv-demo/bin/python
    # A venv left without pip (its creation failed half-way) is made again.
    if ! "$py" -m pip --version >/dev/null 2>&1; then
        rm -rf .venv-demo
        if ! "$PYTHON" -m venv .venv-demo; then
            rm -rf .venv-demo
            echo "Python part skipped: \`$PYTHON -m venv\` failed (on Debian and Ubuntu: apt install python3-venv)."
            exit 0
        fi
    fi
    if ! "$py" -m pip install --quiet --disable-pip-version-check numpy==2.4.6 maturin==1.16.0; then
        echo "Python part skipped: pip could not install numpy and maturin from PyPI (no network?)."
        exit 0
    fi
    echo "(building the cai package into .venv-demo, dev profile)"
    rm -rf target/demo-wheel
    .venv-demo/bin/maturin build --quiet --profile dev -m cai-py/Cargo.toml -o target/demo-wheel
    "$py" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps target/demo-wheel/cai_arrays-*.whl
fi
"$py" examples/demo.py
echo
echo "demo done in $((SECONDS - start)) s"
