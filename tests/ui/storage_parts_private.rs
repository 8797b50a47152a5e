// The parts of a storage's buffers, and an element type that would skip
// `ElementType::new`'s refusal of Python objects, cannot be written as literals either.
use cai_gt::{DeviceBufferHandle, ElementType, Side};
use cai_runtime::TypeStr;

fn main() {
    let device = DeviceBufferHandle {
        ptr: 0xdead_0000,
        len: 1 << 20,
        device_id: 0,
        keep: Box::new(()),
    };
    let _ = Side {
        buffer: device,
        origin: 0,
    };
    let _ = ElementType {
        typestr: TypeStr::parse("|O").unwrap(),
        descr: None,
    };
}
