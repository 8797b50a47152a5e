"""DLPack 1.3's C exchange table (`__dlpack_c_exchange_api__`) in ctypes, for tests.

Producer side: `make_producer_type(**knobs)` makes a class whose instances wrap a NumPy array
and whose type publishes a table of ctypes callbacks, well-formed or misbehaving as the knobs
say, with counters (`T.exchange`: calls per function, deleter calls, tensors still alive).

Consumer side: `read_table(x)` reads any type's table (header and function addresses), and
`call_*` call its functions as a C consumer does (through `ctypes.PYFUNCTYPE`: the GIL held, and
a Python exception the function leaves set is raised), returning NumPy views and values.

How a ctypes callback fails "with a Python exception set": an exception raised in a ctypes
callback never reaches the C caller (ctypes prints it as unraisable and returns garbage), and
setting one with `ctypes.pythonapi` inside the callback fails too (ctypes raises it in the
callback, or CPython turns a result returned with an exception set into SystemError). Two ways
work, on CPython 3.11 to 3.13 release builds:
- "raise" (the two functions whose first argument is the Python object): the table's slot is
  CPython's `PyObject_IsTrue` (managed_tensor_from_py_object_no_sync) or `PyObject_Size`
  (dltensor_from_py_object_no_sync), which return -1 with the exception that the class's
  `__bool__` / `__len__` raise (any exception, `Control.exc`). The extra argument is ignored
  (the C calling conventions of x86-64 and AArch64 allow it).
- "memory_error" and "zero_with_error" (any function): the callback returns an `int` subclass
  holding a capsule whose destructor is `PyErr_NoMemory`; ctypes drops that result after it
  converted it, past CPython's checks, so the C caller gets the value with MemoryError set.
"""

import ctypes
import weakref

import numpy as np

from dlpack_producer import DELETER, DLDataType, DLDevice, DLManagedTensorVersioned, DLPackVersion, DLTensor, api

c_int, c_void_p, c_char_p = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p

SLOTS = (
    "managed_tensor_allocator",
    "managed_tensor_from_py_object_no_sync",
    "managed_tensor_to_py_object_no_sync",
    "dltensor_from_py_object_no_sync",
    "current_work_stream",
)
ALLOCATOR, FROM_PY, TO_PY, DLTENSOR_FROM_PY, CURRENT_WORK_STREAM = SLOTS
READ_ONLY, IS_COPIED = 1, 2
KDLCPU, KDLCUDA, KDLCUDAHOST = 1, 2, 3


