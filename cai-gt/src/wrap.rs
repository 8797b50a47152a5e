//! Storages over memory allocated elsewhere (GDP-3's `as_storage`, `storage(copy=False)`): the
//! checks that the memory fits the storage's parameters, and the buffers built over it without
//! a copy. The memory itself is imported by the caller (in Python, through the array
//! interfaces); here it is an address, a layout and what keeps it alive.

use std::any::Any;
use std::ptr::NonNull;

use cai_runtime::{Descr, Layout, TypeStr};

use crate::storage::{AllocInfo, layout_following, same_fields, stride_order};
use crate::{
    Buffers, DeviceBufferHandle, ElementType, HostBuffer, Managed, Storage, StorageDevice,
    StorageError, StorageParams, SyncState, SyncStatus, check_alignment,
};

/// Memory on one side (host or device) that a storage is to stand on, as imported.
pub struct ForeignBuffer {
    /// Address of item `[0, ..., 0]`.
    pub ptr: u64,
    /// Shape and byte strides around `ptr`.
    pub layout: Layout,
    /// The element's type string.
    pub typestr: TypeStr,
    /// The element's fields (structured types), if described.
    pub descr: Option<Descr>,
    /// Whether the memory must not be written.
    pub readonly: bool,
    /// Device memory's device, where known (its pointer attributes); `None`: the current
    /// device. Ignored for host memory.
    pub device_id: Option<u32>,
    /// What keeps the memory alive; the storage holds it for as long as it uses the memory.
    pub keep: Box<dyn Any + Send + Sync>,
}

impl ForeignBuffer {
    fn structured(&self) -> Option<&Descr> {
        structured(&self.descr)
    }

    fn describe(&self) -> String {
        describe(&self.typestr, self.structured())
    }
}

/// The fields of a structured type (`None` for a plain one, described or not).
fn structured(descr: &Option<Descr>) -> Option<&Descr> {
    descr.as_ref().filter(|d| !d.is_simple())
}

/// An element type in an error message.
fn describe(typestr: &TypeStr, structured: Option<&Descr>) -> String {
    match structured {
        Some(d) => format!("typestr '{typestr}' with descr {d}"),
        None => format!("typestr '{typestr}'"),
    }
}

/// The host and device memory a mirrored storage keeps in step must be one array twice: the
/// same element type and layout, and both writable, since a mirror copy writes either side.
pub fn check_mirror_pair(host: &ForeignBuffer, gpu: &ForeignBuffer) -> Result<(), StorageError> {
    if !host.typestr.same_type(&gpu.typestr) || !same_fields(host.structured(), gpu.structured()) {
        return Err(StorageError::MirrorType {
            host: host.describe(),
            device: gpu.describe(),
        });
    }
    if host.readonly || gpu.readonly {
        return Err(StorageError::MirrorReadOnly {
            host: host.readonly,
        });
    }
    if host.layout != gpu.layout {
        return Err(StorageError::MirrorLayout {
            host: (host.layout.shape().to_vec(), host.layout.strides().to_vec()),
            device: (gpu.layout.shape().to_vec(), gpu.layout.strides().to_vec()),
        });
    }
    Ok(())
}

