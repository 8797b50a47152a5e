use cai_runtime::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Marker {
    tag: [u8; 0],
}

fn main() {}
