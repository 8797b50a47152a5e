//! GDP-3's `__gt_data_interface__`: per device key (`None` for host memory, `"gpu"`), an
//! array-interface descriptor plus `dims`, `halo` and the `acquire` / `touch` / `release`
//! hooks. [`GtDataInterface`] is what `#[derive(GtDataInterface)]` implements; the Python dict
//! and the consumption of foreign objects are in `python::gt`.

use crate::StorageError;
use cai_runtime::DescriptorError;
use cai_runtime::{CudaArrayDescriptor, HostArrayDescriptor};

/// A device key of the data interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GtDevice {
    /// `None`: a buffer in main memory.
    Host,
    /// `"gpu"`: a buffer on a GPU.
    Gpu,
}

impl GtDevice {
    /// The key as GDP-3 writes it (`None` or `"gpu"`).
    pub fn key(self) -> Option<&'static str> {
        match self {
            GtDevice::Host => None,
            GtDevice::Gpu => Some("gpu"),
        }
    }
}

/// Why a data-interface descriptor cannot be made or was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GtError {
    /// A side's descriptor failed.
    #[error(transparent)]
    Descriptor(#[from] DescriptorError),
    /// `dims` or `halo` do not fit the shape.
    #[error(transparent)]
    Param(#[from] StorageError),
    /// Neither a host nor a device buffer.
    #[error(
        "__gt_data_interface__ has no buffer: expected a None (host) or \"gpu\" entry (or __array_interface__ / __cuda_array_interface__)"
    )]
    NoBuffer,
    /// Host and device entries describe different shapes.
    #[error(
        "__gt_data_interface__ entries disagree: `shape` = {host:?} on the host (None) but {gpu:?} on \"gpu\""
    )]
    ShapeMismatch {
        /// The host entry's shape.
        host: Vec<usize>,
        /// The device entry's shape.
        gpu: Vec<usize>,
    },
}

/// A whole `__gt_data_interface__`: the buffers and the semantic information shared by them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GtDataDescriptor {
    /// The `None` entry.
    pub host: Option<HostArrayDescriptor>,
    /// The `"gpu"` entry.
    pub gpu: Option<CudaArrayDescriptor>,
    /// `dims`, one per dimension.
    pub dims: Option<Vec<String>>,
    /// `halo`, a (start, end) pair per dimension.
    pub halo: Option<Vec<(usize, usize)>>,
}

impl GtDataDescriptor {
    /// Checks that there is a buffer, that host and device shapes agree, and that `dims` and
    /// `halo` have one entry per dimension (dims from [`crate::parse_dims`], halos no wider
    /// than their dimension).
    pub fn new(
        host: Option<HostArrayDescriptor>,
        gpu: Option<CudaArrayDescriptor>,
        dims: Option<Vec<String>>,
        halo: Option<Vec<(usize, usize)>>,
    ) -> Result<GtDataDescriptor, GtError> {
        let shape = match (&host, &gpu) {
            (None, None) => return Err(GtError::NoBuffer),
            (Some(h), Some(g)) if h.shape != g.shape => {
                return Err(GtError::ShapeMismatch {
                    host: h.shape.clone(),
                    gpu: g.shape.clone(),
                });
            }
            (Some(h), _) => h.shape.clone(),
            (None, Some(g)) => g.shape.clone(),
        };
        check_dims_and_halo(&shape, dims.as_deref(), halo.as_deref())?;
        Ok(GtDataDescriptor {
            host,
            gpu,
            dims,
            halo,
        })
    }

    /// The shape (shared by both entries).
    pub fn shape(&self) -> &[usize] {
        match (&self.host, &self.gpu) {
            (Some(h), _) => &h.shape,
            (None, Some(g)) => &g.shape,
            (None, None) => &[],
        }
    }
}

