//! The descriptor model: what `__cuda_array_interface__` (device) and `__array_interface__`
//! (host) dicts hold, its validation against the spec, and a builder for exporting.
//!
//! One type serves both protocols: [`ArrayDescriptor<Device>`] ([`CudaArrayDescriptor`]) and
//! [`ArrayDescriptor<Host>`] ([`HostArrayDescriptor`]) share shape, typestr, descr, strides and
//! mask handling; only the device one has a `stream`, and only the device one may use versions
//! other than 3.

use std::fmt;

use crate::element::{DType, Element};
use crate::error::DescriptorError;
use crate::layout::{Layout, Order};
use crate::memory::{DeviceMemory, HostMemory};
use crate::stream::{LiveStream, Stream};
use crate::structured::{Descr, write_py_str, write_py_tuple};
use crate::typestr::{Kind, TypeStr};

mod sealed {
    pub trait Sealed {}
}

/// Which protocol a descriptor belongs to: [`Device`] or [`Host`].
pub trait Space:
    sealed::Sealed + Copy + fmt::Debug + PartialEq + Eq + Send + Sync + 'static
{
    /// What the `stream` entry holds: `Option<Stream>` on the device, nothing on the host.
    type StreamEntry: Clone + fmt::Debug + PartialEq + Eq + Default + Send + Sync;
    /// The Python attribute: `__cuda_array_interface__` or `__array_interface__`.
    const ATTRIBUTE: &'static str;
    /// Whether this is the CUDA Array Interface (device memory, `stream`, the zero-size rule).
    const DEVICE: bool;
    /// The versions a descriptor may declare.
    const VERSIONS: std::ops::RangeInclusive<u32>;
    /// The version exported by default.
    const DEFAULT_VERSION: u32;
    /// The stream entry as a stream, if any.
    fn stream_of(entry: &Self::StreamEntry) -> Option<Stream>;
    /// The stream entry for a stream (the host protocol ignores it).
    fn stream_entry(stream: Option<Stream>) -> Self::StreamEntry;
}

/// The CUDA Array Interface (`__cuda_array_interface__`): device memory, versions 0 to 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device;

/// The NumPy array interface (`__array_interface__`, its version 3): host memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host;

/// The host protocol has no `stream` entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NoStream;

impl sealed::Sealed for Device {}
impl sealed::Sealed for Host {}

impl Space for Device {
    type StreamEntry = Option<Stream>;
    const ATTRIBUTE: &'static str = "__cuda_array_interface__";
    const DEVICE: bool = true;
    const VERSIONS: std::ops::RangeInclusive<u32> = 0..=3;
    const DEFAULT_VERSION: u32 = 3;
    fn stream_of(entry: &Option<Stream>) -> Option<Stream> {
        *entry
    }
    fn stream_entry(stream: Option<Stream>) -> Option<Stream> {
        stream
    }
}

impl Space for Host {
    type StreamEntry = NoStream;
    const ATTRIBUTE: &'static str = "__array_interface__";
    const DEVICE: bool = false;
    const VERSIONS: std::ops::RangeInclusive<u32> = 3..=3;
    const DEFAULT_VERSION: u32 = 3;
    fn stream_of(_: &NoStream) -> Option<Stream> {
        None
    }
    fn stream_entry(_: Option<Stream>) -> NoStream {
        NoStream
    }
}

/// The `data` entry: `(pointer, read-only flag)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Data {
    /// Address of the first item; 0 for arrays with no items.
    pub ptr: u64,
    /// Whether consumers must not write.
    pub readonly: bool,
}

/// A descriptor of either protocol. Fields are public so that foreign descriptors can be
/// represented as received; [`ArrayDescriptor::validate`] checks every rule of the spec, and
/// [`DescriptorBuilder`] only builds valid ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayDescriptor<S: Space> {
    /// `shape`: size of each dimension.
    pub shape: Vec<usize>,
    /// `typestr`.
    pub typestr: TypeStr,
    /// `descr`, when given.
    pub descr: Option<Descr>,
    /// `data`.
    pub data: Data,
    /// `strides` in bytes; `None` means C-contiguous.
    pub strides: Option<Vec<isize>>,
    /// `mask`: a descriptor of the same protocol whose items say which items are valid.
    pub mask: Option<Box<ArrayDescriptor<S>>>,
    /// `version`.
    pub version: u32,
    /// `stream` (device only).
    pub stream: S::StreamEntry,
}

/// A `__cuda_array_interface__` descriptor.
pub type CudaArrayDescriptor = ArrayDescriptor<Device>;
/// An `__array_interface__` descriptor.
pub type HostArrayDescriptor = ArrayDescriptor<Host>;

