"""Regression tests for memory-safety and error-reporting defects of imports and storages.

Each test names the defect it covers (``# defect N``):

1. a view keeps alive whatever its data depends on (the descriptor dict, e.g. a NumPy scalar's
   ``'__ref'``), in every import path;
2. dtypes holding Python objects anywhere (fields, sub-arrays) are refused by storages;
3. a mask object (and what its memory depends on) is kept alive by the view and by the
   exported mask holder;
4. an ``__array_struct__`` capsule keeps its exporting object alive;
9. a dict changing size while cai reads it is an ordinary exception, never a Rust panic;
10. exceptions raised by the producer's own code (getters, ``__index__``) propagate unchanged;
11. an exception raised by a key's ``__eq__`` propagates (it is no missing key);
12. halo arithmetic does not overflow into a wrong message;
13. ``storage(copy=False)`` with the array's own dtype shares memory;
14. errors about unsupported dtypes name the class the user called;
15. nothing mutable is shared between two exported results, masks included.

Anything that could read or write freed memory on a faulty build runs in a subprocess, or is
detected through weak references before the memory is read.
"""

import gc
import json
import os
import re
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cai
import cai.examples


def run_python(code, timeout=60):
    """Runs `code` in a fresh interpreter; its exit status, stdout and stderr."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr


def raised(call):
    """The exception `call()` raised (any BaseException, so that a KeyboardInterrupt or a
    PanicException never reaches pytest), or None."""
    try:
        call()
    except BaseException as e:  # noqa: BLE001 - the point is to look at whatever it is
        return e
    return None


def is_panic(e):
    return e is not None and type(e).__name__ == "PanicException"


class Obj:
    """An object with whatever attributes a test gives it."""

    def __init__(self, **attrs):
        for k, v in attrs.items():
            setattr(self, k, v)


class D(dict):
    """A dict that can be weakly referenced."""


def churn(n=50, size=64):
    """Allocations that reuse memory freed too early."""
    return [np.full(size, -7.0) for _ in range(n)] + [D(x=i) for i in range(n)]


# ---------------------------------------------------------------- defect 1: the dict's data


class TempProducer:
    """`__array_interface__` is a fresh dict whose memory only the dict keeps alive (its
    `'__ref'` entry), as NumPy scalars export theirs."""

    def __init__(self, values):
        self.values = values
        self.dicts, self.arrays = [], []

    @property
    def __array_interface__(self):
        arr = np.array(self.values, dtype="f8")
        d = D(arr.__array_interface__)
        d["__ref"] = arr
        self.dicts.append(weakref.ref(d))
        self.arrays.append(weakref.ref(arr))
        return d

    def alive(self):
        return [r() is not None for r in self.dicts], [r() is not None for r in self.arrays]


def _from_interface_with_owner(p):
    d = p.__array_interface__
    return cai.from_array_interface(d, owner=p)


IMPORTS = {
    "as_host_array": cai.as_host_array,
    "gt_data": lambda p: cai.gt_data(p).host,
    "as_storage": cai.as_storage,
    "storage(copy=False)": lambda p: cai.storage(p, copy=False),
    "from_array_interface(d, owner)": _from_interface_with_owner,
}


def read_all(view):
    if isinstance(view, cai.Storage):
        return np.asarray(view).tolist()
    return [view.get([i]) for i in range(view.shape[0])]


@pytest.mark.parametrize("path", list(IMPORTS))
def test_view_keeps_the_descriptor_dict_and_its_data_alive(path):  # defect 1
    p = TempProducer([1.5, 2.5, 3.5])
    view = IMPORTS[path](p)
    gc.collect()
    _, arrays = p.alive()
    # What the dict held when it was read (the array only it holds) must outlive the import:
    # the view keeps a copy of the dict, not the dict the producer may change.
    assert any(arrays), (path, arrays)
    junk = churn()
    assert read_all(view) == [1.5, 2.5, 3.5]
    del view, junk
    gc.collect()
    assert p.alive() == ([False] * len(p.dicts), [False] * len(p.arrays)), "leaked after the view"


def test_numpy_scalars_read_through_their_temporary_array():  # defect 1
    # np.float64(3.5).__array_interface__ describes a temporary array that only the dict's
    # '__ref' keeps alive: every import of the scalar must read 3.5, whatever is allocated
    # after it.
    code = """
        import gc, numpy as np, cai
        bad = []
        for i in range(500):
            v = cai.as_host_array(np.float64(3.5))
            junk = [np.array([-1.0] * 3) for _ in range(5)]
            if v.get([]) != 3.5:
                bad.append(("as_host_array", v.get([])))
            s = cai.as_storage(np.float64(3.5))
            junk = [np.array([-2.0]) for _ in range(5)]
            if float(np.asarray(s)) != 3.5:
                bad.append(("as_storage", float(np.asarray(s))))
            t = np.asarray(s)
            if t.flags.writeable:  # (NumPy 2.5 exports a scalar's data read-only)
                t[()] = 4.5  # written into the scalar's array, nowhere else
                junk = [np.array([-2.0]) for _ in range(5)]
                if float(np.asarray(s)) != 4.5:
                    bad.append(("as_storage written", float(np.asarray(s))))
            del t
            g = cai.gt_data(np.float64(3.5)).host
            junk = [np.array([-3.0]) for _ in range(5)]
            if g.get([]) != 3.5:
                bad.append(("gt_data", g.get([])))
            if i % 50 == 0:
                gc.collect()
        print(len(bad), bad[:5])
    """
    rc, out, err = run_python(code)
    assert (rc, out.split(" ")[0]) == (0, "0"), (rc, out, err[-2000:])


# ---------------------------------------------------------------- defect 2: object dtypes

OBJECT_DTYPES = [
    "[('o', 'O')]",
    "('O', (2,))",
    "[('a', '<i4'), ('s', [('o', 'O')])]",
    "[('a', 'O', (2,))]",
    "[('a', '<f8'), ('b', [('c', '<i2'), ('d', ('O', (3,)))])]",
]
# What each creator runs for a dtype `dt` (a subarray dtype as an array's dtype is absorbed
# into its shape, so arrays are made with the structured ones only).
OBJECT_DTYPE_CALLS = {
    "empty": ("cai.empty((4,), dtype=dt)", True),
    "zeros": ("cai.zeros((4,), dtype=dt)", True),
    "ones": ("cai.ones((4,), dtype=dt)", True),
    "full": ("cai.full((4,), 0, dtype=dt)", False),
    "empty_like": ("cai.empty_like(np.zeros(4), dtype=dt)", True),
    "zeros_like": ("cai.zeros_like(np.zeros(4), dtype=dt)", True),
    "ones_like": ("cai.ones_like(np.zeros(4), dtype=dt)", True),
    "full_like": ("cai.full_like(np.zeros(4), 0, dtype=dt)", False),
    "zeros_like(template)": ("cai.zeros_like(np.zeros(4, dtype=dt))", False),
    "as_storage": ("cai.as_storage(np.zeros(4, dtype=dt))", False),
    "storage(copy=False)": ("cai.storage(np.zeros(4, dtype=dt), copy=False)", False),
    "storage(data)": ("cai.storage(np.zeros(4, dtype=dt))", False),
    "storage(data, dtype=)": ("cai.storage(np.zeros(4), dtype=dt)", True),
}


@pytest.mark.parametrize("name", list(OBJECT_DTYPE_CALLS))
def test_dtypes_holding_objects_anywhere_are_refused(name):  # defect 2
    call, subarray_ok = OBJECT_DTYPE_CALLS[name]
    dtypes = [d for d in OBJECT_DTYPES if subarray_ok or not d.startswith("('O'")]
    code = f"""
        import json, numpy as np, cai
        for spelled in {dtypes!r}:
            dt = np.dtype(eval(spelled))
            try:
                s = {call}
                print(json.dumps([spelled, None, repr(s.dtype)]), flush=True)
                del s
            except Exception as e:
                print(json.dumps([spelled, type(e).__name__, str(e)]), flush=True)
    """
    rc, out, err = run_python(code)
    assert rc == 0, (name, rc, out, err[-2000:])
    results = [json.loads(line) for line in out.splitlines()]
    assert [r[0] for r in results] == dtypes
    for spelled, exc, message in results:
        assert exc == "TypeError", (name, spelled, exc, message)
        assert "dtype" in message and re.search(r"object|'O'|\|O\b", message), (name, spelled, message)


# ---------------------------------------------------------------- defect 3: masks kept alive


class TempMask:
    """A mask object built on every access; its memory is held only by itself."""

    def __init__(self, bits, registry):
        self.arr = np.array(bits, dtype="?")
        registry.append(weakref.ref(self))

    @property
    def __array_interface__(self):
        return dict(self.arr.__array_interface__)


class MaskedProducer:
    """Values held by the producer, a new mask object (`TempMask`) on each access."""

    BITS = [True, False, True, True]

    def __init__(self):
        self.values = np.arange(4.0)
        self.masks = []

    @property
    def __array_interface__(self):
        return dict(self.values.__array_interface__, mask=TempMask(self.BITS, self.masks))

    def alive(self):
        return [r() is not None for r in self.masks]


MASKED_IMPORTS = {
    "as_host_array": cai.as_host_array,
    "gt_data": lambda p: cai.gt_data(p).host,
    "from_array_interface": lambda p: cai.from_array_interface(p.__array_interface__, owner=p),
}


@pytest.mark.parametrize("path", list(MASKED_IMPORTS))
def test_view_keeps_its_mask_object_alive(path):  # defect 3
    p = MaskedProducer()
    v = MASKED_IMPORTS[path](p)
    gc.collect()
    assert any(p.alive()), (path, p.alive())
    junk = churn()
    assert np.asarray(v.__array_interface__["mask"]).tolist() == MaskedProducer.BITS
    del v, junk
    gc.collect()
    assert not any(p.alive()), "leaked after the view"


def test_exported_mask_holder_keeps_the_mask_alive_after_the_view():  # defect 3
    p = MaskedProducer()
    v = cai.as_host_array(p)
    holder = v.__array_interface__["mask"]
    del v
    gc.collect()
    assert any(p.alive()), p.alive()
    junk = churn()
    assert np.asarray(holder).tolist() == MaskedProducer.BITS
    del holder, junk
    gc.collect()
    assert not any(p.alive()), "leaked after the holder"


def test_mask_built_on_each_access_reads_back_its_values():  # defect 3
    # Masks of 300 kB, freed (unmapped) at once where nothing holds them.
    code = """
        import gc, numpy as np, cai
        N = 300_000

        class Mask:
            def __init__(self):
                self.arr = np.arange(N) % 3 == 0

            @property
            def __array_interface__(self):
                return dict(self.arr.__array_interface__)

        class P:
            values = np.arange(N, dtype="u1")

            @property
            def __array_interface__(self):
                return dict(self.values.__array_interface__, mask=Mask())

        views = [cai.as_host_array(P()) for _ in range(5)]
        views += [cai.gt_data(P()).host for _ in range(5)]
        gc.collect()
        junk = [np.ones(N, "?") for _ in range(10)]
        expected = np.arange(N) % 3 == 0
        for v in views:
            m = np.asarray(v.__array_interface__["mask"])
            assert m.shape == (N,) and (m == expected).all(), "the mask changed"
        print("ok")
    """
    rc, out, err = run_python(code)
    assert (rc, out) == (0, "ok\n"), (rc, out, err[-2000:])


# ---------------------------------------------------------------- defect 4: __array_struct__

STRUCT_EXPORTERS = {
    "zeros": lambda: cai.zeros((1000, 1000)),
    "as_storage": lambda: cai.as_storage(np.ones((3, 4))),
    "Grid": lambda: cai.examples.Grid(3, 4),
    "counts": lambda: cai.examples.counts(10),
    "Buffer": lambda: cai.examples.Buffer(32, "<f8", (4,)),
}


@pytest.mark.parametrize("name", list(STRUCT_EXPORTERS))
def test_array_struct_capsule_keeps_its_exporter_alive(name):  # defect 4
    obj = STRUCT_EXPORTERS[name]()
    ref = weakref.ref(obj)
    capsule = obj.__array_struct__
    del obj
    gc.collect()
    assert ref() is not None, f"{name}: the capsule outlives the object its data pointer is in"
    del capsule
    gc.collect()
    assert ref() is None


def test_numpy_reads_a_kept_capsule_after_the_storage_is_dropped():  # defect 4
    code = """
        import gc, numpy as np, cai

        class Capsule:
            pass

        bad = 0
        for i in range(10):
            s = cai.full((1000, 1200), 7.0)  # 9.6 MB: unmapped when freed
            c = Capsule()
            c.__array_struct__ = s.__array_struct__
            del s
            gc.collect()
            junk = [np.full((1000, 1200), -1.0) for _ in range(3)]
            bad += not (np.asarray(c) == 7.0).all()
            del c, junk
        print("bad", bad)
    """
    rc, out, err = run_python(code)
    assert (rc, out) == (0, "bad 0\n"), (rc, out, err[-2000:])


# ---------------------------------------------------------------- defect 9: no panics


def _gt_dict_grown_by_index():
    """An object whose `__gt_data_interface__` dict grows while its shape is read."""
    a = np.zeros((2, 3))
    gt = {}

    class Growing:
        def __index__(self):
            for _ in range(20):
                gt[f"k{len(gt)}"] = {}
            return 2

    gt[None] = dict(a.__array_interface__, shape=(Growing(), 3))
    return Obj(__gt_data_interface__=gt, keep=a)


@pytest.mark.parametrize("name", ["gt_data", "as_storage", "storage", "zeros_like"])
def test_a_dict_changing_size_while_read_is_no_panic(name):  # defect 9
    e = raised(lambda: getattr(cai, name)(_gt_dict_grown_by_index()))
    assert e is None or isinstance(e, Exception), (name, type(e), e)
    assert not is_panic(e), (name, e)


def test_self_mutating_dicts_never_panic_in_any_entry_point():  # defect 9
    code = r"""
        import json, numpy as np, cai

        class Obj:
            pass

        DEVICE = {"shape": (2, 3), "typestr": "<f8", "data": (0x7F0000000000, False),
                  "strides": None, "version": 3, "stream": None}

        def mutator(d, mode):
            # What an `__index__` or a key's `__eq__` does to the dict `d` being read.
            if mode == "add":
                for _ in range(30):
                    d[f"extra{len(d)}"] = 1
            elif mode == "delete":
                for k in [k for k in list(d) if k not in (None, "shape")][:3]:
                    d.pop(k, None)
            elif mode == "clear":
                d.clear()

        def descriptor(mode, how, device):
            a = np.zeros((2, 3))
            base = dict(DEVICE) if device else dict(a.__array_interface__)
            d = {}
            if how == "index":
                class Idx:
                    def __index__(self):
                        mutator(d, mode)
                        return 2
                d.update(base)
                d["shape"] = (Idx(), 3)
            else:
                class Key(str):
                    __hash__ = str.__hash__
                    def __eq__(self, other):
                        mutator(d, mode)
                        return str.__eq__(self, other)
                for k, v in base.items():
                    d[Key(k)] = v
            return d, a

        def gt(mode, how, where):
            # The mutation hits the `__gt_data_interface__` dict itself, or the entry.
            a = np.zeros((2, 3))
            top = {}
            entry = dict(a.__array_interface__)
            target = top if where == "top" else entry
            class Idx:
                def __index__(self):
                    mutator(target, mode)
                    return 2 if how == "shape" else 0
            if how == "shape":
                entry["shape"] = (Idx(), 3)
            else:
                entry["halo"] = ((Idx(), 0), (0, 0))
            top[None] = entry
            top["gpu"] = dict(DEVICE)
            o = Obj()
            o.__gt_data_interface__, o.keep = top, a
            return o

        def exposing(mode, how, device=False):
            d, a = descriptor(mode, how, device)
            o = Obj()
            o.keep = a
            setattr(o, "__cuda_array_interface__" if device else "__array_interface__", d)
            return o

        results = []

        def run(name, call):
            try:
                call()
                results.append([name, None, True])
            except BaseException as e:
                what = f"{type(e).__module__}.{type(e).__name__}: {str(e)[:200]}"
                results.append([name, what, isinstance(e, Exception)])

        for mode in ["add", "delete", "clear"]:
            for how in ["index", "eq"]:
                w = f"{mode}/{how}"
                run(f"as_host_array {w}", lambda: cai.as_host_array(exposing(mode, how)))
                run(f"as_cuda_array {w}", lambda: cai.as_cuda_array(exposing(mode, how, True)))
                run(f"from_array_interface {w}", lambda: cai.from_array_interface(descriptor(mode, how, False)[0]))
                run(f"from_cuda_array_interface {w}",
                    lambda: cai.from_cuda_array_interface(descriptor(mode, how, True)[0]))
                run(f"check {w}", lambda: cai.check(exposing(mode, how)))
                run(f"check cuda {w}", lambda: cai.check(exposing(mode, how, True)))
                run(f"check_descriptor {w}", lambda: cai.check_descriptor(descriptor(mode, how, False)[0], "host"))
                run(f"check_descriptor cuda {w}", lambda: cai.check_descriptor(descriptor(mode, how, True)[0]))
                for f in ["gt_data", "as_storage", "storage", "zeros_like", "empty_like", "ones_like"]:
                    run(f"{f} {w}", lambda: getattr(cai, f)(exposing(mode, how)))
                run(f"full_like {w}", lambda: cai.full_like(exposing(mode, how), 1.0))
                run(f"storage(copy=False) {w}", lambda: cai.storage(exposing(mode, how), copy=False))
            for how in ["shape", "halo"]:
                for where in ["top", "entry"]:
                    w = f"gt {mode}/{how}/{where}"
                    for f in ["gt_data", "as_storage", "storage", "zeros_like", "empty_like", "ones_like", "check"]:
                        run(f"{f} {w}", lambda: getattr(cai, f)(gt(mode, how, where)))
                    run(f"full_like {w}", lambda: cai.full_like(gt(mode, how, where), 1.0))
                    run(f"storage(copy=False) {w}", lambda: cai.storage(gt(mode, how, where), copy=False))
        print(json.dumps(results))
    """
    rc, out, err = run_python(code)
    assert rc == 0, (rc, out[-2000:], err[-2000:])
    results = json.loads(out)
    assert len(results) > 100
    # Success, or an ordinary exception (a PanicException is a BaseException).
    bad = [(name, e) for name, e, ordinary in results if not ordinary or "PanicException" in (e or "")]
    assert bad == [], (len(bad), bad[:10])


# ---------------------------------------------------------------- defect 10: user exceptions


class RaisingMask:
    """A mask object whose `__array_interface__` getter fails."""

    @property
    def __array_interface__(self):
        return 1 / 0


def test_a_mask_getters_exception_propagates():  # defect 10
    values = np.arange(3.0)

    class P:
        @property
        def __array_interface__(self):
            return dict(values.__array_interface__, mask=RaisingMask())

    calls = {
        "as_host_array": lambda: cai.as_host_array(P()),
        "from_array_interface": lambda: cai.from_array_interface(
            dict(values.__array_interface__, mask=RaisingMask()), owner=values
        ),
        "gt_data": lambda: cai.gt_data(P()),
    }
    for name, call in calls.items():
        e = raised(call)
        assert isinstance(e, ZeroDivisionError), (name, type(e), e)
        assert "does not expose" not in str(e), (name, e)


class RaisingGetter:
    def __init__(self, exc):
        self.exc = exc

    @property
    def __array_interface__(self):
        raise self.exc


def test_getter_exceptions_are_not_does_not_expose():  # defect 10
    # Only AttributeError means "does not expose": import raises the getter's ValueError.
    e = raised(lambda: cai.as_host_array(RaisingGetter(ValueError("mine"))))
    assert type(e) is ValueError and str(e) == "mine", (type(e), e)
    for call in [cai.as_host_array, cai.gt_data, cai.check]:
        # (`check` swallowed it, reporting an object exposing neither interface)
        e = raised(lambda: call(RaisingGetter(KeyboardInterrupt("stop"))))
        assert type(e) is KeyboardInterrupt and e.args == ("stop",), (call.__name__, type(e), e)


class InterruptingIndex:
    """An int-like whose `__index__` is interrupted (a KeyboardInterrupt)."""

    def __init__(self, exc):
        self.exc = exc

    def __index__(self):
        raise self.exc


def test_a_keyboard_interrupt_in_index_propagates():  # defect 10
    values = np.arange(3.0)
    ki = KeyboardInterrupt("index")
    desc = dict(values.__array_interface__, shape=(InterruptingIndex(ki),))
    gt = Obj(__gt_data_interface__={None: dict(values.__array_interface__, halo=((InterruptingIndex(ki), 0),))},
             keep=values)
    calls = {
        "as_host_array": lambda: cai.as_host_array(Obj(__array_interface__=desc)),
        "from_array_interface": lambda: cai.from_array_interface(desc, owner=values),
        "gt_data (shape)": lambda: cai.gt_data(Obj(__gt_data_interface__={None: desc}, keep=values)),
        "gt_data (halo)": lambda: cai.gt_data(gt),
        "as_storage (halo)": lambda: cai.as_storage(gt),
        "check": lambda: cai.check(Obj(__array_interface__=desc)),
    }
    wrong = {}
    for name, call in calls.items():
        e = raised(call)
        if type(e) is not KeyboardInterrupt or e.args != ki.args:
            wrong[name] = (type(e).__name__, str(e)[:150])
    assert wrong == {}


class CountingIndex:
    """An int-like whose `__index__` raises `exc`, counting its calls."""

    def __init__(self, exc):
        self.exc, self.calls = exc, 0

    def __index__(self):
        self.calls += 1
        raise self.exc


class RaisingSequence:
    """A sequence whose iteration raises `exc` (a `dims` argument or entry)."""

    def __init__(self, exc):
        self.exc = exc

    def __len__(self):
        return 3

    def __getitem__(self, i):
        raise self.exc

    def __iter__(self):
        raise self.exc


def test_arguments_read_by_their_own_code_propagate_its_exception():  # defect 10, hunted further
    values = np.arange(24.0).reshape(2, 3, 4)
    cases = {
        "zeros(shape=...)": lambda e: cai.zeros((CountingIndex(e), 2)),
        "zeros(dims=...)": lambda e: cai.zeros((2, 3, 4), dims=RaisingSequence(e)),
        "gt_data dims entry": lambda e: cai.gt_data(Obj(__gt_data_interface__={
            None: dict(values.__array_interface__, dims=RaisingSequence(e))}, keep=values)),
        "as_storage dims entry": lambda e: cai.as_storage(Obj(__gt_data_interface__={
            None: dict(values.__array_interface__, dims=RaisingSequence(e))}, keep=values)),
    }
    wrong = {}
    for exc in (KeyboardInterrupt("mine"), Boom("mine")):
        for name, call in cases.items():
            e = raised(lambda: call(exc))
            if e is not exc:
                wrong[f"{name}, {type(exc).__name__}"] = (type(e).__name__, str(e)[:150])
    assert wrong == {}
    # An `__index__` that raises is asked once, not once per way of reading it.
    counting = CountingIndex(Boom("once"))
    with pytest.raises(Boom):
        cai.zeros((counting, 2))
    assert counting.calls == 1


# ---------------------------------------------------------------- defect 11: raising keys


class Boom(Exception):
    pass


class RaisingKey(str):
    """A key hashing as 'shape' whose comparison raises: a lookup of 'shape' compares it."""

    def __eq__(self, other):
        raise Boom("compared")

    def __hash__(self):
        return hash("shape")


def test_an_exception_from_a_keys_comparison_propagates():  # defect 11
    values = np.arange(3.0)
    host = dict(values.__array_interface__)
    del host["shape"]
    host[RaisingKey("not shape")] = (3,)
    device = {"typestr": "<f4", "data": (0x7F0000000000, False), "strides": None, "version": 3,
              RaisingKey("not shape"): (2,)}
    calls = {
        "as_host_array": lambda: cai.as_host_array(Obj(__array_interface__=host, keep=values)),
        "from_array_interface": lambda: cai.from_array_interface(host, owner=values),
        "from_cuda_array_interface": lambda: cai.from_cuda_array_interface(device, sync=False, check_pointer=False),
        "gt_data": lambda: cai.gt_data(Obj(__gt_data_interface__={None: host}, keep=values)),
        "as_storage": lambda: cai.as_storage(Obj(__array_interface__=host, keep=values)),
    }
    wrong = {}
    for name, call in calls.items():
        e = raised(call)
        if not isinstance(e, Boom):
            wrong[name] = (type(e).__name__, str(e)[:150])
    assert wrong == {}


# ---------------------------------------------------------------- defect 12: halo overflow

BIG = 2**64 - 1


def _set_halo(halo):
    s = cai.zeros((4,))
    s.halo = halo


def _gt_with_halo(halo):
    a = np.zeros(4)
    return Obj(__gt_data_interface__={None: dict(a.__array_interface__, halo=halo)}, keep=a)


HALO_CALLS = {
    "zeros": (lambda h: cai.zeros((4,), halo=h), ((BIG, 1),)),
    "zeros (end)": (lambda h: cai.zeros((4,), halo=h), ((1, BIG),)),
    "zeros (symmetric)": (lambda h: cai.zeros((4,), halo=h), (2**63,)),
    "zeros (2-D)": (lambda h: cai.zeros((4, 5), halo=h), (0, (BIG - 1, 2))),
    "empty": (lambda h: cai.empty((4,), halo=h), ((BIG, 1),)),
    "full": (lambda h: cai.full((4,), 1.0, halo=h), ((BIG, 1),)),
    "zeros_like": (lambda h: cai.zeros_like(np.zeros(4), halo=h), ((BIG, 1),)),
    "as_storage": (lambda h: cai.as_storage(np.zeros(4), halo=h), ((BIG, 1),)),
    "storage": (lambda h: cai.storage(np.zeros(4), halo=h), ((BIG, 1),)),
    "storage(copy=False)": (lambda h: cai.storage(np.zeros(4), copy=False, halo=h), ((BIG, 1),)),
    "Storage.halo =": (_set_halo, ((BIG, 1),)),
    "gt_data": (lambda h: cai.gt_data(_gt_with_halo(h)), ((BIG, 1),)),
    "as_storage (gt)": (lambda h: cai.as_storage(_gt_with_halo(h)), ((BIG, 1),)),
    "Field": (lambda h: cai.examples.Field(4, 1, 1, [h[0], 0, 0]), ((BIG, 1),)),
}


@pytest.mark.parametrize("name", list(HALO_CALLS))
def test_halo_sums_do_not_overflow(name):  # defect 12
    call, halo = HALO_CALLS[name]
    e = raised(lambda: call(halo))
    assert type(e) is ValueError, (name, type(e), e)
    message = str(e)
    entry = halo[-1] if isinstance(halo[-1], tuple) else (halo[-1], halo[-1])
    assert str(entry[0]) in message and str(entry[1]) in message, message
    needs = re.search(r"needs (\d+) points", message)
    # (an unchecked add wrapped to "needs 0 points but the dimension has 4")
    assert needs is None or int(needs.group(1)) == sum(entry), message


# ---------------------------------------------------------------- defect 13: storage(copy=False)

SOURCE = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize(
    "source, same, different",
    [
        pytest.param(SOURCE, SOURCE.dtype, "f4", id="a.dtype"),
        pytest.param(SOURCE, "f8", "i8", id="f8"),
        pytest.param(SOURCE, np.float64, ">f8", id="np.float64"),
        pytest.param(SOURCE, "<f8", np.float32, id="<f8"),
        pytest.param(SOURCE, float, "c16", id="float"),
        pytest.param(np.arange(4, dtype="i2"), "i2", "i4", id="i2"),
        pytest.param(cai.full((2, 2), 1.5), "f8", "f4", id="storage-f8"),
    ],
)
def test_storage_without_copy_takes_the_datas_own_dtype(source, same, different):  # defect 13
    with pytest.raises(ValueError):
        cai.storage(source, copy=False, dtype=different)
    assert np.shares_memory(np.array(source, copy=False, dtype=same), np.asarray(source))  # NumPy agrees
    s = cai.storage(source, copy=False, dtype=same)
    assert s.dtype == np.dtype(same) and np.shares_memory(np.asarray(s), np.asarray(source))


# ---------------------------------------------------------------- defect 14: class names


def test_unsupported_dtype_errors_name_the_class_called():  # defect 14
    e = raised(lambda: cai.DeviceArray(np.array(["ab"])))
    assert type(e) is TypeError, (type(e), e)
    assert "DeviceArray" in str(e) and "Buffer" not in str(e), str(e)


# ---------------------------------------------------------------- defect 15: shared mutables


def _plain(x):
    """`x` with mask holders replaced by their descriptors, for comparison."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return ["list", *(_plain(v) for v in x)]
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    if isinstance(x, cai.HostMask):
        return ("HostMask", _plain(x.__array_interface__))
    if isinstance(x, cai.CudaMask):
        return ("CudaMask", _plain(x.__cuda_array_interface__))
    if callable(x):
        return ("callable", type(x).__name__)
    return x


