"""Python half of the demo (scripts/demo.sh): NumPy and a Rust-owned buffer share memory
zero-copy (the array interface, then DLPack), a foreign array is imported into a Rust view, and
the checker judges both."""

import numpy as np

import cai
import cai.examples

print("== NumPy reads and writes a Rust Vec<f64> zero-copy (#[derive(ArrayInterface)])")
grid = cai.examples.Grid(2, 3, order="F")
array = np.asarray(grid)
print("__array_interface__ =", grid.__array_interface__)
array[1, 2] = 42.0
print("NumPy wrote a[1, 2] = 42.0; Rust reads grid.get(1, 2) =", grid.get(1, 2))
grid.set(0, 0, -1.0)
print("Rust wrote (0, 0) = -1.0; NumPy sees", array.tolist())
print("same memory:", array.__array_interface__["data"][0] == grid.__array_interface__["data"][0])

print("== the same through DLPack: numpy.from_dlpack of a storage, cai.from_dlpack of NumPy's")
s = cai.zeros((2, 3))
d = np.from_dlpack(s)
d[0, 1] = 7.0
print("NumPy wrote through DLPack; the storage reads", np.asarray(s).tolist())
print("cai.from_dlpack(numpy array) ->", cai.from_dlpack(np.arange(6.0).reshape(2, 3)[:, ::-1]))

print("== a NumPy view imported into Rust, with its owner kept alive")
view = cai.as_host_array(np.arange(12.0).reshape(3, 4)[::-1, ::2])
print(view, "strides", view.strides, "item (0, 1) =", view.get([0, 1]))
print("Rust-side sum of a reversed slice:", cai.examples.total(np.arange(10.0)[::-2]))

print("== conformance check")
broken = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 2, "stream": 0}
for v in cai.check_descriptor(broken):
    print(" ", v)
report = cai.check(array)
print("NumPy array conforms:", bool(report), "errors:", [v.rule for v in report.errors])
