use cai_runtime::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
enum Color {
    Red,
    Green,
}

fn main() {}
