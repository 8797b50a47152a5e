//! Streams on the producer side: our [`DriverStream`] (and cust's, feature `cust`) as exported
//! streams, data with work pending on several streams, and the event wait that orders one
//! stream after another.

use std::sync::{Arc, Mutex};

use super::{ffi, with_context};
use crate::driver_error::DriverError;
use crate::stream::{AsStream, LiveStream, Stream, StreamError};

/// The driver handle for an exported stream value (1 and 2 are `CU_STREAM_LEGACY` and
/// `CU_STREAM_PER_THREAD`, as `cuda.h` defines them).
pub fn raw_handle(stream: Stream) -> *mut std::ffi::c_void {
    match stream {
        Stream::LegacyDefault => ffi::CU_STREAM_LEGACY,
        Stream::PerThreadDefault => ffi::CU_STREAM_PER_THREAD,
        Stream::Handle(h) => h.get() as usize as ffi::CUstream,
    }
}

/// The exported value for a driver handle. A null handle is the legacy default stream (the
/// driver API's meaning of 0, which the interface forbids exporting).
pub fn from_raw_handle(handle: *mut std::ffi::c_void) -> Stream {
    // Never 0 here, so from_raw cannot fail.
    Stream::from_raw(handle as usize as u64).unwrap_or(Stream::LegacyDefault)
}

/// A stream created through the driver: a blocking one (it and the legacy default stream wait
/// for each other's earlier work), or one created with `CU_STREAM_NON_BLOCKING` (it does not,
/// as with CuPy's and PyTorch's usual streams; cust 0.3's `Stream::new` cannot make one: it
/// drops the flag, Rust-CUDA issue 15). It is made in the current context and destroyed in it
/// when dropped; it exports its handle, and the struct holding it keeps it alive.
#[derive(Debug)]
pub struct DriverStream {
    handle: ffi::CUstream,
    ctx: ffi::CUcontext,
}

// SAFETY: a stream handle and its context are driver objects that any thread may use (the
// driver API is thread-safe); this type only passes them to the driver, and destroys the
// stream once, when dropped.
unsafe impl Send for DriverStream {}
// SAFETY: as above; no method mutates the struct.
unsafe impl Sync for DriverStream {}

/// The handles of this crate's live [`DriverStream`]s: the only streams an export asks the
/// driver about ([`stream_device`]), since a handle a caller merely names may not be a live
/// stream, and the driver's behaviour for such a handle is undefined. Held while a stream is
/// destroyed and while one is asked about, so neither happens during the other.
static LIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<usize>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

impl DriverStream {
    /// A new stream in the current context (device 0's primary context made current when none
    /// is), non-blocking or not. As for [`super::DeviceAllocation::new`], the current context
    /// must be its device's primary context, which this crate then retains for the process
    /// (the stream is destroyed there when dropped); in a context of the caller's own, use
    /// [`DriverStream::in_current_context`].
    pub fn new(non_blocking: bool) -> Result<Self, DriverError> {
        super::current_primary_context()?;
        // SAFETY: the current context is a primary context this crate retains for the process.
        unsafe { Self::in_current_context(non_blocking) }
    }

    /// [`DriverStream::new`] in whatever context is current (one of the caller's own too).
    ///
    /// # Safety
    /// The current context outlives the stream: it is not destroyed before the stream is
    /// dropped, which destroys the stream there.
    pub unsafe fn in_current_context(non_blocking: bool) -> Result<Self, DriverError> {
        super::init()?;
        let mut handle: ffi::CUstream = std::ptr::null_mut();
        let flags = if non_blocking {
            ffi::CU_STREAM_NON_BLOCKING
        } else {
            0
        };
        // SAFETY: valid out-pointer; the flags are cuda.h's.
        unsafe { ffi::cuStreamCreate(&mut handle, flags) }?;
        let mut s = DriverStream {
            handle,
            ctx: std::ptr::null_mut(),
        };
        // On error `s` is dropped, destroying the stream in the current context, its own.
        s.ctx = stream_context(s.stream())?;
        live().push(handle as usize);
        Ok(s)
    }

    /// The exported value: the handle.
    pub fn stream(&self) -> Stream {
        from_raw_handle(self.handle.cast())
    }

    /// The stream, which lives as long as this value.
    pub fn live(&self) -> LiveStream<'_> {
        // SAFETY: the stream is destroyed only when `self` is dropped, after the borrow.
        unsafe { LiveStream::new(self.stream()) }
    }
}

