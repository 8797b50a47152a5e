//! Foreign arrays imported into Rust: a validated descriptor plus strong references to
//! everything the memory depends on (the owner, the descriptor dict's entries, masks,
//! buffers), so the memory cannot be freed while the view lives.
//!
//! # The trust boundary
//!
//! A descriptor is a promise: "`data` is the address of memory laid out so, valid while I am
//! alive". Nothing can check that promise (a host address is only an integer; the driver can
//! check a device address's allocation, not who owns it). Where the promise comes from decides
//! who answers for it:
//!
//! - An **object** exposing `__array_interface__` / `__cuda_array_interface__` (or
//!   `__gt_data_interface__`) is a producer, and the protocols make the producer answer for its
//!   descriptor, as NumPy, CuPy, Numba and PyTorch trust it and as the buffer protocol is
//!   trusted: [`ForeignArray::from_object`] is safe.
//! - A **descriptor dict** handed over by Rust code can hold any integer: the Rust caller answers
//!   for it, so [`ForeignArray::from_interface`] and [`ForeignArray::from_interface_with`] are
//!   `unsafe`, with the contract in their docs. The Python functions of the `cai` package that
//!   take a dict (`from_array_interface`, `from_cuda_array_interface`) discharge it there: a
//!   Python caller handing over a dict is its producer, as it is for `numpy.asarray` of an
//!   object exposing that dict.
//!
//! Either way a view keeps alive whatever the bytes depend on, and the typed accessors
//! ([`Typed::get`], [`TypedMut::set`], [`ForeignArray::to_bytes`]) read and write only inside
//! the validated extent, reading element types for which any bits are a value
//! ([`AnyBitPattern`]) and writing ones whose bytes are all initialized ([`NoUninit`]).

use std::marker::PhantomData;

use bytemuck::{AnyBitPattern, NoUninit};
use pyo3::prelude::*;

use super::buffer::Held;
use super::claim::{Access, Claim, Scoped};
use super::errors::{driver_error, stream_error};
use super::fast;
use super::parse::{interface_of, parse_exposed};
use crate::descriptor::{ArrayDescriptor, Device, Host, Space};
use crate::element::Element;
use crate::error::AllocError;
use crate::layout::Layout;
use crate::memory::byte_vec;
use crate::pointer::PointerAttributes;
use crate::stream::Stream;
use crate::sync::{ImportOptions, NoSyncReason, ReleasePlan, SyncPlan};

/// A foreign array: the spec's `from_cuda_array_interface` / `as_cuda_array` result in Rust
/// (and the same for `__array_interface__` with [`Host`]).
///
/// It may be dropped on any thread. Its owner and the Python objects it holds are then released
/// as PyO3 releases them (at once where the thread is attached, else the next time a thread
/// attaches); a buffer it holds (a host `data` shared through the buffer protocol) and a DLPack
/// producer's deleter need the GIL where they run, as their release is Python's: do not drop
/// such an import on a thread that the GIL's holder waits for.
#[derive(Debug)]
pub struct ForeignArray<S: Space>(Box<Parts<S>>);

/// A [`ForeignArray`]'s parts, behind one allocation: an import moves as a pointer through
/// the layers that make it and into the Python object that holds it.
#[derive(Debug)]
struct Parts<S: Space> {
    descriptor: Described<S>,
    layout: Layout,
    /// The owner, and what the bytes depend on besides it: the descriptor dict's entries,
    /// masks, buffers (host `data` shared through the buffer protocol); dropping the view
    /// releases them, the user's pending exception put aside meanwhile.
    held: Held,
    options: ImportOptions,
    sync_plan: SyncPlan,
    attributes: Option<PointerAttributes>,
    /// The device whose context the import's stream work ran in (the current one then, or
    /// the data's): its release and copies run there too, on whatever thread.
    consumer_device: Option<u32>,
    /// How Rust code reads and writes the host bytes (`claim.rs`).
    claim: Claim,
}

/// An import's descriptor: the one a dict gave, or a DLPack tensor's parts, the whole made when
/// first asked. (The tensor's shape and strides are the layout's: its import allocates none.)
#[derive(Debug)]
enum Described<S: Space> {
    Parsed(ArrayDescriptor<S>),
    Tensor(TensorHead<S>),
}

/// What a DLPack tensor describes besides its layout. Whole words only (no `bool` field): an
/// import moves it a few times, and a field of one byte was moved a few bytes at a time, each
/// load waiting for the narrower stores before it to reach the cache.
#[derive(Debug)]
pub(crate) struct TensorHead<S: Space> {
    typestr: crate::TypeStr,
    /// The address of the first item.
    ptr: u64,
    /// [`Self::READ_ONLY`] and [`Self::STRIDED`].
    flags: u64,
    stream: S::StreamEntry,
    /// The descriptor, once asked for.
    whole: std::sync::OnceLock<Box<ArrayDescriptor<S>>>,
}

impl<S: Space> TensorHead<S> {
    const READ_ONLY: u64 = 1;
    const STRIDED: u64 = 2;

    pub(crate) fn new(typestr: crate::TypeStr, data: crate::Data, strided: bool) -> Self {
        TensorHead {
            typestr,
            ptr: data.ptr,
            flags: u64::from(data.readonly) * Self::READ_ONLY + u64::from(strided) * Self::STRIDED,
            stream: S::stream_entry(None),
            whole: Default::default(),
        }
    }

    pub(crate) fn typestr(&self) -> &crate::TypeStr {
        &self.typestr
    }

    /// Whether the tensor gave strides (NULL means C order: the descriptor's `None`).
    fn strided(&self) -> bool {
        self.flags & Self::STRIDED != 0
    }

    pub(crate) fn data(&self) -> crate::Data {
        crate::Data {
            ptr: self.ptr,
            readonly: self.flags & Self::READ_ONLY != 0,
        }
    }
}

impl<S: Space> Described<S> {
    fn typestr(&self) -> &crate::TypeStr {
        match self {
            Described::Parsed(d) => &d.typestr,
            Described::Tensor(t) => t.typestr(),
        }
    }

    fn data(&self) -> crate::Data {
        match self {
            Described::Parsed(d) => d.data,
            Described::Tensor(t) => t.data(),
        }
    }