/// `dims` (valid names, one per dimension) and `halo` (one pair per dimension, no wider than
/// it) against a shape.
pub fn check_dims_and_halo(
    shape: &[usize],
    dims: Option<&[String]>,
    halo: Option<&[(usize, usize)]>,
) -> Result<(), StorageError> {
    if let Some(d) = dims {
        crate::parse_dims(d)?;
        if d.len() != shape.len() {
            return Err(StorageError::Length {
                param: "dims",
                got: d.len(),
                ndim: shape.len(),
            });
        }
    }
    if let Some(h) = halo {
        crate::check_halo(h, shape)?;
    }
    Ok(())
}

/// The error a hook returns; shown to Python as `RuntimeError` with its message.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// What the `acquire`, `touch` and `release` entries call. Every method defaults to "no action",
/// GDP-3's meaning of an absent hook; implement the ones a type needs (a mirrored type:
/// `acquire(Host)` copies device to host, `touch(Gpu)` marks the device modified...).
#[diagnostic::on_unimplemented(
    message = "`{Self}` has `#[cai(hooks)]` but does not implement `GtHooks`",
    label = "`#[cai(hooks)]` takes acquire/touch/release from the struct's `GtHooks` impl",
    note = "implement the hooks it needs, e.g. `impl cai_runtime::GtHooks for {Self} {{ fn acquire(&self, device: GtDevice) -> Result<(), HookError> {{ ... }} }}` (each defaults to no action), or remove `hooks`"
)]
pub trait GtHooks {
    /// Before a computation reads `device`'s buffer.
    fn acquire(&self, device: GtDevice) -> Result<(), HookError> {
        let _ = device;
        Ok(())
    }
    /// After a computation modified `device`'s buffer.
    fn touch(&self, device: GtDevice) -> Result<(), HookError> {
        let _ = device;
        Ok(())
    }
    /// After all computations on `device`'s buffer completed.
    fn release(&self, device: GtDevice) -> Result<(), HookError> {
        let _ = device;
        Ok(())
    }
}

/// A type that exports GDP-3's `__gt_data_interface__`. Usually derived:
/// `#[derive(GtDataInterface)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not export a __gt_data_interface__",
    label = "no `__gt_data_interface__`",
    note = "derive it: `#[derive(GtDataInterface)]` with `#[cai(host)]` and/or `#[cai(gpu)]` on the buffer fields"
)]
pub trait GtDataInterface {
    /// The descriptor.
    fn gt_data_interface(&self) -> Result<GtDataDescriptor, GtError>;

    /// The hooks, when the type has any (`#[cai(hooks)]` on a derived struct: its
    /// [`GtHooks`] impl). `None`: the dict has no hook entries.
    fn gt_hooks(&self) -> Option<&dyn GtHooks> {
        None
    }
}

/// Values usable as `dims`: `"IJK"` (one letter a dimension), or a sequence of names.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as dims",
    label = "expected dimension names",
    note = "dims are `\"IJK\"` (one letter each) or a sequence of names: `[&str; N]`, `Vec<String>`, `&[&str]`"
)]
pub trait AsDims {
    /// The names.
    fn to_dims(&self) -> Vec<String>;
}

impl AsDims for str {
    fn to_dims(&self) -> Vec<String> {
        self.chars().map(String::from).collect()
    }
}
impl AsDims for String {
    fn to_dims(&self) -> Vec<String> {
        self.as_str().to_dims()
    }
}
impl<S: AsRef<str>> AsDims for [S] {
    fn to_dims(&self) -> Vec<String> {
        self.iter().map(|s| s.as_ref().to_string()).collect()
    }
}
impl<S: AsRef<str>, const N: usize> AsDims for [S; N] {
    fn to_dims(&self) -> Vec<String> {
        self[..].to_dims()
    }
}
impl<S: AsRef<str>> AsDims for Vec<S> {
    fn to_dims(&self) -> Vec<String> {
        self[..].to_dims()
    }
}
impl<T: AsDims + ?Sized> AsDims for &T {
    fn to_dims(&self) -> Vec<String> {
        (**self).to_dims()
    }
}

