// What could put a view over memory too small for it, or write read-only memory, is the
// crate's own: a view over other buffers, a storage from a plan and buffers, a raw fill.
use cai_gt::Storage;

fn misuse(big: &Storage, small: &Storage) {
    let _ = big.on_buffers(small.buffers().clone());
    let _ = Storage::from_plan;
    let host = small.buffers().host().unwrap();
    host.buffer().fill([0isize].into_iter(), &[1]);
}

fn main() {}
