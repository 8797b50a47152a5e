//! [`Storage`]: a GDP-3 storage. Buffers (host, device, or both mirrored) shared by every view
//! of one allocation, plus each view's own [`Geometry`] (layout, offset, halo, dims). Exports
//! descriptors for both protocols; the Python class in the `cai` package wraps it.

use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::StorageError;
use crate::alloc::AllocationPlan;
use crate::dims::{Dim, PerDim};
use crate::geometry::{Geometry, IndexError, IndexItem, Selection, layout_entries};
use crate::host_buffer::{AllocError, HostBuffer};
use crate::mirror::{SyncState, SyncStatus};
use crate::params::{Managed, ResolvedParams, StorageDevice};
use cai_runtime::Descr;
use cai_runtime::DescriptorError;
use cai_runtime::Layout;
use cai_runtime::{ArrayDescriptor, CudaArrayDescriptor, Data, HostArrayDescriptor, Space};
use cai_runtime::{Kind, TypeStr};

/// The element type of a storage, as NumPy spells it: made by [`ElementType::new`], which
/// refuses what raw memory cannot hold. Two are equal when they hold the same items: the same
/// type ([`TypeStr::same_type`]) and, for structured types, the same fields at the same offsets,
/// however the padding is named ([`Descr::same_items`]).
#[derive(Clone, Debug)]
pub struct ElementType {
    pub(crate) typestr: TypeStr,
    pub(crate) descr: Option<Descr>,
}

impl ElementType {
    /// A plain element type; refuses objects anywhere in it (`O`, a field or a nested field
    /// of type `O`: Python references cannot live in a storage's raw memory) and zero-size
    /// items.
    pub fn new(typestr: TypeStr, descr: Option<Descr>) -> Result<ElementType, StorageError> {
        if typestr.kind() == Kind::Object || typestr.itemsize() == 0 {
            return Err(StorageError::Dtype(typestr.to_string()));
        }
        if let Some(d) = descr.as_ref().filter(|d| d.has_object()) {
            return Err(StorageError::Dtype(d.to_string()));
        }
        Ok(ElementType { typestr, descr })
    }

    /// Bytes per item.
    pub fn itemsize(&self) -> usize {
        self.typestr.itemsize()
    }

    /// `dtype.str`.
    pub fn typestr(&self) -> TypeStr {
        self.typestr
    }

    /// `dtype.descr` for structured types (`None` for plain ones).
    pub fn descr(&self) -> Option<&Descr> {
        self.descr.as_ref()
    }
}

impl PartialEq for ElementType {
    fn eq(&self, other: &Self) -> bool {
        self.typestr.same_type(&other.typestr) && same_fields(self.descr(), other.descr())
    }
}

impl Eq for ElementType {}

/// Whether two element types' `descr`s describe the same items: both plain (absent, or NumPy's
/// one-entry list), or structured with the same fields, padding being padding however it is
/// named ([`Descr::same_items`]).
pub(crate) fn same_fields(a: Option<&Descr>, b: Option<&Descr>) -> bool {
    match (a.filter(|d| !d.is_simple()), b.filter(|d| !d.is_simple())) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same_items(b),
        _ => false,
    }
}

/// How a new storage's items start out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Init {
    /// Whatever the allocator gives (`empty`).
    Uninit,
    /// All bytes zero (`zeros`).
    Zeros,
    /// Every item set to these bytes (`ones`, `full`); their length is the item size.
    Fill(Vec<u8>),
}

/// One side's memory: where item `[0, ..., 0]` of the allocation is (`origin`, bytes from the
/// start). Only this crate makes one; see [`Storage::buffers`].
#[derive(Debug)]
pub struct Side<B> {
    pub(crate) buffer: B,
    pub(crate) origin: usize,
}

impl<B> Side<B> {
    /// The memory.
    pub fn buffer(&self) -> &B {
        &self.buffer
    }

    /// Bytes from the buffer's start to item `[0, ..., 0]` of the allocation.
    pub fn origin(&self) -> usize {
        self.origin
    }
}

/// Device memory as a storage sees it: an address, a size, and the handle that frees it.
pub struct DeviceBufferHandle {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    /// The device the memory is on, whose context its copies run in.
    pub(crate) device_id: u32,
    /// Keeps the allocation alive (a cust buffer, a unified buffer...).
    #[expect(
        dead_code,
        reason = "held to be dropped with the buffer, which frees the memory"
    )]
    pub(crate) keep: Box<dyn Any + Send + Sync>,
}

