"""GDP-3 storages on the host: creation functions and their keyword arguments, the lookup
order, alignment, views, NumPy sharing, copies, bad arguments, and (without a GPU) device
requests failing clearly. Property tests with hypothesis over dtypes, 1 to 4 dimensions,
layouts, alignments and aligned indices."""

import copy
import gc
import pickle
import re
import sys
import types
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cai

DTYPES = ["f8", "f4", "i8", "i4", "i2", "u1", "?", "c16", "f2"]


def item_address(s, index):
    a = s.__array_interface__
    return a["data"][0] + sum(i * st_ for i, st_ in zip(index, np.asarray(s).strides))


# ---------------------------------------------------------------- creation


def test_zeros_ones_full_empty_defaults():
    z = cai.zeros((3, 4))
    assert z.shape == (3, 4) and z.dtype == np.float64
    assert z.halo == ((0, 0), (0, 0)) and z.dims == ("I", "J") and z.layout == (0, 1)
    assert z.alignment_size == 1 and z.aligned_index == (0, 0) and z.device is None
    assert not np.asarray(z).any()
    assert (cai.ones((2, 3), dtype="i2").to_numpy() == 1).all()
    assert cai.ones((2,), dtype="i2").dtype == np.int16
    f = cai.full((2, 2), 2.5, dtype=np.float32)
    assert f.dtype == np.float32 and (f.to_numpy() == 2.5).all()
    e = cai.empty((5,), dtype="u1")
    assert e.shape == (5,) and e.nbytes == 5
    assert cai.zeros(7).shape == (7,)
    assert cai.zeros(()).shape == () and cai.zeros(()).to_numpy()[()] == 0


def test_full_converts_like_numpy():
    assert cai.full((2,), 3.9, dtype="i4").to_numpy().tolist() == [3, 3]
    assert cai.full((1,), 1 + 2j, dtype="c8").to_numpy()[0] == 1 + 2j
    rec = np.dtype([("a", "<i4"), ("b", "<f8")])
    r = cai.full((3,), (7, 1.5), dtype=rec)
    assert r.dtype == rec and r.to_numpy()[2]["a"] == 7 and r.to_numpy()[1]["b"] == 1.5
    with pytest.raises(ValueError, match="not a scalar"):
        cai.full((2,), [1, 2])


@pytest.mark.parametrize(
    "value, dtype, exc",
    [(300, "u1", OverflowError), (2**200, "i1", OverflowError), ("abc", "f8", ValueError), (object(), "f4", TypeError)],
)
def test_fill_values_numpy_cannot_convert_keep_numpys_error_and_name_the_value(value, dtype, exc):
    # NumPy's own message names neither the argument nor (for 2**200) the value.
    with pytest.raises(exc) as numpy_error:
        np.asarray(value, dtype=dtype)
    for call in [lambda: cai.full((2,), value, dtype=dtype), lambda: cai.full_like(cai.zeros((2,), dtype=dtype), value)]:
        with pytest.raises(exc, match=re.escape(f"fill_value = {value!r}: cannot be stored as {np.dtype(dtype)}: ")) as e:
            call()
        assert str(e.value).endswith(str(numpy_error.value)) and type(e.value.__cause__) is exc


def test_numpy_shares_host_memory_both_ways():
    s = cai.zeros((3, 4), halo=(1, 1))
    a = np.asarray(s)
    a[1, 2] = 5.0
    assert s[1, 2] == 5.0
    s[2, 3] = 7.0
    assert a[2, 3] == 7.0
    assert np.shares_memory(a, s.to_numpy())
    assert bytes(s.data)[:8] == bytes(a.data)[:8]


def test_array_follows_numpys_protocol():
    # NumPy 2's `__array__(dtype=None, copy=None)`: a view unless converting, copy=True always
    # copies, copy=False never does (ValueError where converting would).
    s = cai.full((2, 3), 1.5, halo=(1, 0))
    ptr = s.__array_interface__["data"][0]
    at = lambda a: a.__array_interface__["data"][0]
    for view in [s.__array__(), s.__array__(np.float64), s.__array__(copy=False), s.__array__("f8", np.False_)]:
        assert isinstance(view, np.ndarray) and at(view) == ptr and view.dtype == np.float64
    for copied in [s.__array__(copy=True), s.__array__(np.float64, copy=True), s.__array__("f4"), s.__array__("f4", copy=True)]:
        assert at(copied) != ptr and (copied == 1.5).all()
    assert s.__array__("f4").dtype == np.float32 and s.__array__(np.int16).dtype == np.int16
    with pytest.raises(ValueError, match=r"copy=False.*float64 and dtype = float32 needs a conversion"):
        s.__array__("f4", copy=False)
    with pytest.raises(TypeError, match=r"^copy: 'x' is not a bool or None"):
        s.__array__(copy="x")
    with pytest.raises(TypeError, match=r"^copy: 1 is not a bool or None"):
        s.__array__(copy=1)
    with pytest.raises(TypeError, match=r"^dtype = 5: Cannot interpret"):
        s.__array__(5)
    # NumPy asks for the same through its own calls.
    assert at(np.asarray(s)) == ptr and at(np.array(s, copy=None)) == ptr
    assert at(np.array(s)) != ptr
    with pytest.raises(ValueError):
        np.array(s, dtype="f4", copy=False)


def test_layout_table_presets_and_dims():
    for dims, expected in [("IJK", {"F": (2, 1, 0), "C": (0, 1, 2), "gtx86": (0, 1, 2)}),
                           ("KJI", {"F": (2, 1, 0), "C": (0, 1, 2), "gtx86": (2, 1, 0)})]:
        for preset, layout in expected.items():
            s = cai.zeros((2, 3, 4), defaults=preset, dims=dims)
            assert s.layout == layout, (dims, preset)
            assert s.defaults == preset
    # data dimensions: outermost, "0" first, as GT4Py lays them out; K stays contiguous
    s = cai.zeros((2, 3, 4, 5), defaults="gtx86", dims=["I", "J", "K", "0"])
    assert s.strides == (96, 32, 8, 192) and s.layout == (1, 2, 3, 0)
    s = cai.zeros((2, 3, 4, 5, 6), defaults="gtcuda", dims="IJK01", device=None)
    assert s.layout == (4, 3, 2, 0, 1) and s.strides[0] == 8
    # F strides
    assert cai.zeros((2, 3), defaults="F").strides == (8, 16)


def spanning_strides(s):
    """The strides of the dimensions of more than one item (the others address nothing)."""
    return [st for st, n in zip(s.strides, s.shape) if n > 1]


def test_layout_reads_back_as_given_where_strides_tie():
    # A dimension of one item has the stride of the one inside it, so the strides alone do
    # not say which is the more contiguous: the layout the storage was made with does.
    for shape, layout in [((1, 10, 10), (2, 1, 0)), ((4, 1, 3), (2, 0, 1)), ((1, 1, 2), (2, 0, 1)),
                          ((1, 1, 1, 2), (0, 1, 3, 2))]:
        s = cai.zeros(shape, layout=layout)
        assert s.layout == layout
        for same in [cai.zeros_like(s), cai.empty_like(s), s.copy(), cai.storage(s), cai.as_storage(s),
                     pickle.loads(pickle.dumps(s))]:
            # (as_storage reads the strides NumPy's rule leaves out of a contiguous storage's
            # dict: those of dimensions of one item may then differ, addressing nothing)
            assert same.layout == layout and spanning_strides(same) == spanning_strides(s)
        assert s.T.layout == tuple(reversed(layout)) and s[0].layout == tuple(
            sorted(range(len(shape) - 1), key=lambda d: layout[1:][d]).index(d) for d in range(len(shape) - 1))
    assert cai.zeros((1, 10, 10), defaults="F").layout == (2, 1, 0)
    # No items: no stride says anything (those outside the empty dimension are 0).
    for layout in [(0, 1, 2), (2, 1, 0), (1, 0, 2)]:
        s = cai.zeros((2, 0, 2), layout=layout)
        assert s.layout == layout and cai.zeros_like(s).layout == layout
    # Wrapping: any order the strides follow may be given; without one, ties go by axis.
    f = np.zeros((1, 10, 10), order="F")
    assert cai.as_storage(f, layout=(2, 1, 0)).layout == (2, 1, 0)
    assert cai.as_storage(f, layout=(1, 2, 0)).layout == (1, 2, 0)
    assert cai.as_storage(f).layout == (1, 2, 0)
    with pytest.raises(ValueError, match=r"^layout = \[0, 1, 2\] does not match the buffer's strides"):
        cai.as_storage(f, layout=(0, 1, 2))


