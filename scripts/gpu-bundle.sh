#!/usr/bin/env bash
# Builds, on a CPU machine, everything the GPU suite needs into one folder (default gpu-bundle/,
# git-ignored), because the GPU machine has the driver, CUDA and Python but no Rust toolchain
# and no network:
#   bin/      release test binaries of cai-runtime (features `cuda`, `cudarc`) and cai-gt,
#             stripped; the driver is loaded at run time: no CUDA and no stub needed
#   wheels/   the abi3 wheel of the `cai` package, as a user builds it (the one wheel serves
#             CPU-only and GPU machines)
#   tests/    the pytest GPU suite (tests/gpu)
#   gpu_bench.py, run.sh
# Then, on the GPU machine: bash gpu-bundle/run.sh   (docs/testing.md, "GPU suite").
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-bundle}
maturin=${MATURIN:-$( [ -x .venv/bin/maturin ] && echo .venv/bin/maturin || echo maturin )}

rm -rf "$out"
mkdir -p "$out/bin" "$out/wheels"

echo "== release test binaries (cai-runtime with features cuda and cudarc, cai-gt)"
for package in cai-runtime cai-gt; do
    features=derive
    [ "$package" = cai-runtime ] && features=cuda,cudarc
    cargo test --release -p "$package" --features "$features" --no-run --message-format=json 2>/dev/null \
        | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do
        # (Both crates have a `cuda` test: the binary is named for its crate too.)
        [ "$name" = "${package//-/_}" ] || name="$package-$name"
        # A test file whose features these builds leave off (ndarray's, cust's: cust links
        # libcuda when built) compiles to a binary of no tests: not shipped.
        if "$exe" --list 2>/dev/null | grep -q '^0 tests,'; then
            echo "   (not bin/$name: none of its tests is built with these features)"
            continue
        fi
        cp "$exe" "$out/bin/$name"
        strip "$out/bin/$name"
        echo "   bin/$name"
    done
done

echo "== abi3 wheel"
# The wheel links no libcuda (the driver is loaded at run time); --auditwheel skip keeps it a
# plain linux wheel.
"$maturin" build --release -m cai-py/Cargo.toml --auditwheel skip -o "$out/wheels"

if command -v objdump >/dev/null; then
    glibc=$(unzip -p "$out"/wheels/*.whl 'cai/_native.abi3.so' > "$out/.native.so" \
        && objdump -T "$out"/bin/* "$out/.native.so" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -1)
    rm -f "$out/.native.so"
    echo "== the binaries and the extension need ${glibc:-no versioned glibc} or newer on the GPU machine"
fi

cp -r tests/gpu "$out/tests"
# The ctypes DLPack producer both suites build malformed tensors with, and the exchange-table
# toolkit that calls any type's table as a C consumer does.
cp tests/python/dlpack_producer.py tests/python/dlpack_exchange.py "$out/tests/"
# The MPI halo exchange, whose device variant tests/gpu/test_mpi_halo.py runs.
cp examples/halo_exchange.py "$out/tests/"
rm -rf "$out/tests/__pycache__"
cp benches/gpu_bench.py "$out/"
cp scripts/gpu-run.sh "$out/run.sh"
du -sh "$out"