impl DeviceBufferHandle {
    /// Device address of the first byte.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The device the memory is on.
    pub fn device_id(&self) -> u32 {
        self.device_id
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for DeviceBufferHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer({:#x}, {} bytes, device {})",
            self.ptr, self.len, self.device_id
        )
    }
}

/// The buffers of one allocation, shared (through `Arc`) by all its views. Read-only outside
/// this crate: a storage's memory comes from [`Storage::allocate`] or [`crate::wrap_foreign`],
/// whose checks (and, for foreign memory, whose caller's promise) make the copies and views
/// over it stay inside it.
#[derive(Debug)]
pub struct Buffers {
    pub(crate) host: Option<Side<HostBuffer>>,
    pub(crate) device: Option<Side<DeviceBufferHandle>>,
    /// Bytes to copy between mirrors, from each side's start.
    pub(crate) span: usize,
    /// For wrapped memory, the items a mirror copy moves (their layout, from each side's
    /// origin): the bytes between them belong to others (the rest of the arrays the views
    /// were taken from), so a copy moves exactly these ([`Layout::runs`]). `None` for memory
    /// allocated here, whose whole span is the storage's own.
    pub(crate) items: Option<Layout>,
    /// Which side is newest (`managed="gt4py"` with both sides; shared by all views).
    pub(crate) sync: Option<SyncState>,
    pub(crate) device_kind: StorageDevice,
    pub(crate) managed: Managed,
    pub(crate) readonly: bool,
    /// Held by every access this crate makes to the host side's bytes (fills, item copies,
    /// mirror copies): views are `Send + Sync` and write through `&self`, so without it two
    /// threads could race on the bytes.
    pub(crate) host_access: Mutex<()>,
}

impl Buffers {
    /// The buffers of `span` bytes on each side given, item `[0, ..., 0]` `origin` bytes from
    /// each side's start: a storage on the GPU if there is device memory, else on the host;
    /// whole (`items: None`), unmirrored (`sync: None`, [`Managed::None`]) and writable.
    pub(crate) fn new(
        host: Option<HostBuffer>,
        device: Option<DeviceBufferHandle>,
        span: usize,
        origin: usize,
    ) -> Buffers {
        Buffers {
            device_kind: if device.is_some() {
                StorageDevice::Gpu
            } else {
                StorageDevice::Host
            },
            host: host.map(|buffer| Side { buffer, origin }),
            device: device.map(|buffer| Side { buffer, origin }),
            span,
            items: None,
            sync: None,
            managed: Managed::None,
            readonly: false,
            host_access: Mutex::new(()),
        }
    }

    /// Exclusive access to the host side's bytes, for as long as the guard lives. (Nothing is
    /// left half-done by a panic under it that a later access could trip on: the bytes are
    /// plain bytes.)
    pub(crate) fn lock_host(&self) -> MutexGuard<'_, ()> {
        self.host_access
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The host memory, if any.
    pub fn host(&self) -> Option<&Side<HostBuffer>> {
        self.host.as_ref()
    }

    /// The device memory, if any.
    pub fn device(&self) -> Option<&Side<DeviceBufferHandle>> {
        self.device.as_ref()
    }

    /// Bytes a whole-buffer copy between the sides moves, from each side's start.
    pub fn span(&self) -> usize {
        self.span
    }

    /// For wrapped memory, the items a mirror copy moves (see [`Buffers`]); `None` for memory
    /// allocated here.
    pub fn items(&self) -> Option<&Layout> {
        self.items.as_ref()
    }

    /// Where the storage lives.
    pub fn device_kind(&self) -> StorageDevice {
        self.device_kind
    }

    /// Who keeps the sides in step.
    pub fn managed(&self) -> Managed {
        self.managed
    }

    /// Whether consumers must not write (wrapped read-only memory).
    pub fn readonly(&self) -> bool {
        self.readonly
    }
}

/// Allocation parameters a `*_like` call or a copy reuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocInfo {
    /// `alignment_size` the buffer was allocated with (1 for wrapped memory).
    pub alignment_size: usize,
    /// `aligned_index` (only for the view that was allocated; views drop it).
    pub aligned_index: Option<PerDim<usize>>,
    /// The `defaults` preset used, if any.
    pub defaults: Option<crate::Preset>,
}

/// A storage: a view of shared buffers.
#[derive(Clone, Debug)]
pub struct Storage {
    buffers: Arc<Buffers>,
    geometry: Geometry,
    element: ElementType,
    info: AllocInfo,
}

impl From<AllocError> for StorageError {
    fn from(e: AllocError) -> Self {
        StorageError::Alloc(e.0)
    }
}

impl Storage {
    /// A new storage of `shape` with the resolved parameters: in host memory, or (`device =
    /// Gpu`) on device 0 in the `managed` mode, which needs a CUDA driver.
    pub fn allocate(
        shape: &[usize],
        element: ElementType,
        params: &ResolvedParams,
        init: Init,
    ) -> Result<Storage, StorageError> {
        match params.device {
            StorageDevice::Host => Self::allocate_host(shape, element, params, init),
            StorageDevice::Gpu => crate::cuda::allocate(shape, element, params, init),
        }
    }

