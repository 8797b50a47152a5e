"""Benchmarks of the cai Python package, printed as ratios against references measured in the
same process (never asserted: timings vary by machine).

  (a) property access: `obj.__cuda_array_interface__` of a derived class, against NumPy's
      `ndarray.__array_interface__` for an array of the same shape (target <= 0.25x) and against
      a Python dict literal of the same content (target <= 1.5x);
  (b) import into a Rust view (`ForeignArray::<Host>::from_object`, timed in Rust) against
      `numpy.asarray(obj)` on an object exposing `__array_interface__` (target <= 0.5x); and,
      for reference, the same import called from Python (`cai.as_host_array(obj)`), which adds
      the call and a Python object around the view;
  (c) NumPy reading a derived class: `numpy.asarray(grid)`, which reads the generated
      `__array_struct__`, against `numpy.asarray` of an object holding the same
      `__array_interface__` dict, already built (what the dict costs NumPy alone).

Run: .venv/bin/python benches/python_bench.py
(with the wheel scripts/test.sh installs there: (b) times the import through `_import_ns`, a hook
of the cai-py feature `testing`, which that wheel has and a user's build has not).
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


def main():
    n = 200_000
    rows, cols = 64, 32
    a = np.zeros((rows, cols), dtype=np.float32)
    ptr = a.__array_interface__["data"][0]
    m = cai.examples.DeviceMatrix(ptr, rows, cols, stream=2, owner=a)
    g = cai.examples.Grid(rows, cols)

    ours = best("m.__cuda_array_interface__", n, m=m)
    # Memo misses: more distinct objects than the memo keeps, visited round-robin.
    many = [cai.examples.DeviceMatrix(ptr + 4 * i, rows, cols, stream=2, owner=a) for i in range(64)]
    uncached = best("for x in many: x.__cuda_array_interface__", n // 64, many=many) / 64
    loop_only = best("for x in many: x", n // 64, many=many) / 64
    uncached -= loop_only
    ours_host = best("g.__array_interface__", n, g=g)
    numpy_ai = best("a.__array_interface__", n, a=a)
    literal = best(
        "{'shape': (r, c), 'typestr': '<f4', 'descr': [('', '<f4')], 'data': (p, False), 'strides': None, 'version': 3, 'stream': 2}",
        n,
        r=rows,
        c=cols,
        p=ptr,
    )

    class Exposes:
        def __init__(self, arr):
            self.__array_interface__ = arr.__array_interface__
            self._keep = arr

    obj = Exposes(a)
    imp = best("cai.as_host_array(obj)", n // 4, cai=cai, obj=obj)
    hook = getattr(cai._native, "_import_ns", None)
    rust_only = None if hook is None else min(hook(obj, n // 4) for _ in range(7)) * 1e-9
    asarray = best("np.asarray(obj)", n // 4, np=np, obj=obj)
    numpy_reads = best("np.asarray(g)", n, np=np, g=g)

    class Ready:
        __array_interface__ = g.__array_interface__
        _keep = g

    numpy_reads_dict = best("np.asarray(ready)", n, np=np, ready=Ready())

    print(f"cai {cai.__version__}, {cai._native._build} wheel")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, shape ({rows}, {cols}) float32")
    print("(a) property access")
    print(f"    DeviceMatrix.__cuda_array_interface__  {ns(ours)}")
    print(f"    Grid.__array_interface__               {ns(ours_host)}")
    print(f"    numpy ndarray.__array_interface__      {ns(numpy_ai)}")
    print(f"    dict literal, same content             {ns(literal)}")
    print(f"    ratio vs NumPy:   {ours / numpy_ai:5.2f}x   (target <= 0.25x)")
    print(f"    ratio vs literal: {ours / literal:5.2f}x   (target <= 1.5x)")
    print(f"    memo misses (64 objects round-robin)   {ns(uncached)}   ratio vs NumPy {uncached / numpy_ai:5.2f}x")
    print("(b) import")
    if rust_only is None:
        print("    (no `testing` hooks in this build: the Rust-timed import is skipped)")
    else:
        print(f"    into a Rust view (from_object, in Rust) {ns(rust_only)}")
    print(f"    numpy.asarray(obj)                     {ns(asarray)}")
    if rust_only is not None:
        print(f"    ratio vs NumPy:   {rust_only / asarray:5.2f}x   (target <= 0.5x)")
    print(f"    from Python: cai.as_host_array(obj)    {ns(imp)}   ratio vs NumPy {imp / asarray:5.2f}x (adds the call and a Python view object)")
    print("(c) NumPy reading a derived class")
    print(f"    numpy.asarray(grid) (__array_struct__)  {ns(numpy_reads)}")
    print(f"    numpy.asarray of its dict, ready        {ns(numpy_reads_dict)}")
    print(f"    ratio: {numpy_reads / numpy_reads_dict:5.2f}x")


if __name__ == "__main__":
    main()
