"""DLPack's C exchange table (`__dlpack_c_exchange_api__`): cai's own table called as a C
consumer calls it, and cai consuming producers' tables, well-formed and misbehaving (the ctypes
producers of dlpack_exchange.py)."""

import gc
import threading
import weakref

import numpy as np
import pytest

import cai
import cai.examples
import dlpack_exchange as dx

live_exports = cai._native._dlpack_live_exports


def cai_objects():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    return {
        "storage": cai.zeros((3, 4), dtype=np.float32),
        "host view": cai.as_host_array(a),
        "derived": cai.examples.Grid(3, 4),
    }


# --- cai's table, called as a C consumer calls it ---------------------------------------------


@pytest.mark.parametrize(
    "cls,lends",
    [
        (cai.HostArrayView, True),
        (cai.CudaArrayView, True),
        (type(cai.zeros(1)), True),
        # Derived classes build their layout on every export: nothing outlives the call to lend.
        (cai.DeviceArray, False),
        (cai.examples.Grid, False),
    ],
)
def test_every_class_publishes_a_table(cls, lends):
    t = dx.read_table(cls)
    assert t.version == (1, 3)
    assert t.prev_api is None
    assert (t.functions[dx.DLTENSOR_FROM_PY] is not None) == lends
    for slot in (dx.ALLOCATOR, dx.FROM_PY, dx.TO_PY, dx.CURRENT_WORK_STREAM):
        assert t.functions[slot] is not None, slot
    # One table per class, made once.
    assert dx.read_table(cls).address == t.address


@pytest.mark.parametrize("name", ["storage", "host view", "derived"])
def test_from_py_gives_the_data_in_place(name):
    obj = cai_objects()[name]
    before = live_exports()
    m = dx.call_from_py(type(obj), obj)
    assert m.version == (1, 3)
    assert live_exports() == before + 1
    np.testing.assert_array_equal(m.numpy(), np.from_dlpack(obj))
    assert m.numpy().ctypes.data == np.from_dlpack(obj).ctypes.data
    m.delete()
    assert live_exports() == before


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a,
        lambda a: np.asfortranarray(a),
        lambda a: a[::-1, ::2],
        lambda a: a[1:, 1:],
        lambda a: a[0, 0],
        lambda a: a[:0],
    ],
    ids=["C", "F", "negative", "offset", "0-d", "empty"],
)
@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.uint16, np.complex64, np.bool_, np.float16])
def test_from_py_layouts_and_types(view, dtype):
    a = view(np.arange(30).reshape(5, 6).astype(dtype))
    v = cai.as_host_array(a)
    m = dx.call_from_py(type(v), v)
    np.testing.assert_array_equal(m.numpy(), a)
    assert m.numpy().dtype == a.dtype
    m.delete()


def test_from_py_says_read_only():
    a = np.arange(6.0)
    a.flags.writeable = False
    v = cai.as_host_array(a)
    m = dx.call_from_py(type(v), v)
    assert m.flags & dx.READ_ONLY
    m.delete()
    w = cai.as_host_array(np.arange(6.0))
    m = dx.call_from_py(type(w), w)
    assert not m.flags & dx.READ_ONLY
    m.delete()


@pytest.mark.parametrize("name", ["storage", "host view"])
# (0-d as a view: NumPy 2.5 exports a scalar's data read-only, which nothing lends.)
@pytest.mark.parametrize(
    "view", [lambda a: a, lambda a: a[::-1, ::2], lambda a: a[0, 1:2].reshape(()), lambda a: a[:0]]
)
def test_dltensor_from_py_lends_what_the_object_keeps(name, view):
    a = view(np.arange(12, dtype=np.float32).reshape(3, 4))
    obj = cai.as_storage(a) if name == "storage" else cai.as_host_array(a)
    before = live_exports()
    lent = dx.call_dltensor_from_py(type(obj), obj)
    m = dx.call_from_py(type(obj), obj)
    # The owning export's tensor, field by field; nothing allocated (no export is alive).
    for field in ("data", "device", "ndim", "dtype", "shape", "strides", "byte_offset"):
        assert getattr(lent, field) == getattr(m, field), field
    m.delete()
    assert live_exports() == before
    np.testing.assert_array_equal(lent.numpy(), np.asarray(obj))
    # Lent from what the object keeps: the same shape and strides each time.
    again = dx.call_dltensor_from_py(type(obj), obj)
    assert (again.shape_address, again.strides_address) == (lent.shape_address, lent.strides_address)


