//! cust 0.3 (feature `cust`): its device memory types as [`DeviceMemory`] (they own
//! device-accessible allocations, so a derived struct holding one exports it without any unsafe
//! code), and its streams as exported streams.

use std::sync::Arc;

use cust::memory::{DeviceBox, DeviceBuffer, DeviceCopy, DeviceSlice, UnifiedBuffer};
use cust::stream::Stream as CuStream;

use super::ExportStream;
use super::stream::from_raw_handle;
use crate::element::Element;
use crate::memory::DeviceMemory;
use crate::stream::{AsStream, Stream};

// SAFETY: a DeviceBuffer owns `len()` items at `as_device_ptr()` (null when empty) until
// dropped. (Not DeviceSlice: cust's slices are `Copy` and borrow nothing, so one outlives the
// buffer it was taken from; a view of part of a buffer is a RawDeviceMemory, whose unsafe
// constructor takes that promise.)
unsafe impl<T: Element + DeviceCopy> DeviceMemory for DeviceBuffer<T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        self.as_device_ptr().as_raw()
    }
    fn len(&self) -> usize {
        DeviceSlice::len(self)
    }
}

// SAFETY: a DeviceBox owns one item of device memory at `as_device_ptr()` until dropped.
unsafe impl<T: Element + DeviceCopy> DeviceMemory for DeviceBox<T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        self.as_device_ptr().as_raw()
    }
    fn len(&self) -> usize {
        1
    }
}

// SAFETY: a UnifiedBuffer owns `len()` items of managed memory, addressable from host and
// device at the same address, until dropped (a dangling, never-dereferenced address when
// empty; the export then writes 0).
unsafe impl<T: Element + DeviceCopy> DeviceMemory for UnifiedBuffer<T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        self.as_slice().as_ptr() as usize as u64
    }
    fn len(&self) -> usize {
        self.as_slice().len()
    }
}

/// A cust stream exports its handle. The struct holding it keeps it alive, so the exported
/// stream lives as long as the object (the spec's Lifetime rule).
impl AsStream for CuStream {
    fn cai_stream(&self) -> Option<Stream> {
        Some(from_raw_handle(self.as_inner().cast()))
    }
    fn live_stream(&self) -> Option<crate::stream::LiveStream<'_>> {
        // SAFETY: cust destroys its stream only when `self` is dropped, after the borrow.
        Some(unsafe { crate::stream::LiveStream::new(from_raw_handle(self.as_inner().cast())) })
    }
}

impl From<CuStream> for ExportStream {
    fn from(s: CuStream) -> Self {
        ExportStream::Owned(Arc::new(s))
    }
}

impl From<Arc<CuStream>> for ExportStream {
    fn from(s: Arc<CuStream>) -> Self {
        ExportStream::Owned(s)
    }
}
