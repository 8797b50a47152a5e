"""Shared helpers of the host test suite."""

import ctypes

import pytest


class PyArrayInterface(ctypes.Structure):
    """`PyArrayInterface` of numpy/ndarraytypes.h, what an `__array_struct__` capsule holds."""

    _fields_ = [
        ("two", ctypes.c_int),
        ("nd", ctypes.c_int),
        ("typekind", ctypes.c_char),
        ("itemsize", ctypes.c_int),
        ("flags", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("data", ctypes.c_void_p),
        ("descr", ctypes.c_void_p),
    ]


@pytest.fixture
def array_struct():
    """`array_struct(obj)`: `obj.__array_struct__` and the struct in it (valid while the
    capsule lives)."""

    def read(obj):
        capsule = obj.__array_struct__
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        return capsule, PyArrayInterface.from_address(get(capsule, None))

    return read
