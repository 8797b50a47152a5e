"""One protocol surface on the device: DeviceArray (derived traits), a device-only storage, a
mirrored storage, an import view and the derive's DeviceMatrix over the same kind of memory
expose the same protocols, made by the same generator, and answer them alike (on a GPU and on
the emulated driver). The host kinds are checked in tests/python/test_protocol_surface.py.
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
DEVICE = {"__cuda_array_interface__", "__dlpack__", "__dlpack_device__"}
VALUES = np.arange(6.0).reshape(2, 3)


def device_array():
    return cai.DeviceArray(VALUES)


def device_storage():
    return cai.as_storage(device_array())  # device-only: a storage over the array's memory


def mirrored_storage():
    s = cai.zeros((2, 3), dtype="f8", device="gpu")
    s.to_numpy()[...] = VALUES
    s.set_host_modified()
    s.synchronize()  # both sides clean: DLPack exports the device's
    return s


def view():
    return cai.from_dlpack(device_array())


def device_matrix():
    a = device_array()
    # float32 is DeviceMatrix's item: the same bytes read as 24 of them.
    return ex.DeviceMatrix(a.ptr, 4, 3, owner=a)


KINDS = {
    "DeviceArray": device_array,
    "device storage": device_storage,
    "mirrored storage": mirrored_storage,
    "import view": view,
    "derived DeviceMatrix": device_matrix,
}


def exposed(obj):
    return {p for p in PROTOCOLS if hasattr(obj, p)}


@pytest.mark.parametrize("kind", KINDS)
def test_device_kinds_expose_the_device_protocols(kind):
    obj = KINDS[kind]()
    want = DEVICE | ({"__array_interface__", "__array_struct__"} if kind == "mirrored storage" else set())
    assert exposed(obj) == want


def test_every_class_has_the_generators_methods():
    objects = [make() for make in KINDS.values()]
    for name in PROTOCOLS:
        docs = {getattr(type(o), name).__doc__ for o in objects if hasattr(o, name)}
        assert len(docs) == 1, (name, docs)


@pytest.mark.parametrize("kind", KINDS)
def test_device_protocols_agree_with_each_other(kind):
    obj = KINDS[kind]()
    d = obj.__cuda_array_interface__
    assert obj.__dlpack_device__() == (2, 0)
    imported = cai.from_dlpack(obj)
    assert isinstance(imported, cai.CudaArrayView) and imported.ptr == d["data"][0]
    got = np.from_dlpack(obj, device="cpu")  # a copy to the host, after the producer's work
    assert got.tobytes() == VALUES.tobytes()


@pytest.mark.parametrize("kwargs", [dict(stream=0), dict(stream="x"), dict(dl_device=(3, 0)), dict(copy=1)])
def test_bad_requests_are_answered_alike(kwargs):
    answers = {}
    for kind, make in KINDS.items():
        try:
            make().__dlpack__(max_version=(1, 0), **kwargs)
            answers[kind] = "ok"
        except Exception as e:  # noqa: BLE001 - compared, not swallowed
            answers[kind] = (type(e), str(e))
    assert len(set(answers.values())) == 1, answers
    assert next(iter(answers.values())) != "ok"
