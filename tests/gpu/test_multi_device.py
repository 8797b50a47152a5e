"""Several devices with the peers: arrays CuPy and PyTorch put on device 1 imported while
device 0 is current, ours on device 1 read by them, and "the current device" as CuPy's
`with Device(n)` sets it. Skipped, saying so, on a machine with one GPU."""

import numpy as np
import pytest

import cai
import cai.examples
from conftest import second_device


def test_cupy_arrays_on_device_1_import_from_device_0(cp):
    dev = second_device()
    with cp.cuda.Device(dev):
        x = cp.arange(24, dtype=cp.float32).reshape(4, 6)
        x *= 2
    with cp.cuda.Device(0):
        v = cai.as_cuda_array(x)
        assert v.device_id == dev
        got = np.frombuffer(v.copy_to_host(), dtype=np.float32).reshape(4, 6)
        np.testing.assert_array_equal(got, np.arange(24, dtype=np.float32).reshape(4, 6) * 2)
        v.release()
        s = cai.as_storage(device_data=x)
        assert s.device_id == dev
        m = cai.as_storage(np.zeros((4, 6), dtype=np.float32), x)
        m.device_to_host(force=True)
        np.testing.assert_array_equal(m.to_numpy(), got)


def test_cupy_reads_ours_on_device_1(cp):
    dev = second_device()
    host = np.arange(12, dtype=np.int32)
    a = cai.DeviceArray(host, device_id=dev)
    with cp.cuda.Device(dev):
        y = cp.asarray(a)
        assert y.device.id == dev and y.data.ptr == a.ptr
        np.testing.assert_array_equal(cp.asnumpy(y), host)
        y += 1
        cp.cuda.Device(dev).synchronize()
    assert a.to_bytes() == (host + 1).tobytes()


def test_the_current_device_is_the_one_cupy_made_current(cp):
    dev = second_device()
    with cp.cuda.Device(dev):
        assert cai.DeviceArray(np.zeros(2)).device_id == dev
        s = cai.zeros((3, 4), device="gpu")
        assert s.device_id == dev
        assert cp.asarray(s).device.id == dev
    assert cai.zeros((3, 4), device=f"gpu:{dev}").device_id == dev


def test_torch_on_device_1_both_ways(torch):
    dev = second_device()
    t = torch.arange(10, device=f"cuda:{dev}", dtype=torch.float32) * 3
    v = cai.as_cuda_array(t)
    assert v.device_id == dev
    np.testing.assert_array_equal(np.frombuffer(v.copy_to_host(), dtype=np.float32), np.arange(10) * 3)
    v.release()
    a = cai.DeviceArray(np.arange(5, dtype=np.float32), device_id=dev)
    u = torch.as_tensor(a, device=f"cuda:{dev}")
    assert u.data_ptr() == a.ptr and u.device.index == dev
    np.testing.assert_array_equal(u.cpu().numpy(), np.arange(5, dtype=np.float32))


def test_our_stream_of_device_0_for_cupys_data_on_device_1_is_refused(cp):
    """Only streams cai made (and so knows alive) are asked about: a CuPy stream handle is
    exported as given."""
    dev = second_device()
    zero = cai.DeviceArray(np.zeros(1), non_blocking=True, device_id=0)
    s0 = zero.__cuda_array_interface__["stream"]
    with cp.cuda.Device(dev):
        x = cp.zeros(16, dtype=cp.float32)
    m = cai.examples.DeviceMatrix(x.data.ptr, 4, 4, stream=s0, owner=(x, zero))
    with pytest.raises(ValueError, match=f"stream of device 0, and the data .* is on device {dev}"):
        m.__cuda_array_interface__
    with cp.cuda.Device(0):
        theirs = cp.cuda.Stream(non_blocking=True)
    m = cai.examples.DeviceMatrix(x.data.ptr, 4, 4, stream=theirs.ptr, owner=(x, theirs))
    assert m.__cuda_array_interface__["stream"] == theirs.ptr