    /// A storage with the same parameters and its own buffers (and sync state) holding a copy
    /// of the items, read where the newest are.
    pub fn copy(&self) -> Result<Storage, StorageError> {
        if self.has_device() {
            return crate::cuda::copy(self);
        }
        self.copy_host()
    }

    /// GDP-3's `host_to_device(force)`: copies the host side to the device side if it is newer
    /// (or `force`); whether it copied. No action unless the storage is mirrored.
    pub fn host_to_device(&self, force: bool) -> Result<bool, StorageError> {
        crate::cuda::host_to_device(self, force)
    }

    /// GDP-3's `device_to_host(force)`, the other way.
    pub fn device_to_host(&self, force: bool) -> Result<bool, StorageError> {
        crate::cuda::device_to_host(self, force)
    }

    /// GDP-3's `synchronize()`: brings the older side of a mirror up to date; for unified
    /// memory, waits for the device, so that host reads are safe.
    pub fn synchronize(&self) -> Result<bool, StorageError> {
        crate::cuda::synchronize(self)
    }

    /// A new host storage of `shape` with the resolved parameters (which must say
    /// `device = Host`).
    pub(crate) fn allocate_host(
        shape: &[usize],
        element: ElementType,
        params: &ResolvedParams,
        init: Init,
    ) -> Result<Storage, StorageError> {
        debug_assert_eq!(params.device, StorageDevice::Host, "a host allocation");
        let plan = Self::plan(shape, &element, params)?;
        let buffer = match init {
            Init::Uninit => HostBuffer::uninit(plan.buffer_bytes())?,
            _ => HostBuffer::zeroed(plan.buffer_bytes())?,
        };
        let origin = plan.byte_offset(buffer.addr());
        let span = plan.buffer_bytes();
        let storage = Self::from_plan(
            plan,
            element,
            params,
            Buffers::new(Some(buffer), None, span, origin),
        );
        if let Init::Fill(item) = init {
            storage.fill_host(&item)?;
        }
        Ok(storage)
    }

    /// The allocation plan for `shape` under `params`.
    pub fn plan(
        shape: &[usize],
        element: &ElementType,
        params: &ResolvedParams,
    ) -> Result<AllocationPlan, StorageError> {
        AllocationPlan::new(
            shape,
            element.itemsize(),
            &params.layout,
            params.alignment_size,
            &params.aligned_index,
        )
    }

    /// A storage over buffers laid out by `plan` (for the device allocators).
    pub(crate) fn from_plan(
        plan: AllocationPlan,
        element: ElementType,
        params: &ResolvedParams,
        buffers: Buffers,
    ) -> Storage {
        Storage {
            buffers: Arc::new(buffers),
            geometry: Geometry {
                layout: plan.into_layout(),
                offset: 0,
                halo: params.halo.clone(),
                dims: params.dims.clone(),
                order: layout_entries(&params.layout),
            },
            element,
            info: AllocInfo {
                alignment_size: params.alignment_size,
                aligned_index: Some(params.aligned_index.clone()),
                defaults: params.defaults,
            },
        }
    }

    /// Wraps memory described by `layout` whose item `[0, ..., 0]` is `origin` bytes into
    /// `buffer` (no copy). `order` is the `layout` parameter the strides follow (where they
    /// tie, it says which dimension is the more contiguous).
    pub(crate) fn wrap(
        buffers: Buffers,
        layout: Layout,
        element: ElementType,
        halo: PerDim<(usize, usize)>,
        dims: PerDim<Dim>,
        order: PerDim<usize>,
    ) -> Result<Storage, StorageError> {
        let ndim = layout.ndim();
        for (param, got) in [
            ("halo", halo.len()),
            ("dims", dims.len()),
            ("layout", order.len()),
        ] {
            if got != ndim {
                return Err(StorageError::Length { param, got, ndim });
            }
        }
        crate::check_halo(&halo, layout.shape())?;
        Ok(Storage {
            buffers: Arc::new(buffers),
            geometry: Geometry {
                layout,
                offset: 0,
                halo,
                dims,
                order: layout_entries(&order),
            },
            element,
            info: AllocInfo {
                alignment_size: 1,
                aligned_index: None,
                defaults: None,
            },
        })
    }

    /// Replaces the allocation parameters (for wrapped memory whose alignment was checked).
    pub fn with_info(mut self, info: AllocInfo) -> Storage {
        self.info = info;
        self
    }

    /// The buffers (shared with every view).
    pub fn buffers(&self) -> &Arc<Buffers> {
        &self.buffers
    }