    fn stream_entry(&self) -> &S::StreamEntry {
        match self {
            Described::Parsed(d) => &d.stream,
            Described::Tensor(t) => &t.stream,
        }
    }

    fn set_stream(&mut self, stream: S::StreamEntry) {
        match self {
            Described::Parsed(d) => d.stream = stream,
            Described::Tensor(t) => {
                t.stream = stream;
                // (A descriptor made before says the stream it had.)
                t.whole = std::sync::OnceLock::new();
            }
        }
    }

    /// The `descr`, where a dict gave one (a tensor gives none).
    fn descr(&self) -> Option<&crate::Descr> {
        match self {
            Described::Parsed(d) => d.descr.as_ref(),
            Described::Tensor(_) => None,
        }
    }

    fn whole(&self, layout: &Layout) -> &ArrayDescriptor<S> {
        match self {
            Described::Parsed(d) => d,
            Described::Tensor(t) => t.whole.get_or_init(|| {
                Box::new(ArrayDescriptor {
                    shape: layout.shape().to_vec(),
                    typestr: t.typestr,
                    descr: None,
                    data: t.data(),
                    strides: t.strided().then(|| layout.strides().to_vec()),
                    mask: None,
                    version: 3,
                    stream: t.stream.clone(),
                })
            }),
        }
    }
}

/// An imported `__cuda_array_interface__`.
pub type ForeignDeviceArray = ForeignArray<Device>;
/// An imported `__array_interface__`.
pub type ForeignHostArray = ForeignArray<Host>;

/// Why a typed view was refused (in Python a `TypeError`, or a `ValueError` for
/// [`ViewError::ReadOnly`]: the `python` module's table of exceptions).
#[derive(Clone, Debug, thiserror::Error)]
pub enum ViewError {
    /// The array's type string is not the element type's.
    #[error("array has typestr '{found}' but the element type {rust} is '{expected}'{hint}")]
    Dtype {
        /// Rust type name.
        rust: &'static str,
        /// The element's type string.
        expected: String,
        /// The array's type string.
        found: String,
        /// Extra advice (byte order...).
        hint: &'static str,
    },
    /// The array's `descr` is not the element type's.
    #[error("array has descr {found} but the element type {rust} has descr {expected}")]
    Descr {
        /// Rust type name.
        rust: &'static str,
        /// The element's descr.
        expected: String,
        /// The array's descr.
        found: String,
    },
    /// Mutable access to read-only data.
    #[error("the array is read-only (data[1] is True): mutable access refused")]
    ReadOnly,
    /// A flat view of an array whose items are not contiguous in C order.
    #[error(
        "the array is not C-contiguous (shape {shape:?}, strides {strides:?}): a flat view needs its items in one run"
    )]
    NotContiguous {
        /// The array's shape.
        shape: Vec<usize>,
        /// Its byte strides.
        strides: Vec<isize>,
    },
    /// Another import of the same bytes holds a claim that excludes this access (see
    /// `ForeignArray::as_array`, feature `ndarray`).
    #[error(
        "the array's memory is {held} through another import that is still alive, so it cannot be {asked} here: drop that import first"
    )]
    Claimed {
        /// What was asked.
        asked: &'static str,
        /// What the other import does.
        held: &'static str,
    },
    /// A view of fixed dimensionality of an array of another.
    #[error("the array is {found}-dimensional but the view is {expected}-dimensional")]
    Dimensionality {
        /// The view's.
        expected: usize,
        /// The array's.
        found: usize,
    },
    /// A reference view of items that are not aligned for the element type.
    #[error(
        "the array's items are not aligned for {rust} (address {ptr:#x}, byte strides {strides:?}, alignment {align}): a reference view needs aligned items (typed() reads them unaligned)"
    )]
    Misaligned {
        /// Rust type name.
        rust: &'static str,
        /// The data pointer.
        ptr: u64,
        /// The byte strides.
        strides: Vec<isize>,
        /// `T`'s alignment.
        align: usize,
    },
    /// A mutable view of an array in which two indices name the same bytes (a broadcast).
    #[error(
        "the array's items overlap (shape {shape:?}, byte strides {strides:?}): a mutable view needs each item in bytes of its own"
    )]
    Overlapping {
        /// The array's shape.
        shape: Vec<usize>,
        /// Its byte strides.
        strides: Vec<isize>,
    },
    /// A copy that does not fit in memory.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// A cudarc view on another device's default stream than the import's consumer's.
    #[error(
        "the import ordered the data for device {import}'s default stream, not device {view}'s: import with device {view} current, or view on device {import}'s stream"
    )]
    OtherDevice {
        /// The import's consumer device.
        import: u32,
        /// The view's stream's device.
        view: u32,
    },
    /// A memory backend (a CUDA crate: cudarc, cust, or one of its own) refused the view; for
    /// cudarc, its context holds an error from earlier work (kept for its `check_err`).
    #[error("{backend}: {source}")]
    Backend {
        /// The backend, as its crate is named.
        backend: &'static str,
        /// The backend's error.
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A view for work on another stream than the one the import ordered the data for.
    #[error(
        "the import ordered the data for stream {import}, not this view's stream {view}: import with stream={view}"
    )]
    OtherStream {
        /// The import's consumer stream.
        import: u64,
        /// The view's stream.
        view: u64,
    },
}

impl<S: Space> ForeignArray<S> {
    /// Imports a descriptor dict (`from_cuda_array_interface(desc, owner, sync)`); `owner`, if
    /// given, is kept alive as long as the view, and so is what `desc` holds (see
    /// [`Held`]); a host descriptor without `data` shares `owner`'s buffer. Other
    /// options at their defaults.
    ///
    /// # Safety
    /// `desc` is trusted as a producer's descriptor is (see the module's "trust boundary"):
    /// where its `data` is an address, the memory it describes (the items at the validated
    /// extent around it, and the mask's) must stay valid for reads, and for writes unless
    /// declared read-only, for as long as the view and what it keeps (`owner`, `desc`) live;
    /// its `stream`, where it is a handle, is a live stream for as long too (the import and a
    /// release hand it to the driver).
    ///
    /// A dict built in Rust can hold any address, so safe code cannot import one:
    ///
    /// ```compile_fail,E0133
    /// use cai_runtime::python::ForeignArray;
    /// use cai_runtime::Host;
    /// use cai_runtime::__private::pyo3::{prelude::*, types::PyDict};
    ///
    /// fn import(d: &Bound<'_, PyDict>) -> PyResult<ForeignArray<Host>> {
    ///     ForeignArray::from_interface(d.as_any(), None, false)
    /// }
    /// ```
    pub unsafe fn from_interface(
        desc: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
        sync: bool,
    ) -> PyResult<Self> {
        let options = ImportOptions {
            sync,
            ..ImportOptions::default()
        };
        // SAFETY: this function's contract.
        unsafe { Self::from_interface_with(desc, owner, &options) }
    }

