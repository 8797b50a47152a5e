"""The CPU build wraps no device memory: `as_storage` and `storage(copy=False)` of data with a
device buffer (a `"gpu"` entry in `__gt_data_interface__`, `__cuda_array_interface__`,
`device_data=`) raise RuntimeError, as device requests (`zeros(..., device="gpu")`) do.

Such a storage could never copy between its sides on this build: its mirror would do nothing
(host reads stale after `set_device_modified()`), its copy would lose the device, pickling
would fail. The device pointer is never dereferenced here, so any address will do. The CUDA
build's wraps are in tests/gpu/.
"""

import numpy as np
import pytest

import cai

pytestmark = pytest.mark.skipif(cai.HAS_CUDA, reason="CPU build only: the CUDA build wraps device memory")

PTR = 0x7F0000000000
NO_CUDA = "no CUDA support"


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
    with pytest.raises(RuntimeError) as e:
        cai.zeros((2, 3), device="gpu")
    assert NO_CUDA in str(e.value)
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
    with pytest.raises(RuntimeError, match=NO_CUDA):
        MIRRORS[wrap](**kw)


@pytest.mark.parametrize("wrap", DEVICE_ONLY)
def test_device_only_data_is_refused(wrap):
    with pytest.raises(RuntimeError, match=NO_CUDA):
        DEVICE_ONLY[wrap]()


@pytest.mark.parametrize("wrap", [*MIRRORS, *DEVICE_ONLY])
def test_the_refusal_gives_a_device_requests_reason(wrap):
    # One reason for both: "this build of cai has no CUDA support; install the CUDA build of
    # the package ...", after what was asked for.
    reason = device_request_message().split(": ", 1)[1]
    with pytest.raises(RuntimeError) as e:
        (MIRRORS.get(wrap) or DEVICE_ONLY[wrap])()
    assert reason in str(e.value), (str(e.value), reason)


def test_the_host_data_alone_still_wraps():
    # Refusing the device entry leaves host-only wraps as they were: the same producer's host
    # array, and a producer with only a host entry, are wrapped without a copy.
    producer, a = host_and_gpu()
    with pytest.raises(RuntimeError, match=NO_CUDA):
        cai.as_storage(producer)
    s = cai.as_storage(a)
    assert type(s) is cai.CPUStorage
    s[0, 0] = 9.0
    assert a[0, 0] == 9.0