def _vandalize(x):
    """Mutates every list and dict reachable from `x`, mask holders' dicts included."""
    if isinstance(x, dict):
        for v in list(x.values()):
            _vandalize(v)
        x["vandal"] = ["vandal"]
        if "shape" in x:
            x["shape"] = (99,)
    elif isinstance(x, list):
        for v in x:
            _vandalize(v)
        x.append(("vandal", "<f4"))
        if len(x) > 1:
            x[0] = ("vandal0", "<i8")
    elif isinstance(x, tuple):
        for v in x:
            _vandalize(v)
    elif isinstance(x, cai.HostMask):
        _vandalize(x.__array_interface__)
    elif isinstance(x, cai.CudaMask):
        _vandalize(x.__cuda_array_interface__)


def test_no_mutable_state_is_shared_between_exports():  # defect 15
    values = np.arange(4.0)
    mask = np.array([True, False, True, True])
    record = np.zeros(3, dtype=[("a", "<i4"), ("b", [("c", "<f8")])])
    view = cai.from_array_interface(dict(values.__array_interface__, mask=mask), owner=values)
    gpu_mask = cai.examples.DeviceMatrix(0x7F00_0000_2000, 2, 3)
    gpu = cai.from_cuda_array_interface(
        dict(cai.examples.DeviceMatrix(0x7F00_0000_1000, 2, 3).__cuda_array_interface__, mask=gpu_mask),
        sync=False, check_pointer=False,
    )
    grid, storage, field = cai.examples.Grid(2, 3), cai.zeros((2, 3), dtype=record.dtype), cai.examples.Field(2, 2, 2)
    results = {
        "masked view": lambda: view.__array_interface__,
        "masked view's mask dict": lambda: view.mask,
        "mask holder's dict": lambda: view.__array_interface__["mask"].__array_interface__,
        # a new import of the same arrays each time: nothing may be shared between views
        "another masked view": lambda: cai.from_array_interface(
            dict(values.__array_interface__, mask=mask), owner=values
        ).__array_interface__,
        "masked gt_data view": lambda: cai.gt_data(
            Obj(__array_interface__=dict(values.__array_interface__, mask=mask), keep=(values, mask))
        ).host.__array_interface__,
        "masked device view": lambda: gpu.__cuda_array_interface__,
        "structured view": lambda: cai.as_host_array(record).__array_interface__,
        "grid": lambda: grid.__array_interface__,
        "structured storage": lambda: storage.__array_interface__,
        "storage gt": lambda: storage.__gt_data_interface__,
        "field gt": lambda: field.__gt_data_interface__,
    }
    changed = {}
    for name, export in results.items():
        before = _plain(export())
        _vandalize(export())
        after = _plain(export())
        if after != before:
            changed[name] = (before, after)
    assert changed == {}