    /// Imports a descriptor dict with explicit [`ImportOptions`]. For a device array the
    /// pointer is checked with the driver (unless [`ImportOptions::check_pointer`] is off) and
    /// the consumer's stream is ordered after the producer's before this returns
    /// ([`Self::sync_plan`] says how); where there is no driver, that is an error.
    ///
    /// # Safety
    /// As for [`Self::from_interface`].
    pub unsafe fn from_interface_with(
        desc: &Bound<'_, PyAny>,
        owner: Option<&Bound<'_, PyAny>>,
        options: &ImportOptions,
    ) -> PyResult<Self> {
        // The dict may be all that keeps the data alive (NumPy scalars' `'__ref'`): what it
        // holds is kept as it was before reading it ran the producer's code. (The fast path
        // runs none, and the descriptor's own values, exact ints, strs, bools, tuples and a
        // plain descr, hold nothing the data needs: a dict of those alone costs nothing.)
        let mut held = Held::default();
        let (descriptor, layout) = match fast::import::<S>(desc) {
            Some((descriptor, layout, others)) => {
                if others {
                    held.snapshot(desc)?;
                }
                (descriptor, layout)
            }
            None => {
                held.snapshot(desc)?;
                let (descriptor, layout, parsed) = parse_exposed::<S>(desc, owner).into_result()?;
                held.extend(parsed);
                (descriptor, layout)
            }
        };
        let mut descriptor = descriptor;
        identify(&mut descriptor, owner)?;
        held.set_owner(owner);
        let mut a = ForeignArray::new(Described::Parsed(descriptor), layout, held, options);
        if S::DEVICE {
            a.prepare_device(StreamSource::Descriptor)?;
        }
        Ok(a)
    }

    /// An import of what `descriptor` says, before its stream work: its parts allocated once
    /// and made in place (not made on the stack and copied).
    fn new(descriptor: Described<S>, layout: Layout, held: Held, options: &ImportOptions) -> Self {
        ForeignArray(Box::write(
            Box::new_uninit(),
            Parts {
                descriptor,
                layout,
                held,
                options: *options,
                sync_plan: SyncPlan::Nothing(NoSyncReason::NoStream),
                attributes: None,
                consumer_device: None,
                claim: Claim::default(),
            },
        ))
    }

    /// Imports an object exposing the interface (`as_cuda_array(obj, sync)`); the view keeps
    /// `obj` alive, and what the dict it exposed holds.
    pub fn from_object(obj: &Bound<'_, PyAny>, sync: bool) -> PyResult<Self> {
        let options = ImportOptions {
            sync,
            ..ImportOptions::default()
        };
        Self::from_object_with(obj, &options)
    }

