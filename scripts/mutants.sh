#!/usr/bin/env bash
# Mutation testing of the pure logic (cai-runtime's descriptors, type strings, layouts, streams;
# cai-gt's storages): cargo-mutants changes the code one small way at a time (an operator, a return
# value, a match arm) and runs the Rust tests of the whole workspace against each change. A
# "missed" mutant is a change no test notices. Not part of scripts/test.sh: about 30 minutes
# on 2 cores. Needs `cargo install --locked cargo-mutants`. Arguments go to cargo-mutants
# (`scripts/mutants.sh --file cai-runtime/src/layout.rs`, `--list`, `--re REGEX`); results in
# mutants.out/. `scripts/mutants.sh --emulated ...` adds the `cuda` feature and runs the tests
# against the emulated driver (tests/cuda-emu), one at a time as scripts/gpu-run.sh does.
#
# What the plain run cannot see, and is left to other suites (so reported missed there):
# - cai-runtime/src/python/, cai-gt/src/python.rs: the pytest suites;
# - the device side of storages (`Storage::has_device`, `device_ptr`, `device_descriptor`,
#   `sync_state`, `sync_status`, staging `on_buffers`...): without `cuda` every storage is a
#   host one. With `--emulated` the `cuda` tests catch all of them (`scripts/mutants.sh
#   --emulated --re 'Storage::'`);
# - `driver_error_name`'s table: checked against cust's bindings, with `cuda` (all 21 of its
#   mutants caught: `scripts/mutants.sh --features cust --re driver_error_name`);
# - `HostBuffer`'s `Drop`: Miri's leak check (scripts/miri.sh).
# An equivalent mutant that stays: `<Host as Space>::stream_entry` returns the unit `NoStream`
# either way. The one timeout, on `name_clashing_padding`'s `==`, is a catch: the padding's
# new name is then never free, so the loop never ends.
# Excluded below, with why:
# - `hugepages`: advice to the kernel, which changes timings only (benches/storage_bench.py);
# - `Init::Uninit`'s arm in `allocate_host`: zeroed memory is one possible uninitialized
#   content, so only timings tell (benches/storage_bench.py, `empty`);
# - the guard that skips rebuilding a C layout in `build_with_layout` where one was just built
#   (no strides, C order): rebuilding gives the same layout, a few ns slower per export
#   (benches/python_bench.py, Grid);
# - `Debug` impls of buffer handles: output for people;
# - `GtHooks` default methods: "replace with Ok(())" is what they already do.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo mutants --version >/dev/null 2>&1; then
    echo "cargo-mutants is not installed: cargo install --locked cargo-mutants"
    exit 1
fi
source scripts/cuda-env.sh
features=cai-runtime/half,cai-runtime/bf16,cai-runtime/complex
test_args=(--skip ui --exact)
if [ "${1:-}" = "--emulated" ]; then
    shift
    scripts/cuda-stub.sh --emulator "$PWD/target/cuda-emu"
    export LD_LIBRARY_PATH="$PWD/target/cuda-emu/lib64:$LD_LIBRARY_PATH"
    features+=,cai-runtime/cuda
    # The emulator's device is one process-wide state, as a GPU is to scripts/gpu-run.sh.
    test_args+=(--test-threads=1)
fi
exec cargo mutants -p cai-runtime -p cai-gt --test-workspace=true --features "$features" \
    --file 'cai-runtime/src/*.rs' --file 'cai-gt/src/*.rs' \
    --exclude-re 'in hugepages$' \
    --exclude-re 'delete match arm Init::Uninit in Storage::allocate_host' \
    --exclude-re 'replace match guard self.strides.is_some\(\) \|\| self.order != Order::C with true in DescriptorBuilder<S>::build_with_layout' \
    --exclude-re 'impl std::fmt::Debug for (DeviceBufferHandle|HostBuffer)>::fmt' \
    --exclude-re 'GtHooks::(acquire|touch|release) -> Result<\(\), HookError> with Ok\(\(\)\)' \
    "$@" -- -- "${test_args[@]}"
