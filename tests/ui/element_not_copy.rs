use cai_runtime::Element;

#[derive(Element)]
#[repr(C)]
struct Point {
    x: f32,
    y: f32,
}

fn main() {}
