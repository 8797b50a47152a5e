use cai_runtime::{GtDataInterface, Stream};

#[derive(GtDataInterface)]
struct Field {
    #[cai(host)]
    values: Vec<f64>,
    #[cai(stream)]
    stream: Option<Stream>,
}

fn main() {}
