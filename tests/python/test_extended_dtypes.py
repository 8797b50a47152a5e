"""bfloat16 and the float8 formats keep their identity wherever a consumer can represent them:
ml_dtypes' dtypes in NumPy (storages, views, `__array_struct__`, the creators) and DLPack's type
codes (JAX, both ways). A CAI or `__array_interface__` dict cannot say them: there they are their
bytes (`<V2`, `|V1`), and without ml_dtypes they are those bytes everywhere, as before.
"""

import subprocess
import sys

import numpy as np
import pytest

import cai
from dlpack_producer import managed

ml_dtypes = pytest.importorskip("ml_dtypes")

EXTENDED = {
    # name: (DLPack type code, bits, the dict's typestr)
    "bfloat16": (4, 16, "<V2"),
    "float8_e4m3fn": (10, 8, "|V1"),
    "float8_e5m2": (12, 8, "|V1"),
}
VALUES = np.array([1.0, -2.0, 0.5, 448.0 / 4], dtype=np.float32)


def of(name):
    return np.dtype(getattr(ml_dtypes, name))


def sample(name):
    return VALUES.astype(of(name))


@pytest.fixture(params=list(EXTENDED))
def name(request):
    return request.param


def test_storages_have_the_type(name):
    made = {
        "zeros": cai.zeros(4, dtype=of(name)),
        "storage (a copy)": cai.storage(sample(name)),
        "as_storage (zero-copy)": cai.as_storage(sample(name)),
    }
    for how, s in made.items():
        assert s.dtype == of(name), how
        assert np.asarray(s).dtype == of(name), how  # through __array_struct__
    s = made["storage (a copy)"]
    np.testing.assert_array_equal(np.asarray(s), sample(name))
    # The dict says the bytes, as the protocols can.
    assert s.__array_interface__["typestr"] == EXTENDED[name][2]


def test_views_have_the_type(name):
    x = sample(name)
    for v in (cai.as_host_array(x), cai.from_dlpack(cai.storage(x))):
        assert v.dtype == of(name)
        assert np.asarray(v).dtype == of(name)
        np.testing.assert_array_equal(np.asarray(v), x)


def test_dlpack_carries_each_types_own_code(name):
    code, bits, _ = EXTENDED[name]
    for exporter in (cai.storage(sample(name)), cai.as_host_array(sample(name))):
        t = managed(exporter.__dlpack__(max_version=(1, 0))).dl_tensor
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, bits, 1)


def test_the_float8_formats_are_not_each_other():
    a, b = cai.storage(sample("float8_e4m3fn")), cai.storage(sample("float8_e5m2"))
    assert a.dtype != b.dtype
    assert cai.from_dlpack(a).dtype == of("float8_e4m3fn")
    assert cai.from_dlpack(b).dtype == of("float8_e5m2")


class DictOnly:
    """A producer exposing only `__array_interface__` (no `dtype`): all it says of the items
    is the dict's typestr."""

    def __init__(self, array):
        self.array = array

    @property
    def __array_interface__(self):
        return self.array.__array_interface__


def test_a_dict_only_producers_bfloat16_is_bfloat16_everywhere():
    # PyTorch and NumPy with ml_dtypes write bfloat16 as a bare `<V2` (NumPy's own two-byte
    # void is `|V2`): views, storages and copies read it so, as DLPack exports it.
    x = sample("bfloat16")
    for how, made in {
        "view": lambda: cai.as_host_array(DictOnly(x)),
        "view of the dict": lambda: cai.from_array_interface(x.__array_interface__),
        "as_storage": lambda: cai.as_storage(DictOnly(x)),
        "storage (a copy)": lambda: cai.storage(DictOnly(x)),
        "storage (a copy) of a strided one": lambda: cai.storage(DictOnly(sample("bfloat16")[::-1][::1])),
    }.items():
        if "strided" in how:
            np.testing.assert_array_equal(np.asarray(made()), x[::-1])
            continue
        s = made()
        assert s.dtype == of("bfloat16"), how
        assert np.asarray(s).dtype == of("bfloat16"), how
        np.testing.assert_array_equal(np.asarray(s), x, err_msg=how)


