"""Interop matrix: our DeviceArray as producer for CuPy, Numba, PyTorch and JAX, and those
libraries as producers imported into Rust. Values written on one side are read on the other."""

import numpy as np
import pytest

import cai
from conftest import DTYPES, sample


def ours(host, order="C"):
    return cai.DeviceArray(host, order=order)


def expect_bytes(host):
    return np.ascontiguousarray(host).tobytes()


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_reads_and_writes_ours(cp, dtype, order):
    host = sample(dtype)
    a = ours(host, order)
    x = cp.asarray(a)
    assert x.data.ptr == a.ptr  # zero-copy
    assert x.flags.f_contiguous == (order == "F")
    np.testing.assert_array_equal(cp.asnumpy(x), host)
    x[1, 2] = 7
    host[1, 2] = 7
    assert a.to_bytes() == expect_bytes(host)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int16, np.uint8, np.complex64, np.float16])
def test_torch_reads_and_writes_ours(torch, dtype, order):
    host = sample(dtype)
    a = ours(host, order)
    t = torch.as_tensor(a, device="cuda")
    assert t.data_ptr() == a.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), host)
    t.mul_(2)
    torch.cuda.synchronize()
    assert a.to_bytes() == expect_bytes(host * 2)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.complex64])
def test_numba_reads_and_writes_ours(numba_cuda, dtype, order):
    host = sample(dtype)
    a = ours(host, order)
    d = numba_cuda.as_cuda_array(a)
    np.testing.assert_array_equal(d.copy_to_host(), host)
    # A copy into the array, not `d[0, 0] = 5`: numba-cuda compiles a kernel for that, and
    # numba-cuda 0.2x's compiler fails on NumPy >= 2.4 (`np.row_stack`, removed there; seen on
    # the GPU machine), which says nothing about cai.
    host[0, 0] = 5
    d.copy_to_device(np.asarray(host, order=order))
    assert a.to_bytes() == expect_bytes(host)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_jax_reads_ours(jnp, dtype):
    host = sample(dtype)
    a = ours(host)
    # DLPack: JAX passes its own stream to __dlpack__, and cai orders it after the array's.
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(a)), host)
    # The CUDA Array Interface: JAX accepts no stream but its own ("Only GPU streams used for
    # dlpack imports are supported", JAX 0.10 on an H200), so the producer synchronizes and
    # exports `stream: None`, the spec's option for consumers that cannot order streams.
    a.synchronize()
    cai.set_export_stream_none(True)
    try:
        assert a.__cuda_array_interface__["stream"] is None
        j = jnp.asarray(a)
    finally:
        cai.set_export_stream_none(False)
    np.testing.assert_array_equal(np.asarray(j), host)


def test_strided_views_of_ours(cp, numba_cuda):
    host = np.arange(8 * 9, dtype=np.float64).reshape(8, 9)
    a = ours(host)
    # Every other row, columns 1, 4, 7, starting at [1, 1].
    v = a.view((4, 3), (2 * 9 * 8, 3 * 8), offset=(9 + 1) * 8)
    ref = host[1::2, 1::3]
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(v)), ref)
    np.testing.assert_array_equal(numba_cuda.as_cuda_array(v).copy_to_host(), ref)
    assert v.to_bytes() == expect_bytes(ref)
    # Negative strides: rows reversed.
    r = a.view((8, 9), (-9 * 8, 8), offset=7 * 9 * 8)
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(r)), host[::-1])
    with pytest.raises(ValueError, match="shape"):
        a.view((9, 9))


def cupy_cases(cp):
    base = cp.arange(12 * 10, dtype=cp.float32).reshape(12, 10)
    return {
        "C": base,
        "F": cp.asfortranarray(base),
        "strided": base[1::2, ::3],
        "negative": base[::-1, ::-2],
        "0-d": base[3, 4],
        "empty": base[:0],
        "int16": cp.arange(30, dtype=cp.int16).reshape(5, 6).T,
        "complex64": (base + 1j * base).astype(cp.complex64),
    }


@pytest.mark.parametrize("case", ["C", "F", "strided", "negative", "0-d", "empty", "int16", "complex64"])
def test_cupy_arrays_imported_into_rust(cp, case):
    x = cupy_cases(cp)[case]
    v = cai.as_cuda_array(x)
    assert v.owner is x
    assert v.shape == x.shape
    assert v.copy_to_host() == cp.asnumpy(x).tobytes()
    if x.size:
        attrs = v.pointer_attributes
        assert attrs["memory_type"] == "device" and attrs["device_accessible"]
        start, size = attrs["range"]
        assert start <= x.data.ptr < start + size


