//! Whose context a `DeviceAllocation` or `DriverStream` lives in, and that safe code cannot make
//! one outlive it (its drop makes the context current, then frees there: with a destroyed
//! context, undefined behaviour on a real driver). Contexts are made and dropped through cudarc
//! (feature `cudarc`), whose safe API does both: the emulated driver in CI, a GPU in the GPU
//! suite. One test, in a process of its own, so that no other test has retained device 0's
//! primary context first.

#![cfg(feature = "cudarc")]

use cai_runtime::cuda::{self, DeviceAllocation, DriverStream};
use cai_runtime::{DriverError, LiveStream, Stream};
use cudarc::driver::CudaContext;

#[test]
fn allocations_and_streams_never_outlive_their_context() {
    match cuda::init() {
        Err(e) if e.is_no_device() => {
            eprintln!("skipped: no CUDA device here ({e})");
            return;
        }
        r => r.expect("cuInit"),
    }
    // 1. The primary context, made current by cudarc (which retains it once, and releases it
    // when its `CudaContext` drops). What cai makes in it retains it too: cudarc's release does
    // not destroy it, and with it the allocation, under cai's feet.
    let primary = CudaContext::new(0).expect("primary context");
    let a = DeviceAllocation::new(64, false).expect("allocation in the primary context");
    let s = DriverStream::new(false).expect("stream in the primary context");
    // SAFETY: the allocation is this test's, 64 bytes; the context waits for the fill below.
    unsafe { cuda::memset_async(a.device_ptr(), 7, 64, Stream::LegacyDefault) }.unwrap();
    cuda::synchronize_stream(LiveStream::LEGACY_DEFAULT).unwrap();
    drop(primary);
    // SAFETY: the allocation is alive (it is ours, and its context is retained by cai).
    let bytes = unsafe { cuda::copy_to_host(a.device_ptr(), 64, s.stream()) }
        .expect("the allocation outlived cudarc's release of the primary context");
    assert_eq!(bytes, [7u8; 64]);
    drop(s);
    drop(a);

    // 2. A context of the caller's own (cuCtxCreate), which its owner destroys when it drops:
    // the safe constructors refuse it...
    let own = CudaContext::new_non_primary(0, 0).expect("a context of our own");
    own.bind_to_thread().expect("made current");
    assert_eq!(
        DeviceAllocation::new(64, false).unwrap_err(),
        DriverError::NOT_PRIMARY_CONTEXT
    );
    assert_eq!(
        DriverStream::new(false).unwrap_err(),
        DriverError::NOT_PRIMARY_CONTEXT
    );
    let msg = DriverError::NOT_PRIMARY_CONTEXT.to_string();
    assert!(msg.contains("not the device's primary context"), "{msg}");
    // ... and the unsafe ones take it, on the caller's word that it outlives what they make.
    // SAFETY: `own` is dropped after `b` and `t`.
    let (b, t) = unsafe {
        (
            DeviceAllocation::in_current_context(64, false).expect("allocation"),
            DriverStream::in_current_context(false).expect("stream"),
        )
    };
    // SAFETY: the allocation is this test's; the copy below is on the same stream.
    unsafe { cuda::memset_async(b.device_ptr(), 3, 64, t.stream()) }.unwrap();
    // SAFETY: as above.
    let bytes = unsafe { cuda::copy_to_host(b.device_ptr(), 64, t.stream()) }.unwrap();
    assert_eq!(bytes, [3u8; 64]);
    drop(t);
    drop(b);
    drop(own);

    // 3. cai never hands the driver back a context that was destroyed while its work ran: it
    // restores the context before from the driver's own stack, not from a handle it kept. A
    // context destroyed by the closure `with_device` runs...
    let own = CudaContext::new_non_primary(0, 0).expect("a context of our own");
    own.bind_to_thread().expect("made current");
    cuda::with_device(0, move || {
        drop(own);
        Ok::<(), DriverError>(())
    })
    .expect("nothing destroyed is made current again");
    // ... or by another thread while it was current on this one.
    let own = CudaContext::new_non_primary(0, 0).expect("a context of our own");
    own.bind_to_thread().expect("made current");
    std::thread::spawn(move || drop(own)).join().unwrap();
    let there =
        DeviceAllocation::on_device(0, 16, false).expect("allocated in the primary context");
    drop(there);

    // 4. Whatever the closure does to this thread's context stack, the context before it is
    // current after it: a context pushed and left (cuCtxCreate pushes), another bound.
    let current = || cudarc::driver::result::ctx::get_current().expect("cuCtxGetCurrent");
    let primary = CudaContext::new(0).expect("primary context");
    let before = current();
    let leaked = std::cell::RefCell::new(Vec::new());
    let push_one = || -> Result<(), DriverError> {
        let own = CudaContext::new_non_primary(0, 0).expect("a context of our own");
        // Left on the stack (and alive: its drop would destroy it, binding it first).
        leaked.borrow_mut().push(own);
        Ok(())
    };
    cuda::with_device(0, push_one).unwrap();
    assert_eq!(
        current(),
        before,
        "device 0, current already: a pushed context stayed"
    );
    if cuda::device_count().unwrap() >= 2 {
        cuda::with_device(1, push_one).unwrap();
        assert_eq!(current(), before, "device 1: a pushed context stayed");
        cuda::with_device(0, || {
            let _ = CudaContext::new(1).expect("device 1's primary context, bound");
            Ok::<(), DriverError>(())
        })
        .unwrap();
        assert_eq!(
            current(),
            before,
            "device 0: device 1's context stayed current"
        );
    } else {
        eprintln!("part 4 with two devices skipped: one device here");
    }
    for own in leaked.into_inner() {
        std::mem::forget(own);
    }
    drop(primary);
}
