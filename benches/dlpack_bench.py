"""DLPack benchmarks of the cai Python package, printed as ratios against NumPy's own DLPack
measured in the same process (never asserted: timings vary by machine).

  (a) export: `numpy.from_dlpack(x)` of cai arrays (a derived class, `Grid`; a storage) against
      `numpy.from_dlpack` of a NumPy array of the same shape (target <= 1.0x);
  (b) import into a Rust view (`ForeignArray::<Host>::from_dlpack`, timed in Rust: the tensor
      NumPy's `__dlpack__` would export, read from the array's fields, the view and its drop)
      against `numpy.from_dlpack(numpy_array)` (target <= 0.5x); the same import from Python
      (`cai.from_dlpack(x)`, which adds the call and a Python object around the view: target
      <= 1.0x); and, for reference, an import that asks `__dlpack__` (of an ndarray subclass:
      the call, the capsule, the producer's deleter) and the import through
      `__array_interface__` (`cai.as_host_array(x)`).

  (c) the C exchange table (`__dlpack_c_exchange_api__`): `cai.from_dlpack` of a producer with
      one (a cai storage, read through the tensor it lends; a tvm-ffi tensor where tvm-ffi is
      installed) against `numpy.from_dlpack(numpy_array)` (P7, target <= 0.75x), and of a
      read-only cai storage, which lends none (its managed tensor, for reference); the Rust-side scoped import
      (`ForeignArray::with_dlpack`: a tensor cai's `dltensor_from_py_object_no_sync` lends; and
      tvm-ffi's, which lends none; `ForeignArray::with_dlpack_array`, the lent tensor read as an
      ndarray view, no import made) (target <= 0.3x); and `tvm_ffi.from_dlpack` of a cai storage against
      `tvm_ffi.from_dlpack` of tvm-ffi's own tensor (P8, target <= 1.0x).

Run: .venv/bin/python benches/dlpack_bench.py
(with the wheel scripts/test.sh installs there: (b) times the import through `_import_dlpack_ns`,
a hook of the cai-py feature `testing`, which that wheel has and a user's build has not).
"""

import sys
import timeit

import numpy as np

import cai
import cai.examples


def best(stmt, number, repeat=7, **ns):
    t = timeit.Timer(stmt, globals=ns)
    return min(t.repeat(repeat=repeat, number=number)) / number


def ns(seconds):
    return f"{seconds * 1e9:8.1f} ns"


def row(name, ours, ref, target=None):
    goal = f"   (target <= {target:.2f}x)" if target is not None else ""
    print(f"  {name:<58} {ns(ours)}  {ours / ref:5.2f}x{goal}")


def main():
    n = 100_000
    rows, cols = 64, 32
    a = np.zeros((rows, cols))
    g = cai.examples.Grid(rows, cols)
    s = cai.zeros((rows, cols))
    sub = a.view(type("Sub", (np.ndarray,), {}))
    from_dlpack = np.from_dlpack

    numpy_ref = best("from_dlpack(a)", n, from_dlpack=from_dlpack, a=a)
    print(f"cai {cai.__version__}, {cai._native._build} wheel")
    print(f"(a) export: against numpy.from_dlpack(numpy array) = {ns(numpy_ref)}")
    row("numpy.from_dlpack(Grid)  [derived class]", best("from_dlpack(g)", n, from_dlpack=from_dlpack, g=g), numpy_ref, 1.0)
    row("numpy.from_dlpack(cai.zeros(...))  [storage]", best("from_dlpack(s)", n, from_dlpack=from_dlpack, s=s), numpy_ref, 1.0)

    print(f"(b) import: against numpy.from_dlpack(numpy array) = {ns(numpy_ref)}")
    hook = getattr(cai._native, "_import_dlpack_ns", None)
    if hook is None:
        print("  (no `testing` hooks in this build: the Rust-timed import is skipped)")
    else:
        rust = min(hook(a, n) for _ in range(7)) * 1e-9
        row("ForeignArray::<Host>::from_dlpack(numpy array)  [in Rust]", rust, numpy_ref, 0.5)
        dunder = min(hook(sub, n) for _ in range(7)) * 1e-9
        row("ForeignArray::<Host>::from_dlpack(ndarray subclass)  [in Rust; __dlpack__]", dunder, numpy_ref)
    # What any import through `__dlpack__` pays before its own work: NumPy's export, called from
    # Python (a vectorcall, no keyword dict), its capsule made and freed.
    row("numpy_array.__dlpack__(max_version=(1, 3))  [the producer alone]", best("d(max_version=v)", n, d=a.__dlpack__, v=(1, 3)), numpy_ref)
    row("cai.from_dlpack(numpy array)  [from Python]", best("f(a)", n, f=cai.from_dlpack, a=a), numpy_ref, 1.0)
    row("cai.as_host_array(numpy array)  [__array_interface__]", best("f(a)", n, f=cai.as_host_array, a=a), numpy_ref)

    print(f"(c) the exchange table: against numpy.from_dlpack(numpy array) = {ns(numpy_ref)}")
    row("cai.from_dlpack(cai storage)  [cai's table]", best("f(s)", n, f=cai.from_dlpack, s=s), numpy_ref, 0.75)
    frozen = np.zeros((rows, cols))
    frozen.flags.writeable = False
    ro = cai.as_storage(frozen)  # lends nothing (read-only): its managed tensor is imported
    row("cai.from_dlpack(read-only cai storage)  [cai's table, managed tensor]", best("f(s)", n, f=cai.from_dlpack, s=ro), numpy_ref)
    with_hook = getattr(cai._native, "_with_dlpack_ns", None)
    if with_hook is not None:
        lent = min(with_hook(s, n)[0] for _ in range(7)) * 1e-9
        row("ForeignArray::with_dlpack(cai storage)  [in Rust; cai's table lends]", lent, numpy_ref, 0.3)
    typed_hook = getattr(cai._native, "_with_dlpack_array_ns", None)
    if typed_hook is not None:
        typed = min(typed_hook(s, n) for _ in range(7)) * 1e-9
        row("ForeignArray::with_dlpack_array::<f64, Ix2>(cai storage)  [in Rust; a scoped ndarray view]", typed, numpy_ref, 0.3)
    try:
        import tvm_ffi
    except ImportError:
        print("  (tvm-ffi is not installed: its rows are skipped)")
        return 0
    from tvm_ffi.core import DLTensorTestWrapper

    # tvm-ffi's one type with a table (tvm_ffi.Tensor has none: its __dlpack__ is used).
    w = DLTensorTestWrapper(tvm_ffi.from_dlpack(a))
    row("cai.from_dlpack(tvm-ffi's wrapper)  [tvm-ffi's table]", best("f(w)", n, f=cai.from_dlpack, w=w), numpy_ref, 0.75)
    if with_hook is not None:
        lent = min(with_hook(w, n)[0] for _ in range(7)) * 1e-9
        row("ForeignArray::with_dlpack(tvm-ffi's wrapper)  [in Rust; it lends none]", lent, numpy_ref, 0.3)
    tvm_ref = best("f(w)", n, f=tvm_ffi.from_dlpack, w=w)
    print(f"  against tvm_ffi.from_dlpack(tvm-ffi's wrapper) [its own table] = {ns(tvm_ref)}")
    row("tvm_ffi.from_dlpack(cai storage)  [cai's table]", best("f(s)", n, f=tvm_ffi.from_dlpack, s=s), tvm_ref, 1.0)
    row("tvm_ffi.from_dlpack(numpy array)  [__dlpack__]", best("f(a)", n, f=tvm_ffi.from_dlpack, a=a), tvm_ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