    /// [`Self::from_object`] with explicit [`ImportOptions`].
    pub fn from_object_with(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<Self> {
        let desc = interface_of::<S>(obj)?;
        // SAFETY: `desc` is what `obj` exposes: the producer answers for it (the protocol's
        // contract, which NumPy and CuPy trust too), and the view keeps `obj` and `desc`.
        unsafe { Self::from_interface_with(&desc, Some(obj), options) }
    }

    /// An import whose descriptor was read from a DLPack tensor: `held` keeps the tensor (and
    /// with it the bytes), and the view keeps `owner` too. A device array's pointer is checked
    /// as any import's; the producer ordered its work before the consumer's stream
    /// ([`NoSyncReason::ProducerOrdered`]) unless synchronization was off. Then, with
    /// [`SyncMode::Synchronize`](crate::sync::SyncMode::Synchronize), the host waits for that
    /// stream; otherwise, where the data is on another device than the consumer's, the
    /// consumer's default stream waits for the data's device's, which the producer ordered, and
    /// the view's descriptor names the consumer's stream as its `stream` (where the data is
    /// ready), so that the view's own consumers are ordered after it. `device_id`, the device
    /// the tensor names, must be the one the driver finds the pointer on.
    pub(crate) fn from_dlpack_parts(
        head: TensorHead<S>,
        layout: Layout,
        tensor: Option<super::dlpack::ImportedTensor>,
        owner: Option<&Bound<'_, PyAny>>,
        options: &ImportOptions,
        producer: super::dlpack::Producer,
        device_id: Option<u32>,
    ) -> PyResult<Self> {
        let mut a = ForeignArray::new(Described::Tensor(head), layout, Held::default(), options);
        // (The tensor and owner set where they stay: set before, they were moved at once,
        // and a move of what was just written waits for its stores to reach the cache.)
        if let Some(t) = tensor {
            a.0.held.tensor(t);
        }
        a.0.held.set_owner(owner);
        if !S::DEVICE {
            if let super::dlpack::Producer::Current(Some(stream)) = producer
                && options.sync
                && !crate::sync::ignore_streams()
            {
                // A host reader of host-accessible CUDA memory reads as soon as this returns.
                // SAFETY: the producer's current work stream, which its table gave: the
                // producer answers for it, as for the data.
                let live = unsafe { crate::LiveStream::new(stream) };
                crate::cuda::synchronize_stream_on(live, device_id).map_err(|e| {
                    stream_error(format!("cannot wait for the producer's stream {stream}"), e)
                })?;
            }
            return Ok(a);
        }
        let ordered = match producer {
            super::dlpack::Producer::Ordered(ordered) => ordered,
            super::dlpack::Producer::Current(stream) => {
                // As a CUDA Array Interface import: the consumer's stream waits for the
                // producer's (an event), or the host for it, as the options say.
                a.0.descriptor.set_stream(S::stream_entry(stream));
                a.prepare_device(StreamSource::ExchangeTable)?;
                a.check_claimed_device(device_id)?;
                if stream.is_some() && options.sync && !crate::sync::ignore_streams() {
                    if options.mode == crate::sync::SyncMode::Synchronize {
                        // Any stream may use the data afterwards, as after `__dlpack__`.
                        if a.0.sync_plan == SyncPlan::Nothing(NoSyncReason::SameStream) {
                            a.wait_for_the_producer()?;
                        }
                    } else {
                        // The data is ready on the consumer's stream: the view's own exports
                        // say so, as after `__dlpack__`.
                        a.0.descriptor
                            .set_stream(S::stream_entry(Some(options.consumer.stream())));
                    }
                }
                return Ok(a);
            }
        };
        a.prepare_device(StreamSource::Descriptor)?;
        a.check_claimed_device(device_id)?;
        a.0.sync_plan = SyncPlan::Nothing(match (options.sync, ordered) {
            (false, _) => NoSyncReason::Disabled,
            (true, false) => NoSyncReason::Ignored,
            (true, true) => NoSyncReason::ProducerOrdered,
        });
        if ordered {
            if options.mode == crate::sync::SyncMode::Synchronize {
                a.wait_for_the_producer()?;
            } else {
                a.order_default_stream_across_devices()?;
            }
            // The data is ready on the consumer's stream (after a host wait, on every stream):
            // the view's own exports say so, so that their consumers order after it.
            if options.mode == crate::sync::SyncMode::Enqueue {
                a.0.descriptor
                    .set_stream(S::stream_entry(Some(options.consumer.stream())));
            }
        }
        Ok(a)
    }

    /// A DLPack tensor's `device_id` must be the device the driver finds its pointer on.
    fn check_claimed_device(&self, claimed: Option<u32>) -> PyResult<()> {
        if let (Some(claimed), Some(found)) = (claimed, self.data_device())
            && claimed != found
        {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "DLPack tensor field `dl_tensor.device` names device {claimed}, but the driver says `data` = {:#x} is memory of device {found}",
                self.ptr()
            )));
        }
        Ok(())
    }

    /// [`SyncMode::Synchronize`](crate::sync::SyncMode::Synchronize) after a DLPack import:
    /// the host waits for the stream the producer ordered (on the data's device, for a default
    /// stream), so that any stream may use the data afterwards.
    fn wait_for_the_producer(&mut self) -> PyResult<()> {
        let consumer = self.0.options.consumer;
        let device = match self.data_device() {
            Some(d) => d,
            None => self.consumer_device()?,
        };
        crate::cuda::synchronize_stream_on(consumer, Some(device)).map_err(|e| {
            stream_error(
                format!("cannot wait for stream {consumer}, which the producer ordered"),
                e,
            )
        })
    }

    /// After a DLPack import on a default stream: that stream was the data's device's for the
    /// producer, and is the consumer's device's for the consumer.
    fn order_default_stream_across_devices(&mut self) -> PyResult<()> {
        let consumer = self.0.options.consumer;
        let Some(data) = self.data_device() else {
            return Ok(());
        };
        if matches!(consumer.stream(), Stream::Handle(_)) || self.consumer_device()? == data {
            return Ok(());
        }
        let device = self.consumer_device()?;
        crate::cuda::order_after_on(consumer, Some(device), consumer, Some(data)).map_err(|e| {
            stream_error(
                format!(
                    "cannot order device {device}'s stream {consumer} after device {data}'s, where the producer left the data"
                ),
                e,
            )
        })
    }

    /// Decides what to do about the producer's stream, checks the pointer, and does it; errors
    /// name the stream as `source` gave it.
    fn prepare_device(&mut self, source: StreamSource) -> PyResult<()> {
        let o = &self.0.options;
        self.0.sync_plan = crate::sync::plan(
            self.stream(),
            o.consumer.stream(),
            o.mode,
            o.sync,
            crate::sync::ignore_streams(),
        );
        self.apply_with_driver(source)?;
        Ok(())
    }

    /// Pointer checks, then the sync plan, with the driver.
    fn apply_with_driver(&mut self, source: StreamSource) -> PyResult<()> {
        use crate::cuda;
        if self.0.options.check_pointer {
            self.0.attributes = cuda::check_device_pointer(self.ptr(), self.0.layout.extent())?;
        }
        // The producer's default stream (1, 2) is its device's, the data's: with another
        // device current, the consumer's `1` is another stream.
        if let (SyncPlan::Nothing(NoSyncReason::SameStream), Some(data)) =
            (self.0.sync_plan, self.data_device())
            && self.consumer_device()? != data
        {
            self.0.sync_plan =
                crate::sync::across_devices(self.0.sync_plan, self.stream(), self.0.options.mode);
        }
        if !matches!(self.0.sync_plan, SyncPlan::Nothing(_)) {
            // The consumer's default streams are those of its device. (An import that orders
            // nothing makes no driver call: its device is found when a copy needs it.)
            let plan = self.0.sync_plan;
            let device = self
                .consumer_device()
                .map_err(|e| sync_error(plan, source, e))?;
            let data = self.data_device();
            // SAFETY: the plan names the producer's stream, which its descriptor gave and the
            // import trusts as it trusts the data pointer (the producer answers for both: see
            // `from_interface`'s contract), and the consumer's, a `LiveStream`.
            cuda::with_device(device, || unsafe { cuda::execute(self.0.sync_plan, data) })
                .map_err(|e| sync_error(self.0.sync_plan, source, e))?;
        }
        Ok(())
    }

    /// The data's device, where the pointer check found it.
    fn data_device(&self) -> Option<u32> {
        self.0.attributes.and_then(|a| a.device_ordinal)
    }

    /// The consumer's device, fixed at the import: the current context's, or the data's when
    /// the thread has none (which is then made current only while the driver works).
    fn consumer_device(&mut self) -> Result<u32, crate::driver_error::DriverError> {
        if let Some(d) = self.0.consumer_device {
            return Ok(d);
        }
        let d = crate::cuda::current_device_or(self.data_device().unwrap_or(0))?;
        self.0.consumer_device = Some(d);
        Ok(d)
    }

    /// The consumer's device as fixed at the import, or as it would be now.
    pub(crate) fn device_for_work(&self) -> Result<u32, crate::driver_error::DriverError> {
        match self.0.consumer_device {
            Some(d) => Ok(d),
            None => crate::cuda::current_device_or(self.data_device().unwrap_or(0)),
        }
    }

    /// The validated descriptor. A DLPack import makes it when first asked (its shape and
    /// strides are the layout's): [`Self::layout`], [`Self::typestr`], [`Self::ptr`] and
    /// [`Self::readonly`] read the same without it.
    pub fn descriptor(&self) -> &ArrayDescriptor<S> {
        self.0.descriptor.whole(&self.0.layout)
    }

    /// The type string (the descriptor's `typestr`).
    pub fn typestr(&self) -> &crate::TypeStr {
        self.0.descriptor.typestr()
    }

    /// The `descr`, where a dict gave one (a DLPack tensor gives none).
    pub fn descr(&self) -> Option<&crate::Descr> {
        self.0.descriptor.descr()
    }

    /// Whether the items are `T`s (the typestr, and the `descr` where a dict gave one).
    pub(crate) fn check_element<T: Element>(&self) -> Result<(), ViewError> {
        check_dtype::<T>(self.0.descriptor.typestr(), self.0.descriptor.descr())
    }

    /// The layout (strides resolved: C order when the descriptor said None).
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }

    /// Moves out what the bytes depend on besides the owner (the descriptor dict, masks,
    /// buffers), for a caller that goes on using the bytes after the view is gone: the
    /// pointers stay valid only while it holds them and [`Self::owner`].
    ///
    /// # Safety
    /// From here on the view no longer keeps its memory alive: the caller reads or writes
    /// through it (its typed views, copies, pointers) only while the returned [`Held`] and the
    /// owner are alive.
    pub unsafe fn take_held(&mut self) -> Held {
        self.0.held.take_all_but_owner()
    }

    /// Visits the Python objects the import holds, for `__traverse__` of a class that holds
    /// it (the `cai` package's views): a view its owner keeps (`owner.view = from_dlpack(owner)`)
    /// is then collected with it.
    pub fn traverse(&self, visit: &pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        self.0.held.traverse(visit)
    }

    /// Keeps `obj` alive with the view (something else the bytes depend on: the dict an
    /// entry came from).
    pub fn hold(&mut self, obj: &Bound<'_, PyAny>) {
        self.0.held.object(obj);
    }

    /// The object kept alive for the memory, if any.
    pub fn owner<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.0.held.owner(py)
    }

    /// The data pointer.
    pub fn ptr(&self) -> u64 {
        self.0.descriptor.data().ptr
    }

    /// Whether consumers must not write.
    pub fn readonly(&self) -> bool {
        self.0.descriptor.data().readonly
    }

    /// The producer's stream, if any.
    pub fn stream(&self) -> Option<Stream> {
        S::stream_of(self.0.descriptor.stream_entry())
    }

    /// Whether the import called for synchronization with the producer's stream (there is a
    /// stream, `sync=True`, streams not ignored, another consumer stream); it was carried out
    /// during the import.
    pub fn needs_sync(&self) -> bool {
        !matches!(self.0.sync_plan, SyncPlan::Nothing(_))
    }

    /// What the import decided about the producer's stream.
    pub fn sync_plan(&self) -> SyncPlan {
        self.0.sync_plan
    }

    /// The options the import used.
    pub fn options(&self) -> &ImportOptions {
        &self.0.options
    }

    /// What releasing the import does ([`crate::sync::release_plan`]): the producer's stream
    /// waits for the consumer's work, where the import ordered the streams; `None` where it
    /// did not. `release` (on device arrays) does it.
    pub fn release_plan(&self) -> Option<ReleasePlan> {
        crate::sync::release_plan(self.0.sync_plan, self.0.options.consumer.stream())
    }

    /// What the driver said about the data pointer (pointer checks on, non-empty
    /// device arrays).
    pub fn pointer_attributes(&self) -> Option<&PointerAttributes> {
        self.0.attributes.as_ref()
    }

    /// A typed view, refused unless the typestr (byte order included) and, when present, the
    /// descr are `T`'s.
    pub fn typed<T: Element>(&self) -> Result<Typed<'_, T, S>, ViewError> {
        self.check_element::<T>()?;
        Ok(Typed {
            _claim: self.claim(Access::Read)?,
            array: self,
            _elem: PhantomData,
        })
    }

    /// The checks of a flat view for work on `stream`: `T`'s dtype, C order (one run of
    /// items), and the import's consumer stream.
    #[cfg(feature = "cudarc")]
    pub(crate) fn check_flat<T: Element>(&self, stream: Stream) -> Result<(), ViewError> {
        self.check_element::<T>()?;
        if !self.0.layout.is_c_contiguous() {
            return Err(ViewError::NotContiguous {
                shape: self.0.layout.shape().to_vec(),
                strides: self.0.layout.strides().to_vec(),
            });
        }
        if self.0.options.consumer.stream() != stream {
            return Err(ViewError::OtherStream {
                import: self.0.options.consumer.stream().as_raw(),
                view: stream.as_raw(),
            });
        }
        Ok(())
    }

    /// A typed view for writing, refused for read-only data.
    pub fn typed_mut<T: Element>(&mut self) -> Result<TypedMut<'_, T, S>, ViewError> {
        self.check_element::<T>()?;
        if self.readonly() {
            return Err(ViewError::ReadOnly);
        }
        Ok(TypedMut {
            _claim: self.claim(Access::Write)?,
            array: self,
            _elem: PhantomData,
        })
    }
}

