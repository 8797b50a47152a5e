"""array-api-strict (the Array API standard, nothing more) against cai: `asarray` and
`from_dlpack` of every producer, and cai's imports of its arrays (DLPack)."""

import array_api_strict as xp
import numpy as np
import pytest

from grid import DTYPES, case_ids, gives, gives_table, np_address, numpy_layout, over_gives, takes


def inner(x):
    return x._array  # the NumPy array an array-api-strict array wraps


TAKES = {"asarray": xp.asarray, "from_dlpack": xp.from_dlpack}


@pytest.mark.parametrize("how", TAKES)
@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case, how):
    takes("array-api-strict", TAKES[how], case, to_numpy=inner,
          addr=lambda x: np_address(inner(x)), writable=lambda x: inner(x).flags.writeable)


GIVES = gives_table(from_dlpack=np.from_dlpack, as_storage=np.from_dlpack, gt_data=np.from_dlpack)


@over_gives(GIVES)
def test_gives(dname, layout, how):
    def make():
        _, ref = numpy_layout(DTYPES[dname], layout)
        try:
            x = xp.asarray(ref)
        except Exception as e:
            pytest.xfail(f"array-api-strict's own limit: {dname} is no Array API dtype ({e})"[:300])
        return x, ref.copy(), np_address(inner(x)), not ref.flags.writeable

    gives("array-api-strict", make, *GIVES[how])
