//! Host memory behind a storage: a fresh allocation (zeroed through `calloc`, as `numpy.zeros`
//! does, or uninitialized as `numpy.empty`), or memory owned by something else (a wrapped
//! NumPy array, CUDA unified memory) kept alive by a handle.

use std::alloc::Layout as AllocLayout;
use std::any::Any;
use std::ptr::NonNull;

/// The alignment of fresh allocations: the system allocator's own (`calloc` gives lazily
/// zeroed pages for large sizes only at this alignment). Storage alignment beyond it comes from
/// the allocation plan's shift, as in GT4Py.
const BASE_ALIGN: usize = 16;

enum Keep {
    /// Allocated here at `base` with this layout (the buffer starts at or after `base`);
    /// freed on drop.
    Owned {
        base: NonNull<u8>,
        layout: AllocLayout,
    },
    /// Owned by this handle (dropped last).
    Foreign(#[allow(dead_code)] Box<dyn Any + Send + Sync>),
}

/// A host buffer: `len` bytes at `ptr`, valid as long as this value lives.
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
    keep: Keep,
}

// SAFETY: the buffer is plain bytes with no thread affinity; an owned allocation may be freed
// from any thread, and a foreign handle is `Send + Sync` by its bound. `&HostBuffer` gives only
// the address; this crate reads and writes the bytes under the lock of the storage's buffers
// (`Buffers::lock_host`), so its own accesses from several threads do not race.
unsafe impl Send for HostBuffer {}
// SAFETY: as above; `&HostBuffer` only hands out the pointer.
unsafe impl Sync for HostBuffer {}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.keep {
            Keep::Owned { .. } => "owned",
            Keep::Foreign(_) => "foreign",
        };
        write!(f, "HostBuffer({:p}, {} bytes, {kind})", self.ptr, self.len)
    }
}

pub use cai_runtime::AllocError;

impl HostBuffer {
    /// `len` bytes, all zero. Large sizes come from fresh (lazily zeroed) pages, as for
    /// `numpy.zeros`.
    pub fn zeroed(len: usize) -> Result<HostBuffer, AllocError> {
        Self::alloc(len, true)
    }

    /// `len` bytes, not initialized to anything in particular (`numpy.empty`). The bytes are
    /// still plain bytes that may be read: every bit pattern is valid for the element types a
    /// storage holds.
    pub fn uninit(len: usize) -> Result<HostBuffer, AllocError> {
        Self::alloc(len, false)
    }

    fn alloc(len: usize, zeroed: bool) -> Result<HostBuffer, AllocError> {
        Self::congruent(len, zeroed, 1, 0)
    }

