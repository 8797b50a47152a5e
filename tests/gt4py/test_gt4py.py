"""GT4Py itself against cai: its cartesian stencils (numpy backend) on cai storages with no
explicit origin, GT4Py's fields read by cai, and cai's presets against GT4Py's allocator.

Runs in its own venv with GT4Py installed (scripts/test.sh makes .venv-gt4py)."""

import os
import tempfile

os.environ.setdefault("GT_CACHE_ROOT", tempfile.mkdtemp(prefix="cai-gt-cache-"))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

import cai  # noqa: E402
import gt4py.next as gtx  # noqa: E402
import gt4py.storage as gt_storage  # noqa: E402
from gt4py.cartesian import gtscript  # noqa: E402
from gt4py.cartesian.gtscript import FORWARD, PARALLEL, Field, computation, interval  # noqa: E402
from gt4py.storage.cartesian import layout_registry  # noqa: E402
from gt4py.storage.cartesian.utils import allocate_cpu  # noqa: E402

RNG = np.random.default_rng(7)


def filled(shape, **kw):
    s = cai.zeros(shape, **kw)
    s.to_numpy()[...] = RNG.random(shape)
    return s


@gtscript.stencil(backend="numpy")
def laplacian(inp: Field[np.float64], out: Field[np.float64]):
    with computation(PARALLEL), interval(...):
        out = -4.0 * inp[0, 0, 0] + inp[1, 0, 0] + inp[-1, 0, 0] + inp[0, 1, 0] + inp[0, -1, 0]


def lap_ref(a):
    return -4 * a[1:-1, 1:-1] + a[2:, 1:-1] + a[:-2, 1:-1] + a[1:-1, 2:] + a[1:-1, :-2]


@pytest.mark.parametrize("defaults", [None, "numpy", "gt:cpu_ifirst", "gt:cpu_kfirst", "dace:cpu", "gtx86"])
def test_a_laplacian_on_storages_with_halos_needs_no_origin(defaults):
    """GT4Py reads the origin from `__gt_origin__` (the halo's start): before cai had it, the
    call raised "Origin for field inp too small"."""
    shape = (9, 8, 3)
    inp = filled(shape, halo=(1, 1, 0), defaults=defaults)
    out = cai.full(shape, -1.0, halo=(1, 1, 0), defaults=defaults)
    assert inp.__gt_origin__ == (1, 1, 0) and inp.__gt_dims__ == ("I", "J", "K")
    laplacian(inp, out)
    got = out.to_numpy()
    np.testing.assert_allclose(got[1:-1, 1:-1], lap_ref(inp.to_numpy()))
    assert (got[0] == -1).all() and (got[:, 0] == -1).all(), "the lower halo is not written"


def test_asymmetric_halos_and_the_upper_halo_through_the_domain():
    """GT4Py has no upper halo: its domain runs to the end of the field unless given, so a
    stencil with no upper extent writes the upper halo; `domain=` excludes it."""

    @gtscript.stencil(backend="numpy")
    def copy(inp: Field[np.float64], out: Field[np.float64]):
        with computation(PARALLEL), interval(...):
            out = inp

    shape = (7, 6, 4)
    inp = filled(shape, halo=((2, 1), (1, 2), (0, 1)))
    out = cai.full(shape, -1.0, halo=((2, 1), (1, 2), (0, 1)))
    assert inp.__gt_origin__ == (2, 1, 0)
    domain = tuple(n - lo - hi for n, (lo, hi) in zip(shape, inp.halo))
    copy(inp, out, domain=domain)
    got, a = out.to_numpy(), inp.to_numpy()
    np.testing.assert_array_equal(got[2:-1, 1:-2, 0:-1], a[2:-1, 1:-2, 0:-1])
    mask = np.ones(shape, bool)
    mask[2:-1, 1:-2, 0:-1] = False
    assert (got[mask] == -1).all(), "no halo point written"


