"""One protocol surface: every kind of cai class (derived with `#[cai_runtime::pymethods]`,
derived with `#[cai(python)]`, a hand-written interface, storages, import views) exposes the
same protocol methods, made by the same generator, with the same semantics.

The docstrings are the generator's: a class whose protocol methods were written by hand (a
fourth copy) has other docstrings, or another protocol set, and fails here.
"""

import numpy as np
import pytest

import cai
import cai.examples as ex

PROTOCOLS = (
    "__cuda_array_interface__",
    "__array_interface__",
    "__array_struct__",
    "__dlpack__",
    "__dlpack_device__",
)
HOST = {"__array_interface__", "__array_struct__", "__dlpack__", "__dlpack_device__"}
DEVICE = {"__cuda_array_interface__", "__dlpack__", "__dlpack_device__"}
VALUES = np.arange(6.0).reshape(2, 3)


def grid():
    g = ex.Grid(2, 3)
    np.asarray(g)[:] = VALUES
    return g


def buffer():
    b = ex.Buffer(48, "<f8", [2, 3])
    np.asarray(b)[:] = VALUES
    return b


def storage():
    s = cai.zeros((2, 3), dtype="f8")
    np.asarray(s)[:] = VALUES
    return s


def host_view():
    return cai.as_host_array(VALUES.copy())


# What each host kind is: (make it, whether cai vouches for its memory, so that DLPack copies).
HOST_KINDS = {
    "derived (pymethods)": (grid, True),
    "derived (cai(python))": (lambda: ex.counts(6), True),
    "hand-written ArrayInterface": (buffer, False),
    "storage": (storage, True),
    "import view": (host_view, True),
}


def device_matrix():
    # An address no one reads here (no driver): only described.
    return ex.DeviceMatrix(0x10000, 2, 3)


def cuda_view():
    return cai.from_cuda_array_interface(device_matrix().__cuda_array_interface__, check_pointer=False)


DEVICE_KINDS = {"derived (pymethods)": device_matrix, "import view": cuda_view}


def exposed(obj):
    return {p for p in PROTOCOLS if hasattr(obj, p)}


def outcome(call):
    """What a call gives: its value, or its exception's type and message."""
    try:
        return ("ok", call())
    except Exception as e:  # noqa: BLE001 - compared, not swallowed
        return (type(e), str(e))


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_host_kinds_expose_the_host_protocols(kind):
    obj = HOST_KINDS[kind][0]()
    assert exposed(obj) == HOST
    with pytest.raises(AttributeError):
        obj.__cuda_array_interface__


@pytest.mark.parametrize("kind", DEVICE_KINDS)
def test_device_kinds_expose_the_device_protocols(kind):
    obj = DEVICE_KINDS[kind]()
    assert exposed(obj) == DEVICE
    with pytest.raises(AttributeError):
        obj.__array_interface__


def test_every_class_has_the_generators_methods():
    objects = [make() for make, _ in HOST_KINDS.values()] + [make() for make in DEVICE_KINDS.values()]
    for name in PROTOCOLS:
        docs = {getattr(type(o), name).__doc__ for o in objects if hasattr(o, name)}
        assert len(docs) == 1, (name, docs)


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_host_protocols_agree_with_each_other(kind):
    obj = HOST_KINDS[kind][0]()
    d = obj.__array_interface__

    class DictOnly:
        __array_interface__ = d

    via_struct, via_dict, via_dlpack = np.asarray(obj), np.asarray(DictOnly()), np.from_dlpack(obj)
    for a in (via_dict, via_dlpack):
        assert a.ctypes.data == via_struct.ctypes.data
        assert a.shape == via_struct.shape and a.strides == via_struct.strides
        assert a.dtype == via_struct.dtype
        assert a.flags.writeable == via_struct.flags.writeable
    assert obj.__dlpack_device__() == (1, 0)


# Requests every class must answer alike (each one's own message is checked in test_dlpack.py).
BAD_REQUESTS = [
    dict(stream=5),
    dict(stream="x"),
    dict(max_version=(1,)),
    dict(dl_device=(2, 0)),
    dict(dl_device=(1, 5)),
    dict(copy=1),
]


