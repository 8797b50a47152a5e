#!/usr/bin/env bash
# Runs tests/peers-host alone: the array libraries pinned in tests/peers-host/requirements.txt
# (NumPy, JAX on the CPU, tvm-ffi, pyarrow, array-api-strict, xarray, pandas, dask and
# dask.distributed, SciPy, mpi4py), in .venv-peers-host, against cai's storages, views and
# derived classes both ways; then the MPI halo exchange of examples/halo_exchange.py with 2 and
# 4 processes. Arguments go to pytest (`--peer-table docs/interop.md` rewrites the table there).
#
# The cai wheel comes from $CAI_WHEEL_DIR (scripts/test.sh passes dist), else is built here
# into target/peers-host-wheel. Needs network access the first time (pip), and Open MPI
# (Debian: openmpi-bin, libopenmpi-dev; .ci/run installs them): without `mpiexec`, the MPI
# steps fail saying so.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
venv=.venv-peers-host
if [ ! -x "$venv/bin/python" ]; then
    "$PYTHON" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/peers-host/requirements.txt
wheels=${CAI_WHEEL_DIR:-}
if [ -z "$wheels" ]; then
    if [ ! -x .venv/bin/maturin ]; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check maturin==1.16.0
        maturin=$venv/bin/maturin
    else
        maturin=.venv/bin/maturin
    fi
    wheels=target/peers-host-wheel
    rm -rf "$wheels"
    env -u CUDA_LIBRARY_PATH -u LD_LIBRARY_PATH "$maturin" build --release --quiet \
        -m cai-py/Cargo.toml -o "$wheels"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
    "$wheels"/cai_arrays-*-abi3-*.whl

echo "== tests/peers-host (array libraries both ways, mpi4py in one process, dask.distributed)"
"$venv/bin/python" -m pytest tests/peers-host -q -p no:warnings "$@"

if ! command -v mpiexec >/dev/null 2>&1; then
    echo "mpiexec not found: install Open MPI (Debian: apt-get install openmpi-bin libopenmpi-dev)"
    exit 1
fi
for ranks in 2 4; do
    echo "== examples/halo_exchange.py: halos of GDP-3 storages exchanged zero-copy, $ranks MPI processes"
    # (--oversubscribe: more processes than cores; --allow-run-as-root: CI runs as root.)
    timeout 120 mpiexec --allow-run-as-root --oversubscribe \
        -n "$ranks" "$venv/bin/python" examples/halo_exchange.py
done
