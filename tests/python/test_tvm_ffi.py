"""tvm-ffi (apache-tvm-ffi, pinned in requirements.txt) and cai through DLPack's C exchange
table: tvm-ffi reads cai's table (`tvm_ffi.from_dlpack`, and a tvm-ffi function's arguments and
results), and cai reads tvm-ffi's (its test wrapper is its one type that publishes a table)."""

import gc

import numpy as np
import pytest

import cai
import cai.examples

ml_dtypes = pytest.importorskip("ml_dtypes")
tvm_ffi = pytest.importorskip("tvm_ffi")
import tvm_ffi.testing  # noqa: E402 (after the skip)
from tvm_ffi.core import DLTensorTestWrapper  # noqa: E402

live_exports = cai._native._dlpack_live_exports


@pytest.mark.parametrize(
    "dtype", [np.float64, np.float32, np.float16, np.int8, np.uint64, np.complex64, np.bool_, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
)
def test_tvm_reads_cai_storages_in_place(dtype):
    s = cai.zeros((3, 4), dtype=dtype)
    host = np.asarray(s)  # (NumPy's DLPack has no bfloat16 nor float8)
    host[...] = np.arange(12).reshape(3, 4).astype(dtype)
    t = tvm_ffi.from_dlpack(s)
    assert t.shape == (3, 4)
    if dtype is not np.complex64:  # (tvm-ffi prints no complex type: "unknown type_code=5")
        assert str(t.dtype) == np.dtype(dtype).name
    assert t.data_ptr() == host.ctypes.data  # zero-copy
    # Back through cai (NumPy reads no bfloat16 nor float8 through DLPack).
    back = np.asarray(cai.from_dlpack(t))
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, host)


def test_tvm_reads_through_the_table_not_dlpack():
    # A read-only array has no legacy capsule (it cannot say read-only), and tvm-ffi's fallback
    # is `__dlpack__()` with no arguments: only the table gives it.
    a = np.arange(4.0)
    a.flags.writeable = False
    v = cai.as_host_array(a)
    with pytest.raises(BufferError, match="read-only"):
        v.__dlpack__()
    t = tvm_ffi.from_dlpack(v)
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    assert t.data_ptr() == a.ctypes.data


@pytest.mark.parametrize(
    "view", [lambda a: a[:, ::-1], lambda a: a.T, lambda a: a[1:, 2:], lambda a: a[0, 0]], ids=["negative", "F", "offset", "0-d"]
)
def test_layouts(view):
    a = view(np.arange(20.0).reshape(4, 5))
    t = tvm_ffi.from_dlpack(cai.as_host_array(a))
    assert tuple(t.shape) == a.shape
    assert tuple(t.strides) == tuple(s // a.itemsize for s in a.strides)
    np.testing.assert_array_equal(np.from_dlpack(t), a)


def test_derived_classes_and_lifetime():
    gc.collect()
    before = live_exports()
    g = cai.examples.Grid(3, 4)
    t = tvm_ffi.from_dlpack(g)
    np.testing.assert_array_equal(np.from_dlpack(t), np.from_dlpack(g))
    del g
    gc.collect()
    assert np.from_dlpack(t).shape == (3, 4)  # the tensor keeps the Grid
    del t
    gc.collect()
    assert live_exports() == before


def test_a_tvm_function_returns_cai_views():
    # tvm-ffi converts a function's arguments with the argument type's table and its results
    # with the same table's managed_tensor_to_py_object_no_sync.
    s = cai.zeros((2, 3), dtype=np.float32)
    np.from_dlpack(s)[:] = 3
    r = tvm_ffi.testing.echo(s)
    assert isinstance(r, cai.HostArrayView)
    np.testing.assert_array_equal(np.asarray(r), 3)
    assert np.asarray(r).ctypes.data == np.from_dlpack(s).ctypes.data


def test_cai_reads_tvm_tables_and_tensors():
    a = np.arange(6.0).reshape(2, 3)
    t = tvm_ffi.from_dlpack(a)
    w = DLTensorTestWrapper(t)
    v = cai.from_dlpack(w)  # through the wrapper's table
    np.testing.assert_array_equal(np.asarray(v), a)
    assert np.asarray(v).ctypes.data == a.ctypes.data
    u = cai.from_dlpack(t)  # tvm_ffi.Tensor has no table: its __dlpack__
    np.testing.assert_array_equal(np.asarray(u), a)
    # Rust's scoped import: tvm-ffi lends no tensors, so it imports.
    _, readonly, owned = cai._native._with_dlpack_ns(w, 3)
    assert not readonly and owned
    del v, u, w, t
    gc.collect()


def test_tvm_refusals_surface():
    s = cai.zeros(3, dtype=np.dtype([("a", "<f4"), ("b", "<i4")]))
    with pytest.raises(BufferError, match="structured"):
        tvm_ffi.from_dlpack(s)
