"""DLPack on the device: cai's exports and imports with the stream handshake (on a GPU and on
the emulated driver, whose streams run work only when something must observe it, so an
unordered read sees stale bytes every time), then PyTorch, CuPy and JAX reading cai's arrays
and cai reading theirs (a GPU only), bf16 included.
"""

import gc
import os

import numpy as np
import pytest

import cai
import cai.examples

from conftest import second_device
from dlpack_producer import Producer

EMULATED = bool(os.environ.get("CAI_GPU_SUITE_EMULATED"))


def items(view, dtype):
    return np.frombuffer(view.copy_to_host(), dtype=dtype)


def pending(value, n=1 << 16, non_blocking=True):
    """A DeviceArray whose fill with `value` is still pending on its own stream."""
    a = cai.DeviceArray(np.zeros(n, dtype=np.uint8), non_blocking=non_blocking)
    a.fill(value, rounds=20)
    return a


def test_dlpack_device_of_device_and_managed_memory():
    a = cai.DeviceArray(np.arange(4, dtype=np.float32))
    assert a.__dlpack_device__() == (2, 0)
    assert cai.zeros(4, device="gpu").__dlpack_device__() == (2, 0)
    assert cai.ones(4, device="gpu", managed="cuda").__dlpack_device__() == (13, 0)
    assert cai.zeros(4).__dlpack_device__() == (1, 0)


class OnlyDlpack:
    """`obj`'s `__dlpack__` alone (no exchange table on this type)."""

    def __init__(self, obj):
        self.obj = obj

    def __dlpack__(self, **kwargs):
        return self.obj.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.obj.__dlpack_device__()


@pytest.mark.parametrize(
    "path, plan",
    # The exchange table orders nothing: cai orders the producer's current work stream (the
    # legacy default stream, after which cai's table ordered the array's own) before the
    # reader's. `__dlpack__` orders the reader's stream itself.
    [("table", "event-wait"), ("__dlpack__", "none: ordered by the producer")],
)
@pytest.mark.parametrize("non_blocking", [False, True])
def test_the_consumers_stream_waits_for_the_producers_work(non_blocking, path, plan):
    reader = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    for value in (5, 6):
        a = pending(value, non_blocking=non_blocking)
        v = cai.from_dlpack(a if path == "table" else OnlyDlpack(a), stream=reader.stream)
        assert isinstance(v, cai.CudaArrayView)
        assert v.sync_plan == plan and v.consumer_stream == reader.stream
        assert (v.ptr, v.shape, v.typestr) == (a.ptr, (1 << 16,), "|u1")
        assert (items(v, np.uint8)[-64:] == value).all()
        a.synchronize()


@pytest.mark.skipif(not EMULATED, reason="on a GPU an unordered read races; the emulator loses every time")
def test_without_the_handshake_the_reader_sees_stale_bytes():
    reader = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    a = pending(7)
    v = cai.from_dlpack(a, stream=reader.stream, sync=False)  # stream=-1 to the producer
    assert v.sync_plan == "none: sync=False"
    assert (items(v, np.uint8) == 0).all()
    a.synchronize()


def test_the_legacy_default_stream_is_what_none_means():
    a = pending(3, non_blocking=True)
    v = cai.from_dlpack(a)  # stream 1
    assert v.consumer_stream == 1 and (items(v, np.uint8)[-8:] == 3).all()


def test_stream_zero_and_bad_streams_are_refused():
    a = cai.DeviceArray(np.zeros(4, dtype=np.uint8))
    with pytest.raises(ValueError, match="0 is ambiguous"):
        a.__dlpack__(stream=0)
    with pytest.raises(TypeError, match="`stream` must be None or an int"):
        a.__dlpack__(stream=1.5)


def test_import_export_round_trip_and_views():
    host = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = cai.DeviceArray(host)
    v = cai.from_dlpack(a)
    w = cai.from_dlpack(v)  # a view exports DLPack too
    assert w.ptr == v.ptr == a.ptr and w.strides == (24, 4)
    assert (items(w, np.float32).reshape(4, 6) == host).all()
    s = a.view((2, 3), strides=(48, -4), offset=8)
    sv = cai.from_dlpack(s)
    assert sv.strides == (48, -4) and sv.ptr == a.ptr + 8


def test_a_copy_to_the_host_and_on_the_device():
    host = np.arange(12, dtype=np.int32)
    a = pending(9, n=64)
    got = np.from_dlpack(a, device="cpu")  # dl_device=(1, 0): copied after the pending fill
    assert (got == 9).all() and got.flags.writeable
    with pytest.raises(BufferError, match="only a copy"):
        np.from_dlpack(a, device="cpu", copy=False)
    b = cai.DeviceArray(host)
    c = cai.from_dlpack(b, copy=True)
    assert c.ptr != b.ptr and (items(c, np.int32) == host).all()
    b.fill(0)
    b.synchronize()
    assert (items(c, np.int32) == host).all()  # the copy is the consumer's own


