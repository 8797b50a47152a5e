"""cai's device arrays against software nobody here wrote, with no GPU: NVIDIA's cuda.core
(`StridedMemoryView`, `Buffer`, its copies and streams) and numba-cuda (`as_cuda_array`,
`DeviceNDArray`, copies; no kernels), both talking to the emulated CUDA driver through
cuda.bindings (scripts/peers.sh runs this module; scripts/test.sh calls it).

What this proves: the consumers and producers read and write the same memory cai describes
(pointer, shape, strides, dtype, device, read-only flag, the bytes through their own copies),
and their stream handshakes and cai's order the work (the emulator's streams run work only when
something must observe it, so an unordered read is stale every time, and each handshake test
has its control). What it cannot: kernels, timing, and a real GPU's behaviour (the GPU suite).
"""

import gc
import os
import sys

import numpy as np
import pytest

import cai
import cai.examples

core = pytest.importorskip("cuda.core")
from cuda.core import Buffer, Device, LegacyPinnedMemoryResource  # noqa: E402
from cuda.core.utils import StridedMemoryView  # noqa: E402

nc = pytest.importorskip("numba.cuda")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import dlpack_exchange as dx  # noqa: E402 (the exchange-table toolkit of tests/python)

DTYPES = [np.float32, np.float64, np.int16, np.uint8, np.complex64, np.float16]


@pytest.fixture(scope="module")
def device():
    d = Device(0)
    d.set_current()
    return d


def test_the_emulated_device_is_an_h100_to_cuda_core(device):
    assert device.compute_capability == (9, 0)
    p = device.properties
    assert (p.multiprocessor_count, p.warp_size, p.l2_cache_size) == (132, 32, 50 << 20)
    assert not p.memory_pools_supported and p.unified_addressing
    # One UUID per device (cuDeviceGetUuid), the device count from the driver (not NVML).
    devices = Device.get_all_devices()
    assert len(devices) == int(os.environ.get("CUDA_EMU_DEVICES", "1"))
    assert len({str(d.uuid) for d in devices}) == len(devices)
    device.set_current()


def host_bytes(device, ptr, nbytes, stream):
    """`nbytes` at device address `ptr`, read back through cuda.core's own copy, on `stream`,
    into pinned memory (then read as a NumPy array through its DLPack)."""
    pinned = LegacyPinnedMemoryResource().allocate(max(nbytes, 1))
    Buffer.from_handle(ptr, max(nbytes, 1)).copy_to(pinned, stream=stream)
    stream.sync()
    return np.from_dlpack(pinned).view(np.uint8)[:nbytes].tobytes()


def layouts():
    """(name, make) for cai arrays of several layouts: C, F, strided, negative strides."""
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    yield "C", lambda: cai.DeviceArray(host)
    yield "F", lambda: cai.DeviceArray(host, order="F")
    yield "strided", lambda: cai.DeviceArray(host).view((2, 3), strides=(48, 8), offset=4)
    yield "negative", lambda: cai.DeviceArray(host).view((4, 3), strides=(24, -8), offset=20)
    yield "storage", lambda: cai.full((3, 5), 2.5, device="gpu", managed=None)


# --- cuda.core as consumer ---------------------------------------------------------------------


def item_strides(shape, strides):
    """Strides in items, C order where the view says None."""
    if strides is not None:
        return tuple(strides)
    out, n = [], 1
    for dim in reversed(shape):
        out.insert(0, n)
        n *= max(dim, 1)
    return tuple(out)