# ---------------------------------------------------------------- lifetime (hypothesis)
# The lifetime of anything the data depends on: producers whose dicts, masks and buffers are
# temporary (held only by the dict or the mask object returned), read back after the import.

HYPOTHESIS_DTYPES = ["<f8", "<i4", "|u1", "<c16"]


class Fresh:
    """A producer building new memory, a new dict and a new mask object on every access."""

    def __init__(self, base, key, mask):
        self.base, self.key, self.mask = base, key, mask
        self.buffers = []  # (weakref, first byte, end) of every buffer made

    def _record(self, arr):
        start = arr.__array_interface__["data"][0]
        self.buffers.append((weakref.ref(arr), start, start + arr.nbytes))

    @property
    def __array_interface__(self):
        base = self.base.copy()
        self._record(base)
        view = base[self.key]
        d = D(view.__array_interface__)
        d["__ref"] = view
        if self.mask is not None:
            d["mask"] = FreshMask(self)
        return d

    def holds(self, ptr):
        """Whether a live buffer of this producer contains address `ptr`."""
        return any(ref() is not None and start <= ptr < end for ref, start, end in self.buffers)


class FreshMask:
    """A mask object whose dict and memory are new on every access, held by the dict only."""

    def __init__(self, producer):
        self.producer = producer

    @property
    def __array_interface__(self):
        base = self.producer.mask.copy()
        self.producer._record(base)
        view = base[self.producer.key]
        d = D(view.__array_interface__)
        d["__ref"] = view
        return d


