//! cudarc 0.19 (feature `cudarc`): its `CudaSlice<T>`, `CudaView<'_, T>` and `CudaViewMut<'_, T>`
//! as [`crate::DeviceMemory`], its `CudaStream` (and `Arc<CudaStream>`) as a derive's
//! `#[cai(stream)]` field.
//!
//! cudarc loads the driver itself, at run time, when one of its functions is first called; this
//! module only reads objects the caller made with it, so cai never loads cudarc's driver first.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DeviceRepr};

use super::stream::{from_raw_handle, order_after_on, synchronize_stream_on};
use crate::element::Element;
use crate::memory::DeviceMemory;
#[cfg(feature = "python")]
use crate::python::ViewError;
use crate::stream::{AsStream, LiveStream, Stream, StreamError};

/// The device address of cudarc memory. cudarc hands it out for use on a stream, ordering that
/// stream after the memory's pending writes (events cudarc records on whatever stream wrote):
/// asked for on the memory's own stream. Its guard would record a read on that stream when
/// dropped, overwriting the record of a read pending elsewhere (cudarc keeps one), so it is
/// forgotten; and cudarc's binding of its context to the thread is undone.
fn address<T, M: DevicePtr<T>>(m: &M) -> u64 {
    super::keeping_current_context(|| {
        let (ptr, read) = m.device_ptr(m.stream());
        std::mem::forget(read);
        ptr
    })
}

