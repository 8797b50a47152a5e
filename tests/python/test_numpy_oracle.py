"""NumPy as the independent oracle for cai's typestr, descr and layout code.

The Rust side (tests/oracle, `cai-oracle`) answers a batch of questions as JSON; NumPy answers
the same questions here, from declarations written out in this file, and every answer must agree.
"""

import ast
import json
import os
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cai

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("CAI_ORACLE_SEED", "20261121"))


def oracle(request: dict) -> dict:
    exe = os.environ.get("CAI_ORACLE")
    cmd = [exe] if exe else ["cargo", "run", "--quiet", "-p", "cai-oracle"]
    out = subprocess.run(
        cmd, input=json.dumps(request), capture_output=True, text=True, cwd=ROOT, check=True
    )
    return json.loads(out.stdout)


# ---------------------------------------------------------------- typestrs

FIXED_TYPESTRS = [
    "<b1", "|b1", ">b1", "=b1", "<i1", ">i1", "|u1", "<i2", ">i2", "=i4", "|i4", "<i8", "<u8",
    "<f2", ">f4", "=f8", "<f16", "<c8", ">c16", "<c32", "|S0", "<S5", "|S1024", "<U0", "|U3",
    ">U3", "=U7", "|V0", "<V2", "|V16", "|O8", "<O8", "<m8", "<M8", "<M8[ns]", ">m8[D]",
    "<M8[2ms]", "<M8[1ms]", "<m8[10us]", "<M8[Y]", "<M8[W]", "<m8[h]", "<m8[m]", "<m8[as]",
    "f04", "<f04", "<f3", "<b2", "<i16", "<u16", "<c4", "<f12", "<M8[]", "<M8[xx]", "<f4[ns]",
    "<f4 ", "<f+4", "<f-4", "<S", "<U", "<q", "f4", "<", "", "<x4", "<M4", "<m8[0ms]",
    "<M8[ms", "<i4]", "|O4", "|O", "<O",
]


def random_typestrs(rng: random.Random, n: int) -> list:
    orders = "<>|=x"
    kinds = "biufcmMOSUVtqx"
    out = []
    for _ in range(n):
        s = rng.choice(orders) + rng.choice(kinds)
        s += str(rng.choice([0, 1, 2, 3, 4, 8, 10, 12, 16, 32, rng.randrange(0, 5000)]))
        if rng.random() < 0.15:
            s += "[" + rng.choice(["", "ns", "us", "ms", "s", "D", "10ms", "bogus", "0s"]) + "]"
        if rng.random() < 0.05:
            s = s[: rng.randrange(len(s) + 1)]
        out.append(s)
    return out


def numpy_typestr(s: str):
    try:
        d = np.dtype(s)
    except (TypeError, ValueError, SyntaxError):
        return None
    return d


def test_typestrs_agree_with_numpy():
    rng = random.Random(SEED)
    cases = FIXED_TYPESTRS + random_typestrs(rng, 3000)
    answers = oracle({"typestrs": cases})["typestrs"]
    accepted = 0
    for s, ours in zip(cases, answers, strict=True):
        theirs = numpy_typestr(s)
        if "canonical" in ours:
            accepted += 1
            if s[1:2] == "t":
                # Bit fields (cuDF's `<t1` masks) are in the array-interface grammar but
                # NumPy cannot make a dtype of them.
                continue
            if s[1:] == "f1":
                # ml_dtypes writes its float8_e5m2 so (NumPy has no one-byte float): that type,
                # written as its byte.
                assert ours["canonical"] == "|V1" and ours["itemsize"] == 1, s
                continue
            assert theirs is not None, f"we accept {s!r} but NumPy rejects it"
            assert ours["canonical"] == theirs.str, s
            assert ours["itemsize"] == theirs.itemsize, s
        else:
            # We may be stricter than NumPy (it takes 'f' without a size, 'O4'...), never laxer.
            assert ours["error"].startswith("typestr "), ours
            assert repr(s) in ours["error"] or json.dumps(s) in ours["error"], ours
    assert accepted > 500


# ---------------------------------------------------------------- elements

SCALARS = {
    "bool": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "isize": np.intp, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "usize": np.uintp, "f32": np.float32, "f64": np.float64, "f16": np.float16,
    "Complex<f32>": np.complex64, "Complex<f64>": np.complex128,
}

