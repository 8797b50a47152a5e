//! Pointer attributes (the spec's "Pointer Attributes" section) and the checks an import makes
//! with them: is `data` device-accessible, and does the described extent stay inside the
//! allocation that holds it?
//!
//! The checks are pure functions of [`PointerAttributes`], tested without a GPU; the `cuda`
//! feature queries the driver for them (`cuda::pointer_attributes`).

use std::fmt;

use crate::layout::Extent;

/// What kind of memory a pointer points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryType {
    /// Device memory (`cuMemAlloc`, a pool, an IPC handle).
    Device,
    /// Page-locked host memory registered with CUDA (`cuMemAllocHost`, `cuMemHostRegister`).
    Host,
    /// Managed (unified) memory (`cuMemAllocManaged`).
    Managed,
    /// An address CUDA knows nothing about: ordinary pageable host memory, or garbage.
    Unregistered,
}

impl MemoryType {
    /// The name used in messages and in Python (`"device"`, `"host"`, `"managed"`,
    /// `"unregistered"`).
    pub fn name(self) -> &'static str {
        match self {
            MemoryType::Device => "device",
            MemoryType::Host => "host",
            MemoryType::Managed => "managed",
            MemoryType::Unregistered => "unregistered",
        }
    }
}

impl fmt::Display for MemoryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the driver knows about an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PointerAttributes {
    /// The address asked about.
    pub ptr: u64,
    /// The `CUcontext` owning the allocation (0 when none).
    pub context: u64,
    /// The ordinal of the device the memory belongs to (`None` when unregistered).
    pub device_ordinal: Option<u32>,
    /// The kind of memory.
    pub memory_type: MemoryType,
    /// Whether the memory is managed (`CU_POINTER_ATTRIBUTE_IS_MANAGED`).
    pub is_managed: bool,
    /// Whether the device can reach pageable host memory (HMM/ATS,
    /// `CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS`), which makes unregistered host memory
    /// device-accessible.
    pub pageable_memory_access: bool,
    /// The allocation holding `ptr`: its first address and size in bytes
    /// (`cuMemGetAddressRange`), when CUDA allocated it.
    pub range: Option<(u64, u64)>,
}

impl PointerAttributes {
    /// Whether a kernel can dereference the pointer.
    pub fn device_accessible(&self) -> bool {
        match self.memory_type {
            MemoryType::Device | MemoryType::Host | MemoryType::Managed => true,
            MemoryType::Unregistered => self.pageable_memory_access,
        }
    }

    /// Whether host code can dereference the pointer.
    pub fn host_accessible(&self) -> bool {
        matches!(
            self.memory_type,
            MemoryType::Host | MemoryType::Managed | MemoryType::Unregistered
        )
    }
}

/// A pointer an import refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// The device cannot reach the memory.
    #[error(
        "`data` = {ptr:#x} is not device-accessible: CUDA reports {memory_type} memory there{hint}; the CUDA Array Interface requires a device pointer (device, managed or registered host memory)",
        hint = if *memory_type == MemoryType::Unregistered { " (ordinary host memory, or an address from no allocation at all)" } else { "" }
    )]
    NotDeviceAccessible {
        /// The pointer.
        ptr: u64,
        /// What CUDA says it is.
        memory_type: MemoryType,
    },
    /// The described bytes leave the allocation holding the pointer.
    #[error(
        "the array described at `data` = {ptr:#x} spans bytes [{lo:#x}, {hi:#x}) but its allocation is [{start:#x}, {end:#x}) ({size} bytes): `shape`/`strides` describe memory {side} the allocation",
        end = start.saturating_add(*size),
        side = if *lo < *start && *hi > start.saturating_add(*size) { "on both sides of" } else if *lo < *start { "before" } else { "after" }
    )]
    OutsideAllocation {
        /// The pointer.
        ptr: u64,
        /// First byte the array touches.
        lo: u64,
        /// One past the last byte it touches.
        hi: u64,
        /// The allocation's first byte.
        start: u64,
        /// The allocation's size.
        size: u64,
    },
}

impl PointerError {
    /// The descriptor key the error is about (always `"data"`).
    pub fn key(&self) -> &'static str {
        "data"
    }
}

