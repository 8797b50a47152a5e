"""Regression tests for what adversarial testing found (hostile inputs and real libraries' ways),
one test (or a few) per finding, each named after it:

1. a DLPack deleter that runs Python code while the user's exception is set must not lose it;
2. endless iterables (shapes, halos, layouts, indices, ``__gt_dims__``, ``__gt_origin__``) are
   read up to NumPy's 64 dimensions and one more, then refused naming the argument;
3. a foreign ``__len__`` is never trusted to pre-allocate;
6. padded (aligned) structs are the same element type whatever names NumPy gives the padding;
7. more than 64 dimensions are refused where a storage or view is made;
8. a legacy (unversioned) DLPack capsule cannot say "read-only", so it is imported read-only;
9. the attributes and protocols array libraries read on views and storages.

(4, a mirrored storage's host alignment, and 5, ``DeviceArray``'s structured dtypes, need a
CUDA device: tests/gpu/test_hostile_device.py.) Anything that crashed or ate memory before its
fix runs in a subprocess with a memory limit.
"""

import ctypes
import gc
import itertools
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cai
from dlpack_producer import Producer


def run_limited(code, timeout=60, memory=2 << 30):
    """Runs `code` in a fresh interpreter with at most `memory` bytes of address space (an
    unbounded read then fails at once instead of taking the machine's memory); its exit status,
    stdout and stderr."""
    prelude = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
        "import sys, itertools, numpy as np, cai\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout, done.stderr


def value_error_of(code, before=""):
    """Runs `before`, then `code`, in a limited interpreter (see `run_limited`): the message of
    the ValueError `code` raised; the test fails on a crash or on any other outcome."""
    body = textwrap.indent(textwrap.dedent(code), "    ")
    rc, out, err = run_limited(
        textwrap.dedent(before) + f"try:\n{body}\nexcept ValueError as e:\n    print('ValueError:', str(e)[-200:])\n"
    )
    assert rc == 0, err[-2000:]
    assert "ValueError:" in out, out
    return out


# ---- 1. deleters that run Python code while an exception is set -------------------------------


def producer(**kwargs):
    return Producer(np.arange(3.0), **kwargs)


DELETER_CASES = {
    "float(view)": (lambda p: float(cai.from_dlpack(p)), TypeError),
    "view.get(out of bounds)": (lambda p: cai.from_dlpack(p).get((9,)), IndexError),
    "view.__dlpack__(stream=5)": (lambda p: cai.from_dlpack(p).__dlpack__(stream=5), ValueError),
    "storage[0] = 'x'": (lambda p: cai.as_storage(p).__setitem__(0, "x"), ValueError),
    "storage.transpose(5)": (lambda p: cai.as_storage(p).transpose(5), ValueError),
}


@pytest.mark.parametrize("case", sorted(DELETER_CASES))
def test_deleter_running_python_keeps_the_users_exception(case):
    call, expected = DELETER_CASES[case]
    p = producer()
    with pytest.raises(expected):
        call(p)
    gc.collect()
    assert p.deleted == 1
    # The deleter ran with no exception pending (the user's was put aside, then restored).
    assert p.pending == [None]


@pytest.fixture
def unraisable(monkeypatch):
    """The messages of the exceptions reported through sys.unraisablehook meanwhile."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(str(u.exc_value)))
    return seen


def test_a_deleter_that_raises_is_reported_and_the_users_exception_kept(unraisable):
    p = producer(raise_in_deleter=True)
    with pytest.raises(TypeError):
        float(cai.from_dlpack(p))
    assert p.deleted == 1
    # Reported as unraisable (as NumPy's deleters' errors are), never in place of the user's.
    assert unraisable == ["the deleter failed"]


def test_a_deleter_that_raises_with_no_exception_set_is_reported_not_raised(unraisable):
    p = producer(raise_in_deleter=True)
    v = cai.from_dlpack(p)
    del v
    gc.collect()
    assert p.deleted == 1
    assert unraisable == ["the deleter failed"]
    # Nothing is left pending for the next call to trip on.
    assert cai.zeros(2).shape == (2,)


def test_a_c_deleter_that_leaves_an_exception_set_is_reported(unraisable):
    """A deleter in C that sets an exception and returns (no ctypes wrapper to report it):
    CPython's PyErr_NoMemory stands for it."""
    from dlpack_producer import DELETER

    p = Producer(np.arange(3.0))
    p._deleter = DELETER(ctypes.cast(ctypes.pythonapi.PyErr_NoMemory, ctypes.c_void_p).value)
    with pytest.raises(TypeError):
        float(cai.from_dlpack(p))
    assert len(unraisable) == 1
    v = cai.from_dlpack(p)
    del v
    assert len(unraisable) == 2
    assert cai.zeros(2).shape == (2,)


