//! What can back an exported array: device-accessible memory for `__cuda_array_interface__`,
//! host memory for `__array_interface__`.
//!
//! The CUDA Array Interface requires `data` to be device-accessible, so host containers such
//! as `Vec<T>` implement [`HostMemory`] and never [`DeviceMemory`]: deriving
//! `CudaArrayInterface` over one is a compile error that says to derive `ArrayInterface`.

use std::marker::PhantomData;

use crate::element::Element;
#[cfg(any(feature = "python", feature = "cuda"))]
use crate::error::AllocError;
use crate::stream::{LiveStream, Stream, StreamError};

/// Memory a CUDA kernel can address: a device pointer and a length in elements.
///
/// # Safety
/// `device_ptr()` must be a device-accessible address (or 0 when `len()` is 0) valid for
/// `len()` items of `Elem` for as long as `self` lives, and `is_writable()` may only be true if
/// consumers may write those bytes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory, so it cannot back a `__cuda_array_interface__`",
    label = "not device-accessible memory",
    note = "the CUDA Array Interface requires `data` to be a device-accessible pointer; host memory such as `Vec<T>`, slices and arrays is not",
    note = "for host memory derive `ArrayInterface` (the NumPy `__array_interface__`) instead",
    note = "device memory implements `cai_runtime::DeviceMemory`: `cai_runtime::RawDeviceMemory<T>` wraps a pointer allocated elsewhere"
)]
pub unsafe trait DeviceMemory {
    /// The item type stored.
    type Elem: Element;
    /// The device address of the first item (0 allowed when empty).
    fn device_ptr(&self) -> u64;
    /// Number of items.
    fn len(&self) -> usize;
    /// Whether there are no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether consumers may write through the exported pointer (false forces `readonly`).
    fn is_writable(&self) -> bool {
        true
    }
    /// Called on every derived export with the stream it exports, after [`Self::device_ptr`]:
    /// memory that tracks its own pending work (cudarc's slices) makes `exported` wait for it
    /// here, so that a consumer synchronizing on the exported stream sees all of it. `live` is
    /// the stream field's word that the handle is a live stream ([`crate::AsStream::live_stream`]),
    /// without which only default streams may be handed to the driver. The default has nothing
    /// to order.
    fn order_export(
        &self,
        exported: Option<Stream>,
        live: Option<LiveStream<'_>>,
    ) -> Result<(), StreamError> {
        let _ = (exported, live);
        Ok(())
    }
}

/// Host memory: a pointer into this process's address space and a length in elements.
///
/// # Safety
/// `host_ptr()` must be valid for reads of `len()` items of `Elem` for as long as `self` lives
/// (and for writes too when `is_writable()` is true). Where [`Self::own_layout`] gives a
/// layout, only that layout's items need be (an ndarray view's span may hold items of another
/// view between its own): exports then take the layout as it is, never another one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not host memory, so it cannot back an `__array_interface__`",
    label = "not host memory",
    note = "host memory is `Vec<T>`, `Box<[T]>`, `[T; N]`, `&[T]` or `&mut [T]` with `T: Element` (or a type implementing `cai_runtime::HostMemory`)",
    note = "for device memory derive `CudaArrayInterface` instead"
)]
pub unsafe trait HostMemory {
    /// The item type stored.
    type Elem: Element;
    /// Address of the first item.
    fn host_ptr(&self) -> *const Self::Elem;
    /// Number of items.
    fn len(&self) -> usize;
    /// Whether there are no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether consumers may write through the exported pointer (false forces `readonly`).
    fn is_writable(&self) -> bool {
        true
    }
    /// Whether the memory carries its own shape and strides ([`Self::own_layout`]), as
    /// ndarray's arrays do: a derive then takes them from it, and naming `shape`, `strides`,
    /// `offset` or `order` beside such a field is a compile error.
    const OWN_LAYOUT: bool = false;
    /// The memory's own layout, where it has one (ndarray's arrays): its items are then those
    /// of this layout, found within the `len()` items from `host_ptr()` (the lowest address),
    /// not the flat run of them. `None` (the default): a flat run, which the derive's `shape`,
    /// `strides`, `offset` and `order` describe. An export checks that the layout fits.
    fn own_layout(&self) -> Option<OwnLayout> {
        None
    }
}

/// The layout host memory carries itself ([`HostMemory::own_layout`]): the shape, the byte
/// strides (negative ones included), and the byte offset of the first item from the lowest
/// address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnLayout {
    /// Items per dimension.
    pub shape: Vec<usize>,
    /// Bytes from one item to the next along each dimension.
    pub strides: Vec<isize>,
    /// Bytes from `host_ptr()` to the first item (index zero).
    pub offset: usize,
}

macro_rules! host_slices {
    ($( [$($g:tt)*] $ty:ty, writable: $w:expr; )*) => {$(
        // SAFETY: the pointer and length of a live slice owned or borrowed by `self`.
        unsafe impl<$($g)*> HostMemory for $ty {
            type Elem = T;
            fn host_ptr(&self) -> *const T {
                self.as_ptr()
            }
            fn len(&self) -> usize {
                <[T]>::len(self)
            }
            fn is_writable(&self) -> bool {
                $w
            }
        }
    )*};
}

