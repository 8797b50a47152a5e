"""dask against cai: `dask.array.from_array` of every producer (computed back), chunked
reductions over a storage with halos and over a view, and a `dask.distributed` cluster of two
worker processes mapping a function over chunks held in storages, which travel pickled."""

import pytest
import dask
import dask.array as da

from grid import case_ids, takes


@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case):
    with dask.config.set(scheduler="synchronous"):
        takes("dask", lambda o: da.from_array(o, chunks=2), case, to_numpy=lambda d: d.compute())