@st.composite
def fresh_producers(draw):
    ndim = draw(st.integers(0, 3))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    steps = [draw(st.sampled_from([1, 2, -1, -2])) for _ in range(ndim)]
    dtype = np.dtype(draw(st.sampled_from(HYPOTHESIS_DTYPES)))
    full = [n * abs(s) for n, s in zip(shape, steps)]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    base = rng.integers(1, 200, size=full).astype(dtype)
    if dtype.kind == "c":
        # (np.array: a 0-d sum is a NumPy scalar, which has no weakrefs.)
        base = np.array(base + 1j * rng.integers(1, 200, size=full), dtype=dtype)
    key = tuple(slice(None, None, s) for s in steps) + (Ellipsis,)
    mask = rng.integers(0, 2, size=full).astype(bool) if draw(st.booleans()) else None
    path = draw(st.sampled_from(["as_host_array", "gt_data", "as_storage"]))
    return Fresh(base, key, mask), path


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(fresh_producers())
def test_property_views_keep_everything_their_data_depends_on(made):  # defect 1, defect 3
    producer, path = made
    expected = producer.base[producer.key]
    if path == "as_host_array":
        view = cai.as_host_array(producer)
    elif path == "gt_data":
        view = cai.gt_data(producer).host
    else:
        view = cai.as_storage(producer)
    gc.collect()
    junk = churn(20, expected.size)
    # Alive before anything is read, so that a faulty build fails here, not on freed memory.
    ptr = view.__array_interface__["data"][0]
    assert producer.holds(ptr), (path, "the data was freed under the view")
    masked = path != "as_storage" and producer.mask is not None
    if masked:
        holder = view.__array_interface__["mask"]
        assert producer.holds(holder.__array_interface__["data"][0]), (path, "the mask was freed")
    if isinstance(view, cai.Storage):
        got = np.asarray(view)
        assert got.shape == expected.shape and (got == expected).all()
    else:
        assert view.shape == expected.shape
        for index in np.ndindex(*expected.shape):
            assert view.get(list(index)) == expected[index], index
    if masked:
        assert (np.asarray(holder) == producer.mask[producer.key]).all()
    del junk