def test_torch_tensors_imported_into_rust(torch):
    t = torch.arange(40, dtype=torch.float32, device="cuda").reshape(5, 8)
    for view in [t, t.t(), t[1::2, ::3], t.to(torch.float16), t.to(torch.int64)]:
        v = cai.as_cuda_array(view)
        assert v.copy_to_host() == view.cpu().numpy().tobytes()


def test_torch_bfloat16_imported_into_rust(torch):
    bf = torch.linspace(-3, 3, 40, device="cuda").reshape(5, 8).to(torch.bfloat16)
    try:
        exported = bf.__cuda_array_interface__["typestr"]
    except (TypeError, KeyError) as e:  # older releases export no bfloat16
        pytest.skip(f"this PyTorch does not export bfloat16: {e!r}")
    # "<V2" in current PyTorch; "<f2" (read as float16) in some releases. Either way, the
    # bytes are PyTorch's.
    assert exported in ("<V2", "<f2")
    v = cai.as_cuda_array(bf)
    assert v.typestr == exported
    assert v.copy_to_host() == bf.view(torch.int16).cpu().numpy().tobytes()


def test_numba_arrays_imported_into_rust(numba_cuda):
    host = np.arange(24, dtype=np.int32).reshape(4, 6)
    d = numba_cuda.to_device(host)
    assert cai.as_cuda_array(d).copy_to_host() == host.tobytes()
    assert cai.as_cuda_array(d[:, ::2]).copy_to_host() == host[:, ::2].copy().tobytes()


def test_jax_arrays_imported_into_rust(jnp):
    j = jnp.arange(20, dtype=jnp.float32).reshape(4, 5)
    if not hasattr(j, "__cuda_array_interface__"):
        pytest.skip("this JAX array does not export __cuda_array_interface__")
    v = cai.as_cuda_array(j)
    assert v.readonly  # JAX exports read-only
    assert v.copy_to_host() == np.asarray(j).tobytes()


def test_managed_memory_is_device_and_host_accessible(cp):
    mem = cp.cuda.malloc_managed(4096)
    x = cp.ndarray((1024,), dtype=cp.float32, memptr=mem)
    x[:] = 3
    v = cai.as_cuda_array(x)
    attrs = v.pointer_attributes
    assert attrs["memory_type"] == "managed" and attrs["is_managed"]
    assert attrs["device_accessible"] and attrs["host_accessible"]
    assert v.copy_to_host() == np.full(1024, 3, np.float32).tobytes()


def test_host_pointer_is_refused():
    host = np.zeros(16, dtype=np.float32)
    desc = dict(host.__array_interface__, version=3, strides=None)
    attrs = cai.pointer_attributes(host.ctypes.data)
    assert attrs["memory_type"] == "unregistered"
    if attrs["device_accessible"]:
        pytest.skip("this device reaches pageable host memory (HMM/ATS): host pointers are device-accessible")
    with pytest.raises(ValueError, match=r"`data` = 0x[0-9a-f]+ is not device-accessible"):
        cai.from_cuda_array_interface(desc, owner=host)


def test_extent_outside_the_allocation_is_refused():
    n = (2 << 20) // 4  # 2 MiB: a whole number of the driver's allocation granules
    a = cai.DeviceArray(np.zeros(n, dtype=np.float32))
    start, size = cai.pointer_attributes(a.ptr)["range"]
    assert start == a.ptr and size >= a.nbytes
    desc = dict(a.__cuda_array_interface__)
    desc["shape"] = (size // 4 + 1,)
    with pytest.raises(ValueError, match="after the allocation"):
        cai.from_cuda_array_interface(desc, owner=a)
    desc["shape"], desc["strides"] = (16,), (-4,)  # runs backwards from the first byte
    with pytest.raises(ValueError, match="before the allocation"):
        cai.from_cuda_array_interface(desc, owner=a)
    # Opting out of the pointer check accepts it (the caller's responsibility).
    assert cai.from_cuda_array_interface(desc, owner=a, check_pointer=False).pointer_attributes is None
