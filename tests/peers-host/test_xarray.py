"""xarray against cai: a `DataArray` over every producer, and cai reading `DataArray`s
(GDP-3's default xarray data interface: `gt_data`, `as_storage`, with the dims)."""

import numpy as np
import pytest
import xarray as xr

import cai
from grid import DTYPES, case_ids, gives, gives_table, np_address, numpy_layout, over_gives, takes


@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case):
    takes("xarray", xr.DataArray, case, to_numpy=lambda d: d.values,
          addr=lambda d: np_address(d.values), writable=lambda d: d.values.flags.writeable)


def dims(n):
    return ("I", "J", "K")[:n]


GIVES = gives_table(gt_data=np.asarray, as_storage=np.asarray)


@over_gives(GIVES)
def test_gives(dname, layout, how):
    def make():
        _, ref = numpy_layout(DTYPES[dname], layout)
        d = xr.DataArray(ref, dims=dims(ref.ndim))
        return d, ref.copy(), np_address(d.values), not ref.flags.writeable

    gives("xarray", make, *GIVES[how])


@pytest.mark.parametrize("dname", ["float64", "bfloat16", "int16"])
def test_gives_dims(dname):
    """The `DataArray`'s dims become the storage's and the view's."""
    ref = np.arange(24).astype(DTYPES[dname]).reshape(2, 3, 4).transpose(2, 0, 1)
    d = xr.DataArray(ref, dims=("K", "I", "J"))
    assert cai.gt_data(d).dims == ["K", "I", "J"]
    s = cai.as_storage(d)
    assert s.dims == ("K", "I", "J") and s.dtype == ref.dtype
    assert np_address(np.asarray(s)) == np_address(ref)
