// Safe code cannot make a storage over an address it chose: a storage's memory comes from
// `Storage::allocate` or from `unsafe fn wrap_foreign`, whose caller vouches for it. Nor an
// element type that skips `ElementType::new`'s refusal of Python objects.
use cai_gt::{Buffers, DeviceBufferHandle, ElementType, Managed, Side, StorageDevice};
use cai_runtime::TypeStr;

fn main() {
    let device = DeviceBufferHandle {
        ptr: 0xdead_0000,
        len: 1 << 20,
        keep: Box::new(()),
    };
    let _ = Buffers {
        host: None,
        device: Some(Side {
            buffer: device,
            origin: 0,
        }),
        span: 1 << 20,
        items: None,
        sync: None,
        device_kind: StorageDevice::Gpu,
        managed: Managed::None,
        readonly: false,
    };
    let _ = ElementType {
        typestr: TypeStr::parse("|O").unwrap(),
        descr: None,
    };
}
