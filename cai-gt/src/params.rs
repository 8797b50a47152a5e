//! Storage parameters (GDP-3's keyword arguments), the `defaults` presets with their layout
//! table, and the lookup order: explicit argument, then the preset, then the data, then the
//! fallback.

use crate::StorageError;
use crate::alloc::check_layout;
use crate::dims::{Dim, PerDim, default_dims};

/// Defines the presets from one table: each line is a variant, the name `defaults=` takes, how
/// it lays dimensions out, its alignment in items (GT4Py's unit) and where it allocates.
macro_rules! presets {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $layout:expr, $align:literal, $device:ident;)*) => {
        /// A `defaults` preset: GDP-3's four, and GT4Py 1.x's backends by the names GT4Py
        /// gives them (`gt4py.storage.layout_registry`), each with the layout and alignment
        /// GT4Py allocates for it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Preset {
            $($(#[$doc])* $variant,)*
        }

        impl Preset {
            /// Every preset, in the table's order.
            pub const ALL: &[Preset] = &[$(Preset::$variant),*];

            /// Parses a preset's name (`"C"`, `"gtx86"`, `"gt:gpu"`...).
            pub fn parse(name: &str) -> Result<Preset, StorageError> {
                match name {
                    $($name => Ok(Preset::$variant),)*
                    other => Err(StorageError::Preset(other.to_string())),
                }
            }

            /// The preset's name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Preset::$variant => $name,)*
                }
            }

            fn spec(self) -> (PresetLayout, usize, StorageDevice) {
                match self {
                    $(Preset::$variant => ($layout, $align, StorageDevice::$device),)*
                }
            }
        }
    };
}

/// How a preset orders dimensions.
#[derive(Clone, Copy)]
enum PresetLayout {
    /// By position, C order (the last index contiguous), whatever the dims mean.
    ByPosition,
    /// By position, Fortran order.
    Reversed,
    /// By meaning, as GT4Py's `layout_maker_factory`: data dimensions outermost (`"0"` first),
    /// then I, J, K by these ranks (the highest innermost).
    Gt4Py([u8; 3]),
}

use PresetLayout::{ByPosition, Gt4Py, Reversed};

presets! {
    /// C order: the last index is contiguous whatever the dims.
    C = "C", ByPosition, 1, Host;
    /// Fortran order: the first index is contiguous whatever the dims.
    F = "F", Reversed, 1, Host;
    /// GDP-3's name for GridTools' x86 backend, GT4Py's `gt:cpu_kfirst`: K contiguous.
    GtX86 = "gtx86", Gt4Py([0, 1, 2]), 1, Host;
    /// GDP-3's name for GridTools' CUDA backend, GT4Py's `gt:gpu`: I contiguous, 32 items
    /// aligned, on the GPU.
    GtCuda = "gtcuda", Gt4Py([2, 1, 0]), 32, Gpu;
    /// GT4Py's `numpy` backend: K contiguous.
    Numpy = "numpy", Gt4Py([0, 1, 2]), 1, Host;
    /// GT4Py's `debug` backend: K contiguous.
    Debug = "debug", Gt4Py([0, 1, 2]), 1, Host;
    /// GT4Py's `gt:cpu_ifirst`: I contiguous.
    GtCpuIfirst = "gt:cpu_ifirst", Gt4Py([2, 1, 0]), 1, Host;
    /// GT4Py's `gt:cpu_kfirst`: K contiguous.
    GtCpuKfirst = "gt:cpu_kfirst", Gt4Py([0, 1, 2]), 1, Host;
    /// GT4Py's `gt:gpu`: I contiguous, 32 items aligned, on the GPU.
    GtGpu = "gt:gpu", Gt4Py([2, 1, 0]), 32, Gpu;
    /// GT4Py's `dace:cpu`: J contiguous, K outermost.
    DaceCpu = "dace:cpu", Gt4Py([1, 2, 0]), 1, Host;
    /// GT4Py's `dace:cpu_kfirst`: K contiguous.
    DaceCpuKfirst = "dace:cpu_kfirst", Gt4Py([0, 1, 2]), 1, Host;
    /// GT4Py's `dace:cpu_KJI`: I contiguous.
    DaceCpuKji = "dace:cpu_KJI", Gt4Py([2, 1, 0]), 1, Host;
    /// GT4Py's `dace:gpu`: I contiguous, on the GPU.
    DaceGpu = "dace:gpu", Gt4Py([2, 1, 0]), 1, Gpu;
    /// GT4Py's `dace:gpu_IJK`: K contiguous, on the GPU.
    DaceGpuIjk = "dace:gpu_IJK", Gt4Py([0, 1, 2]), 1, Gpu;
}

