//! The CUDA side of the package: import options, the stream switches, pointer attributes and
//! `DeviceArray`, a producer that owns device memory. The driver is loaded when first needed:
//! where there is none, what needs it raises RuntimeError saying why (`cuda_available()`).

use cai_runtime::PointerAttributes;
use cai_runtime::python::ForeignArray;
use cai_runtime::sync::{self, ImportOptions, NoSyncReason, SyncMode, SyncPlan};
use cai_runtime::{Device, LiveStream};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// The keyword arguments of the import functions: `sync` (False: ignore the producer's
/// stream), `stream` (the consumer's stream: 1 legacy default, 2 per-thread default, or a
/// handle; default 1), `mode` (`"enqueue"`: event wait, the default; `"synchronize"`: block the
/// host), `check_pointer` (ask the driver about `data`; default True).
///
/// A stream handle is the Python caller's word that it is a live stream, as CuPy's
/// `ExternalStream(ptr)` and the spec's `stream` entry take one (Python has no `unsafe`): the
/// docstrings say it must stay alive while the view is used.
pub fn import_options(
    sync: bool,
    stream: Option<&Bound<'_, PyAny>>,
    mode: &str,
    check_pointer: bool,
) -> PyResult<ImportOptions> {
    let consumer = match stream.filter(|v| !v.is_none()) {
        None => LiveStream::LEGACY_DEFAULT,
        // SAFETY: the Python caller's stream, which it answers for (see above): the import
        // functions' docstrings ask for a live stream that outlives the view.
        Some(v) => unsafe { LiveStream::new(cai_runtime::python::stream_argument(v)?) },
    };
    // `arg::mode` let only these two through.
    let mode = if mode == "synchronize" {
        SyncMode::Synchronize
    } else {
        SyncMode::Enqueue
    };
    Ok(ImportOptions {
        sync,
        consumer,
        mode,
        check_pointer,
    })
}

/// A plan as Python sees it.
pub fn plan_name(plan: SyncPlan) -> String {
    match plan {
        SyncPlan::EventWait { .. } => "event-wait".into(),
        SyncPlan::Synchronize { .. } => "synchronize".into(),
        SyncPlan::Nothing(why) => format!(
            "none: {}",
            match why {
                NoSyncReason::NoStream => "no stream",
                NoSyncReason::Disabled => "sync=False",
                NoSyncReason::Ignored => "streams ignored",
                NoSyncReason::SameStream => "same stream",
                NoSyncReason::ProducerOrdered => "ordered by the producer",
            }
        ),
    }
}

/// Pointer attributes as a dict.
pub fn attributes_dict<'py>(
    py: Python<'py>,
    a: &PointerAttributes,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("ptr", a.ptr)?;
    d.set_item("context", a.context)?;
    d.set_item("device_ordinal", a.device_ordinal)?;
    d.set_item("memory_type", a.memory_type.name())?;
    d.set_item("is_managed", a.is_managed)?;
    d.set_item("device_accessible", a.device_accessible())?;
    d.set_item("host_accessible", a.host_accessible())?;
    d.set_item("range", a.range)?;
    Ok(d)
}

/// A view's items, copied from the device.
pub fn copy_view_to_host<'py>(
    py: Python<'py>,
    view: &ForeignArray<Device>,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = view.copy_to_host()?;
    Ok(PyBytes::new(py, &bytes))
}

/// Releases an import ([`ForeignArray::release`]): `"event-wait"` when the producer's stream
/// now waits for the consumer's, else the import's own `"none: <why>"`.
pub fn release_view(view: &ForeignArray<Device>) -> PyResult<String> {
    if view.release_plan().is_none() {
        return Ok(plan_name(view.sync_plan()));
    }
    view.release()?;
    Ok("event-wait".into())
}

/// Whether CUDA can be used here, and if not why: `(True, "")` or `(False, reason)`.
#[pyfunction]
fn cuda_available() -> (bool, String) {
    match cai_runtime::cuda::init() {
        Ok(()) => (true, String::new()),
        Err(e) => (false, e.to_string()),
    }
}

/// What the CUDA driver knows about address `ptr` (any address may be asked about).
#[pyfunction]
fn pointer_attributes<'py>(ptr: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let (py, ptr) = (
        ptr.py(),
        cai_runtime::__private::address_argument("ptr", ptr)?,
    );
    let a = cai_runtime::cuda::pointer_attributes(ptr).map_err(|e| {
        cai_runtime::__private::driver_error(
            format_args!("cannot ask the CUDA driver about ptr = {ptr:#x}"),
            e,
        )
    })?;
    attributes_dict(py, &a)
}