def test_managed_memory_is_read_by_numpy_after_the_work():
    s = cai.ones((8,), device="gpu", managed="cuda")
    a = np.from_dlpack(s)  # NumPy reads managed memory on the host
    assert (a == 1).all()
    a[0] = 5
    assert s.to_numpy()[0] == 5


def test_storages_export_the_newer_side():
    s = cai.zeros((3, 5), device="gpu")  # mirrored (managed="gt4py")
    assert s.__dlpack_device__() == (2, 0)
    s.to_numpy()[...] = 4.0
    s.set_host_modified()  # the host side is newer: DLPack exports it
    assert s.__dlpack_device__() == (1, 0)
    d = cai.from_dlpack(s)
    assert isinstance(d, cai.HostArrayView) and d.get((2, 4)) == 4.0
    # Asked for the device, the device side is brought up to date first.
    cap = s.__dlpack__(dl_device=(2, 0), max_version=(1, 0))
    assert s.sync_state.state == cai.SyncState.SYNC_CLEAN
    del cap
    g = cai.from_dlpack(s)  # clean: the device side
    assert isinstance(g, cai.CudaArrayView) and (items(g, np.float64) == 4.0).all()
    # dl_device=(1, 0) on a mirror reads its host side, no copy.
    m = cai.zeros((2,), device="gpu")
    assert np.from_dlpack(m, device="cpu").ctypes.data == m.__array_interface__["data"][0]


def test_capsules_keep_their_exporter_until_deleted_once():
    """Every capsule, consumed or not, keeps the device array alive until its tensor is deleted,
    and then lets it go (told by a weak reference: the CUDA wheel has no counting hook)."""
    import weakref

    a = cai.DeviceArray(np.zeros(16, dtype=np.uint8))
    ref = weakref.ref(a)
    unconsumed = [a.__dlpack__(max_version=(1, 0)) for _ in range(5)]
    views = [cai.from_dlpack(a) for _ in range(5)]
    del a
    gc.collect()
    assert ref() is not None
    del unconsumed
    gc.collect()
    assert ref() is not None  # the views' capsules still hold it
    assert all(v.copy_to_host() == bytes(16) for v in views)
    del views
    gc.collect()
    assert ref() is None


def test_an_array_on_another_device_imports_from_the_current_one():
    dev = second_device()
    a = cai.DeviceArray(np.arange(64, dtype=np.uint8), device_id=dev)
    assert a.__dlpack_device__() == (2, dev)
    a.fill(4, rounds=3)
    v = cai.from_dlpack(a)  # device 0 current: its legacy stream waits for device 1's
    assert (items(v, np.uint8) == 4).all()
    a.synchronize()


def test_a_device_tensor_leaving_its_allocation_is_refused_and_deleted_once():
    a = cai.DeviceArray(np.zeros(64, dtype=np.uint8))
    good = Producer(data=a.ptr, shape=(8,), strides=(1,), dtype=(1, 8, 1), device=(2, 0))
    v = cai.from_dlpack(good, stream=1)
    assert good.calls[0]["stream"] == 1 and good.calls[0]["max_version"][0] == 1
    assert v.ptr == a.ptr and good.deleted == 0
    del v
    gc.collect()
    assert good.deleted == 1
    for shape, strides, offset in [((65,), (1,), 0), ((8,), (1,), 60), ((2,), (-1,), 0)]:
        bad = Producer(data=a.ptr, shape=shape, strides=strides, byte_offset=offset, dtype=(1, 8, 1), device=(2, 0))
        with pytest.raises(ValueError, match="allocation"):
            cai.from_dlpack(bad)
        gc.collect()
        assert bad.deleted == 1, (shape, strides, offset)
    # sync=False passes -1: the consumer orders nothing.
    quiet = Producer(data=a.ptr, shape=(8,), strides=(1,), dtype=(1, 8, 1), device=(2, 0))
    cai.from_dlpack(quiet, sync=False)
    assert quiet.calls[0]["stream"] == -1


def test_a_dlpack_view_passes_on_the_stream_its_data_is_ready_on():
    """Found by an attack: a view imported through DLPack re-exported `stream: None`, though
    its data was ready on the import's consumer stream only, so its own consumers on other
    streams read stale bytes."""
    s1 = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    s2 = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    for value, pass_on in [(4, "dlpack"), (5, "cai"), (6, "host")]:
        a = pending(value)
        v = cai.from_dlpack(a, stream=s1.stream)
        assert v.__cuda_array_interface__["stream"] == s1.stream
        if pass_on == "dlpack":
            w = cai.from_dlpack(v, stream=s2.stream)
        elif pass_on == "cai":
            w = cai.as_cuda_array(v, stream=s2.stream)
        if pass_on == "host":
            got = np.from_dlpack(v, device="cpu")
        else:
            got = items(w, np.uint8)
        assert (got[-8:] == value).all(), (pass_on, got[-8:])
        a.synchronize()
    # With a host wait (mode="synchronize" of a wrap), every stream may read: no stream.
    d = cai.as_storage(pending(8))
    assert d.__cuda_array_interface__["stream"] is None