/// Values usable as `halo`: (start, end) pairs, or one symmetric width, per dimension.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a halo",
    label = "expected a halo per dimension",
    note = "a halo is `[(usize, usize); N]` / `Vec<(usize, usize)>` (start, end), or `[usize; N]` / `Vec<usize>` (symmetric)"
)]
pub trait AsHalo {
    /// (start, end) per dimension.
    fn to_halo(&self) -> Vec<(usize, usize)>;
}

/// A halo entry: a pair, or a symmetric width.
pub trait HaloEntry: Copy {
    /// As a pair.
    fn pair(self) -> (usize, usize);
}
impl HaloEntry for (usize, usize) {
    fn pair(self) -> (usize, usize) {
        self
    }
}
impl HaloEntry for usize {
    fn pair(self) -> (usize, usize) {
        (self, self)
    }
}
impl<E: HaloEntry> AsHalo for [E] {
    fn to_halo(&self) -> Vec<(usize, usize)> {
        self.iter().map(|e| e.pair()).collect()
    }
}
impl<E: HaloEntry, const N: usize> AsHalo for [E; N] {
    fn to_halo(&self) -> Vec<(usize, usize)> {
        self[..].to_halo()
    }
}
impl<E: HaloEntry> AsHalo for Vec<E> {
    fn to_halo(&self) -> Vec<(usize, usize)> {
        self[..].to_halo()
    }
}
impl<T: AsHalo + ?Sized> AsHalo for &T {
    fn to_halo(&self) -> Vec<(usize, usize)> {
        (**self).to_halo()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cai_runtime::DescriptorBuilder;

    fn host(shape: [usize; 2]) -> HostArrayDescriptor {
        let v = vec![0f32; shape[0] * shape[1]];
        DescriptorBuilder::host(&v).shape(shape).build().unwrap()
    }

    #[test]
    fn checks() {
        let ok = GtDataDescriptor::new(
            Some(host([2, 3])),
            None,
            Some("IJ".to_dims()),
            Some([1usize, 0].to_halo()),
        )
        .unwrap();
        assert_eq!(ok.shape(), [2, 3]);
        assert_eq!(ok.halo, Some(vec![(1, 1), (0, 0)]));
        assert_eq!(
            GtDataDescriptor::new(None, None, None, None).unwrap_err(),
            GtError::NoBuffer
        );
        let e = GtDataDescriptor::new(Some(host([2, 3])), None, Some("IJK".to_dims()), None)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "dims has 3 entries but the storage has 2 dimensions"
        );
        let e = GtDataDescriptor::new(Some(host([2, 3])), None, None, Some(vec![(2, 1), (0, 0)]))
            .unwrap_err();
        assert!(
            e.to_string().starts_with("halo = (2, 1) on dimension 0"),
            "{e}"
        );
        let e = GtDataDescriptor::new(Some(host([2, 3])), None, Some(["I", "I"].to_dims()), None)
            .unwrap_err();
        assert!(e.to_string().contains("appears twice"));
    }

    #[test]
    fn every_dims_and_halo_spelling_reads_the_same() {
        let ijk = ["I", "J", "K"].map(String::from).to_vec();
        assert_eq!("IJK".to_dims(), ijk);
        assert_eq!(String::from("IJK").to_dims(), ijk);
        assert_eq!((&&String::from("IJK")).to_dims(), ijk);
        assert_eq!(vec!["I", "J", "K"].to_dims(), ijk);
        let pairs = vec![(1, 2), (0, 3)];
        assert_eq!(<&_ as AsHalo>::to_halo(&&pairs), pairs);
        assert_eq!([1usize, 2].to_halo(), [(1, 1), (2, 2)]);
        assert_eq!(<&_ as AsHalo>::to_halo(&&vec![4usize]), [(4, 4)]);
        assert_eq!(
            (GtDevice::Host.key(), GtDevice::Gpu.key()),
            (None, Some("gpu"))
        );
    }
}