impl<S: Space> ForeignArray<S> {
    /// The host bytes the array spans, as addresses; empty for device memory, which Rust code
    /// never references, and for an array with no items.
    fn claimed_bytes(&self) -> (u128, u128) {
        if S::DEVICE {
            return (0, 0);
        }
        claimed_range(self.ptr(), self.0.layout.extent())
    }

    /// Claims `access` to the bytes the array spans while the returned value lives
    /// (`claim.rs`).
    pub(crate) fn claim(&self, access: Access) -> Result<Scoped, ViewError> {
        let (lo, hi) = self.claimed_bytes();
        self.0.claim.scoped(lo, hi, access)
    }

    /// Claims `access` to the bytes the array spans until the import is dropped.
    pub(crate) fn claim_lasting(&self, access: Access) -> Result<(), ViewError> {
        let (lo, hi) = self.claimed_bytes();
        self.0.claim.lasting(lo, hi, access)
    }
}

/// The addresses `[lo, hi)` of the host bytes an array at `ptr` spans (its layout's
/// `extent`), as claims name them (`claim.rs`); empty for an array with no items (`None`).
pub(crate) fn claimed_range(ptr: u64, extent: Option<crate::layout::Extent>) -> (u128, u128) {
    let Some(e) = extent else {
        return (0, 0);
    };
    let ptr = i128::from(ptr);
    let lo = u128::try_from(ptr + e.lo as i128).unwrap_or(0);
    let hi = u128::try_from(ptr + e.hi as i128).unwrap_or(0);
    (lo, hi)
}