host_slices! {
    [T: Element] Vec<T>, writable: true;
    [T: Element] Box<[T]>, writable: true;
    [T: Element, const N: usize] [T; N], writable: true;
    [T: Element] &mut [T], writable: true;
    // A shared borrow must not be written through: always exported read-only.
    [T: Element] &[T], writable: false;
}

/// Device memory allocated elsewhere (another library, a raw `cuMemAlloc`), described by its
/// address and length. It does not own the memory.
#[derive(Debug, PartialEq, Eq)]
pub struct RawDeviceMemory<T> {
    ptr: u64,
    len: usize,
    writable: bool,
    _elem: PhantomData<fn() -> T>,
}

impl<T> Clone for RawDeviceMemory<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for RawDeviceMemory<T> {}

impl<T: Element> RawDeviceMemory<T> {
    /// Wraps `len` items of `T` at device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must be device-accessible and valid for `len` items of `T` for as long as this
    /// value, and any descriptor exported from it, is in use (or 0 with `len == 0`).
    pub const unsafe fn from_raw_parts(ptr: u64, len: usize) -> Self {
        RawDeviceMemory {
            ptr,
            len,
            writable: true,
            _elem: PhantomData,
        }
    }

    /// The same memory, exported read-only.
    pub const fn read_only(mut self) -> Self {
        self.writable = false;
        self
    }
}

// SAFETY: `from_raw_parts`'s contract is exactly this trait's.
unsafe impl<T: Element> DeviceMemory for RawDeviceMemory<T> {
    type Elem = T;
    fn device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn is_writable(&self) -> bool {
        self.writable
    }
}

// SAFETY: forwards to `T`, which is borrowed for the reference's lifetime.
unsafe impl<T: DeviceMemory + ?Sized> DeviceMemory for &T {
    type Elem = T::Elem;
    fn device_ptr(&self) -> u64 {
        (**self).device_ptr()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn is_writable(&self) -> bool {
        (**self).is_writable()
    }
    fn order_export(
        &self,
        exported: Option<Stream>,
        live: Option<LiveStream<'_>>,
    ) -> Result<(), StreamError> {
        (**self).order_export(exported, live)
    }
}

// Written out, not generated by a macro: rustc lists these impls in the "not device
// memory" / "not a stream" errors, and a macro's impl reads as `$ty` there.
// SAFETY: forwards to `T`, which the Arc keeps alive as long as this handle.
unsafe impl<T: DeviceMemory + ?Sized> DeviceMemory for std::sync::Arc<T> {
    type Elem = T::Elem;
    fn device_ptr(&self) -> u64 {
        (**self).device_ptr()
    }
    fn len(&self) -> usize {
        (**self).len()
    }
    fn is_writable(&self) -> bool {
        (**self).is_writable()
    }
    fn order_export(
        &self,
        exported: Option<Stream>,
        live: Option<LiveStream<'_>>,
    ) -> Result<(), StreamError> {
        (**self).order_export(exported, live)
    }
}

/// An empty byte vector with room for `capacity` bytes, or `AllocError`: `Vec::with_capacity`
/// (and `vec![0; n]`) abort the process when the allocation fails, and the bytes of a view
/// can far exceed the memory it lives in (a broadcast view repeats one item).
#[cfg(any(feature = "python", feature = "cuda"))]
pub(crate) fn byte_vec(capacity: usize) -> Result<Vec<u8>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(capacity)
        .map_err(|_| AllocError(capacity))?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emptiness_and_writability() {
        // SAFETY: never dereferenced.
        let (empty, two) = unsafe {
            (
                RawDeviceMemory::<f32>::from_raw_parts(0, 0),
                RawDeviceMemory::<f32>::from_raw_parts(0x1000, 2),
            )
        };
        assert!(empty.is_empty() && !two.is_empty());
        assert!(two.is_writable() && !two.read_only().is_writable());
        let arc = std::sync::Arc::new(two.read_only());
        assert_eq!((arc.device_ptr(), arc.len()), (0x1000, 2));
        assert!(!arc.is_writable() && !<&_ as DeviceMemory>::is_writable(&&arc));
        assert!(<&_ as DeviceMemory>::is_writable(&&two));
        assert!(HostMemory::is_empty(&Vec::<u8>::new()));
        assert!(!HostMemory::is_empty(&[1u8]));
        assert!(HostMemory::is_writable(&vec![1u8]));
        assert!(!HostMemory::is_writable(&&[1u8][..]));
    }

    #[test]
    #[cfg(any(feature = "python", feature = "cuda"))]
    fn byte_vectors_too_big_for_memory_are_errors() {
        // More than any address space holds, and more than a `Vec` may hold: errors naming
        // the size, where `Vec::with_capacity` would abort.
        if !cfg!(miri) {
            // (Miri stops the program at an allocation this large instead of failing it.)
            assert_eq!(byte_vec(1 << 62), Err(AllocError(1 << 62)));
        }
        assert_eq!(byte_vec(usize::MAX), Err(AllocError(usize::MAX)));
        assert_eq!(
            AllocError(1 << 62).to_string(),
            "cannot allocate 4611686018427387904 bytes of host memory"
        );
        let v = byte_vec(100).unwrap();
        assert!(v.is_empty() && v.capacity() >= 100);
    }
}