def test_dltensor_from_py_refuses_read_only_and_what_it_cannot_lend():
    a = np.arange(6.0)
    a.flags.writeable = False
    v = cai.as_host_array(a)
    with pytest.raises(BufferError, match="read-only, and a lent DLTensor"):
        dx.call_dltensor_from_py(type(v), v)
    # (The owning export says so with its flag.)
    dx.call_from_py(type(v), v).delete()
    w = cai.as_host_array(np.arange(3.0))
    with pytest.raises(TypeError, match="^the exchange table of Storage was given a HostArrayView, not a Storage$"):
        dx.call_dltensor_from_py(type(cai.zeros(1)), w)
    structured = cai.as_host_array(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    for _ in range(2):  # the first lend and the cached refusal say the same
        with pytest.raises(BufferError, match="structured"):
            dx.call_dltensor_from_py(type(structured), structured)
    f = dx.read_table(type(w)).function(dx.DLTENSOR_FROM_PY)
    with pytest.raises(ValueError, match="out is NULL"):
        dx._check(dx.DLTENSOR_FROM_PY, f(id(w), 0))


def test_from_py_keeps_the_exporter_alive():
    before = live_exports()
    s = cai.zeros(5, dtype=np.int32)
    np.from_dlpack(s)[:] = 7
    m = dx.call_from_py(type(s), s)
    del s
    gc.collect()
    np.testing.assert_array_equal(m.numpy(), 7)
    m.delete()
    assert live_exports() == before


def test_from_py_refuses_another_class_and_what_dlpack_cannot_say():
    v = cai.as_host_array(np.arange(3.0))
    with pytest.raises(TypeError, match="^the exchange table of Grid was given a HostArrayView, not a Grid$"):
        dx.call_from_py(cai.examples.Grid, v)
    structured = cai.as_host_array(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    with pytest.raises(BufferError, match="structured"):
        dx.call_from_py(type(structured), structured)


def test_a_failing_table_call_releases_what_it_held_at_once():
    """The table's functions run on their caller's GIL outside PyO3's count of attached
    frames: the references an error drops are released at once, not at PyO3's next call (as
    for the fast `__dlpack__`, whose attack found it)."""
    import sys

    v = cai.as_host_array(np.arange(3.0))
    structured = cai.as_host_array(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    dx.call_from_py(type(v), v).delete()  # (the first call makes what later ones reuse)
    for x, obj, error in [(cai.examples.Grid, v, TypeError), (type(structured), structured, BufferError)]:
        before = sys.getrefcount(error), sys.getrefcount(obj)
        for _ in range(1000):
            with pytest.raises(error):
                dx.call_from_py(x, obj)
        assert (sys.getrefcount(error), sys.getrefcount(obj)) == before, x


def test_a_class_of_ones_own_lends_nothing_and_exports():
    """A user's class in `exporter` mode whose `Exporter` keeps no `DlpackCache` leaves
    `lends()` false: its table has no `dltensor_from_py_object_no_sync` (NULL, as the
    standard allows), and everything else works, the Rust `with_dlpack` by an import."""
    x = cai._native._PlainExporter(6)
    t = dx.read_table(type(x))
    assert not t.functions[dx.DLTENSOR_FROM_PY]
    assert t.functions[dx.FROM_PY] and t.functions[dx.CURRENT_WORK_STREAM]
    before = live_exports()
    m = dx.call_from_py(type(x), x)
    np.testing.assert_array_equal(m.numpy(), np.arange(6.0))
    m.delete()
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(6.0))
    np.testing.assert_array_equal(np.asarray(cai.from_dlpack(x)), np.arange(6.0))
    _, readonly, owned = cai._native._with_dlpack_ns(x, 3)
    assert readonly is False and owned  # imported (writable, held), not lent (read-only)
    gc.collect()
    assert live_exports() == before


def test_from_py_from_threads():
    s = cai.zeros((64,), dtype=np.float64)
    errors = []

    def work():
        try:
            for _ in range(200):
                m = dx.call_from_py(type(s), s)
                assert m.shape == (64,)
                m.delete()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    before = live_exports()
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert live_exports() == before


def test_current_work_stream():
    cls = type(cai.zeros(1))
    assert dx.call_current_work_stream(cls, dx.KDLCPU, 0) == 0
    assert dx.call_current_work_stream(cls, dx.KDLCUDA, 0) == 1  # the legacy default stream
    assert dx.call_current_work_stream(cls, 13, 1) == 1
    with pytest.raises(BufferError, match=r"current_work_stream of device \(4, 0\)"):
        dx.call_current_work_stream(cls, 4, 0)


def test_allocator_gives_host_memory():
    m = dx.call_allocator(cai.HostArrayView, (2, 3), np.float32)
    assert m.shape == (2, 3) and m.strides == (3, 1) and m.device == (dx.KDLCPU, 0)
    x = m.numpy()
    x[:] = 5
    assert x.sum() == 30
    m.delete()
    z = dx.call_allocator(cai.HostArrayView, (), np.int64)
    assert z.shape is None and z.numpy().shape == ()  # NULL shape: legal for 0-d since 1.3
    z.delete()
    e = dx.call_allocator(cai.HostArrayView, (0, 4), np.complex128)
    assert e.numpy().shape == (0, 4)
    e.delete()


@pytest.mark.parametrize(
    "shape, device, kind, match",
    [
        ((-1, 2), (1, 0), "ValueError", r"prototype.shape\[0\] = -1: negative"),
        ((2**40, 2**40), (1, 0), "ValueError", "too many"),
        ((2,), (3, 0), "ValueError", "kDLCUDAHost"),
        ((2,), (4, 0), "ValueError", r"prototype.device = \(4, 0\)"),
        ((2,), (1, 1), "ValueError", r"prototype.device = \(1, 1\)"),
        ((2,), (2, 0), "RuntimeError", "cannot allocate 16 bytes"),
    ],
)
def test_allocator_errors_go_through_set_error(shape, device, kind, match):
    with pytest.raises(dx.ProducerError, match=match) as e:
        dx.call_allocator(cai.HostArrayView, shape, np.float64, device)
    assert e.value.kind == kind


def test_to_py_makes_a_cai_view_owning_the_tensor():
    a = np.arange(6.0).reshape(2, 3)
    address, owner = dx.make_managed(a)
    v = dx.call_to_py(cai.HostArrayView, address)
    assert isinstance(v, cai.HostArrayView)
    np.testing.assert_array_equal(np.asarray(v), a)
    assert owner.deleted == 0
    del v
    gc.collect()
    assert owner.deleted == 1 and owner.unknown_deletes == 0


def test_to_py_deletes_a_tensor_it_refuses():
    address, owner = dx.make_managed(np.arange(3.0), device=(4, 0))
    with pytest.raises(ValueError, match=r"dl_tensor.device"):
        dx.call_to_py(cai.HostArrayView, address)
    assert owner.deleted == 1 and not owner.live
    address, owner = dx.make_managed(np.arange(3.0), version=(2, 0))
    with pytest.raises(ValueError, match="version"):
        dx.call_to_py(cai.HostArrayView, address)
    assert owner.deleted == 1


def test_to_py_keeps_read_only():
    a = np.arange(3.0)
    a.flags.writeable = False
    address, owner = dx.make_managed(a)
    v = dx.call_to_py(type(cai.zeros(1)), address)
    assert not np.asarray(v).flags.writeable
    del v
    gc.collect()
    assert owner.deleted == 1


# --- cai consuming producers' tables ----------------------------------------------------------


def test_from_dlpack_uses_the_table():
    T = dx.make_producer_type(dlpack="raise")
    a = np.arange(12.0).reshape(3, 4)[:, ::2]
    v = cai.from_dlpack(T(a))
    assert T.exchange.calls[dx.FROM_PY] == 1 and T.exchange.dlpack_calls == 0
    assert T.exchange.calls[dx.CURRENT_WORK_STREAM] == 0  # host memory: no stream to order
    np.testing.assert_array_equal(np.asarray(v), a)
    assert np.asarray(v).ctypes.data == a.ctypes.data
    assert T.exchange.deleted == 0
    del v
    gc.collect()
    assert T.exchange.deleted == 1 and not T.exchange.live and T.exchange.unknown_deletes == 0


def test_the_view_outlives_the_producer():
    T = dx.make_producer_type(dlpack="raise")
    v = cai.from_dlpack(T(np.arange(5) * 3))
    gc.collect()
    np.testing.assert_array_equal(np.asarray(v), np.arange(5) * 3)


def test_read_only_tensors_stay_read_only():
    T = dx.make_producer_type(dlpack="raise")
    a = np.arange(4.0)
    a.flags.writeable = False
    v = cai.from_dlpack(T(a))
    assert not np.asarray(v).flags.writeable


def test_copy_and_type_without_table_use_dlpack():
    T = dx.make_producer_type()
    v = cai.from_dlpack(T(np.arange(3.0)), copy=True)
    assert T.exchange.dlpack_calls == 1 and T.exchange.calls[dx.FROM_PY] == 0
    np.testing.assert_array_equal(np.asarray(v), np.arange(3.0))
    U = dx.make_producer_type(publish="absent")
    cai.from_dlpack(U(np.arange(3.0)))
    assert U.exchange.dlpack_calls == 1


@pytest.mark.parametrize(
    "version, chain, used",
    [
        ((1, 3), None, "table"),
        ((1, 2), None, "table"),
        ((1, 9), None, "table"),
        ((1, 1), None, "dlpack"),
        ((0, 9), None, "dlpack"),
        ((2, 0), None, "dlpack"),
        ((2, 0), (1, 3), "older table"),
        ((3, 0), (2, 0), "dlpack"),
    ],
)
def test_versions_and_prev_api(version, chain, used):
    older = dx.make_producer_type(version=chain, dlpack="raise") if chain else None
    T = dx.make_producer_type(version=version, prev_api=older.exchange if older else None)
    v = cai.from_dlpack(T(np.arange(4.0)))
    np.testing.assert_array_equal(np.asarray(v), np.arange(4.0))
    calls = {
        "table": T.exchange.calls[dx.FROM_PY],
        "older table": older.exchange.calls[dx.FROM_PY] if older else 0,
        "dlpack": T.exchange.dlpack_calls,
    }
    assert calls[used] == 1, calls
    assert sum(calls.values()) == 1, calls


def test_a_cycle_of_tables_ends():
    T = dx.make_producer_type(version=(2, 0))
    T.exchange.table.header.prev_api = T.exchange.address  # itself
    cai.from_dlpack(T(np.arange(2.0)))
    assert T.exchange.dlpack_calls == 1


@pytest.mark.parametrize(
    "publish, name, match",
    [
        ("capsule", b"not_the_api", "a capsule named 'not_the_api', not 'dlpack_exchange_api'"),
        ("null_pointer", b"dlpack_exchange_api", "a capsule holding NULL"),
    ],
)
def test_malformed_capsules_are_named(publish, name, match):
    T = dx.make_producer_type(publish=publish, capsule_name=name)
    with pytest.raises(ValueError, match=match):
        cai.from_dlpack(T(np.arange(2.0)))
    assert T.exchange.calls[dx.FROM_PY] == 0 and T.exchange.dlpack_calls == 0


@pytest.mark.parametrize("publish", ["none", "int"])
def test_values_that_are_no_capsule_mean_no_table(publish):
    # None switches a table off; an address as an int is never dereferenced (any Python code
    # can write one): `__dlpack__` is used.
    T = dx.make_producer_type(publish=publish)
    np.testing.assert_array_equal(np.asarray(cai.from_dlpack(T(np.arange(2.0)))), np.arange(2.0))
    assert T.exchange.calls[dx.FROM_PY] == 0 and T.exchange.dlpack_calls == 1


def test_a_device_tensor_for_a_host_import_is_refused_before_its_stream_is_asked():
    T = dx.make_producer_type(dlpack="raise", device=(dx.KDLCUDA, 0))
    with pytest.raises(BufferError, match=r"the tensor is on \(2, 0\)"):
        cai._native._import_dlpack_ns(T(np.arange(2.0)), 1)
    assert T.exchange.stream_calls == []
    gc.collect()
    assert T.exchange.deleted == 1 and not T.exchange.live


def test_a_shape_that_overflows_is_named():
    address, owner = dx.make_managed(np.zeros((2, 3)))
    t = dx.DLManagedTensorVersioned.from_address(address).dl_tensor
    t.shape[0] = t.shape[1] = 2**40
    with pytest.raises(ValueError, match=r"`dl_tensor.shape and strides` = \[1099511627776, 1099511627776\]"):
        dx.call_to_py(cai.HostArrayView, address)
    assert owner.deleted == 1


@pytest.mark.parametrize("slot", [dx.FROM_PY, dx.CURRENT_WORK_STREAM])
def test_a_required_function_missing_is_named(slot):
    T = dx.make_producer_type(null=(slot,))
    with pytest.raises(ValueError, match=f"`{slot}` is NULL"):
        cai.from_dlpack(T(np.arange(2.0)))


def test_optional_functions_may_be_null():
    T = dx.make_producer_type(null=(dx.ALLOCATOR, dx.TO_PY, dx.DLTENSOR_FROM_PY), dlpack="raise")
    np.testing.assert_array_equal(np.asarray(cai.from_dlpack(T(np.arange(2.0)))), np.arange(2.0))


@pytest.mark.parametrize(
    "mode, error, match",
    [
        ("raise", KeyError, "the producer's own"),
        ("memory_error", MemoryError, None),
        ("silent", RuntimeError, "managed_tensor_from_py_object_no_sync returned -1 without setting an exception"),
        ("zero_with_error", RuntimeError, r"returned 0 \(success\) with an exception set"),
        ("null_out", ValueError, "returned 0 but no tensor"),
        # A producer that wrote `out`, then failed and freed it: `out` is not the consumer's.
        ("fail_after_out", MemoryError, None),
    ],
)
def test_misbehaving_from_py(mode, error, match):
    T = dx.make_producer_type(modes={dx.FROM_PY: mode}, exc=KeyError("the producer's own"))
    with pytest.raises(error, match=match) as e:
        cai.from_dlpack(T(np.arange(2.0)))
    if mode == "zero_with_error":
        assert isinstance(e.value.__cause__, MemoryError)
    gc.collect()
    assert not T.exchange.live and T.exchange.unknown_deletes == 0  # nothing leaked or freed twice
    assert not T.exchange.errors


@pytest.mark.parametrize(
    "tensor, match",
    [
        ({"null_shape": True}, r"`dl_tensor.shape` = NULL"),
        ({"tensor_version": (2, 0)}, "version"),
        ({"device": (4, 0)}, r"dl_tensor.device"),
    ],
)
def test_malformed_tensors_are_deleted_once(tensor, match):
    T = dx.make_producer_type(dlpack="raise", **tensor)
    with pytest.raises(ValueError, match=match):
        cai.from_dlpack(T(np.arange(3.0)))
    gc.collect()
    assert T.exchange.deleted == 1 and not T.exchange.live and T.exchange.unknown_deletes == 0


def test_null_strides_are_c_order_and_0d_has_no_shape():
    T = dx.make_producer_type(dlpack="raise", null_strides=True)
    np.testing.assert_array_equal(np.asarray(cai.from_dlpack(T(np.arange(6.0).reshape(2, 3)))), np.arange(6.0).reshape(2, 3))
    U = dx.make_producer_type(dlpack="raise", null_shape=True, null_strides=True)
    assert np.asarray(cai.from_dlpack(U(np.array(4.5)))) == 4.5


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_deleter_that_raises_loses_no_exception():
    T = dx.make_producer_type(dlpack="raise", deleter_raises=True)
    v = cai.from_dlpack(T(np.arange(2.0)))
    with pytest.raises(ZeroDivisionError):
        try:
            1 / 0
        finally:
            del v
            gc.collect()
    assert T.exchange.deleted == 1


def test_tables_are_cached_per_type_and_types_are_freed():
    import weakref

    made, types = [], []
    for i in range(40):  # more types than the cache holds (16)
        T = dx.make_producer_type(f"P{i}", dlpack="raise")
        made.append(T.exchange)
        types.append(weakref.ref(T))
        cai.from_dlpack(T(np.arange(2.0)))
        cai.from_dlpack(T(np.arange(2.0)))  # the cached table
    assert all(c.calls[dx.FROM_PY] == 2 for c in made)
    del T, made
    gc.collect()
    # The types the cache let go of are freed; at most the 16 it holds are not.
    assert sum(r() is None for r in types) >= 40 - 16


def test_with_dlpack_lends_where_the_table_does():
    hook = cai._native._with_dlpack_ns
    T = dx.make_producer_type(dlpack="raise")
    _, readonly, owned = hook(T(np.arange(3.0)), 3)
    # Lent: the tensor cannot say whether it may be written, and the view holds no owner (the
    # object, borrowed for the call, keeps it).
    assert readonly and not owned
    assert T.exchange.calls[dx.DLTENSOR_FROM_PY] == 3 and T.exchange.calls[dx.FROM_PY] == 0
    U = dx.make_producer_type(dlpack="raise", null=(dx.DLTENSOR_FROM_PY,))
    _, readonly, owned = hook(U(np.arange(3.0)), 2)
    assert not readonly and owned and U.exchange.calls[dx.FROM_PY] == 2
    gc.collect()
    assert U.exchange.deleted == 2
    V = dx.make_producer_type(dlpack="raise", modes={dx.DLTENSOR_FROM_PY: "raise"}, exc=OSError("lent no tensor"))
    with pytest.raises(OSError, match="lent no tensor"):
        hook(V(np.arange(3.0)), 1)


def items_through_the_scoped_view(obj, dtype, while_viewed=None):
    return cai._native._with_dlpack_array_items(obj, np.dtype(dtype).str, while_viewed)


@pytest.mark.parametrize("dtype", ["f8", "i2", "u1", "c8", "f2"])
@pytest.mark.parametrize(
    "view",
    [
        lambda a: a,
        lambda a: a[::-1, ::2],  # negative and skipping strides
        lambda a: a.T,
        lambda a: a[:, :0],  # no items
        lambda a: a[1, 2],  # 0-d
        lambda a: np.broadcast_to(a[:1], (4, 5)),
    ],
)
def test_with_dlpack_array_reads_a_lent_tensor_as_numpy_does(dtype, view):
    """`ForeignArray::with_dlpack_array`: the items of a tensor a table lends (no import: the
    managed tensor is never asked for), read through the typed ndarray view, as NumPy reads
    the array."""
    a = view((np.arange(20) % 7).astype(dtype).reshape(4, 5))
    T = dx.make_producer_type(dlpack="raise")
    got = items_through_the_scoped_view(T(a), a.dtype)
    assert got == a.ravel().tolist()
    assert T.exchange.calls[dx.DLTENSOR_FROM_PY] == 1 and T.exchange.calls[dx.FROM_PY] == 0
    s = cai.as_storage(np.ascontiguousarray(a))
    assert items_through_the_scoped_view(s, a.dtype) == a.ravel().tolist()


def test_with_dlpack_array_imports_what_is_not_lent():
    a = np.arange(6.0).reshape(2, 3)
    # No table (an ndarray), a table without the lending function, a producer that refuses to
    # lend read-only memory, a lent tensor of host-accessible CUDA memory (asked again, and
    # imported as `with_dlpack` imports it): each read through an import.
    U = dx.make_producer_type(dlpack="raise", null=(dx.DLTENSOR_FROM_PY,))
    r = a.copy()
    r.flags.writeable = False
    for obj in (a, U(a), cai.as_storage(r)):
        assert items_through_the_scoped_view(obj, "f8") == a.ravel().tolist()
    assert U.exchange.calls[dx.FROM_PY] == 1
    gc.collect()
    assert U.exchange.deleted == 1


@pytest.mark.parametrize("device", [(1, 5), (1, -1)])
def test_with_dlpack_array_refuses_a_host_tensor_of_another_device_id(device):
    """kDLCPU's only device is 0: the one pass leaves any other to the import's reading,
    which names it, as every other import does."""
    T = dx.make_producer_type(dlpack="raise", device=device)
    a = np.arange(6.0).reshape(2, 3)
    fast, checked = cai._native._lent_plan_paths(T(a), "<f8")
    assert fast is None and "dl_tensor.device" in checked
    with pytest.raises(ValueError, match="dl_tensor.device"):
        items_through_the_scoped_view(T(a), "f8")


def test_with_dlpack_array_asks_the_producer_to_lend_once():
    """A producer that refuses to lend (a `BufferError`), or lends a tensor the view does not
    read itself, is asked once: the import goes on from its answer."""
    a = np.arange(6.0)
    T = dx.make_producer_type(dlpack="raise", modes={dx.DLTENSOR_FROM_PY: "raise"})
    assert items_through_the_scoped_view(T(a), "f8") == a.tolist()
    assert T.exchange.calls[dx.DLTENSOR_FROM_PY] == 1 and T.exchange.calls[dx.FROM_PY] == 1
    U = dx.make_producer_type(dlpack="raise", modes={dx.DLTENSOR_FROM_PY: "null_out"})
    with pytest.raises(ValueError, match="dl_tensor.device"):
        items_through_the_scoped_view(U(a), "f8")
    assert U.exchange.calls[dx.DLTENSOR_FROM_PY] == 1


def test_with_dlpack_array_refuses_what_as_array_refuses():
    s = cai.zeros((2, 3))
    with pytest.raises(TypeError, match="typestr '<f8'.*f32"):
        items_through_the_scoped_view(s, "f4")
    # A lent tensor is checked as any import's: the producer's bad field is named.
    T = dx.make_producer_type(dlpack="raise", null_shape=True)
    with pytest.raises(ValueError, match="dl_tensor.shape"):
        items_through_the_scoped_view(T(np.arange(3.0)), "f8")
    # The producer's own exception propagates.
    V = dx.make_producer_type(dlpack="raise", modes={dx.DLTENSOR_FROM_PY: "raise"}, exc=OSError("no lend"))
    with pytest.raises(OSError, match="no lend"):
        items_through_the_scoped_view(V(np.arange(3.0)), "f8")


def test_with_dlpack_array_claims_the_bytes_for_the_call():
    """While the scoped view lives, no other import may write the bytes (rust-numpy's borrow
    rules, `claim.rs`); once the call returns, the claim is gone."""
    s = cai.zeros((2, 3))
    seen = []

    def write_elsewhere(obj):
        with pytest.raises(Exception, match="viewed \\(as_array\\)") as e:
            cai.from_dlpack(obj).set((0, 0), 5.0)
        seen.append(e.type)

    assert items_through_the_scoped_view(s, "f8", write_elsewhere) == [0.0] * 6
    assert len(seen) == 1
    cai.from_dlpack(s).set((0, 0), 5.0)
    assert items_through_the_scoped_view(s, "f8")[0] == 5.0


def test_with_dlpack_imports_what_cais_table_will_not_lend():
    hook = cai._native._with_dlpack_ns
    a = np.arange(4.0)
    _, readonly, owned = hook(cai.as_host_array(a), 2)
    assert readonly and not owned  # lent
    a.flags.writeable = False
    for obj in (cai.as_host_array(a), cai.from_dlpack(a), cai.as_storage(a)):
        with pytest.raises(BufferError, match="read-only"):
            dx.call_dltensor_from_py(type(obj), obj)
        _, readonly, owned = hook(obj, 2)  # imported instead, read-only as the tensor says
        assert readonly and owned


@pytest.mark.parametrize("through_a_view", [False, True], ids=["storage", "view"])
def test_cai_consumes_its_own_table_through_the_lent_tensor(through_a_view):
    # cai's own lending classes lend a tensor valid while the object lives: the import reads it
    # and holds the object, with no managed tensor exported (nothing to delete).
    before = live_exports()
    storage = cai.zeros((2, 3), dtype=np.int16)
    ref = weakref.ref(storage)
    s = cai.from_dlpack(storage) if through_a_view else storage
    np.from_dlpack(s)[:] = 4
    v = cai.from_dlpack(s)
    assert isinstance(v, cai.HostArrayView)
    assert live_exports() == before
    address = np.from_dlpack(s).ctypes.data
    del s, storage
    gc.collect()
    assert ref() is not None  # the view holds its producer
    a = np.asarray(v)
    assert a.ctypes.data == address and a.flags.writeable
    np.testing.assert_array_equal(a, 4)
    a[0, 0] = 7
    assert np.asarray(ref())[0, 0] == 7
    del v, a
    gc.collect()
    assert ref() is None
    assert live_exports() == before


def test_cai_imports_its_own_read_only_storage_through_the_managed_tensor():
    # A lent tensor cannot say "read-only": such a storage's table lends nothing, and its
    # managed tensor (flagged read-only) is imported instead.
    a = np.arange(6.0).reshape(2, 3)
    a.flags.writeable = False
    s = cai.as_storage(a)
    before = live_exports()
    v = cai.from_dlpack(s)
    assert live_exports() == before + 1
    assert not np.asarray(v).flags.writeable
    np.testing.assert_array_equal(np.asarray(v), a)
    del v
    gc.collect()
    assert live_exports() == before


@pytest.mark.parametrize("make", [lambda a: cai.as_storage(a), lambda a: cai.from_dlpack(cai.as_storage(a))], ids=["storage", "view"])
def test_a_rust_import_of_cais_own_table_writes_in_place(make):
    # ForeignArray::from_dlpack (the Rust-side import `scale` makes) reads the lent tensor as
    # cai.from_dlpack does: writable, in place.
    a = np.arange(6.0).reshape(2, 3)
    s = make(a)
    cai.examples.scale(s, 2.0)
    np.testing.assert_array_equal(np.asarray(s), np.arange(6.0).reshape(2, 3) * 2)
    np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3) * 2)


