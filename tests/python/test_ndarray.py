"""ndarray's arrays both ways, from Python: `cai.examples.Mesh` holds an `ndarray::Array2`
whose own shape and strides the export takes; `column_sums`, `scale` and the test hook
`_as_array_items` read and write imports through `ForeignArray::as_array(_mut)`, compared item
by item with NumPy over random dtypes, shapes, strides (negative too) and offsets."""

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import cai
import cai.examples
from cai import _native

DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]


def test_an_array2_field_exports_its_own_layout():
    m = cai.examples.mesh(2, 3)
    a = np.asarray(m)
    assert a.shape == (2, 3) and a.flags.c_contiguous and a.flags.writeable
    assert (a == np.arange(6.0).reshape(2, 3)).all()
    # Zero-copy, through every protocol NumPy reads.
    for b in [np.from_dlpack(m), np.asarray(memoryview(np.asarray(m)))]:
        assert np.shares_memory(a, b)
    assert m.__array_interface__["strides"] is None
    t = cai.examples.mesh(2, 3, transposed=True)
    b = np.asarray(t)
    assert b.shape == (3, 2) and b.flags.f_contiguous and not b.flags.c_contiguous
    assert t.__array_interface__["strides"] == (8, 24)
    assert (b == np.arange(6.0).reshape(2, 3).T).all()
    assert (np.from_dlpack(t) == b).all()
    empty = np.asarray(cai.examples.mesh(0, 3))
    assert empty.shape == (0, 3)


def test_an_exported_array2_outlives_its_python_object():
    m = cai.examples.mesh(3, 4)
    alive = weakref.ref(m)
    views = [np.asarray(m), np.from_dlpack(m)]
    del m
    gc.collect()
    # The views keep the Mesh (and its Array2's memory) alive, not only its values.
    assert alive() is not None
    for a in views:
        assert (a == np.arange(12.0).reshape(3, 4)).all()
    del views, a
    gc.collect()
    assert alive() is None


def test_jax_reads_an_array2_field():
    jnp = pytest.importorskip("jax.numpy")
    m = cai.examples.mesh(2, 3, transposed=True)
    assert (np.asarray(jnp.from_dlpack(m)) == np.arange(6.0).reshape(2, 3).T).all()


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(12.0).reshape(3, 4),
        lambda: np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        lambda: np.arange(48.0).reshape(6, 8)[::-2, 1::3],
        lambda: np.zeros((0, 3)),
        lambda: np.broadcast_to(np.arange(3.0), (4, 3)),
        lambda: cai.examples.mesh(3, 4, transposed=True),
    ],
    ids=["C", "F", "negative", "empty", "broadcast", "Mesh"],
)
def test_column_sums_are_numpys(make):
    a = make()
    assert cai.examples.column_sums(a) == list(np.asarray(a).sum(axis=0))


def test_column_sums_of_a_storage_and_a_jax_array():
    s = cai.zeros((3, 4))
    np.asarray(s)[...] = np.arange(12.0).reshape(3, 4)
    assert cai.examples.column_sums(s) == [12.0, 15.0, 18.0, 21.0]
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):  # JAX's arrays are float32 unless told
        x = jax.numpy.arange(12.0).reshape(3, 4)
        assert cai.examples.column_sums(x) == [12.0, 15.0, 18.0, 21.0]
        assert cai.examples.column_sums(x.T) == [6.0, 22.0, 38.0]


def test_refusals_are_typed_errors():
    with pytest.raises(TypeError, match="element type f64"):
        cai.examples.column_sums(np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(TypeError, match="is 1-dimensional but the view is 2-dimensional"):
        cai.examples.column_sums(np.zeros(3))
    unaligned = np.frombuffer(b"\0" + np.arange(4.0).tobytes(), dtype=np.float64, offset=1).reshape(2, 2)
    with pytest.raises(ValueError, match="not aligned"):
        cai.examples.column_sums(unaligned)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cai.examples.scale(ro, 2.0)
    assert (ro == np.arange(4.0)).all()
    shared = np.lib.stride_tricks.as_strided(np.arange(3.0), (4, 3), (0, 8), writeable=True)
    with pytest.raises(ValueError, match="overlap"):
        cai.examples.scale(shared, 2.0)
    with pytest.raises(TypeError):
        cai.examples.scale(np.arange(4.0), "x")


def test_more_columns_than_memory_is_a_memory_error():
    # `sum_axis` aborted the process here ("memory allocation ... failed"); NumPy raises
    # MemoryError for the same sums.
    for a in [np.empty((0, 2**59)), np.broadcast_to(np.zeros(1), (1, 2**59))]:
        with pytest.raises(MemoryError):
            cai.examples.column_sums(a)


def test_scale_writes_in_place_through_any_layout():
    base = np.arange(24.0).reshape(4, 6)
    view = base[::-1, 1::2]
    cai.examples.scale(view, 10.0)
    expected = np.arange(24.0).reshape(4, 6)
    expected[:, 1::2] *= 10
    assert (base == expected).all()
    s = cai.ones((2, 3))
    cai.examples.scale(s, 3.0)
    assert (s.to_numpy() == 3.0).all()
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True), pytest.raises(ValueError, match="read-only"):
        cai.examples.scale(jax.numpy.ones(3), 2.0)


@st.composite
def strided_arrays(draw):
    """An array of a random dtype, sliced out of a bigger one with random steps (negative
    too), maybe transposed, at a random byte offset into its buffer."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    base = draw(hnp.arrays(dtype, shape, elements=hnp.from_dtype(dtype, allow_nan=False)))
    index = tuple(
        slice(draw(st.integers(0, 2)), None, draw(st.sampled_from([1, 2, -1, -2]))) for _ in shape
    )
    a = base[index + (Ellipsis,)]  # (a 0-d array, not a scalar)
    if draw(st.booleans()):
        a = a.T
    return a


@settings(max_examples=300, deadline=None)
@given(strided_arrays())
def test_as_array_reads_every_item_numpy_reads(a):
    assert _native._as_array_items(a) == a.ravel().tolist()


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=6), elements=st.floats(-1e6, 1e6)))
def test_column_sums_match_numpy_for_any_values(a):
    assert np.allclose(cai.examples.column_sums(a[:, ::-1]), a[:, ::-1].sum(axis=0))
