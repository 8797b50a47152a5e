use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Image {
    pixels: RawDeviceMemory<u8>,
    #[cai(shape)]
    dims: [usize; 2],
}

fn main() {}
