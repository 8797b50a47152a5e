"""A mirrored storage over buffers it does not own (`as_storage(host, device)`,
`storage(host, device, copy=False)`) touches only what the pair describes.

- Strided views: the mirror copies exactly the view's items in either direction, never the
  bytes between them, which belong to the rest of the producers' arrays (and differ on the
  two sides).
- Read-only buffers: a side declared read-only (a read-only NumPy array, a descriptor whose
  `data` flag is True) is never written: the pair is refused, or its bytes stay as they were.
- Dtypes: a host and a device array of different dtypes are no pair (the bytes would be
  reinterpreted), as `storage()` already says when it copies.

Strided device views are `DeviceArray.view(shape, strides=..., offset=...)` of a DeviceArray
holding a whole base array, with the host view's own shape, strides and byte offset into its
base, so both sides have one layout. Only cai and NumPy are used: these run on a GPU and on
the emulated driver.
"""

import numpy as np
import pytest

import cai

WRAPS = {
    "as_storage": cai.as_storage,
    "storage(copy=False)": lambda data, device_data, **kw: cai.storage(data, device_data, copy=False, **kw),
}

# (base shape, its order, the view of it): gaps between items, between rows, negative strides.
VIEWS = {
    "1-D step 4": ((16,), "C", np.s_[1::4]),
    "1-D backwards": ((16,), "C", np.s_[13::-4]),
    "2-D [::2, 1::3]": ((6, 9), "C", np.s_[::2, 1::3]),
    "2-D columns 1:4": ((4, 6), "C", np.s_[:, 1:4]),
    "2-D backwards rows": ((7, 8), "C", np.s_[::-2, 2::3]),
    "F order [1::2, ::2]": ((5, 6), "F", np.s_[1::2, ::2]),
}

HOST_GAP = -1
DEVICE_GAP = -2


def device_bytes(dev, dtype, shape, order="C"):
    """All the items of a DeviceArray's buffer (of `shape`, in either `order`), read back
    (`to_bytes` gives them in C order whatever the array's order)."""
    del order
    return np.frombuffer(dev.to_bytes(), dtype=dtype).reshape(shape).copy()


def strided_pair(base_shape, order, key, dtype, host_items, device_items):
    """A host base (gaps HOST_GAP) and a DeviceArray base (gaps DEVICE_GAP) in `order`, and
    views of the two with one layout holding `host_items` and `device_items`."""
    host_base = np.full(base_shape, HOST_GAP, dtype=dtype, order=order)
    host_view = host_base[key]
    host_view[...] = host_items
    dev_init = np.full(base_shape, DEVICE_GAP, dtype=dtype, order=order)
    dev_init[key] = device_items
    dev = cai.DeviceArray(dev_init, order=order)
    offset = host_view.ctypes.data - host_base.ctypes.data
    dev_view = dev.view(host_view.shape, strides=host_view.strides, offset=offset)
    assert (np.frombuffer(cai.as_cuda_array(dev_view).copy_to_host(), dtype=dtype).reshape(host_view.shape)
            == device_items).all()
    return host_base, host_view, dev, dev_view, dev_init


def items_of(shape, dtype, start):
    return (np.arange(np.prod(shape)).reshape(shape) + start).astype(dtype)


def read_device(s, dtype, shape):
    return np.frombuffer(cai.as_cuda_array(s).copy_to_host(), dtype=dtype).reshape(shape)


# ------------------------------------------------------------------ strided views


