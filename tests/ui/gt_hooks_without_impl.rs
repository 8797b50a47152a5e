use cai_gt::GtDataInterface;

#[derive(GtDataInterface)]
#[cai(hooks)]
struct Field {
    #[cai(host)]
    values: Vec<f64>,
}

fn main() {}
