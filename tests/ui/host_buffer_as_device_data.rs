use cai_runtime::CudaArrayInterface;

#[derive(CudaArrayInterface)]
struct Samples {
    #[cai(data)]
    values: Vec<f32>,
}

fn main() {}