impl Preset {
    /// The preset's `layout` for these dims (GDP-3's table: C and F ignore the dims' meaning,
    /// the backends follow it). A backend's data dimensions are outermost, `"0"` first, as
    /// GT4Py lays them out; its I, J and K follow their meaning, not their position, so that
    /// `dims="KJI"` gets GDP-3's layout (GT4Py's maker assumes I, J, K in that order).
    pub fn layout(self, dims: &[Dim]) -> PerDim<usize> {
        let n = dims.len();
        match self.spec().0 {
            ByPosition => (0..n).collect(),
            Reversed => (0..n).rev().collect(),
            Gt4Py(ranks) => {
                // Each dimension's place from outermost to innermost.
                let key = |d: Dim| match d {
                    Dim::Data(k) => (0, k),
                    Dim::I => (1, u32::from(ranks[0])),
                    Dim::J => (1, u32::from(ranks[1])),
                    Dim::K => (1, u32::from(ranks[2])),
                };
                let mut order: PerDim<usize> = (0..n).collect();
                order.sort_by_key(|&i| key(dims[i]));
                let mut layout = PerDim::from_elem(0, n);
                for (rank, &i) in order.iter().enumerate() {
                    layout[i] = rank;
                }
                layout
            }
        }
    }

    /// The preset's `alignment_size` in bytes for items of `itemsize` bytes: GT4Py aligns to a
    /// number of items (`gt:gpu`: 32 items, so 256 bytes for float64); 1 (no alignment) where
    /// that number is 1.
    pub fn alignment(self, itemsize: usize) -> usize {
        match self.spec().1 {
            1 => 1,
            items => items * itemsize.max(1),
        }
    }

    /// The preset's `device`.
    pub fn device(self) -> StorageDevice {
        self.spec().2
    }
}

/// Where a storage's buffer lives (`device`: None, `"gpu"` or `"gpu:N"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StorageDevice {
    /// Host memory only (`device=None`).
    Host,
    /// A GPU buffer (`device="gpu"`).
    Gpu,
}

impl StorageDevice {
    /// Parses `None` / `"gpu"` (the current device) / `"gpu:N"` (device N, as PyTorch's
    /// `"cuda:N"`), with which GPU where one is named.
    pub fn parse(value: Option<&str>) -> Result<(Self, Option<GpuDevice>), StorageError> {
        let bad = || StorageError::Device(value.unwrap_or_default().to_string());
        match value {
            None => Ok((StorageDevice::Host, None)),
            Some("gpu") => Ok((StorageDevice::Gpu, Some(GpuDevice::Current))),
            Some(other) => {
                let ordinal = other.strip_prefix("gpu:").ok_or_else(bad)?;
                // Digits only (no sign, no spaces), no leading zero: one spelling per device.
                if ordinal.is_empty()
                    || !ordinal.bytes().all(|b| b.is_ascii_digit())
                    || (ordinal.len() > 1 && ordinal.starts_with('0'))
                {
                    return Err(bad());
                }
                let ordinal = ordinal.parse().map_err(|_| bad())?;
                Ok((StorageDevice::Gpu, Some(GpuDevice::Ordinal(ordinal))))
            }
        }
    }
}

