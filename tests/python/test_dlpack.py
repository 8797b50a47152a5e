"""DLPack on the host, against NumPy's own DLPack and against producers built here with ctypes.

- Export: ``numpy.from_dlpack`` of every cai array kind (the derive's classes, storages, import
  views) is zero-copy (a write through NumPy is seen by cai), read-only stays read-only, copies
  are copies; every dtype maps to NumPy's; what DLPack cannot say is a BufferError naming it.
- Import: ``cai.from_dlpack`` of NumPy arrays of every dtype and layout equals the import
  through ``__array_interface__`` (hypothesis); NumPy -> cai -> NumPy round trips.
- Deleters: cai's exported tensors (counted by ``_dlpack_live_exports``) and a producer's
  (counted by its ctypes deleter) are deleted exactly once on every path: consumed, never
  consumed, refused, and from another thread without the GIL.
- Malformed tensors: each field a clear error naming it, the deleter still called once.
"""

import ctypes
import gc
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cai
import cai.examples as ex

live = cai._native._dlpack_live_exports

DTYPES = ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"]


from dlpack_producer import NAMES, Producer, api, capsule_name, managed

# --- export ----------------------------------------------------------------------------------


def grid(rows=3, cols=4):
    g = ex.Grid(rows, cols)
    for i in range(rows):
        for j in range(cols):
            g.set(i, j, i * 10 + j)
    return g


def test_numpy_reads_the_derives_classes_zero_copy():
    g = grid()
    a = np.from_dlpack(g)
    assert a.shape == (3, 4) and a.dtype == np.float64
    assert a.ctypes.data == g.__array_interface__["data"][0]
    a[1, 2] = -5.0
    assert g.get(1, 2) == -5.0  # NumPy's write is seen in Rust
    assert g.__dlpack_device__() == (1, 0)
    f = np.from_dlpack(ex.Grid(2, 3, "F"))
    assert f.flags.f_contiguous and f.strides == (8, 16)


def test_read_only_stays_read_only():
    c = ex.counts(5)
    a = np.from_dlpack(c)
    assert list(a) == [0, 1, 2, 3, 4] and not a.flags.writeable
    capsule = c.__dlpack__(max_version=(1, 0))
    assert managed(capsule).flags & 1  # READ_ONLY
    # The legacy capsule cannot say "read-only": refused, as NumPy refuses it.
    with pytest.raises(BufferError, match="read-only"):
        c.__dlpack__()
    # A copy is the consumer's own: writable, flagged IS_COPIED.
    copy = c.__dlpack__(max_version=(1, 0), copy=True)
    assert managed(copy).flags == 2
    b = np.from_dlpack(c, copy=True)
    assert b.flags.writeable
    b[0] = 99
    assert np.from_dlpack(c)[0] == 0


def test_copies_are_copies():
    g = grid()
    a = np.from_dlpack(g, copy=True)
    a[0, 0] = 123.0
    assert g.get(0, 0) == 0.0
    assert np.array_equal(a[1:], np.from_dlpack(g)[1:])
    # A strided view is copied with its strides (the span it covers).
    s = cai.zeros((4, 6), dtype="i4")
    np.asarray(s)[:] = np.arange(24).reshape(4, 6)
    view = s[::2, ::-3]
    c = np.from_dlpack(view, copy=True)
    assert np.array_equal(c, np.asarray(view))


def test_storages_and_views_export():
    for dtype in ["f4", "i8", "c16", "?"]:
        s = cai.ones((2, 3), dtype=dtype)
        a = np.from_dlpack(s)
        assert a.dtype == np.dtype(dtype) and a.shape == (2, 3)
        a[0, 0] = 0
        assert np.asarray(s)[0, 0] == 0
    x = np.arange(12.0).reshape(3, 4)[:, ::-2]
    v = cai.as_host_array(x)
    y = np.from_dlpack(v)
    assert y.ctypes.data == x.ctypes.data and y.strides == x.strides
    assert np.array_equal(y, x)


@pytest.mark.parametrize("typestr", DTYPES)
def test_every_dtype_maps_to_numpys(typestr):
    itemsize = np.dtype(typestr).itemsize
    b = ex.Buffer(4 * itemsize, typestr, [2, 2])
    a = np.from_dlpack(b)
    assert a.dtype == np.dtype(typestr) and a.shape == (2, 2)


@pytest.mark.parametrize(
    "typestr,why",
    [
        (">f4", "byte order"),
        ("|V8", "structured"),
        ("<M8[s]", "DLPack has bool"),
        ("|S4", "DLPack has bool"),
        ("<f16", "DLPack has bool"),
    ],
)
def test_what_dlpack_cannot_say_is_a_buffer_error_naming_it(typestr, why):
    v = cai.as_host_array(np.zeros(2, dtype=typestr))
    with pytest.raises(BufferError, match=why) as e:
        v.__dlpack__(max_version=(1, 0))
    assert typestr in str(e.value)