    /// `len` bytes, zeroed or not, starting at an address congruent to `addr` modulo
    /// `modulus`: a host mirror of device memory at `addr` whose items must be aligned as the
    /// device's are (both sides put item `[0, ..., 0]` at the same offset from their start,
    /// which the device's address decides).
    pub(crate) fn congruent(
        len: usize,
        zeroed: bool,
        modulus: usize,
        addr: usize,
    ) -> Result<HostBuffer, AllocError> {
        let modulus = modulus.max(1);
        // Spare bytes to shift the start by: where the allocator's own alignment is a multiple
        // of the modulus, the start's residue is 0 and the shift is known (none for an
        // unaligned storage); else up to `modulus - 1` (any modulus: a storage's alignment
        // need not be a power of two).
        let spare = if BASE_ALIGN.is_multiple_of(modulus) {
            addr % modulus
        } else {
            modulus - 1
        };
        let total = len.checked_add(spare).ok_or(AllocError(len))?;
        // A zero-size allocation is not allowed: allocate one aligned block instead.
        let layout =
            AllocLayout::from_size_align(total.max(1), BASE_ALIGN).map_err(|_| AllocError(len))?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let raw = unsafe {
            if zeroed {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        let base = NonNull::new(raw).ok_or(AllocError(len))?;
        let shift = (addr % modulus + modulus - base.as_ptr() as usize % modulus) % modulus;
        // SAFETY: `shift` <= `spare` (below the modulus; `addr % modulus` itself where the base
        // is a multiple of it), so the buffer's `len` bytes lie inside the allocation.
        let ptr = unsafe { base.add(shift) };
        hugepages(base, total);
        Ok(HostBuffer {
            ptr,
            len,
            keep: Keep::Owned { base, layout },
        })
    }

    /// Memory owned elsewhere, kept alive by `owner` for as long as this buffer lives.
    ///
    /// # Safety
    /// `ptr` must be valid for reads (and for writes, if the storage is written) of `len` bytes
    /// for as long as `owner` is alive, and not be freed by anything else meanwhile.
    pub unsafe fn foreign(
        ptr: NonNull<u8>,
        len: usize,
        owner: Box<dyn Any + Send + Sync>,
    ) -> HostBuffer {
        HostBuffer {
            ptr,
            len,
            keep: Keep::Foreign(owner),
        }
    }

    /// The first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The address of the first byte.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the memory was allocated here (and is therefore writable).
    pub fn is_owned(&self) -> bool {
        matches!(self.keep, Keep::Owned { .. })
    }

    /// Copies `item` (one element's bytes) to every byte offset in `offsets`. Crate-private:
    /// [`crate::Storage::fill_host`] is the entry point, which refuses read-only memory.
    ///
    /// # Panics
    /// If an item at an offset would not lie inside the buffer (a bug in the caller's layout).
    pub(crate) fn fill(&self, offsets: impl Iterator<Item = isize>, item: &[u8]) {
        for off in offsets {
            let start = usize::try_from(off).expect("item offset before the buffer");
            assert!(
                start
                    .checked_add(item.len())
                    .is_some_and(|end| end <= self.len),
                "item at byte {start} of {} leaves the buffer of {} bytes",
                item.len(),
                self.len
            );
            // SAFETY: `start..start + item.len()` lies inside the buffer (asserted above), the
            // buffer is valid for writes while `self` lives, and `item` is a distinct slice.
            unsafe {
                std::ptr::copy_nonoverlapping(item.as_ptr(), self.ptr().add(start), item.len());
            }
        }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Keep::Owned { base, layout } = self.keep {
            // SAFETY: allocated at `base` in `congruent` with exactly this layout, freed
            // only here.
            unsafe { std::alloc::dealloc(base.as_ptr(), layout) }
        }
    }
}

/// Asks the kernel for transparent huge pages on large buffers, as NumPy does for arrays of
/// 4 MiB and more: far fewer page faults when the memory is first touched.
///
/// The advice covers the pages from the first page boundary in the buffer to the end of the
/// page holding its last byte, as NumPy's does: a large buffer is its own mapping that ends
/// on that page, so the mapping is split once (its first page stays out). Stopping at the
/// last whole page instead splits it twice, which cost 1.5 us more per 64 MiB allocation and
/// free.
#[cfg(all(target_os = "linux", not(miri)))]
fn hugepages(ptr: NonNull<u8>, len: usize) {
    const HUGE: usize = 1 << 22;
    const PAGE: usize = 4096;
    if len < HUGE {
        return;
    }
    let addr = ptr.as_ptr() as usize;
    let start = addr.next_multiple_of(PAGE);
    let end = (addr + len).next_multiple_of(PAGE);
    // SAFETY: [start, end) is page-aligned and every page of it holds bytes of the allocation
    // just made, so it is mapped. MADV_HUGEPAGE is advice that changes the contents of no page
    // (neither ours nor a neighbouring allocation's sharing the last page), and a failure (no
    // THP support) is harmless, so its result is ignored.
    unsafe {
        libc::madvise(
            ptr.as_ptr().with_addr(start).cast(),
            end - start,
            libc::MADV_HUGEPAGE,
        );
    }
}

// Miri cannot call `madvise`; the advice changes no byte, so leaving it out changes nothing
// that Miri checks.
#[cfg(any(not(target_os = "linux"), miri))]
fn hugepages(_: NonNull<u8>, _: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_and_filled() {
        let b = HostBuffer::zeroed(64).unwrap();
        assert_eq!(b.addr() % BASE_ALIGN, 0);
        // SAFETY: 64 bytes were allocated and zeroed.
        let bytes = unsafe { std::slice::from_raw_parts(b.ptr(), 64) };
        assert!(bytes.iter().all(|&x| x == 0));
        b.fill([0isize, 8, 56].into_iter(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(b.ptr(), 64) };
        assert_eq!(&bytes[..9], &[1, 2, 3, 4, 5, 6, 7, 8, 1]);
        assert_eq!(&bytes[56..], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(!b.is_empty() && b.is_owned());
        assert!(HostBuffer::zeroed(0).unwrap().is_empty());
        assert_eq!(
            HostBuffer::uninit(usize::MAX).unwrap_err(),
            AllocError(usize::MAX)
        );
    }

    #[test]
    fn congruent_buffers_start_where_asked_modulo_any_alignment() {
        for modulus in [1, 2, 8, 16, 24, 64, 256, 4096, 1000] {
            for addr in [0usize, 1, 8, 0x7f00_1000, 0x7f00_1230, 4095] {
                let b = HostBuffer::congruent(100, true, modulus, addr).unwrap();
                assert_eq!(b.addr() % modulus, addr % modulus, "{modulus} {addr:#x}");
                assert_eq!(b.len(), 100);
                // SAFETY: 100 bytes were allocated and zeroed.
                let bytes = unsafe { std::slice::from_raw_parts(b.ptr(), 100) };
                assert!(bytes.iter().all(|&x| x == 0));
                b.fill([0isize, 92].into_iter(), &[9; 8]);
                let u = HostBuffer::congruent(7, false, modulus, addr).unwrap();
                assert_eq!(u.addr() % modulus, addr % modulus);
            }
        }
        assert_eq!(
            HostBuffer::congruent(usize::MAX, true, 4096, 1).unwrap_err(),
            AllocError(usize::MAX)
        );
    }

    #[test]
    #[should_panic(expected = "leaves the buffer")]
    fn fill_outside_panics() {
        HostBuffer::zeroed(8)
            .unwrap()
            .fill([4isize].into_iter(), &[0; 8]);
    }

    #[test]
    fn foreign_keeps_its_owner() {
        let v = std::sync::Arc::new(vec![7u8; 4]);
        let ptr = NonNull::new(v.as_ptr() as *mut u8).unwrap();
        // SAFETY: the Arc'd Vec lives as long as the buffer holds a clone.
        let b = unsafe { HostBuffer::foreign(ptr, 4, Box::new(v.clone())) };
        assert_eq!(std::sync::Arc::strong_count(&v), 2);
        assert!(!b.is_owned());
        drop(b);
        assert_eq!(std::sync::Arc::strong_count(&v), 1);
    }

    /// The mapping of `/proc/self/smaps` holding `addr`: its range and `VmFlags`.
    #[cfg(all(target_os = "linux", not(miri)))]
    fn mapping_of(addr: usize) -> Option<(usize, usize, String)> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut current = None;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| {
                let (lo, hi) = r.split_once('-')?;
                Some((
                    usize::from_str_radix(lo, 16).ok()?,
                    usize::from_str_radix(hi, 16).ok()?,
                ))
            });
            if let Some((lo, hi)) = range.filter(|_| !line.starts_with("VmFlags")) {
                current = Some((lo, hi));
            } else if let (Some(flags), Some((lo, hi))) = (line.strip_prefix("VmFlags:"), current)
                && (lo..hi).contains(&addr)
            {
                return Some((lo, hi, flags.to_string()));
            }
        }
        None
    }

    #[test]
    #[cfg(all(target_os = "linux", not(miri)))]
    fn large_buffers_are_advised_huge_pages_to_their_last_byte() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        // Past glibc's largest mmap threshold, so the buffer is a mapping of its own; an odd
        // length, as an aligned storage's buffer has.
        let len = (64 << 20) + 63;
        let b = HostBuffer::zeroed(len).unwrap();
        let first_page = b.addr().next_multiple_of(4096);
        let first = mapping_of(first_page).expect("the buffer is mapped");
        let last = mapping_of(b.addr() + len - 1).expect("the buffer is mapped");
        assert!(first.2.split_whitespace().any(|f| f == "hg"), "{first:?}");
        // One advised mapping from the first whole page to the last byte: the mapping was
        // split once, not also before its last page.
        assert_eq!(first, last);
    }
}