# --- fuzzing: any combination of misbehaviours ----------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FROM_PY_MODES = ["ok", "raise", "memory_error", "silent", "zero_with_error", "null_out", "fail_after_out", None]
STREAM_MODES = ["ok", "memory_error", "silent", "zero_with_error", "null_out", None]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # deleter_raises
@settings(max_examples=150, deadline=None)
@given(
    version=st.tuples(st.integers(0, 3), st.integers(0, 4)),
    publish=st.sampled_from(["capsule", "int", "none", "null_pointer", "absent"]),
    from_py=st.sampled_from(FROM_PY_MODES),
    stream_mode=st.sampled_from(STREAM_MODES),
    dlpack=st.sampled_from(["numpy", "raise"]),
    tensor_version=st.sampled_from([(1, 3), (1, 0), (2, 0), (0, 9)]),
    device=st.sampled_from([(1, 0), (2, 0), (4, 0), (1, 3)]),
    null_shape=st.booleans(),
    null_strides=st.booleans(),
    deleter_raises=st.booleans(),
    copy=st.sampled_from([None, True]),
    shape=st.sampled_from([(3, 4), (0,), (), (5,)]),
)
def test_fuzz_the_consumer(
    version, publish, from_py, stream_mode, dlpack, tensor_version, device, null_shape, null_strides, deleter_raises, copy, shape
):
    T = dx.make_producer_type(
        version=version,
        publish=publish,
        modes={dx.FROM_PY: from_py, dx.CURRENT_WORK_STREAM: stream_mode},
        exc=LookupError("the producer's own"),
        dlpack=dlpack,
        tensor_version=tensor_version,
        device=device,
        null_shape=null_shape,
        null_strides=null_strides,
        deleter_raises=deleter_raises,
    )
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    try:
        v = cai.from_dlpack(T(a), copy=copy, check_pointer=False, sync=False)
    except (ValueError, TypeError, BufferError, RuntimeError, MemoryError, LookupError):
        pass
    else:
        if isinstance(v, cai.HostArrayView):
            np.testing.assert_array_equal(np.asarray(v), a)
        else:  # "device" memory that is the host's here (its pointer unchecked, no stream used)
            assert isinstance(v, cai.CudaArrayView) and v.shape == a.shape
        del v
    gc.collect()
    c = T.exchange
    assert not c.live, "a tensor the table made was never deleted"
    assert c.unknown_deletes == 0, "a tensor was deleted twice"
    assert not c.errors, c.errors