# ---------------------------------------------------------------- found by attacking the fixes


class CachingProducer:
    """A producer that keeps one descriptor dict and updates it in place when its data is
    replaced; only the dict's '__ref' holds the data (as NumPy scalars' dicts do)."""

    def __init__(self):
        self.d = {}
        self.reset(1.5)

    def reset(self, value):
        arr = np.full(1000, value)
        self.d.clear()
        self.d.update(arr.__array_interface__)
        self.d["__ref"] = arr

    @property
    def __array_interface__(self):
        return self.d


class ClearingIndex:
    """A shape item whose `__index__` empties the descriptor dict being read."""

    def __init__(self, d, n):
        self.d, self.n = d, n

    def __index__(self):
        self.d.clear()
        return self.n


class ClearingProducer:
    @property
    def __array_interface__(self):
        arr = np.full(1000, 1.5)
        d = dict(arr.__array_interface__)
        d["__ref"] = arr
        d["shape"] = (ClearingIndex(d, 1000),)
        return d


READERS = {
    "as_host_array": cai.as_host_array,
    "as_storage": cai.as_storage,
    "gt_data": lambda p: cai.gt_data(p).host,
    "from_array_interface": lambda p: cai.from_array_interface(p.__array_interface__, p),
}


@pytest.mark.parametrize("path", READERS)
def test_a_view_keeps_what_the_dict_held_when_it_was_read(path):  # defect 1, found later
    p = CachingProducer()
    v = READERS[path](p)
    p.reset(2.5)  # the producer's own dict lets the first array go
    gc.collect()
    junk = churn(50, 1000)
    assert (np.asarray(v) == 1.5).all()
    del junk
    if path != "from_array_interface":
        v = READERS[path](ClearingProducer())  # the dict emptied while it is read
        gc.collect()
        junk = churn(50, 1000)
        assert (np.asarray(v) == 1.5).all(), len(junk)


