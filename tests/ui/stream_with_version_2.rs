use cai_runtime::{CudaArrayInterface, RawDeviceMemory, Stream};

#[derive(CudaArrayInterface)]
#[cai(version = 2)]
struct Queued {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(stream)]
    stream: Stream,
}

fn main() {}