/// Producers: export `stream: None` always (True) or the real stream (False, the default).
/// Overrides the environment variable CAI_CUDA_ARRAY_INTERFACE_EXPORT_STREAM_NONE.
#[pyfunction]
fn set_export_stream_none(#[pyo3(from_py_with = crate::arg::on)] on: bool) {
    sync::set_export_stream_none(on);
}

/// Whether producers export `stream: None` always.
#[pyfunction]
fn export_stream_none() -> bool {
    sync::export_stream_none()
}

/// Consumers: ignore the stream of imported arrays (True) or synchronize (False, the default).
/// Overrides the environment variable CAI_CUDA_ARRAY_INTERFACE_SYNC (=0 ignores).
#[pyfunction]
fn set_ignore_streams(#[pyo3(from_py_with = crate::arg::on)] on: bool) {
    sync::set_ignore_streams(on);
}

/// Whether consumers ignore the stream of imported arrays.
#[pyfunction]
fn ignore_streams() -> bool {
    sync::ignore_streams()
}

/// Adds this module's functions and classes.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(pointer_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(set_export_stream_none, m)?)?;
    m.add_function(wrap_pyfunction!(export_stream_none, m)?)?;
    m.add_function(wrap_pyfunction!(set_ignore_streams, m)?)?;
    m.add_function(wrap_pyfunction!(ignore_streams, m)?)?;
    m.add_class::<device_array::DeviceArray>()?;
    Ok(())
}

mod device_array {
    use std::sync::Arc;

    use cai_runtime::cuda::{self, DeviceAllocation, DriverStream, ExportStream, PendingStreams};
    use cai_runtime::python::ForeignHostArray as HostImport;
    use cai_runtime::{
        CudaArrayDescriptor, CudaArrayInterface, DType, DescriptorBuilder, DescriptorError, Layout,
        Order, Stream,
    };
    use pyo3::exceptions::PyValueError;
    use pyo3::prelude::*;
    use pyo3::types::PyBytes;

    use crate::args::arg;

    /// A new stream: a non-blocking one, or a blocking one (it and the legacy default stream
    /// wait for each other's earlier work).
    fn new_stream(non_blocking: bool) -> PyResult<ExportStream> {
        Ok(DriverStream::new(non_blocking)?.into())
    }

    /// Device memory owned by Rust (a driver allocation), exported through
    /// `__cuda_array_interface__` version 3 with its own stream. Work enqueued on its side
    /// stream is ordered before the exported stream on every export (events and a stream wait),
    /// so consumers that synchronize on the exported stream never see stale data. Views share
    /// the buffer and the streams.
    #[pyclass(module = "cai", weakref, frozen)]
    pub struct DeviceArray {
        dtype: &'static DType,
        shape: Vec<usize>,
        strides: Option<Vec<isize>>,
        offset: usize,
        streams: Arc<PendingStreams>,
        side: ExportStream,
        /// The device the buffer and streams are on; its driver work runs in its context.
        device: u32,
        /// Declared after the streams, so dropped after them (fields drop in order); the free
        /// waits for the device's work on the memory (cuMemFree synchronizes).
        buf: Arc<DeviceAllocation>,
    }

    impl CudaArrayInterface for DeviceArray {
        fn cuda_array_interface(&self) -> Result<CudaArrayDescriptor, DescriptorError> {
            self.exported()?.build()
        }