    /// The view's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The element type.
    pub fn element(&self) -> &ElementType {
        &self.element
    }

    /// Allocation parameters for `*_like` and copies.
    pub fn info(&self) -> &AllocInfo {
        &self.info
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.geometry.layout.shape()
    }

    /// Byte strides.
    pub fn strides(&self) -> &[isize] {
        self.geometry.layout.strides()
    }

    /// Bytes of the items (padding excluded).
    pub fn nbytes(&self) -> usize {
        self.geometry.layout.nbytes()
    }

    /// The (start, end) halo per dimension.
    pub fn halo(&self) -> &[(usize, usize)] {
        &self.geometry.halo
    }

    /// Changes the halo (GDP-3's `halo` setter); the aligned item does not move.
    pub fn set_halo(&mut self, halo: PerDim<(usize, usize)>) -> Result<(), StorageError> {
        crate::check_halo(&halo, self.shape())?;
        self.geometry.halo = halo;
        Ok(())
    }

    /// The dims.
    pub fn dims(&self) -> &[Dim] {
        &self.geometry.dims
    }

    /// The `layout` parameter the view's strides follow, as `layout_following` reads it
    /// with the layout the buffer was laid out with.
    pub fn layout_order(&self) -> PerDim<usize> {
        layout_following(self.shape(), self.strides(), &self.geometry.order)
    }

    /// Whether the storage has a host buffer.
    pub fn has_host(&self) -> bool {
        self.buffers.host.is_some()
    }

    /// The device its device buffer is on (`None`: no device buffer).
    pub fn device_id(&self) -> Option<u32> {
        self.buffers.device.as_ref().map(|d| d.buffer.device_id)
    }

    /// Whether the storage has a device buffer.
    pub fn has_device(&self) -> bool {
        self.buffers.device.is_some()
    }

    /// The shared mirror state (`managed="gt4py"` device storages only).
    pub fn sync_state(&self) -> Option<&SyncState> {
        self.buffers.sync.as_ref()
    }

    /// Address of the view's item `[0, ..., 0]` in host memory.
    pub fn host_ptr(&self) -> Option<u64> {
        let h = self.buffers.host.as_ref()?;
        Some(at(h.buffer.addr() as u64, h.origin, self.geometry.offset))
    }

    /// Address of the view's item `[0, ..., 0]` in device memory.
    pub fn device_ptr(&self) -> Option<u64> {
        let d = self.buffers.device.as_ref()?;
        Some(at(d.buffer.ptr, d.origin, self.geometry.offset))
    }

    fn descriptor<S: Space>(
        &self,
        ptr: u64,
        stream: S::StreamEntry,
    ) -> Result<ArrayDescriptor<S>, DescriptorError> {
        let layout = &self.geometry.layout;
        let d = ArrayDescriptor {
            shape: layout.shape().to_vec(),
            typestr: self.element.typestr,
            descr: self.element.descr.clone(),
            data: Data {
                ptr: if layout.is_empty() { 0 } else { ptr },
                readonly: self.buffers.readonly,
            },
            strides: layout.exported_strides().map(<[isize]>::to_vec),
            mask: None,
            version: 3,
            stream,
        };
        d.validate()?;
        Ok(d)
    }

    /// The `__array_interface__` descriptor (`None` without a host buffer).
    pub fn host_descriptor(&self) -> Option<Result<HostArrayDescriptor, DescriptorError>> {
        let ptr = self.host_ptr()?;
        Some(self.descriptor(ptr, cai_runtime::NoStream))
    }

    /// The `__cuda_array_interface__` descriptor (`None` without a device buffer).
    pub fn device_descriptor(&self) -> Option<Result<CudaArrayDescriptor, DescriptorError>> {
        let ptr = self.device_ptr()?;
        // The storage's own device work (allocation, fills, mirror copies) is done when the
        // call that did it returns, and foreign memory was waited for when it was wrapped: no
        // work on the data is pending.
        Some(self.descriptor(ptr, None))
    }

    /// `s[key]`: a view, or the byte offset of one item (from the host buffer's item pointer
    /// of this view's origin; see [`Storage::item_host_ptr`]).
    pub fn select(&self, key: &[IndexItem]) -> Result<Selected, IndexError> {
        Ok(match self.geometry.select(key)? {
            Selection::View(geometry) => Selected::View(self.with_geometry(geometry)),
            Selection::Item(offset) => Selected::Item(offset),
        })
    }

    fn with_geometry(&self, geometry: Geometry) -> Storage {
        Storage {
            buffers: self.buffers.clone(),
            geometry,
            element: self.element.clone(),
            info: AllocInfo {
                aligned_index: None,
                ..self.info.clone()
            },
        }
    }

