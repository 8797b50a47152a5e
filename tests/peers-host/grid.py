"""The grid every module of tests/peers-host runs over and the checks each case makes
(conftest.py says what a case is)."""

import gc

import ml_dtypes
import numpy as np
import pytest

import cai
import cai.examples

DTYPES = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}

LAYOUTS = ["1-d", "C", "F", "strided", "negative", "0-d", "zero-size", "read-only"]
KINDS = ["storage", "view", "derived"]


def values(dtype, n):
    """n items of `dtype`, exact in every one of them, with negatives where it has them."""
    i = np.arange(n)
    if dtype == np.bool_:
        return i % 3 == 0
    if dtype.kind == "u":
        return ((i * 7 + 3) % 200).astype(dtype)
    if dtype.kind == "i":
        return ((i * 7 + 3) % 200 - 100).astype(dtype)
    real = (i * 0.25 - 3.0).astype(np.float32)
    if dtype.kind == "c":
        return (real + 1j * (i % 5)).astype(dtype)
    return real.astype(dtype)


def numpy_layout(dtype, layout):
    """(base, ref): `ref` a NumPy view of `base`'s C-contiguous buffer in `layout`."""
    if layout == "1-d":
        base = values(dtype, 7)
        return base, base
    if layout == "C":
        base = values(dtype, 60).reshape(3, 4, 5)
        return base, base
    if layout == "F":
        base = values(dtype, 60).reshape(5, 4, 3)
        return base, base.T
    if layout == "strided":
        base = values(dtype, 240).reshape(6, 4, 10)
        return base, base[::2, :, 1::3]
    if layout == "negative":
        base = values(dtype, 60).reshape(3, 4, 5)
        return base, base[::-1, :, ::-2]
    if layout == "0-d":
        base = values(dtype, 1).reshape(())
        return base, base
    if layout == "zero-size":
        base = values(dtype, 0).reshape(0, 3)
        return base, base
    if layout == "read-only":
        base = values(dtype, 12).reshape(3, 4)
        base.flags.writeable = False
        return base, base
    raise ValueError(layout)


def address(obj):
    """The first item's address in `obj`'s `__array_interface__` (NumPy's convention)."""
    return obj.__array_interface__["data"][0]


def np_address(a):
    return a.__array_interface__["data"][0]


class Case:
    """One cai producer and its NumPy twin. `drop()` lets go of everything the case holds."""

    def __init__(self, kind, dtype_name, layout):
        self.kind, self.dtype_name, self.layout = kind, dtype_name, layout
        self.dtype = DTYPES[dtype_name]
        base, ref = self._numpy()
        self.expected = np.array(ref, copy=True)
        self.readonly = layout == "read-only"
        self.obj = make(kind, layout, base, ref)
        self.size = self.expected.size
        self.nbytes = max(base.nbytes, 8)

    def _numpy(self):
        if self.kind == "derived" and self.layout == "read-only":
            base = np.arange(12, dtype=np.uint32)  # what `counts(12)` holds
            base.flags.writeable = False
            return base, base
        return numpy_layout(self.dtype, self.layout)

    def twin(self):
        """A fresh NumPy array equal to the producer: items, layout and read-only flag. A
        class of the derives is an array only through its protocols (no `shape`, no
        `__getitem__`, not a sequence): its twin is a NumPy array behind the same protocols."""
        ref = self._numpy()[1]
        return ProtocolsOnly(ref) if self.kind == "derived" else ref

    def address(self):
        return address(self.obj)

    def drop(self):
        del self.obj
        collect(self.nbytes)

    def __repr__(self):
        return f"{self.kind}-{self.dtype_name}-{self.layout}"


