use cai_runtime::Element;

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Nothing {}

fn main() {}