# ---- 2. and 3. endless iterables, lying lengths ----------------------------------------------


def gt_attribute(name, value):
    """Code importing a producer whose GT4Py attribute `name` is the expression `value`."""
    return f"""
        class A:
            def __init__(s):
                s.a = np.zeros(3)
                s.__array_interface__ = s.a.__array_interface__
            {name} = property(lambda s: {value})
        cai.as_storage(A())
    """


def entry_dims(dims):
    """Code importing a producer whose data interface entry's `dims` is the expression `dims`."""
    return f"""
        a = np.zeros(3)
        class A:
            @property
            def __gt_data_interface__(s):
                d = dict(a.__array_interface__)
                d['dims'] = {dims}
                return {{None: d}}
        cai.as_storage(A())
    """


ENDLESS = {
    "shape": "cai.zeros(itertools.repeat(1))",
    "halo": "cai.zeros((3,), halo=itertools.repeat(1))",
    "halo pairs": "cai.zeros((3,), halo=[itertools.repeat(1)])",
    "aligned_index": "cai.zeros((3,), aligned_index=itertools.repeat(0))",
    "layout": "cai.zeros((3,), layout=itertools.repeat(0))",
    "dims": "cai.zeros((3,), dims=itertools.repeat('I'))",
    "halo setter": "s = cai.zeros((3,)); s.halo = itertools.repeat(1)",
    "transpose": "cai.zeros((3,)).transpose(itertools.repeat(0))",
    "index": "cai.as_host_array(np.zeros(3)).get(itertools.repeat(0))",
    "__gt_dims__": gt_attribute("__gt_dims__", "itertools.repeat('I')"),
    "__gt_origin__": gt_attribute("__gt_origin__", "itertools.repeat(0)"),
    "__gt_data_interface__ dims": entry_dims("itertools.repeat('I')"),
}


@pytest.mark.parametrize("case", sorted(ENDLESS))
def test_endless_iterables_are_refused_naming_the_argument(case):
    assert "64" in value_error_of(ENDLESS[case])


@pytest.mark.parametrize(
    "n, argument",
    [(65, "shape"), (10**6, "shape")],
)
def test_long_finite_sequences_are_refused_too(n, argument):
    with pytest.raises(ValueError, match=rf"{argument}.*64"):
        cai.zeros(range(n))


LYING = {
    # A data interface entry's `dims` (PyO3's sequence extraction reserved `__len__` items: a
    # panic, "capacity overflow", or an abort).
    "entry dims": entry_dims("Liar()"),
    "dims keyword": "cai.zeros((3,), dims=Liar())",
}


@pytest.mark.parametrize("where", sorted(LYING))
@pytest.mark.parametrize("length", [sys.maxsize, 2**40, 65])
def test_a_lying_len_is_never_used_to_allocate(where, length):
    liar = f"""
        class Liar:
            def __len__(s):
                return {length}
            def __iter__(s):
                return iter(['I'])
            def __getitem__(s, i):
                if i: raise IndexError(i)
                return 'I'
    """
    assert "dims" in value_error_of(LYING[where], before=liar)


def test_a_len_that_raises_propagates():
    class Raises:
        def __len__(self):
            raise KeyError("from __len__")

        def __iter__(self):
            return iter([1])

    with pytest.raises(KeyError, match="from __len__"):
        cai.zeros(Raises())


def test_up_to_64_dimensions_from_any_iterable_still_work():
    assert cai.zeros(itertools.repeat(1, 64)).ndim == 64
    assert cai.zeros(iter([2, 3])).shape == (2, 3)
    s = cai.zeros((2, 3, 4))
    assert s.transpose(iter([2, 0, 1])).shape == (4, 2, 3)


# ---- 6. padded structs --------------------------------------------------------------------------


ALIGNED = np.dtype([("id", "<i4"), ("value", "<f8")], align=True)