impl<S: Space> ArrayDescriptor<S> {
    /// The layout described: explicit strides, or C order when `strides` is `None`.
    pub fn layout(&self) -> Result<Layout, DescriptorError> {
        let itemsize = self.typestr.itemsize();
        match &self.strides {
            Some(s) => Layout::strided(&self.shape, s, itemsize),
            None => Layout::c_contiguous(&self.shape, itemsize),
        }
        .map_err(DescriptorError::from)
    }

    /// The stream to synchronize on, if any (always `None` on the host).
    pub fn stream(&self) -> Option<Stream> {
        S::stream_of(&self.stream)
    }

    /// Every violation of the spec, in key order; empty when valid.
    pub fn violations(&self) -> Vec<DescriptorError> {
        self.violations_and_layout().0
    }

    /// Every violation, and the layout when it could be computed (so that callers that need
    /// both compute it once).
    pub fn violations_and_layout(&self) -> (Vec<DescriptorError>, Option<Layout>) {
        let mut out = Vec::new();
        let layout = self.collect_violations(&mut out);
        (out, layout)
    }

    /// The first violation of the spec, if any.
    pub fn validate(&self) -> Result<(), DescriptorError> {
        match self.violations().into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The layout when the descriptor breaks no rule, else `None`: [`Self::violations_and_layout`]
    /// for callers that only need to know whether it is valid (no error is built).
    pub fn valid_layout(&self) -> Option<Layout> {
        let layout = self.layout().ok()?;
        let mut out = Vec::new();
        self.collect_violations_with(Ok(&layout), &mut out);
        out.is_empty().then_some(layout)
    }

    fn collect_violations(&self, out: &mut Vec<DescriptorError>) -> Option<Layout> {
        match self.layout() {
            Ok(layout) => {
                self.collect_violations_with(Ok(&layout), out);
                Some(layout)
            }
            Err(e) => {
                self.collect_violations_with(Err(e), out);
                None
            }
        }
    }

    /// Every violation, given the layout or why there is none.
    fn collect_violations_with(
        &self,
        layout: Result<&Layout, DescriptorError>,
        out: &mut Vec<DescriptorError>,
    ) {
        if !S::VERSIONS.contains(&self.version) {
            out.push(DescriptorError::Version {
                version: self.version,
                attribute: S::ATTRIBUTE,
                supported: S::VERSIONS,
            });
        }
        match layout {
            Err(e) => out.push(e),
            Ok(layout) => {
                let empty = layout.is_empty();
                // A CUDA Array Interface rule; NumPy's host interface has no such rule (NumPy
                // itself exports real pointers for empty arrays).
                if empty && self.data.ptr != 0 && S::DEVICE {
                    out.push(DescriptorError::ZeroSizeData {
                        ptr: self.data.ptr,
                        shape: self.shape.clone(),
                    });
                }
                if !empty && self.data.ptr == 0 {
                    out.push(DescriptorError::NullData {
                        shape: self.shape.clone(),
                    });
                }
            }
        }
        if let Some(descr) = &self.descr {
            let itemsize = self.typestr.itemsize();
            if descr.itemsize() != Some(itemsize) {
                out.push(DescriptorError::DescrSize {
                    descr: descr.clone(),
                    descr_size: descr.itemsize(),
                    typestr: self.typestr,
                    itemsize,
                });
            }
        }
        if let Some(stream) = self.stream()
            && self.version < 3
        {
            out.push(DescriptorError::StreamNeedsV3 {
                stream,
                version: self.version,
            });
        }
        if let Some(mask) = &self.mask {
            let mut inner = Vec::new();
            mask.collect_violations(&mut inner);
            out.extend(
                inner
                    .into_iter()
                    .map(|e| DescriptorError::Mask(Box::new(e))),
            );
            // cuDF's bit masks (`t` kind) pack items into bits, so their shape differs.
            if mask.typestr.kind() != Kind::BitField && !broadcasts_to(&mask.shape, &self.shape) {
                out.push(DescriptorError::MaskShape {
                    mask_shape: mask.shape.clone(),
                    shape: self.shape.clone(),
                });
            }
        }
    }

    /// Checks that the described bytes lie inside the allocation `[alloc_start, alloc_start +
    /// alloc_len)` that the data pointer points into.
    pub fn check_within(&self, alloc_start: u64, alloc_len: usize) -> Result<(), DescriptorError> {
        let layout = self.layout()?;
        let Some(extent) = layout.extent() else {
            return Ok(());
        };
        let offset = i128::from(self.data.ptr) - i128::from(alloc_start);
        let fits = isize::try_from(offset)
            .map(|o| layout.fits_in(o, alloc_len))
            .unwrap_or(false);
        if fits {
            Ok(())
        } else {
            Err(DescriptorError::OutOfBounds {
                shape: self.shape.clone(),
                strides: layout.strides().to_vec(),
                lo: offset + extent.lo as i128,
                hi: offset + extent.hi as i128,
                alloc_len,
            })
        }
    }

    /// Writes the descriptor as the Python dict literal the property returns (the mask as a
    /// nested dict). Keys in NumPy's order; `stream` only on the device at version 3 and later.
    pub fn write_python(&self, out: &mut impl fmt::Write) -> fmt::Result {
        out.write_str("{'shape': ")?;
        write_py_tuple(out, self.shape.iter())?;
        out.write_str(", 'typestr': ")?;
        write_py_str(out, &self.typestr.to_string())?;
        if let Some(d) = &self.descr {
            out.write_str(", 'descr': ")?;
            d.write_python(out)?;
        }
        let readonly = if self.data.readonly { "True" } else { "False" };
        write!(out, ", 'data': ({}, {readonly})", self.data.ptr)?;
        out.write_str(", 'strides': ")?;
        match &self.strides {
            None => out.write_str("None")?,
            Some(s) => write_py_tuple(out, s.iter())?,
        }
        if let Some(mask) = &self.mask {
            out.write_str(", 'mask': ")?;
            mask.write_python(out)?;
        }
        write!(out, ", 'version': {}", self.version)?;
        if S::DEVICE && self.version >= 3 {
            match self.stream() {
                None => out.write_str(", 'stream': None")?,
                Some(s) => write!(out, ", 'stream': {s}")?,
            }
        }
        out.write_char('}')
    }
}

impl<S: Space> fmt::Display for ArrayDescriptor<S> {
    /// The Python dict literal; see [`ArrayDescriptor::write_python`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_python(f)
    }
}

