// A class with `#[cai(python)]` and a `#[pymethods]` block of its own: PyO3 allows one block
// (without its `multiple-pymethods` feature), and the derive's is the first. The error points at
// `python`; the fix is `#[cai_runtime::pymethods(host)]` on the class's own block.
use cai_runtime::ArrayInterface;
use pyo3::prelude::*;

#[pyclass]
#[derive(ArrayInterface)]
#[cai(python, shape = [2])]
struct Grid {
    #[cai(data)]
    data: Vec<f64>,
}

#[pymethods]
impl Grid {
    fn total(&self) -> f64 {
        self.data.iter().sum()
    }
}

fn main() {}