@pytest.mark.parametrize("kwargs", BAD_REQUESTS)
def test_bad_requests_are_answered_alike(kwargs):
    answers = {k: outcome(lambda: make().__dlpack__(**{"max_version": (1, 0), **kwargs})) for k, (make, _) in HOST_KINDS.items()}
    assert len(set(answers.values())) == 1, answers
    assert next(iter(answers.values()))[0] != "ok"


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_copies_are_made_where_the_memory_is_vouched_for(kind):
    make, vouched = HOST_KINDS[kind]
    obj = make()
    if vouched:
        c = np.from_dlpack(obj, copy=True)
        assert c.ctypes.data != np.asarray(obj).ctypes.data
        assert np.array_equal(c, np.asarray(obj))
    else:
        with pytest.raises(BufferError, match="vouched for"):
            obj.__dlpack__(max_version=(1, 0), copy=True)


def test_device_kinds_answer_alike():
    objects = [make() for make in DEVICE_KINDS.values()]
    dicts = [o.__cuda_array_interface__ for o in objects]
    assert all(d == dicts[0] for d in dicts)
    for call in (lambda o: o.__dlpack_device__(), lambda o: o.__dlpack__(max_version=(1, 0))):
        answers = {outcome(lambda: call(o)) for o in objects}
        assert len(answers) == 1, answers


# ---- what an attack on the one surface found (each failed before its fix)


def _dict_only(d):
    return type("DictOnly", (), {"__array_interface__": d})()


def test_a_views_capsule_says_what_its_dict_says():
    """NumPy reads `__array_struct__` first: for a view it gives the dtype NumPy makes of the
    view's dict (`descr` names the items of a void type only, and not as the default entry)."""
    b = np.arange(4, dtype="<i4")
    union = np.arange(4, dtype=(np.int32, {"lo": (np.int16, 0), "hi": (np.int16, 2)}))
    views = [
        cai.as_host_array(union),
        cai.from_array_interface(dict(b.__array_interface__, descr=[("a", "<f4")]), owner=b),
        cai.from_array_interface(dict(b.__array_interface__, typestr="|V4", descr=[("", "<i4")]), owner=b),
    ]
    for v in views:
        numpys = np.asarray(_dict_only(v.__array_interface__)).dtype
        assert np.asarray(v).dtype == numpys
        assert v.dtype == numpys  # the view's own dtype follows the same rule
    np.asarray(views[0]) + 1  # an int32 array, as through the dict


def test_a_descr_numpy_refuses_is_refused_through_the_capsule_too():
    r = np.zeros(16, "u1")
    d = {"data": (r.ctypes.data, False), "shape": (2,), "typestr": "|V8", "descr": [("a", "<i4"), ("a", "<i4")], "version": 3}
    v = cai.from_array_interface(d, owner=r)
    with pytest.raises(ValueError, match="more than once"):
        np.asarray(_dict_only(v.__array_interface__))
    with pytest.raises(ValueError, match="more than once"):
        np.asarray(v)


def test_a_view_whose_class_was_swapped_raises_typeerror_not_a_panic():
    host = cai.as_host_array(np.arange(3.0))
    dev = cuda_view()
    host.__class__, dev.__class__ = type(dev), type(host)
    with pytest.raises(TypeError, match="__class__ was changed"):
        dev.get((0,))
    with pytest.raises(TypeError, match="__class__ was changed"):
        host.sync_plan


class Interrupt(Exception):
    pass


class IndexRaises:
    def __index__(self):
        raise Interrupt("from __index__")


class IndexOnly:
    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_an_index_that_raises_propagates_and_one_that_answers_is_an_int(kind):
    obj = HOST_KINDS[kind][0]()
    for kwargs in (dict(stream=IndexRaises()), dict(max_version=(IndexRaises(), 0)), dict(dl_device=(1, IndexRaises()))):
        with pytest.raises(Interrupt):
            obj.__dlpack__(**kwargs)
    # An int through `__index__` is an int: read once, as a NumPy integer is.
    capsule = obj.__dlpack__(max_version=(IndexOnly(1), IndexOnly(0)), dl_device=(IndexOnly(1), IndexOnly(0)))
    assert np.from_dlpack(type("P", (), {"__dlpack__": lambda self, **k: capsule, "__dlpack_device__": lambda self: (1, 0)})()).size