impl Drop for DriverStream {
    fn drop(&mut self) {
        let mut live = live();
        if let Some(i) = live.iter().position(|&h| h == self.handle as usize) {
            live.swap_remove(i);
        }
        let _ = with_context(self.ctx, || {
            // SAFETY: the handle is ours (created in `new`) and destroyed once, here, in its own
            // context (`with_context`); work still enqueued on it completes first
            // (cuStreamDestroy's contract).
            unsafe { ffi::cuStreamDestroy_v2(self.handle) }
        });
    }
}

impl AsStream for DriverStream {
    fn cai_stream(&self) -> Option<Stream> {
        Some(self.stream())
    }
    fn live_stream(&self) -> Option<LiveStream<'_>> {
        Some(self.live())
    }
}

/// The context a stream belongs to (null for the default streams: the current context's).
fn stream_context(stream: Stream) -> Result<ffi::CUcontext, DriverError> {
    let Stream::Handle(_) = stream else {
        return Ok(std::ptr::null_mut());
    };
    let mut ctx: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the handle is a live stream by the caller's contract.
    unsafe { ffi::cuStreamGetCtx(raw_handle(stream), &mut ctx) }?;
    Ok(ctx)
}

/// The device of one of this crate's live [`DriverStream`]s; `None` for a default stream (the
/// current context's, whichever device that is) and for any other handle, which the driver is
/// not asked about: it may not be a live stream (cust's, CuPy's... are not known here).
pub fn stream_device(stream: Stream) -> Result<Option<u32>, DriverError> {
    let Stream::Handle(h) = stream else {
        return Ok(None);
    };
    let live = live();
    if !live.contains(&(h.get() as usize)) {
        return Ok(None);
    }
    let ctx = stream_context(stream)?;
    let device = with_context(ctx, || {
        let mut device: ffi::CUdevice = 0;
        // SAFETY: valid out-pointer; the stream's context is current.
        unsafe { ffi::cuCtxGetDevice(&mut device) }?;
        Ok(u32::try_from(device).ok())
    });
    // Held until here: the stream is not destroyed while the driver is asked about it.
    drop(live);
    device
}

/// `(the stream's device, the data's device)` when an export names a stream of one device
/// for data on another; `None` when they agree or either is unknown (see [`stream_device`];
/// memory the driver does not know; no driver): an export is refused only for a certain
/// mismatch.
pub fn stream_device_mismatch(stream: Stream, data: u64) -> Option<(u32, u32)> {
    let stream_device = stream_device(stream).ok()??;
    let data_device = super::pointer_attributes(data).ok()?.device_ordinal?;
    (stream_device != data_device).then_some((stream_device, data_device))
}

/// Runs `f` in the context `stream` belongs to: a handle's own; for a default stream (1, 2),
/// device `device`'s primary context, or the current context when `device` is `None`.
fn in_stream_context<R>(
    stream: Stream,
    device: Option<u32>,
    f: impl FnOnce() -> Result<R, DriverError>,
) -> Result<R, DriverError> {
    match (stream, device) {
        (Stream::Handle(_), _) => with_context(stream_context(stream)?, f),
        (_, Some(d)) => super::with_device(d, f),
        (_, None) => f(),
    }
}

/// Makes `waiter` wait for the work enqueued so far on `producer`, without blocking the host:
/// records an event on `producer` (in that stream's context) and enqueues a wait on it in
/// `waiter`. Both are streams the driver may be handed ([`LiveStream`]: the default streams,
/// or streams something owns); a default stream is the current context's, so the waiter may be
/// on another device than the producer. [`order_after_on`] names the devices whose default
/// streams are meant.
///
/// ```compile_fail,E0308
/// // A bare number is no stream the driver may be handed.
/// let forged = cai_runtime::Stream::from_raw(0xdead_beef).unwrap();
/// cai_runtime::cuda::order_after(forged, forged);
/// ```
pub fn order_after(waiter: LiveStream<'_>, producer: LiveStream<'_>) -> Result<(), DriverError> {
    order_after_on(waiter, None, producer, None)
}

