"""Hypothesis fuzzing of foreign descriptors: at least 10,000 generated dicts per run, valid
ones accepted, invalid ones rejected with the exception an independent model of the spec
predicts, and nothing ever crashes the interpreter. NumPy's integer scalars (where the spec
asks for ints), ints as the read-only flag and lists as shape or strides are accepted, as NumPy
or Numba read them, and reported by the checker as errors import tolerates.

The model below restates the rules in Python (it shares no code with the Rust parser). Import
raises the first problem in this order: missing required keys (KeyError), then each present key
in the order shape, typestr, data, version, strides, descr, mask, stream (TypeError for wrong
types and unreadable type strings, as CuPy and Numba do; ValueError for bad values), then rule
violations of a well-typed descriptor (ValueError).
"""

import os
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import cai

EXAMPLES = int(os.environ.get("CAI_FUZZ_EXAMPLES", "10000"))
OUTCOMES = Counter()
ISIZE_MAX = 2**63 - 1
MISSING = object()

VALID_TYPESTRS = {"<f4": 4, "|b1": 1, "<c16": 16, ">i2": 2, "|V8": 8, "<M8[ns]": 8, "|u1": 1, "<U3": 12, "|V0": 0}
INVALID_TYPESTRS = ["xx", "f4", "<f3", "", "<U", "<i16", "<M8[xx]", "|O4"]


class Masked:
    def __init__(self, desc):
        self.__array_interface__ = desc
        self.__cuda_array_interface__ = desc


# NumPy's integer scalars are not ints, but NumPy reads them in shape and strides (through
# __index__), and so does import: the checker reports them as tolerated errors.
ints = st.one_of(
    st.integers(-3, 8),
    st.sampled_from([2**31, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**70)]),
    st.sampled_from([np.int8(-1), np.uint64(2**64 - 1), np.int64(-(2**63))]),
)
not_int = st.sampled_from([1.5, "3", None, True, False, [1], b"x", np.float64(2.0), np.True_])


def rarely(usual, unusual):
    """usual 9 times in 10, else unusual."""
    return st.integers(0, 9).flatmap(lambda n: unusual if n == 0 else usual)


# The read-only flag: a bool, or an int NumPy reads as a truth value (tolerated).
flags = rarely(st.booleans(), st.sampled_from([0, 1, 2, np.uint8(1)]))
sequence = lambda elem: st.one_of(  # noqa: E731
    st.lists(elem, max_size=4).map(tuple),
    st.lists(elem, max_size=3),
)


def mostly(valid, invalid, missing=True):
    """A key's value: valid 4 times in 5, else invalid or (when allowed) missing."""
    bad = st.one_of(invalid, st.just(MISSING)) if missing else invalid
    return st.integers(0, 4).flatmap(lambda n: valid if n else bad)


@st.composite
def descriptors(draw):
    device = draw(st.booleans())
    d = {}

    def put(key, value):
        if value is not MISSING:
            d[key] = value

    small = st.integers(0, 5)
    shapes = rarely(st.lists(small, max_size=4).map(tuple), st.lists(st.one_of(small, small.map(np.int64)), max_size=4).map(tuple))
    put("shape", draw(mostly(shapes,
                             st.one_of(sequence(st.one_of(ints, not_int)), not_int, st.lists(st.integers(0, 3), max_size=3)))))
    put("typestr", draw(mostly(st.sampled_from(list(VALID_TYPESTRS)), st.one_of(st.sampled_from(INVALID_TYPESTRS), not_int))))
    pointers = st.integers(0, 2**40)
    valid_data = st.tuples(rarely(pointers, pointers.map(np.uint64)), flags)
    invalid_data = st.one_of(
        st.tuples(st.one_of(ints, not_int), st.one_of(flags, not_int)),
        st.tuples(st.integers(0, 9)),
        st.lists(st.integers(0, 9), min_size=2, max_size=2),
        not_int,
    )
    put("data", draw(mostly(valid_data, invalid_data)))
    valid_version = st.integers(0, 3) if device else st.sampled_from([3, MISSING])
    put("version", draw(mostly(valid_version, st.one_of(ints, not_int))))
    shape = d.get("shape")
    same_rank = (
        st.lists(st.integers(-64, 64), min_size=len(shape), max_size=len(shape)).map(tuple)
        if isinstance(shape, tuple)
        else st.just(None)
    )
    put("strides", draw(mostly(st.one_of(st.just(MISSING), st.none(), same_rank, same_rank, sequence(st.integers(-64, 64))),
                               st.one_of(sequence(st.one_of(ints, not_int)), not_int), missing=False)))
    put("descr", draw(mostly(st.sampled_from([MISSING] * 6 + [[("", "<f4")], [("a", "|u1"), ("", "|V3")], [("x", "<f8")]]),
                             st.sampled_from(["<f4", [("a",)], [(1, "<f4")]]), missing=False)))
    if draw(st.integers(0, 9)) == 0:
        put("mask", draw(st.sampled_from([None, 3, Masked({"shape": (1,), "typestr": "|b1", "data": (64, False), "version": 3})])))
    if device:
        put("stream", draw(mostly(st.one_of(st.none(), st.integers(1, 2), st.integers(3, 2**64 - 1)),
                                  st.one_of(st.just(0), ints, not_int))))
    return device, d