    /// The view without its halo.
    pub fn domain_view(&self) -> Storage {
        self.with_geometry(self.geometry.domain())
    }

    /// Dimensions permuted (`None`: reversed).
    pub fn transpose(&self, axes: Option<&[usize]>) -> Result<Storage, IndexError> {
        Ok(self.with_geometry(self.geometry.transpose(axes)?))
    }

    /// Host address of the item at byte `offset` from the origin (as [`Selected::Item`] gives).
    pub fn item_host_ptr(&self, offset: isize) -> Option<u64> {
        let h = self.buffers.host.as_ref()?;
        Some(at(h.buffer.addr() as u64, h.origin, offset))
    }

    /// Sets every item of this view's host side to `item`.
    pub fn fill_host(&self, item: &[u8]) -> Result<(), StorageError> {
        if item.len() != self.element.itemsize() {
            return Err(StorageError::FillValue {
                got: item.len(),
                itemsize: self.element.itemsize(),
            });
        }
        let h = self.host_side_for_write()?;
        let base = h.origin as isize + self.geometry.offset;
        let _access = self.buffers.lock_host();
        h.buffer
            .fill(self.geometry.layout.item_offsets().map(|o| base + o), item);
        Ok(())
    }

    fn host_side_for_write(&self) -> Result<&Side<HostBuffer>, StorageError> {
        if self.buffers.readonly {
            return Err(StorageError::ReadOnly);
        }
        self.buffers
            .host
            .as_ref()
            .ok_or(StorageError::NoSuchBuffer("host"))
    }

    /// A new host storage with the same parameters and a copy of the items (its own buffer).
    /// The host side is read: synchronize a mirrored storage first.
    pub fn copy_host(&self) -> Result<Storage, StorageError> {
        let params = self.like_params(StorageDevice::Host);
        let out =
            Storage::allocate_host(self.shape(), self.element.clone(), &params, Init::Uninit)?;
        self.copy_items_host(&out)?;
        Ok(out)
    }

    /// Copies every item of this view's host side to `dst`'s host side (same shape and item
    /// size; any strides).
    pub fn copy_items_host(&self, dst: &Storage) -> Result<(), StorageError> {
        let src = self
            .buffers
            .host
            .as_ref()
            .ok_or(StorageError::NoSuchBuffer("host"))?;
        let out = dst.host_side_for_write()?;
        let n = self.element.itemsize();
        if self.shape() != dst.shape() || n != dst.element.itemsize() {
            return Err(StorageError::Transfer(format!(
                "cannot copy items of shape {:?} ({n} bytes each) into shape {:?} ({} bytes each)",
                self.shape(),
                dst.shape(),
                dst.element.itemsize()
            )));
        }
        let src_base = src.origin as isize + self.geometry.offset;
        let dst_base = out.origin as isize + dst.geometry.offset;
        // Both sides locked (once if they are one), in address order, so that two copies in
        // opposite directions cannot deadlock.
        let (first, second) = if Arc::as_ptr(&self.buffers) <= Arc::as_ptr(&dst.buffers) {
            (&self.buffers, &dst.buffers)
        } else {
            (&dst.buffers, &self.buffers)
        };
        let _first = first.lock_host();
        let _second = (!Arc::ptr_eq(first, second)).then(|| second.lock_host());
        for (s, d) in self
            .geometry
            .layout
            .item_offsets()
            .zip(dst.geometry.layout.item_offsets())
        {
            // SAFETY: both offsets come from layouts that fit their buffers (checked when each
            // storage was made), so `n` bytes at each lie inside. Overlap is possible only
            // when both views share a buffer, where `copy` (memmove) is still defined.
            unsafe {
                std::ptr::copy(
                    src.buffer.ptr().offset(src_base + s),
                    out.buffer.ptr().offset(dst_base + d),
                    n,
                );
            }
        }
        Ok(())
    }

    /// The same view (geometry, element, parameters) over other buffers laid out like these
    /// (a staging copy; only device storages use one).
    pub(crate) fn on_buffers(&self, buffers: Arc<Buffers>) -> Storage {
        Storage {
            buffers,
            ..self.clone()
        }
    }

    /// This storage's parameters as fully resolved ones (for `*_like` and copies), on `device`.
    pub fn like_params(&self, device: StorageDevice) -> ResolvedParams {
        ResolvedParams {
            defaults: self.info.defaults,
            dims: self.geometry.dims.clone(),
            layout: self.layout_order(),
            halo: self.geometry.halo.clone(),
            alignment_size: self.info.alignment_size,
            aligned_index: self
                .info
                .aligned_index
                .clone()
                .unwrap_or_else(|| self.halo().iter().map(|h| h.0).collect()),
            device_id: match device {
                StorageDevice::Gpu => self.device_id(),
                StorageDevice::Host => None,
            },
            device,
            managed: self.buffers.managed,
        }
    }