@pytest.mark.parametrize("how", ["from_cuda_array_interface", "from_dlpack", "from_any_interface"])
@pytest.mark.parametrize("name,make", list(layouts()))
def test_strided_memory_view_reads_what_cai_describes(device, how, name, make):
    a = make()
    s = device.create_stream()
    v = getattr(StridedMemoryView, how)(a, stream_ptr=int(s.handle))
    d = a.__cuda_array_interface__
    assert v.ptr == d["data"][0]
    assert v.shape == tuple(d["shape"])
    assert v.dtype == np.dtype(d["typestr"])
    itemsize = v.dtype.itemsize
    # cuda.core's strides (in items; None only for C order) against cai's (bytes; None for C).
    ours = item_strides(v.shape, None if d["strides"] is None else [b // itemsize for b in d["strides"]])
    theirs = item_strides(v.shape, v.strides)
    assert theirs == ours, (v.strides, d["strides"])
    assert v.device_id == 0 and v.is_device_accessible and not v.readonly
    # The items as cuda.core lays them out (its pointer, shape and strides), read through its
    # own copy, equal the items cai reads through its descriptor.
    byte_strides = [st * itemsize for st in theirs]
    lo = sum((n - 1) * st for n, st in zip(v.shape, byte_strides) if st < 0)
    hi = sum((n - 1) * st for n, st in zip(v.shape, byte_strides) if st > 0) + itemsize
    span = host_bytes(device, v.ptr + lo, hi - lo, s)
    got = np.ndarray(v.shape, dtype=v.dtype, buffer=span, offset=-lo, strides=byte_strides)
    mine = np.frombuffer(cai.as_cuda_array(a).copy_to_host(), dtype=v.dtype)
    assert (got.ravel() == mine).all(), name


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_reads_back_equal(device, dtype):
    host = (np.arange(10) % 7).astype(dtype)
    a = cai.DeviceArray(host)
    s = device.create_stream()
    v = StridedMemoryView.from_dlpack(a, stream_ptr=int(s.handle))
    assert v.dtype == np.dtype(dtype) and v.shape == (10,)
    assert host_bytes(device, v.ptr, host.nbytes, s) == host.tobytes()


def test_a_read_only_storage_is_read_only_to_cuda_core(device):
    x = cai.ones((4,), device="gpu", managed=None)
    ro = cai.from_cuda_array_interface(dict(x.__cuda_array_interface__, data=(x.__cuda_array_interface__["data"][0], True)), owner=x)
    v = StridedMemoryView.from_cuda_array_interface(ro, stream_ptr=-1)
    assert v.readonly
    w = StridedMemoryView.from_dlpack(ro, stream_ptr=-1)
    assert w.readonly


@pytest.mark.parametrize("side", [False, True])
@pytest.mark.parametrize("how", ["from_cuda_array_interface", "from_dlpack"])
def test_cuda_core_waits_for_cais_pending_work(device, how, side):
    consumer = device.create_stream()
    for value in (5, 6):
        a = cai.DeviceArray(np.zeros(1 << 16, dtype=np.uint8), non_blocking=True)
        # Pending on a's exported stream, or on its side stream (which the export orders
        # before the exported one).
        a.fill(value, rounds=20, on_side_stream=side)
        v = getattr(StridedMemoryView, how)(a, stream_ptr=int(consumer.handle))
        got = host_bytes(device, v.ptr + (1 << 16) - 64, 64, consumer)
        assert got == bytes([value]) * 64
        a.synchronize()


@pytest.mark.parametrize("how", ["from_cuda_array_interface", "from_dlpack"])
def test_without_the_handshake_cuda_core_reads_stale_bytes(device, how):
    consumer = device.create_stream()
    a = cai.DeviceArray(np.zeros(1 << 16, dtype=np.uint8), non_blocking=True)
    a.fill(7, rounds=20)
    v = getattr(StridedMemoryView, how)(a, stream_ptr=-1)  # the consumer orders nothing
    assert host_bytes(device, v.ptr, 64, consumer) == bytes(64)
    a.synchronize()


# --- cuda.core as producer -----------------------------------------------------------------------


def test_cai_imports_cuda_core_buffers(device):
    s = device.create_stream()
    b = device.allocate(256, stream=s)
    b.fill(9, stream=s)
    # A Buffer knows no stream work was enqueued on it (its DLPack export orders nothing): its
    # user waits for their own fill.
    s.sync()
    v = cai.from_dlpack(b, stream=1)  # cuda.core's Buffer speaks DLPack
    assert v.ptr == int(b.handle) and v.shape == (256,) and v.typestr == "|i1"
    assert cai.from_dlpack(b).__dlpack_device__() == (2, 0)
    assert v.copy_to_host() == bytes([9]) * 256
    # Described by a dict cuda.core's user builds, with its stream: cai waits for it.
    b.fill(4, stream=s)
    desc = {"shape": (64,), "typestr": "<f4", "data": (int(b.handle), False), "version": 3, "stream": int(s.handle)}
    w = cai.from_cuda_array_interface(desc, owner=b)
    assert w.sync_plan == "event-wait"
    assert w.copy_to_host() == bytes([4]) * 256


@pytest.mark.parametrize(
    "fail, error",
    [
        # The Buffer is a temporary (`new()`), released as the error unwinds (a frame's local
        # would be kept by the traceback).
        (lambda new: float(cai.from_dlpack(new(), stream=1)), TypeError),
        (lambda new: cai.from_dlpack(new(), stream=1).__dlpack__(stream=0), ValueError),
        (lambda new: cai.as_storage(new()).transpose(5), ValueError),
    ],
    ids=["float(view)", "view.__dlpack__(stream=0)", "storage.transpose(5)"],
)
def test_a_cuda_core_buffer_dropped_while_the_users_error_is_raised_is_freed(device, monkeypatch, fail, error):
    """A temporary Buffer imported through DLPack (into a view, or a storage): its release, run
    while the user's error is being raised, frees the Buffer (cuda.core's deallocation runs
    Python code). Before, the error became a SystemError and the memory leaked ("mr.deallocate()
    failed during Buffer destruction"). (cuda.core 1.2.2 itself does the same in plain Python:
    `float(device.allocate(256))` raises that SystemError.)"""
    import gc
    import warnings

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(str(u.exc_value)))
    s = device.create_stream()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(error):
            fail(lambda: device.allocate(256, stream=s))
        gc.collect()
    assert reported == [] and [str(w.message) for w in caught] == []


def test_cai_imports_a_strided_memory_view(device):
    a = cai.DeviceArray(np.arange(12, dtype=np.int16).reshape(3, 4))
    v = StridedMemoryView.from_cuda_array_interface(a, stream_ptr=-1)
    w = cai.from_dlpack(v)  # a StridedMemoryView speaks DLPack (not the CUDA Array Interface)
    assert w.ptr == a.ptr and w.shape == (3, 4)
    assert np.frombuffer(w.copy_to_host(), dtype=np.int16).tolist() == list(range(12))


def test_cai_reads_a_strided_memory_view_through_its_table(device):
    # cuda.core 1.2's StridedMemoryView publishes DLPack's exchange table (all five functions);
    # its current_work_stream is NULL (cuda.core keeps no current stream): the legacy default
    # stream, which cai orders before the reader's stream.
    t = dx.read_table(StridedMemoryView)
    assert t.version == (1, 3) and all(t.functions.values())
    a = cai.DeviceArray(np.arange(12, dtype=np.int16).reshape(3, 4))
    a.synchronize()
    v = StridedMemoryView.from_cuda_array_interface(a, stream_ptr=-1)
    reader = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    w = cai.from_dlpack(v, stream=reader.stream)
    assert w.sync_plan == "event-wait"  # the table's way; __dlpack__ orders the stream itself
    assert w.ptr == a.ptr and w.shape == (3, 4)
    assert np.frombuffer(w.copy_to_host(), dtype=np.int16).tolist() == list(range(12))
    h = StridedMemoryView.from_dlpack(np.arange(6.0), stream_ptr=-1)
    np.testing.assert_array_equal(np.asarray(cai.from_dlpack(h)), np.arange(6.0))


def test_tensors_pass_between_cai_and_cuda_core_tables(device):
    a = cai.DeviceArray(np.arange(8, dtype=np.float32))
    a.synchronize()
    # cai's tensor to a StridedMemoryView (its managed_tensor_to_py_object_no_sync)...
    o = dx.call_to_py(StridedMemoryView, dx.call_from_py(type(a), a))
    assert isinstance(o, StridedMemoryView) and o.ptr == a.ptr and o.shape == (8,)
    assert host_bytes(device, o.ptr, 32, device.create_stream()) == np.arange(8, dtype=np.float32).tobytes()
    # ...and cuda.core's tensor to a cai view (cai's).
    m = dx.call_from_py(StridedMemoryView, o)
    x = dx.call_to_py(cai.CudaArrayView, m)
    assert isinstance(x, cai.CudaArrayView) and x.ptr == a.ptr
    assert x.copy_to_host() == np.arange(8, dtype=np.float32).tobytes()
    del o, x
    gc.collect()


# --- numba-cuda, both ways ---------------------------------------------------------------------


@pytest.mark.parametrize("name,make", list(layouts()))
def test_numba_reads_cai_arrays(name, make):
    a = make()
    d = nc.as_cuda_array(a)
    ours = cai.as_cuda_array(a)
    mine = np.frombuffer(ours.copy_to_host(), dtype=d.dtype).reshape(d.shape)
    if all(st >= 0 for st in d.strides):
        assert (d.copy_to_host() == mine).all(), name
    else:
        # numba-cuda 0.30 neither copies negative strides (NotImplementedError) nor indexes
        # them (IndexError; a reversing slice gives no items): what Numba understood is read
        # through the descriptor it exports for its view, back through cai.
        assert d.strides == ours.strides and d.shape == ours.shape
        again = np.frombuffer(cai.as_cuda_array(d).copy_to_host(), dtype=d.dtype)
        assert (again.reshape(d.shape) == mine).all(), name
    assert d.__cuda_array_interface__["data"][0] == a.__cuda_array_interface__["data"][0]


@pytest.mark.parametrize("sync", [True, False])
def test_numba_waits_for_cais_exported_stream(sync):
    if not sync and not os.environ.get("CUDA_EMU_DEVICES"):
        pytest.skip("the control needs the emulator, whose unordered reads are always stale")
    a = cai.DeviceArray(np.zeros(1 << 16, dtype=np.uint8), non_blocking=True)
    a.fill(3, on_side_stream=True, rounds=20)  # ordered before the exported stream on export
    d = nc.as_cuda_array(a, sync=sync)  # Numba synchronizes on the exported stream
    # Read on the legacy stream, which only Numba's wait orders (the array's own stream is the
    # exported one, which cai's export already ordered).
    fresh = (d.copy_to_host(stream=nc.default_stream())[-64:] == 3).all()
    assert fresh == sync
    a.synchronize()


def test_a_second_device_array_is_read_there():
    """With two devices: a cai array on device 1, read by cuda.core and Numba."""
    if int(os.environ.get("CUDA_EMU_DEVICES", "1")) < 2:
        pytest.skip("one device")
    host = np.arange(16, dtype=np.int32)
    a = cai.DeviceArray(host, device_id=1)
    assert a.__dlpack_device__() == (2, 1)
    d1 = Device(1)
    d1.set_current()
    try:
        s = d1.create_stream()
        v = StridedMemoryView.from_dlpack(a, stream_ptr=int(s.handle))
        assert v.device_id == 1
        assert host_bytes(d1, v.ptr, host.nbytes, s) == host.tobytes()
    finally:
        Device(0).set_current()
    with nc.gpus[1]:
        assert (nc.as_cuda_array(a).copy_to_host() == host).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_cai_reads_numba_arrays(dtype):
    host = (np.arange(30) % 11).astype(dtype).reshape(5, 6)
    d = nc.to_device(host)[1:, ::2]
    v = cai.as_cuda_array(d)
    assert v.shape == d.shape and v.strides == d.strides and v.ptr == d.device_ctypes_pointer.value
    got = np.frombuffer(v.copy_to_host(), dtype=dtype).reshape(d.shape)
    assert (got == d.copy_to_host()).all()


def test_cai_honours_numbas_stream():
    s = nc.stream()
    consumer = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    host = np.full(1 << 16, 8, dtype=np.uint8)
    d = nc.to_device(host, stream=s)  # enqueued on s, not yet run (emulator)
    desc = d.__cuda_array_interface__
    assert desc["stream"] == int(s.handle)
    v = cai.as_cuda_array(d, stream=consumer.stream)
    assert v.sync_plan == "event-wait"
    assert np.frombuffer(v.copy_to_host(), dtype=np.uint8)[-64:].tolist() == [8] * 64
    s.synchronize()
