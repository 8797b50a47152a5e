use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(order = "row-major", vresion = 3)]
struct Everything {
    #[cai(data)]
    a: RawDeviceMemory<f32>,
    #[cai(data)]
    b: RawDeviceMemory<f32>,
    #[cai(shape = 3)]
    dims: [usize; 1],
}

// The fallback impl keeps this use from failing too: only the mistakes above are reported.
fn export(e: &Everything) {
    let _ = e.cuda_array_interface();
}

fn main() {}