    /// The parameters a `*_like` call takes from this storage (the "data" step of the lookup
    /// order).
    pub fn data_params(&self) -> crate::StorageParams {
        crate::StorageParams {
            defaults: self.info.defaults,
            dims: Some(self.geometry.dims.clone()),
            layout: Some(self.layout_order()),
            halo: Some(self.geometry.halo.clone()),
            alignment_size: Some(self.info.alignment_size),
            aligned_index: self.info.aligned_index.clone(),
            device: Some(self.buffers.device_kind),
            device_id: self.device_id().map(crate::GpuDevice::Ordinal),
            managed: Some(self.buffers.managed),
        }
    }

    /// The mirror state's name, for display (`None` when not mirrored).
    pub fn sync_status(&self) -> Option<SyncStatus> {
        self.buffers.sync.as_ref().map(SyncState::status)
    }
}

/// The `layout` parameter that byte strides follow: 0 for the largest |stride|, ties by axis.
pub fn stride_order(strides: &[isize]) -> PerDim<usize> {
    let mut axes: PerDim<usize> = (0..strides.len()).collect();
    axes.sort_by_key(|&a| (std::cmp::Reverse(strides[a].unsigned_abs()), a));
    ranks(&axes)
}

/// The `layout` parameter that a view of `shape` with byte `strides` follows, `order` being
/// the one its buffer was laid out with (a `layout` parameter too: the larger entry, the more
/// contiguous dimension). The dimensions of more than one item are ranked by their strides,
/// the largest first (ties by `order`); a dimension of one item or none, whose stride
/// addresses nothing (it may tie with the next dimension's, or be anything at all, as an
/// exporter's contiguous strides make it), keeps its place in `order`; so do all dimensions
/// of a view with no items, whose strides address nothing at all (those outside an empty
/// dimension are 0). So strides follow a `layout` exactly when this gives it back for
/// `order = layout`.
pub fn layout_following<O: Copy + Into<usize>>(
    shape: &[usize],
    strides: &[isize],
    order: &[O],
) -> PerDim<usize> {
    let rank = |a: usize| order.get(a).map(|&o| o.into());
    // Outermost first, as `order` ranks them.
    let mut axes: PerDim<usize> = (0..shape.len()).collect();
    axes.sort_by_key(|&a| (rank(a), a));
    let spans = |a: usize| shape[a] > 1 && !shape.contains(&0);
    let mut spanning: PerDim<usize> = axes.iter().copied().filter(|&a| spans(a)).collect();
    spanning.sort_by_key(|&a| (std::cmp::Reverse(strides[a].unsigned_abs()), rank(a), a));
    let mut spanning = spanning.into_iter();
    for a in axes.iter_mut() {
        if spans(*a) {
            *a = spanning.next().unwrap_or(*a);
        }
    }
    ranks(&axes)
}

/// The `layout` parameter of axes listed outermost first.
fn ranks(axes: &[usize]) -> PerDim<usize> {
    let mut layout = PerDim::from_elem(0, axes.len());
    for (rank, &a) in axes.iter().enumerate() {
        layout[a] = rank;
    }
    layout
}

/// What `Storage::select` gives.
#[derive(Clone, Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "returned and matched at once; boxing the view would add an allocation per view"
)]
pub enum Selected {
    /// A view sharing the buffers.
    View(Storage),
    /// One item, at this byte offset from the allocation's origin.
    Item(isize),
}