/// The export's half of the producer rule: [`address`] ordered the memory's own stream after
/// its pending writes. An exported stream other than that one waits for it (an event wait) where
/// cai can vouch that it is a live stream (a default stream, a [`LiveStream`] the stream field
/// gave): the driver's behaviour for any other handle is undefined, so another handle is
/// refused.
/// Exported as `None` ("no synchronization needed"), the work is finished first.
fn order_export<T, M: DevicePtr<T>>(
    m: &M,
    exported: Option<Stream>,
    live: Option<LiveStream<'_>>,
) -> Result<(), StreamError> {
    let own_stream = m.stream();
    let own = from_raw_handle(own_stream.cu_stream().cast());
    // SAFETY: the memory's own stream, which cudarc's `Arc` (held by `m`) keeps alive.
    let own_live = unsafe { LiveStream::new(own) };
    let device = u32::try_from(own_stream.context().ordinal()).ok();
    match exported {
        None => Ok(synchronize_stream_on(own_live, device)?),
        Some(s) if s == own => Ok(()),
        Some(Stream::LegacyDefault) => Ok(order_after_on(
            LiveStream::LEGACY_DEFAULT,
            device,
            own_live,
            device,
        )?),
        Some(Stream::PerThreadDefault) => Ok(order_after_on(
            LiveStream::PER_THREAD_DEFAULT,
            device,
            own_live,
            device,
        )?),
        Some(s) => match live.filter(|l| l.stream() == s) {
            Some(l) => Ok(order_after_on(l, device, own_live, device)?),
            None => Err(StreamError::Unordered {
                stream: s.as_raw(),
                own: own.as_raw(),
            }),
        },
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
    fn order_export(
        &self,
        exported: Option<Stream>,
        live: Option<LiveStream<'_>>,
    ) -> Result<(), StreamError> {
        order_export(self, exported, live)
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
    fn order_export(
        &self,
        exported: Option<Stream>,
        live: Option<LiveStream<'_>>,
    ) -> Result<(), StreamError> {
        order_export(self, exported, live)
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
    fn order_export(
        &self,
        exported: Option<Stream>,
        live: Option<LiveStream<'_>>,
    ) -> Result<(), StreamError> {
        order_export(self, exported, live)
    }
}

/// cudarc's default stream is the null stream, the legacy default stream: exported as 1, as
/// the spec says (never 0); its per-thread stream as 2; any other as its handle.
impl AsStream for CudaStream {
    fn cai_stream(&self) -> Option<Stream> {
        Some(from_raw_handle(self.cu_stream().cast()))
    }
    fn live_stream(&self) -> Option<LiveStream<'_>> {
        // SAFETY: cudarc destroys its stream only when `self` is dropped, after the borrow
        // (its default streams are the null and per-thread streams, always valid).
        Some(unsafe { LiveStream::new(from_raw_handle(self.cu_stream().cast())) })
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
    #[cfg(feature = "python")]
    pub(crate) unsafe fn new(
        ptr: u64,
        len: usize,
        stream: &std::sync::Arc<CudaStream>,
        readonly: bool,
    ) -> Result<Self, cudarc::driver::DriverError> {
        // cudarc unwraps its context's stored error while making the slice's events: check it
        // first, and keep it for the caller's own `check_err`.
        let ctx = stream.context();
        if let Err(e) = ctx.check_err() {
            ctx.record_err::<()>(Err(e));
            return Err(e);
        }
        let slice = super::keeping_current_context(|| {
            // SAFETY: the caller's contract; the slice is never freed (see `Drop`).
            unsafe { stream.upgrade_device_ptr::<T>(ptr, len) }
        });
        Ok(ForeignCudaSlice {
            slice: ManuallyDrop::new(slice),
            readonly,
            _import: PhantomData,
        })
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

/// Imports as cudarc memory.
#[cfg(feature = "python")]
impl crate::python::ForeignArray<crate::Device> {
    /// The array as cudarc memory for reading on `stream` (kernels launched with `view()` as
    /// an argument, cudarc's copies): its items as a [`crate::cuda::ForeignCudaSlice`] that can
    /// never free them and cannot outlive this import. Refused unless the items are `T`s (as
    /// [`Self::typed`] checks), in C order, and the import ordered them for `stream` (import
    /// with `consumer` = the stream's handle, [`crate::AsStream::cai_stream`]).
    pub fn cudarc_view<T: Element + DeviceRepr + bytemuck::AnyBitPattern>(
        &self,
        stream: &std::sync::Arc<CudaStream>,
    ) -> Result<ForeignCudaSlice<'_, T>, ViewError> {
        self.cudarc_slice(stream, true)
    }

    /// [`Self::cudarc_view`] for writing too (`view_mut()`), refused for read-only data; the
    /// import is borrowed exclusively meanwhile, as [`Self::typed_mut`] borrows it.
    pub fn cudarc_view_mut<T: Element + DeviceRepr + bytemuck::AnyBitPattern>(
        &mut self,
        stream: &std::sync::Arc<CudaStream>,
    ) -> Result<ForeignCudaSlice<'_, T>, ViewError> {
        if self.readonly() {
            return Err(ViewError::ReadOnly);
        }
        self.cudarc_slice(stream, false)
    }

    fn cudarc_slice<T: Element + DeviceRepr + bytemuck::AnyBitPattern>(
        &self,
        stream: &std::sync::Arc<CudaStream>,
        readonly: bool,
    ) -> Result<ForeignCudaSlice<'_, T>, ViewError> {
        let own = stream.cai_stream().unwrap_or(Stream::LegacyDefault);
        self.check_flat::<T>(own)?;
        // The per-thread stream is each thread's own, and the view may move to another; a
        // default stream is its device's, which must be the import's consumer's.
        if own == Stream::PerThreadDefault {
            return Err(ViewError::OtherStream {
                import: self.options().consumer.stream().as_raw(),
                view: own.as_raw(),
            });
        }
        if own == Stream::LegacyDefault {
            let device = u32::try_from(stream.context().ordinal()).unwrap_or(u32::MAX);
            let consumer = self
                .device_for_work()
                .map_err(|e| ViewError::backend("cudarc", e))?;
            if device != consumer {
                return Err(ViewError::OtherDevice {
                    import: consumer,
                    view: device,
                });
            }
        }
        let len = self.layout().shape().iter().product();
        // SAFETY: the import validated the descriptor (and, with `check_pointer`, that its
        // extent lies in one live allocation); for contiguous items of `T` that is `len` items
        // from `ptr`, which the view keeps alive for `'_` (its owner and descriptor); written
        // through only when `readonly` is false, which only an exclusive borrow of a writable
        // import asks for.
        unsafe { ForeignCudaSlice::new(self.ptr(), len, stream, readonly) }
            .map_err(|e| ViewError::backend("cudarc", e))
    }
}
