use cai_runtime::ArrayInterface;

// `no_dlpack` leaves DLPack out of the methods `python` adds: alone it says nothing.
#[derive(ArrayInterface)]
#[cai(no_dlpack)]
struct Samples {
    #[cai(data)]
    values: Vec<f32>,
}

fn main() {}
