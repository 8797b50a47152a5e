use cai_runtime::ArrayInterface;

#[derive(ArrayInterface)]
struct Wide {
    #[cai(data)]
    values: Vec<i128>,
}

fn main() {}