class RaisingIter:
    def __init__(self, exc):
        self.exc = exc

    def __iter__(self):
        raise self.exc


class RaisingFloat:
    def __init__(self, exc):
        self.exc = exc

    def __float__(self):
        raise self.exc


def test_every_argument_reader_lets_the_values_own_exception_through():  # defect 10, found later
    a = np.arange(12.0).reshape(3, 4)
    cases = {
        "zeros(shape)": lambda e: cai.zeros(RaisingIter(e)),
        "zeros(halo)": lambda e: cai.zeros((3, 4), halo=RaisingIter(e)),
        "zeros(layout)": lambda e: cai.zeros((3, 4), layout=RaisingIter(e)),
        "zeros(aligned_index)": lambda e: cai.zeros((3, 4), aligned_index=RaisingIter(e)),
        "Storage.halo =": lambda e: setattr(cai.zeros((3, 4)), "halo", RaisingIter(e)),
        "Storage.transpose": lambda e: cai.zeros((3, 4)).transpose(RaisingIter(e)),
        "HostArrayView.get": lambda e: cai.as_host_array(a).get(RaisingIter(e)),
        "HostArrayView.set": lambda e: cai.as_host_array(a).set([0, 0], RaisingFloat(e)),
        "Grid.set": lambda e: cai.examples.Grid(2, 2).set(0, 0, RaisingFloat(e)),
    }
    wrong = {}
    for exc in (KeyboardInterrupt("mine"), Boom("mine")):
        for name, call in cases.items():
            e = raised(lambda: call(exc))
            if e is not exc:
                wrong[f"{name}, {type(exc).__name__}"] = (type(e).__name__, str(e)[:120])
    assert wrong == {}


