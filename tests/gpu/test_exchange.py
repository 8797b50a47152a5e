"""DLPack's C exchange table on the device: cai's table for device and managed memory (on a GPU
and on the emulated driver), and PyTorch's table (2.11+) read by cai (a GPU only): the tensor in
place, its stream ordered after torch's current stream, bf16 kept."""

import gc
import os

import numpy as np
import pytest

import cai
import dlpack_exchange as dx

from test_dlpack import pending

EMULATED = bool(os.environ.get("CAI_GPU_SUITE_EMULATED"))


def test_cais_table_exports_device_memory_ordered_before_the_legacy_stream():
    for value in (3, 4):
        a = pending(value, non_blocking=True)  # a fill pending on a non-blocking stream
        m = dx.call_from_py(type(a), a)
        assert m.device == (dx.KDLCUDA, 0) and m.data == a.ptr and m.version == (1, 3)
        # The table ordered the fill before its current work stream, the legacy default one,
        # which a view of the tensor (no ordering of its own) reads on.
        assert dx.call_current_work_stream(type(a), dx.KDLCUDA, 0) == 1
        v = dx.call_to_py(cai.CudaArrayView, m)  # owns the tensor now
        assert isinstance(v, cai.CudaArrayView) and v.ptr == a.ptr
        assert (np.frombuffer(v.copy_to_host(), dtype=np.uint8)[-64:] == value).all()
        del v
        a.synchronize()


def test_cais_table_for_managed_memory_and_storages():
    s = cai.ones((4, 5), device="gpu", managed="cuda", dtype=np.float32)
    m = dx.call_from_py(type(s), s)
    assert m.device == (13, 0) and m.shape == (4, 5)
    m.delete()
    d = cai.zeros((3,), device="gpu", dtype=np.int64)
    m = dx.call_from_py(type(d), d)
    assert m.device == (dx.KDLCUDA, 0)
    m.delete()


def test_cais_table_lends_device_memory_ordered_before_the_legacy_stream():
    for obj in (
        cai.ones((4, 5), device="gpu", dtype=np.float32),
        cai.ones((4, 5), device="gpu", managed="cuda", dtype=np.float32),
    ):
        lent = dx.call_dltensor_from_py(type(obj), obj)
        m = dx.call_from_py(type(obj), obj)
        for field in ("data", "device", "ndim", "dtype", "shape", "strides", "byte_offset"):
            assert getattr(lent, field) == getattr(m, field), field
        m.delete()
        again = dx.call_dltensor_from_py(type(obj), obj)
        assert (again.shape_address, again.strides_address) == (lent.shape_address, lent.strides_address)
    for value in (3, 4):
        a = pending(value, non_blocking=True)
        v = cai.as_cuda_array(a, sync=False)  # its stream is a's, where the fill is pending
        lent = dx.call_dltensor_from_py(type(v), v)
        assert lent.device == (dx.KDLCUDA, 0) and lent.data == a.ptr and lent.shape == (1 << 16,)
        # The lend ordered the fill before cai's current work stream, the legacy default one,
        # which a view with no ordering of its own reads on.
        desc = {"shape": lent.shape, "typestr": "|u1", "data": (lent.data, False), "version": 3, "stream": None}
        r = cai.from_cuda_array_interface(desc, owner=v)
        assert (np.frombuffer(r.copy_to_host(), dtype=np.uint8)[-64:] == value).all()
        a.synchronize()


@pytest.mark.parametrize("device", [(dx.KDLCUDA, 0), (13, 0)])
def test_cais_allocator_on_the_device(device):
    m = dx.call_allocator(cai.CudaArrayView, (8, 4), np.float32, device)
    assert m.device == device and m.shape == (8, 4) and m.strides == (4, 1) and m.data
    v = dx.call_to_py(cai.CudaArrayView, m)
    assert v.shape == (8, 4) and v.ptr == m.data
    del v
    gc.collect()


def test_cai_reads_its_own_device_table():
    a = pending(9, non_blocking=True)
    reader = cai.DeviceArray(np.zeros(1, dtype=np.uint8), non_blocking=True)
    v = cai.from_dlpack(a, stream=reader.stream)
    assert v.sync_plan == "event-wait" and v.consumer_stream == reader.stream
    assert v.__cuda_array_interface__["stream"] == reader.stream  # where the data is ready
    assert (np.frombuffer(v.copy_to_host(), dtype=np.uint8)[-64:] == 9).all()