def is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def loose_values(d):
    """Whether d (imported) holds a value import tolerates though the spec asks for another
    type: a NumPy integer, an int as the read-only flag, a list as shape or strides."""
    if isinstance(d["shape"], list) or isinstance(d.get("strides"), list):
        return True
    values = [*d["shape"], *(d.get("strides") or ()), d.get("version"), d.get("stream")]
    data = d["data"]
    if isinstance(data, tuple):
        values.append(data[0])
        if not isinstance(data[1], bool):
            return True
    return any(isinstance(v, np.integer) for v in values)


def check_ints(v, lo, hi):
    """None if v is a tuple/list of ints in [lo, hi]; else the exception type."""
    if not isinstance(v, (tuple, list)):
        return TypeError
    for x in v:
        if not is_int(x):
            return TypeError
        if not lo <= int(x) <= hi:
            return ValueError
    return None


def expected_exception(device, d):
    """The exception import must raise, or None when the descriptor is valid."""
    if not isinstance(d, dict):
        return TypeError
    # NumPy's host interface may leave `data` out (the exporter's buffer is shared, and a
    # dict alone has none): that is found in `data`'s turn.
    required = ["shape", "typestr"] + (["data", "version"] if device else [])
    if any(k not in d for k in required):
        return KeyError
    problems = []
    problems.append(check_ints(d["shape"], 0, 2**64 - 1))
    ts = d["typestr"]
    problems.append(None if isinstance(ts, str) and ts in VALID_TYPESTRS else TypeError)
    data = d.get("data", MISSING)
    if data is MISSING:
        problems.append(KeyError)
    elif not device and isinstance(data, bytes):
        problems.append(None)  # a buffer of len(data) bytes
    elif not (isinstance(data, tuple) and len(data) == 2):
        problems.append(TypeError)
    elif not is_int(data[0]):
        problems.append(TypeError)
    elif not 0 <= int(data[0]) < 2**64:
        problems.append(ValueError)
    elif not (isinstance(data[1], bool) or is_int(data[1])):
        problems.append(TypeError)
    version = d.get("version", 3)
    problems.append(None if is_int(version) and 0 <= int(version) < 2**32 else (ValueError if is_int(version) else TypeError))
    strides = d.get("strides")
    problems.append(None if strides is None else check_ints(strides, -(2**63), ISIZE_MAX))
    descr = d.get("descr")
    if descr is not None:
        ok = isinstance(descr, list) and all(isinstance(f, tuple) and len(f) in (2, 3) and isinstance(f[0], str) for f in descr)
        problems.append(None if ok else TypeError)
    mask = d.get("mask")
    if mask is not None and not isinstance(mask, Masked):
        problems.append(TypeError)
    stream = d.get("stream") if device else None
    if stream is not None:
        problems.append(TypeError if not is_int(stream) else (ValueError if not 1 <= int(stream) < 2**64 else None))
    first = next((p for p in problems if p is not None), None)
    if first is not None:
        return first
    # A well-typed descriptor: the rules (all ValueError).
    itemsize = VALID_TYPESTRS[ts]
    shape = [int(n) for n in d["shape"]]
    strides = None if strides is None else [int(s) for s in strides]
    version = int(version)
    if not 0 <= version <= 3 if device else version != 3:
        return ValueError
    count = 0 if 0 in shape else 1
    for n in shape:
        count *= n
    # Every dimension fits NumPy's npy_intp, even where another is 0, and so do the bytes of
    # the non-zero ones ("array is too big", as NumPy says of np.empty((0, 2**62), "f4")).
    if any(n > ISIZE_MAX for n in shape):
        return ValueError
    nonzero = 1
    for n in shape:
        nonzero *= n or 1
    # So does their item count, whatever the item size: cai refuses (2, 2**62) of 'V0', whose
    # size NumPy reads as -2**63, and so (0, 2, 2**62) too, as it refuses 'f4' of that shape.
    if itemsize > ISIZE_MAX or nonzero > ISIZE_MAX or nonzero * itemsize > ISIZE_MAX:
        return ValueError
    if strides is not None:
        if len(strides) != len(shape):
            return ValueError
        if count:
            lo = hi = 0
            for n, s in zip(shape, strides):
                span = (n - 1) * s
                lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
                if not -(2**63) <= lo or hi > ISIZE_MAX:
                    return ValueError
            # The bytes spanned fit isize below the pointer as above it (lo may reach -2**63,
            # but the whole span may not pass ISIZE_MAX).
            if hi + itemsize > ISIZE_MAX or hi + itemsize - lo > ISIZE_MAX:
                return ValueError
    if isinstance(data, bytes):
        # The described bytes must lie inside the buffer.
        lo, hi = 0, count * itemsize
        if count and strides is not None:
            lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
            hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + itemsize
        if count and (lo < 0 or hi > len(data)):
            return ValueError
    elif count and int(data[0]) == 0:
        return ValueError
    if descr is not None:
        sizes = {"<f4": 4, "|u1": 1, "|V3": 3, "<f8": 8}
        if sum(sizes[f[1]] for f in descr) != itemsize:
            return ValueError
    # The mask's shape (1,) broadcasts to every shape of at least one dimension.
    if isinstance(mask, Masked) and shape == []:
        return ValueError
    return None


