use cai_runtime::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Point<T> {
    x: T,
    y: T,
}

fn main() {}