def test_cai_reads_its_own_device_storages_through_the_lent_tensor():
    """cai's storages lend a tensor valid while they live: cai.from_dlpack reads it in place and
    holds the storage (told by a weak reference: the CUDA wheel has no counting hook)."""
    import weakref

    for kw in ({}, {"managed": "cuda"}):
        s = cai.ones((4, 5), device="gpu", dtype=np.float32, **kw)
        ref = weakref.ref(s)
        lent = dx.call_dltensor_from_py(type(s), s)
        v = cai.from_dlpack(s)
        assert isinstance(v, cai.CudaArrayView) and v.ptr == lent.data and v.shape == (4, 5)
        del s
        gc.collect()
        assert ref() is not None  # the view holds its producer
        assert (np.frombuffer(v.copy_to_host(), dtype=np.float32) == 1).all()
        del v
        gc.collect()
        assert ref() is None


@pytest.mark.skipif(not EMULATED, reason="a bogus stream handle is undefined behaviour on a real driver; the emulator reports it")
def test_a_bogus_current_work_stream_is_named():
    # A tensor said to be on device 0 (its pointer unchecked), with a stream that is none.
    T = dx.make_producer_type(dlpack="raise", device=(dx.KDLCUDA, 0), stream=0xDEADBEEF)
    with pytest.raises(ValueError, match=r"after the producer's stream 3735928559 \(its table's current_work_stream\)"):
        cai.from_dlpack(T(np.empty(4, dtype=np.float32)), check_pointer=False)
    gc.collect()
    assert T.exchange.deleted == 1 and not T.exchange.live


# --- PyTorch's table (a GPU only) ---------------------------------------------------------------


@pytest.fixture
def torch_table(torch):
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no DLPack exchange table")
    return torch


def test_torch_publishes_a_table(torch_table):
    t = dx.read_table(torch_table.Tensor)
    assert t.version[0] == 1 and t.version >= (1, 2)
    assert t.functions[dx.FROM_PY] and t.functions[dx.CURRENT_WORK_STREAM]


def test_cai_reads_torch_through_its_table(torch_table):
    torch = torch_table

    class NoDunder(torch.Tensor):  # the table is found on the type; __dlpack__ must not be used
        def __dlpack__(self, *args, **kwargs):
            raise AssertionError("__dlpack__ called: the exchange table was not used")

    base = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)[:, ::2]
    t = base.as_subclass(NoDunder)
    v = cai.from_dlpack(t)
    assert isinstance(v, cai.CudaArrayView)
    assert v.ptr == base.data_ptr() and v.shape == (4, 3) and v.strides == (24, 8)
    np.testing.assert_array_equal(np.frombuffer(v.copy_to_host(), np.float32), base.cpu().numpy().ravel())


def test_torch_bf16_keeps_its_identity(torch_table):
    torch = torch_table
    t = torch.ones(5, dtype=torch.bfloat16, device="cuda")
    v = cai.from_dlpack(t)
    assert str(v.dtype) == "bfloat16"  # kDLBfloat, read as ml_dtypes' bfloat16


def test_the_import_orders_after_torchs_current_stream(torch_table):
    torch = torch_table
    s = torch.cuda.Stream()
    for value in (5, 6):
        t = torch.zeros(1 << 20, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)  # keeps s busy
            t.fill_(value)
            v = cai.from_dlpack(t)  # torch's current stream is s: the legacy stream waits on it
        assert v.sync_plan == "event-wait"
        assert (np.frombuffer(v.copy_to_host(), dtype=np.uint8)[-64:] == value).all()
        torch.cuda.synchronize()


def test_torch_reads_cai_arrays_made_by_cais_allocator(torch_table):
    torch = torch_table
    m = dx.call_allocator(cai.CudaArrayView, (3, 4), np.float32, (dx.KDLCUDA, 0))
    v = dx.call_to_py(cai.CudaArrayView, m)
    t = torch.from_dlpack(v)
    t.fill_(2.5)
    torch.cuda.synchronize()
    assert (np.frombuffer(v.copy_to_host(), np.float32) == 2.5).all()