/// NumPy broadcasting: `from` can be stretched to `to`.
fn broadcasts_to(from: &[usize], to: &[usize]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}

/// Builds a valid descriptor for memory being exported; what `#[derive(CudaArrayInterface)]`
/// and `#[derive(ArrayInterface)]` expand to, and usable by hand.
///
/// Defaults: one dimension covering the whole buffer, C order, writable unless the memory
/// says otherwise, the protocol's default version, no stream, no mask.
///
/// A builder made from memory (`device`, `host`) or vouched for a live stream
/// (`stream_vouched_by`) borrows them for `'a`: what it vouches for (that cai may read the bytes,
/// hand the stream to the driver) holds only while they live, so it cannot outlive them.
///
/// ```compile_fail,E0505
/// use cai_runtime::{DescriptorBuilder, Host};
/// let bytes = vec![0u8; 64];
/// let builder: DescriptorBuilder<'_, Host> = DescriptorBuilder::host(&bytes);
/// drop(bytes); // the memory goes while the builder still vouches for it
/// let _ = builder.build();
/// ```
#[derive(Clone, Debug)]
#[must_use = "call .build() to get the descriptor"]
pub struct DescriptorBuilder<'a, S: Space> {
    ptr: u64,
    byte_len: usize,
    dtype: &'static DType,
    writable: bool,
    offset: usize,
    shape: Option<Vec<usize>>,
    strides: Option<Vec<isize>>,
    order: Order,
    readonly: bool,
    version: u32,
    stream: S::StreamEntry,
    mask: Option<ArrayDescriptor<S>>,
    /// Made from a memory trait (`device`, `host`...), which vouches for the bytes.
    vouched: bool,
    /// The stream is a live stream, vouched for by a [`LiveStream`] (`stream_vouched_by`).
    stream_live: bool,
    /// The memory's own layout was taken ([`HostMemory::own_layout`]): its item size, and
    /// `Some(what)` once a setter tried to change it (which `build` refuses).
    own_layout: Option<(usize, Option<&'static str>)>,
    /// The memory and stream vouched for, borrowed.
    _borrows: std::marker::PhantomData<&'a ()>,
}

impl<'a> DescriptorBuilder<'a, Device> {
    /// Exports device memory with its own element type.
    pub fn device<M: DeviceMemory + ?Sized>(memory: &'a M) -> Self {
        Self::device_as::<M::Elem, M>(memory)
    }

    /// Exports device memory as items of `E` (the derive's `element = ...` override): the
    /// buffer's bytes are reinterpreted, and must hold a whole number of `E` when no shape
    /// is given.
    pub fn device_as<E: Element, M: DeviceMemory + ?Sized>(memory: &'a M) -> Self {
        let byte_len = memory.len().saturating_mul(size_of::<M::Elem>());
        Self {
            vouched: true,
            ..Self::new(
                memory.device_ptr(),
                byte_len,
                &E::DTYPE,
                memory.is_writable(),
            )
        }
    }

    /// The stream with pending work on the data (`None`: no synchronization needed).
    /// Exported as `None` whatever it is while [`crate::sync::export_stream_none`] is on.
    pub fn stream(mut self, stream: Option<Stream>) -> Self {
        self.stream = crate::sync::exported_stream(stream);
        self.stream_live = false;
        self
    }