/// Whether items of this type string and `descr` are `T`s.
pub(crate) fn check_dtype<T: Element>(
    typestr: &crate::TypeStr,
    descr: Option<&crate::Descr>,
) -> Result<(), ViewError> {
    let expected = T::DTYPE.typestr();
    // An extended type reads what stands for it (bfloat16: PyTorch's bare `<V2` too), and
    // nothing else: not any opaque bytes of its size.
    let same = match expected.extended_type() {
        Some(e) => typestr.stands_for() == Some(e),
        None => expected.same_type(typestr),
    };
    if !same {
        let hint = if expected.extended_type().is_some() {
            ": a dict's opaque bytes may be any type; the type's identity comes with DLPack (or, for bfloat16, a bare '<V2' as PyTorch writes it)"
        } else if expected.kind() == typestr.kind() && expected.itemsize() == typestr.itemsize() {
            ": same kind and size but another byte order, so the values would be misread"
        } else {
            ""
        };
        return Err(ViewError::Dtype {
            rust: std::any::type_name::<T>(),
            expected: expected.to_string(),
            found: typestr.to_string(),
            hint,
        });
    }
    if let Some(descr) = descr
        && !descr.is_simple()
        && !descr.same_items(&T::DTYPE.descr())
    {
        return Err(ViewError::Descr {
            rust: std::any::type_name::<T>(),
            expected: T::DTYPE.descr().to_string(),
            found: descr.to_string(),
        });
    }
    Ok(())
}

/// Opaque bytes of one or two per item (`|V1`, `<V2`: all a dict can say of bfloat16 and the
/// float8 formats) are the extended type the owner's (the producer's) own `dtype` is, where
/// that is ml_dtypes' (a NumPy array of `ml_dtypes.bfloat16`); else a bare `<V2` is bfloat16,
/// as PyTorch and NumPy with ml_dtypes write it ([`crate::TypeStr::stands_for`]: NumPy writes
/// its own two-byte void `|V2`). A `dtype` that is no NumPy dtype (PyTorch's) is passed over;
/// an error its getter raises propagates.
fn identify<S: Space>(
    descriptor: &mut ArrayDescriptor<S>,
    owner: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let t = descriptor.typestr;
    if t.kind() != crate::Kind::Void
        || t.extended_type().is_some()
        || t.itemsize() > 2
        || super::array_struct::items_descr(&t, descriptor.descr.as_ref()).is_some()
    {
        return Ok(());
    }
    let Some(e) = owner_extended(owner, t)?.or_else(|| t.stands_for()) else {
        return Ok(());
    };
    let typestr = crate::TypeStr::extended(e);
    descriptor.typestr = typestr;
    if descriptor.descr.is_some() {
        descriptor.descr = Some(crate::Descr::simple(typestr));
    }
    Ok(())
}

/// The extended type of `itemsize` the owner's own `dtype` is, if any.
fn owner_extended(
    owner: Option<&Bound<'_, PyAny>>,
    t: crate::TypeStr,
) -> PyResult<Option<crate::Extended>> {
    let Some(obj) = owner else {
        return Ok(None);
    };
    let py = obj.py();
    let Some(dtype) = obj.getattr_opt(pyo3::intern!(py, "dtype"))? else {
        return Ok(None);
    };
    // Only a NumPy dtype says what the items are (an object with a dtype's attributes is not
    // one, whatever its `__class__` says: its type is asked); NumPy is imported wherever
    // ml_dtypes' types are.
    let is_numpy_dtype = match py.import(pyo3::intern!(py, "numpy")) {
        Ok(np) => dtype
            .get_type()
            .is_subclass(&np.getattr(pyo3::intern!(py, "dtype"))?)?,
        Err(err) if err.is_instance_of::<pyo3::exceptions::PyImportError>(py) => false,
        Err(err) => return Err(err),
    };
    if !is_numpy_dtype {
        return Ok(None);
    }
    // (A NumPy dtype has what `extended_of` asks: an error there is a real one.)
    Ok(super::array_struct::extended_of(&dtype)?.filter(|e| e.itemsize() == t.itemsize()))
}

/// A read view of a foreign array as items of `T`.
#[derive(Debug)]
pub struct Typed<'a, T, S: Space> {
    array: &'a ForeignArray<S>,
    _claim: Scoped,
    _elem: PhantomData<fn() -> T>,
}

/// A write view of a foreign array as items of `T`.
#[derive(Debug)]
pub struct TypedMut<'a, T, S: Space> {
    array: &'a mut ForeignArray<S>,
    _claim: Scoped,
    _elem: PhantomData<fn() -> T>,
}

impl<T: Element, S: Space> Typed<'_, T, S> {
    /// The array.
    pub fn array(&self) -> &ForeignArray<S> {
        self.array
    }

    /// Address of item `index`, checked against the shape.
    pub fn address_of(&self, index: &[usize]) -> Option<u64> {
        address_of(self.array, index)
    }
}

impl<T: Element, S: Space> TypedMut<'_, T, S> {
    /// The array.
    pub fn array(&self) -> &ForeignArray<S> {
        self.array
    }

    /// Address of item `index`, checked against the shape.
    pub fn address_of(&self, index: &[usize]) -> Option<u64> {
        address_of(self.array, index)
    }
}

fn address_of<S: Space>(a: &ForeignArray<S>, index: &[usize]) -> Option<u64> {
    let l = &a.0.layout;
    if index.len() != l.ndim() || index.iter().zip(l.shape()).any(|(i, d)| i >= d) {
        return None;
    }
    // In range of the validated extent, so no overflow.
    let off: isize = index
        .iter()
        .zip(l.strides())
        .map(|(&i, &s)| i as isize * s)
        .sum();
    Some(a.ptr().wrapping_add_signed(off as i64))
}

