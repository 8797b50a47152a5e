"""GDP-3 device storages on a GPU: CuPy reads them zero-copy; the gt4py mirror copies only when
the other side changed; unified memory ("cuda") is one address for both; wrapping CuPy arrays;
the data interface with both entries."""

import numpy as np
import pytest

import cai


def test_cupy_reads_device_storage_zero_copy(cp):
    s = cai.full((4, 6), 2.0, device="gpu", managed=None, alignment_size=64, halo=(1, 0))
    assert s.device == "gpu" and s.managed is None and not hasattr(s, "__array_interface__")
    assert not hasattr(s, "__array_struct__")  # NumPy goes on to __array__ (CuPy)
    x = cp.asarray(s)
    assert x.data.ptr == s.__cuda_array_interface__["data"][0]
    assert float(x.sum()) == 48.0
    # GDP-3's __array__ gives the CuPy view of a device-only storage, NumPy 2's protocol kept.
    assert s.__array__().data.ptr == x.data.ptr and s.__array__(copy=True).data.ptr != x.data.ptr
    assert s.__array__("f4").dtype == np.float32
    with pytest.raises(ValueError, match="copy=False"):
        s.__array__("f4", copy=False)
    x[1, 2] = 5.0  # a write through CuPy is seen by the storage
    assert float(s.to_cupy()[1, 2]) == 5.0
    assert s.domain_view.__cuda_array_interface__["data"][0] % 64 == 0
    with pytest.raises(cai.GTNoSuchBufferError):
        s.to_numpy()
    c = s.copy()
    assert c.__cuda_array_interface__["data"][0] != x.data.ptr
    assert float(cp.asarray(c)[1, 2]) == 5.0
    # Pickled by value (through CuPy), into device memory of its own.
    import pickle

    p = pickle.loads(pickle.dumps(s))
    assert type(p) is cai.GPUStorage and (p.halo, p.alignment_size) == (s.halo, 64)
    assert p.__cuda_array_interface__["data"][0] != x.data.ptr
    assert bool((cp.asarray(p) == x).all())
    # The truth value is CuPy's: one item's own, ambiguous for more.
    assert bool(s[1:2, 2:3]) and not cai.zeros((1,), device="gpu", managed=None)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(s)


def test_gt4py_mirror_copies_when_the_other_side_changed(cp):
    s = cai.zeros((3, 5), device="gpu")  # managed defaults to "gt4py"
    assert s.managed == "gt4py" and s.sync_state.state == cai.SyncState.SYNC_CLEAN
    s.to_numpy()[...] = 4.0
    s.set_host_modified()
    assert s.sync_state.state == cai.SyncState.SYNC_HOST_DIRTY
    x = cp.asarray(s)  # reading the device side copies the host first
    assert float(x.sum()) == 60.0 and s.sync_state.state == cai.SyncState.SYNC_CLEAN
    x[...] = 1.0
    s.set_device_modified()
    assert float(s.to_numpy().sum()) == 15.0  # reading the host copies the device first
    # __setitem__: a GPU value writes on the device, a host value on the host
    s[0, 0] = cp.asarray(9.0)
    assert s.sync_state.state == cai.SyncState.SYNC_DEVICE_DIRTY
    assert s.to_numpy()[0, 0] == 9.0
    s[0, 1] = 8.0
    assert s.sync_state.state == cai.SyncState.SYNC_HOST_DIRTY
    assert float(cp.asarray(s)[0, 1]) == 8.0
    # GDP-3: to_ndarray gives the device's view where there is one, __array__ the host's.
    assert isinstance(s.to_ndarray(), cp.ndarray) and isinstance(s.__array__(), np.ndarray)
    # (views sharing the state and copies having their own: test_own_device.py)
    gt = s.__gt_data_interface__
    assert set(gt) == {None, "gpu"}
    assert gt["gpu"]["acquire"].__name__ == "host_to_device"
    assert gt["gpu"]["touch"].__name__ == "set_device_modified"


