use cai_runtime::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Tagged {
    value: f64,
    tag: char,
}

fn main() {}
