"""GDP-3's __gt_data_interface__: exported by a derived class (``Field``) and by storages, and
read back from any object (``gt_data``), falling back to the array interfaces."""

import weakref

import numpy as np
import pytest

import cai
import cai.examples


class Obj:
    """An object with whatever attributes a test gives it."""

    def __init__(self, **attrs):
        for k, v in attrs.items():
            setattr(self, k, v)


def test_derived_class_exports_dims_halo_and_hooks():
    f = cai.examples.Field(3, 4, 5, halo=[(1, 1), (0, 0), (2, 1)])
    gt = f.__gt_data_interface__
    assert list(gt) == [None]  # host only
    entry = gt[None]
    assert entry["shape"] == (3, 4, 5) and entry["typestr"] == "<f8"
    assert entry["strides"] is None and entry["version"] == 3
    assert entry["dims"] == ("I", "J", "K")
    assert entry["halo"] == ((1, 1), (0, 0), (2, 1))
    entry["acquire"]()
    entry["touch"]()
    entry["release"]()
    assert f.calls == ["acquire:None", "touch:None", "release:None"]
    assert "acquire hook of the None buffer of cai.examples.Field" in repr(entry["acquire"])
    # NumPy can use the entry directly: it is an __array_interface__
    a = np.asarray(Obj(__array_interface__=entry))
    a[0, 0, 0] = 2.0
    assert f.sum() == 2.0
    # a fresh dict every time
    assert f.__gt_data_interface__ is not gt


def test_hook_keeps_its_object_alive():
    f = cai.examples.Field(1, 1, 1)
    r = weakref.ref(f)
    hook = f.__gt_data_interface__[None]["acquire"]
    del f
    assert r() is not None
    hook()
    assert r().calls == ["acquire:None"]


def test_storage_exports_gdp3_keys():
    s = cai.zeros((4, 5), halo=(1, 0), dims="IK")
    gt = s.__gt_data_interface__
    assert set(gt) == {None}
    e = gt[None]
    assert e["dims"] == ("I", "K") and e["halo"] == ((1, 1), (0, 0))
    assert e["data"] == s.__array_interface__["data"]
    # GDP-3: acquire/touch point at device_to_host and set_host_modified
    assert e["acquire"].__name__ == "device_to_host"
    assert e["touch"].__name__ == "set_host_modified"
    assert "release" not in e
    e["acquire"]()
    e["touch"]()


def test_consumes_gt_interface_first():
    f = cai.examples.Field(2, 3, 4, halo=[(1, 1), (1, 1), (0, 0)])
    d = cai.gt_data(f)
    assert d.from_gt and d.gpu is None
    assert d.host.shape == (2, 3, 4) and d.dims == ["I", "J", "K"]
    assert d.halo == [(1, 1), (1, 1), (0, 0)]
    d.acquire()
    d.touch()
    d.release()
    d.acquire("gpu")  # no gpu entry: no action
    assert f.calls == ["acquire:None", "touch:None", "release:None"]
    with pytest.raises(ValueError, match="^device = 'cpu': expected None or 'gpu'"):
        d.acquire("cpu")


def test_falls_back_to_array_interfaces():
    a = np.arange(6.0).reshape(2, 3)
    d = cai.gt_data(a)
    assert not d.from_gt and d.dims is None and d.halo is None
    assert d.host.shape == (2, 3) and d.gpu is None
    d.acquire()  # no hooks: no action
    dev = {"shape": (2, 3), "typestr": "<f8", "data": (0x7F0000000000, False),
           "strides": None, "version": 3, "stream": None}
    both = Obj(__array_interface__=a.__array_interface__, __cuda_array_interface__=dev, keep=a)
    d = cai.gt_data(both, sync=False, check_pointer=False)
    assert d.host is not None and d.gpu is not None and d.gpu.ptr == 0x7F0000000000
    with pytest.raises(TypeError, match="exposes none of __gt_data_interface__"):
        cai.gt_data(object())


def test_gt_entries_may_omit_version_and_carry_extra_keys():
    a = np.zeros((2, 2))
    host = dict(a.__array_interface__)
    host.pop("version")
    host["something_else"] = 1
    gpu = {"shape": (2, 2), "typestr": "<f8", "data": (0x7F0000000000, False), "strides": None}
    calls = []
    o = Obj(__gt_data_interface__={None: dict(host, acquire=lambda: calls.append("h")),
                                   "gpu": dict(gpu, acquire=lambda: calls.append("g"), touch=None)},
            keep=a)
    d = cai.gt_data(o, sync=False, check_pointer=False)
    assert d.host.version == 3 and d.gpu.version == 3
    d.acquire()
    d.acquire("gpu")
    d.touch("gpu")  # None: no action
    assert calls == ["h", "g"]