@pytest.mark.parametrize("field", list(EXTENDED))
def test_structured_items_keep_their_fields_types(field):
    dt = np.dtype([("x", of(field)), ("y", np.float32)])
    a = np.zeros(3, dt)
    a["x"] = sample(field)[:3]
    for how, v in {
        "view": cai.as_host_array(a),
        "view of a dict-only producer": cai.as_host_array(DictOnly(a)),
        "storage": cai.storage(a),
        # A copy reads the dict as cai does (NumPy reads bfloat16's `<V2` field as bytes, and
        # cannot read float8_e5m2's `<f1`), holding what the view shows.
        "storage (a copy) of a dict-only producer": cai.storage(DictOnly(a)),
    }.items():
        if "dict-only" in how and field == "float8_e4m3fn":
            # Its field is `|V1` in the dict: opaque bytes, as NumPy reads it. (bfloat16's is
            # `<V2`, float8_e5m2's `<f1`: each says its type.)
            assert np.asarray(v).dtype == np.dtype([("x", "V1"), ("y", np.float32)]), how
            continue
        assert v.dtype == dt, how
        assert np.asarray(v).dtype == dt, how  # through __array_struct__
        np.testing.assert_array_equal(np.asarray(v)["x"], a["x"], err_msg=how)


def test_float8_e5m2_dicts_are_copied_too():
    x = sample("float8_e5m2")
    assert DictOnly(x).__array_interface__["typestr"] == "<f1"  # ml_dtypes' spelling
    for s in (cai.storage(DictOnly(x)), cai.as_storage(DictOnly(x))):
        assert s.dtype == of("float8_e5m2")
        np.testing.assert_array_equal(np.asarray(s), x)


@pytest.mark.parametrize("field", ["<i2", "<f2", ">V2", "|V2", "<V2"])
def test_a_descr_other_than_the_default_is_read_as_numpy_reads_it(field):
    # `<V2` stands for bfloat16 only where the dict says nothing more: with a `descr` that is
    # not `[('', '<V2')]` its items are what the descr says, as NumPy reads them.
    buf = np.array([1, 2, 3, 4], "<i2")
    d = {"shape": (4,), "typestr": "<V2", "descr": [("", field)], "data": (buf.ctypes.data, False), "version": 3}
    producer = type("Producer", (), {"__array_interface__": d, "keep": buf})
    numpys = np.asarray(producer()).dtype
    expected = of("bfloat16") if field == "<V2" else numpys
    for how, s in {
        "view": cai.as_host_array(producer()),
        "view of the dict": cai.from_array_interface(d, owner=buf),
        "as_storage": cai.as_storage(producer()),
        "storage (a copy)": cai.storage(producer()),
    }.items():
        assert s.dtype == expected, (how, s.dtype)
        assert np.asarray(s).dtype == expected, how
        assert np.asarray(s).tobytes() == buf.tobytes(), how


def test_a_copy_holds_what_as_storage_holds_and_propagates_the_producers_errors():
    a1 = np.arange(4, dtype=np.float32)
    a2 = a1 + 100

    class Both:  # a dict and a struct that disagree: cai reads the dict
        __array_interface__ = property(lambda s: a1.__array_interface__)
        __array_struct__ = property(lambda s: a2[:1].__array_struct__)

    np.testing.assert_array_equal(np.asarray(cai.storage(Both())), np.asarray(cai.as_storage(Both())))
    np.testing.assert_array_equal(np.asarray(cai.storage(Both())), a1)

    class Boom(Exception):
        pass

    for fail_on in range(1, 12):
        calls = []

        class Flaky:  # its getter raises on one call: that error, whichever call it is
            @property
            def __array_interface__(self):
                calls.append(1)
                if len(calls) == fail_on:
                    raise Boom(len(calls))
                return sample("bfloat16").__array_interface__

            keep = sample("bfloat16")

        try:
            s = cai.storage(Flaky())
        except Boom:
            continue
        assert len(calls) < fail_on and s.dtype == of("bfloat16"), (fail_on, len(calls))


