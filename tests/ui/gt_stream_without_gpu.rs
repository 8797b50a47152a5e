use cai_gt::GtDataInterface;
use cai_runtime::Stream;

#[derive(GtDataInterface)]
struct Field {
    #[cai(host)]
    values: Vec<f64>,
    #[cai(stream)]
    stream: Option<Stream>,
}

fn main() {}
