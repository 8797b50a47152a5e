"""cai's own device code, with no other GPU library: DeviceArray (a Rust-owned cust buffer) as
producer, our import as consumer, device storages and their mirror.

These run on a GPU and, in CI, on the emulated driver (scripts/cuda-stub.sh --emulator), whose
streams run work only when something must observe it: a consumer that does not wait for the
producer reads stale bytes there every time.
"""

import gc
import os
import pickle
import threading

import numpy as np
import pytest

import cai
import cai.examples

from conftest import sample, second_device

DTYPES = [np.float32, np.float64, np.int16, np.uint8, np.complex64, np.float16]


def device_items(obj, dtype, shape, **kw):
    """The items of a device array, read back through our import."""
    v = cai.as_cuda_array(obj, **kw)
    return np.frombuffer(v.copy_to_host(), dtype=dtype).reshape(shape)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_device_array_round_trip(dtype, order):
    host = sample(dtype)
    a = cai.DeviceArray(host, order=order)
    desc = a.__cuda_array_interface__
    assert desc["version"] == 3 and desc["typestr"] == host.dtype.str
    assert desc["shape"] == host.shape and desc["data"] == (a.ptr, False)
    itemsize = host.dtype.itemsize
    assert desc["strides"] == (None if order == "C" else (itemsize, itemsize * host.shape[0]))
    assert desc["stream"] == a.stream and a.stream not in (0, 1, 2)
    assert a.to_bytes() == host.tobytes()
    assert (device_items(a, dtype, host.shape) == host).all()


def test_strided_and_offset_views():
    host = np.arange(60, dtype=np.int32).reshape(6, 10)
    a = cai.DeviceArray(host)
    # every other row, columns 3..7: offset 3 items, strides (2 rows, 1 item)
    v = a.view((3, 4), strides=(80, 4), offset=12)
    expected = host[::2, 3:7]
    assert v.to_bytes() == expected.tobytes()
    assert (device_items(v, np.int32, (3, 4)) == expected).all()
    # a negative stride: the last row, backwards
    r = a.view((10,), strides=(-4,), offset=4 * 59)
    assert (device_items(r, np.int32, (10,)) == host[5, ::-1]).all()
    with pytest.raises(ValueError, match="strides|buffer|extent"):
        a.view((7, 10))


def test_int_arguments_out_of_range_name_the_argument_and_the_value():
    a = cai.DeviceArray(np.zeros(8, dtype=np.uint8))
    for call, message in [
        (lambda: a.view((-1,)), "shape: -1 must be a non-negative int"),
        (lambda: a.view((2,), strides=(2**63,)), f"strides: {2**63} is too large"),
        (lambda: a.view((2,), offset=-3), "offset: -3 must be a non-negative int"),
        (lambda: a.fill(256), "value: 256 is too large \\(at most 255\\)"),
        (lambda: a.fill(-1), "value: -1 must be a non-negative int"),
        # A count that would queue memsets for hours is refused, and so is a count of zero.
        (lambda: a.fill(1, rounds=2**40), f"rounds: {2**40} is too large \\(at most 65536\\)"),
        (lambda: a.fill(1, rounds=0), "rounds: 0 must be at least 1"),
    ]:
        with pytest.raises(ValueError, match=f"^{message}"):
            call()
    a.fill(3, rounds=np.int64(2))
    assert a.to_bytes() == bytes([3] * 8)
    assert a.view(np.int8(4), strides=None, offset=np.uint8(2)).to_bytes() == bytes([3] * 4)


@pytest.mark.parametrize("non_blocking", [False, True])
def test_side_stream_work_is_ordered_before_the_exported_stream(non_blocking):
    a = cai.DeviceArray(np.zeros(1 << 20, dtype=np.uint8), non_blocking=non_blocking)
    # Another stream to read on.
    consumer = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=non_blocking)
    for value in (7, 9):
        a.fill(value, on_side_stream=True, rounds=20)
        assert a.pending_streams == [a.side_stream]
        desc = a.__cuda_array_interface__  # events on the side stream; the export waits
        assert a.pending_streams == [] and desc["stream"] == a.stream
        v = cai.from_cuda_array_interface(desc, owner=a, stream=consumer.stream)
        assert v.sync_plan == "event-wait" and v.consumer_stream == consumer.stream
        tail = np.frombuffer(v.copy_to_host(), dtype=np.uint8)[-64:]
        assert (tail == value).all(), tail
    a.synchronize()


