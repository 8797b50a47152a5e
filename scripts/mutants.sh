#!/usr/bin/env bash
# Mutation testing of the runtime's pure logic (descriptors, type strings, layouts, streams,
# storages): cargo-mutants changes the code one small way at a time (an operator, a return
# value, a match arm) and runs the Rust tests of the whole workspace against each change. A
# "missed" mutant is a change no test notices. Not part of scripts/test.sh: about 30 minutes
# on 2 cores. Needs `cargo install --locked cargo-mutants`. Arguments go to cargo-mutants
# (`scripts/mutants.sh --file cai-runtime/src/layout.rs`, `--list`); results in mutants.out/.
#
# What the Rust tests cannot see, and is left to other suites (so reported missed here):
# - cai-runtime/src/python/ and the `stream_entry` of the descriptor spaces: the pytest suites;
# - the driver paths (`Storage::device_descriptor`, staging `on_buffers`): the `cuda` feature's
#   tests, run against the emulated driver by scripts/test.sh;
# - `driver_error_name`'s table: checked against cust's bindings, also with `cuda` (all 21 of
#   its mutants caught: `scripts/mutants.sh --features cuda --re driver_error_name`);
# - `HostBuffer`'s `Drop`: Miri's leak check (scripts/miri.sh).
# Excluded below, with why:
# - `hugepages`: advice to the kernel, which changes timings only (benches/storage_bench.py);
# - `Debug` impls of buffer handles: output for people;
# - `GtHooks` default methods: "replace with Ok(())" is what they already do.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo mutants --version >/dev/null 2>&1; then
    echo "cargo-mutants is not installed: cargo install --locked cargo-mutants"
    exit 1
fi
source scripts/cuda-env.sh
exec cargo mutants -p cai-runtime --test-workspace=true --features half,bf16,complex \
    --file 'cai-runtime/src/*.rs' --file 'cai-runtime/src/storage/*.rs' \
    --exclude-re 'in hugepages$' \
    --exclude-re 'impl std::fmt::Debug for (DeviceBufferHandle|HostBuffer)>::fmt' \
    --exclude-re 'GtHooks::(acquire|touch|release) -> Result<\(\), HookError> with Ok\(\(\)\)' \
    "$@" -- -- --skip ui --exact
