"""NumPy against cai: `asarray` (which reads `__array_struct__`) and `from_dlpack` of every
producer, and cai's four imports of NumPy arrays, over the grid (grid.py)."""

import numpy as np
import pytest

import cai
from grid import DTYPES, case_ids, gives, gives_table, np_address, np_interface, numpy_layout, over_gives, takes

TAKES = {"asarray": np.asarray, "from_dlpack": np.from_dlpack}


@pytest.mark.parametrize("how", TAKES)
@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case, how):
    takes("NumPy", TAKES[how], case, addr=np_address, writable=lambda a: a.flags.writeable)


def host(a):
    return a.host


# cai's import, and NumPy's matching one (what decides whether a failure is NumPy's limit).
GIVES = gives_table(as_host_array=np_interface, from_dlpack=np.from_dlpack, as_storage=np.asarray, gt_data=np.asarray)


@over_gives(GIVES)
def test_gives(dname, layout, how):
    def make():
        _, ref = numpy_layout(DTYPES[dname], layout)
        return ref, ref.copy(), np_address(ref), not ref.flags.writeable

    gives("NumPy", make, *GIVES[how])


@pytest.mark.parametrize("dname", ["float64", "bfloat16", "bool"])
def test_takes_read_only_zero_size(dname):
    """A read-only storage with no items stays read-only in NumPy (its address is 0, as the
    protocols have it, which NumPy's `__array_struct__` import takes for "allocate")."""
    ref = np.zeros((0, 3), dtype=DTYPES[dname])
    ref.flags.writeable = False
    s = cai.as_storage(ref)
    assert s.__array_interface__["data"][1] is True
    a = np.asarray(s)
    assert a.shape == (0, 3) and a.dtype == ref.dtype
    assert not a.flags.writeable