/// Which GPU a device storage is on, where a source says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuDevice {
    /// The device current when it is allocated (`device="gpu"`).
    Current,
    /// Device N (`device="gpu:N"`; a storage's or device memory's own device).
    Ordinal(u32),
}

impl GpuDevice {
    /// The ordinal named, if any.
    pub fn ordinal(self) -> Option<u32> {
        match self {
            GpuDevice::Current => None,
            GpuDevice::Ordinal(n) => Some(n),
        }
    }
}

/// Who keeps host and device buffers in step (`managed`; only meaningful on the GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Managed {
    /// No host buffer is kept in step (`managed=None`).
    None,
    /// A host and a device mirror kept in step by the storage (`"gt4py"`, the default).
    Gt4Py,
    /// CUDA unified memory (`"cuda"`).
    Cuda,
}

impl Managed {
    /// Parses `None` / `"gt4py"` / `"cuda"`.
    pub fn parse(value: Option<&str>) -> Result<Self, StorageError> {
        match value {
            None => Ok(Managed::None),
            Some("gt4py") => Ok(Managed::Gt4Py),
            Some("cuda") => Ok(Managed::Cuda),
            Some(other) => Err(StorageError::Managed(other.to_string())),
        }
    }
}

/// Checks a halo (a (start, end) pair per dimension) against the shape: one pair per
/// dimension, none wider than its dimension.
pub fn check_halo(halo: &[(usize, usize)], shape: &[usize]) -> Result<(), StorageError> {
    if halo.len() != shape.len() {
        return Err(StorageError::Length {
            param: "halo",
            got: halo.len(),
            ndim: shape.len(),
        });
    }
    for (axis, (&h, &size)) in halo.iter().zip(shape).enumerate() {
        if h.0.checked_add(h.1).is_none_or(|w| w > size) {
            return Err(StorageError::HaloTooLarge {
                axis,
                halo: h,
                size,
            });
        }
    }
    Ok(())
}

/// The parameters of a storage, each optional until resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageParams {
    /// `defaults`.
    pub defaults: Option<Preset>,
    /// `dims`.
    pub dims: Option<PerDim<Dim>>,
    /// `layout`.
    pub layout: Option<PerDim<usize>>,
    /// `halo`, as (start, end) pairs.
    pub halo: Option<PerDim<(usize, usize)>>,
    /// `alignment_size`.
    pub alignment_size: Option<usize>,
    /// `aligned_index`.
    pub aligned_index: Option<PerDim<usize>>,
    /// `device`.
    pub device: Option<StorageDevice>,
    /// Which GPU (`device="gpu"` or `"gpu:N"`, a source's device; `None`: not said).
    pub device_id: Option<GpuDevice>,
    /// `managed`.
    pub managed: Option<Managed>,
}

/// Parameters with every value decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedParams {
    /// The `defaults` preset the values came from, if any (kept for `*_like`).
    pub defaults: Option<Preset>,
    /// The dims.
    pub dims: PerDim<Dim>,
    /// The stride order.
    pub layout: PerDim<usize>,
    /// (start, end) per dimension.
    pub halo: PerDim<(usize, usize)>,
    /// Bytes.
    pub alignment_size: usize,
    /// The aligned item.
    pub aligned_index: PerDim<usize>,
    /// Where the buffer lives.
    pub device: StorageDevice,
    /// On the GPU, the device's ordinal (`None`: the current device when allocating).
    pub device_id: Option<u32>,
    /// Who keeps mirrors in step (`Managed::None` on the host).
    pub managed: Managed,
}