VIEW_DTYPES = ["f8", "i2", "u1", "c8", "f2", "i8", "u4"]
LENT = dx.make_producer_type("Lender", dlpack="raise")
LENT_C = dx.make_producer_type("LenderC", dlpack="raise", null_strides=True)
LENT_OFFSET = dx.make_producer_type("LenderOffset", dlpack="raise", byte_offset=8)
LENT_DEVICE = dx.make_producer_type("LenderDevice", dlpack="raise", device=(1, 3))


@st.composite
def lent_arrays(draw):
    """Arrays a table lends: steps, transposes, broadcasts, and strides made up (huge,
    negative, odd), over aligned and misaligned memory."""
    dtype = np.dtype(draw(st.sampled_from(VIEW_DTYPES)))
    shape = draw(st.lists(st.integers(0, 4), max_size=4))
    size = int(np.prod(shape)) if shape else 1
    base = np.zeros(size * dtype.itemsize + 8, np.uint8)
    shift = draw(st.sampled_from([0, 0, 1, 4]))
    a = base[shift : shift + size * dtype.itemsize].view(dtype).reshape(shape)
    how = draw(st.sampled_from(["as is", "steps", "transpose", "broadcast", "made up"]))
    if how == "steps" and a.ndim:
        a = a[tuple(slice(None, None, draw(st.sampled_from([1, -1, 2, -2]))) for _ in range(a.ndim))]
    elif how == "transpose":
        a = a.T
    elif how == "broadcast" and a.ndim and a.shape[0]:
        a = np.broadcast_to(a[:1], (3,) + a.shape[1:])
    elif how == "made up" and a.ndim:
        n = 2**62 // dtype.itemsize
        big = st.sampled_from([0, 1, -1, 2**40, -(2**40), n, -n, 3])
        strides = [draw(big) * dtype.itemsize + draw(st.sampled_from([0, 0, 1])) for _ in a.shape]
        a = np.lib.stride_tricks.as_strided(a, strides=strides)
    lenders = [LENT, LENT, LENT_C, LENT_OFFSET, LENT_DEVICE]
    return a, draw(st.sampled_from(VIEW_DTYPES + [dtype.str] * 3)), draw(st.sampled_from(lenders))