def test_a_forward_stencil_keeps_to_the_compute_domain():
    @gtscript.stencil(backend="numpy")
    def cumsum(inp: Field[np.float64], out: Field[np.float64]):
        with computation(FORWARD), interval(0, 1):
            out = inp
        with computation(FORWARD), interval(1, None):
            out = out[0, 0, -1] + inp

    shape = (5, 4, 6)
    inp = filled(shape, halo=(1, 1, 0))
    out = cai.full(shape, -1.0, halo=(1, 1, 0))
    cumsum(inp, out)
    got = out.to_numpy()
    np.testing.assert_allclose(got[1:, 1:], np.cumsum(inp.to_numpy()[1:, 1:], axis=2))
    assert (got[0] == -1).all() and (got[:, 0] == -1).all()


@pytest.mark.parametrize("shape", [(4, 5, 6), (5, 4, 5)])
def test_a_kji_storage_is_read_by_its_dims(shape):
    """`dims="KJI"`: GT4Py transposes by `__gt_dims__` (before, a (4, 5, 6) storage was an
    error and a (5, 4, 5) one silently wrong)."""

    @gtscript.stencil(backend="numpy")
    def ramp(out: Field[np.float64]):
        with computation(PARALLEL), interval(...):
            out = 1.0

    @gtscript.stencil(backend="numpy")
    def shift_i(inp: Field[np.float64], out: Field[np.float64]):
        with computation(PARALLEL), interval(...):
            out = inp[1, 0, 0] - inp[0, 0, 0]

    k, j, i = shape
    inp = cai.zeros(shape, dims="KJI")
    inp.to_numpy()[...] = np.arange(i)[None, None, :] * 10.0  # varies along I, the last axis
    out = cai.zeros(shape, dims="KJI")
    shift_i(inp, out, domain=(i - 1, j, k))
    np.testing.assert_array_equal(out.to_numpy()[:, :, : i - 1], 10.0)
    ramp(out)
    assert (out.to_numpy() == 1.0).all()
    # With halos: GT4Py 1.1.12 reorders the axes by `__gt_dims__` but takes `__gt_origin__`
    # as it comes, so storages give it in I, J, K order.
    h = cai.zeros(shape, dims="KJI", halo=((2, 0), (0, 0), (1, 0)))
    assert h.__gt_origin__ == (1, 0, 2)
    ramp(h)
    a = h.to_numpy()
    assert (a[:2] == 0).all() and (a[:, :, :1] == 0).all() and (a[2:, :, 1:] == 1).all()


@gtscript.stencil(backend="numpy")
def ones(out: Field[np.float64]):
    with computation(PARALLEL), interval(...):
        out = 1.0


@gtscript.stencil(backend="numpy")
def ones_vec(out: Field[(np.float64, (2,))]):
    with computation(PARALLEL), interval(...):
        out[0, 0, 0][0] = 1.0
        out[0, 0, 0][1] = 1.0


@pytest.mark.parametrize("dims", ["IJK", "JIK", "IKJ", "KIJ", "JKI", "KJI", "0IJK", "K0JI"])
def test_any_dims_order_with_halos_needs_no_origin(dims):
    """The stencil writes exactly the storage's compute domain, whatever the order of its
    dims (only "IJK" did before the origin was given in GT4Py's order)."""
    extent = {"I": 5, "J": 6, "K": 4, "0": 2}
    lower = {"I": 1, "J": 2, "K": 1, "0": 0}
    shape = tuple(extent[d] for d in dims)
    halo = tuple((lower[d], 0) for d in dims)
    s = cai.zeros(shape, dims=dims, halo=halo)
    (ones_vec if "0" in dims else ones)(s)
    want = np.zeros(shape)
    want[tuple(slice(lo, None) for lo, _ in halo)] = 1.0
    np.testing.assert_array_equal(s.to_numpy(), want)