@pytest.mark.parametrize("non_blocking", [False, True])
@pytest.mark.parametrize("mode", ["enqueue", "synchronize"])
def test_import_orders_the_consumer_after_the_producer(mode, non_blocking):
    a = cai.DeviceArray(np.zeros(1 << 20, dtype=np.uint8), non_blocking=non_blocking)
    consumer = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=non_blocking)
    a.fill(5, rounds=20)  # on the exported stream
    v = cai.from_cuda_array_interface(
        a.__cuda_array_interface__, owner=a, stream=consumer.stream, mode=mode
    )
    assert v.sync_plan == ("event-wait" if mode == "enqueue" else "synchronize")
    assert (np.frombuffer(v.copy_to_host(), dtype=np.uint8)[-64:] == 5).all()


@pytest.mark.parametrize("non_blocking", [False, True])
@pytest.mark.parametrize("mode", ["enqueue", "synchronize"])
def test_release_orders_the_producer_after_the_consumer(mode, non_blocking):
    # The producer, and the consumer on its own stream.
    a = cai.DeviceArray(np.zeros(1 << 20, dtype=np.uint8), non_blocking=non_blocking)
    b = cai.DeviceArray(np.zeros(1 << 20, dtype=np.uint8), non_blocking=non_blocking)
    for value in (5, 6):
        a.fill(value)
        with cai.as_cuda_array(a, stream=b.stream, mode=mode) as v:
            b.copy_from(v)  # enqueued on the consumer's stream; returns at once
        assert v.release() == "event-wait"  # again: harmless
        a.fill(9, rounds=20)  # the producer's next write, after the consumer's read
        a.synchronize()
        assert (np.frombuffer(b.to_bytes(), dtype=np.uint8)[-64:] == value).all()


@pytest.mark.parametrize("mode", ["enqueue", "synchronize"])
def test_gt_data_release_orders_the_producer_after_the_consumer(mode):
    # A GDP-3 consumer on its own stream calls the entry's `release` when done, and knows
    # nothing of CudaArrayView.release(): GtDataView.release("gpu") does that first.
    a = cai.DeviceArray(np.zeros(1 << 20, dtype=np.uint8))
    b = cai.DeviceArray(np.zeros(1 << 20, dtype=np.uint8))
    calls = []

    class Producer:
        @property
        def __gt_data_interface__(self):
            return {"gpu": dict(a.__cuda_array_interface__, release=lambda: calls.append("release"))}

    for value in (5, 6):
        a.fill(value)
        d = cai.gt_data(Producer(), stream=b.stream, mode=mode)
        assert d.gpu.consumer_stream == b.stream
        assert d.gpu.sync_plan == ("event-wait" if mode == "enqueue" else "synchronize")
        b.copy_from(d.gpu)  # enqueued on the consumer's stream
        d.release()  # the host entry: there is none, and the device view stays unreleased
        d.release("gpu")
        a.fill(9, rounds=20)  # the producer's next write, after the consumer's read
        a.synchronize()
        assert (np.frombuffer(b.to_bytes(), dtype=np.uint8)[-64:] == value).all()
    assert calls == ["release", "release"]  # the producer's hook, once per release("gpu")


@pytest.mark.skipif(
    not os.environ.get("CAI_GPU_SUITE_EMULATED"),
    reason="on a GPU the unreleased read races the producer's write; the emulator loses every time",
)
def test_the_emulator_shows_an_unreleased_read_overtaken():
    a = cai.DeviceArray(np.zeros(1 << 10, dtype=np.uint8))
    b = cai.DeviceArray(np.zeros(1 << 10, dtype=np.uint8))
    a.fill(5)
    v = cai.as_cuda_array(a, stream=b.stream)
    b.copy_from(v)
    a.fill(9)
    a.synchronize()
    assert (np.frombuffer(b.to_bytes(), dtype=np.uint8) == 9).all()
    v.release()


def test_non_blocking_device_arrays_export_their_own_streams():
    a = cai.DeviceArray(np.zeros(1 << 10, dtype=np.uint8), non_blocking=True)
    assert a.__cuda_array_interface__["stream"] == a.stream not in (1, 2)
    assert a.side_stream not in (1, 2, a.stream)


