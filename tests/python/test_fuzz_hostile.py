"""Hypothesis fuzzing of what hostile callers hand cai besides descriptors (test_fuzz.py): every
argument that stands for one entry per dimension given as any iterable, of any length, endless,
or with a `__len__` that lies or raises; and DLPack producers whose deleters run Python code
(counting, raising, inspecting the pending exception) under failing operations on the views and
storages over them.

Properties: nothing crashes or panics into Python, nothing reserves memory from a foreign length
(the tests run under a 3 GiB address-space limit, so an unbounded read fails at once rather than
taking the machine), more than 64 entries is a ValueError naming the argument, the user's own
exception is never lost to a deleter, and every deleter runs exactly once.
"""

import gc
import itertools
import os
import resource
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cai
from dlpack_producer import Producer

EXAMPLES = max(int(os.environ.get("CAI_FUZZ_EXAMPLES", "10000")) // 10, 200)
LIMIT = 3 << 30


@pytest.fixture(autouse=True)
def address_space_limit():
    """A soft limit on the address space while a fuzz test runs (restored after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = LIMIT if hard == resource.RLIM_INFINITY else min(LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class Liar:
    """An iterable whose `__len__` says `length` (or raises it, if an exception) while
    iteration yields `items` (forever, with `endless`)."""

    def __init__(self, items, length, endless=False):
        self.items, self.length, self.endless = items, length, endless

    def __len__(self):
        if isinstance(self.length, BaseException):
            raise self.length
        return self.length

    def __iter__(self):
        return itertools.cycle(self.items) if self.endless and self.items else iter(self.items)


def containers(items):
    """`items` as the many iterables a caller may pass: tuple, list, generator, iterator,
    range-like, an object with a lying or raising `__len__`, an endless cycle."""
    lying_lengths = st.one_of(
        st.sampled_from([0, 1, 63, 64, 65, 2**31, 2**40, sys.maxsize]),
        st.sampled_from([KeyError("from __len__"), OverflowError("big"), ValueError("negative")]),
    )
    return st.one_of(
        st.just(tuple(items)),
        st.just(list(items)),
        st.just(items).map(lambda x: (i for i in x)),
        st.just(items).map(iter),
        lying_lengths.map(lambda n: Liar(items, n)),
        lying_lengths.map(lambda n: Liar(items, n, endless=True)),
    )


def outcome(call):
    """What `call()` raised (its type), or None: a PanicException or SystemError fails the test
    at once, whatever the input."""
    try:
        call()
    except BaseException as e:  # noqa: BLE001 (a PanicException derives from BaseException)
        name = type(e).__name__
        assert name not in ("PanicException", "SystemError", "MemoryError"), f"{name}: {e}"
        assert not isinstance(e, (KeyboardInterrupt, SystemExit))
        return type(e), str(e)
    return None


def expected_length(container, n):
    """The length a correct reader accepts: None for 'must be refused' (over the limit, or a
    `__len__` over it), else n; a raising `__len__` other than TypeError propagates."""
    if isinstance(container, Liar):
        if isinstance(container.length, (KeyError, ValueError)):
            return "raises"
        if isinstance(container.length, OverflowError):
            return None
        if container.length > 64:
            return None
        if container.endless and container.items:
            return None
    return n if n <= 64 else None


ARGUMENTS = {
    "shape": lambda c: cai.zeros(c),
    "halo": lambda c: cai.zeros((2,) * 3, halo=c),
    "layout": lambda c: cai.zeros((2,) * 3, layout=c),
    "aligned_index": lambda c: cai.zeros((2,) * 3, aligned_index=c),
    "dims": lambda c: cai.zeros((2,) * 3, dims=c),
    "index": lambda c: cai.as_host_array(np.zeros((2,) * 3)).get(c),
    "axes": lambda c: cai.zeros((2,) * 3).transpose(c),
}
ITEM = {"shape": 1, "halo": 0, "layout": 0, "aligned_index": 0, "dims": "I", "index": 0, "axes": 0}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(ARGUMENTS)), st.sampled_from([0, 1, 3, 63, 64, 65, 66, 200, 5000]), st.data())
def test_per_dimension_arguments_from_any_iterable(argument, n, data):
    container = data.draw(containers([ITEM[argument]] * n))
    result = outcome(lambda: ARGUMENTS[argument](container))
    expected = expected_length(container, n)
    if expected == "raises":
        assert result is not None and result[0] in (KeyError, ValueError), result
    elif expected is None:
        assert result is not None and result[0] is ValueError, result
        assert argument in result[1] and "64" in result[1], result


class Entry:
    """An object exposing a data interface whose per-dimension entries are `dims` and
    `origin` (each any container)."""

    def __init__(self, dims=None, origin=None, entry_dims=None):
        self.a = np.zeros((2, 2))
        self.__array_interface__ = self.a.__array_interface__
        if dims is not None:
            self.__gt_dims__ = dims
        if origin is not None:
            self.__gt_origin__ = origin
        if entry_dims is not None:
            d = dict(self.a.__array_interface__)
            d["dims"] = entry_dims
            self.__gt_data_interface__ = {None: d}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["__gt_dims__", "__gt_origin__", "dims"]), st.sampled_from([2, 65, 5000]), st.data())
def test_data_interface_entries_from_any_iterable(which, n, data):
    item = 0 if which == "__gt_origin__" else "I"
    container = data.draw(containers([item] * n))
    make = {
        "__gt_dims__": lambda: Entry(dims=container),
        "__gt_origin__": lambda: Entry(origin=container),
        "dims": lambda: Entry(entry_dims=container),
    }[which]
    result = outcome(lambda: cai.as_storage(make()))
    if expected_length(container, n) is None:
        assert result is not None and result[0] is ValueError, result


# ---- deleters that run Python code --------------------------------------------------------------


FAILURES = {
    "float": (lambda v, s: float(v), TypeError),
    "get out of bounds": (lambda v, s: v.get((99,)), IndexError),
    "dlpack stream": (lambda v, s: v.__dlpack__(stream=5), ValueError),
    "dlpack version": (lambda v, s: v.__dlpack__(max_version="x"), TypeError),
    "bad index": (lambda v, s: v.get(("a",)), TypeError),
    "storage setitem": (lambda v, s: s.__setitem__(0, "x"), ValueError),
    "storage transpose": (lambda v, s: s.transpose(7), ValueError),
    "storage halo": (lambda v, s: setattr(s, "halo", itertools.count()), ValueError),
    "user raise": (lambda v, s: (_ for _ in ()).throw(LookupError("mine")), LookupError),
}


@settings(max_examples=max(EXAMPLES // 4, 100), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(sorted(FAILURES)),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["view", "storage"]),
)
def test_deleters_that_run_python_never_lose_the_users_exception(failure, raises, legacy, over):
    call, expected = FAILURES[failure]
    p = Producer(np.arange(6.0), raise_in_deleter=raises, legacy_only=legacy)

    def attempt():
        # The view and storage are this frame's: gone with it (and its exception's traceback).
        if over == "storage" and failure.startswith("storage"):
            call(None, cai.as_storage(p))
        else:
            v = cai.from_dlpack(p)
            call(v, cai.as_storage(v) if failure.startswith("storage") else None)

    unraisable = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(u.exc_value)
    try:
        try:
            attempt()
            raised = None
        except BaseException as e:  # noqa: BLE001
            raised = type(e)
            del e
        gc.collect()
    finally:
        sys.unraisablehook = old_hook
    assert raised is expected
    assert p.deleted == 1
    assert p.pending == [None]
    assert len(unraisable) == (1 if raises else 0)
    assert sys.exc_info()[0] is None
