"""The second half of scripts/pgo-wheel.sh's training: the exchanges a program repeats, each
many times, on the instrumented wheel (after the test suite, which reaches every path but runs
the everyday ones only as often as any other).

A profile weighs a path by how often it ran. In the test suite the everyday exchanges (a DLPack
export of a storage, an import of an ndarray, a table exchange) run about as often as the
error paths around them, and the build then treats them alike. Here they run as a program runs
them: over and over, over arrays of several element types, dimensionalities and layouts (so that
no one shape is what the profile learns), from Python and through the Rust hooks of the
`testing` feature, which the instrumented wheel always has.

Run by scripts/pgo-wheel.sh; by hand: PYTHONPATH=<instrumented wheel> .venv/bin/python
scripts/pgo-train.py [REPEATS].
"""

import sys

import numpy as np

import cai
import cai.examples

DTYPES = ("float64", "float32", "int64", "int32", "uint8", "bool", "complex128", "float16")
SHAPES = ((), (7,), (64, 32), (3, 4, 5), (2, 3, 4, 5))


def arrays():
    """NumPy arrays and cai storages of every dtype and shape; strided and transposed views."""
    for dtype in DTYPES:
        for shape in SHAPES:
            a = np.zeros(shape, dtype=dtype)
            yield a, cai.zeros(shape, dtype=dtype)
            if a.ndim >= 2:
                yield a.T, None
                yield a[::2], None


def main(repeats):
    hooks = cai._native
    try:
        import tvm_ffi
        from tvm_ffi.core import DLTensorTestWrapper
    except ImportError:
        tvm_ffi = None
    for a, s in arrays():
        for _ in range(repeats):
            cai.from_dlpack(a)
            cai.as_host_array(a)
            if s is not None:
                np.from_dlpack(s)
                cai.from_dlpack(s)
                s.__dlpack__(max_version=(1, 3))
                np.asarray(s)
                if tvm_ffi is not None:
                    tvm_ffi.from_dlpack(s)
        if tvm_ffi is not None and a.flags.c_contiguous:
            w = DLTensorTestWrapper(tvm_ffi.from_dlpack(a))
            for _ in range(repeats):
                cai.from_dlpack(w)
            hooks._with_dlpack_ns(w, repeats)
        hooks._import_dlpack_ns(a, repeats)
        if s is not None:
            hooks._with_dlpack_ns(s, repeats)
    # The Rust-side typed view (the hook reads float64 matrices) and the derived classes.
    hooks._with_dlpack_array_ns(cai.zeros((64, 32)), 50 * repeats)
    g = cai.examples.Grid(64, 32)
    for _ in range(50 * repeats):
        np.from_dlpack(g)
        np.asarray(g)
        g.__array_interface__
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