/// [`order_after`], a default stream (1, 2) meaning device `waiter_device`'s (for `waiter`) or
/// `producer_device`'s (for `producer`), or the current context's where that is `None`: the
/// legacy default stream of the data's device, with another device current, is that device's.
pub fn order_after_on(
    waiter: LiveStream<'_>,
    waiter_device: Option<u32>,
    producer: LiveStream<'_>,
    producer_device: Option<u32>,
) -> Result<(), DriverError> {
    let (waiter, producer) = (waiter.stream(), producer.stream());
    super::init()?;
    let handle = matches!(waiter, Stream::Handle(_));
    if waiter == producer && (handle || waiter_device == producer_device) {
        return Ok(());
    }
    let event = in_stream_context(producer, producer_device, || {
        let mut event: ffi::CUevent = std::ptr::null_mut();
        // SAFETY: valid out-pointer; flags are a cuda.h constant.
        unsafe { ffi::cuEventCreate(&mut event, ffi::CU_EVENT_DISABLE_TIMING) }?;
        // SAFETY: `event` was just created in the current context, which is `producer`'s
        // (`in_stream_context`), as cuEventRecord requires; `producer` is alive (a
        // `LiveStream`).
        match unsafe { ffi::cuEventRecord(event, raw_handle(producer)) } {
            Ok(()) => Ok(event),
            Err(e) => {
                // SAFETY: `event` is ours, never recorded, and destroyed once.
                let _ = unsafe { ffi::cuEventDestroy_v2(event) };
                Err(e)
            }
        }
    })?;
    let waited = in_stream_context(waiter, waiter_device, || {
        // SAFETY: `event` is live (destroyed only below) and recorded; `waiter` is alive (a
        // `LiveStream`) and its context is current; a wait may name an event of another
        // context, and flags must be 0.
        unsafe { ffi::cuStreamWaitEvent(raw_handle(waiter), event, 0) }
    });
    // SAFETY: `event` is ours and destroyed once, in its own context; destroying it after
    // enqueueing the wait is allowed (the wait keeps what it needs).
    let destroyed = in_stream_context(producer, producer_device, || unsafe {
        ffi::cuEventDestroy_v2(event)
    });
    waited.and(destroyed)
}

/// Blocks until all work enqueued on `stream` has finished.
pub fn synchronize_stream(stream: LiveStream<'_>) -> Result<(), DriverError> {
    synchronize_stream_on(stream, None)
}

/// [`synchronize_stream`], a default stream meaning device `device`'s (`None`: the current
/// context's).
pub fn synchronize_stream_on(
    stream: LiveStream<'_>,
    device: Option<u32>,
) -> Result<(), DriverError> {
    let stream = stream.stream();
    super::init()?;
    in_stream_context(stream, device, || {
        // SAFETY: the stream is alive (a `LiveStream`), and the current context is its own.
        unsafe { ffi::cuStreamSynchronize(raw_handle(stream)) }
    })
}

/// A stream that can be exported and outlives every export: one of the default streams, or a
/// stream kept alive by reference counting (cai's own, or a backend's: cust's, one of a crate
/// of its own).
#[derive(Clone)]
pub enum ExportStream {
    /// The legacy default stream (exported as 1).
    LegacyDefault,
    /// The per-thread default stream (exported as 2).
    PerThreadDefault,
    /// A stream created through the driver.
    Driver(Arc<DriverStream>),
    /// A stream a backend owns, vouched for by its [`AsStream::live_stream`]
    /// ([`ExportStream::owned`]; cust's streams convert with `From`).
    Owned(Arc<dyn AsStream + Send + Sync>),
}

impl ExportStream {
    /// A backend's stream, which `s` keeps alive (its [`AsStream::live_stream`], which only an
    /// owner of a live stream can give, through the `unsafe` [`LiveStream::new`]); `None` for a
    /// value that owns no live stream (a bare [`Stream`] number).
    pub fn owned(s: Arc<dyn AsStream + Send + Sync>) -> Option<Self> {
        s.live_stream()?;
        Some(ExportStream::Owned(s))
    }

    /// The stream, which lives as long as this value. (A backend's stream whose `live_stream`
    /// stops answering is the legacy default stream: nothing unvouched reaches the driver.)
    pub fn live(&self) -> LiveStream<'_> {
        match self {
            ExportStream::LegacyDefault => LiveStream::LEGACY_DEFAULT,
            ExportStream::PerThreadDefault => LiveStream::PER_THREAD_DEFAULT,
            ExportStream::Driver(s) => s.live(),
            ExportStream::Owned(s) => s.live_stream().unwrap_or(LiveStream::LEGACY_DEFAULT),
        }
    }

    /// The exported value.
    pub fn stream(&self) -> Stream {
        self.live().stream()
    }
}

