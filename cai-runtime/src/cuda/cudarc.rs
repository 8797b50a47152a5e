//! cudarc 0.19 (feature `cudarc`): its `CudaSlice<T>`, `CudaView<'_, T>` and `CudaViewMut<'_, T>`
//! as [`crate::DeviceMemory`], its `CudaStream` (and `Arc<CudaStream>`) as a derive's
//! `#[cai(stream)]` field.
//!
//! cudarc loads the driver itself, at run time, when one of its functions is first called; this
//! module only reads objects the caller made with it, so cai never loads cudarc's driver first.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceRepr};

use super::stream::{from_raw_handle, order_after};
use crate::element::Element;
use crate::memory::DeviceMemory;
use crate::stream::{AsStream, Stream, StreamError};

/// The device address of cudarc memory. cudarc hands it out for use on a stream, ordering that
/// stream after the memory's pending writes (events cudarc records on whatever stream wrote)
/// and recording a read when its guard drops: asked for on the memory's own stream.
fn address<T, M: DevicePtr<T>>(m: &M) -> u64 {
    let (ptr, _read) = m.device_ptr(m.stream());
    ptr
}

/// The export's half of the producer rule: [`address`] ordered the memory's own stream after
/// its pending writes; an exported stream other than that one waits for it (an event wait).
fn order_export<T, M: DevicePtr<T>>(m: &M, exported: Option<Stream>) -> Result<(), StreamError> {
    let own = from_raw_handle(m.stream().cu_stream().cast());
    match exported {
        Some(s) if s != own => Ok(order_after(s, own)?),
        _ => Ok(()),
    }
}

// SAFETY: a `CudaSlice<T>` owns `len()` items of `T` at its address, alive (and writable: it
// is cudarc's `Vec<T>` on the device) until it is dropped, which the exporting struct's
// lifetime bounds.
unsafe impl<T: Element + DeviceRepr> DeviceMemory for CudaSlice<T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        address(self)
    }
    fn len(&self) -> usize {
        cudarc::driver::DeviceSlice::len(self)
    }
    fn order_export(&self, exported: Option<Stream>) -> Result<(), StreamError> {
        order_export(self, exported)
    }
}

// SAFETY: a `CudaView<'_, T>` borrows `len()` items of its slice for its lifetime, during which
// the slice cannot be freed; it is cudarc's `&[T]`, so consumers are told not to write.
unsafe impl<T: Element + DeviceRepr> DeviceMemory for CudaView<'_, T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        address(self)
    }
    fn len(&self) -> usize {
        cudarc::driver::DeviceSlice::len(self)
    }
    fn is_writable(&self) -> bool {
        false
    }
    fn order_export(&self, exported: Option<Stream>) -> Result<(), StreamError> {
        order_export(self, exported)
    }
}

// SAFETY: a `CudaViewMut<'_, T>` borrows `len()` items of its slice exclusively for its
// lifetime (cudarc's `&mut [T]`): readable and writable through its address meanwhile.
unsafe impl<T: Element + DeviceRepr> DeviceMemory for CudaViewMut<'_, T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        address(self)
    }
    fn len(&self) -> usize {
        cudarc::driver::DeviceSlice::len(self)
    }
    fn order_export(&self, exported: Option<Stream>) -> Result<(), StreamError> {
        order_export(self, exported)
    }
}

/// cudarc's default stream is the null stream, the legacy default stream: exported as 1, as
/// the spec says (never 0); its per-thread stream as 2; any other as its handle.
impl AsStream for CudaStream {
    fn cai_stream(&self) -> Option<Stream> {
        Some(from_raw_handle(self.cu_stream().cast()))
    }
}

/// Foreign device memory (an import's items) as cudarc memory on a stream: cudarc's views of it
/// can be launched on and copied with, and nothing here ever frees it. Borrowed from the
/// import (`'a`): the borrow checker refuses a view that outlives it.
pub struct ForeignCudaSlice<'a, T> {
    /// Made with `upgrade_device_ptr` and never dropped as a `CudaSlice` (which would free
    /// the memory): `leak`ed instead.
    slice: ManuallyDrop<CudaSlice<T>>,
    readonly: bool,
    _import: PhantomData<&'a ()>,
}

impl<T> ForeignCudaSlice<'_, T> {
    /// # Safety
    /// `ptr` is device memory readable (and, unless `readonly`, writable) for `len` items of
    /// `T` in `stream`'s context, for as long as the returned value lives (its `'a`).
    pub(crate) unsafe fn new(
        ptr: u64,
        len: usize,
        stream: &Arc<CudaStream>,
        readonly: bool,
    ) -> Self {
        // SAFETY: the caller's contract; the slice is never freed (see `Drop`).
        let slice = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
        ForeignCudaSlice {
            slice: ManuallyDrop::new(slice),
            readonly,
            _import: PhantomData,
        }
    }

    /// The items, for reading (kernels, `clone_dtoh`...).
    pub fn view(&self) -> CudaView<'_, T> {
        self.slice.as_view()
    }

    /// The items, for writing; `None` for read-only data.
    pub fn view_mut(&mut self) -> Option<CudaViewMut<'_, T>> {
        (!self.readonly).then(|| self.slice.as_view_mut())
    }

    /// The number of items.
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.slice.is_empty()
    }
}

impl<T> Drop for ForeignCudaSlice<'_, T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `leak` waits for the slice's recorded work, releases its
        // events and stream, and frees no memory.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        let _ = slice.leak();
    }
}

impl<T> std::fmt::Debug for ForeignCudaSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ForeignCudaSlice({} items, readonly {})",
            self.slice.len(),
            self.readonly
        )
    }
}