def import_device_unchecked(d):
    """A device import without the driver (none here): the pointer is not checked and the
    streams are not ordered; the descriptor is read and validated as any import's."""
    return cai.from_cuda_array_interface(d, check_pointer=False, sync=False)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(descriptors())
# (A case the model once read as valid, while NumPy and cai refuse it.)
@example((False, {"shape": (0, 2**62), "typestr": "<f4", "data": (0, False), "version": 3}))
# (One it read as valid, while cai refuses its 2**63 + 4 bytes below and above the pointer.)
@example((False, {"shape": (1, 1, 2), "typestr": "<f4", "data": (1, False), "strides": (0, 0, -(2**63)), "version": 3}))
@example((False, {"shape": (0, 2, 2**62), "typestr": "|V0", "data": (0, False), "version": 3}))
def test_import_matches_the_model(case):
    device, d = case
    expected = expected_exception(device, d)
    OUTCOMES["valid" if expected is None else expected.__name__] += 1
    importer = import_device_unchecked if device else cai.from_array_interface
    # Import's fast path may decline any descriptor, but what it returns is what the full
    # parser returns.
    fast, full = cai._native._import_paths(d, device)
    assert fast is None or fast == full, (d, fast, full)
    OUTCOMES["fast path"] += fast is not None
    try:
        view = importer(d)
    except (KeyError, TypeError, ValueError) as e:
        assert expected is not None, f"valid descriptor refused: {d!r}: {e!r}"
        assert type(e) is expected, f"{d!r}: expected {expected.__name__}, got {e!r}"
        assert str(e), d
        return
    assert expected is None, f"invalid descriptor accepted ({expected.__name__} expected): {d!r}"
    assert view.shape == tuple(d["shape"])
    if isinstance(d["data"], tuple):
        assert view.ptr == d["data"][0]
    else:
        # The items in C order, as NumPy walks the same bytes with the same strides (zero
        # and negative ones included).
        itemsize = view.nbytes // max(1, int(np.prod(view.shape))) if view.nbytes else 0
        raw = np.frombuffer(d["data"], np.uint8)[d.get("offset", 0):]
        items = np.lib.stride_tricks.as_strided(
            raw, view.shape + (itemsize,), view.strides + (1,), writeable=False)
        assert view.readonly and view.tobytes() == items.tobytes()
    # The checker finds no error in what import accepted, except what import tolerates.
    tolerated = {"data-zero-size", "stream-version"}
    errors = [v for v in cai.check_descriptor(d, "cuda" if device else "host") if v.severity == "error"]
    loose = loose_values(d)
    OUTCOMES["tolerated type"] += loose
    assert all(v.rule in tolerated or (loose and not v.exception and "the spec asks for" in v.message) for v in errors), errors
    assert not loose or any("the spec asks for" in v.message for v in errors), (d, errors)


@settings(max_examples=max(EXAMPLES // 10, 100), deadline=None, suppress_health_check=list(HealthCheck))
@given(descriptors())
def test_checker_reports_what_import_refuses(case):
    device, d = case
    violations = cai.check_descriptor(d, "cuda" if device else "host")
    importer = import_device_unchecked if device else cai.from_array_interface
    try:
        importer(d)
        refused = None
    except (KeyError, TypeError, ValueError) as e:
        refused = e
    strict = [v for v in violations if v.exception]
    if refused is None:
        assert not strict, (d, strict)
    else:
        assert strict and strict[0].exception == type(refused).__name__, (d, refused, strict)


def test_fuzzing_covered_every_outcome():
    """Runs after the fuzz test: the generator must produce plenty of each outcome, or the
    fuzzing proves little."""
    if sum(OUTCOMES.values()) < EXAMPLES:
        import pytest

        pytest.skip("run together with test_import_matches_the_model")
    assert all(OUTCOMES[k] >= EXAMPLES // 20 for k in ("valid", "KeyError", "TypeError", "ValueError")), OUTCOMES
    # The fast path takes only exact builtin values: valid descriptors holding NumPy integers
    # (or lists, buffers, masks) go to the parser.
    assert OUTCOMES["fast path"] >= EXAMPLES // 40, OUTCOMES
    assert OUTCOMES["tolerated type"] >= EXAMPLES // 100, OUTCOMES