impl StorageParams {
    /// Resolves every parameter for `shape` and items of `itemsize` bytes (a preset's
    /// alignment is in items), taking each from the first source that has it: these explicit
    /// values, then the `defaults` preset, then `data` (parameters read from a buffer or
    /// storage being wrapped or copied), then the fallback (C layout, no halo, no alignment,
    /// the halo's start as aligned index, host memory, "gt4py" on the GPU).
    pub fn resolve(
        &self,
        shape: &[usize],
        itemsize: usize,
        data: &StorageParams,
    ) -> Result<ResolvedParams, StorageError> {
        let ndim = shape.len();
        let preset = self.defaults.or(data.defaults);
        let dims = self
            .dims
            .as_ref()
            .or(data.dims.as_ref())
            .cloned()
            .unwrap_or_else(|| default_dims(ndim));
        if dims.len() != ndim {
            return Err(StorageError::Length {
                param: "dims",
                got: dims.len(),
                ndim,
            });
        }
        let layout = self
            .layout
            .clone()
            .or_else(|| preset.map(|p| p.layout(&dims)))
            .or_else(|| data.layout.clone())
            .unwrap_or_else(|| (0..ndim).collect());
        check_layout(&layout, ndim)?;
        let halo = self
            .halo
            .as_ref()
            .or(data.halo.as_ref())
            .cloned()
            .unwrap_or_else(|| PerDim::from_elem((0, 0), ndim));
        check_halo(&halo, shape)?;
        let alignment_size = self
            .alignment_size
            .or_else(|| preset.map(|p| p.alignment(itemsize)))
            .or(data.alignment_size)
            .unwrap_or(1);
        let aligned_index = self
            .aligned_index
            .as_ref()
            .or(data.aligned_index.as_ref())
            .cloned()
            .unwrap_or_else(|| halo.iter().map(|h| h.0).collect());
        let device = self
            .device
            .or_else(|| preset.map(Preset::device))
            .or(data.device)
            .unwrap_or(StorageDevice::Host);
        let (managed, device_id) = match device {
            StorageDevice::Host => (Managed::None, None),
            StorageDevice::Gpu => (
                self.managed.or(data.managed).unwrap_or(Managed::Gt4Py),
                self.device_id
                    .or(data.device_id)
                    .and_then(GpuDevice::ordinal),
            ),
        };
        Ok(ResolvedParams {
            defaults: preset,
            dims,
            layout,
            halo,
            alignment_size,
            aligned_index,
            device,
            device_id,
            managed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dims::parse_dims;
    use smallvec::smallvec;

    fn dims(s: &str) -> PerDim<Dim> {
        let names: Vec<String> = s.chars().map(String::from).collect();
        parse_dims(&names).unwrap()
    }

    #[test]
    fn a_device_is_none_gpu_or_gpu_and_an_ordinal() {
        let parse = StorageDevice::parse;
        assert_eq!(parse(None).unwrap(), (StorageDevice::Host, None));
        let (gpu, current) = (StorageDevice::Gpu, Some(GpuDevice::Current));
        assert_eq!(parse(Some("gpu")).unwrap(), (gpu, current));
        assert_eq!(
            parse(Some("gpu:0")).unwrap(),
            (gpu, Some(GpuDevice::Ordinal(0)))
        );
        assert_eq!(
            parse(Some("gpu:12")).unwrap(),
            (gpu, Some(GpuDevice::Ordinal(12)))
        );
        for bad in [
            "cpu",
            "gpu:",
            "gpu:-1",
            "gpu:+1",
            "gpu: 1",
            "gpu:1 ",
            "GPU:1",
            "gpu:01",
            "gpu:00",
            "gpu:4294967296",
        ] {
            assert_eq!(
                parse(Some(bad)).unwrap_err(),
                StorageError::Device(bad.to_string()),
                "{bad}"
            );
        }
        // The ordinal goes with the device; a host storage has none; an explicit "gpu" is the
        // current device, whatever device the data is on.
        let asked = StorageParams {
            device: Some(StorageDevice::Gpu),
            device_id: Some(GpuDevice::Ordinal(1)),
            ..Default::default()
        };
        let shape = [2, 3];
        let none = StorageParams::default();
        assert_eq!(asked.resolve(&shape, 8, &none).unwrap().device_id, Some(1));
        let data = StorageParams {
            device: Some(StorageDevice::Host),
            ..asked.clone()
        };
        assert_eq!(none.resolve(&shape, 8, &data).unwrap().device_id, None);
        let on_gpu = StorageParams {
            device: Some(StorageDevice::Gpu),
            ..Default::default()
        };
        assert_eq!(
            on_gpu.resolve(&shape, 8, &asked).unwrap().device_id,
            Some(1)
        );
        let current = StorageParams {
            device: Some(StorageDevice::Gpu),
            device_id: current,
            ..Default::default()
        };
        assert_eq!(current.resolve(&shape, 8, &asked).unwrap().device_id, None);
    }

    #[test]
    fn the_gdp3_layout_table() {
        // GDP-3: rows dims="IJK" and dims="KJI"; columns F, C, gtx86, gtcuda.
        let table = [
            ("IJK", [[2, 1, 0], [0, 1, 2], [0, 1, 2], [2, 1, 0]]),
            ("KJI", [[2, 1, 0], [0, 1, 2], [2, 1, 0], [0, 1, 2]]),
        ];
        for (d, row) in table {
            for (preset, expected) in [Preset::F, Preset::C, Preset::GtX86, Preset::GtCuda]
                .into_iter()
                .zip(row)
            {
                assert_eq!(
                    preset.layout(&dims(d))[..],
                    expected,
                    "{d} {}",
                    preset.name()
                );
            }
        }
        // Data dimensions outermost, "0" first, as GT4Py's layout maker places them.
        let d = parse_dims(&["I", "J", "K", "0", "1"]).unwrap();
        assert_eq!(Preset::GtX86.layout(&d)[..], [2, 3, 4, 0, 1]);
        assert_eq!(Preset::GtCuda.layout(&d)[..], [4, 3, 2, 0, 1]);
    }

    /// GT4Py's layout registry (gt4py 1.1.12, `storage/cartesian/layout_registry.py`): base
    /// ranks of I, J, K, alignment in items, device; and the names GDP-3 gave two of them.
    #[test]
    fn the_gt4py_backends_as_gt4py_registers_them() {
        let ijk = parse_dims(&["I", "J", "K"]).unwrap();
        for (name, layout, items, device) in [
            ("numpy", [0, 1, 2], 1, StorageDevice::Host),
            ("debug", [0, 1, 2], 1, StorageDevice::Host),
            ("gt:cpu_ifirst", [2, 1, 0], 1, StorageDevice::Host),
            ("gt:cpu_kfirst", [0, 1, 2], 1, StorageDevice::Host),
            ("gt:gpu", [2, 1, 0], 32, StorageDevice::Gpu),
            ("dace:cpu", [1, 2, 0], 1, StorageDevice::Host),
            ("dace:cpu_kfirst", [0, 1, 2], 1, StorageDevice::Host),
            ("dace:cpu_KJI", [2, 1, 0], 1, StorageDevice::Host),
            ("dace:gpu", [2, 1, 0], 1, StorageDevice::Gpu),
            ("dace:gpu_IJK", [0, 1, 2], 1, StorageDevice::Gpu),
            ("gtx86", [0, 1, 2], 1, StorageDevice::Host),
            ("gtcuda", [2, 1, 0], 32, StorageDevice::Gpu),
        ] {
            let p = Preset::parse(name).unwrap();
            assert_eq!((p.name(), &p.layout(&ijk)[..]), (name, &layout[..]));
            assert_eq!(
                (p.alignment(8), p.device()),
                (if items == 1 { 1 } else { items * 8 }, device),
                "{name}"
            );
        }
        assert_eq!(Preset::ALL.len(), 14);
        assert_eq!(
            Preset::parse("gt:cpu"),
            Err(StorageError::Preset("gt:cpu".into()))
        );
    }

    #[test]
    fn lookup_order_explicit_then_preset_then_data_then_fallback() {
        let shape = [4, 5, 6];
        let fallback = StorageParams::default()
            .resolve(&shape, 8, &StorageParams::default())
            .unwrap();
        assert_eq!(fallback.layout[..], [0, 1, 2]);
        assert_eq!(fallback.halo[..], [(0, 0); 3]);
        assert_eq!(
            (fallback.alignment_size, fallback.device),
            (1, StorageDevice::Host)
        );
        let data = StorageParams {
            layout: Some(smallvec![1, 0, 2]),
            alignment_size: Some(16),
            halo: Some(smallvec![(1, 1), (0, 0), (2, 0)]),
            ..Default::default()
        };
        let from_data = StorageParams::default().resolve(&shape, 8, &data).unwrap();
        assert_eq!(
            (from_data.layout.as_slice(), from_data.alignment_size),
            (&[1, 0, 2][..], 16)
        );
        assert_eq!(from_data.aligned_index[..], [1, 0, 2]); // the halo's start
        let preset = StorageParams {
            defaults: Some(Preset::GtCuda),
            ..Default::default()
        };
        let p = preset.clone().resolve(&shape, 8, &data).unwrap();
        assert_eq!(
            (p.layout.as_slice(), p.alignment_size),
            (&[2, 1, 0][..], 256),
            "32 items of 8 bytes"
        );
        assert_eq!((p.device, p.managed), (StorageDevice::Gpu, Managed::Gt4Py));
        let explicit = StorageParams {
            layout: Some(smallvec![0, 2, 1]),
            alignment_size: Some(8),
            ..preset
        };
        let e = explicit.resolve(&shape, 8, &data).unwrap();
        assert_eq!((e.layout.as_slice(), e.alignment_size), (&[0, 2, 1][..], 8));
    }

    #[test]
    fn bad_parameters() {
        let shape = [4, 5];
        let r = |p: StorageParams| {
            p.resolve(&shape, 8, &StorageParams::default())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            r(StorageParams {
                halo: Some(smallvec![(2, 3), (0, 0)]),
                ..Default::default()
            }),
            "halo = (2, 3) on dimension 0 needs 5 points but the dimension has 4"
        );
        // A sum past usize::MAX is named as it is, not wrapped.
        assert_eq!(
            r(StorageParams {
                halo: Some(smallvec![(usize::MAX, 1), (0, 0)]),
                ..Default::default()
            }),
            "halo = (18446744073709551615, 1) on dimension 0 needs 18446744073709551616 points but the dimension has 4"
        );
        assert_eq!(
            r(StorageParams {
                layout: Some(smallvec![1, 1]),
                ..Default::default()
            }),
            "layout = [1, 1] is not a permutation of 0..2 (one entry per dimension, each once; the largest entry is the contiguous dimension)"
        );
        assert_eq!(
            r(StorageParams {
                dims: Some(dims("IJK")),
                ..Default::default()
            }),
            "dims has 3 entries but the storage has 2 dimensions"
        );
        // Each preset's name is the one `defaults=` takes (and Python's `storage.defaults`).
        for (name, preset) in [
            ("C", Preset::C),
            ("F", Preset::F),
            ("gtx86", Preset::GtX86),
            ("gtcuda", Preset::GtCuda),
        ] {
            assert_eq!((Preset::parse(name), preset.name()), (Ok(preset), name));
        }
        assert!(
            Preset::parse("gtmc")
                .unwrap_err()
                .to_string()
                .starts_with("defaults = \"gtmc\" is not a preset")
        );
        assert!(StorageDevice::parse(Some("cpu")).is_err());
        assert!(Managed::parse(Some("yes")).is_err());
        assert!(check_halo(&[(usize::MAX, 1)], &[3]).is_err());
    }
}
