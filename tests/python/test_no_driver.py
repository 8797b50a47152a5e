"""What the package does on a machine without a usable CUDA driver (CI's): it imports, host
work runs, and whatever needs the driver raises RuntimeError saying why there is none, the
reason ``cuda_available()`` gives.

Device memory is not wrapped then (`as_storage` and `storage(copy=False)` of data with a device
buffer: a `"gpu"` entry in `__gt_data_interface__`, `__cuda_array_interface__`,
`device_data=`), as device requests (`zeros(..., device="gpu")`) are refused: the pointer cannot
be checked, and such a storage could never copy between its sides. The device pointer is never
dereferenced here, so any address will do. With a driver, the wraps are in tests/gpu/.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cai

pytestmark = pytest.mark.skipif(cai.cuda_available()[0], reason="a CUDA driver is loaded here; see tests/gpu")

PTR = 0x7F0000000000
NO_DRIVER = re.escape(cai.cuda_available()[1])


def gpu_entry(shape=(2, 3), typestr="<f8"):
    return {"shape": shape, "typestr": typestr, "data": (PTR, False), "strides": None, "version": 3}


class Obj:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def host_and_gpu():
    """A producer with both a host and a "gpu" entry (GDP-3), and its host array."""
    a = np.arange(6.0).reshape(2, 3)
    return Obj(__gt_data_interface__={None: a.__array_interface__, "gpu": gpu_entry()}, keep=a), a


def gpu_only():
    return Obj(__gt_data_interface__={"gpu": gpu_entry()})


class CudaArray:
    """An object exposing only `__cuda_array_interface__`."""

    @property
    def __cuda_array_interface__(self):
        return gpu_entry()


def device_request_message():
    with pytest.raises(RuntimeError, match=NO_DRIVER) as e:
        cai.zeros((2, 3), device="gpu")
    return str(e.value)


def as_storage_pair(**kw):
    return cai.as_storage(np.arange(6.0).reshape(2, 3), device_data=CudaArray(), **kw)


def storage_pair(**kw):
    return cai.storage(np.arange(6.0).reshape(2, 3), CudaArray(), copy=False, **kw)


MIRRORS = {
    "as_storage(host and gpu entries)": lambda **kw: cai.as_storage(host_and_gpu()[0], **kw),
    "storage(host and gpu entries, copy=False)": lambda **kw: cai.storage(host_and_gpu()[0], copy=False, **kw),
    "as_storage(host, device_data=cuda array)": as_storage_pair,
    "storage(host, cuda array, copy=False)": storage_pair,
    "as_storage(host, device_data=gpu entry)": lambda **kw: cai.as_storage(
        np.arange(6.0).reshape(2, 3), device_data=gpu_only(), **kw),
}

DEVICE_ONLY = {
    "as_storage(gpu entry)": lambda: cai.as_storage(gpu_only()),
    "as_storage(cuda array)": lambda: cai.as_storage(CudaArray()),
    "as_storage(device_data=cuda array)": lambda: cai.as_storage(device_data=CudaArray()),
    "storage(gpu entry, copy=False)": lambda: cai.storage(gpu_only(), copy=False),
    "storage(device_data=cuda array, copy=False)": lambda: cai.storage(device_data=CudaArray(), copy=False),
}


@pytest.mark.parametrize(
    "state", [None, cai.SyncState.SYNC_CLEAN, cai.SyncState.SYNC_DEVICE_DIRTY],
    ids=["no sync_state", "SYNC_CLEAN", "SYNC_DEVICE_DIRTY"],
)
@pytest.mark.parametrize("wrap", MIRRORS)
def test_a_host_and_device_pair_is_refused(wrap, state):
    kw = {} if state is None else {"sync_state": cai.SyncState(state)}
    with pytest.raises(RuntimeError, match=NO_DRIVER):
        MIRRORS[wrap](**kw)


@pytest.mark.parametrize("wrap", DEVICE_ONLY)
def test_device_only_data_is_refused(wrap):
    with pytest.raises(RuntimeError, match=NO_DRIVER):
        DEVICE_ONLY[wrap]()


@pytest.mark.parametrize("wrap", [*MIRRORS, *DEVICE_ONLY])
def test_the_refusal_gives_a_device_requests_reason(wrap):
    # One reason for both, the driver's, after what was asked for: 'device="gpu" needs a CUDA
    # device: <reason>' and "cannot check `data` with the CUDA driver: <reason>".
    reason = device_request_message().split(": ", 1)[1]
    assert reason == cai.cuda_available()[1]
    with pytest.raises(RuntimeError) as e:
        (MIRRORS.get(wrap) or DEVICE_ONLY[wrap])()
    assert reason in str(e.value), (str(e.value), reason)


def test_the_host_data_alone_still_wraps():
    # Refusing the device entry leaves host-only wraps as they were: the same producer's host
    # array, and a producer with only a host entry, are wrapped without a copy.
    producer, a = host_and_gpu()
    with pytest.raises(RuntimeError, match=NO_DRIVER):
        cai.as_storage(producer)
    s = cai.as_storage(a)
    assert type(s) is cai.CPUStorage
    s[0, 0] = 9.0
    assert a[0, 0] == 9.0


@pytest.mark.parametrize("managed", [None, "gt4py", "cuda"])
@pytest.mark.parametrize("device", ["gpu", "gpu:1"])
def test_device_and_managed_requests_fail_without_a_driver(managed, device):
    with pytest.raises(RuntimeError, match=f'^device="gpu" needs a CUDA device: {NO_DRIVER}'):
        cai.zeros((4,), device=device, managed=managed)


def run(code, ld_library_path):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if ld_library_path:
        env["LD_LIBRARY_PATH"] = ld_library_path
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_without_libcuda_import_works_and_says_why_cuda_is_not_available():
    """The driver is loaded at run time: a machine with no driver library at all imports the
    package, and what needs the driver says there is none."""
    code = (
        "import cai, numpy as np\n"
        "print(cai.cuda_available())\n"
        "try:\n"
        "    cai.zeros((2, 2), device='gpu')\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError', e)\n"
        "print(cai.as_host_array(np.zeros(3)).shape)\n"
    )
    lines = run(code, ld_library_path=None)
    if lines[0].startswith("(True"):
        pytest.skip("this machine has a system libcuda.so.1")
    no_driver = "loading libcuda.so.1 failed: CUDA_ERROR_INSUFFICIENT_DRIVER (35): no NVIDIA driver here"
    assert lines[0].startswith(f"(False, '{no_driver}")
    assert lines[1].startswith(f'RuntimeError device="gpu" needs a CUDA device: {no_driver}')
    assert lines[2] == "(3,)"


def test_with_a_driver_library_but_no_device_calls_raise():
    """A driver library whose `cuInit` fails (CI's stub): what needs it raises, naming it."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d and (Path(d) / "libcuda.so.1").exists()]
    if not dirs:
        pytest.skip("no libcuda on LD_LIBRARY_PATH")
    code = (
        "import cai, cai.examples, numpy as np\n"
        "print(cai.cuda_available()[0])\n"
        "m = cai.examples.DeviceMatrix(0x7f0000000000, 2, 2, stream=5)\n"
        "for f in (lambda: cai.as_cuda_array(m), lambda: cai.DeviceArray(np.zeros(3)),\n"
        "          lambda: cai.pointer_attributes(1), lambda: cai.zeros((4, 4), device='gpu', managed='cuda')):\n"
        "    try:\n"
        "        f()\n"
        "    except RuntimeError as e:\n"
        "        print('RuntimeError', str(e)[:90])\n"
        "print(cai.as_cuda_array(m, check_pointer=False, sync=False).sync_plan)\n"
        "s = cai.zeros((2, 2))\n"
        "s.synchronize(); s.host_to_device(force=True)\n"
        "print(s.managed, s.device, hasattr(s, '__cuda_array_interface__'))\n"
    )
    lines = run(code, ld_library_path=":".join(dirs))
    assert lines[0] == "False"
    assert lines[1].startswith("RuntimeError cannot check `data` with the CUDA driver: cuInit failed")
    assert lines[2].startswith("RuntimeError DeviceArray needs a CUDA device: cuInit failed: CUDA_ERROR_")
    assert lines[3].startswith("RuntimeError cannot ask the CUDA driver about ptr = 0x1: cuInit failed")
    assert lines[4].startswith('RuntimeError device="gpu" needs a CUDA device: cuInit failed: CUDA_ERROR_')
    assert lines[5] == "none: sync=False"
    assert lines[6] == "None None False"


def test_what_needs_the_driver_says_what_it_was_doing():
    m = lambda: cai.examples.DeviceMatrix(PTR, 2, 2)  # noqa: E731
    v = cai.as_cuda_array(m(), check_pointer=False)
    for what, call in [
        ("DeviceArray needs a CUDA device", lambda: cai.DeviceArray(np.zeros(3))),
        ("cannot ask the CUDA driver about ptr = 0x1", lambda: cai.pointer_attributes(1)),
        (f"cannot export `data` = {PTR:#x} through DLPack", lambda: cai.from_dlpack(m())),
        (f"cannot export `data` = {PTR:#x} through DLPack", lambda: m().__dlpack__()),
        (f"cannot export `data` = {PTR:#x} through DLPack", v.__dlpack_device__),
        ("cannot copy the array to the host", v.copy_to_host),
    ]:
        with pytest.raises(RuntimeError, match=f"^{re.escape(what)}.*: {NO_DRIVER}"):
            call()
