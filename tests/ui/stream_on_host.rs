use cai_runtime::{ArrayInterface, Stream};

#[derive(ArrayInterface)]
#[cai(version = 2)]
struct HostQueued {
    #[cai(data)]
    buf: Vec<f32>,
    #[cai(stream)]
    stream: Stream,
}

fn main() {}