def test_copies_of_managed_memory_are_managed_and_finished_for_host_readers():
    """Found by an attack: copy=True of managed memory made plain device memory (which NumPy
    cannot read), and a host reader could read the copy before it was made."""
    m = cai.ones(8, device="gpu", managed="cuda")
    assert np.from_dlpack(m, copy=True).tolist() == [1.0] * 8
    v = cai.from_dlpack(m, copy=True)
    assert v.__dlpack_device__() == (13, 0) and v.ptr != m.__cuda_array_interface__["data"][0]


def test_copies_stay_inside_the_allocation_and_bare_streams_are_not_used():
    """Found by an attack: a derived class describing more than its allocation was copied
    past its end, and a bare stream number was handed to the driver."""
    a = cai.DeviceArray(np.zeros(64, dtype=np.uint8))
    big = cai.examples.DeviceMatrix(a.ptr, 100, 100, owner=a)
    for kwargs in [dict(copy=True), dict(dl_device=(1, 0))]:
        with pytest.raises(ValueError, match="allocation"):
            big.__dlpack__(max_version=(1, 0), **kwargs)
    bare = cai.examples.DeviceMatrix(a.ptr, 4, 4, owner=a, stream=0x7777)
    assert bare.__cuda_array_interface__["stream"] == 0x7777  # described, as before
    for kwargs in [dict(), dict(stream=1), dict(dl_device=(1, 0)), dict(copy=True)]:
        with pytest.raises(BufferError, match="bare number"):
            bare.__dlpack__(max_version=(1, 0), **kwargs)
    bare.__dlpack__(max_version=(1, 0), stream=-1)  # no ordering asked: nothing handed over
    ok = cai.examples.DeviceMatrix(a.ptr, 4, 4, owner=a, stream=2)
    assert cai.from_dlpack(ok).shape == (4, 4)


def test_a_tensor_naming_another_device_than_its_memory_is_refused():
    a = cai.DeviceArray(np.zeros(8, dtype=np.uint8))
    p = Producer(data=a.ptr, shape=(8,), strides=(1,), dtype=(1, 8, 1), device=(2, 7))
    with pytest.raises(ValueError, match="names device 7, but the driver says"):
        cai.from_dlpack(p)
    gc.collect()
    assert p.deleted == 1


# --- peers (a GPU only) -----------------------------------------------------------------------


def test_torch_reads_cai_and_cai_reads_torch(torch):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = cai.DeviceArray(host)
    t = torch.from_dlpack(a)
    assert t.device.type == "cuda" and t.data_ptr() == a.ptr
    assert (t.cpu().numpy() == host).all()
    x = torch.arange(10, device="cuda", dtype=torch.bfloat16)
    v = cai.from_dlpack(x)
    assert v.typestr == "<V2" and v.ptr == x.data_ptr()
    raw = items(v, np.uint16)
    assert (raw == x.view(torch.int16).cpu().numpy().astype(np.uint16)).all()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.ones(1 << 20, device="cuda") * 3
        w = cai.from_dlpack(y, stream=s.cuda_stream)
    assert (items(w, np.float32)[-8:] == 3).all()


def test_cupy_reads_cai_and_cai_reads_cupy(cp):
    host = np.arange(12, dtype=np.float64)
    a = cai.DeviceArray(host)
    c = cp.from_dlpack(a)
    assert c.data.ptr == a.ptr and (c.get() == host).all()
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = cp.cuda.Stream(non_blocking=True)
    with producer:
        x = cp.zeros(1 << 24, dtype=cp.float32)
        for _ in range(20):
            x += 1
    v = cai.from_dlpack(x, stream=consumer.ptr)
    assert (items(v, np.float32)[-8:] == 20).all()


def test_jax_reads_cai_and_cai_reads_jax(jnp):
    import jax

    host = np.arange(6, dtype=np.float32)
    a = cai.DeviceArray(host)
    j = jnp.from_dlpack(a)
    assert (np.asarray(j) == host).all()
    x = jnp.arange(8, dtype=jnp.bfloat16)
    v = cai.from_dlpack(x)
    assert v.typestr == "<V2" and v.shape == (8,)
    # The bfloat16 bits cai reads are JAX's.
    bits = np.asarray(jax.lax.bitcast_convert_type(x, jnp.uint16))
    assert (items(v, np.uint16) == bits).all()


def test_numba_reads_cai_through_a_view(numba_cuda):
    host = np.arange(6, dtype=np.int32)
    v = cai.from_dlpack(cai.DeviceArray(host))
    d = numba_cuda.as_cuda_array(v)
    assert (d.copy_to_host() == host).all()