def test_structured_storages_and_odd_strides_are_refused():
    s = cai.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")])
    with pytest.raises(BufferError, match="structured"):
        np.from_dlpack(s)
    b = ex.Buffer(64, "<f8", [3], strides=[12])
    with pytest.raises(BufferError, match="multiples of the item size 8"):
        np.from_dlpack(b)


def test_a_mask_is_refused():
    x = np.arange(4.0)
    m = np.ones(4, dtype="?")
    d = dict(x.__array_interface__, mask=m)
    v = cai.from_array_interface(d, owner=x)
    with pytest.raises(BufferError, match="mask"):
        v.__dlpack__(max_version=(1, 0))


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(stream=0), ValueError, "0 is ambiguous"),
        (dict(stream=1), ValueError, "`stream` = 1: None"),
        (dict(stream="1"), TypeError, "`stream` must be None or an int"),
        (dict(stream=True), TypeError, "`stream`"),
        (dict(max_version=(1,)), TypeError, "`max_version` must be"),
        (dict(max_version=(-1, 0)), ValueError, "from 0 to"),
        (dict(dl_device=(2, 0)), BufferError, r"not to dl_device \(2, 0\)"),
        (dict(dl_device=(4, 0)), BufferError, "cannot export to dl_device"),
        (dict(dl_device=[1, 0]), TypeError, "`dl_device` must be"),
        (dict(copy=1), TypeError, "`copy` must be None, True or False, not 1"),
        (dict(stream=2**64), ValueError, "below 2\\*\\*64"),
        (dict(max_version=(2**70, 0)), ValueError, "from 0 to 2\\*\\*32 - 1"),
        (dict(dl_device=(1, 5)), BufferError, r"cannot export to dl_device \(1, 5\)"),
    ],
)
def test_bad_arguments_name_the_keyword(kwargs, exc, match):
    before = live()
    with pytest.raises(exc, match=match):
        grid().__dlpack__(**kwargs)
    assert live() == before


def dlpack_exporters():
    """One object of every kind of cai class with `__dlpack__`: a derived class, a storage, an
    import's view."""
    return [grid(), cai.zeros((3, 4), dtype="f4"), cai.from_dlpack(np.zeros((3, 4), np.float32))]


@pytest.mark.parametrize("obj", dlpack_exporters(), ids=lambda o: type(o).__name__)
def test_the_fast_dlpack_method_reads_its_keywords_as_python_does(obj):
    """`__dlpack__` is cai's own fast-call method descriptor, not PyO3's: its keywords are
    matched by address, then by text; everything else is Python's own TypeError."""
    import inspect

    method = type(obj).__dlpack__
    name = type(obj).__qualname__
    assert str(inspect.signature(method)) == "(self, /, *, stream=None, max_version=None, dl_device=None, copy=None)"
    assert "DLPack" in method.__doc__
    # Keywords built at run time are not interned: matched by their text.
    built = "".join(["max_", "version"])
    assert built == "max_version" and built is not sys.intern(built)
    assert capsule_name(obj.__dlpack__(**{built: (1, 0)})) == "dltensor_versioned"
    assert capsule_name(obj.__dlpack__(**{"stream": None, "max_version": None, "dl_device": None, "copy": None})) == "dltensor"
    before = live()
    for call, match in [
        (lambda: obj.__dlpack__(None), rf"^{name}\.__dlpack__\(\) takes 0 positional arguments but 1 was given$"),
        (lambda: obj.__dlpack__(1, 2, max_version=(1, 0)), "but 2 were given"),
        (lambda: obj.__dlpack__(bogus=1), rf"^{name}\.__dlpack__\(\) got an unexpected keyword argument 'bogus'$"),
        (lambda: obj.__dlpack__(**{"max_version\udc80": 1}), r"unexpected keyword argument 'max_version\\udc80'"),
        (lambda: method(np.zeros(3)), "doesn't apply to a 'numpy.ndarray' object"),
        (lambda: method(), "needs an argument"),
    ]:
        with pytest.raises(TypeError, match=match):
            call()
    assert live() == before
    # Bound, unbound and through `getattr`, as any method.
    assert capsule_name(method(obj, max_version=(1, 3))) == "dltensor_versioned"
    assert capsule_name(getattr(obj, "__dlpack__")()) == "dltensor"


def test_a_failing_dlpack_call_releases_what_it_held_at_once():
    """Found by an attack on the fast `__dlpack__`: it ran outside PyO3's count of attached
    frames, so the references an error dropped (its type, its value, one put aside while its
    message was made) waited in PyO3's pool for the next PyO3 call: 100000 failing calls
    held 100000 references to `TypeError`."""

    class Bad:
        pass

    class Unprintable:
        def __repr__(self):
            raise RuntimeError("no repr")

    s = cai.zeros((3, 4))
    before = sys.getrefcount(TypeError), sys.getrefcount(Bad)
    for _ in range(1000):
        with pytest.raises(TypeError, match="`copy` must be None, True or False"):
            s.__dlpack__(copy=Bad())
    assert (sys.getrefcount(TypeError), sys.getrefcount(Bad)) == before
    u = Unprintable()
    ref = weakref.ref(u)
    with pytest.raises(TypeError, match="`max_version`"):
        s.__dlpack__(max_version=u)
    del u
    gc.collect()
    assert ref() is None