@pytest.mark.skipif(
    not os.environ.get("CAI_GPU_SUITE_EMULATED"),
    reason="on a GPU an unordered read races; the emulator runs work only when it must",
)
@pytest.mark.parametrize("non_blocking", [False, True])
def test_only_blocking_streams_follow_the_legacy_default_stream(non_blocking):
    b = cai.DeviceArray(np.zeros(1 << 10, dtype=np.uint8))  # the producer, a blocking stream
    reader = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=non_blocking)
    b.fill(3)
    # Consumer stream 1: the legacy default stream now waits for b's fill (not yet run).
    assert cai.as_cuda_array(b).sync_plan == "event-wait"
    # A read with no ordering of its own: a blocking stream follows the legacy one and sees
    # the fill; a non-blocking one does not (it reads the old bytes, here every time).
    v = cai.as_cuda_array(b, stream=reader.stream, sync=False)
    got = np.frombuffer(v.copy_to_host(), dtype=np.uint8)
    assert (got == (0 if non_blocking else 3)).all(), got
    b.synchronize()


def test_a_wrapped_device_array_has_no_pending_work_for_a_non_blocking_reader():
    dev = cai.DeviceArray(np.zeros(1 << 20, dtype=np.uint8), non_blocking=True)
    reader = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    dev.fill(7, rounds=20)  # pending on dev's stream when wrapped
    d = cai.as_storage(device_data=dev)
    # The storage says nothing is pending, so the reader does not wait: the wrap waited.
    assert d.__cuda_array_interface__["stream"] is None
    v = cai.as_cuda_array(d, stream=reader.stream)
    assert v.sync_plan == "none: no stream"
    assert (np.frombuffer(v.copy_to_host(), dtype=np.uint8)[-64:] == 7).all()


def test_copy_from_refuses_a_source_of_another_size_or_layout():
    a = cai.DeviceArray(np.zeros((4, 4), dtype=np.float32))
    b = cai.DeviceArray(np.zeros(16, dtype=np.float32))
    with pytest.raises(ValueError, match=r"must be C-contiguous with 64 bytes .* shape \[4, 2\], strides \[16, 4\], 32 bytes"):
        b.copy_from(cai.as_cuda_array(a.view((4, 2), (16, 4))))
    with pytest.raises(ValueError, match=r"shape \[2, 2\], strides \[8, 4\], 16 bytes"):
        b.copy_from(cai.as_cuda_array(a.view((2, 2))))
    with pytest.raises(ValueError, match=r"shape \[4, 4\], strides \[4, 16\], 64 bytes"):
        b.copy_from(cai.as_cuda_array(a.view((4, 4), (4, 16))))  # F order
    a = cai.DeviceArray(np.arange(16, dtype=np.float32).reshape(4, 4))
    with cai.as_cuda_array(a, stream=b.stream) as v:
        b.copy_from(v)
    assert b.to_bytes() == a.to_bytes()


def test_a_freed_pointer_is_refused():
    a = cai.DeviceArray(np.zeros(256, dtype=np.float32))
    desc = dict(a.__cuda_array_interface__, stream=None)
    ptr = a.ptr
    assert cai.pointer_attributes(ptr)["memory_type"] == "device"
    del a
    gc.collect()
    attrs = cai.pointer_attributes(ptr)
    if attrs["memory_type"] != "unregistered":
        pytest.skip("the driver reused the freed address already")
    with pytest.raises(ValueError, match=rf"`data` = {ptr:#x} is not device-accessible"):
        cai.from_cuda_array_interface(desc)


def test_empty_device_arrays_fill_and_copy_nothing():
    # Their address is null: a fill or copy of no bytes must not reach the driver with it.
    a = cai.DeviceArray(np.zeros(0, dtype=np.float32))
    a.fill(1)
    a.fill(1, on_side_stream=True)
    a.synchronize()
    assert a.to_bytes() == b"" and cai.as_cuda_array(a).copy_to_host() == b""


def test_copies_too_big_for_host_memory_are_memory_errors():
    # A broadcast view repeats one item 2**59 times: its 2**62 bytes fit no host. Gathering
    # them, from our own view or an imported one, is a MemoryError naming the bytes.
    a = cai.DeviceArray(np.zeros(1, dtype=np.float64))
    v = a.view((2**59,), (0,))
    message = f"cannot allocate {2**62} bytes of host memory"
    with pytest.raises(MemoryError, match=message):
        v.to_bytes()
    with pytest.raises(MemoryError, match=message):
        cai.as_cuda_array(v).copy_to_host()


