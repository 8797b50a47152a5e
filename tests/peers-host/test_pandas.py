"""pandas against cai: a `Series` (1-d) or `DataFrame` (2-d) over every producer. pandas
reads its own types and NumPy's arrays as arrays, and everything else as a list-like (through
`__array__` where there is one): the values come out right, shared or copied as it likes
(`test_list_likes` shows how), and what it refuses of NumPy (other dimensionalities,
bfloat16...) is its limit. cai reads no pandas object directly: pandas exports no array
protocol (`to_numpy()` is the way)."""

import numpy as np
import pandas as pd
import pytest

import cai
from grid import case_ids, np_address, takes


@pytest.mark.parametrize(
    "case", [c for c in case_ids() if not c.endswith("zero-size")], indirect=True
)
def test_takes(case):
    ndim = case.expected.ndim

    def frame(o):
        return pd.DataFrame(o, copy=False) if ndim == 2 else pd.Series(o, copy=False)

    # pandas' copy-on-write makes every `to_numpy()` read-only: writability says nothing.
    takes("pandas", frame, case, to_numpy=lambda p: p.to_numpy())


def test_list_likes():
    """What pandas does with an array that is not NumPy's: `Series(storage)` reads
    `__array__` and shares the storage's memory, as it shares a NumPy array's (a write to the
    `Series` is the storage's; a read-only storage refuses it); a view, without `__array__`, is copied item by item; a `DataFrame` of any
    of them is built from a list of rows, so a zero-size (0, 3) one has no columns either.
    `pd.DataFrame(np.asarray(obj))` is NumPy's array and pandas' array path, zero-copy."""
    s = cai.storage(np.arange(5.0))
    ser = pd.Series(s, copy=False)
    assert np_address(ser.to_numpy()) == np_address(np.asarray(s))
    ser.iloc[0] = 99.0
    assert np.asarray(s)[0] == 99.0
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pd.Series(cai.as_storage(frozen), copy=False).iloc[0] = 7.0
    assert frozen[0] == 0.0
    v = cai.as_host_array(np.arange(5.0))
    assert np_address(pd.Series(v, copy=False).to_numpy()) != v.ptr
    empty = cai.zeros((0, 3))
    assert pd.DataFrame(empty).shape == (0, 0)
    assert pd.DataFrame(np.asarray(empty)).shape == (0, 3)
    with pytest.raises(TypeError):
        cai.as_host_array(pd.Series(np.arange(3.0)))