impl std::fmt::Debug for ExportStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            ExportStream::LegacyDefault => "LegacyDefault",
            ExportStream::PerThreadDefault => "PerThreadDefault",
            ExportStream::Driver(_) => "Driver",
            ExportStream::Owned(_) => "Owned",
        };
        write!(f, "ExportStream::{kind}({})", self.stream())
    }
}

impl From<DriverStream> for ExportStream {
    fn from(s: DriverStream) -> Self {
        ExportStream::Driver(Arc::new(s))
    }
}

impl From<Arc<DriverStream>> for ExportStream {
    fn from(s: Arc<DriverStream>) -> Self {
        ExportStream::Driver(s)
    }
}

impl AsStream for ExportStream {
    fn cai_stream(&self) -> Option<Stream> {
        Some(self.stream())
    }
    fn live_stream(&self) -> Option<LiveStream<'_>> {
        Some(self.live())
    }
}

/// The streams with work pending on one array: the stream it exports, and the others work was
/// enqueued on since the last export. On export ([`AsStream::prepare_export`]) an event is
/// recorded on each other stream and the exported stream waits on it, so that synchronizing on
/// the exported stream covers all pending work (the spec's producer rule, its example of
/// streams 7, 9 and 15 and stream 3). The pending streams are kept alive until then.
#[derive(Debug)]
pub struct PendingStreams {
    export: ExportStream,
    pending: Mutex<Vec<ExportStream>>,
}

impl PendingStreams {
    /// Data whose work is (and will be) ordered on `export`.
    pub fn new(export: impl Into<ExportStream>) -> Self {
        PendingStreams {
            export: export.into(),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The exported stream.
    pub fn exported(&self) -> &ExportStream {
        &self.export
    }

    /// Records that work on the data was enqueued on `stream` (nothing to record when it is
    /// the exported stream).
    pub fn enqueued_on(&self, stream: impl Into<ExportStream>) {
        let stream = stream.into();
        let value = stream.stream();
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if value != self.export.stream() && !pending.iter().any(|p| p.stream() == value) {
            pending.push(stream);
        }
    }

    /// The streams with work not yet ordered before the exported stream.
    pub fn pending(&self) -> Vec<Stream> {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.iter().map(ExportStream::stream).collect()
    }

    /// Makes the exported stream wait for the work pending on every other stream. A stream
    /// whose event could not be enqueued stays pending, and the first error is returned.
    pub fn order_pending(&self) -> Result<(), DriverError> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let export = self.export.live();
        let mut first_error = None;
        pending.retain(|p| match order_after(export, p.live()) {
            Ok(()) => false,
            Err(e) => {
                first_error.get_or_insert(e);
                true
            }
        });
        first_error.map_or(Ok(()), Err)
    }
}

impl AsStream for PendingStreams {
    fn cai_stream(&self) -> Option<Stream> {
        Some(self.export.stream())
    }

    fn prepare_export(&self) -> Result<Option<Stream>, StreamError> {
        self.order_pending()?;
        Ok(self.cai_stream())
    }

    fn live_stream(&self) -> Option<LiveStream<'_>> {
        self.export.live_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_map_to_exported_values() {
        assert_eq!(raw_handle(Stream::LegacyDefault), ffi::CU_STREAM_LEGACY);
        assert_eq!(
            raw_handle(Stream::PerThreadDefault),
            ffi::CU_STREAM_PER_THREAD
        );
        assert_eq!(from_raw_handle(std::ptr::null_mut()), Stream::LegacyDefault);
        assert_eq!(from_raw_handle(0x2 as _), Stream::PerThreadDefault);
        let h = Stream::from_raw(0x5555_0000).unwrap();
        assert_eq!(from_raw_handle(raw_handle(h)), h);
    }

    #[test]
    fn pending_streams_bookkeeping() {
        let p = PendingStreams::new(ExportStream::PerThreadDefault);
        p.enqueued_on(ExportStream::PerThreadDefault); // the exported stream itself
        assert!(p.pending().is_empty());
        p.enqueued_on(ExportStream::LegacyDefault);
        p.enqueued_on(ExportStream::LegacyDefault); // once only
        assert_eq!(p.pending(), [Stream::LegacyDefault]);
        assert_eq!(p.cai_stream(), Some(Stream::PerThreadDefault));
    }
}
