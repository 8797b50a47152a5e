"""Lifetimes: the producer dropped while its data is in use. Also run under
compute-sanitizer by the bundle's run.sh, where it runs."""

import gc
import weakref

import numpy as np

import cai
from conftest import churn


def test_rust_view_keeps_a_cupy_array_alive(cp):
    x = cp.arange(1 << 20, dtype=cp.float32)
    expected = cp.asnumpy(x).tobytes()
    v = cai.as_cuda_array(x[::3])
    ref = weakref.ref(x)
    del x
    junk = churn(cp)
    assert ref() is not None  # the view holds it
    assert v.copy_to_host() == np.frombuffer(expected, np.float32)[::3].tobytes()
    del v, junk
    gc.collect()
    assert ref() is None


def test_cupy_keeps_our_array_alive(cp):
    host = np.arange(1 << 20, dtype=np.float32)
    a = cai.DeviceArray(host)
    x = cp.asarray(a)
    ref = weakref.ref(a)
    del a
    junk = churn(cp)
    assert ref() is not None
    np.testing.assert_array_equal(cp.asnumpy(x), host)
    del x, junk
    gc.collect()
    assert ref() is None


def test_torch_keeps_our_array_alive(torch, cp):
    host = np.arange(1 << 20, dtype=np.float32)
    a = cai.DeviceArray(host)
    t = torch.as_tensor(a, device="cuda")
    del a
    junk = churn(cp)
    np.testing.assert_array_equal(t.cpu().numpy(), host)
    del junk


def test_views_share_the_buffer_after_the_base_is_gone(cp):
    host = np.arange(64, dtype=np.int32)
    a = cai.DeviceArray(host)
    v = a.view((16,), (16,), offset=4)  # every 4th item from index 1
    del a
    junk = churn(cp)
    assert v.to_bytes() == host[1::4].tobytes()
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(v)), host[1::4])
    del junk


def test_from_interface_with_owner_keeps_the_owner(cp):
    x = cp.ones(1000, dtype=cp.float64)
    v = cai.from_cuda_array_interface(x.__cuda_array_interface__, owner=x)
    del x
    junk = churn(cp)
    assert v.copy_to_host() == np.ones(1000).tobytes()
    del junk
