"""What adversarial testing found on the device side (on a GPU and on the emulated driver), as
tests/python/test_hostile.py does on the host:

1. a device producer's DLPack deleter that runs Python code while the user's exception is set;
4. a mirrored storage's host buffer is aligned as its device buffer is;
5. ``DeviceArray`` keeps a structured source's fields, or refuses them;
7. ``DeviceArray.view`` refuses more than 64 dimensions, at once;
8. a legacy device capsule is imported read-only.
"""

import gc
import itertools
import time

import numpy as np
import pytest

import cai
from dlpack_producer import Producer


def address_of(descriptor, index):
    """The address of item `index` of an interface dict."""
    strides = descriptor["strides"]
    if strides is None:
        itemsize = np.dtype(descriptor["typestr"]).itemsize
        strides, step = [], itemsize
        for n in reversed(descriptor["shape"]):
            strides.insert(0, step)
            step *= n
    return descriptor["data"][0] + sum(i * s for i, s in zip(index, strides))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(alignment_size=4096),
        dict(alignment_size=4096, aligned_index=(3,)),
        dict(alignment_size=24),
        dict(defaults="gtcuda"),
        dict(defaults="gtcuda", halo=(2,)),
    ],
    ids=repr,
)
def test_a_mirrored_storages_host_items_are_aligned_as_its_device_items(kwargs):
    s = cai.zeros((100,), device="gpu", **kwargs)
    assert s.managed == "gt4py"
    a = s.alignment_size
    index = s.aligned_index or (0,)
    device = address_of(s.__cuda_array_interface__, index)
    host = address_of(s.__array_interface__, index)
    assert device % a == 0
    assert host % a == 0, f"host item {index} at {host:#x} is not {a}-aligned"
    # The mirror still copies every item, both ways.
    s.to_numpy()[...] = np.arange(100.0)
    s.set_host_modified()
    s.host_to_device()
    s.to_numpy()[...] = 0
    s.set_device_modified()
    assert (s.to_numpy() == np.arange(100.0)).all()


def test_device_array_refuses_a_struct_that_is_not_its_record():
    xy = np.zeros(2, [("x", "<f8"), ("y", "<f8")])
    with pytest.raises(TypeError, match=r"descr \[\('x', '<f8'\), \('y', '<f8'\)\]"):
        cai.DeviceArray(xy)
    # Its own Record (NumPy's aligned struct) keeps its fields, padding included.
    record = np.zeros(2, np.dtype([("id", "<i4"), ("value", "<f8")], align=True))
    record["id"] = [1, 2]
    d = cai.DeviceArray(record)
    assert d.__cuda_array_interface__["descr"] == [("id", "<i4"), ("", "|V4"), ("value", "<f8")]


def test_device_array_views_of_more_than_64_dimensions_are_refused_at_once():
    d = cai.DeviceArray(np.zeros(8, dtype=np.uint8))
    assert d.view((1,) * 64).__cuda_array_interface__["shape"] == (1,) * 64
    started = time.monotonic()
    for shape in [(1,) * 65, (1,) * 100_000, itertools.repeat(1)]:
        with pytest.raises(ValueError, match="64"):
            d.view(shape)
    assert time.monotonic() - started < 2


def test_a_device_deleter_running_python_keeps_the_users_exception():
    a = cai.DeviceArray(np.zeros(64, dtype=np.uint8))
    p = Producer(data=a.ptr, shape=(8,), strides=(1,), dtype=(1, 8, 1), device=(2, 0))
    with pytest.raises(TypeError):
        float(cai.from_dlpack(p, stream=1))
    gc.collect()
    assert p.deleted == 1 and p.pending == [None]


def test_a_legacy_device_capsule_is_imported_read_only():
    a = cai.DeviceArray(np.zeros(64, dtype=np.uint8))
    p = Producer(data=a.ptr, shape=(8,), strides=(1,), dtype=(1, 8, 1), device=(2, 0), legacy_only=True)
    v = cai.from_dlpack(p, stream=1)
    assert v.readonly and v.__cuda_array_interface__["data"][1] is True


def test_device_array_refuses_opaque_or_reordered_16_byte_items():
    reordered = np.dtype({"names": ["id", "value"], "formats": ["<i4", "<f8"], "offsets": [12, 0], "itemsize": 16})
    for source in [np.zeros(2, "V16"), np.zeros(2, reordered)]:
        with pytest.raises(TypeError, match="DeviceArray has no element type"):
            cai.DeviceArray(source)


def test_a_mirror_pair_of_structs_with_other_sub_array_steps_is_refused():
    inner8 = np.dtype({"names": ["x"], "formats": ["<f4"], "offsets": [0], "itemsize": 8})
    inner16 = np.dtype({"names": ["x"], "formats": ["<f4"], "offsets": [0], "itemsize": 16})
    sub8 = np.dtype({"names": ["s"], "formats": [(inner8, (2,))], "offsets": [0], "itemsize": 32})
    sub16 = np.dtype([("s", inner16, (2,))])
    host = np.zeros(3, sub8)
    raw = cai.DeviceArray(np.zeros(3 * 32, dtype=np.uint8))

    class OnDevice:
        __cuda_array_interface__ = {
            "shape": (3,),
            "typestr": "|V32",
            "descr": sub16.descr,
            "data": (raw.ptr, False),
            "strides": None,
            "version": 3,
            "stream": None,
        }

    with pytest.raises(ValueError, match="two copies of one array"):
        cai.as_storage(host, OnDevice())