def test_a_derived_class_exports_what_it_holds_now():
    """A derived class's host exports share a template per equal builder (address, shape,
    strides, type, flags): every export must still be of the object as it is, through objects
    freed and made again at the same addresses with other shapes and orders."""
    rng = np.random.default_rng(5)
    for i in range(300):
        rows, cols = (int(n) for n in rng.integers(1, 5, size=2))
        order = "CF"[i % 2]
        g = ex.Grid(rows, cols, order)
        expected = rng.standard_normal((rows, cols))
        for r in range(rows):
            for c in range(cols):
                g.set(r, c, float(expected[r, c]))
        for _ in range(2):  # (the second export from the kept template)
            a = np.from_dlpack(g)
            np.testing.assert_array_equal(a, expected)
            want = (8 * cols, 8) if order == "C" else (8, 8 * rows)
            # (NumPy may rewrite the stride of a dimension of one.)
            assert [s for s, n in zip(a.strides, a.shape) if n > 1] == [s for s, n in zip(want, a.shape) if n > 1]
            assert a.base is not None
            del a
        c = g.__dlpack__(max_version=(1, 3))
        m = managed(c)
        assert [m.dl_tensor.shape[k] for k in range(2)] == [rows, cols]
        del m, c, g


def test_an_index_that_changes_its_mind_is_read_once():
    """Found by an attack: `stream` was read twice (as i64, then u64), and an `__index__`
    answering 2**63 then 0 reached a Rust `expect` (a PanicException)."""

    class Flaky:
        answers = iter([2**63, 0, 0])

        def __index__(self):
            return next(self.answers)

    with pytest.raises((TypeError, ValueError)):
        grid().__dlpack__(stream=Flaky())


def test_cai_from_dlpack_names_a_bad_copy():
    with pytest.raises(TypeError, match="`copy` must be None, True or False, not 'yes'"):
        cai.from_dlpack(np.zeros(2), copy="yes")


def test_capsule_kinds():
    g = grid()
    assert capsule_name(g.__dlpack__()) == "dltensor"
    assert capsule_name(g.__dlpack__(max_version=(0, 8))) == "dltensor"
    v = g.__dlpack__(max_version=(1, 0))
    assert capsule_name(v) == "dltensor_versioned"
    t = managed(v)
    assert (t.version.major, t.flags) == (1, 0)
    assert t.dl_tensor.ndim == 2 and [t.dl_tensor.shape[i] for i in range(2)] == [3, 4]
    assert [t.dl_tensor.strides[i] for i in range(2)] == [4, 1]  # in items
    assert (t.dl_tensor.dtype.code, t.dl_tensor.dtype.bits, t.dl_tensor.dtype.lanes) == (2, 64, 1)
    assert (t.dl_tensor.device.device_type, t.dl_tensor.device.device_id) == (1, 0)
    # dl_device naming the data's own device, and copy=False, share.
    assert np.from_dlpack(g, device="cpu", copy=False).ctypes.data == g.__array_interface__["data"][0]


def test_zero_size_and_zero_dim():
    s = cai.zeros((0, 3))
    assert np.from_dlpack(s).shape == (0, 3)
    b = ex.Buffer(8, "<f8", [])
    a = np.from_dlpack(b)
    assert a.shape == () and a.dtype == np.float64


# --- import ----------------------------------------------------------------------------------


def same_import(x):
    """`cai.from_dlpack(x)` and `cai.as_host_array(x)` agree."""
    d = cai.from_dlpack(x)
    h = cai.as_host_array(x)
    assert isinstance(d, cai.HostArrayView)
    assert (d.shape, d.typestr, d.ptr, d.readonly) == (h.shape, h.typestr, h.ptr, h.readonly)
    # (A dimension of one item has no stride that matters: NumPy's interface may say C order.)
    if x.size:
        assert [s for s, n in zip(d.strides, x.shape) if n > 1] == [s for s, n in zip(h.strides, x.shape) if n > 1]
    assert d.tobytes() == h.tobytes() == x.tobytes()
    return d


