use cai_gt::GtDataInterface;

#[derive(GtDataInterface)]
#[cai(dims = "IJK")]
struct Field {
    values: Vec<f64>,
    shape: [usize; 3],
}

fn main() {}