class ProtocolsOnly:
    """A NumPy array seen through the protocols a derived class exports, and nothing else."""

    def __init__(self, array):
        self.array = array

    @property
    def __array_interface__(self):
        return self.array.__array_interface__

    @property
    def __array_struct__(self):
        return self.array.__array_struct__

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def make(kind, layout, base, ref):
    if kind == "storage":
        if layout in ("strided", "negative"):
            # A storage view: basic indexing of a storage that owns cai's memory.
            s = cai.storage(base)
            return s[::2, :, 1::3] if layout == "strided" else s[::-1, :, ::-2]
        if layout == "read-only":
            return cai.as_storage(ref)  # wraps the read-only NumPy memory
        return cai.storage(ref)  # a copy into cai's memory, in ref's layout
    if kind == "view":
        return cai.as_host_array(ref)
    if kind == "derived":
        if layout == "read-only":
            return cai.examples.counts(ref.size)
        offset = np_address(ref) - np_address(base) if ref.size else 0
        b = cai.examples.Buffer(base.nbytes, ref.dtype.str, ref.shape, ref.strides, offset)
        b.write(base.tobytes())
        return b
    raise ValueError(kind)


def case_ids():
    """Every (kind, dtype, layout) a producer can be made in."""
    out = []
    for kind in KINDS:
        for dname in DTYPES:
            for layout in LAYOUTS:
                if kind == "derived" and dname == "bfloat16":
                    continue  # a derive's descriptor is a typestr, which cannot say bfloat16
                if kind == "derived" and layout == "read-only" and dname != "uint32":
                    continue  # the read-only example class (`counts`) holds uint32
                out.append(f"{kind}-{dname}-{layout}")
    return out


def parse(cid):
    kind, dname, layout = cid.split("-", 2)
    return kind, dname, layout


_churned = []


