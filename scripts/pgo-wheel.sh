#!/usr/bin/env bash
# Builds the cai wheel with profile-guided optimization, as its wheels are meant to be built:
# an instrumented build (with the test suite's hooks) runs the host test suite (tests/python)
# and the everyday exchanges, repeated (scripts/pgo-train.py), as its training, and the wheel is built again from the profile that run recorded. The
# profile puts the paths the tests take often where the processor fetches them fast: the DLPack
# exchanges run 10-30% faster than from a plain `maturin build --release` (docs/performance.md).
#
#   scripts/pgo-wheel.sh OUTDIR [MATURIN_ARGS...]     e.g. scripts/pgo-wheel.sh dist --features testing
#
# Needs .venv with tests/python/requirements.txt (scripts/test.sh makes it) and LLVM's
# llvm-profdata of the compiler's own LLVM (rustup's component llvm-tools, added here where
# rustup is). Builds in target/pgo-gen and target/pgo-use, the profile in target/pgo.
# MATURIN_ARGS reach the final build only: the instrumented one is always the package with
# `--features testing`, as the tests need. `cai._native._build` says which build a wheel is
# (`instrumented`, `profile-guided`; `plain` from any other).
set -euo pipefail
# (OUTDIR as the caller named it, from the caller's folder.)
out=$(realpath -m -- "${1:?usage: scripts/pgo-wheel.sh OUTDIR [MATURIN_ARGS...]}")
shift
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
    echo "scripts/pgo-wheel.sh needs .venv with tests/python/requirements.txt (scripts/test.sh makes it)" >&2
    exit 1
fi
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ] && command -v rustup >/dev/null 2>&1; then
    # (Where it fails, the message below says what is missing.)
    rustup component add llvm-tools >/dev/null || true
fi
if [ ! -x "$profdata" ]; then
    echo "no llvm-profdata at $profdata: install the compiler's LLVM tools (rustup component add llvm-tools)" >&2
    exit 1
fi

# The flags cargo gives rustc: the caller's RUSTFLAGS and "$1", kept one argument where the
# path in it holds a space (cargo reads CARGO_ENCODED_RUSTFLAGS before RUSTFLAGS).
encoded_flags() {
    local words=()
    read -ra words <<<"${RUSTFLAGS:-}"
    words+=("$1")
    local IFS=$'\x1f'
    echo "${words[*]}"
}

work="$PWD/target/pgo"
# (Each profile's flags name a new set of builds in target/pgo-use, where cargo would keep them
# all: none is of use to the next profile.)
rm -rf "$work" target/pgo-use
mkdir -p "$work/data"
echo "== PGO 1/3: the instrumented wheel"
# (Both builds name the host as their target: the flags then reach the crates alone, not the
# build scripts and macros, which would add profiles of their own as they run.)
CAI_WHEEL_BUILD=instrumented CARGO_ENCODED_RUSTFLAGS=$(encoded_flags "-Cprofile-generate=$work/data") \
    CARGO_TARGET_DIR=target/pgo-gen \
    .venv/bin/maturin build --quiet --release -m cai-py/Cargo.toml --features testing \
    --target "$host" -o "$work/gen-wheel"
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$work/gen-site" "$work"/gen-wheel/cai_arrays-*.whl
echo "== PGO 2/3: training, the host test suite and scripts/pgo-train.py on the instrumented wheel"
cargo build --quiet -p cai-oracle
oracle="$(cargo metadata --format-version 1 --no-deps \
    | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/cai-oracle"
# (Seeded: the same cases every time, so one source gives one profile, threads' timing aside.)
PYTHONPATH="$work/gen-site" CAI_ORACLE="$oracle" PYTHONHASHSEED=0 \
    .venv/bin/python -m pytest tests/python -q -p no:cacheprovider --hypothesis-seed=0
# Then the exchanges a program repeats, repeated: the test suite runs them no more often than
# the error paths around them (scripts/pgo-train.py says why).
PYTHONPATH="$work/gen-site" .venv/bin/python scripts/pgo-train.py
"$profdata" merge -o "$work/cai.profdata" "$work/data"
echo "== PGO 3/3: the wheel built from the profile"
# (Named by its content: cargo rebuilds when its flags change, and a file's content is none of
# them.)
profile="$work/cai-$(sha256sum "$work/cai.profdata" | cut -c1-16).profdata"
mv "$work/cai.profdata" "$profile"
CAI_WHEEL_BUILD=profile-guided CARGO_ENCODED_RUSTFLAGS=$(encoded_flags "-Cprofile-use=$profile") \
    CARGO_TARGET_DIR=target/pgo-use \
    .venv/bin/maturin build --release -m cai-py/Cargo.toml --target "$host" -o "$out" "$@"