/// Reads need an element type for which every bit pattern is a valid value
/// ([`AnyBitPattern`]: integers, floats, `half::f16`, `Complex`; not `bool`, nor a struct that
/// may hold one), since foreign memory may hold any bits.
impl<'a, T: Element + AnyBitPattern> Typed<'a, T, Host> {
    /// The items in logical (C) order, each read as [`Self::get`] reads it, whatever the
    /// strides (negative, zero, any dimensionality; one item for a 0-d array, none for an
    /// empty one):
    ///
    /// ```
    /// # use cai_runtime::python::ForeignHostArray;
    /// # use cai_runtime::__private::pyo3::PyResult;
    /// fn total(a: &ForeignHostArray) -> PyResult<f64> {
    ///     Ok(a.typed::<f64>()?.iter().sum())
    /// }
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = T> + '_ {
        let array: &'a ForeignArray<Host> = self.array;
        let base = array.ptr() as usize as *const u8;
        array.layout().item_offsets().map(move |off| {
            // SAFETY: as in `get`: every item offset lies inside the validated extent of
            // memory the view keeps alive; `T` matches the typestr and accepts any bits; the
            // read is unaligned-tolerant and makes no reference to the memory.
            unsafe { (base.wrapping_offset(off) as *const T).read_unaligned() }
        })
    }

    /// The items as a slice, for data in one run in C order (C-contiguous, as NumPy's
    /// `flags.c_contiguous`: a 0-d array is one item, an empty one none); refused with
    /// [`ViewError::NotContiguous`] otherwise (read those with [`Self::iter`]), with
    /// [`ViewError::Misaligned`] for items not aligned for `T`, and with
    /// [`ViewError::Claimed`] while another import of the same bytes writes them. From then on
    /// until the import is dropped, other imports may read the bytes but not write them, as
    /// with `ForeignArray::as_array` (feature `ndarray`).
    pub fn as_slice(&self) -> Result<&[T], ViewError> {
        let (ptr, len) = self.array.run::<T>()?;
        self.array.claim_lasting(Access::Shared)?;
        // SAFETY: `run` checked that the `len` items from `ptr` are the array's (C-contiguous,
        // inside the validated extent of memory the view keeps alive and the trust boundary
        // vouches for), aligned and non-null; `T` matches the typestr and accepts any bits;
        // the claim keeps other imports from writing them while the slice borrows this view.
        Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
    }

    /// Reads item `index` (`None` outside the shape).
    pub fn get(&self, index: &[usize]) -> Option<T> {
        let addr = self.address_of(index)?;
        // SAFETY: the descriptor was validated (non-null, extent computed without overflow) and
        // describes valid memory (the import's trust boundary: the producer's contract, or the
        // `unsafe` caller's of `from_interface`), which the view keeps alive with everything it
        // depends on; the index is inside the shape; `T` matches the typestr and accepts any
        // bits (`AnyBitPattern`), and the read is unaligned-tolerant.
        Some(unsafe { (addr as usize as *const T).read_unaligned() })
    }
}

/// Writes need an element type whose bytes are all initialized ([`NoUninit`]: no padding), so
/// that the foreign memory keeps holding plain bytes for whoever reads it next
/// ([`ForeignArray::to_bytes`], NumPy).
impl<T: Element + AnyBitPattern + NoUninit> TypedMut<'_, T, Host> {
    /// The items as a mutable slice, for data in one run in C order ([`Typed::as_slice`]):
    /// from then on until the import is dropped, no other import of the same bytes may read,
    /// write or view them ([`ViewError::Claimed`]).
    pub fn as_slice_mut(&mut self) -> Result<&mut [T], ViewError> {
        let (ptr, len) = self.array.run::<T>()?;
        self.array.claim_lasting(Access::Unique)?;
        // SAFETY: as in `Typed::as_slice`; besides, the producer declared the data writable
        // (`typed_mut` refuses read-only data), the items of a C-contiguous array are
        // distinct, `T`'s bytes are all initialized (`NoUninit`), and the claim keeps every
        // other import from the bytes while the slice borrows this view mutably.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }
}

impl<T: Element + NoUninit> TypedMut<'_, T, Host> {
    /// Writes item `index`; false outside the shape.
    pub fn set(&mut self, index: &[usize], value: T) -> bool {
        let Some(addr) = self.address_of(index) else {
            return false;
        };
        // SAFETY: as in `Typed::get`, and the producer declared the data writable
        // (`typed_mut` refuses read-only data); `T`'s bytes are all initialized (`NoUninit`).
        unsafe { (addr as usize as *mut T).write_unaligned(value) };
        true
    }
}

impl ForeignArray<Host> {
    /// The address and number of the items, for a slice: refused unless they are in one run
    /// in C order and aligned for `T` (a dangling aligned pointer when there are none).
    fn run<T>(&self) -> Result<(*mut T, usize), ViewError> {
        if !self.0.layout.is_c_contiguous() {
            return Err(ViewError::NotContiguous {
                shape: self.0.layout.shape().to_vec(),
                strides: self.0.layout.strides().to_vec(),
            });
        }
        let len = self.0.layout.size();
        if len == 0 {
            return Ok((std::ptr::NonNull::dangling().as_ptr(), 0));
        }
        if !(self.ptr() as usize).is_multiple_of(align_of::<T>()) {
            return Err(ViewError::Misaligned {
                rust: std::any::type_name::<T>(),
                ptr: self.ptr(),
                strides: self.0.layout.strides().to_vec(),
                align: align_of::<T>(),
            });
        }
        Ok((self.ptr() as usize as *mut T, len))
    }

    /// The items' bytes in C order (a copy), whatever the strides; [`ViewError::Alloc`] when
    /// the copy does not fit in memory (a broadcast view's items can far exceed the memory
    /// they are in), [`ViewError::Claimed`] while another import views the bytes mutably.
    pub fn to_bytes(&self) -> Result<Vec<u8>, ViewError> {
        self.to_bytes_in(crate::layout::Order::C)
    }