def test_sub_array_dtypes_are_refused_by_name():  # found later: they did not read back
    for make in (
        lambda: cai.zeros((2,), dtype=("f8", (3,))),
        lambda: cai.full((2,), 1.0, dtype=("f8", (3,))),
        lambda: cai.storage(np.zeros((2, 3)), dtype=("f8", (3,))),
    ):
        with pytest.raises(TypeError, match=r"sub-array dtype.*\(3,\).*last dimensions"):
            make()
    # A structured dtype with a sub-array field is one item, and stays.
    s = cai.zeros((2,), dtype=[("v", "f8", (3,))])
    assert np.asarray(s).shape == (2,)


def test_object_items_over_a_buffer_are_refused():  # found later: NumPy read them as pointers
    for typestr, descr in (("|O", None), ("|V16", [("o", "|O"), ("x", "<f8")])):
        d = {"shape": (2,), "typestr": typestr, "data": bytearray(b"A" * 32), "version": 3}
        if descr:
            d["descr"] = descr
        with pytest.raises(ValueError, match="buffer protocol"):
            cai.from_array_interface(d)


# ---------------------------------------------------------------- found by the second attack
# A view kept the producer's dict itself where nothing else seemed to hold it (refcount 1),
# skipped keys the fast path thought its own, and copied a dict subclass through its own
# (overridable) keys: each let the producer drop what kept the data alive.