@st.composite
def numpy_arrays(draw):
    """Arrays of every dtype with random shapes, steps (negative too), offsets into their base,
    transposes and read-only flags."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    steps = [draw(st.sampled_from([1, 2, -1, -3])) for _ in shape]
    offset = draw(st.integers(0, 3))
    full = [n * abs(step) for n, step in zip(shape, steps)]
    base = np.arange(offset + int(np.prod(full)), dtype=np.int64).astype(dtype)[offset:].reshape(full)
    x = base[tuple(slice(None, None, step) for step in steps)] if shape else base
    if x.ndim > 1 and draw(st.booleans()):
        x = x.T
    if draw(st.booleans()):
        x.flags.writeable = False
    return x


@settings(max_examples=150, deadline=None)
@given(numpy_arrays())
def test_imports_equal_the_array_interface_import(x):
    same_import(x)


def test_round_trip_numpy_cai_numpy():
    for dtype in DTYPES:
        x = np.arange(24).astype(dtype).reshape(4, 6)[1:, ::-2]
        y = np.from_dlpack(cai.from_dlpack(x))
        assert y.dtype == x.dtype and np.array_equal(y, x) and np.shares_memory(x, y)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    assert not np.from_dlpack(cai.from_dlpack(ro)).flags.writeable


# An exact ndarray's import reads the tensor its `__dlpack__` would export from the array's
# fields (`numpy_array.rs`); what NumPy refuses or exports otherwise is left to `__dlpack__`.

try:
    import ml_dtypes

    EXTENDED = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
except ImportError:  # (without ml_dtypes, the others still run)
    EXTENDED = []

# Every kind NumPy has: its DLPack types, and the ones its `__dlpack__` refuses or leaves to a
# registry (other byte order, long double, objects, strings, records, dates, user types).
EVERY_DTYPE = DTYPES + [
    ">i4", ">f8", ">c16", np.longdouble, np.clongdouble, "O", "U3", "S2", "M8[s]", "m8[ms]",
    "V4", [("a", "<i4"), ("b", "<f4")], np.dtype("<f8", metadata={"unit": "m"}),
] + EXTENDED


@st.composite
def any_numpy_arrays(draw):
    """Arrays of every dtype: steps (negative too), transposes, read-only, 0-d and empty, and
    the layouts NumPy itself makes hard: broadcasts (stride 0), strides that are no multiple of
    the item size (and unaligned data), one-item arrays with such strides, and arrays NumPy
    made of a DLPack import (a capsule at the end of their bases)."""
    dtype = np.dtype(draw(st.sampled_from(EVERY_DTYPE)))
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    how = draw(st.sampled_from(["steps", "broadcast", "odd strides", "imported"]))
    if how == "odd strides" and not dtype.hasobject:  # (NumPy makes no objects of bytes)
        # `itemsize + 1` bytes apart (or any, for one item), from an odd offset.
        strides = [draw(st.sampled_from([dtype.itemsize + 1, 1, 0, -(dtype.itemsize + 1)])) for _ in shape]
        extent = sum(abs(st_) * max(n - 1, 0) for st_, n in zip(strides, shape))
        start = 1 + sum(-st_ * max(n - 1, 0) for st_, n in zip(strides, shape) if st_ < 0)
        buf = np.zeros(start + extent + dtype.itemsize, np.uint8)
        x = np.ndarray(tuple(shape), dtype, buffer=buf, offset=start, strides=tuple(strides))
    else:
        steps = [draw(st.sampled_from([1, 2, -1])) for _ in shape]
        full = [n * abs(step) for n, step in zip(shape, steps)]
        base = np.zeros(full, dtype)
        if how == "imported" and dtype.str in DTYPES:
            base = np.from_dlpack(cai.zeros(base.shape, dtype=dtype.str))
        x = base[tuple(slice(None, None, step) for step in steps)] if shape else base
        if how == "broadcast":
            x = np.broadcast_to(x, (2, *x.shape))
    if x.ndim > 1 and draw(st.booleans()):
        x = x.T
    if x.flags.writeable and draw(st.booleans()):
        x.flags.writeable = False
    return x


@settings(max_examples=400, deadline=None)
@given(any_numpy_arrays())
def test_an_ndarray_read_from_its_fields_is_what_its_dlpack_gives(x):
    """Where the import reads an array's fields, it makes of them what it makes of the tensor
    NumPy's `__dlpack__` exports: the same type, address, shape, strides and read-only flag.
    Where NumPy refuses the array (a BufferError), the fields are not read."""
    fields, dunder = cai._native._numpy_paths(x)
    if fields is not None:
        assert fields == dunder
        assert not dunder.startswith("error"), dunder


def test_which_ndarrays_are_read_from_their_fields():
    """Every DLPack type in any layout NumPy exports is read from the array (so the test above
    compares something); the rest, and anything but an exact ndarray, is asked `__dlpack__`."""
    read = lambda x: cai._native._numpy_paths(x)[0] is not None
    for dtype in DTYPES:
        x = np.zeros((3, 4), dtype)
        for y in [x, x[::2, ::-3], x.T, x[1], np.asarray(x[0, 0]), x[:0], np.broadcast_to(x[0], (2, 4))]:
            assert read(y), (dtype, y.shape, y.strides)
    y = np.zeros(4)
    y.flags.writeable = False
    assert read(y) and read(np.zeros(9, np.uint8)[1:].view("<f8")) and read(np.arange(2.0)[np.newaxis])
    odd = np.ndarray((2,), "<f8", buffer=np.zeros(24, np.uint8), offset=1, strides=(9,))
    one = np.ndarray((1, 1), "<f8", buffer=np.zeros(16, np.uint8), offset=1, strides=(3, 5))
    assert read(one) and "strides: [0, 0]" in cai._native._numpy_paths(one)[1]
    imported = np.from_dlpack(cai.zeros((2, 3)))
    for y in [np.zeros(3, ">f8"), np.zeros(3, np.longdouble), np.zeros(3, object), np.zeros(3, "U2"),
              np.zeros(3, "M8[s]"), np.zeros(3, [("a", "<i4")]), odd, imported, imported[1:].T,
              np.zeros(3).view(np.matrix), np.ma.zeros(3)]:
        assert not read(y), y
    for y in [[1.0], 1.0, cai.zeros(3)]:
        assert not read(y)


def test_ndarrays_numpy_refuses_are_refused_as_numpy_refuses_them():
    """What NumPy's `__dlpack__` refuses is its own error, through cai's import too."""
    odd = np.ndarray((2,), "<f8", buffer=np.zeros(24, np.uint8), offset=1, strides=(9,))
    for x, match in [(np.zeros(3, ">f8"), "byte order"), (np.zeros(3, np.longdouble), "IEEE"),
                     (np.zeros(3, object), "dtypes"), (odd, "multiple of itemsize")]:
        with pytest.raises(BufferError, match=match):
            cai.from_dlpack(x)
        assert cai._native._numpy_paths(x)[1].startswith("error")


OWNED_NDARRAY = type("OwnedNdarray", (np.ndarray,), {})


@pytest.mark.parametrize("importer", [
    cai.from_dlpack, cai.as_host_array, lambda x: cai.from_array_interface(x.__array_interface__, x),
], ids=["from_dlpack", "as_host_array", "from_array_interface"])
@pytest.mark.parametrize("make", [np.zeros, OWNED_NDARRAY], ids=["ndarray", "subclass"])
def test_a_viewed_ndarray_is_not_resized_under_its_view(importer, make):
    """Found by an attack: reading an ndarray's fields, the DLPack import held the array once,
    where NumPy's export holds it besides its consumer. `ndarray.resize` moves the memory of an
    array it counts no more than two references to (its caller's and one other), so
    `v.owner.resize(...)`, the view holding the only other, left the view reading freed memory
    (`as_host_array` had the same hole). An import holds a NumPy array (or a subclass's) twice,
    released with the view; a temporary array lives on in its view."""
    v = importer(make((4,)))
    with pytest.raises(ValueError, match="resize"):
        v.owner.resize(1 << 20)
    x = make((6,))
    x[:] = np.arange(6.0)
    before = sys.getrefcount(x)
    v = importer(x)
    del v
    gc.collect()
    assert sys.getrefcount(x) == before
    v = importer(np.arange(6.0) * 2)
    gc.collect()
    assert np.asarray(v).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_telling_a_numpy_owner_runs_no_metaclass_code():
    """Found by a review: until an import had met NumPy's array type, telling whether an owner
    is a NumPy array (to hold it twice) read its type's `__mro__`, which a metaclass may
    override: its exception became a panic, a `PanicException` in Python. The chain of base
    types is read instead. (A process of its own: NumPy's type must not be known yet.)"""
    script = """
import numpy as np, cai
class Meta(type):
    @property
    def __mro__(cls):
        raise KeyError("asked for __mro__")
class Odd(metaclass=Meta):
    def __init__(self):
        self.a = np.arange(3.0)
        self.__array_interface__ = self.a.__array_interface__
v = cai.as_host_array(Odd())
assert v.tobytes() == np.arange(3.0).tobytes()
S = type("S", (np.ndarray,), {})
x = S((4,))
v = cai.as_host_array(x)
try:
    v.owner.resize(1 << 20)
except ValueError:
    pass
else:
    raise AssertionError("a subclass met first was not held twice")
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]


def test_writes_through_an_import_reach_numpy_and_read_only_is_refused():
    x = np.zeros((2, 3))
    v = cai.from_dlpack(x)
    v.set((1, 2), 7.5)
    assert x[1, 2] == 7.5
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cai.from_dlpack(x).set((0, 0), 1.0)


def test_the_producer_deleter_runs_once_when_the_view_goes():
    x = np.arange(6.0)
    p = Producer(x, shape=(2, 3), strides=(3, 1))
    v = cai.from_dlpack(p)
    assert p.calls == [{"max_version": (1, 3)}]  # no stream for host memory
    assert p.deleted == 0
    assert v.owner is p and v.get((1, 0)) == 3.0
    w = np.from_dlpack(v)  # and on to NumPy, which keeps the view
    del v
    gc.collect()
    assert p.deleted == 0 and w[1, 2] == 5.0
    del w
    gc.collect()
    assert p.deleted == 1


def test_legacy_producers_are_asked_again_without_the_new_keywords():
    x = np.arange(3.0)
    p = Producer(x, legacy_only=True)
    v = cai.from_dlpack(p)
    assert len(p.calls) == 2 and p.calls[1] == {}
    assert v.tobytes() == x.tobytes()
    del v
    gc.collect()
    assert p.deleted == 1


def test_fields_read_as_dlpack_says():
    x = np.arange(8.0)
    # Null strides: C order (before DLPack 1.2).
    v = cai.from_dlpack(Producer(x, shape=(2, 4), strides=None))
    assert v.strides == (32, 8)
    # The view's descriptor (made when first asked) says so as the tensor did: strides None;
    # strides given are kept, C order or not.
    assert v.__array_interface__["strides"] is None and v.version == 3
    v = cai.from_dlpack(Producer(x, shape=(2, 4), strides=(4, 1)))
    assert v.__array_interface__["strides"] == (32, 8)
    # byte_offset moves the first item.
    v = cai.from_dlpack(Producer(x, shape=(2,), strides=(1,), byte_offset=16))
    assert v.ptr == x.ctypes.data + 16 and v.get((1,)) == 3.0
    # bfloat16 is '<V2' (as cai and PyTorch export it).
    b = np.zeros(4, dtype="<u2")
    assert cai.from_dlpack(Producer(b, shape=(4,), strides=(1,), dtype=(4, 16, 1))).typestr == "<V2"
    # Read-only flag.
    assert cai.from_dlpack(Producer(x, shape=(8,), strides=(1,), flags=1)).readonly
    # Zero-size with a null pointer, and zero dimensions.
    assert cai.from_dlpack(Producer(None, data=0, shape=(0, 3), strides=(3, 1))).shape == (0, 3)
    assert cai.from_dlpack(Producer(x, shape=(), strides=None)).shape == ()


@pytest.mark.parametrize(
    "fields,exc,match",
    [
        (dict(data=0, shape=(2,)), ValueError, r"dl_tensor.data` = NULL"),
        (dict(shape=(2, -3)), ValueError, r"dl_tensor.shape\[1\]` = -3: negative"),
        (dict(dtype=(8, 8, 1)), ValueError, r"dl_tensor.dtype.code` = 8: float8"),
        (dict(dtype=(10, 16, 1)), ValueError, r"dl_tensor.dtype.bits` = 16: .*float8_e4m3fn"),
        (dict(dtype=(42, 8, 1)), ValueError, r"dl_tensor.dtype.code` = 42: unknown"),
        (dict(dtype=(2, 32, 4)), ValueError, r"dl_tensor.dtype.lanes` = 4"),
        (dict(dtype=(2, 8, 1)), ValueError, r"dl_tensor.dtype.bits` = 8"),
        (dict(version=(2, 0)), ValueError, r"`version` = 2.0"),
        (dict(ndim=65, shape=(1,)), ValueError, r"dl_tensor.ndim` = 65"),
        (dict(ndim=-1, shape=(1,)), ValueError, r"dl_tensor.ndim` = -1"),
        (dict(strides=(1 << 62,)), ValueError, r"dl_tensor.strides\[0\]"),
        (dict(device=(1, 0), data=None), None, None),
    ],
)
def test_malformed_tensors_name_the_field_and_are_deleted_once(fields, exc, match):
    x = np.arange(8.0)
    fields.setdefault("strides", (1,) * len(fields.get("shape", (3,))))
    if fields.get("data", 1) is None:
        fields.pop("data")
    p = Producer(x, **fields)
    if exc is None:
        cai.from_dlpack(p)
    else:
        with pytest.raises(exc, match=match):
            cai.from_dlpack(p)
    gc.collect()
    assert p.deleted == 1


def test_a_tensor_elsewhere_than_its_device_said_is_refused():
    # __dlpack_device__ says host memory, the tensor says device 0's: refused, deleted.
    p = Producer(np.arange(3.0), device=(2, 0))
    p.__dlpack_device__ = lambda: (1, 0)
    with pytest.raises(BufferError, match="kDLCUDA"):
        cai.from_dlpack(p)
    gc.collect()
    assert p.deleted == 1
    # A device cai does not read at all (ROCm).
    q = Producer(np.arange(3.0), device=(10, 0))
    with pytest.raises(BufferError, match=r"returned \(10, 0\)"):
        cai.from_dlpack(q)
    assert q.calls == [] and q.deleted == 0


@pytest.mark.parametrize(
    "name,match", [(b"foo", "named 'foo'"), (b"used_dltensor", "consumed already"), (b"used_dltensor_versioned", "consumed already")]
)
def test_capsules_not_ours_to_take_are_refused_and_left_alone(name, match):
    p = Producer(np.arange(3.0), name=name)
    with pytest.raises(ValueError, match=match):
        cai.from_dlpack(p)
    gc.collect()
    assert p.deleted == 0  # not consumed: the producer's (here: nobody's) to delete


def test_storages_read_dlpack_only_producers_everywhere():
    """Found by an attack: `storage(p)` and `s[...] = p` went to NumPy, which reads no DLPack,
    and `as_storage` said a producer whose `__dlpack__` failed exposed nothing."""

    class OnlyDlpack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)

    x = np.arange(6.0)
    assert np.asarray(cai.storage(OnlyDlpack(x))).tolist() == x.tolist()
    s = cai.zeros(6)
    s[...] = OnlyDlpack(x)
    assert np.asarray(s).tolist() == x.tolist()

    class Refusing(OnlyDlpack):
        def __dlpack__(self, **kw):
            raise TypeError("cannot export a tensor that requires grad")

    with pytest.raises(TypeError, match="requires grad"):
        cai.as_storage(Refusing(x))


def test_what_dlpack_returns_must_be_a_capsule():
    class Liar:
        def __dlpack__(self, **kw):
            return 42

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(ValueError, match="returned a int"):
        cai.from_dlpack(Liar())


def test_producer_errors_propagate():
    class Broken:
        def __dlpack__(self, **kw):
            raise KeyError("mine")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(KeyError, match="mine"):
        cai.from_dlpack(Broken())
    with pytest.raises(AttributeError):
        cai.from_dlpack(object())


def test_numpy_subclasses_are_asked_their_device():
    """`cai.from_dlpack` asks an exact NumPy array nothing but `__dlpack__` (its memory is the
    host's); a subclass may say otherwise, so it is asked, its keywords and its errors its own."""
    seen = []

    class Elsewhere(np.ndarray):
        def __dlpack_device__(self):
            raise KeyError("asked")

        def __dlpack__(self, **kw):
            seen.append(kw)
            return np.asarray(self).__dlpack__(**kw)

    x = np.arange(6.0)
    with pytest.raises(KeyError, match="asked"):
        cai.from_dlpack(x.view(Elsewhere))
    assert np.asarray(cai.from_dlpack(x)).tolist() == x.tolist()
    seen.clear()
    # Every host import passes the same keywords, however often (the shared keyword dict).
    class Counted(np.ndarray):
        def __dlpack__(self, **kw):
            seen.append(dict(kw))
            kw.clear()  # (the callee's copy: the next import's keywords are whole)
            return np.asarray(self).__dlpack__(max_version=(1, 3))

    for _ in range(3):
        assert np.asarray(cai.from_dlpack(x.view(Counted))).tolist() == x.tolist()
    assert seen == [{"max_version": (1, 3)}] * 3


def test_a_module_standing_as_numpy_decides_nothing():
    """Found by an attack: `cai.from_dlpack` took `sys.modules["numpy"].ndarray` at its first
    call for NumPy's array type, forever: a stand-in module (`sys.modules["numpy"] = cupy`, a
    mock) made that type's objects host memory, never asked their device nor passed a stream;
    and the lookup ran the module's `__getattr__`, swallowing what it raised. (A process of its
    own: the first call is the one that counts.)"""
    script = """
import sys, types, cai
calls, looked = [], []
class P:
    def __dlpack_device__(self):
        calls.append("device")
        return (1, 0)
    def __dlpack__(self, **kw):
        calls.append("dlpack")
        return self.a.__dlpack__(**kw)
fake = types.ModuleType("numpy")
fake.ndarray = P
def __getattr__(name):
    looked.append(name)
    raise KeyboardInterrupt(name)
fake.__getattr__ = __getattr__
sys.modules["numpy"] = fake
try:
    cai.from_dlpack(object())
except AttributeError:
    pass
del sys.modules["numpy"]
import numpy as np
p = P()
p.a = np.arange(3.0)
assert np.asarray(cai.from_dlpack(p)).tolist() == [0.0, 1.0, 2.0]
assert calls == ["device", "dlpack"], calls
assert looked == [], looked
sys.modules["numpy"] = fake
assert np.asarray(cai.from_dlpack(np.arange(2.0))).tolist() == [0.0, 1.0]
assert looked == [], looked
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


# --- deleters of cai's exports ---------------------------------------------------------------


def test_every_export_is_deleted_exactly_once():
    gc.collect()
    before = live()
    g = grid()
    for _ in range(50):
        np.from_dlpack(g)  # consumed, then freed with NumPy's array
        g.__dlpack__(max_version=(1, 0))  # never consumed: the capsule deletes it
        g.__dlpack__()
        np.from_dlpack(g, copy=True)
    gc.collect()
    assert live() == before
    held = [np.from_dlpack(g) for _ in range(5)]
    assert live() == before + 5
    del held
    gc.collect()
    assert live() == before


def test_a_capsule_keeps_its_exporter_alive():
    g = grid()
    ref = weakref.ref(g)
    capsule = g.__dlpack__(max_version=(1, 0))
    a = np.from_dlpack(grid())
    del g
    gc.collect()
    assert ref() is not None
    del capsule
    gc.collect()
    assert ref() is None
    s = cai.zeros(4)
    sref = weakref.ref(s)
    a = np.from_dlpack(s)
    del s
    gc.collect()
    assert sref() is not None and a.sum() == 0
    del a
    gc.collect()
    assert sref() is None


def test_a_view_of_an_import_keeps_the_producer_alive():
    x = np.arange(5.0)
    ref = weakref.ref(x)
    v = cai.from_dlpack(x)
    del x
    gc.collect()
    assert ref() is not None and v.get((4,)) == 4.0
    del v
    gc.collect()
    assert ref() is None


def test_the_interpreter_says_who_holds_the_gil():
    """The deleter releases the exporter without PyO3's attach where the interpreter says this
    thread holds the GIL: the functions it asks (`PyThreadState_GetUnchecked` from 3.13,
    `_PyThreadState_UncheckedGet` before) are found on every Python the suite runs on."""
    assert cai._native._holds_gil()


def test_the_deleter_may_run_on_another_thread_without_the_gil():
    gc.collect()
    before = live()
    g = grid()
    ref = weakref.ref(g)
    capsules = [g.__dlpack__(max_version=(1, 0)) for _ in range(8)]
    del g
    tensors = []
    for c in capsules:
        t = managed(c)
        assert api.PyCapsule_SetName(c, NAMES[b"used_dltensor_versioned"]) == 0  # consumed
        tensors.append((ctypes.addressof(t), t.deleter))
    del capsules
    gc.collect()
    assert live() == before + 8 and ref() is not None

    def consume(address, deleter):
        deleter(address)  # a ctypes call: the GIL is released around it

    threads = [threading.Thread(target=consume, args=t) for t in tensors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert live() == before
    gc.collect()
    assert ref() is None


class _HoldsItsView:
    """An object that keeps its own view: `self.view` reads `self`."""

    def __init__(self):
        self.a = np.arange(3.0)

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)

    @property
    def __array_interface__(self):
        return self.a.__array_interface__


@pytest.mark.parametrize("importer", [cai.from_dlpack, cai.as_host_array])
def test_a_view_its_owner_holds_is_collected(importer):
    o = _HoldsItsView()
    o.view = importer(o)  # a cycle: o -> its view -> o (the view's owner)
    np.testing.assert_array_equal(np.asarray(o.view), o.a)
    gone = weakref.ref(o)
    del o
    gc.collect()
    assert gone() is None


def test_max_version_is_read_on_every_call():
    class Index:
        def __init__(self, n):
            self.n = n

        def __index__(self):
            return self.n

    s = cai.zeros(3)
    v = (1, 3)
    for max_version, name in [
        (v, "dltensor_versioned"),
        ((0, 9), "dltensor"),
        (v, "dltensor_versioned"),
        ((Index(0), Index(1)), "dltensor"),
        (tuple([1, 0]), "dltensor_versioned"),
        (v, "dltensor_versioned"),
    ]:
        assert capsule_name(s.__dlpack__(max_version=max_version)) == name, max_version
    # Fresh tuples and the same ones again, read the same.
    fresh = [tuple([1, n]) for n in range(8)]
    for _ in range(2):
        for t in fresh + [v, (0, 9)]:
            expected = "dltensor" if t[0] == 0 else "dltensor_versioned"
            assert capsule_name(s.__dlpack__(max_version=t)) == expected, t
    # A tuple read is known by its address only while it lives: one freed, and another at
    # its address, is read anew (the last tuple seen is kept alive until another is seen).
    for _ in range(200):
        t = tuple([1, 0])
        assert capsule_name(s.__dlpack__(max_version=t)) == "dltensor_versioned"
        held = sys.getrefcount(t)
        del t
        u = tuple([0, 9])
        assert capsule_name(s.__dlpack__(max_version=u)) == "dltensor"
        assert sys.getrefcount(u) == held
    with pytest.raises(ValueError, match="max_version"):
        s.__dlpack__(max_version=(-1, 0))


@pytest.mark.parametrize("make", ["cai.from_dlpack(v)", "cai.as_host_array(v)", "cai.as_storage(v)"])
def test_a_long_chain_of_views_is_released_without_a_crash(make):
    # Each view holds the one it was made of, so releasing the last releases the chain, one
    # link inside the other: without a trashcan (CPython's, which PyO3's deallocation lacks) the
    # C stack overflowed past some 20,000 links, a segfault. NumPy's own chain of 100,000
    # `a = np.from_dlpack(a)` is released fine. In a process of its own.
    code = f"import gc, cai\nv = cai.zeros((4,))\nfor _ in range(100_000):\n    v = {make}\ndel v\ngc.collect()\nprint('released')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "released"), done.stderr[-500:]
