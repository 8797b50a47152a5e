use cai_runtime::GtDataInterface;

#[derive(GtDataInterface)]
struct Field {
    #[cai(data)]
    values: Vec<f64>,
}

fn main() {}