def test_an_owner_dtype_is_numpys_only_if_its_type_is():
    class Fake:  # a dtype's attributes, and a __class__ that says numpy.dtype
        __class__ = property(lambda s: np.dtype)
        fields, isnative, name, itemsize = None, True, "bfloat16", 2

    buf = np.zeros(4, "u2")
    owner = type("Owner", (), {"dtype": Fake(), "keep": buf, "__array_interface__": {
        "shape": (4,), "typestr": "|V2", "data": (buf.ctypes.data, False), "version": 3}})()
    assert cai.as_host_array(owner).dtype == np.dtype("V2")


def test_dlpack_copy_takes_numpy_bools_as_numpy_does():
    for exporter in (cai.zeros(3), cai.as_host_array(np.zeros(3))):
        for copy in (np.True_, np.False_, True, None):
            assert managed(exporter.__dlpack__(max_version=(1, 0), copy=copy)).dl_tensor.ndim == 1
        with pytest.raises(TypeError, match="copy"):
            exporter.__dlpack__(copy="yes")


def test_plain_opaque_bytes_stay_opaque():
    v = cai.as_host_array(np.zeros(3, dtype="V2"))
    assert v.dtype == np.dtype("V2")
    with pytest.raises(BufferError, match="V2"):
        v.__dlpack__(max_version=(1, 0))


def test_jax_both_ways(name):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    j = jnp.asarray(VALUES).astype(getattr(jnp, name))
    v = cai.from_dlpack(j)
    assert v.dtype == of(name)
    np.testing.assert_array_equal(np.asarray(v), sample(name))
    s = cai.storage(sample(name))
    for back in (jax.dlpack.from_dlpack(s), jnp.asarray(s), jnp.asarray(cai.from_dlpack(s))):
        assert back.dtype == getattr(jnp, name)
        np.testing.assert_array_equal(np.asarray(back), sample(name))


def test_without_ml_dtypes_they_are_their_bytes():
    code = """
import sys
sys.modules["ml_dtypes"] = None  # import fails: as where it is not installed
import numpy as np, cai
from dlpack_producer import Producer
# A bfloat16 tensor from a DLPack producer: still bfloat16 to DLPack, two bytes to NumPy.
v = cai.from_dlpack(Producer(np.zeros(3, dtype="<u2"), dtype=(4, 16, 1)))
assert v.dtype == np.dtype("V2"), v.dtype
assert np.asarray(v).dtype == np.dtype("V2")
# A dict-only struct with float8_e5m2 fields (`<f1`): their bytes, wrapped as viewed.
buf = np.arange(4, dtype="u1")
class D:
    __array_interface__ = {"shape": (2,), "typestr": "|V2", "descr": [("x", "<f1"), ("y", "<f1")],
                           "data": (buf.ctypes.data, False), "version": 3}
    keep = buf
expected = np.dtype([("x", "V1"), ("y", "V1")])
for s in (cai.as_host_array(D()), cai.as_storage(D())):
    assert s.dtype == expected and np.asarray(s).tobytes() == buf.tobytes(), s.dtype
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=__file__.rsplit("/", 1)[0]
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_byte_swapped_bfloat16_is_never_read_as_native():
    y = sample("bfloat16").astype(of("bfloat16").newbyteorder(">"))
    v = cai.as_host_array(y)
    assert v.dtype != of("bfloat16")
    with pytest.raises(BufferError):
        v.__dlpack__(max_version=(1, 0))


def test_a_module_named_ml_dtypes_is_trusted_only_for_the_type_itself():
    code = """
import sys, types
import numpy as np
fake = types.ModuleType("ml_dtypes")
fake.bfloat16 = np.float32  # not the type: four bytes an item
sys.modules["ml_dtypes"] = fake
import cai
from dlpack_producer import Producer
v = cai.from_dlpack(Producer(np.zeros(3, dtype="<u2"), dtype=(4, 16, 1)))
a = np.asarray(v)
assert v.dtype == np.dtype("V2") and a.dtype.itemsize == 2 and a.nbytes == 6, (v.dtype, a.dtype)
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=__file__.rsplit("/", 1)[0]
    )
    assert out.stdout.strip() == "ok", out.stderr