/// Checks an imported array's pointer: `extent` is the byte range the array touches relative to
/// `attrs.ptr` (`None` for a zero-size array, which touches nothing and is always accepted).
/// Memory CUDA did not allocate has no known range; only its accessibility is checked.
pub fn check_pointer(
    attrs: &PointerAttributes,
    extent: Option<Extent>,
) -> Result<(), PointerError> {
    let Some(extent) = extent else {
        return Ok(());
    };
    if !attrs.device_accessible() {
        return Err(PointerError::NotDeviceAccessible {
            ptr: attrs.ptr,
            memory_type: attrs.memory_type,
        });
    }
    if let Some((start, size)) = attrs.range {
        // Absolute addresses in i128: no overflow whatever the descriptor says.
        let lo = i128::from(attrs.ptr) + extent.lo as i128;
        let hi = i128::from(attrs.ptr) + extent.hi as i128;
        let end = i128::from(start) + i128::from(size);
        if lo < i128::from(start) || hi > end {
            let clamp = |v: i128| v.clamp(0, i128::from(u64::MAX)) as u64;
            return Err(PointerError::OutsideAllocation {
                ptr: attrs.ptr,
                lo: clamp(lo),
                hi: clamp(hi),
                start,
                size,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(memory_type: MemoryType, range: Option<(u64, u64)>) -> PointerAttributes {
        PointerAttributes {
            ptr: 0x1000,
            context: 0xc0,
            device_ordinal: Some(0),
            memory_type,
            is_managed: memory_type == MemoryType::Managed,
            pageable_memory_access: false,
            range,
        }
    }

    #[test]
    fn accessibility_by_memory_type() {
        use MemoryType::*;
        for (t, dev, host) in [
            (Device, true, false),
            (Host, true, true),
            (Managed, true, true),
            (Unregistered, false, true),
        ] {
            let a = attrs(t, None);
            assert_eq!(
                (a.device_accessible(), a.host_accessible()),
                (dev, host),
                "{t}"
            );
        }
        let hmm = PointerAttributes {
            pageable_memory_access: true,
            ..attrs(Unregistered, None)
        };
        assert!(hmm.device_accessible());
    }

    #[test]
    fn unregistered_memory_is_refused_naming_the_pointer() {
        let e = check_pointer(
            &attrs(MemoryType::Unregistered, None),
            Some(Extent { lo: 0, hi: 8 }),
        )
        .unwrap_err();
        assert_eq!(
            e,
            PointerError::NotDeviceAccessible {
                ptr: 0x1000,
                memory_type: MemoryType::Unregistered
            }
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with("`data` = 0x1000 is not device-accessible"),
            "{msg}"
        );
        assert!(msg.contains("unregistered memory"), "{msg}");
        assert_eq!(e.key(), "data");
    }

    #[test]
    fn extents_must_stay_inside_the_allocation() {
        // Allocation [0x800, 0x1800): 4 KiB around ptr = 0x1000.
        let a = attrs(MemoryType::Device, Some((0x800, 0x1000)));
        for (lo, hi) in [(0, 0x800), (-0x800, 0x800), (-0x800, 0), (0, 1)] {
            assert_eq!(
                check_pointer(&a, Some(Extent { lo, hi })),
                Ok(()),
                "{lo} {hi}"
            );
        }
        let after = check_pointer(&a, Some(Extent { lo: 0, hi: 0x801 })).unwrap_err();
        assert!(
            after.to_string().contains("memory after the allocation"),
            "{after}"
        );
        assert!(after.to_string().contains("[0x1000, 0x1801)"), "{after}");
        let before = check_pointer(&a, Some(Extent { lo: -0x801, hi: 8 })).unwrap_err();
        assert!(
            before.to_string().contains("memory before the allocation"),
            "{before}"
        );
        let both = check_pointer(
            &a,
            Some(Extent {
                lo: -0x900,
                hi: 0x900,
            }),
        )
        .unwrap_err();
        assert!(both.to_string().contains("on both sides of"), "{both}");
        // Extreme extents cannot overflow the check.
        let huge = Extent {
            lo: isize::MIN,
            hi: isize::MAX,
        };
        assert!(check_pointer(&a, Some(huge)).is_err());
    }

    #[test]
    fn zero_size_arrays_and_unknown_ranges() {
        let unknown = attrs(MemoryType::Host, None);
        assert_eq!(
            check_pointer(&unknown, Some(Extent { lo: 0, hi: 1 << 40 })),
            Ok(())
        );
        // A zero-size array touches nothing: accepted even at an unregistered address.
        assert_eq!(
            check_pointer(&attrs(MemoryType::Unregistered, None), None),
            Ok(())
        );
    }
}