@settings(max_examples=400, deadline=None)
@given(case=lent_arrays())
def test_the_one_pass_view_of_a_lent_tensor_is_the_imports(case):
    """`with_dlpack_array`'s one-pass view of a lent tensor takes only what an import of it
    takes (`describe`, `as_array`'s checks), and makes the same view of it."""
    a, typestr, T = case
    fast, checked = cai._native._lent_plan_paths(T(a), np.dtype(typestr).str)
    if fast is not None:
        assert fast == checked


def test_the_one_pass_view_takes_plain_tensors():
    """The comparison above cannot pass by the one pass declining everything."""
    a = np.arange(24.0).reshape(2, 3, 4)
    for obj in (LENT(a), LENT(a[:, ::-1, ::2]), LENT(a.T), LENT(a[:0]), LENT(a[0, 0, 0]), LENT_C(a), LENT_OFFSET(a)):
        fast, checked = cai._native._lent_plan_paths(obj, "<f8")
        assert fast is not None and fast == checked, obj
    assert cai._native._lent_plan_paths(cai.zeros((2, 3)), "<f8")[0] is not None
    # Left to the import: another type, misaligned memory.
    assert cai._native._lent_plan_paths(LENT(a), "<f4")[0] is None
    odd = np.zeros(17, np.uint8)[1:].view("<f8")
    assert cai._native._lent_plan_paths(LENT(odd), "<f8")[0] is None
    assert cai._native._lent_plan_paths(a, "<f8") is None  # nothing lent