def test_data_dimensions_as_gt4py_lays_them_out():
    @gtscript.stencil(backend="numpy")
    def pick(vec: Field[(np.float64, (3,))], out: Field[np.float64]):
        with computation(PARALLEL), interval(...):
            out = vec[0, 0, 0][0] + 10 * vec[0, 0, 0][2]

    shape = (4, 5, 6, 3)
    vec = filled(shape, dims="IJK0", defaults="gt:cpu_kfirst")
    ref = gt_storage.zeros(shape, np.float64, backend="gt:cpu_kfirst", dimensions="IJK0")
    assert vec.strides == ref.strides == (240, 48, 8, 960)
    out = cai.zeros(shape[:3])
    pick(vec, out)
    v = vec.to_numpy()
    np.testing.assert_allclose(out.to_numpy(), v[..., 0] + 10 * v[..., 2])


def test_gt4py_fields_are_read_with_their_dims_and_origin():
    I, J = gtx.Dimension("I"), gtx.Dimension("J")
    f = gtx.as_field(gtx.domain({I: (-1, 4), J: (0, 3)}), np.arange(15.0).reshape(5, 3))
    s = cai.as_storage(f)
    assert (s.dims, s.halo, s.shape) == (("I", "J"), ((1, 0), (0, 0)), (5, 3))
    assert np.shares_memory(s.to_numpy(), f.ndarray), "zero-copy"
    v = cai.gt_data(f)
    assert (v.dims, v.halo) == (["I", "J"], [(1, 0), (0, 0)])
    c = cai.storage(f)  # a copy keeps them
    assert (c.dims, c.halo) == (("I", "J"), ((1, 0), (0, 0)))
    assert cai.zeros_like(f).halo == ((1, 0), (0, 0))
    # A round trip: GT4Py's storage helpers read cai's storages.
    assert gt_storage.from_array(s, backend="numpy").shape == (5, 3)


# ---------------------------------------------------------------- presets against GT4Py's allocator

GT4PY_NAMES = {"gtx86": "gt:cpu_kfirst", "gtcuda": "gt:gpu"}
PRESETS = sorted(set(layout_registry.REGISTRY) | set(GT4PY_NAMES))


def test_every_gt4py_backend_has_a_preset():
    for name in layout_registry.REGISTRY:
        cai.zeros((2, 2, 2), defaults=name, device=None)


@st.composite
def specs(draw):
    cart = draw(st.sampled_from(["I", "J", "K", "IJ", "IK", "JK", "IJK"]))
    ndata = draw(st.integers(0, 2))
    dims = list(cart) + [str(d) for d in range(ndata)]
    shape = tuple(draw(st.integers(1, 7)) for _ in dims)
    aligned = tuple(draw(st.integers(0, n - 1)) for n in shape)
    dtype = draw(st.sampled_from(["f8", "f4", "i2", "u1", "c16"]))
    preset = draw(st.sampled_from(PRESETS))
    return dims, shape, aligned, np.dtype(dtype), preset


@settings(max_examples=300, deadline=None)
@given(specs())
def test_cai_allocates_as_gt4py_for_every_preset_that_names_a_backend(spec):
    dims, shape, aligned, dtype, preset = spec
    info = layout_registry.from_name(GT4PY_NAMES.get(preset, preset))
    s = cai.zeros(shape, dtype, defaults=preset, dims=dims, aligned_index=aligned, device=None)
    # GT4Py's own layout and alignment for the backend (in items, times the item size)...
    layout = info["layout_map"](tuple(dims))
    assert s.layout == tuple(int(x) for x in layout)
    alignment = info["alignment"] * dtype.itemsize
    assert s.alignment_size == (1 if info["alignment"] == 1 else alignment)
    # ... and its allocator's strides and aligned address.
    _, ref = allocate_cpu(shape, layout, dtype, alignment, aligned)
    assert s.strides == ref.strides
    address = s.__array_interface__["data"][0] + sum(i * st for i, st in zip(aligned, s.strides))
    assert address % alignment == 0