def collect(nbytes):
    """Collect garbage, then allocate and fill memory of about `nbytes` in the ways the
    producers allocate it, so that memory freed too early would now hold other bytes."""
    gc.collect()
    # What survived is long-lived (pytest's reports pile up): later collections skip it.
    gc.freeze()
    _churned.clear()
    for _ in range(4):
        _churned.append(cai.full((nbytes // 8 + 1,), -7.0, dtype="f8"))
        _churned.append(np.full(nbytes // 8 + 1, -7.0))


def same(got, want, what=""):
    """Equal items, dtype and shape (NaN-free data: plain equality)."""
    got = np.asarray(got)
    assert got.dtype == want.dtype, f"{what}dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}shape {got.shape} != {want.shape}"
    assert got.tobytes() == np.ascontiguousarray(want).tobytes() or np.array_equal(got, want), (
        f"{what}values differ:\n{got}\n!=\n{want}"
    )


def takes(lib, fn, case, to_numpy=np.asarray, addr=None, writable=None, aligned=1, same_items=True):
    """`fn(case.obj)`, a library consuming a cai object, checked against `fn(twin)`:

    - the same values and dtype (read through `to_numpy`) as the twin's result;
    - zero-copy (`addr(out)`, the first item's address) wherever the twin's result is and
      the producer's address is a multiple of `aligned` (a library that shares only aligned
      memory says so);
    - writable (`writable(out)`) exactly where the twin's result is: read-only stays so;
    - the same values once the producer was dropped, collected and its memory reused.

    Where `fn` fails on the twin, or (`same_items`: the library keeps the items) its result
    does not hold the twin's items, the case is the library's limit (an xfail saying so)."""
    twin, limit = case.twin(), None
    try:
        twin_out = fn(twin)
    except Exception as e:
        limit = f"{lib}'s own limit: NumPy input fails too ({type(e).__name__}: {e})"
        if case.dtype_name == "bfloat16" and "DLPack only supports" in str(e):
            # NumPy's DLPack export knows no bfloat16, cai's does: the twin stands for nothing.
            return takes_bfloat16(lib, fn, case, to_numpy)
    if limit:  # (raised here, not in the handler: a traceback into the library is slow to show)
        pytest.xfail(limit[:300])
    want = np.array(to_numpy(twin_out), copy=True)
    if same_items and not (want.shape == case.expected.shape and np.array_equal(want, case.expected)):
        pytest.xfail(f"{lib}'s own limit: it does not read the NumPy twin as an array either "
                     f"(it gives {want!r})"[:300])
    out = fn(case.obj)
    same(to_numpy(out), want)
    if addr is not None and case.size and addr(twin_out) == np_address(twin) and case.address() % aligned == 0:
        assert addr(out) == case.address(), f"{lib} copied cai's data where it shares NumPy's"
    if writable is not None:
        assert writable(out) == writable(twin_out), (
            f"{lib}'s result writable={writable(out)} from cai, {writable(twin_out)} from NumPy"
        )
    del twin, twin_out
    case.drop()
    same(to_numpy(out), want, "after the producer was dropped: ")
    return out


def takes_bfloat16(lib, fn, case, to_numpy):
    """A DLPack consumer of a bfloat16 producer, which NumPy cannot be the twin of: the items
    and dtype against the case's own, and the lifetime; where the library fails on cai's
    object too, its limit."""
    limit = None
    try:
        out = fn(case.obj)
    except Exception as e:
        limit = f"{lib}'s own limit: no bfloat16 through DLPack ({type(e).__name__}: {e})"
    if limit:
        pytest.xfail(limit[:300])
    same(to_numpy(out), case.expected)
    case.drop()
    same(to_numpy(out), case.expected, "after the producer was dropped: ")
    return out


# cai's imports of another library's array, by the names `test_gives` cases carry.
CAI_IMPORTS = {
    "as_host_array": cai.as_host_array,
    "from_dlpack": cai.from_dlpack,
    "as_storage": cai.as_storage,
    "gt_data": lambda a: cai.gt_data(a).host,
}


def gives_table(**numpy_twins):
    """cai's imports named by the keywords, each with the NumPy import that must behave as it
    does on the same data (`gives_table(from_dlpack=np.from_dlpack)`)."""
    return {how: (CAI_IMPORTS[how], twin) for how, twin in numpy_twins.items()}


def over_gives(table, layouts=LAYOUTS):
    """Parametrizes `test_gives(dname, layout, how)` over every dtype, `layouts` and the
    imports of `table` (a `gives_table`)."""
    def mark(test):
        for name, values in [("how", table), ("layout", layouts), ("dname", DTYPES)]:
            test = pytest.mark.parametrize(name, values)(test)
        return test
    return mark


def gives(lib, make, cai_import, numpy_import):
    """cai importing a library's array, `make()` -> (array, items as NumPy, address of the
    first item or None, whether the library holds it read-only), checked:

    - the same values and dtype, read through NumPy from the import;
    - zero-copy: the import's first item is at the library's address;
    - read-only data imported read-only, writable data writable (where the library tells a
      consumer neither, NumPy's import `numpy_import` shows it: an xfail saying so);
    - the same values once the library's array was dropped, collected and its memory reused.

    Where cai's import fails and NumPy's fails too, the case is the library's limit."""
    arr, want, ptr, readonly = make()
    limit = None
    try:
        view = cai_import(arr)
    except Exception as e:
        try:
            numpy_import(arr)
        except Exception as e2:
            limit = f"{lib}'s own limit: NumPy's import fails too ({type(e2).__name__}: {e2})"
        else:
            raise AssertionError(f"cai cannot import a {lib} array that NumPy imports: {e!r}") from e
    if limit:
        pytest.xfail(limit[:300])
    a = np.asarray(view)
    same(a, want)
    if ptr is not None and want.size:
        assert np_address(a) == ptr, f"a copy: {np_address(a):#x} != {ptr:#x}"
    if a.flags.writeable == readonly:
        theirs = np.asarray(numpy_import(arr)).flags.writeable
        if theirs == a.flags.writeable:
            pytest.xfail(f"{lib} does not tell a consumer that its data is "
                         f"{'read-only' if readonly else 'writable'}: NumPy's import is as cai's")
        raise AssertionError(f"{'read-only' if readonly else 'writable'} data imported "
                             f"{'writable' if a.flags.writeable else 'read-only'} (NumPy's: {theirs})")
    del arr, a
    collect(max(want.nbytes, 8))
    same(np.asarray(view), want, "after the library's array was dropped: ")


class _InterfaceOnly:
    """`obj`'s `__array_interface__` alone, so that NumPy reads what `cai.as_host_array` reads
    (and not `__array__` or DLPack)."""

    def __init__(self, obj):
        self.__array_interface__ = obj.__array_interface__
        self.owner = obj


def np_interface(obj):
    """NumPy's import of `obj` through its `__array_interface__` alone."""
    return np.asarray(_InterfaceOnly(obj))