POINT = [("x", "<f4"), ("y", "<f4")]
# NumPy declarations of the structs in tests/oracle/src/main.rs, written independently.
STRUCTS = {
    "Point": np.dtype(POINT, align=True),
    "Particle": np.dtype(
        [("id", "u1"), ("pos", "<f8", (3,)), ("flags", "<u2", (3, 2)), ("alive", "?")],
        align=True,
    ),
    "Nested": np.dtype(
        [
            ("tag", "i1"),
            ("p", np.dtype(POINT, align=True)),
            ("ps", np.dtype(POINT, align=True), (2,)),
            ("z", "<c16"),
            ("h", "<f2"),
        ],
        align=True,
    ),
    "Tuple": np.dtype([("f0", "<u2"), ("f1", "<f8"), ("f2", "u1")], align=True),
    "Clashing": np.dtype([("f1", "u1"), ("x", "<u4"), ("_pad1", "u1"), ("f4", "<u2")], align=True),
    "Packed": np.dtype([("a", "u1"), ("b", "<f8"), ("c", "<i4")], align=False),
    "Aligned": np.dtype(
        {"names": ["a", "b"], "formats": ["<u4", "u1"], "offsets": [0, 4], "itemsize": 32}
    ),
}


@pytest.fixture(scope="module")
def elements():
    return {e["rust"]: e for e in oracle({})["elements"]}


def test_every_scalar_element_matches_numpy(elements):
    for rust, np_type in SCALARS.items():
        ours, theirs = elements[rust], np.dtype(np_type)
        assert ours["typestr"] == theirs.str, rust
        assert ast.literal_eval(ours["descr"]) == theirs.descr, rust
        assert ours["itemsize"] == theirs.itemsize == ours["size_of"], rust
    # The oracle lists cai-runtime's element types (`for_each_element!`): a new one needs its
    # NumPy dtype above. bfloat16 has none: with the `bf16` feature it is two opaque bytes.
    if "bf16" in elements:
        assert (elements["bf16"]["typestr"], elements["bf16"]["size_of"]) == ("<V2", 2)
    assert set(elements) - set(STRUCTS) - {"bf16"} == set(SCALARS)


# NumPy names an unnamed descr entry 'f<index>', so its own descr of these structs names a gap
# like a field and `numpy.dtype(descr)` refuses it ("field 'f1' occurs more than once"). Ours
# names those gaps instead; every other entry is NumPy's.
RENAMED_PADDING = {"Tuple": {1: "_pad1"}, "Clashing": {1: "_pad1_", 4: "_pad4"}}


def test_derived_structs_match_numpy(elements):
    for rust, theirs in STRUCTS.items():
        ours = elements[rust]
        assert ours["typestr"] == theirs.str, rust
        assert ours["itemsize"] == ours["size_of"] == theirs.itemsize, rust
        renamed = RENAMED_PADDING.get(rust, {})
        expected = [(renamed.get(i, e[0]), *e[1:]) for i, e in enumerate(theirs.descr)]
        descr = ast.literal_eval(ours["descr"])
        assert descr == expected, rust
        if renamed:
            with pytest.raises(ValueError, match="occurs more than once"):
                np.dtype(theirs.descr)
        # NumPy reads ours back: every field at its offset, with its type.
        back = np.dtype(descr)
        assert back.itemsize == theirs.itemsize, rust
        for name, (dtype, offset, *_) in theirs.fields.items():
            assert back.fields[name][:2] == (dtype, offset), (rust, name)


NAMES = st.sampled_from(["", "a", "b", "f0", "f1", "f2"])
TITLES = st.sampled_from([None, "", "a", "t", "f1"])


def descr_lists(depth=1):
    fmt = st.just("|u1") if depth == 0 else st.one_of(st.just("|u1"), st.deferred(lambda: descr_lists(depth - 1)))
    entry = st.tuples(NAMES, TITLES, fmt).map(lambda e: ((e[1], e[0]) if e[1] is not None else e[0], e[2]))
    return st.lists(entry, min_size=1, max_size=4)


def itemsize(descr):
    return sum(1 if f == "|u1" else itemsize(f) for _, f in descr)


@settings(max_examples=400, deadline=None)
@given(descr_lists())
def test_descr_names_numpy_refuses_are_a_warning(descr):
    try:
        np.dtype(descr)
        numpy_reads_it = True
    except (ValueError, TypeError):
        numpy_reads_it = False
    desc = {"shape": (3,), "typestr": f"|V{itemsize(descr)}", "data": (0x1000, False), "version": 3, "strides": None, "descr": descr}
    found = cai.check_descriptor(desc, "host")
    assert [v for v in found if v.severity == "error"] == []
    warned = [v for v in found if v.rule == "interop-descr-names"]
    assert (warned == []) == numpy_reads_it, (descr, found)
    if warned:
        assert warned[0].key == "descr" and "NumPy refuses" in warned[0].message
    # Import takes it either way: the names do not change where the bytes are, and NumPy
    # exports such lists itself.
    assert cai.from_array_interface(desc).shape == (3,)