class DLPackExchangeAPIHeader(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", c_void_p)]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [("header", DLPackExchangeAPIHeader)] + [(slot, c_void_p) for slot in SLOTS]


assert ctypes.sizeof(DLPackExchangeAPI) == 56

SET_ERROR = ctypes.CFUNCTYPE(None, c_void_p, c_char_p, c_char_p)
_ARGS = {
    ALLOCATOR: (c_void_p, c_void_p, c_void_p, c_void_p),  # prototype, out, error_ctx, SetError
    FROM_PY: (c_void_p, c_void_p),  # py_object, out
    TO_PY: (c_void_p, c_void_p),  # tensor, out_py_object
    DLTENSOR_FROM_PY: (c_void_p, c_void_p),  # py_object, out DLTensor*
    CURRENT_WORK_STREAM: (ctypes.c_int32, ctypes.c_int32, c_void_p),  # device_type, device_id, out
}
# Producers' callbacks: ctypes takes the GIL itself. Consumers' calls: the GIL stays held.
CALLBACK = {slot: ctypes.CFUNCTYPE(c_int, *args) for slot, args in _ARGS.items()}
CALL = {slot: ctypes.PYFUNCTYPE(c_int, *args) for slot, args in _ARGS.items()}
_CALL_DELETER = ctypes.PYFUNCTYPE(None, c_void_p)

api.Py_IncRef.argtypes = [ctypes.py_object]
api.Py_DecRef.argtypes = [ctypes.py_object]
_ADDRESS = {
    "PyErr_NoMemory": ctypes.cast(api.PyErr_NoMemory, c_void_p).value,
    "PyObject_IsTrue": ctypes.cast(api.PyObject_IsTrue, c_void_p).value,
    "PyObject_Size": ctypes.cast(api.PyObject_Size, c_void_p).value,
}
_CAPSULE_NAME = ctypes.create_string_buffer(b"dlpack_exchange_api")
_ANCHOR = ctypes.c_char()


class _Ret(int):
    """A callback's result that leaves MemoryError set once ctypes has converted and dropped it."""


def _with_memory_error(value):
    ret = _Ret(value)
    ret.hook = api.PyCapsule_New(ctypes.addressof(_ANCHOR), None, _ADDRESS["PyErr_NoMemory"])
    return ret


def _obj(address):
    return ctypes.cast(address, ctypes.py_object).value


def _write_pointer(address, value):
    c_void_p.from_address(address).value = value


# --- NumPy <-> DLPack dtypes ------------------------------------------------------------------

_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_KINDS = {code: kind for kind, code in _CODES.items()}


def dl_dtype(dtype):
    dtype = np.dtype(dtype)
    return (_CODES[dtype.kind], dtype.itemsize * 8, 1)


def np_dtype(code, bits, lanes=1):
    if lanes != 1 or code not in _KINDS:
        raise TypeError(f"no NumPy dtype for DLPack dtype ({code}, {bits}, {lanes})")
    return np.dtype(f"{_KINDS[code]}{bits // 8}")


def _int64s(values):
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def fill_dltensor(out, array, keep, *, device=(KDLCPU, 0), null_shape=False, null_strides=False, byte_offset=0):
    """Writes `array`'s DLTensor into `out` (a `DLTensor`); the shape and strides it points to
    are appended to `keep`, which must outlive it. `byte_offset` moves `data` back by that much."""
    shape = _int64s(array.shape)
    strides = _int64s([s // array.itemsize for s in array.strides])
    keep += [shape, strides]
    out.data = (array.ctypes.data - byte_offset) or None
    out.device = DLDevice(*device)
    out.ndim = array.ndim
    out.dtype = DLDataType(*dl_dtype(array.dtype))
    out.shape = None if null_shape else shape
    out.strides = None if null_strides else strides
    out.byte_offset = byte_offset


class Owner:
    """Makes `DLManagedTensorVersioned`s of NumPy arrays whose deleter counts its calls
    (`deleted`), forgets the tensor (`live`: address -> what it holds), counts calls for
    tensors it does not hold (`unknown_deletes`: a second call, say) and raises if told."""

    def __init__(self, *, deleter_raises=False, null_deleter=False):
        self.deleted = 0
        self.unknown_deletes = 0
        self.live = {}
        self.deleter_raises = deleter_raises
        self.null_deleter = null_deleter
        self._deleter = DELETER(self._delete)

    def _delete(self, address):
        self.deleted += 1
        if self.live.pop(address, None) is None:
            self.unknown_deletes += 1
        if self.deleter_raises:
            raise RuntimeError("the deleter failed")

    def managed(self, array, *, version=(1, 3), flags=None, **tensor):
        """The address of a new managed tensor over `array` (read-only flag from NumPy's unless
        `flags` says); `tensor`: `fill_dltensor`'s knobs."""
        array = np.asarray(array)
        m = DLManagedTensorVersioned(version=DLPackVersion(*version))
        keep = [m, array]
        fill_dltensor(m.dl_tensor, array, keep, **tensor)
        m.flags = (0 if array.flags.writeable else READ_ONLY) if flags is None else flags
        m.deleter = DELETER() if self.null_deleter else self._deleter
        self.live[ctypes.addressof(m)] = keep
        return ctypes.addressof(m)


def make_managed(array, **knobs):
    """A managed tensor over `array` for feeding consumers' `managed_tensor_to_py_object_no_sync`:
    `(address, owner)`; `owner.deleted` counts deleter calls. `knobs`: `Owner.managed`'s."""
    owner = Owner()
    return owner.managed(array, **knobs), owner


# --- producer ---------------------------------------------------------------------------------

MODES = ("ok", "raise", "memory_error", "silent", "zero_with_error", "null_out", "set_error", "fail_after_out", None)


class Control(Owner):
    """A producer type's knobs and counters, `T.exchange`.

    - `calls[slot]`: calls of each function (those of "raise" counted by `__bool__`/`__len__`);
      `dlpack_calls`: calls of `__dlpack__`; `deleted`, `live`, `unknown_deletes`: `Owner`'s.
    - `modes[slot]` (set with `set_mode`): "ok"; "raise" (-1 with `exc` set; the two
      functions taking the object only); "memory_error" (-1 with MemoryError set);
      "silent" (-1, no exception); "zero_with_error" (does its work, returns 0 with MemoryError
      set); "null_out" (0 with the output NULL; dltensor_from_py leaves its DLTensor unwritten);
      "set_error" (the allocator only: calls SetError(ctx, "MemoryError", ...) and returns -1);
      "fail_after_out" (managed_tensor_from_py_object_no_sync only: writes a tensor to `out`,
      then fails as C code often does, deleting it itself and returning -1 with MemoryError);
      `None`: the slot is NULL.
    - `errors`: exceptions the callbacks raised (each returned -1 with MemoryError set).
    - `stream`: what current_work_stream writes; `stream_calls`: its (device_type, device_id)s.
    - `tensor`: knobs of the tensors made (`Owner.managed`'s: device, version, flags,
      null_shape, null_strides, byte_offset); `deleter_raises`, `null_deleter`.
    - `table`: the `DLPackExchangeAPI`; `address`: its address."""

    def __init__(self, cls, *, version, prev_api, modes, exc, stream, tensor, **owner):
        super().__init__(**owner)
        self.cls = cls
        self.calls = dict.fromkeys(SLOTS, 0)
        self.dlpack_calls = 0
        self.stream_calls = []
        self.exc = exc
        self.stream = stream
        self.tensor = dict(tensor)
        self.table = DLPackExchangeAPI()
        self.address = ctypes.addressof(self.table)
        self.table.header.version = DLPackVersion(*version)
        self.table.header.prev_api = table_address(prev_api) if prev_api is not None else None
        self.errors = []
        self.callbacks = {
            ALLOCATOR: CALLBACK[ALLOCATOR](self._guard(self._allocator)),
            FROM_PY: CALLBACK[FROM_PY](self._guard(self._from_py)),
            TO_PY: CALLBACK[TO_PY](self._guard(self._to_py)),
            DLTENSOR_FROM_PY: CALLBACK[DLTENSOR_FROM_PY](self._guard(self._dltensor_from_py)),
            CURRENT_WORK_STREAM: CALLBACK[CURRENT_WORK_STREAM](self._guard(self._current_work_stream)),
        }
        self.modes = {}
        for slot in SLOTS:
            self.set_mode(slot, modes.get(slot, "ok"))

    def set_mode(self, slot, mode, exc=None):
        """Changes a function's behaviour, rewriting the table in place (a consumer that keeps the
        function pointers rather than the table sees the change only for modes "ok" and the
        error ones that keep the callback)."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}")
        if mode == "raise" and slot not in (FROM_PY, DLTENSOR_FROM_PY):
            raise ValueError("mode 'raise' needs a function whose first argument is the object")
        if mode == "set_error" and slot != ALLOCATOR:
            raise ValueError("mode 'set_error' is the allocator's")
        if mode == "fail_after_out" and slot != FROM_PY:
            raise ValueError("mode 'fail_after_out' is managed_tensor_from_py_object_no_sync's")
        if exc is not None:
            self.exc = exc
        self.modes[slot] = mode
        if mode is None:
            address = None
        elif mode == "raise":
            address = _ADDRESS["PyObject_IsTrue" if slot == FROM_PY else "PyObject_Size"]
        else:
            address = ctypes.cast(self.callbacks[slot], c_void_p).value
        setattr(self.table, slot, address)

    def _guard(self, function):
        """A callback's exception cannot reach its caller: keep it in `errors` and return -1
        with MemoryError set."""

        def guarded(*args):
            try:
                return function(*args)
            except Exception as e:
                self.errors.append(e)
                return _with_memory_error(-1)

        return guarded

    def _result(self, slot):
        """`None` to do the work and return 0, else what to return straight away."""
        self.calls[slot] += 1
        mode = self.modes[slot]
        if mode == "memory_error":
            return _with_memory_error(-1)
        if mode in ("silent", "set_error"):
            return -1
        return None

    def _done(self, slot):
        return _with_memory_error(0) if self.modes[slot] == "zero_with_error" else 0

    def _from_py(self, py_object, out):
        early = self._result(FROM_PY)
        if early is not None:
            return early
        if self.modes[FROM_PY] == "null_out":
            _write_pointer(out, None)
            return 0
        address = self.managed(_obj(py_object).array, **self.tensor)
        _write_pointer(out, address)
        if self.modes[FROM_PY] == "fail_after_out":
            Managed(address).delete()
            return _with_memory_error(-1)
        return self._done(FROM_PY)

    def _dltensor_from_py(self, py_object, out):
        early = self._result(DLTENSOR_FROM_PY)
        if early is not None or self.modes[DLTENSOR_FROM_PY] == "null_out":
            return early or 0
        obj = _obj(py_object)
        tensor = {k: v for k, v in self.tensor.items() if k not in ("version", "flags")}
        obj._dl_keep = []  # valid while the object lives (until control returns suffices)
        fill_dltensor(DLTensor.from_address(out), obj.array, obj._dl_keep, **tensor)
        return self._done(DLTENSOR_FROM_PY)

    def _current_work_stream(self, device_type, device_id, out):
        self.stream_calls.append((device_type, device_id))
        early = self._result(CURRENT_WORK_STREAM)
        if early is not None:
            return early
        _write_pointer(out, None if self.modes[CURRENT_WORK_STREAM] == "null_out" else self.stream)
        return self._done(CURRENT_WORK_STREAM)

    def _allocator(self, prototype, out, error_ctx, set_error):
        early = self._result(ALLOCATOR)
        if self.modes[ALLOCATOR] == "set_error":
            SET_ERROR(set_error)(error_ctx, b"MemoryError", b"the producer's allocator failed")
        if early is not None:
            return early
        if self.modes[ALLOCATOR] == "null_out":
            _write_pointer(out, None)
            return 0
        p = DLTensor.from_address(prototype)
        shape = tuple(p.shape[i] for i in range(p.ndim))
        array = np.zeros(shape, np_dtype(p.dtype.code, p.dtype.bits, p.dtype.lanes))
        tensor = dict(self.tensor, device=(p.device.device_type, p.device.device_id))
        _write_pointer(out, self.managed(array, **tensor))
        return self._done(ALLOCATOR)

    def _to_py(self, tensor, out):
        early = self._result(TO_PY)
        if early is not None:
            return early
        if self.modes[TO_PY] == "null_out":
            _write_pointer(out, None)
            return 0
        managed = Managed(tensor)
        obj = self.cls.__new__(self.cls)
        obj.array = managed.numpy() if managed.device[0] in (KDLCPU, KDLCUDAHOST) else None
        obj.adopted = managed
        weakref.finalize(obj, managed.delete)  # the tensor is the object's now
        api.Py_IncRef(obj)  # the new reference the caller gets
        _write_pointer(out, id(obj))
        return self._done(TO_PY)


class ProducerBase:
    """Instances of `make_producer_type`'s classes: `T(array)`; `array` is the NumPy array."""

    exchange = None  # the type's Control

    def __init__(self, array):
        self.array = np.asarray(array)

    def __dlpack_device__(self):
        return tuple(self.exchange.tensor.get("device", (KDLCPU, 0)))

    def __bool__(self):
        if self.exchange.modes[FROM_PY] == "raise":
            self.exchange.calls[FROM_PY] += 1
            raise self.exchange.exc
        return True

    def __len__(self):
        if self.exchange.modes[DLTENSOR_FROM_PY] == "raise":
            self.exchange.calls[DLTENSOR_FROM_PY] += 1
            raise self.exchange.exc
        return len(self.array)


def _dlpack(self, **kwargs):
    self.exchange.dlpack_calls += 1
    return self.array.__dlpack__(**kwargs)


def _dlpack_raises(self, **kwargs):
    self.exchange.dlpack_calls += 1
    raise BufferError("__dlpack__ is not to be called: the exchange table is")


def make_producer_type(
    name="ExchangeProducer",
    *,
    version=(1, 3),
    prev_api=None,
    publish="capsule",
    capsule_name=b"dlpack_exchange_api",
    modes=None,
    null=(),
    exc=None,
    stream=0,
    dlpack="numpy",
    deleter_raises=False,
    null_deleter=False,
    tensor_version=(1, 3),
    **tensor,
):
    """A new class whose type publishes an exchange table of ctypes callbacks over its
    instances' NumPy arrays. Knobs:

    - `version`: the header's (major, minor); `prev_api`: the header's `prev_api` (a type,
      instance, capsule, address or `Control`: its table).
    - `publish`: how `__dlpack_c_exchange_api__` is published: "capsule"; "int" (the address);
      "null_pointer" (a capsule whose pointer field is NULL: PyCapsule_GetPointer fails);
      "none" (the attribute is None); "instance" (on instances only, not the type); "absent".
      `capsule_name`: the capsule's name.
    - `modes`: {slot: mode} (see `Control`); `null`: slots left NULL; `exc`: what "raise" raises
      (default BufferError).
    - `stream`: current_work_stream's stream (an int).
    - `dlpack`: `__dlpack__`: "numpy" (the array's), "raise" (BufferError), "absent".
    - `deleter_raises`, `null_deleter`: the managed tensors' deleter raises / is NULL.
    - `tensor_version`: the managed tensors' version; `tensor`: their other fields
      (`fill_dltensor`'s knobs and `flags`): `device=(1, 0)`, `flags=None` (read-only as NumPy
      says), `null_shape`, `null_strides`, `byte_offset` (`data` moved back that much).

    Everything the table needs lives in `T.exchange` (a `Control`), kept by the type: keep the
    type alive while a consumer may hold its table."""
    modes = dict(modes or {})
    modes.update(dict.fromkeys(null))
    namespace = {"__module__": __name__}
    if dlpack != "absent":
        namespace["__dlpack__"] = {"numpy": _dlpack, "raise": _dlpack_raises}[dlpack]
    cls = type(name, (ProducerBase,), namespace)
    control = Control(
        cls,
        version=version,
        prev_api=prev_api,
        modes=modes,
        exc=exc if exc is not None else BufferError("the producer refused to export"),
        stream=stream,
        tensor=dict(tensor, version=tensor_version),
        deleter_raises=deleter_raises,
        null_deleter=null_deleter,
    )
    cls.exchange = control
    control.capsule_name = ctypes.create_string_buffer(capsule_name)  # must outlive the capsule
    if publish in ("capsule", "null_pointer", "instance"):
        capsule = api.PyCapsule_New(control.address, control.capsule_name, None)
        if publish == "null_pointer":
            # PyCapsule: PyObject_HEAD, then `void *pointer` (PyCapsule_New refuses NULL)
            _write_pointer(id(capsule) + 2 * ctypes.sizeof(c_void_p), None)
        if publish == "instance":
            cls.__init__ = _instance_publisher(capsule)
        else:
            cls.__dlpack_c_exchange_api__ = capsule
    elif publish == "int":
        cls.__dlpack_c_exchange_api__ = control.address
    elif publish == "none":
        cls.__dlpack_c_exchange_api__ = None
    elif publish != "absent":
        raise ValueError(f"publish {publish!r}")
    return cls


def _instance_publisher(capsule):
    def __init__(self, array):
        ProducerBase.__init__(self, array)
        self.__dlpack_c_exchange_api__ = capsule

    return __init__


# --- consumer ---------------------------------------------------------------------------------


class SilentFailure(Exception):
    """A table's function returned non-zero and left no Python exception set."""


class Table:
    """A table read by `read_table`: `address`, `version` (major, minor), `prev_api` (an
    address or None) and `functions` ({slot: address or None}; {} unless major is 1)."""

    def __init__(self, address):
        self.address = address
        header = DLPackExchangeAPIHeader.from_address(address)
        self.version = (header.version.major, header.version.minor)
        self.prev_api = header.prev_api
        self.functions = {}
        if self.version[0] == 1:
            table = DLPackExchangeAPI.from_address(address)
            self.functions = {slot: getattr(table, slot) for slot in SLOTS}

    def __repr__(self):
        return f"Table({self.address:#x}, version={self.version}, prev_api={self.prev_api}, {self.functions})"

    def chain(self):
        """This table and those `prev_api` leads to."""
        tables = [self]
        while tables[-1].prev_api:
            tables.append(Table(tables[-1].prev_api))
        return tables

    def function(self, slot):
        address = self.functions.get(slot)
        if not address:
            raise ValueError(f"{slot} is NULL")
        return CALL[slot](address)


def table_address(x):
    """The address of a table: `x` is a `Table`, `Control`, address, capsule, type or instance
    (its type's `__dlpack_c_exchange_api__`, a capsule named "dlpack_exchange_api" or an int)."""
    if isinstance(x, (Table, Control)):
        return x.address
    if isinstance(x, int):
        return x
    if type(x).__name__ == "PyCapsule":
        return api.PyCapsule_GetPointer(x, _CAPSULE_NAME)
    return table_address((x if isinstance(x, type) else type(x)).__dlpack_c_exchange_api__)


def read_table(x):
    """The table of `x` (see `table_address`) as a `Table`."""
    return x if isinstance(x, Table) else Table(table_address(x))


class _View:
    """A DLTensor's fields, and `numpy()`: a NumPy view of host memory."""

    def _read(self, t):
        self.data = t.data
        self.device = (t.device.device_type, t.device.device_id)
        self.ndim = t.ndim
        self.dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
        self.shape = tuple(t.shape[i] for i in range(t.ndim)) if t.shape else None
        self.strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
        self.byte_offset = t.byte_offset
        self.read_only = False

    def numpy(self):
        if self.device[0] not in (KDLCPU, KDLCUDAHOST):
            raise BufferError(f"device {self.device} is not host memory")
        if self.shape is None and self.ndim:
            raise BufferError("NULL shape")
        dtype = np_dtype(*self.dtype)
        shape = self.shape or ()
        strides = self.strides
        if strides is None:  # compact row-major
            strides, step = [], 1
            for n in reversed(shape):
                strides.insert(0, step)
                step *= n
        strides = [s * dtype.itemsize for s in strides]
        if 0 in shape:
            array = np.empty(shape, dtype)
        else:
            low = sum(s * (n - 1) for s, n in zip(strides, shape) if s < 0)
            high = sum(s * (n - 1) for s, n in zip(strides, shape) if s > 0) + dtype.itemsize
            buffer = (ctypes.c_char * (high - low)).from_address(self.data + self.byte_offset + low)
            buffer.keep = self
            array = np.ndarray(shape, dtype, buffer=buffer, offset=-low, strides=strides)
        if self.read_only:
            array.flags.writeable = False
        return array


class DLTensorView(_View):
    """What dltensor_from_py_object_no_sync wrote (a copy of the DLTensor; its shape and
    strides are read at once, valid as the producer keeps them)."""

    def __init__(self, t):
        self._read(t)
        # Where its shape and strides are (a lender keeps them in place).
        self.shape_address = ctypes.cast(t.shape, c_void_p).value
        self.strides_address = ctypes.cast(t.strides, c_void_p).value


class Managed(_View):
    """A `DLManagedTensorVersioned*` a consumer holds: its fields, `numpy()` (a view that keeps
    this alive) and `delete()` (calls the deleter, with the GIL held, at most once)."""

    def __init__(self, address):
        self.address = address
        m = DLManagedTensorVersioned.from_address(address)
        self.version = (m.version.major, m.version.minor)
        self.flags = m.flags
        self._read(m.dl_tensor)
        self.read_only = bool(self.flags & READ_ONLY)
        self.deleter = ctypes.cast(m.deleter, c_void_p).value
        self.deleted = False

    def delete(self):
        if self.deleted:
            raise RuntimeError("deleted already")
        self.deleted = True
        if self.deleter:
            _CALL_DELETER(self.deleter)(self.address)


def _check(slot, rc):
    if rc != 0:
        raise SilentFailure(f"{slot} returned {rc} with no exception set")


def call_from_py(x, obj):
    """managed_tensor_from_py_object_no_sync(obj) of `x`'s table (`x`: see `table_address`;
    default `obj`'s type): a `Managed`, or None where it returned 0 and a NULL tensor."""
    out = c_void_p()
    _check(FROM_PY, read_table(x).function(FROM_PY)(id(obj), ctypes.addressof(out)))
    return Managed(out.value) if out.value else None


def call_dltensor_from_py(x, obj):
    """dltensor_from_py_object_no_sync(obj): a `DLTensorView` (its `numpy()` valid while
    `obj` lives)."""
    out = DLTensor()
    _check(DLTENSOR_FROM_PY, read_table(x).function(DLTENSOR_FROM_PY)(id(obj), ctypes.addressof(out)))
    return DLTensorView(out)


def call_current_work_stream(x, device_type=KDLCPU, device_id=0):
    """current_work_stream(device_type, device_id): the stream as an int (0 for NULL)."""
    out = c_void_p()
    _check(CURRENT_WORK_STREAM, read_table(x).function(CURRENT_WORK_STREAM)(device_type, device_id, ctypes.addressof(out)))
    return out.value or 0


class ProducerError(Exception):
    """The allocator failed and called SetError: `kind`, `message`."""

    def __init__(self, kind, message):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def call_allocator(x, shape, dtype, device=(KDLCPU, 0)):
    """managed_tensor_allocator for a prototype of `shape`, NumPy `dtype` and `device`: a
    `Managed` (None where it returned 0 and NULL); `ProducerError` where it called SetError and
    failed; `.set_errors` lists the SetError calls."""
    shape_array = _int64s(shape)
    prototype = DLTensor(
        device=DLDevice(*device), ndim=len(shape), dtype=DLDataType(*dl_dtype(dtype)), shape=shape_array
    )
    errors = []

    def set_error(_ctx, kind, message):
        errors.append((kind.decode(), message.decode()))

    set_error_c = SET_ERROR(set_error)
    out = c_void_p()
    rc = read_table(x).function(ALLOCATOR)(
        ctypes.addressof(prototype), ctypes.addressof(out), None, ctypes.cast(set_error_c, c_void_p).value
    )
    if rc != 0:
        if errors:
            raise ProducerError(*errors[-1])
        _check(ALLOCATOR, rc)
    managed = Managed(out.value) if out.value else None
    if managed is not None:
        managed.set_errors = errors
    return managed


def call_to_py(x, tensor):
    """managed_tensor_to_py_object_no_sync(tensor) (an address, which it takes, or a
    `Managed`): the object (None where it returned 0 and NULL)."""
    address = tensor.address if isinstance(tensor, Managed) else tensor
    out = c_void_p()
    _check(TO_PY, read_table(x).function(TO_PY)(address, ctypes.addressof(out)))
    if not out.value:
        return None
    obj = _obj(out.value)
    api.Py_DecRef(obj)  # the reference the function gave us; `obj` holds its own
    return obj