@pytest.mark.parametrize("make", ["device_array", "storage"])
def test_memory_dropped_on_a_thread_without_a_context_is_freed(make):
    if make == "device_array":
        obj = cai.DeviceArray(np.zeros(1024, dtype=np.float32))
        ptr = obj.ptr
    else:
        obj = cai.zeros((1024,), device="gpu", managed=None)
        ptr = obj.__cuda_array_interface__["data"][0]
    holder = [obj]
    del obj
    t = threading.Thread(target=holder.clear)  # the last reference dies there
    t.start()
    t.join()
    gc.collect()
    assert cai.pointer_attributes(ptr)["memory_type"] == "unregistered"


@pytest.mark.skipif(
    not os.environ.get("CAI_GPU_SUITE_EMULATED"),
    reason="a dead stream handle is undefined behaviour on a real driver; the emulator reports it",
)
def test_a_dead_stream_handle_is_a_value_error_naming_the_stream():
    a = cai.DeviceArray(np.zeros(4, dtype=np.float32))
    desc = dict(a.__cuda_array_interface__, stream=0x1234)
    with pytest.raises(
        ValueError,
        match=r"cannot order the consumer's stream 1 after the producer's `stream` = 4660: "
        r"cuStreamGetCtx failed: CUDA_ERROR_INVALID_HANDLE",
    ):
        cai.from_cuda_array_interface(desc, owner=a)
    with pytest.raises(ValueError, match=r"cannot synchronize the producer's `stream` = 4660"):
        cai.from_cuda_array_interface(desc, owner=a, mode="synchronize")
    with pytest.raises(ValueError, match=rf"consumer's stream 2457 after the producer's `stream` = {a.stream}"):
        cai.from_cuda_array_interface(a.__cuda_array_interface__, owner=a, stream=0x999)
    # With sync=False the import uses no stream; the copy is the first to, and names it.
    v = cai.from_cuda_array_interface(a.__cuda_array_interface__, owner=a, sync=False, stream=0x999)
    with pytest.raises(
        ValueError,
        match=r"cannot copy on the consumer's stream 2457: cuMemcpyDtoHAsync failed: CUDA_ERROR_INVALID_HANDLE",
    ):
        v.copy_to_host()


def test_pointer_attributes_of_device_and_managed_memory():
    a = cai.DeviceArray(np.zeros(64, dtype=np.float64))
    attrs = cai.pointer_attributes(a.ptr + 8)
    assert attrs["memory_type"] == "device" and attrs["device_ordinal"] == 0
    assert attrs["device_accessible"] and not attrs["host_accessible"]
    start, size = attrs["range"]
    assert start == a.ptr and size >= a.nbytes
    s = cai.zeros((16,), device="gpu", managed="cuda")
    attrs = cai.pointer_attributes(s.__cuda_array_interface__["data"][0])
    assert attrs["memory_type"] == "managed" and attrs["is_managed"] and attrs["host_accessible"]


def test_device_only_storage():
    s = cai.full((4, 6), 2.0, device="gpu", managed=None, alignment_size=64, halo=(1, 0))
    assert s.device == "gpu" and s.managed is None and not hasattr(s, "__array_interface__")
    assert not hasattr(s, "__array_struct__")
    assert type(s) is cai.GPUStorage and isinstance(s, cai.Storage)  # GDP-3's storage type
    assert (device_items(s, np.float64, (4, 6)) == 2.0).all()
    assert s.domain_view.__cuda_array_interface__["data"][0] % 64 == 0
    with pytest.raises(cai.GTNoSuchBufferError):
        s.to_numpy()
    c = s.T.copy()
    assert c.shape == (6, 4) and type(c) is cai.GPUStorage
    assert c.__cuda_array_interface__["data"][0] != s.__cuda_array_interface__["data"][0]
    assert (device_items(c, np.float64, (6, 4)) == 2.0).all()


