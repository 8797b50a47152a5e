use cai_runtime::ArrayInterface;

#[derive(ArrayInterface)]
union Bits {
    f: f32,
    u: u32,
}

fn main() {}