/// A storage over `host` and/or `gpu` memory (both: a `managed="gt4py"` mirror sharing
/// `sync_state`, clean if None), without a copy. `params` are the ones asked for, `data` those
/// the memory brings (its dims, halo, stride order), used where `params` and its preset say
/// nothing. The memory must fit them: the storage on the device only if there is device memory,
/// the layout parameter the strides' order, the aligned item at an aligned address.
///
/// # Safety
/// Each buffer's `ptr` and `layout` describe memory that is readable (and, unless `readonly`,
/// writable) for every item of the layout, on its side (host memory for `host`, device memory
/// of device `gpu.device_id` for `gpu`, or of the current device where that is `None`), for as
/// long as its `keep` is alive; nothing else frees it meanwhile.
pub unsafe fn wrap_foreign(
    host: Option<ForeignBuffer>,
    gpu: Option<ForeignBuffer>,
    element: ElementType,
    sync_state: Option<SyncState>,
    params: &StorageParams,
    data: &StorageParams,
) -> Result<Storage, StorageError> {
    if let (Some(h), Some(g)) = (&host, &gpu) {
        check_mirror_pair(h, g)?;
    }
    let Some(first) = host.as_ref().or(gpu.as_ref()) else {
        return Err(StorageError::NothingToWrap);
    };
    // The storage reads and writes items of `element`'s size over the memory's layout: they
    // must be the memory's items.
    if !element.typestr.same_type(&first.typestr)
        || element.itemsize() != first.layout.itemsize()
        || !same_fields(structured(&element.descr), first.structured())
    {
        return Err(StorageError::ElementMismatch {
            element: describe(&element.typestr, structured(&element.descr)),
            memory: first.describe(),
        });
    }
    let (layout, readonly) = (first.layout.clone(), first.readonly);
    let item_ptr = first.ptr;
    let shape = layout.shape().to_vec();
    let resolved = params.clone().resolve(&shape, element.itemsize(), data)?;
    // Explicit parameters must agree with the buffers: first where the storage lives (as
    // `storage(copy=True)` and the creators place it), then the layout and the alignment.
    if resolved.device == StorageDevice::Gpu && gpu.is_none() {
        return Err(StorageError::NoDeviceBuffer {
            preset: resolved.defaults.filter(|_| params.device.is_none()),
        });
    }
    // (The strides of dimensions of one item address nothing: any place for those follows.)
    if resolved.layout != layout_following(layout.shape(), layout.strides(), &resolved.layout)
        && !layout.is_empty()
    {
        return Err(StorageError::LayoutOrder {
            layout: resolved.layout.to_vec(),
            strides: layout.strides().to_vec(),
            order: stride_order(layout.strides()).to_vec(),
        });
    }
    check_alignment(
        &shape,
        element.itemsize(),
        resolved.alignment_size,
        &resolved.aligned_index,
    )?;
    let extent = layout.extent();
    let (lo, len) = extent.map_or((0, 0), |e| (e.lo, e.len()));
    let origin = usize::try_from(-lo).unwrap_or(0);
    if !layout.is_empty() {
        let aligned = resolved
            .aligned_index
            .iter()
            .zip(layout.strides())
            .map(|(&i, &s)| i as i128 * s as i128)
            .sum::<i128>()
            + item_ptr as i128;
        if aligned.rem_euclid(resolved.alignment_size as i128) != 0 {
            return Err(StorageError::Unaligned {
                alignment: resolved.alignment_size,
                aligned_index: resolved.aligned_index.to_vec(),
                address: aligned,
            });
        }
    }
    let host = match host {
        Some(h) => {
            let start = h.ptr.wrapping_add_signed(lo as i64);
            Some(match NonNull::new(start as usize as *mut u8) {
                // SAFETY: the layout's bytes [lo, hi) around the item pointer are the caller's
                // readable (writable unless read-only) host memory, alive while `keep` is
                // (this function's contract); the buffer holds `keep` for as long as it is used.
                Some(ptr) => unsafe { HostBuffer::foreign(ptr, len, h.keep) },
                None => HostBuffer::zeroed(0)?,
            })
        }
        None => None,
    };
    let device = match gpu {
        None => None,
        Some(g) => {
            let device_id = match g.device_id {
                Some(d) => d,
                None => current_device()?,
            };
            if let Some(asked) = resolved.device_id.filter(|&a| a != device_id) {
                return Err(StorageError::WrongDevice {
                    asked,
                    memory: device_id,
                });
            }
            Some(DeviceBufferHandle {
                ptr: g.ptr.wrapping_add_signed(lo as i64),
                len,
                device_id,
                keep: g.keep,
            })
        }
    };
    let mirrored = host.is_some() && device.is_some();
    let buffers = Buffers {
        // The bytes between the items belong to whoever else shares the buffers.
        items: Some(layout.clone()),
        sync: mirrored.then(|| sync_state.unwrap_or_else(|| SyncState::new(SyncStatus::Clean))),
        managed: if mirrored {
            Managed::Gt4Py
        } else {
            Managed::None
        },
        readonly,
        ..Buffers::new(host, device, len, origin)
    };
    Ok(Storage::wrap(
        buffers,
        layout,
        element,
        resolved.halo,
        resolved.dims,
        resolved.layout,
    )?
    .with_info(AllocInfo {
        alignment_size: resolved.alignment_size,
        aligned_index: Some(resolved.aligned_index),
        defaults: resolved.defaults,
    }))
}

/// The current device, for device memory whose device is not known.
fn current_device() -> Result<u32, StorageError> {
    crate::cuda::current_device()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A readable host buffer of `n` bytes as `typestr` items.
    fn host(bytes: &Arc<Vec<u8>>, typestr: &str) -> ForeignBuffer {
        let typestr = TypeStr::parse(typestr).unwrap();
        ForeignBuffer {
            ptr: bytes.as_ptr() as u64,
            layout: Layout::c_contiguous(&[bytes.len() / typestr.itemsize()], typestr.itemsize())
                .unwrap(),
            typestr,
            descr: None,
            readonly: true,
            device_id: None,
            keep: Box::new(bytes.clone()),
        }
    }

    fn wrap(memory: ForeignBuffer, element: &str) -> Result<Storage, StorageError> {
        let element = ElementType::new(TypeStr::parse(element).unwrap(), None).unwrap();
        let none = StorageParams::default();
        // SAFETY: `memory` is a live Vec's bytes, kept alive by its `keep`, and read-only.
        unsafe { wrap_foreign(Some(memory), None, element, None, &none, &none) }
    }

    #[test]
    fn the_element_type_is_the_memory_s() {
        let bytes = Arc::new(vec![0u8; 8]);
        let s = wrap(host(&bytes, "|u1"), "|u1").unwrap();
        assert_eq!(s.copy_host().unwrap().shape(), &[8]);
        // Items of 8 bytes over 1-byte items would reach 7 bytes past the buffer's end.
        for (memory, element) in [("|u1", "<f8"), ("<i4", "<f4"), ("<f8", "<f4")] {
            let e = wrap(host(&bytes, memory), element).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "the storage's element type typestr '{element}' is not the memory's: typestr '{memory}'"
                )
            );
        }
    }
}