def test_gt4py_mirror_copies_when_the_other_side_changed():
    s = cai.zeros((3, 5), device="gpu")  # managed defaults to "gt4py"
    assert s.managed == "gt4py" and s.sync_state.state == cai.SyncState.SYNC_CLEAN
    assert type(s) is cai.SoftwareManagedGPUStorage and cai.GT4PySyncedGPUStorage is type(s)
    s.to_numpy()[...] = 4.0
    s.set_host_modified()
    # Exporting the device side copies the host first.
    assert (device_items(s, np.float64, (3, 5)) == 4.0).all()
    assert s.sync_state.state == cai.SyncState.SYNC_CLEAN
    # A device write, marked: reading the host copies it back. (Writing a device value with
    # s[i] = ... goes through CuPy: tests/gpu/test_storage.py.)
    s.to_numpy()[0, 0] = -1.0  # host-only write: lost, the device side is the newer
    s.set_device_modified()
    assert s.sync_state.state == cai.SyncState.SYNC_DEVICE_DIRTY
    # (NumPy reads the host side through __array_struct__, which copies first as the dict does)
    assert (s.to_numpy() == 4.0).all() and s.sync_state.state == cai.SyncState.SYNC_CLEAN
    s[0, 1] = 8.0
    assert s.sync_state.state == cai.SyncState.SYNC_HOST_DIRTY
    assert device_items(s, np.float64, (3, 5))[0, 1] == 8.0
    v = s[1:]  # views share the state, and are of the storage's type
    assert type(v) is type(s.domain_view) is type(s.copy()) is cai.SoftwareManagedGPUStorage
    v.set_device_modified()
    assert s.sync_state.state == cai.SyncState.SYNC_DEVICE_DIRTY
    s.synchronize()
    assert s.sync_state.state == cai.SyncState.SYNC_CLEAN
    c = s.copy()
    c.set_host_modified()
    assert s.sync_state.state == cai.SyncState.SYNC_CLEAN
    assert (device_items(c, np.float64, (3, 5)) == device_items(s, np.float64, (3, 5))).all()


def test_cuda_managed_storage_is_one_address():
    s = cai.ones((8,), device="gpu", managed="cuda")
    assert type(s) is type(s[2:]) is cai.CUDAManagedGPUStorage is cai.CUDASyncedGPUStorage
    assert repr(s).startswith("CUDAManagedGPUStorage(shape=(8,), dtype=float64")
    assert s.__array_interface__["data"][0] == s.__cuda_array_interface__["data"][0]
    s.to_numpy()[...] = 3.0
    assert (device_items(s, np.float64, (8,)) == 3.0).all()


def test_storages_wrap_and_copy_device_arrays():
    host = np.arange(6.0).reshape(2, 3)
    dev = cai.DeviceArray(host)
    s = cai.as_storage(host, dev, sync_state=cai.SyncState(cai.SyncState.SYNC_HOST_DIRTY))
    assert s.managed == "gt4py" and type(s) is cai.SoftwareManagedGPUStorage
    host[0, 0] = 42.0
    # The host side was newest: reading the device copies it into dev's own memory.
    assert device_items(s, np.float64, (2, 3))[0, 0] == 42.0
    assert np.frombuffer(dev.to_bytes(), dtype=np.float64)[0] == 42.0
    # A device write to dev, marked: reading the host copies it.
    dev.fill(0, rounds=20)
    s.set_device_modified()
    assert (s.to_numpy() == 0.0).all()
    # A device-only wrap, and its copy: own memory, same items. (storage(dev), which converts
    # through CuPy, is in tests/gpu/test_storage.py.)
    d = cai.as_storage(device_data=dev)
    assert d.device == "gpu" and d.managed is None and type(d) is cai.GPUStorage
    assert d.__cuda_array_interface__["data"][0] == dev.ptr
    c = d.copy()
    assert c.__cuda_array_interface__["data"][0] != dev.ptr
    assert (device_items(c, np.float64, (2, 3)) == 0.0).all()


