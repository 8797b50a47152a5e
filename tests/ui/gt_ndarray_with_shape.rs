use cai_gt::GtDataInterface;
use ndarray::Array3;

// An ndarray host buffer carries its own shape and strides: a `shape` beside it is a mistake
// (the layout keys apply to both buffers of a GDP-3 field).
#[derive(GtDataInterface)]
#[cai(shape = [2, 3, 4], dims = "IJK")]
struct Field {
    #[cai(host)]
    values: Array3<f64>,
}

fn main() {
    let _ = Field { values: Array3::zeros((2, 3, 4)) }.gt_data_interface();
}
