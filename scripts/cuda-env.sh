# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/gpu-bundle.sh: where to link libcuda from.
# With a CUDA installation (or CUDA_LIBRARY_PATH set), cust_raw's build script finds it. Without
# one (CI), build the stub from scripts/cuda-stub.sh and link and run against it: tests that
# need a device then say they were skipped.
if [ -z "${CUDA_LIBRARY_PATH:-}" ] && [ ! -e /usr/local/cuda/include/cuda.h ] && [ ! -e /opt/cuda/include/cuda.h ]; then
    echo "== no CUDA installation: building the libcuda stub"
    scripts/cuda-stub.sh "$PWD/target/cuda-stub"
    export CUDA_LIBRARY_PATH="$PWD/target/cuda-stub"
    export LD_LIBRARY_PATH="$PWD/target/cuda-stub/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
