#!/usr/bin/env bash
# Runs tests/peers alone: NVIDIA's cuda.core and numba-cuda (pinned in
# tests/peers/requirements.txt, in .venv-peers) against cai's device arrays, both ways, on the
# emulated CUDA driver (tests/cuda-emu), with no GPU. Arguments go to pytest.
#
# The cai wheel comes from $CAI_WHEEL_DIR (scripts/test.sh passes the GPU bundle's),
# else is built here into target/peers-wheel. Needs network access the first time (pip).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv-peers/bin/python ]; then
    "$PYTHON" -m venv .venv-peers
fi
.venv-peers/bin/python -m pip install --quiet --disable-pip-version-check -r tests/peers/requirements.txt
wheels=${CAI_WHEEL_DIR:-}
if [ -z "$wheels" ]; then
    if [ ! -x .venv/bin/maturin ]; then
        .venv-peers/bin/python -m pip install --quiet --disable-pip-version-check maturin==1.16.0
        maturin=.venv-peers/bin/maturin
    else
        maturin=.venv/bin/maturin
    fi
    wheels=target/peers-wheel
    rm -rf "$wheels"
    env -u CUDA_LIBRARY_PATH -u LD_LIBRARY_PATH "$maturin" build --release --quiet \
        -m cai-py/Cargo.toml -o "$wheels"
fi
.venv-peers/bin/python -m pip uninstall --quiet --yes cai 2>/dev/null || true
.venv-peers/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    "$wheels"/cai_arrays-*.whl
scripts/cuda-stub.sh --emulator target/cuda-emu >/dev/null
for devices in 1 2; do
    echo "== tests/peers with $devices emulated device(s)"
    CUDA_EMU_DEVICES=$devices LD_LIBRARY_PATH="$PWD/target/cuda-emu/lib64" \
        .venv-peers/bin/python -m pytest tests/peers -q -p no:cacheprovider "$@"
done
