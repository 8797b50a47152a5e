"""Apache TVM FFI against cai: `tvm_ffi.from_dlpack` of every producer (DLPack, or cai's C
exchange table), and cai's imports of tvm-ffi tensors made from NumPy arrays in each layout."""

import numpy as np
import pytest
import tvm_ffi

import cai
from grid import DTYPES, case_ids, gives, gives_table, numpy_layout, over_gives, takes


def to_numpy(t):
    try:
        return np.from_dlpack(t)
    except RuntimeError:  # "Unsupported dtype in DLTensor": NumPy's import knows no bfloat16
        return np.asarray(cai.from_dlpack(t))


@pytest.mark.parametrize("case", case_ids(), indirect=True)
def test_takes(case):
    takes("tvm-ffi", tvm_ffi.from_dlpack, case, to_numpy=to_numpy,
          addr=lambda t: t.data_ptr(), writable=lambda t: to_numpy(t).flags.writeable)


GIVES = gives_table(from_dlpack=np.from_dlpack, as_storage=np.from_dlpack, gt_data=np.from_dlpack)


@over_gives(GIVES)
def test_gives(dname, layout, how):
    def make():
        _, ref = numpy_layout(DTYPES[dname], layout)
        try:
            t = tvm_ffi.from_dlpack(ref)
        except Exception as e:
            pytest.xfail(f"tvm-ffi's own limit: it does not take this NumPy array ({e})"[:300])
        return t, ref.copy(), t.data_ptr(), False

    gives("tvm-ffi", make, *GIVES[how])