def _gt(**entry_overrides):
    a = np.zeros((2, 3))
    entry = dict(a.__array_interface__, **entry_overrides)
    return Obj(__gt_data_interface__={None: entry}, keep=a)


@pytest.mark.parametrize(
    "gt, exc, message",
    [
        (Obj(__gt_data_interface__=[1]), TypeError, "__gt_data_interface__ has type list, not dict"),
        (Obj(__gt_data_interface__={}), ValueError, "has no buffer"),
        (Obj(__gt_data_interface__={"cpu": {}}), ValueError, "key 'cpu' is not a device"),
        (Obj(__gt_data_interface__={None: 5}), TypeError, r"__gt_data_interface__\[None\] has type int"),
        (Obj(__gt_data_interface__={None: {"typestr": "<f8"}}), KeyError, "must contain 'shape'"),
        (_gt(dims=("I",)), ValueError, "dims has 1 entries but the storage has 2"),
        (_gt(dims=("I", "X")), ValueError, '"X" is not a dimension'),
        (_gt(dims=5), TypeError, r"\['dims'\] = 5 is not a sequence of str"),
        (_gt(halo=((0, 0),)), ValueError, "halo has 1 entries"),
        (_gt(halo=((1, 1), (2, 2))), ValueError, r"halo = \(2, 2\) on dimension 1 needs 4 points but the dimension has 3"),
        (_gt(halo=(1, 2)), TypeError, r"\['halo'\] = \(1, 2\) is not a sequence of \(start, end\) pairs"),
        (_gt(halo=((0, 0), (0, 0, 0))), TypeError, r"\(0, 0, 0\)\) is not a sequence of \(start, end\) pairs"),
        # each entry is read as a shape's items are: a bool is not an int (PyO3 read True as
        # 1), a negative int is a ValueError naming the entry (it was a TypeError naming none)
        (_gt(halo=((True, 0), (0, 0))), TypeError,
         r"\['halo'\]\[0\]\[0\]: True is not an int \(type bool\): expected a non-negative int"),
        (_gt(halo=((0, 0), (0, -1))), ValueError,
         r"\['halo'\]\[1\]\[1\]: -1 is out of range: expected a non-negative int"),
        (_gt(halo=((0, 0), (0, 2**64))), ValueError, r"\['halo'\]\[1\]\[1\]: 18446744073709551616 is out"),
        (_gt(acquire=5), TypeError, r"\['acquire'\] = 5 is not callable"),
        (_gt(typestr="<f3"), TypeError, "typestr"),
    ],
)
def test_malformed_gt_interfaces_raise(gt, exc, message):
    with pytest.raises(exc, match=message):
        cai.gt_data(gt)


def test_halo_entries_may_be_lists_and_numpy_integers():
    d = cai.gt_data(_gt(halo=[[np.int64(1), 0], (0, np.uint8(2))]))
    assert d.halo == [(1, 0), (0, 2)]


def test_entries_must_agree():
    a = np.zeros((2, 3))
    gpu = {"shape": (3, 2), "typestr": "<f8", "data": (0x7F0000000000, False), "strides": None,
           "version": 3}
    o = Obj(__gt_data_interface__={None: a.__array_interface__, "gpu": gpu}, keep=a)
    with pytest.raises(ValueError, match="entries disagree: `shape` = \\[2, 3\\] on the host"):
        cai.gt_data(o, sync=False, check_pointer=False)
    gpu["shape"] = (2, 3)
    o = Obj(__gt_data_interface__={None: dict(a.__array_interface__, dims="IJ"),
                                   "gpu": dict(gpu, dims="JI")}, keep=a)
    with pytest.raises(ValueError, match="disagree on `dims`"):
        cai.gt_data(o, sync=False, check_pointer=False)


def test_hook_errors_propagate():
    def boom():
        raise RuntimeError("no")

    d = cai.gt_data(_gt(acquire=boom))
    with pytest.raises(RuntimeError, match="no"):
        d.acquire()


