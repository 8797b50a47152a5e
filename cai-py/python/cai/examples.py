"""The example classes of cai's derives: PyO3 classes written as a user of the Rust crate
would write them (``cai-py/src/examples.rs`` is their source, the worked example to copy from).
The package's tests use them as producers.

- ``Grid(rows, cols, order="C")``: a float64 matrix NumPy reads and writes zero-copy
  (``#[derive(ArrayInterface)]``, with ``__array_struct__``);
- ``counts(n)``: a read-only uint32 ``Counts`` array (``#[cai(python)]``);
- ``DeviceMatrix(ptr, rows, cols, *, order, stream, readonly, owner)``: float32 device memory
  allocated elsewhere, exported through ``__cuda_array_interface__`` with its stream
  (``#[derive(CudaArrayInterface)]``);
- ``Buffer(nbytes, typestr, shape, strides=None, offset=0)``: host memory of any dtype and
  layout, its descriptor built at run time;
- ``Field(ni, nj, nk, halo=None)``: a field exporting ``__gt_data_interface__`` with hooks that
  record their calls (``#[derive(GtDataInterface)]``);
- ``total(a)``: the sum of a float64 array of any shape, read in Rust through a typed view;
- ``mesh(rows, cols, transposed=False)``: a float64 ``Mesh`` held in an ``ndarray::Array2``,
  exported with the array's own shape and strides;
- ``column_sums(a)`` and ``scale(a, factor)``: any host array (DLPack or
  ``__array_interface__``) as an ``ndarray`` view, read and written in Rust.
"""

from ._native import (
    Buffer,
    Counts,
    DeviceMatrix,
    Field,
    Grid,
    Mesh,
    column_sums,
    counts,
    mesh,
    scale,
    total,
)

__all__ = [
    "Buffer",
    "Counts",
    "DeviceMatrix",
    "Field",
    "Grid",
    "Mesh",
    "column_sums",
    "counts",
    "mesh",
    "scale",
    "total",
]
