use cai_runtime::ArrayInterface;

#[derive(ArrayInterface)]
#[cai(python)]
struct Samples {
    #[cai(data)]
    values: Vec<f32>,
}

fn main() {}
