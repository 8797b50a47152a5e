use cai_gt::GtDataInterface;

#[derive(GtDataInterface)]
struct Field {
    #[cai(data)]
    values: Vec<f64>,
}

fn main() {}