def test_as_storage_takes_dims_and_halo_from_the_data():
    f = cai.examples.Field(3, 4, 5, halo=[(1, 1), (0, 0), (2, 1)])
    s = cai.as_storage(f)
    assert s.dims == ("I", "J", "K") and s.halo == ((1, 1), (0, 0), (2, 1))
    s[1, 1, 1] = 4.0
    assert f.sum() == 4.0  # no copy
    assert cai.as_storage(f, halo=(0, 0, 0)).halo == ((0, 0),) * 3  # explicit first
    z = cai.zeros_like(f)
    assert z.halo == ((1, 1), (0, 0), (2, 1)) and z.shape == (3, 4, 5)
    # a storage is itself a data-interface object
    s2 = cai.as_storage(cai.zeros((2, 2), halo=(1, 0)))
    assert s2.halo == ((1, 1), (0, 0))


# GDP-3, "Default xarray Data Interface": a DataArray is read through its data, with the
# DataArray's dims.
@pytest.fixture
def xr():
    return pytest.importorskip("xarray")


def test_a_data_array_over_numpy_gets_its_dims(xr):
    a = np.arange(6.0).reshape(2, 3)
    d = cai.gt_data(xr.DataArray(a, dims=("J", "I")))
    assert not d.from_gt and d.dims == ["J", "I"] and d.halo is None
    assert d.host.ptr == a.__array_interface__["data"][0]
    s = cai.as_storage(xr.DataArray(a, dims=("K", "I")))  # as_storage reads it the same way
    assert s.dims == ("K", "I") and np.shares_memory(np.asarray(s), a)


class Duck:
    """An array exposing `__gt_data_interface__` as xarray keeps one: a duck array (xarray keeps
    an object as `data` only when it has NumPy's array-function protocols; it converts a
    storage itself to an ndarray)."""

    def __init__(self, array, gt):
        self.array, self.__gt_data_interface__ = array, gt
        self.shape, self.ndim, self.dtype = array.shape, array.ndim, array.dtype

    def __array__(self, dtype=None, copy=None):
        return self.array

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented


def _data_array_over(xr, data, dims):
    if isinstance(data, cai.Storage):
        data = Duck(np.asarray(data), data.__gt_data_interface__)
    da = xr.DataArray(data, dims=dims)
    assert isinstance(da.data, Duck)
    return da


def test_a_data_array_over_a_gt_object_keeps_its_halo_and_hooks(xr):
    a = np.zeros((3, 4))
    calls = []
    gt = {None: dict(a.__array_interface__, halo=((1, 1), (0, 0)), acquire=lambda: calls.append(1))}
    d = cai.gt_data(_data_array_over(xr, Duck(a, gt), ("J", "I")))  # no dims: the DataArray's
    assert d.from_gt and d.dims == ["J", "I"] and d.halo == [(1, 1), (0, 0)]
    assert d.host.ptr == a.__array_interface__["data"][0]
    d.acquire()
    assert calls == [1]
    # dims the data gives must be the DataArray's
    d = cai.gt_data(_data_array_over(xr, cai.zeros((3, 4), dims="KJ"), ("K", "J")))
    assert d.from_gt and d.dims == ["K", "J"]


@pytest.mark.parametrize(
    "make, exc, message",
    [
        # the data's dims must agree with the DataArray's
        (lambda xr: _data_array_over(xr, cai.zeros((3, 4), dims="IJ"), ("J", "I")), ValueError,
         r"DataArray.dims = \[\"J\", \"I\"\] and the `dims` of its data's __gt_data_interface__ = \[\"I\", \"J\"\] disagree"),
        # GDP-3's dims are I, J, K and data dimensions: xarray's free names are not
        (lambda xr: xr.DataArray(np.zeros((2, 3)), dims=("x", "y")), ValueError,
         r'DataArray: dims = \["x", "y"\]: "x" is not a dimension'),
        (lambda xr: xr.DataArray(np.zeros(2), dims=(0,)), TypeError, r"DataArray.dims = \(0,\) is not a sequence of str"),
    ],
)
def test_data_arrays_with_bad_dims_raise(xr, make, exc, message):
    with pytest.raises(exc, match=message):
        cai.gt_data(make(xr))