@pytest.mark.parametrize("how", ["synchronize", "host_to_device", "export", "setitem", "force"])
@pytest.mark.parametrize("wrap", WRAPS)
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("dtype", [np.float64, np.int16])
def test_host_to_device_copies_only_the_views_items(view, wrap, how, dtype):
    base_shape, order, key = VIEWS[view]
    shape = np.empty(base_shape)[key].shape
    new = items_of(shape, dtype, 10)
    host_base, host_view, dev, dev_view, dev_init = strided_pair(
        base_shape, order, key, dtype, new, items_of(shape, dtype, 50))
    host_before = host_base.copy()
    s = WRAPS[wrap](host_view, dev_view)
    assert type(s) is cai.SoftwareManagedGPUStorage and s.shape == shape
    if how == "setitem":
        s[...] = new  # a host write through the storage marks the host
    elif how != "force":
        s.set_host_modified()
    if how in ("synchronize", "setitem"):
        s.synchronize()
    elif how == "host_to_device":
        s.host_to_device()
    elif how == "force":
        s.host_to_device(force=True)
    else:
        assert (read_device(s, dtype, shape) == new).all()
    after = device_bytes(dev, dtype, base_shape, order)
    expected = dev_init.copy()
    expected[key] = new
    # The items were copied, and every byte between them is the device's own.
    assert (after == expected).all(), after
    assert (host_base == host_before).all()


@pytest.mark.parametrize("how", ["synchronize", "device_to_host", "to_numpy", "sync_state", "force"])
@pytest.mark.parametrize("wrap", WRAPS)
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("dtype", [np.float64, np.int16])
def test_device_to_host_copies_only_the_views_items(view, wrap, how, dtype):
    base_shape, order, key = VIEWS[view]
    shape = np.empty(base_shape)[key].shape
    new = items_of(shape, dtype, 50)
    host_base, host_view, dev, dev_view, dev_init = strided_pair(
        base_shape, order, key, dtype, items_of(shape, dtype, 10), new)
    kw = {}
    if how == "sync_state":
        kw["sync_state"] = cai.SyncState(cai.SyncState.SYNC_DEVICE_DIRTY)
    s = WRAPS[wrap](host_view, dev_view, **kw)
    assert type(s) is cai.SoftwareManagedGPUStorage and s.shape == shape
    if how not in ("sync_state", "force"):
        s.set_device_modified()
    if how in ("synchronize", "sync_state"):
        s.synchronize()
    elif how == "device_to_host":
        s.device_to_host()
    elif how == "force":
        s.device_to_host(force=True)
    else:
        assert (s.to_numpy() == new).all()
    expected = np.full(base_shape, HOST_GAP, dtype=dtype)
    expected[key] = new
    # The items were copied, and every byte between them is the host's own.
    assert (host_base == expected).all(), host_base
    assert (device_bytes(dev, dtype, base_shape, order) == dev_init).all()


@pytest.mark.parametrize("wrap", WRAPS)
def test_round_trips_of_a_strided_pair_keep_both_sides_gaps(wrap):
    base_shape, key = (6, 9), np.s_[::2, 1::3]
    shape = np.empty(base_shape)[key].shape
    host_base, host_view, dev, dev_view, dev_init = strided_pair(
        base_shape, "C", key, np.float64, items_of(shape, np.float64, 10), items_of(shape, np.float64, 10))
    s = WRAPS[wrap](host_view, dev_view)
    for value in (3.0, 4.0, 5.0):
        s[...] = value
        s.synchronize()  # host -> device
        s.set_device_modified()
        s.synchronize()  # device -> host
    host_expected = np.full(base_shape, float(HOST_GAP))
    host_expected[key] = 5.0
    dev_expected = dev_init.copy()
    dev_expected[key] = 5.0
    assert (host_base == host_expected).all()
    assert (device_bytes(dev, np.float64, base_shape) == dev_expected).all()


# ------------------------------------------------------------------ read-only sides

READ_ONLY = r"(?i)read-?only"


def refused_as_read_only(call):
    """The storage `call()` makes, or None where it refused the pair for a read-only side."""
    try:
        return call()
    except (ValueError, TypeError) as e:
        assert "read-only" in str(e).lower() or "readonly" in str(e).lower(), e
        return None


def attempt(action):
    """Runs a mirror operation; it may refuse (raise), but what it wrote is checked after."""
    try:
        action()
    except Exception:  # noqa: BLE001 - any refusal will do, the memory is what is checked
        pass