class Wrapper:
    """A producer that is not an ndarray: NumPy reads its descr, naming the padding 'f1'."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda a: a, id="ndarray"),
        pytest.param(cai.as_host_array, id="as_host_array"),
        pytest.param(Wrapper, id="wrapper object"),
    ],
)
def test_padded_structs_wrap_without_copying(wrap):
    a = np.zeros(3, ALIGNED)
    a["id"] = [1, 2, 3]
    s = cai.as_storage(wrap(a))
    view = np.asarray(s)
    assert view.__array_interface__["data"][0] == a.ctypes.data
    assert list(view["id"]) == [1, 2, 3]
    view["value"][1] = 2.5
    assert a["value"][1] == 2.5


def test_storage_without_a_copy_takes_the_arrays_own_padded_dtype():
    a = np.zeros(3, ALIGNED)
    s = cai.storage(Wrapper(a), dtype=ALIGNED, copy=False)
    assert np.asarray(s).__array_interface__["data"][0] == a.ctypes.data
    other = np.dtype([("id", "<i4"), ("value", "<f4"), ("pad", "<f4")])
    with pytest.raises(ValueError, match="copy=False"):
        cai.storage(Wrapper(a), dtype=other, copy=False)


def test_the_examples_record_buffer_wraps():
    b = cai.examples.Buffer(32, "|V16", [2])
    s = cai.as_storage(b)
    assert s.shape == (2,)


# ---- 7. more than 64 dimensions -----------------------------------------------------------------


@pytest.mark.parametrize("ndim", [65, 100, 100_000])
def test_storages_of_more_than_64_dimensions_are_refused_at_creation(ndim):
    with pytest.raises(ValueError, match="64"):
        cai.zeros((1,) * ndim)
    with pytest.raises(ValueError, match="64"):
        cai.empty((1,) * ndim)


def test_64_dimensions_round_trip():
    s = cai.zeros((1,) * 64)
    assert np.asarray(s).ndim == 64
    assert np.from_dlpack(s).ndim == 64
    assert s[(0,) * 64] == 0


def test_a_descriptor_of_65_dimensions_is_refused_on_import():
    class Wide:
        __array_interface__ = {
            "shape": (1,) * 65,
            "typestr": "<f8",
            "data": (np.zeros(1).ctypes.data, False),
            "version": 3,
        }

    with pytest.raises(ValueError, match="64"):
        cai.as_host_array(Wide())


# ---- 8. legacy DLPack capsules ------------------------------------------------------------------


def test_a_legacy_capsule_is_imported_read_only():
    x = np.arange(3.0)
    p = Producer(x, legacy_only=True)
    v = cai.from_dlpack(p)
    assert v.readonly
    a = np.asarray(v)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 42
    with pytest.raises(ValueError):
        v.set((0,), 42.0)
    assert x[0] == 0


def test_a_versioned_capsule_without_the_flag_stays_writable():
    x = np.arange(3.0)
    v = cai.from_dlpack(Producer(x))
    assert not v.readonly
    np.asarray(v)[0] = 42
    assert x[0] == 42


def test_a_storage_over_a_legacy_producer_is_read_only():
    x = np.arange(3.0)
    s = cai.as_storage(Producer(x, legacy_only=True))
    with pytest.raises(ValueError):
        s[0] = 1.0
    assert x[0] == 0


# ---- 9. what array libraries read ---------------------------------------------------------------


def sequence_size(obj):
    f = ctypes.pythonapi.PySequence_Size
    f.restype, f.argtypes = ctypes.c_ssize_t, [ctypes.py_object]
    return f(obj)


def test_storages_are_sequences_at_the_c_level():
    s = cai.zeros((3, 2))
    assert sequence_size(s) == 3
    assert len(s) == 3
    assert [tuple(np.asarray(row)) for row in s] == [(0.0, 0.0)] * 3
    assert list(cai.zeros(3)) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(lambda a: cai.as_host_array(a), id="as_host_array"),
        pytest.param(lambda a: cai.from_dlpack(a), id="from_dlpack"),
    ],
)
def test_views_have_what_array_libraries_read(view):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = view(a)
    assert v.dtype == np.float32
    assert v.shape == (2, 3)
    assert v.ndim == 2
    assert v.size == 6
    assert len(v) == 2
    assert sequence_size(v) == 2
    assert v.itemsize == 4


def test_host_views_index_as_numpy_does():
    a = np.arange(6.0).reshape(2, 3)
    v = cai.as_host_array(a)
    row = v[1]
    assert np.shares_memory(row, a) and list(row) == [3.0, 4.0, 5.0]
    assert v[1, 2] == 5.0 and v[:, 0].tolist() == [0.0, 3.0]
    # Read-only data stays read-only.
    ro = cai.from_dlpack(Producer(np.arange(3.0), legacy_only=True))
    with pytest.raises(ValueError):
        ro[0:2][0] = 1.0
    with pytest.raises(IndexError):
        v[5]
    # A sequence at the C level: iteration and list() too.
    assert [list(r) for r in v] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_a_zero_dimensional_view_has_no_len():
    v = cai.as_host_array(np.float64(3.0))
    assert (v.ndim, v.size, v.shape) == (0, 1, ())
    with pytest.raises(TypeError, match="unsized"):
        len(v)


def test_structured_views_report_numpys_dtype():
    a = np.zeros(2, ALIGNED)
    v = cai.as_host_array(a)
    assert v.dtype.names == ("id", "value")
    assert v.dtype.itemsize == 16


def test_cai_examples_is_an_attribute_after_import_cai():
    code = "import cai; print(cai.examples.Grid.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "Grid", done.stderr


# ---- found by attacking the fixes above ---------------------------------------------------------

INNER8 = np.dtype({"names": ["x"], "formats": ["<f4"], "offsets": [0], "itemsize": 8})
INNER16 = np.dtype({"names": ["x"], "formats": ["<f4"], "offsets": [0], "itemsize": 16})
# Sub-arrays of structs whose items are 8 and 16 bytes apart: the same size, other items.
SUB8 = np.dtype({"names": ["s"], "formats": [(INNER8, (2,))], "offsets": [0], "itemsize": 32})
SUB16 = np.dtype([("s", INNER16, (2,))])


class Claims(Wrapper):
    """A producer of `a`'s interface whose `dtype` claims another dtype (or raises)."""

    def __init__(self, a, dtype):
        super().__init__(a)
        self._dtype = dtype

    @property
    def dtype(self):
        if isinstance(self._dtype, BaseException):
            raise self._dtype
        return self._dtype


