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
- ``total(a)``: the sum of a 1-D float64 array read in Rust through a typed view.
"""

from ._native import Buffer, Counts, DeviceMatrix, Field, Grid, counts, total

__all__ = ["Buffer", "Counts", "DeviceMatrix", "Field", "Grid", "counts", "total"]