    /// Says the stream given to [`Self::stream`] is `live`'s (a stream field that owns its
    /// stream vouches for it, as the derive passes it), so that cai may hand it to the driver
    /// itself (DLPack's stream handshake); a bare number, never vouched for, is only described.
    /// The builder then borrows what keeps the stream alive:
    ///
    /// ```compile_fail,E0597
    /// use cai_runtime::{DescriptorBuilder, LiveStream, RawDeviceMemory, Stream};
    /// /// Stands for something owning a stream (a `DriverStream`).
    /// struct Owner(Stream);
    /// impl Owner {
    ///     fn live(&self) -> LiveStream<'_> {
    ///         // SAFETY: stands for a stream this value owns.
    ///         unsafe { LiveStream::new(self.0) }
    ///     }
    /// }
    /// // SAFETY: only described.
    /// let memory = unsafe { RawDeviceMemory::<f32>::from_raw_parts(0x7f00_0000_0000, 4) };
    /// let builder = {
    ///     let owner = Owner(Stream::from_raw(0x5000).unwrap());
    ///     let d = DescriptorBuilder::device(&memory).stream(Some(owner.0));
    ///     d.stream_vouched_by(Some(owner.live())) // the stream's owner goes here
    /// };
    /// let _ = builder.build();
    /// ```
    pub fn stream_vouched_by(mut self, live: Option<LiveStream<'a>>) -> Self {
        self.stream_live = live.is_some_and(|l| self.stream == Some(l.stream()));
        self
    }
}

impl<'a> DescriptorBuilder<'a, Host> {
    /// Exports host memory with its own element type.
    pub fn host<M: HostMemory + ?Sized>(memory: &'a M) -> Self {
        Self::host_as::<M::Elem, M>(memory)
    }

    /// Exports host memory as items of `E`; see [`DescriptorBuilder::device_as`].
    /// Memory that carries its own layout ([`HostMemory::own_layout`]: ndarray's arrays) gives
    /// the shape, strides and offset.
    pub fn host_as<E: Element, M: HostMemory + ?Sized>(memory: &'a M) -> Self {
        let byte_len = memory.len().saturating_mul(size_of::<M::Elem>());
        let builder = Self {
            vouched: true,
            ..Self::new(
                memory.host_ptr() as usize as u64,
                byte_len,
                &E::DTYPE,
                memory.is_writable(),
            )
        };
        match memory.own_layout() {
            Some(own) => Self {
                shape: Some(own.shape),
                strides: Some(own.strides),
                offset: own.offset,
                own_layout: Some((size_of::<M::Elem>(), None)),
                ..builder
            },
            None => builder,
        }
    }
}

impl<S: Space> PartialEq for DescriptorBuilder<'_, S> {
    /// Equal builders build equal descriptors (`build` is a pure function of these fields) and
    /// vouch for the same.
    fn eq(&self, o: &Self) -> bool {
        self.same_build(o) && self.vouched == o.vouched && self.stream_live == o.stream_live
    }
}

impl<S: Space> DescriptorBuilder<'_, S> {
    /// Whether `o` builds the same descriptor, whatever either vouches for.
    pub(crate) fn same_build(&self, o: &DescriptorBuilder<'_, S>) -> bool {
        // Destructured so that a new field cannot be forgotten here: the Python export memo
        // relies on equal builders building equal descriptors.
        let DescriptorBuilder {
            ptr,
            byte_len,
            dtype,
            writable,
            offset,
            shape,
            strides,
            order,
            readonly,
            version,
            stream,
            mask,
            vouched: _,
            stream_live: _,
            own_layout,
            _borrows: _,
        } = self;
        *ptr == o.ptr
            && *byte_len == o.byte_len
            && (std::ptr::eq(*dtype, o.dtype) || **dtype == *o.dtype)
            && *writable == o.writable
            && *offset == o.offset
            && *shape == o.shape
            && *strides == o.strides
            && *order == o.order
            && *readonly == o.readonly
            && *version == o.version
            && *stream == o.stream
            && *mask == o.mask
            && *own_layout == o.own_layout
    }
}

