use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Weights {
    #[cai(data)]
    values: RawDeviceMemory<half::bf16>,
}

fn main() {}
