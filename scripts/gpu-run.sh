#!/usr/bin/env bash
# Runs the GPU suite from a bundle made by scripts/gpu-bundle.sh (copied there as run.sh).
# Needs the NVIDIA driver and Python >= 3.11 with numpy and pytest; CuPy, PyTorch, numba-cuda and
# JAX are each optional (their tests say they were skipped). Exit status: 0 when all passed.
#
# Steps: rust (the Rust test binaries), pytest, sanitizer (compute-sanitizer over the lifetime
# tests), bench. CAI_GPU_SUITE_STEPS="pytest bench" runs only those; arguments are passed to
# pytest (`run.sh -k streams -x`), to run a part of the suite again.
#
# CAI_GPU_SUITE_EMULATED=1 says the libcuda found is the emulator (scripts/cuda-stub.sh
# --emulator; scripts/test.sh runs the suite that way): the tests run, the benchmarks and
# compute-sanitizer do not, since there is no GPU to time or check.
set -uo pipefail
cd "$(dirname "$0")" || exit 2
status=0
steps=" ${CAI_GPU_SUITE_STEPS:-rust pytest sanitizer bench} "
for s in $steps; do
    case $s in
    rust | pytest | sanitizer | bench) ;;
    *)
        echo "CAI_GPU_SUITE_STEPS: unknown step '$s' (steps: rust pytest sanitizer bench)"
        exit 2
        ;;
    esac
done
want() { [[ $steps == *" $1 "* ]]; }
# Output goes out as it is made (a run cut short still shows how far it got), and every step
# has a time limit, so that one hung step cannot keep the others and the summary from running.
# The whole suite can keep within CAI_GPU_SUITE_BUDGET seconds (default 0: no budget): a step
# gets at most what is left of it, and one that finds nothing left is not run (and the suite
# does not pass), so that the summary line is printed before a caller's own limit on one
# command cuts the run off (a runner that stops a command after 10 minutes sets 570).
export PYTHONUNBUFFERED=1
budget=${CAI_GPU_SUITE_BUDGET:-0}
if ! [[ $budget =~ ^[0-9]+$ ]]; then
    echo "CAI_GPU_SUITE_BUDGET: '$budget' is not a number of seconds"
    exit 2
fi
limit() { # SECONDS COMMAND...: exit status 124 when the limit ran out, 125 when not run
    local s=$1
    shift
    if [ "$budget" -gt 0 ]; then
        # 20 s kept back: `timeout` may take 5 s more to kill, and the summary must follow.
        local left=$((budget - SECONDS - 20))
        if [ $left -le 0 ]; then
            echo "!! not run, the suite's time budget of ${budget}s is spent (CAI_GPU_SUITE_STEPS runs the rest in another call): $*"
            return 125
        fi
        [ $left -lt "$s" ] && s=$left
    fi
    timeout --kill-after=5 "$s" "$@"
    local rc=$?
    [ $rc = 124 ] && echo "!! timed out after ${s}s: $*"
    return $rc
}
emulated=${CAI_GPU_SUITE_EMULATED:-}
if [ -n "$emulated" ]; then
    echo "== emulated CUDA driver: checks our logic, not a GPU (no benchmarks, no sanitizer)"
else
    nvidia-smi -L || echo "nvidia-smi not found"
fi

# The test binaries and the extension load libcuda.so.1 at run time.
# When the loader cannot find it (a driver mounted outside the loader's paths), look in the
# usual places.
if ! python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
    for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/cuda/compat; do
        if [ -e "$d/libcuda.so.1" ]; then
            export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            break
        fi
    done
fi
python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1"); print("libcuda.so.1: found")' 2>/dev/null \
    || echo "libcuda.so.1: NOT found (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"

if want rust; then
    echo "== Rust tests against the driver (release)"
    for t in bin/*; do
        echo "-- $t"
        limit 180 "$t" --test-threads=1 --nocapture 2>&1 | grep -Ev '^$' || status=1
    done
fi

echo "== the cai wheel"
site=$(mktemp -d)
python3 -m pip install -q --no-deps --no-index --target "$site" wheels/*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import cai; print("cai", cai.__version__, cai.cuda_available())'

if want pytest; then
    echo "== pytest GPU suite"
    (cd tests && limit 360 python3 -m pytest -q -rs -p no:cacheprovider . "$@") || status=1
fi

if [ -n "$emulated" ]; then
    echo "GPU suite exit status: $status (steps:${steps% }; emulated driver: no sanitizer, no benchmarks)"
    exit $status
fi

sanitizer=
if want sanitizer; then
    sanitizer=$(command -v compute-sanitizer || true)
    for c in /usr/local/cuda*/bin/compute-sanitizer; do
        [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer=$c
    done
fi
# Some machines have compute-sanitizer but it cannot run there (a sandboxed driver: "Device
# not supported"). A small probe tells that apart from errors in our tests: exit status 99 is
# memcheck reporting an error, anything else is the sanitizer failing to run.
probe='import numpy, cai; assert cai.DeviceArray(numpy.arange(4, dtype=numpy.int32)).to_bytes() == numpy.arange(4, dtype=numpy.int32).tobytes()'
probe_rc=0
if [ -n "$sanitizer" ]; then
    probe_log=$(limit 120 "$sanitizer" --tool memcheck --error-exitcode 99 python3 -c "$probe" 2>&1) || probe_rc=$?
fi
if ! want sanitizer; then
    :
elif [ -z "$sanitizer" ]; then
    echo "== compute-sanitizer not found: lifetime tests ran without it"
elif [ "$probe_rc" = 125 ]; then
    echo "== compute-sanitizer: not run (the time budget is spent)"
    status=1
elif [ "$probe_rc" = 99 ]; then
    echo "== compute-sanitizer (memcheck) found errors in a DeviceArray round trip"
    echo "$probe_log"
    status=1
elif [ "$probe_rc" != 0 ]; then
    echo "== compute-sanitizer cannot run here (its probe exited with $probe_rc): lifetime tests ran without it"
    echo "$probe_log" | tail -5
else
    echo "== compute-sanitizer (memcheck): lifetime tests"
    (cd tests && limit 240 "$sanitizer" --tool memcheck --error-exitcode 99 \
        python3 -m pytest -q -p no:cacheprovider test_lifetime.py -k "cupy or views or owner") || status=1
fi

if ! want bench; then
    :
elif python3 -c 'import cai, sys; sys.exit(0 if cai.cuda_available()[0] else 1)'; then
    echo "== benchmarks"
    limit 180 python3 gpu_bench.py || status=1
else
    echo "== benchmarks skipped: no CUDA device"
fi
echo "GPU suite exit status: $status (steps:${steps% })"
exit $status
