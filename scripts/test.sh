#!/usr/bin/env bash
# Runs every test of the project: pyflakes, shellcheck, formatting, clippy, the API docs' links,
# the public API against its listings,
# the Rust unit/integration/property/UI tests, those needing neither Python nor CUDA again under
# Miri, a build without default features, the abi3 wheel of the `cai` Python package (built
# profile-guided, scripts/pgo-wheel.sh: the pytest suite runs once on its instrumented build
# as training, and again on the wheel), stubtest
# of its type stubs, the pytest suites (NumPy oracle, package, fuzzing, checker, safety; in
# .venv), NVIDIA's cuda.core and numba-cuda against cai on the emulated driver (tests/peers, in
# .venv-peers), the array libraries users pair cai with, both ways, and an MPI halo exchange
# (tests/peers-host and examples/halo_exchange.py, in .venv-peers-host), GT4Py's own stencils on
# cai storages (tests/gt4py, in .venv-gt4py), the lifetime
# tests under memory checkers (scripts/memcheck.sh), and the demo.
# Needs no GPU and no CUDA toolkit: cai loads the driver at run time (one wheel for CPU-only
# and GPU machines); only the `cust` feature (cust's buffers and streams) is compiled against a
# stub libcuda. The tests run once against the stub (what needs a device says why there is
# none) and once against the emulated driver (tests/cuda-emu), with one device and with two. This is the command README.md names and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt

source scripts/cuda-env.sh

echo "== pyflakes (the GPU suite and benchmarks too, which only a GPU machine runs)"
# GT4Py's stencils assign their output fields, which pyflakes takes for unused locals: those
# lines alone are let through in tests/gt4py.
if flakes=$(.venv/bin/python -m pyflakes cai-py/python tests benches examples scripts 2>&1) \
    || ! grep -v "^tests/gt4py/.*local variable '[a-z_]*' is assigned to but never used$" <<<"$flakes"; then
    :
else
    exit 1