def test_storage_copies_a_host_and_device_pair_from_the_newer():
    host = np.arange(6.0).reshape(2, 3)
    dev = cai.DeviceArray(host * 10)
    for state in (None, cai.SyncState(), cai.SyncState(cai.SyncState.SYNC_HOST_DIRTY)):
        # GDP-3: sync_state says which is up to date; here the host (the default), so the
        # copy is made from it, into a host and device mirror as as_storage(host, dev) is.
        s = cai.storage(host, dev, sync_state=state)
        assert type(s) is cai.SoftwareManagedGPUStorage and s.managed == "gt4py"
        assert (s.to_numpy() == host).all()
        assert (device_items(s, np.float64, (2, 3)) == host).all()
        assert s.__cuda_array_interface__["data"][0] != dev.ptr
    # Neither input was touched (wrapping would have copied the newer over the other).
    assert (host == np.arange(6.0).reshape(2, 3)).all()
    assert (np.frombuffer(dev.to_bytes(), dtype=np.float64) == np.arange(6.0) * 10).all()
    # (The copy from the device side, sync_state=SYNC_DEVICE_DIRTY, goes through CuPy:
    # tests/gpu/test_storage.py.)
    for other in (cai.DeviceArray(host.T.copy()), cai.DeviceArray(host.astype(np.float32))):
        with pytest.raises(ValueError, match="^data and device_data must be two copies of one array"):
            cai.storage(host, other)


def test_gt_data_interface_hooks_move_the_data():
    s = cai.zeros((2, 4), device="gpu", dims="IJ")  # mirrored
    d = cai.gt_data(s)
    assert d.from_gt and d.dims == ["I", "J"] and d.host is not None and d.gpu is not None
    s.to_numpy()[...] = 6.0
    d.touch()  # the host was written: its `touch` marks it
    assert s.sync_state.state == cai.SyncState.SYNC_HOST_DIRTY
    d.acquire("gpu")  # the device entry's `acquire` copies the host to the device
    assert s.sync_state.state == cai.SyncState.SYNC_CLEAN
    assert (np.frombuffer(d.gpu.copy_to_host(), dtype=np.float64) == 6.0).all()
    d.touch("gpu")
    assert s.sync_state.state == cai.SyncState.SYNC_DEVICE_DIRTY
    d.acquire()  # and the host entry's copies it back
    assert s.sync_state.state == cai.SyncState.SYNC_CLEAN


def test_mirrored_and_unified_storages_pickle_by_value():
    import pickle

    items = np.arange(12.0).reshape(3, 4)
    for managed in ("gt4py", "cuda"):
        s = cai.zeros((3, 4), device="gpu", managed=managed, halo=(1, 0), alignment_size=32)
        s.to_numpy()[...] = items
        s.set_host_modified()
        c = pickle.loads(pickle.dumps(s))
        assert type(c) is type(s) and (c.managed, c.halo, c.alignment_size) == (managed, s.halo, 32)
        assert c.__cuda_array_interface__["data"][0] != s.__cuda_array_interface__["data"][0]
        assert (device_items(c, np.float64, (3, 4)) == items).all()
    # The newer side is what goes: here the device's, written behind the host's back.
    host = items.copy()
    dev = cai.DeviceArray(host)
    s = cai.as_storage(host, dev)
    dev.fill(0, rounds=20)
    s.set_device_modified()
    c = pickle.loads(pickle.dumps(s))
    assert (c.to_numpy() == 0.0).all() and (device_items(c, np.float64, (3, 4)) == 0.0).all()


def test_array_of_a_mirrored_or_unified_storage_is_the_host_view():
    # GDP-3: __array__ is a NumPy view wherever there is a host buffer (to_ndarray, by
    # contrast, gives the device's: tests/gpu/test_storage.py).
    for managed in ("gt4py", "cuda"):
        s = cai.full((2, 3), 5.0, device="gpu", managed=managed)
        a = s.__array__()
        assert isinstance(a, np.ndarray) and (a == 5.0).all()
        assert a.__array_interface__["data"][0] == s.__array_interface__["data"][0]
        assert isinstance(s.__array__("f4", copy=True), np.ndarray)


def test_an_array_on_another_device_is_there_and_imports_from_the_current_one():
    """Every device: an array on device 1, made while device 0 is current, says so in its
    pointer attributes; imported from device 0, its producer's stream orders the read."""
    dev = second_device()
    assert cai.DeviceArray(np.zeros(1)).device_id == 0, "the current device"
    host = np.arange(64, dtype=np.uint8)
    a = cai.DeviceArray(host, device_id=dev)
    assert a.device_id == dev and a.view((8,)).device_id == dev
    assert cai.pointer_attributes(a.ptr)["device_ordinal"] == dev
    # Work pending on device 1's stream, then an import from device 0 with the default sync:
    # the read sees the fill (the emulator runs the fill only when something waits for it).
    a.fill(7, rounds=3)
    assert (device_items(a, np.uint8, (64,)) == 7).all()
    assert a.to_bytes() == bytes([7]) * 64
    a.synchronize()


