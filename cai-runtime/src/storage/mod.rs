//! GT4Py GDP-3 storages, the pure part: parameters and their presets ([`params`]), the aligned
//! allocation plan ([`alloc`]), and the host/device mirror's state machine ([`sync_state`]).
//! Nothing here allocates or needs a GPU; the Python package builds storages on it.

pub mod alloc;
pub mod params;
pub mod sync_state;

pub use alloc::AllocationPlan;
pub use params::{Managed, Preset, StorageDevice, StorageParams, normalize_halo, parse_dims};
pub use sync_state::{Mirror, SyncState, SyncStatus};

/// A storage parameter GDP-3 does not allow; each names the parameter and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// `layout` is not a permutation of `0..ndim`.
    #[error(
        "layout = {layout:?} is not a permutation of 0..{ndim} (one entry per dimension, each once; the largest entry is the contiguous dimension)"
    )]
    Layout {
        /// The layout given.
        layout: Vec<usize>,
        /// The number of dimensions.
        ndim: usize,
    },
    /// A per-dimension parameter has the wrong length.
    #[error("{param} has {got} entries but the storage has {ndim} dimensions")]
    Length {
        /// `"halo"`, `"aligned_index"`, `"dims"`, `"layout"`.
        param: &'static str,
        /// Its length.
        got: usize,
        /// The number of dimensions.
        ndim: usize,
    },
    /// A halo wider than its dimension.
    #[error("halo = {halo:?} on dimension {axis} needs {} points but the dimension has {size}", halo.0 + halo.1)]
    HaloTooLarge {
        /// The dimension.
        axis: usize,
        /// Its (start, end) halo.
        halo: (usize, usize),
        /// Its size.
        size: usize,
    },
    /// `aligned_index` outside the shape.
    #[error("aligned_index = {index:?} is outside the shape {shape:?} (dimension {axis})")]
    AlignedIndex {
        /// The index.
        index: Vec<usize>,
        /// The shape.
        shape: Vec<usize>,
        /// The offending dimension.
        axis: usize,
    },
    /// `alignment_size` that is neither a multiple nor a divisor of the item size.
    #[error(
        "alignment_size = {alignment} is not a multiple of the item size {itemsize} (nor a divisor of it): an aligned item must start every alignment_size bytes"
    )]
    Alignment {
        /// The alignment asked for.
        alignment: usize,
        /// The item size.
        itemsize: usize,
    },
    /// `alignment_size` = 0.
    #[error("alignment_size = 0: use 1 for no alignment")]
    ZeroAlignment,
    /// Sizes overflow.
    #[error(
        "shape {shape:?} of {itemsize}-byte items, padded for alignment, is too large to allocate"
    )]
    Overflow {
        /// The shape.
        shape: Vec<usize>,
        /// The item size.
        itemsize: usize,
    },
    /// An unknown `defaults` preset.
    #[error("defaults = {0:?} is not a preset: use \"C\", \"F\", \"gtx86\" or \"gtcuda\"")]
    Preset(String),
    /// A bad `dims` entry.
    #[error("dims = {dims:?}: {why}")]
    Dims {
        /// The dims given.
        dims: Vec<String>,
        /// What is wrong.
        why: String,
    },
    /// A bad `device`.
    #[error("device = {0:?}: use None (host memory) or \"gpu\"")]
    Device(String),
    /// A bad `managed`.
    #[error(
        "managed = {0:?}: use None, \"gt4py\" (host and device mirror) or \"cuda\" (unified memory)"
    )]
    Managed(String),
}