def test_lookup_order_explicit_preset_data_fallback():
    base = cai.zeros((4, 6), layout=(1, 0), halo=(1, 2), alignment_size=16)
    like = cai.zeros_like(base)  # the data
    assert (like.layout, like.halo, like.alignment_size) == ((1, 0), ((1, 1), (2, 2)), 16)
    assert cai.zeros_like(base, defaults="C").layout == (0, 1)  # preset over data
    assert cai.zeros_like(base, defaults="C", layout=(1, 0)).layout == (1, 0)  # explicit first
    assert cai.zeros_like(base, dtype="i4").dtype == np.int32
    assert cai.ones_like(base).to_numpy().all() and cai.empty_like(base).shape == (4, 6)
    assert (cai.full_like(base, 3).to_numpy() == 3).all()
    # _like of a plain NumPy array: its shape, dtype and stride order
    f = np.asfortranarray(np.ones((3, 5), dtype="i8"))
    assert cai.zeros_like(f).layout == (1, 0) and cai.zeros_like(f).dtype == np.int64


@pytest.mark.parametrize("alignment", [8, 16, 32, 64, 256])
def test_aligned_index_is_aligned_and_only_contiguous_dim_is_padded(alignment):
    s = cai.zeros((3, 5, 7), alignment_size=alignment, aligned_index=(1, 2, 3))
    assert item_address(s, (1, 2, 3)) % alignment == 0
    per_block = max(alignment // 8, 1)
    padded = -(-7 // per_block) * per_block
    assert s.strides == (5 * padded * 8, padded * 8, 8)
    # default aligned index: the halo's start
    h = cai.zeros((6, 6), halo=(2, 1), alignment_size=alignment)
    assert item_address(h, (2, 1)) % alignment == 0
    assert h.domain_view.__array_interface__["data"][0] % alignment == 0


def test_gtcuda_preset_without_gpu_fails_clearly():
    with pytest.raises(RuntimeError, match='device="gpu" needs a CUDA device'):
        cai.zeros((2, 2, 2), defaults="gtcuda")
    # explicit device=None overrides the preset's device
    s = cai.zeros((2, 3, 4), defaults="gtcuda", device=None)
    assert s.layout == (2, 1, 0) and s.alignment_size == 32 * 8, "32 items, as GT4Py aligns"
    assert cai.zeros((2,), "f4", defaults="gt:gpu", device=None).alignment_size == 32 * 4



# ---------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "kwargs, exc, message",
    [
        ({"layout": (0, 0)}, ValueError, r"layout = \[0, 0\] is not a permutation of 0..2"),
        ({"layout": (0, 1, 2)}, ValueError, "layout = .* is not a permutation"),
        ({"halo": (3, 0)}, ValueError, r"halo = \(3, 3\) on dimension 0 needs 6 points but the dimension has 4"),
        ({"halo": (1,)}, ValueError, "halo has 1 entries but the storage has 2 dimensions"),
        ({"halo": ((1, 2, 3), 0)}, TypeError, "expected a sequence of one int .* or \\(start, end\\) pair"),
        ({"halo": (-1, 0)}, ValueError, "halo: -1 must be a non-negative int"),
        ({"alignment_size": 12}, ValueError, "alignment_size = 12 is not a multiple of the item size 8"),
        ({"alignment_size": 0}, ValueError, "alignment_size = 0: use 1 for no alignment"),
        ({"aligned_index": (0, 9)}, ValueError, r"aligned_index = \[0, 9\] is outside the shape"),
        ({"aligned_index": (0,)}, ValueError, "aligned_index has 1 entries"),
        ({"defaults": "gtmc"}, ValueError, 'defaults = "gtmc" is not a preset'),
        ({"device": "cpu"}, ValueError, 'device = "cpu": use None'),
        ({"device": "gpu:"}, ValueError, r'device = "gpu:": use None \(host memory\), "gpu" \(the current device\) or "gpu:N"'),
        ({"device": "gpu:-1"}, ValueError, 'device = "gpu:-1": use None'),
        ({"device": "gpu:+1"}, ValueError, 'device = "gpu:\\+1": use None'),
        ({"device": "gpu: 1"}, ValueError, 'device = "gpu: 1": use None'),
        ({"device": "gpu:99999999999"}, ValueError, 'device = "gpu:99999999999": use None'),
        ({"device": "cuda:0"}, ValueError, 'device = "cuda:0": use None'),
        ({"managed": "yes"}, ValueError, 'managed = "yes": use None, "gt4py"'),
        ({"dims": "IX"}, ValueError, '"X" is not a dimension'),
        ({"dims": "II"}, ValueError, '"I" appears twice'),
        ({"dims": ["0", "00"]}, ValueError, r'dims = \["0", "00"\]: "0" appears twice'),
        ({"dims": ["I", "-1"]}, ValueError, '"-1" is not a dimension'),
        ({"dims": "IJK"}, ValueError, "dims has 3 entries but the storage has 2"),
        ({"dims": 5}, TypeError, "dims = 5: expected a str"),
        ({"bogus": 1}, TypeError, "zeros\\(\\) got an unexpected keyword argument 'bogus'"),
        # NumPy's own errors, led by the argument's name and value (NumPy names neither)
        ({"dtype": 5}, TypeError, "dtype = 5: Cannot interpret '5' as a data type"),
        ({"dtype": "q7"}, TypeError, "dtype = 'q7': data type 'q7' not understood"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        cai.zeros((4, 5), **kwargs)


# Reference signatures: the creators read their arguments as these Python functions would.
def _zeros(shape, dtype=None, **kwargs): ...
def _full(shape, fill_value, dtype=None, **kwargs): ...
def _zeros_like(data, dtype=None, **kwargs): ...
def _full_like(data, fill_value, dtype=None, **kwargs): ...


@pytest.mark.parametrize(
    "func, reference, args, kwargs",
    [
        (cai.zeros, _zeros, (), {}),
        (cai.zeros, _zeros, ((2,), None, 3), {}),
        (cai.zeros, _zeros, ((2,),), {"shape": (3,)}),
        (cai.zeros, _zeros, ((2,), "f4"), {"dtype": "f8"}),
        (cai.full, _full, (), {}),
        (cai.full, _full, ((2,),), {}),
        (cai.full, _full, (), {"fill_value": 1}),
        (cai.full, _full, ((2,), 1, "f4", 5), {}),
        (cai.zeros_like, _zeros_like, (), {"dtype": "f4"}),
        (cai.full_like, _full_like, (np.zeros(2),), {"data": np.zeros(2), "fill_value": 1}),
    ],
)
def test_creators_refuse_calls_as_python_does(func, reference, args, kwargs):
    with pytest.raises(TypeError) as expected:
        reference(*args, **kwargs)
    message = str(expected.value).replace(reference.__name__ + "()", func.__name__ + "()")
    with pytest.raises(TypeError) as got:
        func(*args, **kwargs)
    assert str(got.value) == message


def test_creators_take_their_parameters_by_position_or_keyword():
    a = np.arange(6, dtype="i2").reshape(2, 3)
    for s in [
        cai.zeros(shape=(2, 3), dtype="i2"),
        cai.full(fill_value=0, shape=(2, 3), dtype="i2", halo=None),
        cai.zeros_like(data=a),
        cai.full_like(a, dtype=None, fill_value=0),
        cai.empty_like(a, None, layout=(1, 0)),
    ]:
        assert s.shape == (2, 3) and s.dtype == np.int16
    # An explicit None for dtype is the default; for fill_value it is a value, as in NumPy.
    assert cai.ones((2,), dtype=None).dtype == np.float64
    assert np.isnan(cai.full((2,), None).to_numpy()).all()
    with pytest.raises(TypeError, match="^keywords must be strings$"):
        cai.zeros((2,), **{1: 2})
    with pytest.raises(TypeError, match=r"full_like\(\) got an unexpected keyword argument 'shape'"):
        cai.full_like(a, 1, shape=(2,))
    # inspect reads the signatures (the creators are plain C functions).
    import inspect

    assert str(inspect.signature(cai.full)) == "(shape, fill_value, dtype=None, **kwargs)"
    assert str(inspect.signature(cai.ones_like)) == "(data, dtype=None, **kwargs)"


def test_creators_take_every_form_of_call():
    # The creators are fast-call functions reading CPython's argument array themselves: every
    # way Python can call them reaches them with the same arguments.
    import functools
    import pickle

    with pytest.raises(TypeError, match=r"^zeros\(\) missing 1 required positional argument: 'shape'$"):
        cai.zeros()
    with pytest.raises(TypeError, match=r"^full\(\) missing 2 required positional arguments: 'shape' and 'fill_value'$"):
        cai.full(dtype="f4")
    with pytest.raises(TypeError, match=r"^ones\(\) takes from 1 to 2 positional arguments but 3 were given$"):
        cai.ones((2,), "f4", 7)
    with pytest.raises(TypeError, match=r"^empty\(\) got multiple values for argument 'dtype'$"):
        cai.empty((2,), "f4", dtype="f8")
    for s in [
        cai.full(*((2, 3), 7), **{"dtype": "i2", "halo": ((1, 0), 0)}),
        functools.partial(cai.full, dtype="i2", halo=((1, 0), 0))((2, 3), 7),
        cai.full.__call__((2, 3), fill_value=7, dtype="i2", halo=((1, 0), 0)),
        pickle.loads(pickle.dumps(cai.full))((2, 3), 7, "i2", halo=((1, 0), 0)),
    ]:
        assert s.shape == (2, 3) and s.dtype == np.int16 and s.halo == ((1, 0), (0, 0))
        assert (s.to_numpy() == 7).all()
    for name in ["empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like"]:
        f = getattr(cai, name)
        assert (f.__name__, f.__module__) == (name, "cai._native")


def test_dtypes_asked_again_resolve_the_same():
    # Resolved dtypes are remembered by argument object; asking again, in any spelling, must
    # give the same answer as NumPy, and objects whose dtype can change are asked each time.
    spellings = ["f4", "float32", np.float32, np.dtype("f4"), float, int, complex, bool, ">i2"]
    for _ in range(3):
        for spelling in spellings:
            assert cai.zeros((2,), dtype=spelling).dtype == np.dtype(spelling), spelling
    # A structured dtype's field names can be reassigned: the new names are seen.
    rec = np.dtype([("a", "<i4"), ("b", "<f8")])
    names = lambda s: [field[0] for field in s.__array_interface__["descr"]]  # noqa: E731
    assert names(cai.zeros((1,), dtype=rec)) == ["a", "b"]
    rec.names = ("x", "y")
    assert names(cai.zeros((1,), dtype=rec)) == ["x", "y"]

    # An object with a `dtype` attribute is asked each time.
    class HasDtype:
        dtype = np.dtype("i2")

    holder = HasDtype()
    assert cai.zeros((1,), dtype=holder).dtype == np.int16
    holder.dtype = np.dtype("u8")
    assert cai.zeros((1,), dtype=holder).dtype == np.uint64
    # More spellings than are remembered: all resolve, and the first ones again after them.
    for n in range(40):
        assert cai.empty((1,), dtype=f"V{n + 1}").dtype == np.dtype(f"V{n + 1}")
    for spelling in spellings:
        assert cai.zeros((2,), dtype=spelling).dtype == np.dtype(spelling), spelling


@pytest.mark.parametrize("name", ["empty", "zeros", "ones", "full"])
def test_creators_release_their_references_when_they_return(name):
    # A creator's temporary references (to the dtype, to a `_like` template and the views it
    # read it through) are released before it returns, not queued for later: N storages kept
    # alive hold their dtype N times, not 2N, and a NumPy template not at all (its memory goes
    # when the caller drops it, not at some later call into the extension).
    fill = (3,) if name == "full" else ()
    # Objects of this test's own (NumPy shares `np.dtype("i2")` with everyone), and no garbage
    # collection while counting (it could free other holders of them).
    d = np.dtype([("a", "<i2")])
    template = np.zeros((4, 5))
    calls = [
        (d, lambda: getattr(cai, name)((4,), *fill, dtype=d), 1),
        (template, lambda: getattr(cai, name + "_like")(template, *fill), 0),
    ]
    for watched, call, held in calls:
        call()  # whatever the first call remembers is remembered before counting
        gc.disable()
        try:
            before = sys.getrefcount(watched)
            kept = [call() for _ in range(1000)]
            assert sys.getrefcount(watched) - before == held * len(kept)
            del kept
            assert sys.getrefcount(watched) == before
        finally:
            gc.enable()


def test_bad_shape_and_dtype():
    with pytest.raises(ValueError, match="shape: -1 must be a non-negative int"):
        cai.zeros((2, -1))
    with pytest.raises(TypeError, match="shape"):
        cai.zeros("ab")
    with pytest.raises(TypeError, match="cannot be stored"):
        cai.zeros((2,), dtype=object)
    with pytest.raises(TypeError):
        cai.zeros((2,), dtype="not a dtype")
    with pytest.raises(ValueError, match="too large"):
        cai.zeros((2**62, 2**62))
    with pytest.raises(MemoryError):
        cai.empty((2**40, 2**20), dtype="u1")


@pytest.mark.parametrize(
    "call",
    [
        lambda: cai.zeros("x" * 100_000),
        lambda: cai.zeros((2,), dims=["I"] * 50_000),
        lambda: cai.zeros((2,), dims=["x" * 100_000]),
        lambda: cai.zeros((2,), layout=list(range(100_000))),
        lambda: cai.zeros((2,), defaults="x" * 100_000),
        lambda: cai.zeros((2,), managed="x" * 100_000),
        lambda: cai.SyncState([1] * 100_000),
        lambda: cai.as_storage(np.zeros(3), sync_state=list(range(100_000))),
    ],
)
def test_a_huge_bad_value_is_shortened_in_the_message(call):
    # The value is cut at 80 characters, as Python values are in descriptor errors (it was
    # whole: 100 KB and more).
    with pytest.raises((TypeError, ValueError)) as e:
        call()
    assert len(str(e.value)) < 300 and "..." in str(e.value), str(e.value)[:300]


# ---------------------------------------------------------------- views


def test_basic_indexing_views_and_items():
    s = cai.zeros((4, 5, 6), halo=((1, 1), (2, 0), (0, 3)))
    a = np.asarray(s)
    a[...] = np.arange(a.size).reshape(a.shape)
    v = s[1:, :4]
    assert isinstance(v, cai.Storage) and v.shape == (3, 4, 6)
    assert v.halo == ((0, 1), (2, 0), (0, 3)) and v.dims == ("I", "J", "K")
    assert np.shares_memory(np.asarray(v), a)
    assert (np.asarray(v) == a[1:, :4]).all()
    r = s[2]
    assert r.shape == (5, 6) and r.dims == ("J", "K") and r.halo == ((2, 0), (0, 3))
    assert s[1, -1, 2] == a[1, -1, 2]
    assert s[..., 0].shape == (4, 5)
    assert (np.asarray(s[::-1, ::2]) == a[::-1, ::2]).all()
    assert s[::2].halo[0] == (0, 0)
    # indices NumPy handles: arrays, None, booleans -> ndarrays
    assert isinstance(s[[0, 1]], np.ndarray) and s[None].shape == (1, 4, 5, 6)
    assert s[np.int64(1), np.int32(2), 3] == a[1, 2, 3]
    assert (np.asarray(s[True:, :False:True]) == a[True:, :False:True]).all()


class GtOnly:
    """An object with only `__gt_data_interface__` (a host entry), counting `acquire` calls."""

    def __init__(self, array):
        self.array, self.acquired = array, 0
        self.__gt_data_interface__ = {None: dict(array.__array_interface__, acquire=self.acquire)}

    def acquire(self):
        self.acquired += 1


def test_index_arrays_may_be_any_object_with_a_data_interface():
    # GDP-3: keys may be any object implementing its interfaces wherever an ndarray may be:
    # storages (through __array_interface__) and objects with only __gt_data_interface__,
    # read as a consumer reads one (acquire first).
    a = np.arange(12.0).reshape(3, 4)
    s = cai.storage(a)
    rows, mask = GtOnly(np.array([2, 0])), GtOnly(np.array([True, False, True, False]))
    assert (s[rows] == a[[2, 0]]).all()
    assert (s[rows, 1] == a[[2, 0], 1]).all() and (s[1, mask] == a[1, [True, False, True, False]]).all()
    assert (s[cai.storage(np.array([2, 0]))] == a[[2, 0]]).all()  # a storage as index array
    assert rows.acquired == 2 and mask.acquired == 1
    s[rows, mask] = -1.0
    a[[2, 0], np.array([True, False, True, False])] = -1.0
    assert (s.to_numpy() == a).all() and rows.acquired == 3
    # What NumPy refuses as an index, it still refuses, after reading the object.
    with pytest.raises(IndexError, match="arrays used as indices must be of integer"):
        s[GtOnly(np.array([0.5]))]
    # Basic keys take the storage's own path (views, not copies).
    assert isinstance(s[1:, ...], cai.Storage) and s[1, 2] == a[1, 2]


def test_values_written_may_be_any_object_with_a_data_interface():
    # GDP-3 ("Choosing the Device"): a value with __gt_data_interface__ is read through it,
    # `acquire` first (NumPy cannot read an object with only that interface).
    s = cai.zeros((2, 3))
    v = GtOnly(np.array([1.0, 2.0, 3.0]))
    s[0] = v
    s[1, GtOnly(np.array([0, 2]))] = GtOnly(np.array([7.0, 8.0]))
    assert s.to_numpy().tolist() == [[1, 2, 3], [7, 0, 8]] and v.acquired == 1
    s[...] = cai.storage(np.full((2, 3), 5.0))  # a storage value, read as the storage it is
    assert (s.to_numpy() == 5).all()


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (2,), (0,), (2, 0)])
@pytest.mark.parametrize("value", [0.0, 2.5])
def test_truth_value_is_numpys(shape, value):
    # A storage of one item is as true as its item (Python's fallback, len(), made one 0.0
    # true); any other size is ambiguous, as for NumPy.
    s, a = cai.full(shape, value), np.full(shape, value)
    try:
        expected = bool(a)
    except ValueError as e:
        with pytest.raises(ValueError, match=re.escape(str(e))):
            bool(s)
    else:
        assert bool(s) is expected
    assert bool(cai.full((1,), True, dtype=bool)) and not cai.zeros((1,), dtype=np.int8)


def test_out_of_range_and_bad_indices_raise():
    s = cai.zeros((3, 4))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        s[3]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        s[0, -5]
    with pytest.raises(IndexError, match="too many indices"):
        s[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        s[..., ...]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        s[::0]
    # Indices beyond the index range are out of bounds, naming the value; slice bounds and
    # steps there are clamped, as Python and NumPy do.
    with pytest.raises(IndexError, match="index 18446744073709551616 is out of bounds"):
        s[2**64]
    with pytest.raises(IndexError, match=r"index -1267650600228229401496703205376 is out of bounds"):
        s[0, -2**100] = 1.0
    a = np.arange(12.0).reshape(3, 4)
    s[...] = a
    for key in [np.s_[: 2**64], np.s_[-2**70 :], np.s_[:: 2**70], np.s_[:: -2**63], np.s_[:: -2**63 + 1], np.s_[1, :: 2**62]]:
        assert s[key].shape == a[key].shape and (np.asarray(s[key]) == a[key]).all(), key
    with pytest.raises(IndexError):
        s[3, 0] = 1.0
    with pytest.raises(IndexError):
        s[0, 4] = 1.0


def test_domain_view_transpose_and_halo_setter():
    s = cai.zeros((5, 6, 7), halo=(1, 2, (0, 3)))
    d = s.domain_view
    assert d.shape == (3, 2, 4) and d.halo == ((0, 0),) * 3
    d[0, 0, 0] = 9
    assert s[1, 2, 0] == 9
    t = s.transpose()
    assert t.shape == (7, 6, 5) and t.dims == ("K", "J", "I") and t.halo[0] == (0, 3)
    assert s.transpose(1, 0, 2).shape == (6, 5, 7) == s.transpose((1, 0, 2)).shape
    assert np.transpose(s).shape == (7, 6, 5)
    assert s.T.shape == (7, 6, 5)
    with pytest.raises(ValueError, match="don't match storage"):
        s.transpose(0, 0, 1)
    s.halo = (0, (1, 0), 2)
    assert s.halo == ((0, 0), (1, 0), (2, 2)) and s.domain_view.shape == (5, 5, 3)
    with pytest.raises(ValueError, match="needs 8 points"):
        s.halo = (4, 0, 0)


def test_a_halo_set_reaches_everything_made_from_the_storage():
    """`halo = ...` changes what every later view, copy, `*_like`, pickle and interface of the
    storage says, and nothing about its memory."""
    s = cai.zeros((5, 6, 7), halo=(1, 2, (0, 3)), dims="IJK")
    s[...] = np.arange(210.0).reshape(5, 6, 7)
    before = (s.__array_interface__["data"], np.from_dlpack(s).ctypes.data)
    s.halo = (0, (1, 0), 2)
    halo = ((0, 0), (1, 0), (2, 2))
    assert s.halo == halo and s.__gt_origin__ == (0, 1, 2)
    assert s.__gt_data_interface__[None]["halo"] == halo
    assert s.domain_view.shape == (5, 5, 3)
    assert s.transpose().halo == s.T.halo == halo[::-1]
    assert s[1:, :, :].halo == ((0, 0), (1, 0), (2, 2)) and s[:, 2:, :].halo == ((0, 0), (0, 0), (2, 2))
    assert s.copy().halo == halo and pickle.loads(pickle.dumps(s)).halo == halo
    assert cai.zeros_like(s).halo == cai.empty_like(s).halo == halo
    assert "halo=((0, 0), (1, 0), (2, 2))" in repr(s)
    assert (s.__array_interface__["data"], np.from_dlpack(s).ctypes.data) == before
    np.testing.assert_array_equal(np.asarray(s), np.arange(210.0).reshape(5, 6, 7))
    with pytest.raises(ValueError, match="needs"):
        s.halo = (3, 0, 0)
    assert s.halo == halo, "a refused halo changes nothing"


def test_a_halo_set_while_the_storage_is_read():
    """A halo set by Python code that runs during a call on the storage (an axis's
    `__index__`, a halo item's) takes effect at once: the view made after it has it. (A
    storage that borrowed itself for the call raised "Already borrowed".)"""

    class Sets:
        def __init__(self, s, value, halo):
            self.s, self.value, self.halo = s, value, halo

        def __index__(self):
            self.s.halo = self.halo
            return self.value

    s = cai.zeros((5, 6, 7), halo=(1, 1, 1))
    t = s.transpose(Sets(s, 2, (0, 0, 0)), 1, 0)
    assert t.halo == s.halo == ((0, 0),) * 3
    s.halo = (Sets(s, 2, (0, 0, 0)), 1, 1)  # the value being set wins
    assert s.halo == ((2, 2), (1, 1), (1, 1))


def test_structured_dtypes_of_the_data_are_kept():
    # The data's own dtype, not the one NumPy makes of its descr list (gaps named f1, align=True
    # lost), which NumPy could not copy the items into.
    dt = np.dtype([("a", "u1"), ("b", "<f8")], align=True)
    a = np.zeros(3, dtype=dt)
    a["b"] = [1.0, 2.0, 3.0]
    for s in [cai.storage(a), cai.storage(a[::2]), cai.as_storage(a), cai.zeros_like(a)]:
        assert s.dtype == dt and s.dtype.isalignedstruct
    assert (np.asarray(cai.storage(a))["b"] == [1.0, 2.0, 3.0]).all()
    # An object with the interface alone is read through its descr, as NumPy reads it.
    bare = types.SimpleNamespace(__array_interface__=a.__array_interface__)
    s = cai.storage(bare)
    assert s.dtype == np.asarray(bare).dtype and (np.asarray(s)["b"] == a["b"]).all()


def _parameters(s):
    return {name: getattr(s, name) for name in [
        "shape", "strides", "dtype", "halo", "dims", "layout", "alignment_size", "aligned_index",
        "defaults", "device", "managed"]}


@pytest.mark.parametrize("make", [
    lambda: cai.zeros((5, 6, 7), halo=((1, 2), 1, 0), alignment_size=64, aligned_index=(1, 1, 0),
                      layout=(2, 0, 1), dims="IJK"),
    lambda: cai.zeros((5, 6, 7), halo=(1, 1, 0), alignment_size=64)[1:4, :, 2],
    lambda: cai.zeros((4, 5), halo=(1, 2), dims="JK", defaults="gtx86").domain_view,
    lambda: cai.zeros((3, 2), dtype=np.dtype([("a", "u1"), ("b", "<f8")], align=True)),
    lambda: cai.full((), 3.5, dtype="f2"),
    lambda: cai.zeros((0, 3), dtype="c8"),
    lambda: cai.full((2,), np.datetime64("2026-11-21"), dtype="M8[D]"),
    lambda: cai.as_storage(np.arange(6.0).reshape(2, 3)[:, ::2]),
])
def test_storages_pickle_by_value(make):
    # As NumPy and CuPy arrays pickle: by value, into a buffer of the copy's own, with every
    # parameter (and so the type) kept.
    s = make()
    a = np.asarray(s)
    if a.dtype.names is None:
        a[...] = np.arange(a.size).reshape(a.shape).astype(a.dtype)
    elif a.size:
        a["b"] = np.arange(a.size).reshape(a.shape)
    for protocol in [0, 2, pickle.HIGHEST_PROTOCOL]:
        c = pickle.loads(pickle.dumps(s, protocol=protocol))
        # What `copy()` makes: the parameters kept, a view's laid out afresh.
        assert type(c) is type(s) and _parameters(c) == _parameters(s.copy())
        b = np.asarray(c)
        assert b.dtype == a.dtype and b.shape == a.shape and (b == a).all()
        if a.size:
            assert not np.shares_memory(a, b)
            offset = sum(i * stride for i, stride in zip(c.aligned_index, c.strides))
            assert (b.__array_interface__["data"][0] + offset) % c.alignment_size == 0
    # A read-only wrapped buffer comes back as a copy one may write, as `copy()` does.
    ro = np.arange(3.0)
    ro.flags.writeable = False
    c = pickle.loads(pickle.dumps(cai.as_storage(ro)))
    c[0] = 7.0
    assert ro[0] == 0.0 and not c.__array_interface__["data"][1]


def test_storages_are_of_gdp3s_storage_types():
    # GDP-3, "Storage Types": subclasses of Storage by where the buffers are; on the host,
    # CPUStorage, for every way of making one and every view (device types: tests/gpu).
    s = cai.zeros((3, 4), halo=(1, 0), dims="IK")
    assert type(s) is cai.CPUStorage and isinstance(s, cai.Storage)
    for made in [s[1:], s[0], s.domain_view, s.T, s.transpose(1, 0), s.copy(), copy.deepcopy(s),
                 cai.empty_like(s), cai.as_storage(np.zeros(3)), cai.storage(np.zeros(3)),
                 cai.full((2,), 1.0, defaults="gtx86")]:
        assert type(made) is cai.CPUStorage
    assert repr(s) == "CPUStorage(shape=(3, 4), dtype=float64, halo=((1, 1), (0, 0)), dims=('I', 'K'), layout=(0, 1))"
    wide = cai.zeros((1,) * 40)  # a repr is whole, however long (messages cut values at 80)
    assert f"shape={(1,) * 40}, " in repr(wide) and f"layout={tuple(range(40))})" in repr(wide)
    assert weakref.ref(s)() is s
    # All four are public, with GDP-3's other names for two of them, and made only by the
    # creation functions.
    assert {c.__name__ for c in cai.Storage.__subclasses__()} == {
        "CPUStorage", "GPUStorage", "SoftwareManagedGPUStorage", "CUDAManagedGPUStorage"}
    assert cai.GT4PySyncedGPUStorage is cai.SoftwareManagedGPUStorage
    assert cai.CUDASyncedGPUStorage is cai.CudaManagedGPUStorage is cai.CUDAManagedGPUStorage
    for cls in cai.Storage.__subclasses__() + [cai.Storage]:
        with pytest.raises(TypeError, match="cannot create"):
            cls()


def test_copy_has_its_own_buffer_and_parameters():
    s = cai.full((3, 4), 1.0, alignment_size=32, halo=(1, 0), dims="IK")
    c = s.copy()
    assert (c.halo, c.dims, c.alignment_size, c.layout) == (s.halo, s.dims, 32, s.layout)
    c[0, 0] = 5
    assert s[0, 0] == 1.0
    assert not np.shares_memory(np.asarray(c), np.asarray(s))
    assert copy.deepcopy(s)[1, 1] == 1.0 and copy.copy(s).shape == (3, 4)
    t = s.transpose().copy()
    assert t.shape == (4, 3) and (t.to_numpy() == 1).all()


def test_setitem_from_storages_and_arrays():
    s = cai.zeros((3, 3))
    s[...] = cai.full((3, 3), 4.0)
    assert (s.to_numpy() == 4).all()
    s[0] = np.arange(3)
    assert s.to_numpy()[0].tolist() == [0, 1, 2]
    s[1:, 1:] = 9
    assert s[2, 2] == 9


# ---------------------------------------------------------------- NumPy's C-struct interface


def through_the_dict(s):
    """NumPy's array of `s` as `__array_interface__` alone gives it."""
    return np.asarray(types.SimpleNamespace(__array_interface__=s.__array_interface__))


STRUCT_DTYPES = ["f8", "f2", "c16", "?", "u1", ">i4", "<M8[ns]", "m8[s]", "V5", "S3", "U2",
                 np.dtype({"names": ["a", "b"], "formats": ["<i4", ">f8"], "offsets": [0, 8], "itemsize": 24})]


@pytest.mark.parametrize("dtype", STRUCT_DTYPES, ids=str)
@pytest.mark.parametrize(
    "make",
    [
        lambda d: cai.zeros((3, 4), dtype=d),
        lambda d: cai.zeros(
            (3, 4, 2), dtype=d, layout=(2, 0, 1), alignment_size=4 * d.itemsize, halo=((1, 0), (0, 2), (1, 1))
        ),
        lambda d: cai.zeros((5, 6), dtype=d, halo=((1, 1), (1, 1)))[1:4, ::-2],
        lambda d: cai.zeros((2, 3), dtype=d, defaults="F").transpose(),
        lambda d: cai.zeros((4, 3), dtype=d).domain_view[2],
        lambda d: cai.zeros((), dtype=d),
        lambda d: cai.zeros((0, 3), dtype=d),
        lambda d: cai.as_storage(np.zeros(4, dtype=d)[::-1]),
    ],
    ids=["C", "layout-halo-aligned", "sliced-reversed", "F-transposed", "row", "0-d", "empty", "wrapped"],
)
def test_numpy_reads_the_c_struct_as_it_reads_the_dict(make, dtype):
    s = make(np.dtype(dtype))
    a, ref = np.asarray(s), through_the_dict(s)
    assert a.dtype == s.dtype and a.dtype.itemsize == ref.dtype.itemsize
    # The dict spells a structured dtype's gaps as void fields ("f1", "f3"); the struct hands
    # NumPy the storage's dtype itself.
    assert a.dtype == ref.dtype or ref.dtype.names == ("a", "f1", "b", "f3")
    assert (a.shape, a.flags.writeable) == (s.shape, True)
    # An array with no items has no address in either form (`data` is 0), so NumPy makes its
    # own from both, with its own strides.
    assert a.strides == (s.strides if a.size else ref.strides)
    if a.size:
        assert (a.strides, a.ctypes.data) == (ref.strides, s.__array_interface__["data"][0])
        a[(0,) * a.ndim] = np.ones((), dtype=a.dtype)  # the same memory: written here, seen there
        fields = a.dtype.names or [...]  # (the items' bytes outside the fields are not copied)
        assert [ref[f].tobytes() for f in fields] == [a[f].tobytes() for f in fields]
        assert ref[(0,) * a.ndim].tobytes() != bytes(a.itemsize)


def test_the_c_struct_describes_the_storage(array_struct):
    s = cai.zeros((4, 5), dtype=">i4", layout=(1, 0), halo=((1, 1), (0, 2)), alignment_size=64)
    capsule, st_ = array_struct(s)
    assert st_.two == 2 and st_.nd == 2 and st_.typekind == b"i" and st_.itemsize == 4
    assert [st_.shape[i] for i in range(2)] == list(s.shape)
    assert [st_.strides[i] for i in range(2)] == list(s.strides)
    assert st_.data == s.__array_interface__["data"][0]
    assert st_.descr == id(s.dtype)  # the dtype itself: units, byte order and fields come back whole
    HAS_DESCR, WRITEABLE, NOTSWAPPED = 0x800, 0x400, 0x200
    assert st_.flags & HAS_DESCR and st_.flags & WRITEABLE and not st_.flags & NOTSWAPPED  # big-endian
    for native in ["<i4", "u1"]:  # ("|": no byte order)
        capsule, st_ = array_struct(cai.zeros((1,), dtype=native))
        assert st_.flags & NOTSWAPPED


def test_the_c_struct_of_read_only_memory_is_read_only(array_struct):
    ro = cai.as_storage(np.frombuffer(b"xyz", "u1"))
    capsule, st_ = array_struct(ro)
    assert not st_.flags & 0x400
    a = np.asarray(ro)
    assert not a.flags.writeable and a.tobytes() == b"xyz"
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 1


def test_the_array_numpy_makes_from_the_c_struct_keeps_the_storage_alive():
    s = cai.full((64,), 3.0)
    w = weakref.ref(s)
    a = np.asarray(s)
    del s
    gc.collect()
    assert w() is not None and a.sum() == 192.0
    del a
    gc.collect()
    assert w() is None


def test_the_c_struct_capsule_gives_its_dtype_reference_back():
    dt = np.dtype([("x", "<f4")])  # a dtype of this test's own: NumPy shares the plain ones
    s = cai.zeros((2, 2), dtype=dt)
    np.asarray(s)
    gc.collect()
    before = sys.getrefcount(dt)
    for _ in range(1000):
        np.asarray(s)
        s.__array_struct__
    gc.collect()
    assert sys.getrefcount(dt) == before
    assert s.dtype is dt


# ---------------------------------------------------------------- wrapping and copying


def test_as_storage_wraps_without_copy_and_keeps_owner_alive():
    class Owner:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__
            self.keep = a

    a = np.arange(12.0).reshape(3, 4)
    o = Owner(a)
    r = weakref.ref(o)
    w = cai.as_storage(o, halo=(1, 0))
    del o, a
    assert r() is not None  # the storage holds its data's owner
    assert w[2, 3] == 11.0 and w.halo == ((1, 1), (0, 0))
    w[0, 0] = -1
    assert r().keep[0, 0] == -1
    del w
    import gc

    gc.collect()
    assert r() is None


def test_as_storage_holds_a_buffer_its_data_is_shared_through():
    class Pixels(bytearray):
        @property
        def __array_interface__(self):  # no `data`: the bytearray's own buffer
            return {"version": 3, "shape": (2, 3), "typestr": "|u1"}

    p = Pixels(b"abcdef")
    w = cai.as_storage(p)
    w[1, 2] = ord("z")
    assert p == b"abcdez" and w.__array_interface__["data"][0] == np.frombuffer(p, "u1").ctypes.data
    # The storage holds the buffer, so the bytearray cannot move its bytes away from it.
    with pytest.raises(BufferError):
        p.extend(bytes(1 << 16))
    del w
    import gc

    gc.collect()
    p.extend(bytes(1 << 16))
    ro = cai.as_storage(types.SimpleNamespace(__array_interface__={"version": 3, "shape": (3,), "typestr": "|u1", "data": b"xyz"}))
    assert ro.__array_interface__["data"][1] is True and ro.to_numpy().tobytes() == b"xyz"


def test_as_storage_wraps_memory_buffers_without_copy():
    # GDP-3's as_storage wraps "the memory buffer or storage": objects with the buffer
    # protocol alone are viewed as NumPy views them (format and shape), never copied.
    import array

    ba = bytearray(range(16))
    s = cai.as_storage(ba, halo=(2,))
    assert (s.shape, s.dtype, s.halo, type(s)) == ((16,), np.uint8, ((2, 2),), cai.CPUStorage)
    s[3] = 99
    assert ba[3] == 99
    with pytest.raises(BufferError):
        ba.extend(b"x")  # the storage holds the export: the bytes stay where they are
    del ba
    gc.collect()
    assert np.asarray(s)[:4].tolist() == [0, 1, 2, 99]
    d = array.array("d", [1.0, 2.0, 3.0])
    w = cai.storage(d, copy=False)
    w[0] = 9.0
    assert d[0] == 9.0 and w.dtype == np.float64
    m = cai.as_storage(memoryview(np.arange(6.0).reshape(3, 2))[::2])
    assert m.shape == (2, 2) and m.strides == (32, 8) and np.asarray(m).tolist() == [[0, 1], [4, 5]]
    ro = cai.as_storage(b"abc")  # bytes: a read-only buffer of bytes, as a memoryview sees it
    assert ro.dtype == np.uint8 and ro.__array_interface__["data"][1]
    # Objects that are no buffer still need an interface (as_storage never copies); the
    # message says what the data lacks and how to copy it instead.
    for bad, type_name in (([1, 2], "list"), ("abc", "str")):
        for call, wraps in (
            (cai.as_storage, "as_storage()"),
            (lambda d: cai.storage(d, copy=False), "storage(copy=False)"),
        ):
            with pytest.raises(TypeError) as e:
                call(bad)
            message = str(e.value)
            assert f"data of type {type_name} exposes none of __gt_data_interface__" in message
            assert "is no memory buffer (the buffer protocol)" in message
            assert f"{wraps} wraps memory without copying it: storage(data) copies" in message
    assert np.asarray(cai.storage([1, 2])).tolist() == [1, 2]  # the copy the message points to


def test_as_storage_reads_strides_and_checks_explicit_parameters():
    f = np.asfortranarray(np.zeros((3, 4)))
    w = cai.as_storage(f)
    assert w.layout == (1, 0) and w.strides == f.strides
    with pytest.raises(ValueError, match="does not match the buffer's strides"):
        cai.as_storage(f, layout=(0, 1))
    base = np.zeros(16)
    # of two neighbouring float64 items, at most one starts on a 64-byte boundary
    a = next(base[i:] for i in (0, 1) if base[i:].__array_interface__["data"][0] % 64)
    with pytest.raises(ValueError, match="not aligned"):
        cai.as_storage(a, alignment_size=64)
    # Host memory only, but the parameters place the storage on the GPU, explicitly or through
    # the preset (as storage(copy=True) and the creators would): refused, naming which. The
    # buffer is aligned for the preset, so only the device can be what is wrong.
    aligned = np.asarray(cai.zeros((8,), alignment_size=256))  # gtcuda: 32 items of 8 bytes
    for kwargs, source in [
        ({"device": "gpu"}, 'device = "gpu"'),
        ({"defaults": "gtcuda"}, 'defaults = "gtcuda" (a GPU preset)'),
    ]:
        for wrap in (cai.as_storage, lambda data, **kw: cai.storage(data, copy=False, **kw)):
            with pytest.raises(ValueError, match=re.escape(source + ", but the data to wrap has no device buffer")):
                wrap(aligned, **kwargs)
    assert cai.as_storage(aligned, defaults="gtcuda", device=None).device is None
    # The alignment parameters are checked as for a new storage, for wrapped memory too (an
    # alignment of 0 divided by zero; the others were accepted as given).
    for kwargs, message in [
        ({"alignment_size": 0}, "alignment_size = 0: use 1 for no alignment"),
        ({"alignment_size": 3}, "alignment_size = 3 is not a multiple of the item size 8"),
        ({"aligned_index": (1,)}, "aligned_index has 1 entries but the storage has 2 dimensions"),
        ({"aligned_index": (5, 0)}, "aligned_index = [5, 0] is outside the shape [4, 4] (dimension 0)"),
    ]:
        for wrapped in (np.zeros((4, 4)), np.zeros((4, 4), order="F")):
            for call in (lambda: cai.as_storage(wrapped, **kwargs), lambda: cai.storage(wrapped, copy=False, **kwargs)):
                with pytest.raises(ValueError, match=re.escape(message)):
                    call()
    with pytest.raises(ValueError, match=re.escape("alignment_size = 0")):
        cai.as_storage(np.zeros((0, 4)), alignment_size=0)  # no item to align, still refused
    ro = np.zeros(3)
    ro.flags.writeable = False
    wr = cai.as_storage(ro)
    assert wr.__array_interface__["data"][1] is True
    with pytest.raises(ValueError):
        wr[0] = 1
    with pytest.raises(TypeError, match="needs data"):
        cai.as_storage()
    with pytest.raises(TypeError, match="exposes none of"):
        cai.as_storage(object())


def test_storage_copies_or_wraps():
    a = np.arange(6, dtype="i4").reshape(2, 3)
    s = cai.storage(a)
    assert s.dtype == np.int32 and (s.to_numpy() == a).all()
    assert not np.shares_memory(np.asarray(s), a)
    assert cai.storage([[1, 2], [3, 4]], dtype="f4").to_numpy().tolist() == [[1, 2], [3, 4]]
    n = cai.storage(a, copy=False)
    assert np.shares_memory(np.asarray(n), a)
    with pytest.raises(ValueError, match="cannot be changed without a copy"):
        cai.storage(a, copy=False, dtype="f8")
    s2 = cai.storage(cai.full((2, 2), 3.0, halo=(1, 0)))
    assert s2.halo == ((1, 1), (0, 0)) and (s2.to_numpy() == 3).all()
    with pytest.raises(TypeError, match=r"^storage\(\) needs data or device_data to copy from"):
        cai.storage()
    # GDP-3 would have storage(copy=False) with neither allocate as empty() does, but storage()
    # takes no shape: refused, naming storage() (it named as_storage()) and what to call.
    with pytest.raises(TypeError, match=r"^storage\(\) needs data .* and/or device_data"):
        cai.storage(copy=False)
    with pytest.raises(TypeError, match=r"^as_storage\(\) needs data"):
        cai.as_storage(None, None)


def test_storage_from_data_and_device_data_checks_the_pair():
    # The pair is a host and a device copy of one array (the device copy needs a GPU:
    # tests/gpu/test_own_device.py); a host array as device_data is refused, as as_storage
    # refuses it, whichever of the two the copy would be made from.
    a = np.arange(6.0).reshape(2, 3)
    for state in (None, cai.SyncState(), cai.SyncState(cai.SyncState.SYNC_DEVICE_DIRTY)):
        with pytest.raises(ValueError, match="^device_data describes no device buffer"):
            cai.storage(a, a.copy(), sync_state=state)
        with pytest.raises(ValueError, match="^device_data describes no device buffer"):
            cai.storage([[1, 2]], [[1, 2]], sync_state=state)
    assert (a == np.arange(6.0).reshape(2, 3)).all()


def test_storage_keeps_buffer_alive_for_numpy_views():
    s = cai.full((1000,), 3.0)
    a = np.asarray(s)
    del s
    import gc

    gc.collect()
    assert (a == 3.0).all()


def test_host_storage_mirror_methods_are_no_ops():
    s = cai.zeros((2,))
    for m in (s.synchronize, s.set_host_modified, s.set_device_modified, s.set_synchronized):
        m()
    s.device_to_host(force=True)
    s.host_to_device()
    assert s.sync_state is None and s.managed is None
    with pytest.raises(cai.GTNoSuchBufferError):
        s.to_cupy()
    assert s.device_data is None
    assert not hasattr(s, "__cuda_array_interface__")


def test_sync_state_class():
    st_ = cai.SyncState(cai.SyncState.SYNC_HOST_DIRTY)
    assert st_.state == 1 and "SYNC_HOST_DIRTY" in repr(st_)
    assert (cai.SyncState.SYNC_CLEAN, cai.SyncState.SYNC_DEVICE_DIRTY) == (0, 2)
    with pytest.raises(ValueError, match="state = 7"):
        cai.SyncState(7)
    # Any int out of range is a ValueError naming it (-1 and 256 were unnamed OverflowErrors).
    for bad in (-1, 256, 2**70):
        with pytest.raises(ValueError, match=rf"^state = {bad}: use SyncState.SYNC_CLEAN"):
            cai.SyncState(bad)
    with pytest.raises(TypeError, match=r"^state = 1.0: use"):
        cai.SyncState(1.0)
    assert cai.SyncState().state == 0
    # Pickled and copied by value: a state of its own with the same value (TypeError before).
    for protocol in (0, 2, 5):
        back = pickle.loads(pickle.dumps(st_, protocol=protocol))
        assert type(back) is cai.SyncState and back.state == 1 and back is not st_
    assert copy.copy(st_).state == copy.deepcopy(st_).state == 1


def test_sync_state_names_the_int_not_its_repr(monkeypatch):
    class Index:  # an int-like whose repr raises: the message shows the int it is
        def __init__(self, n):
            self.n = n

        def __index__(self):
            if self.n is None:
                raise LookupError("no index")
            return self.n

        def __repr__(self):
            raise RuntimeError("repr boom")

    ignored = []  # str(value) printed a failing repr as an "Exception ignored" before
    monkeypatch.setattr(sys, "unraisablehook", ignored.append)
    for bad in (Index(-3), np.int64(7)):
        with pytest.raises(ValueError, match=rf"^state = {int(bad)}: use SyncState.SYNC_CLEAN"):
            cai.SyncState(bad)
    assert cai.SyncState(Index(2)).state == 2
    with pytest.raises(LookupError, match="no index"):  # its own error, not ours
        cai.SyncState(Index(None))
    assert ignored == []


# ---------------------------------------------------------------- properties (hypothesis)


@st.composite
def storage_params(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=ndim, max_size=ndim)))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    layout = tuple(draw(st.permutations(range(ndim))))
    alignment = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]))
    if alignment % dtype.itemsize and dtype.itemsize % alignment:
        alignment = dtype.itemsize
    aligned_index = tuple(draw(st.integers(0, n - 1)) for n in shape)
    halo = tuple(draw(st.integers(0, n // 2)) for n in shape)
    return shape, dtype, layout, alignment, aligned_index, halo


@settings(max_examples=300, deadline=None)
@given(storage_params())
def test_property_view_inside_buffer_aligned_corners_writable(params):
    shape, dtype, layout, alignment, aligned_index, halo = params
    s = cai.zeros(shape, dtype=dtype, layout=layout, alignment_size=alignment,
                  aligned_index=aligned_index, halo=halo)
    a = np.asarray(s)
    assert a.shape == shape and a.dtype == dtype and s.layout == layout
    assert s.T.layout == layout[::-1]
    # the stride order follows the layout: larger layout entry, smaller stride
    order = sorted(range(len(shape)), key=lambda d: layout[d])
    strides = [s.strides[d] for d in order]
    assert strides == sorted(strides, reverse=True)
    assert s.strides[order[-1]] == dtype.itemsize
    # the aligned element is aligned
    assert item_address(s, aligned_index) % alignment == 0
    # writes at every corner succeed, and are seen through NumPy
    corners = [tuple((n - 1) * bit for n, bit in zip(shape, bits))
               for bits in np.ndindex(*(2,) * len(shape))]
    for k, c in enumerate(corners):
        value = np.array(k % 2 + 1).astype(dtype)
        s[c] = value
        assert a[c] == value
    # out-of-range indexing raises IndexError
    for axis, n in enumerate(shape):
        idx = [0] * len(shape)
        idx[axis] = n
        with pytest.raises(IndexError):
            s[tuple(idx)]
        idx[axis] = -n - 1
        with pytest.raises(IndexError):
            s[tuple(idx)] = 0
    # the domain view lies inside and starts at the halo
    d = s.domain_view
    assert d.shape == tuple(n - 2 * h for n, h in zip(shape, halo))
    if d.size:
        assert d.__array_interface__["data"][0] == item_address(s, halo)
    # pickled, it comes back with the same parameters, strides and items, aligned the same
    p = pickle.loads(pickle.dumps(s))
    assert _parameters(p) == _parameters(s) and (np.asarray(p) == a).all()
    assert item_address(p, aligned_index) % alignment == 0


@settings(max_examples=200, deadline=None)
@given(storage_params(), st.data())
def test_property_slices_match_numpy(params, data):
    shape, dtype, layout, alignment, aligned_index, halo = params
    s = cai.empty(shape, dtype=dtype, layout=layout, alignment_size=alignment,
                  aligned_index=aligned_index)
    a = np.asarray(s)
    a[...] = np.arange(a.size).reshape(shape).astype(dtype)
    huge = st.sampled_from([2**62, 2**63 - 1, 2**63, 2**70, -2**62, -2**63, -2**63 - 1, -2**70])
    key = tuple(
        data.draw(st.one_of(
            st.integers(-n, n - 1),
            # bounds and steps beyond the index range too: Python clamps them; bools are
            # slice indices in Python and NumPy (`a[True:]`), though not sizes
            st.builds(slice, st.none() | st.integers(-n - 2, n + 2) | huge | st.booleans(),
                      st.none() | st.integers(-n - 2, n + 2) | huge | st.booleans(),
                      st.none() | st.integers(-3, 3).filter(bool) | huge.filter(bool) | st.just(True)),
        ))
        for n in shape[: data.draw(st.integers(0, len(shape)))]
    )
    got = s[key]
    want = a[key]
    if isinstance(got, cai.Storage):
        assert got.shape == want.shape
        # strides of dimensions with one item carry no information (NumPy normalizes them)
        assert spanning_strides(got) == spanning_strides(want)
        assert (np.asarray(got) == want).all()
        if want.size:
            assert np.shares_memory(np.asarray(got), a)
    else:
        assert got == want


@settings(max_examples=200, deadline=None)
@given(storage_params(), st.data())
def test_property_views_wrapped_copied_and_pickled_keep_their_parameters(params, data):
    # Any view (a slice with step 1, an integer, a transpose, the domain) wrapped, copied,
    # pickled or used as a template keeps its shape, halo, dims and layout, and its items;
    # a wrap shares them, the others hold their own.
    shape, dtype, layout, alignment, aligned_index, halo = params
    s = cai.empty(shape, dtype=dtype, layout=layout, alignment_size=alignment,
                  aligned_index=aligned_index, halo=halo, dims="IJK0"[: len(shape)])
    a = np.asarray(s)
    a[...] = np.arange(a.size).reshape(shape).astype(dtype)
    how = data.draw(st.sampled_from(["slice", "int", "T", "domain"]))
    if how == "slice":
        v = s[tuple(slice(data.draw(st.integers(0, n - 1)), None) for n in shape)]
    elif how == "int" and len(shape) > 1:
        v = s[data.draw(st.integers(0, shape[0] - 1))]
    elif how == "T":
        v = s.transpose(data.draw(st.permutations(range(len(shape)))))
    else:
        v = s.domain_view
    items = np.asarray(v)
    kept = lambda x: (x.shape, x.halo, x.dims, x.layout)
    # (as wrapped from the storage, and from an object with its data interface alone)
    for wrapped in [cai.as_storage(v), cai.as_storage(types.SimpleNamespace(__gt_data_interface__=v.__gt_data_interface__))]:
        assert kept(wrapped)[:3] == kept(v)[:3]
        if items.size:  # (the strides of an array of no items address nothing)
            assert spanning_strides(wrapped) == spanning_strides(v)
            assert np.shares_memory(np.asarray(wrapped), a)
    assert cai.as_storage(v).layout == v.layout
    for other in [cai.storage(v), v.copy(), pickle.loads(pickle.dumps(v))]:
        assert kept(other) == kept(v) and other.dtype == v.dtype
        assert (np.asarray(other) == items).all()
        if items.size:
            assert not np.shares_memory(np.asarray(other), a)
    like = cai.zeros_like(v)
    assert kept(like) == kept(v) and like.alignment_size == v.alignment_size


# Every call shape of a creator, against Python's own binding of its signature: the creators
# read CPython's argument array themselves (fastcall.rs, read_call), so any call Python would
# bind must work with the bound values, and any other must raise TypeError.
_CREATOR_VALUES = {"shape": (2, 3), "data": np.zeros((2, 3), "i2"), "fill_value": 5, "dtype": "i4"}


@given(
    name=st.sampled_from(["empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like"]),
    n_positional=st.integers(0, 4),
    keywords=st.lists(st.sampled_from(["shape", "data", "fill_value", "dtype", "halo", "bogus"]), unique=True),
)
@settings(max_examples=400, deadline=None)
def test_creators_bind_arguments_as_python_does(name, n_positional, keywords):
    import inspect

    f = getattr(cai, name)
    params = list(inspect.signature(f).parameters)[:-1]  # without **kwargs
    positional_values = [_CREATOR_VALUES[p] for p in params] + ["extra"]
    args = positional_values[:n_positional]
    kwargs = {k: (((0, 0), 1) if k == "halo" else _CREATOR_VALUES.get(k, 1)) for k in keywords}

    def model(*a, **kw):  # Python's binding of the same signature
        pass

    model.__signature__ = inspect.signature(f)
    try:
        bound = inspect.signature(model).bind(*args, **kwargs).arguments
    except TypeError:
        bound = None
    # Keywords that are not parameters land in **kwargs: only GDP-3's (here `halo`) are taken.
    if bound is None or set(bound.get("kwargs", {})) - {"halo"}:
        with pytest.raises(TypeError):
            f(*args, **kwargs)
        return
    s = f(*args, **kwargs)
    assert s.shape == (2, 3)
    assert s.halo == (((0, 0), (1, 1)) if "halo" in kwargs else ((0, 0), (0, 0)))
    assert s.dtype == np.dtype(bound.get("dtype") or ("i2" if name.endswith("_like") else "f8"))
    if name.startswith("full"):
        assert (s.to_numpy() == 5).all()
    elif name.startswith(("zeros", "ones")):
        assert (s.to_numpy() == (name.startswith("ones"))).all()


# Bad input never panics: any parameters, for new and for wrapped memory, and any basic index,
# give a storage or a typed error with a message (a Rust panic would surface as
# pyo3_runtime.PanicException, a BaseException that these `except`s do not catch). Integers
# around the ends of every range, and values of the wrong type, are drawn often.
_EDGE_INTS = st.sampled_from([0, 1, 2, 3, 7, 8, 64, -1, 2**31, 2**62, 2**63 - 1, 2**63, 2**64, 2**100, -2**63, -2**64])
_ANY = st.one_of(_EDGE_INTS, st.sampled_from([None, 1.5, "x", b"x", (), "IJK", True, np.int64(3), object()]))
_PER_DIM = st.one_of(
    _ANY,
    st.lists(st.one_of(st.integers(0, 6), _EDGE_INTS, st.tuples(st.integers(0, 3), st.integers(0, 3))), max_size=5).map(tuple),
)
_PARAMS = st.fixed_dictionaries({}, optional={
    "alignment_size": _ANY, "aligned_index": _PER_DIM, "halo": _PER_DIM, "layout": _PER_DIM,
    "dims": st.one_of(_ANY, st.sampled_from(["IJ", "IJK", "KJI", "I0", "00", ["I", "J"], ["I", 3]])),
    "defaults": st.sampled_from([None, "C", "F", "gtx86", "gtcuda", "x", 3]),
    "device": st.sampled_from([None, "gpu", "cpu", 0]),
    "managed": st.sampled_from([None, "gt4py", "cuda", "x", False]),
})
_TYPED = (TypeError, ValueError, IndexError, OverflowError, MemoryError, cai.GTNoSuchBufferError)


def _typed_or_storage(f):
    try:
        out = f()
    except RuntimeError as e:  # only a device request on a machine without one
        assert "CUDA" in str(e), e
    except _TYPED as e:
        assert str(e), type(e)
    else:
        assert isinstance(out, cai.Storage)
        return out


@settings(max_examples=400, deadline=None)
@given(
    shape=st.one_of(st.lists(st.integers(0, 5), max_size=4).map(tuple), _PER_DIM),
    params=_PARAMS,
    wrapped=st.sampled_from([(4, 6), (0, 3), (5,), ()]),
    keys=st.lists(st.one_of(_EDGE_INTS, st.builds(slice, _EDGE_INTS | st.none(), _EDGE_INTS | st.none(), _EDGE_INTS | st.none())), max_size=3),
)
def test_bad_parameters_and_indices_give_typed_errors_never_a_panic(shape, params, wrapped, keys):
    made = [_typed_or_storage(lambda: cai.zeros(shape, **params))]
    host = np.arange(int(np.prod(wrapped)), dtype=np.float64).reshape(wrapped)
    made.append(_typed_or_storage(lambda: cai.as_storage(host, **params)))
    made.append(_typed_or_storage(lambda: cai.storage(host, copy=True, **params)))
    for s in [s for s in made if s is not None]:
        for key in (tuple(keys), *keys):
            try:
                s[key]
            except _TYPED as e:
                assert str(e), type(e)


def test_a_typed_dict_with_fields_is_its_type_string_to_as_storage_too():
    # NumPy reads a `descr` only for a void type string: `<i4` with fields is int32.
    b = np.arange(4, dtype="<i4")
    d = {"shape": (4,), "typestr": "<i4", "descr": [("a", "<i2"), ("b", "<i2")], "data": (b.ctypes.data, False), "version": 3}
    producer = type("Producer", (), {"__array_interface__": d, "keep": b})
    numpys = np.asarray(producer())
    for s in (cai.as_storage(producer()), cai.storage(producer()), cai.as_host_array(producer())):
        assert s.dtype == numpys.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(s), b)