def test_a_device_past_the_last_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"device_id = 99: no such device \(this machine has \d CUDA devices\)"):
        cai.DeviceArray(np.zeros(1), device_id=99)
    with pytest.raises((TypeError, ValueError), match="device_id"):
        cai.DeviceArray(np.zeros(1), device_id=-1)


def test_an_import_is_used_on_its_consumer_device_from_any_thread():
    """An import made on a thread with no current context (the data's device then stands for
    the consumer's) and read on a thread where another device is current: the read runs on the
    stream the import ordered, on the import's device, and sees the producer's work."""
    dev = second_device()
    a = cai.DeviceArray(np.zeros(64, dtype=np.uint8), device_id=dev)
    cai.DeviceArray(np.zeros(1))  # device 0 current on this thread from here on
    a.fill(9, rounds=2)
    views = []
    t = threading.Thread(target=lambda: views.append(cai.as_cuda_array(a)))
    t.start()
    t.join()
    (v,) = views
    assert v.sync_plan == "event-wait"
    assert np.frombuffer(v.copy_to_host(), dtype=np.uint8).tolist() == [9] * 64
    v.release()


def test_a_view_says_its_device():
    dev = second_device()
    assert cai.as_cuda_array(cai.DeviceArray(np.zeros(4))).device_id == 0
    v = cai.as_cuda_array(cai.DeviceArray(np.zeros(4), device_id=dev))
    assert v.device_id == dev == v.pointer_attributes["device_ordinal"]
    unchecked = cai.as_cuda_array(cai.DeviceArray(np.zeros(4)), check_pointer=False)
    assert unchecked.device_id is None


@pytest.mark.parametrize("managed", [None, "gt4py", "cuda"])
def test_a_storage_on_another_device_lives_copies_and_syncs_there(managed):
    """device="gpu:N" while device 0 is current: allocated, filled, mirrored, copied and
    synchronized on device N; a copy and a `_like` stay there; "gpu" is the current device."""
    dev = second_device()
    cai.DeviceArray(np.zeros(1))  # device 0 current on this thread
    assert cai.zeros((2,), device="gpu", managed=managed).device_id == 0
    s = cai.full((3, 5), 2.0, device=f"gpu:{dev}", managed=managed, halo=(1, 0))
    assert s.device == "gpu" and s.device_id == dev
    ptr = s.__cuda_array_interface__["data"][0]
    assert cai.pointer_attributes(ptr)["device_ordinal"] == dev
    assert (device_items(s, np.float64, (3, 5)) == 2.0).all()
    if managed is not None:
        s.to_numpy()[...] = 4.0
        s.set_host_modified()
        s.synchronize()
        assert (device_items(s, np.float64, (3, 5)) == 4.0).all()
    c = s.copy()
    want = 2.0 if managed is None else 4.0
    assert c.device_id == dev and (device_items(c, np.float64, (3, 5)) == want).all()
    assert cai.zeros_like(s).device_id == dev
    assert cai.zeros_like(s, device="gpu:0").device_id == 0
    assert cai.zeros_like(s, device="gpu").device_id == 0, '"gpu" is the current device'
    assert cai.zeros((1,), device="gpu:0", managed=managed).device_id == 0
    if managed is not None:  # (device-only storages pickle through CuPy)
        p = pickle.loads(pickle.dumps(s))
        assert p.device_id == dev and (p.to_numpy() == s.to_numpy()).all()


def test_wrapped_device_memory_keeps_its_device():
    dev = second_device()
    cai.DeviceArray(np.zeros(1))
    host = np.arange(12, dtype=np.float32)
    a = cai.DeviceArray(host, device_id=dev)
    s = cai.as_storage(device_data=a)
    assert s.device_id == dev
    m = cai.as_storage(np.zeros(12, dtype=np.float32), a)  # a gt4py mirror over device 1
    assert m.device_id == dev
    m.device_to_host(force=True)
    assert (m.to_numpy() == host).all()
    assert cai.as_storage(device_data=a, device=f"gpu:{dev}").device_id == dev
    with pytest.raises(ValueError, match=f'device = "gpu:0", but the device memory given is on device {dev}'):
        cai.as_storage(device_data=a, device="gpu:0")