impl<S: Space> DescriptorBuilder<'_, S> {
    /// Exports `byte_len` bytes at `ptr` holding items described by `dtype` (vouching for
    /// nothing: cai only describes them).
    pub fn new(ptr: u64, byte_len: usize, dtype: &'static DType, writable: bool) -> Self {
        DescriptorBuilder {
            ptr,
            byte_len,
            dtype,
            writable,
            offset: 0,
            shape: None,
            strides: None,
            order: Order::C,
            readonly: false,
            version: S::DEFAULT_VERSION,
            stream: S::StreamEntry::default(),
            mask: None,
            vouched: false,
            stream_live: false,
            own_layout: None,
            _borrows: std::marker::PhantomData,
        }
    }

    /// This builder for comparing (the Python export memo's key), vouching for nothing; with
    /// whether this one vouches for its bytes and stream, which equal keys must agree on too.
    #[cfg(feature = "python")]
    pub(crate) fn memo_key(&self) -> (DescriptorBuilder<'static, S>, bool, bool) {
        let key = DescriptorBuilder {
            ptr: self.ptr,
            byte_len: self.byte_len,
            dtype: self.dtype,
            writable: self.writable,
            offset: self.offset,
            shape: self.shape.clone(),
            strides: self.strides.clone(),
            order: self.order,
            readonly: self.readonly,
            version: self.version,
            stream: self.stream.clone(),
            mask: self.mask.clone(),
            vouched: false,
            stream_live: false,
            own_layout: self.own_layout,
            _borrows: std::marker::PhantomData,
        };
        (key, self.vouched, self.stream_live)
    }

    /// Whether the bytes are vouched for by an `unsafe` memory trait ([`DeviceMemory`],
    /// [`HostMemory`]: made by `device`, `host` and their `_as` forms, as the derives make
    /// it), so that cai itself may read the exported extent (a DLPack copy); one made by
    /// [`DescriptorBuilder::new`] from a bare address is only described, never read.
    pub fn vouched(&self) -> bool {
        self.vouched
    }

    /// Whether the stream is vouched for as live (`DescriptorBuilder::<Device>::stream_vouched_by`;
    /// never on the host, which has no stream).
    pub fn stream_live(&self) -> bool {
        self.stream_live
    }

    /// The items' dtype, chosen at run time (as `device_as` / `host_as` choose one at compile
    /// time): the buffer's bytes are reinterpreted, and must hold a whole number of items when
    /// no shape is given.
    pub fn dtype(mut self, dtype: &'static DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// The shape (default: one dimension covering the buffer).
    pub fn shape(mut self, shape: impl Into<Vec<usize>>) -> Self {
        self.shape = Some(shape.into());
        self.overrides("`shape`")
    }

    /// Notes that a setter changed what memory with its own layout gave (refused by `build`).
    fn overrides(mut self, what: &'static str) -> Self {
        if let Some((_, given)) = &mut self.own_layout {
            given.get_or_insert(what);
        }
        self
    }

    /// Bytes from the start of the buffer to the first item (default 0). With negative
    /// strides the first item is not the lowest address, so the data pointer lies inside.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self.overrides("`offset`")
    }

    /// Explicit byte strides (default: contiguous in [`DescriptorBuilder::order`]).
    pub fn strides(mut self, strides: Option<Vec<isize>>) -> Self {
        self.strides = strides;
        self.overrides("`strides`")
    }

    /// Order of a contiguous layout when no strides are given (default C).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self.overrides("`order`")
    }

    /// Exports the data read-only (always so when the memory is not writable).
    pub fn readonly(mut self, readonly: bool) -> Self {
        self.readonly = readonly;
        self
    }

    /// The protocol version to declare (device: 3 by default, 2 for older consumers).
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// A mask descriptor.
    pub fn mask(mut self, mask: Option<ArrayDescriptor<S>>) -> Self {
        self.mask = mask;
        self
    }

    /// Checks everything and builds the descriptor: the layout fits the buffer, arithmetic
    /// does not overflow, zero-size arrays export pointer 0, `strides` is `None` exactly when
    /// C-contiguous, and the result satisfies [`ArrayDescriptor::validate`].
    pub fn build(self) -> Result<ArrayDescriptor<S>, DescriptorError> {
        self.build_with_layout().map(|(d, _)| d)
    }

    /// [`Self::build`], with the layout it checked (what [`ArrayDescriptor::layout`] would
    /// compute again), for exporters that need both.
    pub fn build_with_layout(mut self) -> Result<(ArrayDescriptor<S>, Layout), DescriptorError> {
        let itemsize = self.dtype.itemsize();
        // Memory with its own layout is exported as it is: its shape counts its own items, and
        // its span may hold bytes it does not own (another view's, between its items).
        match self.own_layout {
            Some((_, Some(given))) => return Err(DescriptorError::OwnLayout { given }),
            Some((own, None)) if own != itemsize => {
                return Err(DescriptorError::OwnLayout {
                    given: "an element type of another size",
                });
            }
            _ => {}
        }
        let shape = match self.shape.take() {
            Some(s) => s,
            None => {
                let rest = self.byte_len.saturating_sub(self.offset);
                if itemsize == 0 || !rest.is_multiple_of(itemsize) {
                    return Err(DescriptorError::BufferNotWhole {
                        byte_len: rest,
                        typestr: self.dtype.typestr(),
                        itemsize,
                    });
                }
                vec![rest / itemsize]
            }
        };
        let layout = match &self.strides {
            Some(s) => Layout::strided(&shape, s, itemsize)?,
            None => Layout::contiguous(&shape, itemsize, self.order)?,
        };
        let offset = isize::try_from(self.offset).unwrap_or(isize::MAX);
        if self.offset > self.byte_len || !layout.fits_in(offset, self.byte_len) {
            let e = layout
                .extent()
                .unwrap_or(crate::layout::Extent { lo: 0, hi: 0 });
            let strides = layout.strides().to_vec();
            return Err(self.out_of_bounds(shape, strides, e.lo, e.hi));
        }
        let (is_empty, exported_strides) = (
            layout.is_empty(),
            layout.exported_strides().map(<[isize]>::to_vec),
        );
        // The layout the descriptor reads back as: a C-contiguous one exports no strides, and
        // is read with C strides (which differ from those built only where a dimension has at
        // most one item).
        let layout = match exported_strides {
            None if self.strides.is_some() || self.order != Order::C => {
                Layout::c_contiguous(&shape, itemsize)?
            }
            _ => layout,
        };
        let ptr = if is_empty {
            0
        } else {
            // In bounds (checked above), so the addition cannot leave the allocation.
            self.ptr.wrapping_add(self.offset as u64)
        };
        // What the checks above do not cover; the rest holds by construction (the layout fits,
        // typestr and descr come from one dtype). A hand-made mask is validated in full below.
        if !S::VERSIONS.contains(&self.version) {
            return Err(DescriptorError::Version {
                version: self.version,
                attribute: S::ATTRIBUTE,
                supported: S::VERSIONS,
            });
        }
        if let Some(stream) = S::stream_of(&self.stream)
            && self.version < 3
        {
            return Err(DescriptorError::StreamNeedsV3 {
                stream,
                version: self.version,
            });
        }
        if ptr == 0 && !is_empty {
            return Err(DescriptorError::NullData { shape });
        }
        let has_mask = self.mask.is_some();
        let (typestr, descr) = (self.dtype.typestr(), self.dtype.descr());
        // A struct's fields must fit its size: `DType`'s fields are public, so a hand-made one
        // could describe more bytes than its items have (a consumer would read past them).
        if matches!(self.dtype, DType::Struct(_)) && descr.itemsize() != Some(typestr.itemsize()) {
            return Err(DescriptorError::DescrSize {
                descr_size: descr.itemsize(),
                descr,
                typestr,
                itemsize: typestr.itemsize(),
            });
        }
        let descriptor = ArrayDescriptor {
            typestr,
            descr: Some(descr),
            data: Data {
                ptr,
                readonly: self.readonly || !self.writable,
            },
            strides: exported_strides,
            shape,
            mask: self.mask.map(Box::new),
            version: self.version,
            stream: self.stream,
        };
        if has_mask {
            descriptor.validate()?;
        }
        debug_assert_eq!(descriptor.validate(), Ok(()));
        debug_assert_eq!(descriptor.layout().as_ref(), Ok(&layout));
        Ok((descriptor, layout))
    }

    fn out_of_bounds(
        &self,
        shape: Vec<usize>,
        strides: Vec<isize>,
        lo: isize,
        hi: isize,
    ) -> DescriptorError {
        DescriptorError::OutOfBounds {
            shape,
            strides,
            lo: self.offset as i128 + lo as i128,
            hi: self.offset as i128 + hi as i128,
            alloc_len: self.byte_len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::RawDeviceMemory;

    #[test]
    fn a_hand_made_struct_dtype_whose_fields_leave_its_size_is_refused() {
        use crate::element::{FieldDType, StructDType};
        static F8: DType = DType::Scalar(TypeStr::new(
            crate::typestr::ByteOrder::Little,
            crate::typestr::Kind::Float,
            8,
        ));
        static FIELDS: [FieldDType; 1] = [FieldDType {
            name: "a",
            offset: 4096,
            dtype: &F8,
            shape: &[],
        }];
        static BOGUS: DType = DType::Struct(StructDType {
            size: 4,
            fields: &FIELDS,
        });
        let bytes = vec![0u8; 64];
        let e = DescriptorBuilder::host(&bytes)
            .dtype(&BOGUS)
            .shape([16])
            .build()
            .unwrap_err();
        assert!(matches!(e, DescriptorError::DescrSize { .. }), "{e}");
    }

    fn dev(len: usize) -> RawDeviceMemory<f32> {
        // SAFETY: never dereferenced; these tests only compute descriptors.
        unsafe { RawDeviceMemory::from_raw_parts(0x7f00_0000_0000, len) }
    }

    /// `items` f32s running backwards (stride -4) from byte `offset` of `dev(6)`.
    fn backwards(items: usize, offset: usize) -> Result<CudaArrayDescriptor, DescriptorError> {
        DescriptorBuilder::device(&dev(6))
            .shape([items])
            .strides(Some(vec![-4]))
            .offset(offset)
            .build()
    }

    /// The parsers build a descriptor's `stream` entry through `Space::stream_entry`: the
    /// device protocol keeps the stream it was given. (The host one has no entry: its
    /// `NoStream` has one value, so there is nothing there a test could catch.)
    #[test]
    fn device_stream_entries_keep_their_stream() {
        let handle = Stream::from_raw(0xdead_beef).unwrap();
        for s in [
            None,
            Some(Stream::LegacyDefault),
            Some(Stream::PerThreadDefault),
            Some(handle),
        ] {
            assert_eq!(Device::stream_of(&Device::stream_entry(s)), s);
        }
    }

    #[test]
    fn default_is_one_dimension_c_order_v3() {
        let d = DescriptorBuilder::device(&dev(6)).build().unwrap();
        assert_eq!(
            d.to_string(),
            "{'shape': (6,), 'typestr': '<f4', 'descr': [('', '<f4')], 'data': (139637976727552, False), 'strides': None, 'version': 3, 'stream': None}"
        );
    }

    #[test]
    fn f_order_exports_strides_and_stream() {
        let d = DescriptorBuilder::device(&dev(6))
            .shape([2, 3])
            .order(Order::F)
            .stream(Some(Stream::PerThreadDefault))
            .build()
            .unwrap();
        assert_eq!(d.strides, Some(vec![4, 8]));
        assert_eq!(d.stream(), Some(Stream::PerThreadDefault));
        // F order of shape (2, 1) is also C-contiguous: no strides exported, and the layout
        // returned is the one the descriptor reads back as (C strides, not F's (4, 8)).
        let (d, layout) = DescriptorBuilder::device(&dev(6))
            .shape([2, 1])
            .order(Order::F)
            .build_with_layout()
            .unwrap();
        assert_eq!(
            (d.strides.as_deref(), layout.strides()),
            (None, &[4isize, 4][..])
        );
    }

    #[test]
    fn zero_size_exports_null_pointer() {
        let d = DescriptorBuilder::device(&dev(6))
            .shape([0, 3])
            .build()
            .unwrap();
        assert_eq!(d.data.ptr, 0);
    }

    #[test]
    fn shape_larger_than_buffer_is_refused() {
        let e = DescriptorBuilder::device(&dev(6))
            .shape([3, 3])
            .build()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "`shape` = (3, 3) with `strides` = (12, 4) touches bytes [0, 36) but the buffer holds 24 bytes"
        );
    }

    #[test]
    fn offset_allows_negative_strides() {
        let d = backwards(6, 20).unwrap();
        assert_eq!(d.data.ptr, 0x7f00_0000_0000 + 20);
        d.check_within(0x7f00_0000_0000, 24).unwrap();
        let e = backwards(6, 16).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`shape` = (6,) with `strides` = (-4,) touches bytes [-4, 20) but the buffer holds 24 bytes"
        );
        // An empty array may start at the end of its buffer (NumPy's `a[6:]` of 6 items:
        // exported with pointer 0), not past it.
        let empty_at = |offset| {
            DescriptorBuilder::device(&dev(6))
                .offset(offset)
                .shape([0])
                .build()
        };
        assert_eq!(empty_at(24).unwrap().data.ptr, 0);
        assert!(empty_at(25).is_err());
    }

    #[test]
    fn check_within_names_the_bytes_relative_to_the_allocation() {
        // Items 4 bytes apart, 3 of them, backwards from 8 bytes into a 12-byte allocation.
        let d = backwards(3, 8).unwrap();
        d.check_within(0x7f00_0000_0000, 12).unwrap();
        // The same array seen from an allocation starting 4 bytes later: bytes [-4, 8).
        let e = d.check_within(0x7f00_0000_0004, 12).unwrap_err();
        assert!(
            matches!(
                e,
                DescriptorError::OutOfBounds {
                    lo: -4,
                    hi: 8,
                    alloc_len: 12,
                    ..
                }
            ),
            "{e:?}"
        );
        // And from one 4 bytes earlier, too short: bytes [4, 16) of 12.
        let e = d.check_within(0x7eff_ffff_fffc, 12).unwrap_err();
        assert!(
            matches!(e, DescriptorError::OutOfBounds { lo: 4, hi: 16, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn read_only_memory_exports_read_only_data() {
        let ro = dev(6).read_only();
        for d in [
            DescriptorBuilder::device(&ro).build().unwrap(),
            DescriptorBuilder::device(&&ro).build().unwrap(),
            DescriptorBuilder::device(&std::sync::Arc::new(ro))
                .build()
                .unwrap(),
        ] {
            assert!(d.data.readonly);
            assert_eq!(
                (d.data.ptr, d.shape.as_slice()),
                (0x7f00_0000_0000, &[6usize][..])
            );
        }
        let rw = dev(6);
        assert!(
            !DescriptorBuilder::device(&rw)
                .build()
                .unwrap()
                .data
                .readonly
        );
        assert!(
            !DescriptorBuilder::device(&std::sync::Arc::new(rw))
                .build()
                .unwrap()
                .data
                .readonly
        );
    }

    /// The Python export memo reuses a descriptor while the builder is equal: every field
    /// must count.
    #[test]
    fn builders_differing_in_any_field_are_unequal() {
        let f4 = &<f32 as crate::element::Element>::DTYPE;
        let base = || DescriptorBuilder::<Device>::new(0x1000, 64, f4, true);
        // An equal dtype held in another place is the same dtype (in a debug build: an
        // optimized one may merge the two constants into one place).
        static F4_ELSEWHERE: DType = <f32 as crate::element::Element>::DTYPE;
        assert!(base() == DescriptorBuilder::new(0x1000, 64, &F4_ELSEWHERE, true));
        let mask = || base().shape([4]).build().unwrap();
        let changed = [
            DescriptorBuilder::new(0x2000, 64, f4, true),
            DescriptorBuilder::new(0x1000, 32, f4, true),
            DescriptorBuilder::new(0x1000, 64, &<i32 as crate::element::Element>::DTYPE, true),
            DescriptorBuilder::new(0x1000, 64, f4, false),
            base().offset(4),
            base().shape([4]),
            base().strides(Some(vec![4])),
            base().order(Order::F),
            base().readonly(true),
            base().version(2),
            base().stream(Some(Stream::LegacyDefault)),
            base().mask(Some(mask())),
        ];
        for (i, b) in changed.iter().enumerate() {
            assert!(base() != *b, "field {i} is ignored");
        }
        assert!(base().mask(Some(mask())) == base().mask(Some(mask())));
    }

    #[test]
    fn stream_needs_version_3() {
        let e = DescriptorBuilder::device(&dev(6))
            .version(2)
            .stream(Some(Stream::LegacyDefault))
            .build()
            .unwrap_err();
        assert!(
            matches!(e, DescriptorError::StreamNeedsV3 { version: 2, .. }),
            "{e}"
        );
        let v2 = DescriptorBuilder::device(&dev(6))
            .version(2)
            .build()
            .unwrap();
        assert!(!v2.to_string().contains("stream"));
    }

    #[test]
    fn validation_reports_every_violation() {
        let mut d = DescriptorBuilder::device(&dev(6)).build().unwrap();
        d.version = 7;
        d.data.ptr = 0;
        d.descr = Some(Descr::simple(TypeStr::parse("<f8").unwrap()));
        let v = d.violations();
        assert_eq!(v.len(), 3, "{v:?}");
        assert_eq!(v[0].key(), "version");
        assert_eq!(v[1].key(), "data");
        assert_eq!(v[2].key(), "descr");
    }

    #[test]
    fn valid_layout_is_the_layout_of_exactly_the_valid_descriptors() {
        let valid = DescriptorBuilder::device(&dev(6))
            .shape([2, 3])
            .build()
            .unwrap();
        let broken: [fn(&mut CudaArrayDescriptor); 7] = [
            |d| d.version = 7,
            |d| d.data.ptr = 0,
            |d| d.shape = vec![0, 3],
            |d| d.shape = vec![usize::MAX, 3],
            |d| d.strides = Some(vec![4]),
            |d| d.descr = Some(Descr::simple(TypeStr::parse("<f8").unwrap())),
            |d| (d.version, d.stream) = (2, Some(Stream::PerThreadDefault)),
        ];
        let (none, layout) = valid.violations_and_layout();
        assert!(none.is_empty());
        assert_eq!(valid.valid_layout(), layout);
        for (i, breaks) in broken.iter().enumerate() {
            let mut d = valid.clone();
            breaks(&mut d);
            let (violations, _) = d.violations_and_layout();
            assert!(!violations.is_empty(), "case {i}");
            assert_eq!(d.valid_layout(), None, "case {i}: {violations:?}");
        }
    }

    #[test]
    fn mask_must_broadcast() {
        let mask = DescriptorBuilder::device(&dev(6))
            .shape([3, 2])
            .build()
            .unwrap();
        let e = DescriptorBuilder::device(&dev(6))
            .shape([2, 3])
            .mask(Some(mask))
            .build()
            .unwrap_err();
        assert_eq!(e.key(), "mask");
        let row = DescriptorBuilder::device(&dev(3))
            .shape([1, 3])
            .build()
            .unwrap();
        DescriptorBuilder::device(&dev(6))
            .shape([2, 3])
            .mask(Some(row))
            .build()
            .unwrap();
    }

    #[test]
    fn check_within_allocation() {
        let d = DescriptorBuilder::device(&dev(6)).build().unwrap();
        let base = d.data.ptr;
        d.check_within(base, 24).unwrap();
        d.check_within(base - 8, 32).unwrap();
        assert_eq!(d.check_within(base, 20).unwrap_err().key(), "shape");
        assert!(d.check_within(base + 4, 100).is_err());
    }
}
