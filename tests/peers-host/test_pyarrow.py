"""pyarrow against cai: `pa.array` and `pa.chunked_array` of every producer (pyarrow reads
NumPy's arrays and sequences: cai's storages and views are sequences to it, and a derived
class, which is neither, is refused as a NumPy array behind the same protocols is), and cai's
imports of pyarrow arrays (DLPack; a buffer through the buffer protocol)."""

import numpy as np
import pyarrow as pa
import pytest

import cai
from grid import DTYPES, case_ids, gives, gives_table, over_gives, takes


def to_numpy(a):
    return a.to_numpy(zero_copy_only=False)


TAKES = {"array": pa.array, "chunked_array": lambda o: pa.chunked_array([o])}


@pytest.mark.parametrize("how", TAKES)
@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case, how):
    # Arrow's arrays are immutable, and pyarrow shares memory with NumPy arrays alone.
    takes("pyarrow", TAKES[how], case, to_numpy=to_numpy)


def arrow_address(a):
    return a.buffers()[1].address + a.offset * a.type.bit_width // 8


PA_LAYOUTS = {"1-d": slice(None), "sliced": slice(2, 6), "zero-size": slice(0, 0)}
GIVES = gives_table(from_dlpack=np.from_dlpack, as_storage=np.from_dlpack, gt_data=np.from_dlpack)


@over_gives(GIVES, PA_LAYOUTS)
def test_gives(dname, layout, how):
    def make():
        ref = np.arange(8).astype(DTYPES[dname])
        try:
            a = pa.array(ref)
        except Exception as e:
            pytest.xfail(f"pyarrow's own limit: no Arrow type for {dname} ({e})"[:300])
        a = a[PA_LAYOUTS[layout]]
        return a, ref[PA_LAYOUTS[layout]].copy(), arrow_address(a), True

    gives("pyarrow", make, *GIVES[how])


def test_gives_a_buffer():
    """A pyarrow `Buffer` (the buffer protocol, read-only) wrapped as a storage, zero-copy."""
    data = np.arange(6.0)
    b = pa.py_buffer(data.tobytes())
    s = cai.as_storage(b)
    a = np.asarray(s)
    assert a.__array_interface__["data"][0] == b.address and not a.flags.writeable
    assert a.view(np.float64).tolist() == data.tolist()
    del b
    import gc

    gc.collect()
    assert np.asarray(s).view(np.float64).tolist() == data.tolist()