# --- the template an unchanging host side's exports share -------------------------------------


def test_later_exports_of_a_storage_or_view_are_the_first_ones():
    ro = np.arange(6.0).reshape(2, 3)[:, ::-1]
    ro.flags.writeable = False
    for obj in (cai.zeros((3, 4), dtype=np.int16), cai.as_host_array(np.arange(12.0).reshape(3, 4).T), cai.as_host_array(ro)):
        first = np.from_dlpack(obj)
        for _ in range(3):
            again = np.from_dlpack(obj)
            assert again.__array_interface__ == first.__array_interface__
            assert again.flags.writeable == first.flags.writeable
        # Requests the template does not serve still get what they ask for.
        assert np.from_dlpack(obj, copy=True).ctypes.data != first.ctypes.data
        with pytest.raises(ValueError, match="`stream` = 5"):
            obj.__dlpack__(stream=5)
        with pytest.raises(BufferError, match="dl_device"):
            obj.__dlpack__(dl_device=(2, 0))
        legacy = obj.__dlpack__ if first.flags.writeable else None
        if legacy is not None:
            legacy()  # (a legacy capsule, from the template)
        else:
            for _ in range(2):  # read-only: no legacy capsule, first time or later
                with pytest.raises(BufferError, match="read-only"):
                    obj.__dlpack__()
                with pytest.raises(BufferError, match="read-only"):
                    obj.__dlpack__(max_version=(0, 9))


def test_what_dlpack_cannot_say_is_refused_every_time():
    s = cai.zeros(3, dtype=np.dtype([("a", "<f4"), ("b", "<i4")]))
    for _ in range(3):
        with pytest.raises(BufferError, match="structured"):
            s.__dlpack__(max_version=(1, 3))
        with pytest.raises(BufferError, match="structured"):
            dx.call_from_py(type(s), s)


def test_the_first_export_from_threads():
    for _ in range(20):
        s = cai.zeros((8, 8))
        out = []
        threads = [threading.Thread(target=lambda: out.append(np.from_dlpack(s).ctypes.data)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(out)) == 1 and len(out) == 4