/// `base + origin + offset` (the view stays inside its buffer, so this cannot overflow for a
/// valid storage; wrapping keeps a bug from panicking).
fn at(base: u64, origin: usize, offset: isize) -> u64 {
    base.wrapping_add(origin as u64)
        .wrapping_add_signed(offset as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StorageParams;

    fn f64() -> ElementType {
        ElementType::new(TypeStr::parse("<f8").unwrap(), None).unwrap()
    }

    fn zeros(shape: &[usize], p: StorageParams) -> Storage {
        let params = p.resolve(shape, 8, &StorageParams::default()).unwrap();
        Storage::allocate_host(shape, f64(), &params, Init::Zeros).unwrap()
    }

    /// Views of one storage are `Send + Sync` and write through `&self`: writes and copies
    /// from several threads must not race (Miri's race detector runs this).
    #[test]
    fn host_writes_and_copies_from_threads_do_not_race() {
        let s = zeros(&[16], StorageParams::default());
        let other = zeros(&[16], StorageParams::default());
        std::thread::scope(|t| {
            t.spawn(|| s.fill_host(&1f64.to_le_bytes()).unwrap());
            t.spawn(|| s.fill_host(&2f64.to_le_bytes()).unwrap());
            t.spawn(|| other.copy_items_host(&s).unwrap());
            t.spawn(|| s.copy_items_host(&other).unwrap());
            t.spawn(|| s.copy_items_host(&s).unwrap());
        });
        let v = read(&s, 0);
        assert!([0.0, 1.0, 2.0].contains(&v));
    }

    fn read(s: &Storage, offset: isize) -> f64 {
        let p = s.item_host_ptr(offset).unwrap() as *const f64;
        // SAFETY: tests pass offsets of items inside the storage.
        unsafe { p.read_unaligned() }
    }

    #[test]
    fn the_layout_read_back_is_the_one_given_where_strides_tie() {
        // Shape (1, 10, 10) in F order: dimension 0 holds one item, so its stride (8) ties
        // with dimension 1's; the strides alone would rank dimension 0 outside dimension 1.
        let (shape, strides) = ([1, 10, 10], [8, 8, 80]);
        assert_eq!(stride_order(&strides)[..], [1, 2, 0]);
        assert_eq!(
            layout_following(&shape, &strides, &[2_usize, 1, 0])[..],
            [2, 1, 0]
        );
        // Any stride at all for it (an exporter's contiguous strides), the same layout.
        assert_eq!(
            layout_following(&shape, &[800, 8, 80], &[2_usize, 1, 0])[..],
            [2, 1, 0]
        );
        // Strides that reorder dimensions of several items win over the order given (a
        // strided view), the others keeping their places; with no order, ties go by axis.
        assert_eq!(
            layout_following(&[3, 1, 4], &[8, 99, 24], &[0_usize, 1, 2])[..],
            [2, 1, 0]
        );
        assert_eq!(
            layout_following(&shape, &strides, &[0_usize; 0])[..],
            [0, 2, 1]
        );
        // No items: no stride says anything (a new storage's are 0 outside the empty
        // dimension).
        assert_eq!(
            layout_following(&[2, 0, 2], &[0, 16, 8], &[0_usize, 1, 2])[..],
            [0, 1, 2]
        );
        for layout in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
            let s = zeros(
                &shape,
                StorageParams {
                    layout: Some(layout.into_iter().collect()),
                    ..Default::default()
                },
            );
            assert_eq!(s.layout_order()[..], layout, "{:?}", s.strides());
        }
    }

    #[test]
    fn aligned_and_exported() {
        let s = zeros(
            &[3, 4, 5],
            StorageParams {
                alignment_size: Some(64),
                halo: Some(smallvec::smallvec![(1, 1), (1, 1), (2, 0)]),
                ..Default::default()
            },
        );
        let d = s.host_descriptor().unwrap().unwrap();
        assert_eq!(d.shape, [3, 4, 5]);
        assert_eq!(d.strides, Some(vec![4 * 8 * 8, 8 * 8, 8]));
        // The aligned index defaults to the halo's start.
        assert_eq!((d.data.ptr + 4 * 8 * 8 + 8 * 8 + 2 * 8) % 64, 0);
        assert!(s.device_descriptor().is_none());
        assert_eq!(s.nbytes(), 3 * 4 * 5 * 8);
        let dom = s.domain_view();
        assert_eq!(dom.shape(), [1, 2, 3]);
        assert_eq!(dom.host_ptr().unwrap() % 64, 0);
    }

    #[test]
    fn fill_views_and_copy() {
        let s = zeros(&[2, 3], StorageParams::default());
        let Selected::View(row) = s.select(&[IndexItem::Int(1)]).unwrap() else {
            panic!()
        };
        row.fill_host(&2.5f64.to_le_bytes()).unwrap();
        assert_eq!(read(&s, 3 * 8), 2.5);
        assert_eq!(read(&s, 0), 0.0);
        let c = s.transpose(None).unwrap().copy_host().unwrap();
        assert_eq!(c.shape(), [3, 2]);
        // The copy keeps the transposed stride order (F-like over the new shape).
        assert_eq!(c.strides(), [8, 24]);
        assert_eq!((read(&c, 8), read(&c, 24)), (0.0, 2.5)); // c[1, 0], c[0, 1]
        c.fill_host(&1f64.to_le_bytes()).unwrap();
        assert_eq!(read(&s, 0), 0.0, "the copy has its own buffer");
        assert!(matches!(
            s.fill_host(&[0; 4]),
            Err(StorageError::FillValue {
                got: 4,
                itemsize: 8
            })
        ));
    }

    #[test]
    fn copies_read_views_at_their_offset_into_aligned_buffers() {
        // The aligned item [0, 1] lands on 32 bytes, so the buffer starts at a padding of 8
        // or 24 bytes (host allocations are 16-aligned): never 0.
        let aligned = || StorageParams {
            alignment_size: Some(32),
            halo: Some(smallvec::smallvec![(0, 0), (1, 0)]),
            ..Default::default()
        };
        let s = zeros(&[2, 3], aligned());
        assert_ne!(s.host_ptr().unwrap() % 32, 0);
        let Selected::View(row) = s.select(&[IndexItem::Int(1)]).unwrap() else {
            panic!()
        };
        row.fill_host(&2.5f64.to_le_bytes()).unwrap();
        // A view drops the aligned index (it is the allocated view's), not the alignment.
        assert_eq!(s.info().aligned_index.as_deref(), Some(&[0, 1][..]));
        assert_eq!(
            (row.info().aligned_index.clone(), row.info().alignment_size),
            (None, 32)
        );
        let c = row.copy_host().unwrap();
        assert_eq!(
            (0..3).map(|i| read(&c, i * 8)).collect::<Vec<_>>(),
            [2.5; 3]
        );
        // Into a view that starts one item into its own (aligned) buffer: items 1 to 3.
        let dst = zeros(&[4], aligned_1d());
        let Selected::View(tail) = dst
            .select(&[IndexItem::Slice {
                start: Some(1),
                stop: None,
                step: None,
            }])
            .unwrap()
        else {
            panic!()
        };
        row.copy_items_host(&tail).unwrap();
        let items: Vec<f64> = (0..4).map(|i| read(&dst, i * 8)).collect();
        assert_eq!(items, [0.0, 2.5, 2.5, 2.5]);
        // Same item size, another shape: refused, nothing copied.
        let other = zeros(&[3, 2], StorageParams::default());
        let e = s.copy_items_host(&other).unwrap_err();
        assert!(
            e.to_string().contains("cannot copy items of shape [2, 3]"),
            "{e}"
        );
        assert_eq!(read(&other, 5 * 8), 0.0);
    }

    fn aligned_1d() -> StorageParams {
        StorageParams {
            alignment_size: Some(64),
            halo: Some(smallvec::smallvec![(1, 0)]),
            ..Default::default()
        }
    }

    #[test]
    fn accessors_and_the_parameters_a_like_call_reuses() {
        let mut s = zeros(&[4, 5], StorageParams::default());
        assert!(s.has_host() && !s.has_device());
        assert_eq!((s.sync_state().is_none(), s.sync_status()), (true, None));
        assert_eq!((s.device_ptr(), s.dims()), (None, &[Dim::I, Dim::J][..]));
        s.set_halo(smallvec::smallvec![(1, 2), (0, 5)]).unwrap();
        assert_eq!(s.halo(), [(1, 2), (0, 5)]);
        assert!(s.set_halo(smallvec::smallvec![(3, 2), (0, 0)]).is_err());
        assert!(s.set_halo(smallvec::smallvec![(0, 0)]).is_err());
        assert_eq!(s.halo(), [(1, 2), (0, 5)], "a refused halo changes nothing");
        let p = s.data_params();
        assert_eq!(p.halo.as_deref(), Some(&[(1, 2), (0, 5)][..]));
        assert_eq!(p.dims.as_deref(), Some(&[Dim::I, Dim::J][..]));
        assert_eq!(p.layout.as_deref(), Some(&[0, 1][..]));
        assert_eq!(
            (p.alignment_size, p.device),
            (Some(1), Some(StorageDevice::Host))
        );
    }

    #[test]
    fn wrap_wants_one_entry_per_dimension() {
        let buffers = || Buffers::new(None, None, 0, 0);
        let layout = Layout::c_contiguous(&[2, 3], 8).unwrap();
        let two = || -> PerDim<(usize, usize)> { smallvec::smallvec![(0, 0); 2] };
        let dims = || -> PerDim<Dim> { smallvec::smallvec![Dim::I, Dim::J] };
        let order = || -> PerDim<usize> { smallvec::smallvec![0, 1] };
        let e = Storage::wrap(
            buffers(),
            layout.clone(),
            f64(),
            smallvec::smallvec![(0, 0)],
            dims(),
            order(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            StorageError::Length {
                param: "halo",
                got: 1,
                ndim: 2
            }
        );
        let e = Storage::wrap(
            buffers(),
            layout.clone(),
            f64(),
            two(),
            dims(),
            smallvec::smallvec![0],
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                StorageError::Length {
                    param: "layout",
                    ..
                }
            ),
            "{e}"
        );
        assert!(Storage::wrap(buffers(), layout, f64(), two(), dims(), order()).is_ok());
    }

    #[test]
    fn object_dtype_refused() {
        assert!(ElementType::new(TypeStr::parse("|O").unwrap(), None).is_err());
    }
}
