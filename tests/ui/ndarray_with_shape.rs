use cai_runtime::ArrayInterface;
use ndarray::Array2;

// An ndarray array carries its own shape and strides: naming a shape too is a mistake.
#[derive(ArrayInterface)]
#[cai(shape = [2, 3])]
struct Grid {
    #[cai(data)]
    values: Array2<f64>,
}

// Flat memory with a shape is fine.
#[derive(ArrayInterface)]
#[cai(shape = [2, 3])]
struct Flat {
    #[cai(data)]
    values: Vec<f64>,
}

fn main() {
    let _ = Grid { values: Array2::zeros((2, 3)) }.array_interface();
    let _ = Flat { values: vec![0.0; 6] }.array_interface();
}
