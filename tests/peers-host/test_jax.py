"""JAX (CPU) against cai: `jnp.asarray`, `jnp.array` and `jax.dlpack.from_dlpack` of every
producer, cai's imports of JAX arrays (immutable: imported read-only), and `device_put`, which
takes JAX's and NumPy's arrays only."""

import jax
import jax.dlpack
import jax.numpy as jnp
import numpy as np
import pytest

import cai
from grid import DTYPES, case_ids, gives, gives_table, np_address, np_interface, numpy_layout, over_gives, takes

jax.config.update("jax_enable_x64", True)  # int64/float64 stay themselves, as in NumPy


def jax_address(x):
    return x.unsafe_buffer_pointer()


TAKES = {
    "asarray": jnp.asarray,
    "array": jnp.array,
    "from_dlpack": jax.dlpack.from_dlpack,
}


@pytest.mark.parametrize("how", TAKES)
@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case, how):
    # JAX's arrays are immutable (nothing to check of writability); `from_dlpack` shares
    # memory aligned to 64 bytes and copies the rest, NumPy's as well.
    takes("JAX", TAKES[how], case, addr=jax_address, aligned=64)


def test_device_put_takes_no_foreign_array():
    """`jax.device_put` accepts JAX's and NumPy's arrays only (its own limit): a cai storage
    is refused, and `jnp.asarray(storage)` (above) is the way in."""
    s = cai.storage(np.arange(4.0))
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        jax.device_put(s)
    np.testing.assert_array_equal(jax.device_put(np.asarray(s)), np.arange(4.0))


# JAX's arrays are dense and in C order: its layouts are these.
JAX_LAYOUTS = ["1-d", "C", "0-d", "zero-size"]
GIVES = gives_table(from_dlpack=np.from_dlpack, as_storage=np.asarray, gt_data=np.asarray, as_host_array=np_interface)


@over_gives(GIVES, JAX_LAYOUTS)
def test_gives(dname, layout, how):
    def make():
        _, ref = numpy_layout(DTYPES[dname], layout)
        x = jnp.asarray(ref)
        assert x.dtype == ref.dtype
        return x, ref.copy(), jax_address(x), True

    gives("JAX", make, *GIVES[how])


def test_gives_a_transposed_array_as_jax_lays_it_out():
    """A JAX transpose is a new dense array: cai reads its own layout, C order."""
    x = jnp.arange(12.0).reshape(3, 4).T
    v = cai.from_dlpack(x)
    assert v.strides == (24, 8) and np_address(np.asarray(v)) == jax_address(x)
    np.testing.assert_array_equal(np.asarray(v), np.arange(12.0).reshape(3, 4).T)