# ---------------------------------------------------------------- layouts

ITEMSIZES = [1, 2, 4, 8, 16]
DTYPE_OF = {1: "u1", 2: "<u2", 4: "<f4", 8: "<f8", 16: "<c16"}


def random_case(rng: random.Random) -> dict:
    ndim = rng.choice([0, 1, 1, 2, 2, 3, 3, 4])
    shape = [rng.choice([0, 1, 1, 2, 3, 4, 5, 7]) if rng.random() < 0.15 else rng.randrange(1, 8)
             for _ in range(ndim)]
    case = {"itemsize": rng.choice(ITEMSIZES), "shape": shape, "order": rng.choice("CF"), "ops": []}
    cur = list(shape)
    for _ in range(rng.randrange(0, 4)):
        if not cur:
            break
        kind = rng.random()
        if kind < 0.25:
            axes = list(range(len(cur)))
            rng.shuffle(axes)
            case["ops"].append({"transpose": axes})
            cur = [cur[a] for a in axes]
        elif kind < 0.35:
            case["ops"].append("t")
            cur = cur[::-1]
        elif kind < 0.85:
            axis = rng.randrange(len(cur))
            n = cur[axis]
            pick = lambda: rng.choice([None, rng.randrange(-n - 2, n + 3)])  # noqa: E731
            step = rng.choice([1, 1, 2, 3, -1, -1, -2, -3, 5, -7])
            start, stop = pick(), pick()
            case["ops"].append({"slice": [axis, start, stop, step]})
            cur[axis] = len(range(*slice(start, stop, step).indices(n)))
        elif cur:
            axis = rng.randrange(len(cur))
            if cur[axis] == 0:
                continue
            index = rng.randrange(-cur[axis], cur[axis])
            case["ops"].append({"index": [axis, index]})
            cur.pop(axis)
    return case


def numpy_view(case: dict):
    base = np.zeros(case["shape"], dtype=DTYPE_OF[case["itemsize"]], order=case["order"])
    a = base
    for op in case["ops"]:
        if op == "t":
            a = a.T
        elif "transpose" in op:
            a = a.transpose(op["transpose"])
        elif "slice" in op:
            axis, start, stop, step = op["slice"]
            a = a[(slice(None),) * axis + (slice(start, stop, step),)]
        else:
            axis, index = op["index"]
            a = a[(slice(None),) * axis + (index, Ellipsis)]
    return base, a


def byte_bounds(a):
    try:
        from numpy.lib.array_utils import byte_bounds as bb
    except ImportError:  # NumPy < 2
        bb = np.byte_bounds
    return bb(a)


def test_layouts_agree_with_numpy():
    rng = random.Random(SEED)
    cases = [random_case(rng) for _ in range(3000)]
    cases += [
        {"itemsize": 8, "shape": [], "order": "C", "ops": []},
        {"itemsize": 4, "shape": [3, 0, 2], "order": "F", "ops": []},
        {"itemsize": 2, "shape": [5, 1, 4], "order": "C", "ops": [{"slice": [2, None, None, 2]}]},
        {"itemsize": 4, "shape": [6], "order": "C", "ops": [{"slice": [0, 5, 2, 1]}]},
    ]
    answers = oracle({"layouts": cases})["layouts"]
    kinds = {"c": 0, "f": 0, "neither": 0, "empty": 0, "negative": 0}
    for case, ours in zip(cases, answers, strict=True):
        base, a = numpy_view(case)
        assert "error" not in ours, (case, ours)
        where = f"case {case}"
        assert tuple(ours["shape"]) == a.shape, where
        assert tuple(ours["strides"]) == a.strides, where
        assert ours["c_contiguous"] == a.flags.c_contiguous, where
        assert ours["f_contiguous"] == a.flags.f_contiguous, where
        ai = a.__array_interface__
        exported = None if ours["exported_strides"] is None else tuple(ours["exported_strides"])
        assert exported == ai["strides"], where
        if a.size:
            ptr = ai["data"][0]
            assert ours["offset"] == ptr - base.__array_interface__["data"][0], where
            lo, hi = byte_bounds(a)
            assert tuple(ours["extent"]) == (lo - ptr, hi - ptr), where
            kinds["negative"] += any(s < 0 for s in a.strides)
        else:
            assert ours["extent"] is None, where
            kinds["empty"] += 1
        if a.flags.c_contiguous:
            kinds["c"] += 1
        elif a.flags.f_contiguous:
            kinds["f"] += 1
        else:
            kinds["neither"] += 1
    # The generator must really cover every kind of layout.
    assert all(n > 20 for n in kinds.values()), kinds


