"""The CUDA build of the package (from the GPU bundle) on a machine without a GPU: what a user
sees at import. Runs when CAI_CUDA_WHEEL_DIR names the bundle's wheels (scripts/test.sh sets it).
"""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

WHEELS = os.environ.get("CAI_CUDA_WHEEL_DIR")
pytestmark = pytest.mark.skipif(not WHEELS, reason="CAI_CUDA_WHEEL_DIR not set")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    (wheel,) = Path(WHEELS).glob("cai_arrays-*.whl")
    target = tmp_path_factory.mktemp("cuda-site")
    zipfile.ZipFile(wheel).extractall(target)
    return target


def run(site, code, ld_library_path):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = str(site)
    if ld_library_path:
        env["LD_LIBRARY_PATH"] = ld_library_path
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def libcuda_dirs():
    """Directories of LD_LIBRARY_PATH holding a libcuda (the stub, in CI)."""
    dirs = os.environ.get("LD_LIBRARY_PATH", "").split(":")
    return [d for d in dirs if d and (Path(d) / "libcuda.so.1").exists()]


def stdout_with_driver_library(site, code):
    """Lines printed by `code` run with the libcuda of LD_LIBRARY_PATH (the stub, in CI)."""
    dirs = libcuda_dirs()
    if not dirs:
        pytest.skip("no libcuda on LD_LIBRARY_PATH")
    out = run(site, code, ld_library_path=":".join(dirs))
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_without_libcuda_import_works_and_says_why_cuda_is_not_available(site):
    """The driver is loaded at run time: a machine with no driver at all imports the CUDA build,
    and what needs the driver says there is none."""
    code = (
        "import cai, numpy as np\n"
        "print(cai.HAS_CUDA)\n"
        "print(cai.cuda_available())\n"
        "try:\n"
        "    cai.zeros((2, 2), device='gpu')\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError', e)\n"
        "print(cai.as_host_array(np.zeros(3)).shape)\n"
    )
    out = run(site, code, ld_library_path=None)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    if lines[1].startswith("(True"):
        pytest.skip("this machine has a system libcuda.so.1")
    no_driver = "loading libcuda.so.1 failed: CUDA_ERROR_INSUFFICIENT_DRIVER (35): no NVIDIA driver here"
    assert lines[0] == "True"
    assert lines[1].startswith(f"(False, '{no_driver}")
    assert lines[2].startswith(f'RuntimeError device="gpu" needs a CUDA device: {no_driver}')
    assert lines[3] == "(3,)"


def test_with_a_driver_library_but_no_device_calls_raise(site):
    code = (
        "import cai, cai.examples, numpy as np\n"
        "print(cai.HAS_CUDA, cai.cuda_available()[0])\n"
        "m = cai.examples.DeviceMatrix(0x7f0000000000, 2, 2, stream=5)\n"
        "for f in (lambda: cai.as_cuda_array(m), lambda: cai.DeviceArray(np.zeros(3)), lambda: cai.pointer_attributes(1)):\n"
        "    try:\n"
        "        f()\n"
        "    except RuntimeError as e:\n"
        "        print('RuntimeError', str(e)[:60])\n"
        "print(cai.as_cuda_array(m, check_pointer=False, sync=False).sync_plan)\n"
    )
    lines = stdout_with_driver_library(site, code)
    assert lines[0] == "True False"
    assert lines[1].startswith("RuntimeError cannot check `data` with the CUDA driver: cuInit failed")
    assert lines[2].startswith("RuntimeError cuInit failed: CUDA_ERROR_")
    assert lines[3].startswith("RuntimeError cuInit failed: CUDA_ERROR_")
    assert lines[4] == "none: sync=False"


def test_device_storages_without_a_device_fail_clearly(site):
    code = (
        "import cai\n"
        "for managed in (None, 'gt4py', 'cuda'):\n"
        "    try:\n"
        "        cai.zeros((4, 4), device='gpu', managed=managed)\n"
        "    except RuntimeError as e:\n"
        "        print('RuntimeError', str(e)[:60])\n"
        "s = cai.zeros((2, 2))\n"
        "s.synchronize(); s.host_to_device(force=True)\n"
        "print(s.managed, s.device, hasattr(s, '__cuda_array_interface__'))\n"
    )
    lines = stdout_with_driver_library(site, code)
    assert lines[:3] == ['RuntimeError device="gpu" needs a CUDA device: cuInit failed: CUDA_ERROR_'] * 3, lines
    assert lines[3] == "None None False"