def read_only_hosts():
    """Read-only host arrays of items 0..5 (float64), and the bytes each must keep."""
    raw = bytes(np.arange(6.0).tobytes())  # a fresh bytes object: NumPy views it read-only
    a = np.frombuffer(raw, dtype=np.float64)
    b = np.arange(6.0)
    b.flags.writeable = False
    # A producer declaring its host entry read-only (GDP-3: `data` = (ptr, True)).
    c_mem = np.arange(6.0)
    c_desc = dict(c_mem.__array_interface__)
    c_desc["data"] = (c_desc["data"][0], True)
    return {"frombuffer(bytes)": (a, raw), "writeable=False": (b, b), "declared read-only": (c_desc, c_mem)}


class Described:
    """An object exposing `desc` as its `__array_interface__`, keeping `keep` alive."""

    def __init__(self, desc, keep):
        self.desc, self.keep = desc, keep

    @property
    def __array_interface__(self):
        return self.desc


class ReadOnlyDevice:
    """A DeviceArray exported read-only: its descriptor's `data` flag is True."""

    def __init__(self, dev):
        self.dev = dev

    @property
    def __cuda_array_interface__(self):
        desc = dict(self.dev.__cuda_array_interface__)
        desc["data"] = (desc["data"][0], True)
        return desc


HOST_ACTIONS = {
    "set_device_modified+device_to_host": lambda s: (s.set_device_modified(), s.device_to_host()),
    "set_device_modified+synchronize": lambda s: (s.set_device_modified(), s.synchronize()),
    "set_device_modified+to_numpy": lambda s: (s.set_device_modified(), s.to_numpy()),
    "device_to_host(force=True)": lambda s: s.device_to_host(force=True),
}


@pytest.mark.parametrize("action", HOST_ACTIONS)
@pytest.mark.parametrize("wrap", WRAPS)
@pytest.mark.parametrize("kind", ["frombuffer(bytes)", "writeable=False", "declared read-only"])
def test_a_read_only_host_is_never_written(kind, wrap, action):
    host, memory = read_only_hosts()[kind]
    if isinstance(host, dict):
        host = Described(host, memory)
    before = bytes(bytearray(memory))  # a copy (bytes(b) of a bytes object is b itself)
    dev = cai.DeviceArray(np.full(6, 7.0))
    s = refused_as_read_only(lambda: WRAPS[wrap](host, dev))
    if s is not None:
        attempt(lambda: HOST_ACTIONS[action](s))
    assert bytes(memory) == before, np.frombuffer(bytes(memory), dtype=np.float64)
    assert (np.frombuffer(dev.to_bytes(), dtype=np.float64) == 7.0).all()


def _write_items(s):
    s[...] = 99.0
    s.synchronize()


DEVICE_ACTIONS = {
    "set_host_modified+synchronize": lambda s: (s.set_host_modified(), s.synchronize()),
    "set_host_modified+host_to_device": lambda s: (s.set_host_modified(), s.host_to_device()),
    "set_host_modified+export": lambda s: (s.set_host_modified(), cai.as_cuda_array(s).copy_to_host()),
    "host_to_device(force=True)": lambda s: s.host_to_device(force=True),
    "setitem+synchronize": _write_items,
}


@pytest.mark.parametrize("action", DEVICE_ACTIONS)
@pytest.mark.parametrize("wrap", WRAPS)
def test_a_read_only_device_buffer_is_never_written(wrap, action):
    dev = cai.DeviceArray(np.full(6, 7.0))
    host = np.arange(6.0)
    s = refused_as_read_only(lambda: WRAPS[wrap](host, ReadOnlyDevice(dev)))
    if s is not None:
        attempt(lambda: DEVICE_ACTIONS[action](s))
    assert (np.frombuffer(dev.to_bytes(), dtype=np.float64) == 7.0).all(), np.frombuffer(dev.to_bytes())


