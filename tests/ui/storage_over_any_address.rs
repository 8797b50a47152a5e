// Safe code cannot make a storage over an address it chose: a storage's memory comes from
// `Storage::allocate` or from `unsafe fn wrap_foreign`, whose caller vouches for it. Neither
// its buffers nor their parts can be written as literals (tests/ui/storage_parts_private.rs
// has the parts).
use cai_gt::{Buffers, Managed, StorageDevice};

fn main() {
    let _ = Buffers {
        host: None,
        device: None,
        span: 1 << 20,
        items: None,
        sync: None,
        device_kind: StorageDevice::Gpu,
        managed: Managed::None,
        readonly: false,
    };
}
