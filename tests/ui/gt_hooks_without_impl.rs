use cai_runtime::GtDataInterface;

#[derive(GtDataInterface)]
#[cai(hooks)]
struct Field {
    #[cai(host)]
    values: Vec<f64>,
}

fn main() {}