def test_a_storage_on_a_device_past_the_last_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r'device = "gpu:99": no such device \(this machine has \d CUDA devices\)'):
        cai.zeros((2,), device="gpu:99")


def test_a_stream_of_another_device_is_refused_at_export():
    """A producer naming a stream of device 0 for data on device 1: no consumer could order
    that wait rightly, so the export says so (and a stream of the data's device is fine)."""
    dev = second_device()
    data = cai.DeviceArray(np.zeros(16, dtype=np.float32), device_id=dev)
    zero = cai.DeviceArray(np.zeros(1), non_blocking=True)  # its stream lives as long
    on_0 = zero.__cuda_array_interface__["stream"]
    on_dev = cai.DeviceArray(np.zeros(1), non_blocking=True, device_id=dev)
    m = cai.examples.DeviceMatrix(data.ptr, 4, 4, stream=on_0, owner=(data, zero))
    with pytest.raises(ValueError, match=f"is a stream of device 0, and the data .* is on device {dev}"):
        m.__cuda_array_interface__
    ok = cai.examples.DeviceMatrix(data.ptr, 4, 4, stream=on_dev.__cuda_array_interface__["stream"], owner=(data, on_dev))
    assert ok.__cuda_array_interface__["stream"] == on_dev.__cuda_array_interface__["stream"]
    legacy = cai.examples.DeviceMatrix(data.ptr, 4, 4, stream=1, owner=data)
    assert legacy.__cuda_array_interface__["stream"] == 1


def test_a_stream_of_another_device_is_refused_from_a_thread_with_no_context():
    """The stream's own context answers for it (the emulator used to need one current, and the
    refusal was skipped). A handle cai did not make is exported as given: the driver is not
    asked about a handle that may not be a live stream."""
    dev = second_device()
    data = cai.DeviceArray(np.zeros(16, dtype=np.float32), device_id=dev)
    zero = cai.DeviceArray(np.zeros(1), non_blocking=True, device_id=0)
    s0 = zero.__cuda_array_interface__["stream"]
    errors = []

    def export():
        try:
            cai.examples.DeviceMatrix(data.ptr, 2, 8, stream=s0, owner=(data, zero)).__cuda_array_interface__
        except ValueError as e:
            errors.append(str(e))

    t = threading.Thread(target=export)
    t.start()
    t.join()
    assert len(errors) == 1 and "is a stream of device 0" in errors[0]
    unknown = cai.examples.DeviceMatrix(data.ptr, 4, 4, stream=0xDEAD0, owner=data)
    assert unknown.__cuda_array_interface__["stream"] == 0xDEAD0


def _driver():
    """The driver, for work a producer leaves on device 1's legacy default stream."""
    import ctypes

    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0

    def make_current(n):
        ctx = ctypes.c_void_p()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), n) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0

    def memset_legacy(ptr, value, n):
        assert cu.cuMemsetD8Async(ctypes.c_uint64(ptr), ctypes.c_ubyte(value), ctypes.c_size_t(n), ctypes.c_void_p(1)) == 0

    return make_current, memset_legacy


@pytest.mark.parametrize("kw", [{}, {"mode": "synchronize"}, {"stream": "ours"}, {"stream": 2}])
def test_a_producers_default_stream_is_its_datas_devices(kw):
    """A producer exporting `stream` = 1 for data on device 1 means device 1's legacy default
    stream; a consumer with device 0 current (its own `1` is device 0's) still waits for it.
    Before, the import took the two `1`s for one stream and read stale bytes."""
    dev = second_device()
    make_current, memset_legacy = _driver()
    owner = cai.DeviceArray(np.zeros(16, dtype=np.float32), device_id=dev)
    owner.synchronize()
    make_current(dev)
    memset_legacy(owner.ptr, 0x3F, 64)  # pending on device 1's legacy stream
    m = cai.examples.DeviceMatrix(owner.ptr, 4, 4, stream=1, owner=owner)
    make_current(0)
    kw = dict(kw)
    if kw.get("stream") == "ours":
        hold = cai.DeviceArray(np.zeros(1), non_blocking=True)
        kw["stream"] = hold.__cuda_array_interface__["stream"]
    v = cai.as_cuda_array(m, **kw)
    assert v.sync_plan in ("event-wait", "synchronize")
    assert set(v.copy_to_host()) == {0x3F}
    assert v.release() == "event-wait"