        fn __cai_builder(
            &self,
        ) -> Option<Result<DescriptorBuilder<'_, cai_runtime::Device>, DescriptorError>> {
            Some(self.exported())
        }
    }

    impl DeviceArray {
        /// The builder of this view's descriptor with its stream, after ordering the side
        /// stream's work before the exported stream (the pending streams' wait is enqueued in
        /// the array's context). Built from the allocation, whose `DeviceMemory` vouches for
        /// its bytes (so DLPack may copy them).
        fn exported(&self) -> Result<DescriptorBuilder<'_, cai_runtime::Device>, DescriptorError> {
            let stream = cuda::with_device(self.device, || {
                cai_runtime::AsStream::prepare_export(&*self.streams)
            })?;
            Ok(self
                .builder()
                .stream(stream)
                .stream_vouched_by(cai_runtime::AsStream::live_stream(&*self.streams)))
        }

        /// The descriptor of this view, without its stream.
        fn builder(&self) -> DescriptorBuilder<'_, cai_runtime::Device> {
            DescriptorBuilder::device(&*self.buf)
                .dtype(self.dtype)
                .shape(self.shape.clone())
                .strides(self.strides.clone())
                .offset(self.offset)
        }

        /// `fill`'s work, in the array's context.
        fn fill_rounds(
            &self,
            ptr: u64,
            value: u8,
            stream: Stream,
            rounds: usize,
        ) -> Result<(), cai_runtime::DriverError> {
            for i in 0..rounds {
                let v = if i + 1 < rounds {
                    value.wrapping_add(1)
                } else {
                    value
                };
                // SAFETY: the whole buffer is ours; it outlives the work because it is only
                // freed after its streams are (the Arc'd streams are dropped with the last
                // view, and cuMemFree waits for the device to finish using the memory).
                unsafe { cuda::memset_async(ptr, v, self.buf.len(), stream) }?;
            }
            Ok(())
        }

        fn layout(&self) -> PyResult<Layout> {
            let itemsize = self.dtype.itemsize();
            match &self.strides {
                Some(s) => Layout::strided(&self.shape, s, itemsize),
                None => Layout::c_contiguous(&self.shape, itemsize),
            }
            .map_err(PyErr::from)
        }
    }

    #[cai_runtime::pymethods(cuda)]
    impl DeviceArray {
        /// Copies a host array (anything exposing `__array_interface__`, e.g. a NumPy array)
        /// to new device memory, stored in C or F order, on device `device_id` (None: the
        /// current device). Its two streams (exported and side) are blocking streams, or
        /// non-blocking ones with `non_blocking=True`.
        #[new]
        #[pyo3(signature = (obj, *, order = "C", non_blocking = false, device_id = None))]
        fn new(
            obj: HostImport,
            #[pyo3(from_py_with = arg::order)] order: &str,
            #[pyo3(from_py_with = arg::non_blocking)] non_blocking: bool,
            #[pyo3(from_py_with = arg::device_id)] device_id: Option<u32>,
        ) -> PyResult<Self> {
            let order = match order {
                "F" => Order::F,
                _ => Order::C,
            };
            // The source's items: its fields, or the one-entry list of a plain type.
            let d = obj.descriptor();
            let items = d
                .descr
                .clone()
                .unwrap_or_else(|| cai_runtime::Descr::simple(d.typestr));
            let dtype =
                crate::examples::dtype_for("DeviceArray", &d.typestr.to_string(), Some(&items))?;
            let shape = obj.layout().shape().to_vec();
            let bytes = obj.to_bytes_in(order)?;
            let no_device =
                |e| cai_runtime::__private::driver_error("DeviceArray needs a CUDA device", e);
            let device = match device_id {
                Some(d) => {
                    let count = cuda::device_count().map_err(no_device)?;
                    if d >= count {
                        return Err(PyValueError::new_err(format!(
                            "device_id = {d}: no such device (this machine has {count} CUDA devices)"
                        )));
                    }
                    d
                }
                None => cuda::current_device().map_err(no_device)?,
            };
            let (buf, streams, side) = cuda::with_device(device, || -> PyResult<_> {
                let buf = DeviceAllocation::new(bytes.len(), false)?;
                // SAFETY: the new allocation holds `bytes.len()` bytes, and nothing else has it
                // yet.
                unsafe { cuda::copy_from_host(buf.device_ptr(), &bytes, Stream::LegacyDefault) }?;
                Ok((buf, new_stream(non_blocking)?, new_stream(non_blocking)?))
            })?;
            let strides = match order {
                Order::C => None,
                Order::F => Some(
                    Layout::contiguous(&shape, dtype.itemsize(), Order::F)?
                        .strides()
                        .to_vec(),
                ),
            };
            Ok(DeviceArray {
                buf: Arc::new(buf),
                dtype,
                shape,
                strides,
                offset: 0,
                streams: Arc::new(PendingStreams::new(streams)),
                side,
                device,
            })
        }

        /// Another view of the same memory and streams: `shape`, byte `strides` (None: C
        /// order) and the first item `offset` bytes into the buffer. ValueError if it leaves
        /// the buffer.
        #[pyo3(signature = (shape, strides = None, offset = 0))]
        fn view(
            &self,
            #[pyo3(from_py_with = arg::shape)] shape: Vec<usize>,
            #[pyo3(from_py_with = arg::strides)] strides: Option<Vec<isize>>,
            #[pyo3(from_py_with = arg::offset)] offset: usize,
        ) -> PyResult<Self> {
            let v = DeviceArray {
                buf: self.buf.clone(),
                dtype: self.dtype,
                shape,
                strides,
                offset,
                streams: self.streams.clone(),
                side: self.side.clone(),
                device: self.device,
            };
            // Validate without ordering any stream.
            v.builder().build()?;
            Ok(v)
        }

        /// The view's items in C order, copied to the host after all pending work.
        fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
            let layout = self.layout()?;
            let ptr = self.buf.device_ptr() + self.offset as u64;
            let bytes = cuda::with_device(self.device, || -> PyResult<_> {
                self.streams.order_pending()?;
                let exported = self.streams.exported().stream();
                // SAFETY: the view's layout lies in its own buffer (checked when it was made),
                // alive while `self` is; the exported stream is owned by `self.streams`.
                let bytes = unsafe { cuda::gather_to_host(ptr, &layout, exported) }?;
                Ok(bytes)
            })?;
            Ok(PyBytes::new(py, &bytes))
        }

        /// Enqueues setting every byte of the whole buffer to `value` (0 to 255; after
        /// `rounds - 1` fills with `value + 1`, to make the work long; `rounds` from 1 to
        /// 65536), on the exported stream or on the side stream, and returns at once. Work on
        /// the side stream is recorded as pending.
        #[pyo3(signature = (value, *, on_side_stream = false, rounds = 1))]
        fn fill(
            &self,
            #[pyo3(from_py_with = arg::value)] value: u8,
            #[pyo3(from_py_with = arg::on_side_stream)] on_side_stream: bool,
            #[pyo3(from_py_with = arg::rounds)] rounds: usize,
        ) -> PyResult<()> {
            let stream = if on_side_stream {
                self.side.stream()
            } else {
                self.streams.exported().stream()
            };
            let ptr = self.buf.device_ptr();
            cuda::with_device(self.device, || self.fill_rounds(ptr, value, stream, rounds))?;
            if on_side_stream {
                self.streams.enqueued_on(self.side.clone());
            }
            Ok(())
        }

        /// Enqueues copying the items of `source` (an imported device array, C-contiguous,
        /// with as many bytes as this whole buffer) into this buffer on the exported stream,
        /// and returns at once: a consumer's work on imported data, on its own stream. Order
        /// the import after its producer first (import with `stream=` this array's stream),
        /// and `source.release()` afterwards.
        fn copy_from(&self, source: &Bound<'_, crate::import::CudaArrayView>) -> PyResult<()> {
            let src = crate::import::cuda_of(source)?;
            if !src.layout().is_c_contiguous() || src.layout().nbytes() != self.buf.len() {
                return Err(PyValueError::new_err(format!(
                    "copy_from(source): source must be C-contiguous with {} bytes (this buffer's \
                     size); it has shape {:?}, strides {:?}, {} bytes",
                    self.buf.len(),
                    src.layout().shape(),
                    src.layout().strides(),
                    src.layout().nbytes()
                )));
            }
            let dst = self.buf.device_ptr();
            // SAFETY: `dst` is this whole buffer (`len` bytes), freed only after its streams
            // are (see `fill`). `src .. src + len` are the view's bytes (C-contiguous, `len` of
            // them, checked above), which the import checked against their allocation (or, with
            // `check_pointer=False`, which the producer vouches for, as for any import) and
            // whose owner the view holds; the caller keeps the view or the producer alive until
            // the stream has run the copy, as for any work a consumer enqueues.
            cuda::with_device(self.device, || unsafe {
                cuda::copy_async(
                    dst,
                    src.ptr(),
                    self.buf.len(),
                    self.streams.exported().stream(),
                )
            })
            .map_err(PyErr::from)
        }

        /// The device the array is on.
        #[getter]
        fn device_id(&self) -> u32 {
            self.device
        }

        /// Blocks until all work on the data (every stream) has finished.
        fn synchronize(&self) -> PyResult<()> {
            cuda::with_device(self.device, || {
                self.streams.order_pending()?;
                cuda::synchronize_stream(self.streams.exported().live())
            })
            .map_err(PyErr::from)
        }

        /// The exported stream's handle.
        #[getter]
        fn stream(&self) -> u64 {
            self.streams.exported().stream().as_raw()
        }

        /// The side stream's handle.
        #[getter]
        fn side_stream(&self) -> u64 {
            self.side.stream().as_raw()
        }

        /// Streams with work not yet ordered before the exported stream.
        #[getter]
        fn pending_streams(&self) -> Vec<u64> {
            self.streams
                .pending()
                .into_iter()
                .map(|s| s.as_raw())
                .collect()
        }

        /// The size of the whole buffer in bytes.
        #[getter]
        fn nbytes(&self) -> usize {
            self.buf.len()
        }

        /// The address of the buffer's first byte.
        #[getter]
        fn ptr(&self) -> u64 {
            self.buf.device_ptr()
        }
    }
}