def test_a_data_array_with_its_own_interface_is_read_through_it(xr):
    # a user's accessor (or subclass) comes first, as GDP-3 lets users override the default
    class Mine(xr.DataArray):
        __slots__ = ()

        @property
        def __gt_data_interface__(self):
            return {None: dict(self.values.__array_interface__, dims=("K",))}

    d = cai.gt_data(Mine(np.zeros(3), dims=("I",)))
    assert d.from_gt and d.dims == ["K"]


def test_a_data_array_written_into_a_storage_is_read_through_its_data_interface(xr):
    # GDP-3 ("Choosing the Device"): a DataArray value is treated by the data interface, not
    # by what NumPy would make of it: its data's own `acquire` runs before the read.
    calls = []
    a = np.arange(6.0).reshape(2, 3)
    gt = {None: dict(a.__array_interface__, acquire=lambda: calls.append("acquire"))}
    s = cai.zeros((2, 3))
    s[...] = _data_array_over(xr, Duck(a, gt), ("I", "J"))
    assert (s.to_numpy() == a).all() and calls == ["acquire"]
    s[0] = xr.DataArray(np.full(3, -1.0), dims=("J",))  # over NumPy
    assert (s.to_numpy()[0] == -1).all()


def test_storage_copies_a_data_array_with_its_dims(xr):
    # storage() reads a DataArray as as_storage does (its dims), where it used to make a
    # NumPy array of it first and lose them.
    s = cai.storage(xr.DataArray(np.arange(6.0).reshape(2, 3), dims=("K", "I")))
    assert s.dims == ("K", "I") and (s.to_numpy() == np.arange(6.0).reshape(2, 3)).all()


# ---------------------------------------------------------------- GT4Py's __gt_dims__ / __gt_origin__


class Gt4PyLike:
    """An object with GT4Py's attributes beside an array interface (an xarray wrapper...)."""

    def __init__(self, a, dims, origin):
        self.a, self.__gt_dims__, self.__gt_origin__ = a, dims, origin

    @property
    def __array_interface__(self):
        return self.a.__array_interface__


def test_storages_give_gt4pys_attributes_in_its_stencils_order():
    s = cai.zeros((5, 6, 7, 2), dims="IJK0", halo=((1, 0), (2, 0), (0, 0), (0, 0)))
    assert s.__gt_dims__ == ("I", "J", "K", "0") and s.__gt_origin__ == (1, 2, 0, 0)
    # GT4Py's stencils reorder the axes to I, J, K, data but take the origin as it comes: it
    # is given in that order (and read back so).
    k = cai.zeros((5, 6, 7), dims="KJI", halo=((3, 0), (2, 0), (1, 0)))
    assert k.__gt_dims__ == ("K", "J", "I") and k.__gt_origin__ == (1, 2, 3)
    assert cai.as_storage(Gt4PyLike(np.zeros((5, 6, 7)), "KJI", (1, 2, 3))).halo == ((3, 0), (2, 0), (1, 0))


def test_gt_attributes_of_any_object_and_their_errors():
    a = np.zeros((4, 3))
    s = cai.as_storage(Gt4PyLike(a, ("J", "K"), (2, 1)))
    assert (s.dims, s.halo) == (("J", "K"), ((2, 0), (1, 0)))
    assert cai.as_storage(Gt4PyLike(a, "JK", np.array([2, 1]))).dims == ("J", "K")
    assert cai.as_storage(Gt4PyLike(a, iter(["J", "K"]), (x for x in (0, 1)))).halo == ((0, 0), (1, 0))
    # A field whose domain starts past 0 has a negative origin: no halo there.
    assert cai.as_storage(Gt4PyLike(a, None, (-2, 1))).halo == ((0, 0), (1, 0))
    # Names cai has no dimension for (gt4py.next's): the dims are left unsaid, the origin in
    # the data's order.
    s = cai.as_storage(Gt4PyLike(a, ("IDim", "KDim"), (1, 0)))
    assert (s.dims, s.halo) == (("I", "J"), ((1, 0), (0, 0)))
    for bad, exc, message in [
        ((("J",), None), ValueError, r"__gt_dims__ = \('J',\) names 1 dimensions but the data has 2"),
        ((b"IJ", None), TypeError, "__gt_dims__ = b'IJ' is not a sequence of dimension names"),
        (({"I", "J"}, None), TypeError, "is not a sequence of dimension names"),
        (((1, 2), None), TypeError, None),
        ((("I", "I"), None), ValueError, '__gt_dims__: dims = .*"I" appears twice'),
        ((None, (5, 0)), ValueError, r"__gt_origin__ = \(5, 0\): halo"),
        ((None, (1,)), ValueError, r"__gt_origin__ = \(1,\) has 1 entries but the data has 2 dimensions"),
        ((None, (1, True)), TypeError, r"__gt_origin__\[1\] = True is a bool"),
        ((None, (1, 2.5)), TypeError, r"__gt_origin__\[1\] = 2.5 is not an int"),
        ((None, (1, 2**70)), ValueError, r"__gt_origin__\[1\] = .* is out of range"),
        ((None, 3), TypeError, "__gt_origin__ = 3 is not a sequence of ints"),
    ]:
        if message is None:
            cai.as_storage(Gt4PyLike(a, *bad))  # names made of digits: data dimensions "1", "2"
            continue
        with pytest.raises(exc, match=message):
            cai.as_storage(Gt4PyLike(a, *bad))
    # The data interface's own dims and halo come first.
    s = cai.zeros((4, 3), dims="JK", halo=(1, 0))
    assert cai.as_storage(s).dims == ("J", "K")