def test_structs_whose_sub_array_items_differ_in_size_are_other_items():
    assert SUB8 != SUB16 and SUB8.itemsize == SUB16.itemsize
    a = np.zeros(3, SUB8)
    a["s"]["x"] = [[1, 2], [3, 4], [5, 6]]
    # An owner claiming the other dtype is not believed: the items read are the memory's.
    s = cai.as_storage(Claims(a, SUB16))
    assert np.asarray(s)["s"]["x"].tolist() == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(ValueError, match="copy=False"):
        cai.storage(a, dtype=SUB16, copy=False)


def test_an_error_raised_by_an_owners_dtype_propagates():
    a = np.zeros(2, ALIGNED)
    with pytest.raises(LookupError, match="from dtype"):
        cai.as_storage(Claims(a, LookupError("from dtype")))
    with pytest.raises(LookupError, match="from dtype"):
        cai.as_host_array(Claims(a, LookupError("from dtype"))).dtype
    # An owner whose `dtype` is no NumPy dtype is passed over.
    assert cai.as_storage(Claims(a, "not a dtype")).shape == (2,)


@pytest.mark.parametrize(
    "code",
    [
        "cai.zeros((2, 2), dims='I' * 200_000_000)",
        """
        class A:
            def __init__(s):
                s.a = np.zeros((2, 2))
                s.__array_interface__ = s.a.__array_interface__
                s.__gt_dims__ = 'I' * 200_000_000
        cai.as_storage(A())
        """,
        """
        a = np.zeros((2, 2))
        d = dict(a.__array_interface__)
        d['dims'] = 'I' * 200_000_000
        class A:
            __gt_data_interface__ = {None: d}
        cai.as_storage(A())
        """,
    ],
    ids=["dims keyword", "__gt_dims__", "entry dims"],
)
def test_dims_given_as_a_long_str_are_refused_before_splitting(code):
    out = value_error_of(code)
    assert "200000000 letters" in out and "64" in out, out


def test_a_zero_dimensional_storage_or_view_is_not_iterable():
    for zero_d in [cai.storage(np.array(3.0)), cai.as_host_array(np.float64(3.0))]:
        with pytest.raises(TypeError):
            list(zero_d)
    assert list(cai.as_host_array(np.arange(3.0))) == [0.0, 1.0, 2.0]


def test_a_dimension_past_numpys_limit_is_refused_even_with_no_items():
    for shape in [(2**63, 0), (0, 2**64 - 1)]:
        with pytest.raises(ValueError, match="too large|overflows"):
            cai.zeros(shape)


@pytest.mark.parametrize(
    "descr, typestr",
    [
        ("[(f'a{i}', '|u1', T) for i in range(300)]", "|V300"),
        ("[('a', '<f4', (1,) * 65)]", "|V4"),
        # A list shared 8 ways at each of 12 levels: about 100 objects, 8**12 entries.
        (
            "(lambda f: f(f, 12))(lambda f, n: [('x', '|u1')] if n == 0 else "
            "[(f'l{i}', s) for i, s in enumerate([f(f, n - 1)] * 8)])",
            "|V8",
        ),
    ],
    ids=["huge sub-array shapes", "65-dimensional sub-array", "shared nested lists"],
)
def test_a_small_descr_standing_for_huge_ones_is_refused(descr, typestr):
    before = f"""
        T = (1,) * 1_000_000
        descr = {descr}
        class O:
            __array_interface__ = {{"shape": (1,), "typestr": "{typestr}", "descr": descr,
                                    "data": (np.zeros(64).ctypes.data, False), "version": 3}}
    """
    out = value_error_of("cai.as_host_array(O())", before=before)
    assert "64" in out or "65536" in out, out
