//! Storage parameters (GDP-3's keyword arguments), the `defaults` presets with their layout
//! table, and the lookup order: explicit argument, then the preset, then the data, then the
//! fallback.

use crate::StorageError;
use crate::alloc::check_layout;
use crate::dims::{Dim, PerDim, default_dims};

/// A `defaults` preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    /// C order: the last index is contiguous whatever the dims.
    C,
    /// Fortran order: the first index is contiguous whatever the dims.
    F,
    /// GridTools' x86 backend: K contiguous (then data dimensions innermost).
    GtX86,
    /// GridTools' CUDA backend: I contiguous, 32-byte alignment, on the GPU.
    GtCuda,
}

impl Preset {
    /// Parses `"C"`, `"F"`, `"gtx86"`, `"gtcuda"`.
    pub fn parse(name: &str) -> Result<Preset, StorageError> {
        match name {
            "C" => Ok(Preset::C),
            "F" => Ok(Preset::F),
            "gtx86" => Ok(Preset::GtX86),
            "gtcuda" => Ok(Preset::GtCuda),
            other => Err(StorageError::Preset(other.to_string())),
        }
    }

    /// The preset's name.
    pub fn name(self) -> &'static str {
        match self {
            Preset::C => "C",
            Preset::F => "F",
            Preset::GtX86 => "gtx86",
            Preset::GtCuda => "gtcuda",
        }
    }

    /// The preset's `layout` for these dims (GDP-3's table: C and F ignore the dims' meaning,
    /// the backends follow it).
    pub fn layout(self, dims: &[Dim]) -> PerDim<usize> {
        let n = dims.len();
        match self {
            Preset::C => (0..n).collect(),
            Preset::F => (0..n).rev().collect(),
            Preset::GtX86 | Preset::GtCuda => {
                // Rank of each dimension from outermost to innermost: x86 orders I, J, K, then
                // data dimensions 0, 1, ... (`Dim`'s order); CUDA the reverse.
                let mut order: PerDim<usize> = (0..n).collect();
                order.sort_by_key(|&i| dims[i]);
                if self == Preset::GtCuda {
                    order.reverse();
                }
                let mut layout = PerDim::from_elem(0, n);
                for (rank, &i) in order.iter().enumerate() {
                    layout[i] = rank;
                }
                layout
            }
        }
    }

    /// The preset's `alignment_size` (the GridTools backends' alignment).
    pub fn alignment(self) -> usize {
        match self {
            Preset::GtCuda => 32,
            _ => 1,
        }
    }

    /// The preset's `device`.
    pub fn device(self) -> StorageDevice {
        match self {
            Preset::GtCuda => StorageDevice::Gpu,
            _ => StorageDevice::Host,
        }
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
    /// Resolves every parameter for `shape`, taking each from the first source that has it:
    /// these explicit values, then the `defaults` preset, then `data` (parameters read from a
    /// buffer or storage being wrapped or copied), then the fallback (C layout, no halo, no
    /// alignment, the halo's start as aligned index, host memory, "gt4py" on the GPU).
    pub fn resolve(
        &self,
        shape: &[usize],
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
            .or_else(|| preset.map(Preset::alignment))
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
        assert_eq!(asked.resolve(&shape, &none).unwrap().device_id, Some(1));
        let data = StorageParams {
            device: Some(StorageDevice::Host),
            ..asked.clone()
        };
        assert_eq!(none.resolve(&shape, &data).unwrap().device_id, None);
        let on_gpu = StorageParams {
            device: Some(StorageDevice::Gpu),
            ..Default::default()
        };
        assert_eq!(on_gpu.resolve(&shape, &asked).unwrap().device_id, Some(1));
        let current = StorageParams {
            device: Some(StorageDevice::Gpu),
            device_id: current,
            ..Default::default()
        };
        assert_eq!(current.resolve(&shape, &asked).unwrap().device_id, None);
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
        // Data dimensions: innermost for x86, outermost for CUDA.
        let d = parse_dims(&["I", "J", "K", "0"]).unwrap();
        assert_eq!(Preset::GtX86.layout(&d)[..], [0, 1, 2, 3]);
        assert_eq!(Preset::GtCuda.layout(&d)[..], [3, 2, 1, 0]);
    }

    #[test]
    fn lookup_order_explicit_then_preset_then_data_then_fallback() {
        let shape = [4, 5, 6];
        let fallback = StorageParams::default()
            .resolve(&shape, &StorageParams::default())
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
        let from_data = StorageParams::default().resolve(&shape, &data).unwrap();
        assert_eq!(
            (from_data.layout.as_slice(), from_data.alignment_size),
            (&[1, 0, 2][..], 16)
        );
        assert_eq!(from_data.aligned_index[..], [1, 0, 2]); // the halo's start
        let preset = StorageParams {
            defaults: Some(Preset::GtCuda),
            ..Default::default()
        };
        let p = preset.clone().resolve(&shape, &data).unwrap();
        assert_eq!(
            (p.layout.as_slice(), p.alignment_size),
            (&[2, 1, 0][..], 32)
        );
        assert_eq!((p.device, p.managed), (StorageDevice::Gpu, Managed::Gt4Py));
        let explicit = StorageParams {
            layout: Some(smallvec![0, 2, 1]),
            alignment_size: Some(8),
            ..preset
        };
        let e = explicit.resolve(&shape, &data).unwrap();
        assert_eq!((e.layout.as_slice(), e.alignment_size), (&[0, 2, 1][..], 8));
    }

    #[test]
    fn bad_parameters() {
        let shape = [4, 5];
        let r = |p: StorageParams| {
            p.resolve(&shape, &StorageParams::default())
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