def test_explicit_strides_agree_with_numpy():
    """Any strides, zero and negative included, through np.lib.stride_tricks.as_strided."""
    rng = random.Random(SEED + 1)
    cases = []
    for _ in range(2000):
        ndim = rng.randrange(0, 4)
        itemsize = rng.choice(ITEMSIZES)
        shape = [rng.choice([0, 1, 1, 2, 3, 4]) for _ in range(ndim)]
        strides = [rng.choice([0, itemsize, -itemsize, 2 * itemsize, rng.randrange(-64, 65) * itemsize])
                   for _ in range(ndim)]
        cases.append({"itemsize": itemsize, "shape": shape, "strides": strides})
    answers = oracle({"layouts": cases})["layouts"]
    zero = 0
    for case, ours in zip(cases, answers, strict=True):
        shape, strides, itemsize = case["shape"], case["strides"], case["itemsize"]
        span = sum(abs(s) * max(d - 1, 0) for d, s in zip(shape, strides)) + itemsize
        buf = np.zeros(2 * span + itemsize, dtype="u1")
        start = buf[span:].view(DTYPE_OF[itemsize])  # room on both sides of the data pointer
        a = np.lib.stride_tricks.as_strided(start, shape=shape, strides=strides)
        where = f"case {case}"
        assert "error" not in ours, (case, ours)
        assert ours["c_contiguous"] == a.flags.c_contiguous, where
        assert ours["f_contiguous"] == a.flags.f_contiguous, where
        exported = None if ours["exported_strides"] is None else tuple(ours["exported_strides"])
        assert exported == a.__array_interface__["strides"], where
        if a.size:
            ptr = a.__array_interface__["data"][0]
            lo, hi = byte_bounds(a)
            assert tuple(ours["extent"]) == (lo - ptr, hi - ptr), where
            zero += 0 in strides
        else:
            assert ours["extent"] is None, where
    assert zero > 100


def test_layout_errors_name_the_problem():
    answers = oracle(
        {
            "layouts": [
                {"itemsize": 8, "shape": [2**62, 4], "order": "C", "ops": []},
                {"itemsize": 4, "shape": [3], "order": "C", "ops": [{"slice": [0, None, None, 0]}]},
                {"itemsize": 4, "shape": [3], "order": "C", "ops": [{"index": [0, 3]}]},
                {"itemsize": 4, "shape": [3, 2], "order": "C", "ops": [{"transpose": [0, 0]}]},
            ]
        }
    )["layouts"]
    errors = [a["error"] for a in answers]
    assert "overflows" in errors[0] and "(4611686018427387904, 4)" in errors[0]
    assert errors[1] == "slice step cannot be zero"
    assert errors[2] == "index 3 is out of bounds for axis 0 with size 3"
    assert errors[3] == "axes (0, 0) are not a permutation of 0..2"


# ---------------------------------------------------------------- whole descriptors

DESCRIPTOR_ELEMENTS = {
    "bool": np.bool_, "i8": np.int8, "u16": np.uint16, "i64": np.int64, "f32": np.float32,
    "f64": np.float64, "Complex<f64>": np.complex128,
    "Particle": STRUCTS["Particle"], "Nested": STRUCTS["Nested"],
}


def test_host_descriptor_dicts_equal_numpys():
    rng = random.Random(SEED)
    cases = []
    for name in DESCRIPTOR_ELEMENTS:
        for _ in range(30):
            ndim = rng.randrange(0, 4)
            shape = [rng.choice([0, 1, 2, 3, 5]) for _ in range(ndim)]
            cases.append({"element": name, "shape": shape, "order": rng.choice("CF")})
    answers = oracle({"descriptors": cases})["descriptors"]
    for case, ours in zip(cases, answers, strict=True):
        assert "literal" in ours, (case, ours)
        d = ast.literal_eval(ours["literal"])
        a = np.zeros(case["shape"], dtype=DESCRIPTOR_ELEMENTS[case["element"]], order=case["order"])
        theirs = a.__array_interface__
        # Same keys and values, but for the pointer: ours is made up, and zero-size arrays
        # export 0 as the CUDA Array Interface requires.
        assert set(d) == set(theirs), case
        for key in theirs:
            if key != "data":
                assert d[key] == theirs[key], (case, key)
        assert d["data"][1] is False
        assert d["data"][0] == (0 if a.size == 0 else 0x1000), case
