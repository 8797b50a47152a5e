// `#[cai(python)]` adds methods to a PyO3 class: without `#[pyclass]`, cai says so at `python`
// (PyO3's own errors about the methods follow).
use cai_runtime::ArrayInterface;

#[derive(ArrayInterface)]
#[cai(python, shape = [2])]
struct Grid {
    #[cai(data)]
    data: Vec<f64>,
}

fn main() {}