def test_cuda_managed_storage_is_one_address(cp):
    s = cai.ones((8,), device="gpu", managed="cuda")
    host = s.__array_interface__["data"][0]
    dev = s.__cuda_array_interface__["data"][0]
    assert host == dev
    x = cp.asarray(s)
    x *= 3
    cp.cuda.Device().synchronize()
    assert (s.to_numpy() == 3).all()


def test_wrap_cupy_and_numpy_as_a_mirrored_pair(cp):
    host = np.arange(6.0).reshape(2, 3)
    dev = cp.asarray(host)
    s = cai.as_storage(host, dev, sync_state=cai.SyncState(cai.SyncState.SYNC_HOST_DIRTY))
    assert s.managed == "gt4py" and s.sync_state.state == cai.SyncState.SYNC_HOST_DIRTY
    host[0, 0] = 42.0
    assert float(cp.asarray(s)[0, 0]) == 42.0  # the host side was newest: copied
    d = cai.gt_data(s)
    assert d.host is not None and d.gpu is not None


def test_storage_from_cupy_makes_a_device_storage(cp):
    x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    s = cai.storage(x, managed=None)
    assert s.device == "gpu" and s.dtype == np.float32 and type(s) is cai.GPUStorage
    assert cp.asarray(s).data.ptr != x.data.ptr
    assert bool((cp.asarray(s) == x).all())


def test_storage_copies_a_host_and_device_pair_from_the_newer(cp):
    host = np.arange(6.0).reshape(2, 3)
    dev = cp.asarray(host) * 10
    # The device side is the newer: the copy is made from it, and neither input changes.
    s = cai.storage(host, dev, sync_state=cai.SyncState(cai.SyncState.SYNC_DEVICE_DIRTY))
    assert type(s) is cai.SoftwareManagedGPUStorage
    assert s.sync_state.state == cai.SyncState.SYNC_DEVICE_DIRTY
    assert (s.to_numpy() == host * 10).all()
    assert bool((cp.asarray(s) == dev).all())
    assert (host == np.arange(6.0).reshape(2, 3)).all()
    assert bool((dev == cp.asarray(np.arange(6.0).reshape(2, 3)) * 10).all())
    # The host side (the default): copied from it.
    s = cai.storage(host, dev)
    assert (s.to_numpy() == host).all() and bool((cp.asarray(s) == cp.asarray(host)).all())


def test_device_storage_takes_index_arrays_with_a_data_interface(cp):
    x = cp.arange(12.0).reshape(3, 4)
    s = cai.storage(x, managed=None)
    idx = cp.asarray([2, 0])
    host_idx = np.array([1, 2])

    class Gt:
        def __init__(self, entries):
            self.__gt_data_interface__ = entries

    # The device entry is read for a device storage; a host-only object's host entry is
    # given to CuPy, which takes NumPy index arrays.
    assert bool((s[Gt({"gpu": idx.__cuda_array_interface__})] == x[idx]).all())
    assert bool((s[Gt({None: host_idx.__array_interface__}), 0] == x[host_idx, 0]).all())
    s[Gt({"gpu": idx.__cuda_array_interface__})] = -1.0
    assert float(cp.asarray(s)[2, 3]) == -1.0 and float(cp.asarray(s)[1, 3]) == 7.0


def test_values_with_a_gpu_entry_are_written_on_the_device(cp):
    # GDP-3 ("Choosing the Device"): a value whose __gt_data_interface__ has a "gpu" entry is
    # on the GPU; its `acquire` runs before the read.
    x = cp.full((3,), 4.0)
    calls = []

    class Gt:
        __gt_data_interface__ = {"gpu": dict(x.__cuda_array_interface__, acquire=lambda: calls.append("gpu"))}

    s = cai.zeros((2, 3), device="gpu")  # mirrored
    s[0] = Gt()
    assert s.sync_state.state == cai.SyncState.SYNC_DEVICE_DIRTY and calls == ["gpu"]
    assert (s.to_numpy()[0] == 4).all()
    h = cai.zeros((2, 3))  # a host storage takes it through a copy to the host
    h[1] = Gt()
    assert (h.to_numpy()[1] == 4).all() and calls == ["gpu", "gpu"]