@pytest.mark.parametrize("wrap", WRAPS)
def test_a_read_only_gt_data_pair_is_never_written(wrap):
    # One producer, both entries declared read-only: neither side may be written.
    mem = np.arange(6.0)
    dev = cai.DeviceArray(np.full(6, 7.0))
    host_desc = dict(mem.__array_interface__)
    host_desc["data"] = (host_desc["data"][0], True)
    producer = type("Producer", (), {})()
    producer.keep = (mem, dev)
    producer.__gt_data_interface__ = {None: host_desc, "gpu": ReadOnlyDevice(dev).__cuda_array_interface__}
    wrap_one = cai.as_storage if wrap == "as_storage" else (lambda d: cai.storage(d, copy=False))
    s = refused_as_read_only(lambda: wrap_one(producer))
    if s is not None:
        for action in (*HOST_ACTIONS.values(), *DEVICE_ACTIONS.values()):
            attempt(lambda: action(s))
    assert (mem == np.arange(6.0)).all(), mem
    assert (np.frombuffer(dev.to_bytes(), dtype=np.float64) == 7.0).all()


# ------------------------------------------------------------------ dtypes

PAIRS = [  # one item size, one shape: the layouts agree and only the dtypes differ
    (np.float64, np.int64),
    (np.int64, np.float64),
    (np.int32, np.float32),
    (np.float16, np.int16),
    (np.complex64, np.float64),
    (np.bool_, np.uint8),
    (np.uint32, np.int32),
]


def assert_dtype_refusal(call, host_dtype, dev_dtype):
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    # The message says what differs: "dtype", or both types, by name or by typestr.
    host_dtype, dev_dtype = np.dtype(host_dtype), np.dtype(dev_dtype)
    assert ("dtype" in msg or (host_dtype.name in msg and dev_dtype.name in msg)
            or (host_dtype.str in msg and dev_dtype.str in msg)), msg


@pytest.mark.parametrize("wrap", WRAPS)
@pytest.mark.parametrize("host_dtype, dev_dtype", PAIRS, ids=lambda d: np.dtype(d).name)
def test_a_host_and_device_pair_of_different_dtypes_is_refused(host_dtype, dev_dtype, wrap):
    host = np.arange(6).reshape(2, 3).astype(host_dtype)
    dev = cai.DeviceArray(np.arange(6).reshape(2, 3).astype(dev_dtype))
    assert_dtype_refusal(lambda: WRAPS[wrap](host, dev), host_dtype, dev_dtype)
    # storage() refuses the same pair when it copies.
    with pytest.raises(ValueError):
        cai.storage(host, dev)
    # The inputs are as they were.
    assert (host == np.arange(6).reshape(2, 3).astype(host_dtype)).all()
    assert dev.to_bytes() == np.arange(6).reshape(2, 3).astype(dev_dtype).tobytes()


@pytest.mark.parametrize("wrap", WRAPS)
def test_a_gt_data_object_with_entries_of_different_dtypes_is_refused(wrap):
    host = np.arange(6.0)
    dev = cai.DeviceArray(np.arange(6, dtype=np.int64))
    producer = type("Producer", (), {})()
    producer.keep = (host, dev)
    producer.__gt_data_interface__ = {None: host.__array_interface__, "gpu": dev.__cuda_array_interface__}
    wrap_one = cai.as_storage if wrap == "as_storage" else (lambda d: cai.storage(d, copy=False))
    assert_dtype_refusal(lambda: wrap_one(producer), np.float64, np.int64)


def test_a_refused_structured_pair_names_the_descr_that_differs():
    # Same typestr ('|V8') on both sides, different fields: the message shows them.
    host = np.zeros(3, [("y", "<f8")])
    dev = cai.DeviceArray(np.zeros(3))

    class Named:
        @property
        def __cuda_array_interface__(self):
            return dict(dev.__cuda_array_interface__, typestr="|V8", descr=[("x", "<f8")])

    with pytest.raises(ValueError) as e:
        cai.as_storage(host, Named())
    assert "('x', '<f8')" in str(e.value), str(e.value)


def test_a_typed_descriptors_fields_descr_is_ignored_as_numpy_ignores_it():
    # '<f8' with a fields descr is float64 to NumPy (a descr says what the items are only for
    # a void type string): the pair is float64 on both sides, and wraps.
    dev = cai.DeviceArray(np.zeros(3))

    class Named:
        @property
        def __cuda_array_interface__(self):
            return dict(dev.__cuda_array_interface__, descr=[("x", "<f8")])

    s = cai.as_storage(np.zeros(3), Named())
    assert s.dtype == np.float64
