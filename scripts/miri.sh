#!/usr/bin/env bash
# Runs the tests that need neither Python nor CUDA under Miri, which checks the unsafe code
# they reach for undefined behaviour (out-of-bounds or misaligned access, use after free,
# reads of uninitialized bytes, aliasing violations) and for leaks: the runtime's unit and
# property tests (descriptors, layouts, the storages' own allocations, fills and copies) and
# the derive tests (the generated unsafe impls and layout checks). A test that reaches only
# safe code and is slow under Miri is `#[cfg_attr(miri, ignore = "...")]`, the reason given
# (`grep -rn 'cfg_attr(miri' -A2` lists them); its native run is unchanged.
#
# Needs the pinned nightly toolchain with Miri (MIRI_TOOLCHAIN below; CAI_MIRI_TOOLCHAIN picks
# another): `rustup toolchain install nightly-2026-10-29 --profile minimal --component
# miri,rust-src` (.ci/run does this, reading the pin from here). Pinned so that a new nightly,
# with a changed Miri or a broken build, cannot turn CI red on a day nobody changed anything;
# move the pin on purpose. Without the toolchain it says it was skipped and exits 0, unless
# CAI_REQUIRE_MIRI=1. Property tests run PROPTEST_CASES cases each (16 by default:
# Miri interprets every step, and the native run of the suite runs the full counts).
set -euo pipefail
cd "$(dirname "$0")/.."

MIRI_TOOLCHAIN=nightly-2026-10-29
toolchain=${CAI_MIRI_TOOLCHAIN:-$MIRI_TOOLCHAIN}
if [ "${1:-}" = --toolchain ]; then
    echo "$toolchain"
    exit 0
fi
if ! cargo "+$toolchain" miri --version >/dev/null 2>&1; then
    echo "== miri: skipped, no $toolchain toolchain with Miri here" \
        "(rustup toolchain install $toolchain --profile minimal --component miri,rust-src)"
    [ -z "${CAI_REQUIRE_MIRI:-}" ] || exit 1
    exit 0
fi
# Isolation off, so that the tests see PROPTEST_CASES (Miri hides the environment otherwise).
# Permissive provenance: a storage hands out its items' addresses as integers (the `data`
# value Python gets), and the tests that write through them turn them back into pointers.
export MIRIFLAGS=${MIRIFLAGS:--Zmiri-disable-isolation -Zmiri-permissive-provenance}
export PROPTEST_CASES=${PROPTEST_CASES:-16}
cargo "+$toolchain" miri test -q -p cai-runtime --lib --tests
cargo "+$toolchain" miri test -q -p cai-suite --test derive
cargo "+$toolchain" miri test -q -p cai-gt --lib --test derive --test props