def test_errors_of_gt_attributes_propagate_but_attribute_errors_mean_absent():
    class Raises:
        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__

        @property
        def __gt_dims__(self):
            raise RuntimeError("dims boom")

    class Iter:
        def __iter__(self):
            raise RuntimeError("iter boom")

    class Missing:
        __gt_origin__ = (1, 0)

        def __init__(self, a):
            self.__array_interface__ = a.__array_interface__

        @property
        def __gt_dims__(self):
            raise AttributeError("not here")

    a = np.zeros((4, 3))
    with pytest.raises(RuntimeError, match="dims boom"):
        cai.as_storage(Raises(a))
    with pytest.raises(RuntimeError, match="iter boom"):
        cai.as_storage(Gt4PyLike(a, Iter(), None))
    with pytest.raises(RuntimeError, match="iter boom"):
        cai.as_storage(Gt4PyLike(a, None, Iter()))
    assert cai.as_storage(Missing(a)).halo == ((1, 0), (0, 0))


class FieldLike:
    """A GT4Py field: dims and origin, no array interface, its items in `ndarray` (this one
    makes a new array on each access, which only the caller then holds)."""

    __gt_dims__ = ("I",)
    __gt_origin__ = (1,)

    def __init__(self):
        self.made = []

    @property
    def ndarray(self):
        a = np.full(512, 1.0)
        self.made.append(weakref.ref(a))
        return a


def test_a_field_read_through_its_ndarray_keeps_that_array():
    """Before, the storage held only the field: an `ndarray` made for the read was freed, and
    the storage wrote into whatever took its memory."""
    for wrap in (cai.as_storage, lambda d: cai.storage(d, copy=False)):
        f = FieldLike()
        s = wrap(f)
        del f
        import gc

        gc.collect()
        victim = np.zeros(512)
        s[...] = 42.0
        assert (victim == 0).all() and (s.to_numpy() == 42.0).all()
        assert (s.dims, s.halo) == (("I",), ((1, 0),))
    c = cai.storage(FieldLike())
    assert (c.to_numpy() == 1.0).all() and c.halo == ((1, 0),)


def test_an_object_with_a_data_interface_is_read_through_it_not_its_ndarray():
    class Both:
        __gt_dims__ = ("I", "J")

        def __init__(self):
            self.a = np.arange(6.0).reshape(2, 3)

        @property
        def __gt_data_interface__(self):
            return {None: dict(self.a.__array_interface__, dims=("I", "J"))}

        @property
        def ndarray(self):
            return np.full((2, 3), -1.0)

    b = Both()
    assert (cai.as_storage(b).to_numpy() == b.a).all()
    assert (cai.storage(b).to_numpy() == b.a).all()


def test_a_view_says_what_it_read():
    """`GtDataView` had no repr (`<cai.GtDataView object at 0x...>`)."""
    g = cai.gt_data(np.zeros((2, 3)))
    text = repr(g)
    assert text.startswith("GtDataView(host=HostArrayView(shape=(2, 3)")
    assert "gpu=None, dims=None, halo=None, from_gt=False)" in text
    s = cai.zeros((2, 3), halo=(1, 0))
    assert "dims=('I', 'J'), halo=((1, 1), (0, 0)), from_gt=True" in repr(cai.gt_data(s))
