"""DLPack's C structures (dlpack.h 1.x) in ctypes, for reading capsules and for building
producers of any tensor, well-formed or not, whose deleter runs Python code (as cuda.core's
Buffer's does): it counts its calls, records the exception pending at each, and raises when told. Used by the host
suite (tests/python/test_dlpack.py) and the GPU suite (tests/gpu/test_dlpack.py; the bundle
carries this file)."""

import ctypes
import sys


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_GetName.restype = ctypes.c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.py_object]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Capsule names must outlive the capsules: module constants.
NAMES = {
    name: ctypes.create_string_buffer(name)
    for name in [b"dltensor", b"dltensor_versioned", b"used_dltensor", b"used_dltensor_versioned", b"foo"]
}


def capsule_name(capsule):
    return api.PyCapsule_GetName(capsule).decode()


def managed(capsule):
    """The managed tensor a capsule holds (valid while the capsule or its consumer holds it)."""
    name = capsule_name(capsule)
    p = api.PyCapsule_GetPointer(capsule, name.encode())
    kind = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    return kind.from_address(p)


class Producer:
    """A DLPack producer made with ctypes: a tensor of any fields, over memory `keep` holds,
    whose deleter counts its calls (`deleted`), records the exception pending at each
    (`pending`: `None` when there was none, as there must be) and raises `RuntimeError` if
    `raise_in_deleter`."""

    def __init__(
        self,
        keep=None,
        *,
        data=None,
        shape=(3,),
        strides=None,
        dtype=(2, 64, 1),
        device=(1, 0),
        version=(1, 3),
        flags=0,
        byte_offset=0,
        ndim=None,
        name=None,
        legacy_only=False,
        raise_in_deleter=False,
    ):
        self.keep = keep
        self.deleted = 0
        self.calls = []
        self.data = data if data is not None else (keep.ctypes.data if keep is not None else None)
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.version = version
        self.flags = flags
        self.byte_offset = byte_offset
        self.ndim = len(shape) if ndim is None else ndim
        self.name = name
        self.legacy_only = legacy_only
        self.pending = []

        def delete(_):
            self.deleted += 1
            # Python code that a pending exception breaks: a call, an import, a lookup.
            self.pending.append(sys.exc_info()[0])
            if raise_in_deleter:
                raise RuntimeError("the deleter failed")

        self._deleter = DELETER(delete)

    def __dlpack_device__(self):
        return self.device

    def _tensor(self):
        self._shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        strides = None
        if self.strides is not None:
            self._strides = (ctypes.c_int64 * max(len(self.strides), 1))(*self.strides)
            strides = self._strides
        return DLTensor(
            data=self.data,
            device=DLDevice(*self.device),
            ndim=self.ndim,
            dtype=DLDataType(*self.dtype),
            shape=self._shape,
            strides=strides,
            byte_offset=self.byte_offset,
        )

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        if self.legacy_only and kwargs.keys() - {"stream"}:
            raise TypeError("__dlpack__() got an unexpected keyword argument")
        versioned = not self.legacy_only and kwargs.get("max_version") is not None
        if versioned:
            self._managed = DLManagedTensorVersioned(
                version=DLPackVersion(*self.version),
                deleter=self._deleter,
                flags=self.flags,
                dl_tensor=self._tensor(),
            )
        else:
            self._managed = DLManagedTensor(dl_tensor=self._tensor(), deleter=self._deleter)
        name = self.name or (b"dltensor_versioned" if versioned else b"dltensor")
        return api.PyCapsule_New(ctypes.addressof(self._managed), NAMES[name], None)