    /// The items' bytes in C or F order (a copy), whatever the strides; see [`Self::to_bytes`].
    pub fn to_bytes_in(&self, order: crate::layout::Order) -> Result<Vec<u8>, ViewError> {
        let _claim = self.claim(Access::Read)?;
        let itemsize = self.0.layout.itemsize();
        let mut out = byte_vec(self.0.layout.nbytes())?;
        // F order of an array is C order of its transpose.
        let transposed;
        let layout = match order {
            crate::layout::Order::C => &self.0.layout,
            crate::layout::Order::F => {
                transposed = self.0.layout.transposed();
                &transposed
            }
        };
        for off in layout.item_offsets() {
            let p = (self.ptr() as usize as *const u8).wrapping_offset(off);
            // SAFETY: every item offset lies inside the validated extent of valid memory (the
            // trust boundary, as in `Typed::get`) that the view keeps alive; bytes have no
            // invalid values.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, itemsize) });
        }
        Ok(out)
    }
}

/// Where an import's producer stream came from, for errors to name it.
#[derive(Clone, Copy)]
enum StreamSource {
    /// The descriptor's `stream` (the CUDA Array Interface).
    Descriptor,
    /// The producer's exchange table (`current_work_stream`).
    ExchangeTable,
}

/// A failed synchronization with the producer's stream, naming the streams involved. A handle
/// the driver does not know (`CUDA_ERROR_INVALID_HANDLE`) is a bad value: ValueError.
fn sync_error(plan: SyncPlan, source: StreamSource, e: crate::driver_error::DriverError) -> PyErr {
    let producer = |s: Stream| match source {
        StreamSource::Descriptor => format!("the producer's `stream` = {s}"),
        StreamSource::ExchangeTable => {
            format!("the producer's stream {s} (its table's current_work_stream)")
        }
    };
    let what = match plan {
        SyncPlan::EventWait {
            producer: p,
            consumer,
        } => format!(
            "cannot order the consumer's stream {consumer} after {}",
            producer(p)
        ),
        SyncPlan::Synchronize { producer: p } => format!("cannot synchronize {}", producer(p)),
        SyncPlan::Nothing(_) => "cannot synchronize".to_owned(),
    };
    stream_error(what, e)
}

impl ForeignArray<Device> {
    /// Tells the producer that the consumer's work on the data is enqueued on the consumer's
    /// stream ([`ImportOptions::consumer`]): the producer's stream waits for it, without
    /// blocking the host, so that work the producer enqueues later (a write, a free) cannot
    /// overtake it. The spec asks this of a consumer that synchronized on the producer's
    /// stream; call it after enqueueing the last work on the data (it may be called again after
    /// more). Does nothing where the import ordered nothing; returns what was done. The
    /// producer's stream must be alive: it is while the producer is, which a view imported
    /// from an object keeps alive.
    pub fn release(&self) -> PyResult<Option<ReleasePlan>> {
        let Some(plan) = self.release_plan() else {
            return Ok(None);
        };
        let device = self.device_for_work()?;
        crate::cuda::with_device(device, || {
            // SAFETY: the producer's stream is the import's (trusted as `from_interface`'s
            // contract says), alive while the producer is, which the view keeps.
            unsafe {
                crate::cuda::release_import(
                    self.0.sync_plan,
                    self.0.options.consumer,
                    self.data_device(),
                )
            }
        })
        .map_err(|e| {
            stream_error(
                format!(
                    "cannot order the producer's `stream` = {} after the consumer's stream {}",
                    plan.producer, plan.consumer
                ),
                e,
            )
        })
    }

    /// The items' bytes in C order (a copy), whatever the strides: the bytes the array spans
    /// are copied to the host on the consumer's stream, which is then synchronized.
    pub fn copy_to_host(&self) -> PyResult<Vec<u8>> {
        let device = self
            .device_for_work()
            .map_err(|e| driver_error("cannot copy the array to the host", e))?;
        let consumer = self.0.options.consumer;
        let copied = crate::cuda::with_device(device, || {
            // SAFETY: the import checked that the layout's span lies in memory the driver
            // knows (pointer attributes and allocation range), which the view keeps alive; the
            // consumer's stream is a default stream (of the consumer's device, current here)
            // or one the options vouch for (a `LiveStream`).
            unsafe { crate::cuda::gather_to_host(self.ptr(), &self.0.layout, consumer.stream()) }
        });
        copied.map_err(|e| match e {
            // With `sync=False` nothing has used the consumer's stream before the copy.
            crate::error::CopyToHostError::Driver(e) => stream_error(
                format!("cannot copy on the consumer's stream {consumer}"),
                e,
            ),
            e => e.into(),
        })
    }
}

impl<'a, 'py, S: Space> FromPyObject<'a, 'py> for ForeignArray<S> {
    type Error = PyErr;

    /// `as_cuda_array(obj, sync=True)`: lets `#[pyfunction]`s take imported arrays as arguments.
    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        ForeignArray::from_object(&obj.to_owned(), true)
    }
}

impl ViewError {
    /// A backend's error, kept as the source.
    pub fn backend(
        backend: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ViewError::Backend {
            backend,
            source: std::sync::Arc::new(source),
        }
    }
}

#[cfg(all(test, feature = "bf16"))]
mod tests {
    use super::*;
    use crate::{ByteOrder, DType, DescriptorBuilder, Kind, TypeStr};

    fn two_items_of<T: Element>(dtype: &'static DType) -> Result<(), ViewError> {
        let d = DescriptorBuilder::<Host>::new(0x1000, 4, dtype, true)
            .shape(vec![2])
            .build()
            .unwrap();
        check_dtype::<T>(&d.typestr, d.descr.as_ref())
    }

    #[test]
    fn bfloat16_reads_itself_and_pytorchs_bare_v2_not_any_two_bytes() {
        static NUMPY_VOID: DType = DType::Scalar(TypeStr::void(2));
        static PYTORCH_BF16: DType = DType::Scalar(TypeStr::new(ByteOrder::Little, Kind::Void, 2));
        let bf16 = &<half::bf16 as Element>::DTYPE;
        assert!(two_items_of::<half::bf16>(bf16).is_ok());
        assert!(two_items_of::<half::bf16>(&PYTORCH_BF16).is_ok());
        let e = two_items_of::<half::bf16>(&NUMPY_VOID).unwrap_err();
        assert!(e.to_string().contains("'|V2'"), "{e}");
        // Nor is bfloat16 any two opaque bytes, or a u16.
        assert!(two_items_of::<u16>(bf16).is_err());
    }
}