fi
echo "== shellcheck (the scripts, the GPU suite's run.sh and .ci/run)"
.venv/bin/shellcheck scripts/*.sh .ci/run
echo "== cargo fmt"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings
# ... and the CUDA features without Python, where code only Python reaches is dead.
cargo clippy -p cai-runtime -p cai-gt --all-targets --features cai-runtime/cudarc -- -D warnings
# ... and the package as a user builds it (without the test suite's hooks).
cargo clippy -p cai-py --all-targets -- -D warnings
echo "== cargo doc (a broken intra-doc link is an error)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features
echo "== where each kind of change goes (docs/repository.md) against the tree"
.venv/bin/python scripts/where-changes-go.py
echo "== public API (cai-runtime/public-api.txt, cai-gt/public-api.txt)"
scripts/public-api.sh
echo "== cargo publish --dry-run: the three crates package and build as crates.io would have them"
# (In a target dir of its own, without the packaged crates' fingerprints: cargo takes a
# registry crate's sources for unchanging, so a build of an earlier package of the same version
# would be reused in place of this one's.)
rm -rf target/publish/debug/.fingerprint/cai-{derive,runtime,gt}-*
cargo publish --dry-run --allow-dirty --quiet --target-dir target/publish -p cai-derive -p cai-runtime -p cai-gt
echo "== cargo build (cai-runtime and cai-gt without default features, with their tests)"
cargo build -p cai-runtime -p cai-gt --no-default-features --all-targets
echo "== cargo build (the driver loaded at run time: no CUDA installation, no stub, no libcuda linked)"
env -u CUDA_LIBRARY_PATH -u LD_LIBRARY_PATH cargo build -p cai-runtime -p cai-gt -p cai-py --features cai-runtime/cuda
if cargo tree -p cai-py -e normal | grep -q " cust "; then
    echo "the package pulls in cust"; exit 1
fi
echo "== cargo test"
cargo test --workspace --all-features
echo "== plain cargo as a newcomer types it, with no CUDA on any path: cargo test (the library crates and the suite), cargo test --workspace, cargo doc --no-deps, and the README's cargo doc"
for plain in "cargo test" "cargo test --workspace" "cargo doc --no-deps" \
    "cargo doc --no-deps -p cai-runtime --features python,cudarc,ndarray"; do
    # (Its output only where it fails: the tests ran above.)
    read -ra words <<<"$plain"
    if ! out=$(env -u CUDA_LIBRARY_PATH -u LD_LIBRARY_PATH RUSTDOCFLAGS="-D warnings" "${words[@]}" 2>&1); then
        echo "$out"
        echo "'$plain' fails on a machine without CUDA"
        exit 1
    fi
done
echo "== miri (the unsafe code the pure-logic and derive tests reach)"
scripts/miri.sh
echo "== abi3 wheel of the cai package (with the test suite's hooks: feature \`testing\`), profile-guided: its training runs the host test suite (scripts/pgo-wheel.sh)"
rm -rf dist
scripts/pgo-wheel.sh dist --features testing
# (The distribution was named `cai` before: a venv of then holds it, and its files are ours.)
.venv/bin/python -m pip uninstall --quiet --yes cai 2>/dev/null || true
.venv/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps dist/cai_arrays-*-abi3-*.whl
# (The wheel says how it was built, as the benchmarks print it.)
.venv/bin/python -c 'import cai, sys; b = cai._native._build; print("the wheel:", b); sys.exit(b != "profile-guided")'
echo "== GPU bundle: built, and dry-run here (device tests say they were skipped)"
# (Built with no stub and no CUDA on any path: the bundle needs neither.)
env -u CUDA_LIBRARY_PATH -u LD_LIBRARY_PATH scripts/gpu-bundle.sh gpu-bundle
PATH="$PWD/.venv/bin:$PATH" bash gpu-bundle/run.sh
echo "== the emulated CUDA driver (tests/cuda-emu)"
scripts/cuda-stub.sh --emulator target/cuda-emu
echo "== the code of the README, docs/python.md and docs/cuda.md, built as a newcomer copies it and run (tests/newcomer), the GPU examples on the emulated driver too"
.venv/bin/python tests/newcomer/check.py --driver target/cuda-emu/lib64
echo "== GPU bundle against the emulated CUDA driver (our device logic; no GPU, no CuPy & co.)"
LD_LIBRARY_PATH="$PWD/target/cuda-emu/lib64:$LD_LIBRARY_PATH" CAI_GPU_SUITE_EMULATED=1 \
    PATH="$PWD/.venv/bin:$PATH" bash gpu-bundle/run.sh
echo "== ... and with two emulated devices (CUDA_EMU_DEVICES=2: the tests that need two run)"
CUDA_EMU_DEVICES=2 LD_LIBRARY_PATH="$PWD/target/cuda-emu/lib64:$LD_LIBRARY_PATH" \
    CAI_GPU_SUITE_EMULATED=1 PATH="$PWD/.venv/bin:$PATH" bash gpu-bundle/run.sh
echo "== NVIDIA's cuda.core and numba-cuda against cai on the emulated driver (tests/peers, .venv-peers)"
CAI_WHEEL_DIR="$PWD/gpu-bundle/wheels" scripts/peers.sh
echo "== the cust and cudarc backends' tests, and whose context an allocation lives in, against the emulated driver (two devices)"
# One test at a time: the emulator is one per process, and a test that synchronizes everything
# (a context, the legacy stream) would run the work another test's stale-read control leaves
# pending.
CUDA_EMU_DEVICES=2 LD_LIBRARY_PATH="$PWD/target/cuda-emu/lib64:$LD_LIBRARY_PATH" \
    cargo test -p cai-runtime --features cust,cudarc,python --test cust --test cudarc --test context_lifetime -- --test-threads=1
echo "== the cudarc example against the emulated driver (which runs no kernels: it says so)"
cudarc_out=$(LD_LIBRARY_PATH="$PWD/target/cuda-emu/lib64:$LD_LIBRARY_PATH" \
    cargo run --quiet -p cudarc-example 2>&1)
echo "$cudarc_out"
grep -q "read back \[0.0, 1.0, 2.0" <<<"$cudarc_out"
echo "== a backend cai does not know (tests/backend: public API only) against the emulated driver"
LD_LIBRARY_PATH="$PWD/target/cuda-emu/lib64:$LD_LIBRARY_PATH" cargo run --quiet -p cai-outside-backend
echo "== GPU bundle: a spent time budget runs no more steps, says so, and fails the suite"
if budget_log=$(CAI_GPU_SUITE_BUDGET=1 CAI_GPU_SUITE_STEPS=pytest PATH="$PWD/.venv/bin:$PATH" \
    bash gpu-bundle/run.sh 2>&1) || ! grep -q "time budget of 1s is spent" <<<"$budget_log"; then
    echo "$budget_log"
    echo "run.sh passed, or did not say why it ran no step, with its time budget spent"
    exit 1
fi
echo "== stubtest: the type stubs (cai-py/python/cai/*.pyi) match the package"
MYPYPATH=cai-py/python .venv/bin/python -m mypy.stubtest cai --allowlist cai-py/stubtest/allowlist.txt
echo "== pytest"
cargo build -p cai-oracle
CAI_ORACLE="$PWD/target/debug/cai-oracle" .venv/bin/python -m pytest tests/python -q
echo "== array libraries against cai both ways, and MPI halo exchanges (tests/peers-host, .venv-peers-host)"
CAI_WHEEL_DIR=dist scripts/peers-host.sh
echo "== GT4Py itself on cai storages (tests/gt4py, in .venv-gt4py: pinned gt4py, numpy backend)"
if [ ! -x .venv-gt4py/bin/python ]; then
    "$PYTHON" -m venv .venv-gt4py
fi
.venv-gt4py/bin/python -m pip install --quiet --disable-pip-version-check -r tests/gt4py/requirements.txt
.venv-gt4py/bin/python -m pip uninstall --quiet --yes cai 2>/dev/null || true
.venv-gt4py/bin/python -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps dist/cai_arrays-*-abi3-*.whl
GT_CACHE_ROOT="$PWD/target/gt_cache" .venv-gt4py/bin/python -m pytest tests/gt4py -q -p no:cacheprovider \
    -W "ignore::DeprecationWarning" -W "ignore:The layout of the field:UserWarning"
echo "== memory checkers over the lifetime tests (PYTHONMALLOC=debug, valgrind)"
scripts/memcheck.sh
echo "== demo"
scripts/demo.sh >/dev/null
echo "all tests passed"