BIG = 1_000_000  # an 8 MB buffer: freed to the system, so a stale read is a crash


def _run_isolated(code):
    """Runs `code` in a fresh interpreter where a freed 8 MB buffer is unmapped at once."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env=env)


KEEPERS = {
    # A host descriptor's 'stream' (no such key on the host) holding the data.
    "host stream key": """
        class P:
            @property
            def __array_interface__(self):
                buf = np.arange(N, dtype=np.float64)
                return {'shape': (N,), 'typestr': '<f8', 'data': (buf.ctypes.data, False),
                        'version': 3, 'stream': buf}
        v = IMPORT(P())
    """,
    # A fresh dict subclass the producer reaches again through a weakref, and empties.
    "weakref to the dict": """
        class D(dict):
            pass
        class P:
            @property
            def __array_interface__(self):
                buf = np.arange(N, dtype=np.float64)
                d = D(shape=(N,), typestr='<f8', data=(buf.ctypes.data, False), version=3, __ref=buf)
                P.last = weakref.ref(d)
                return d
        v = IMPORT(P())
        d = P.last()
        if d is not None:  # (kept by the view only if it keeps the dict itself)
            d.clear()
        del d
    """,
    # An __index__ that finds the dict being read through the collector and drops '__ref'.
    "gc.get_referrers while read": """
        class Idx:
            def __index__(self):
                for d in gc.get_referrers(shape):
                    if isinstance(d, dict) and '__ref' in d:
                        del d['__ref']
                return N
        shape = (Idx(),)
        class P:
            @property
            def __array_interface__(self):
                buf = np.arange(N, dtype=np.float64)
                return {'shape': shape, 'typestr': '<f8', 'data': (buf.ctypes.data, False),
                        'version': 3, '__ref': buf}
        v = IMPORT(P())
    """,
    # A kept dict subclass whose keys() and __iter__ hide '__ref' from a copy.
    "dict subclass hiding keys": """
        class D(dict):
            def keys(self):
                return [k for k in dict.keys(self) if k != '__ref']
            def __iter__(self):
                return iter(self.keys())
        class P:
            def __init__(self):
                buf = np.arange(N, dtype=np.float64)
                self.d = D(shape=(N,), typestr='<f8', data=(buf.ctypes.data, False), version=3, __ref=buf)
            @property
            def __array_interface__(self):
                return self.d
        p = P()
        v = IMPORT(p)
        dict.__delitem__(p.d, '__ref')
    """,
}


@pytest.mark.parametrize("importer", ["cai.as_host_array", "cai.as_storage", "lambda p: cai.gt_data(p).host"])
@pytest.mark.parametrize("case", KEEPERS)
def test_what_the_dict_held_is_kept_however_the_producer_reaches_it(case, importer):  # defect 1
    code = "import gc, weakref\nimport numpy as np\nimport cai\nN = %d\nIMPORT = %s\n" % (BIG, importer)
    code += textwrap.dedent(KEEPERS[case]) + textwrap.dedent("""
        gc.collect()
        junk = [np.full(N, -7.0) for _ in range(3)]
        print(float(np.asarray(v)[-1]))
    """)
    r = _run_isolated(code)
    assert r.returncode == 0 and r.stdout.split() == ["999999.0"], (r.returncode, r.stdout, r.stderr[-500:])


def test_a_typestr_subclasss_eq_is_never_run():  # defect 10: its exception cannot be swallowed
    calls = []

    class T(str):
        def __eq__(self, other):
            calls.append(other)
            raise RuntimeError("mine")

        __hash__ = str.__hash__

    a = np.arange(4.0)
    d = dict(a.__array_interface__, typestr=T("<f8"), descr=[("", "<f8")])
    v = cai.from_array_interface(d, owner=a)
    assert v.get([3]) == 3.0 and calls == []


def test_a_gpu_entry_without_version_keeps_what_it_held():  # defect 1, found on re-reading
    # The "gpu" entry gets `version` added in a copy; a dict subclass whose keys() hides
    # '__ref' must not make that copy drop what keeps the memory alive.
    class D(dict):
        def keys(self):
            return [k for k in dict.keys(self) if k != "__ref"]

        def __iter__(self):
            return iter(self.keys())

    buf = np.arange(8.0)
    alive = weakref.ref(buf)
    entry = D(shape=(8,), typestr="<f8", data=(buf.ctypes.data, False), strides=None, __ref=buf)
    del buf
    producer = Obj(__gt_data_interface__={"gpu": entry})
    view = cai.gt_data(producer, check_pointer=False)
    dict.__delitem__(entry, "__ref")  # the producer lets go of it
    gc.collect()
    assert alive() is not None and view.gpu is not None
    del view
    gc.collect()
    assert alive() is None
