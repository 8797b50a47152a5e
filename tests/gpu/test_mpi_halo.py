"""The MPI halo exchange of examples/halo_exchange.py on device storages: with a CUDA-aware
MPI, mpi4py hands MPI the storages' device pointers (through `__dlpack__` /
`__cuda_array_interface__`), and the result equals NumPy's on the whole domain. Skipped, with
the reason, where the machine has no mpi4py, no `mpiexec`, or an MPI that is not CUDA-aware."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# In the GPU bundle the example sits beside this file (scripts/gpu-bundle.sh copies it).
EXAMPLE = next(
    (p for p in (os.path.join(HERE, "halo_exchange.py"),
                 os.path.join(HERE, "..", "..", "examples", "halo_exchange.py"))
     if os.path.exists(p)),
    None,
)


@pytest.mark.parametrize("ranks", [2, 4])
def test_halo_exchange_of_device_storages(cp, ranks):
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("no mpi4py here: the device halo exchange needs it and a CUDA-aware MPI")
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec here: the device halo exchange needs an MPI installation")
    if EXAMPLE is None:
        pytest.skip("examples/halo_exchange.py is not beside the suite")
    cmd = [mpiexec, "--allow-run-as-root", "--oversubscribe", "-n", str(ranks),
           sys.executable, EXAMPLE, "--device", "gpu"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in 180 s: {e.stdout}{e.stderr}")
    if p.returncode == 3 and "no CUDA-aware MPI" in p.stdout:
        pytest.skip(p.stdout.strip().splitlines()[0])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "device memory" in p.stdout and p.stdout.rstrip().endswith("ok"), p.stdout
