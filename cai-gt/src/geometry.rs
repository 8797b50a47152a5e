//! Where a storage view's items are, and how basic indexing, `domain_view` and `transpose`
//! move them: pure arithmetic on a [`Geometry`] (layout, byte offset, halo, dims), with
//! NumPy's rules and NumPy's error messages.

use crate::dims::{Dim, PerDim};
use cai_runtime::{Layout, LayoutError};

/// One entry of a basic index (`s[1, 2:5, ...]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexItem {
    /// An integer: selects one position and removes the dimension (negative counts from the
    /// end).
    Int(isize),
    /// `start:stop:step`, with Python's rules for omitted and negative bounds.
    Slice {
        /// First index.
        start: Option<isize>,
        /// One past the last index.
        stop: Option<isize>,
        /// Step (default 1; 0 is an error).
        step: Option<isize>,
    },
    /// `...`: as many full slices as needed.
    Ellipsis,
}

/// Why an index was refused; the messages are NumPy's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// An integer index outside its dimension (Python `IndexError`).
    #[error("index {index} is out of bounds for axis {axis} with size {size}")]
    OutOfBounds {
        /// The index given.
        index: isize,
        /// The dimension.
        axis: usize,
        /// Its size.
        size: usize,
    },
    /// More indices than dimensions (`IndexError`).
    #[error(
        "too many indices for storage: storage is {ndim}-dimensional, but {given} were indexed"
    )]
    TooMany {
        /// Dimensions.
        ndim: usize,
        /// Indices given (not counting `...`).
        given: usize,
    },
    /// Two `...` (`IndexError`).
    #[error("an index can only have a single ellipsis ('...')")]
    Ellipsis,
    /// A zero slice step (`ValueError`).
    #[error("slice step cannot be zero")]
    ZeroStep,
    /// `transpose` axes that are no permutation (`ValueError`).
    #[error("axes {axes:?} don't match storage: expected a permutation of 0..{ndim}")]
    Axes {
        /// The axes given.
        axes: Vec<usize>,
        /// Dimensions.
        ndim: usize,
    },
    /// Byte offsets overflow (`ValueError`).
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

impl IndexError {
    /// Whether Python raises `IndexError` for it (else `ValueError`).
    pub fn is_index_error(&self) -> bool {
        matches!(
            self,
            IndexError::OutOfBounds { .. } | IndexError::TooMany { .. } | IndexError::Ellipsis
        )
    }
}

/// A view's items: the layout, the byte offset of its first item from the storage's origin,
/// and per dimension its halo and semantic dim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Shape, byte strides, item size.
    pub layout: Layout,
    /// Bytes from the buffer's origin to item `[0, ..., 0]` of this view.
    pub offset: isize,
    /// (start, end) halo per dimension.
    pub halo: PerDim<(usize, usize)>,
    /// Semantic dimensions.
    pub dims: PerDim<Dim>,
    /// Each dimension's entry in the `layout` the buffer was laid out with (larger: more
    /// contiguous), as `layout_entries` keeps it. Strides alone cannot tell it where they
    /// tie, as a dimension of one item has the stride of the one inside it: the layout read
    /// back breaks ties with it.
    pub order: PerDim<u8>,
}

/// A `layout` parameter as [`Geometry::order`] keeps it: a byte per dimension (a storage's
/// geometry is moved on every view, so it is kept small). Entries past 255 are kept as 255,
/// so ties among those dimensions go by axis.
pub fn layout_entries(layout: &[usize]) -> PerDim<u8> {
    layout
        .iter()
        .map(|&l| u8::try_from(l).unwrap_or(u8::MAX))
        .collect()
}

/// What an index selects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "returned and matched at once; boxing the geometry would add an allocation per view"
)]
pub enum Selection {
    /// A view (at least one slice, or no index at all).
    View(Geometry),
    /// One item, at this byte offset from the origin (every dimension indexed by an integer).
    Item(isize),
}

impl Geometry {
    /// Applies a basic index (integers, slices, one `...`), as NumPy does. Slicing a dimension
    /// with step 1 keeps the part of its halo that is still inside the view; other steps drop
    /// the halo of that dimension. An integer removes the dimension, its halo and its dim.
    pub fn select(&self, key: &[IndexItem]) -> Result<Selection, IndexError> {
        let ndim = self.layout.ndim();
        let ellipses = key.iter().filter(|k| **k == IndexItem::Ellipsis).count();
        if ellipses > 1 {
            return Err(IndexError::Ellipsis);
        }
        let given = key.len() - ellipses;
        if given > ndim {
            return Err(IndexError::TooMany { ndim, given });
        }
        // Expand `...` (or the implicit trailing one) into full slices.
        let full = IndexItem::Slice {
            start: None,
            stop: None,
            step: None,
        };
        let mut items: PerDim<IndexItem> = PerDim::with_capacity(ndim);
        for k in key {
            if *k == IndexItem::Ellipsis {
                items.extend(std::iter::repeat_n(full, ndim - given));
            } else {
                items.push(*k);
            }
        }
        items.resize(ndim, full);

        let mut layout = self.layout.clone();
        let mut offset = self.offset;
        let mut halo = PerDim::with_capacity(ndim);
        let mut dims = PerDim::with_capacity(ndim);
        let mut order = PerDim::with_capacity(ndim);
        let mut axis = 0; // the axis of `layout` that `items[i]` applies to
        let mut all_ints = true;
        for (i, item) in items.iter().enumerate() {
            match *item {
                IndexItem::Int(index) => {
                    let (l, off) = layout.index(axis, index).map_err(|e| match e {
                        LayoutError::Index { index, size, .. } => IndexError::OutOfBounds {
                            index,
                            axis: i,
                            size,
                        },
                        e => e.into(),
                    })?;
                    layout = l;
                    offset += off;
                }
                IndexItem::Slice { start, stop, step } => {
                    all_ints = false;
                    let step = step.unwrap_or(1);
                    if step == 0 {
                        return Err(IndexError::ZeroStep);
                    }
                    let len = layout.shape()[axis];
                    let (l, off) = layout.slice(axis, start, stop, step)?;
                    let count = l.shape()[axis];
                    halo.push(if step == 1 {
                        // The view covers [first, first + count) of the dimension (none of it
                        // when empty, so the halo is (0, 0)). The halo's two parts fit in the
                        // dimension (checked when set), so they do not overlap in the view.
                        let first = slice_start(start, len);
                        let lo = self.halo[i].0.saturating_sub(first).min(count);
                        let tail = len - (first + count);
                        let hi = self.halo[i].1.saturating_sub(tail).min(count);
                        (lo, hi)
                    } else {
                        (0, 0)
                    });
                    dims.push(self.dims[i]);
                    order.push(self.order[i]);
                    layout = l;
                    offset += off;
                    axis += 1;
                }
                IndexItem::Ellipsis => unreachable!("expanded above"),
            }
        }
        if all_ints {
            return Ok(Selection::Item(offset));
        }
        Ok(Selection::View(Geometry {
            layout,
            offset,
            halo,
            dims,
            order,
        }))
    }

    /// The view without its halo: index `[0, ..., 0]` is the first point of the domain.
    pub fn domain(&self) -> Geometry {
        let key: PerDim<IndexItem> = self
            .halo
            .iter()
            .zip(self.layout.shape())
            .map(|(&(lo, hi), &n)| IndexItem::Slice {
                start: Some(lo as isize),
                stop: Some((n - hi) as isize),
                step: None,
            })
            .collect();
        match self.select(&key) {
            Ok(Selection::View(g)) => g,
            // A halo never exceeds its dimension (checked when set), so the slices are in
            // range; a 0-d storage has no halo and selects itself.
            _ => self.clone(),
        }
    }

    /// `transpose(axes)`: dimensions permuted (reversed when `axes` is `None`), with their
    /// halos and dims.
    pub fn transpose(&self, axes: Option<&[usize]>) -> Result<Geometry, IndexError> {
        let n = self.layout.ndim();
        let axes: PerDim<usize> = match axes {
            Some(a) => a.into(),
            None => (0..n).rev().collect(),
        };
        let layout = self.layout.permute(&axes).map_err(|_| IndexError::Axes {
            axes: axes.to_vec(),
            ndim: n,
        })?;
        Ok(Geometry {
            layout,
            offset: self.offset,
            halo: axes.iter().map(|&a| self.halo[a]).collect(),
            dims: axes.iter().map(|&a| self.dims[a]).collect(),
            order: axes.iter().map(|&a| self.order[a]).collect(),
        })
    }
}

/// The first index a positive-step slice selects (Python's rules).
fn slice_start(start: Option<isize>, len: usize) -> usize {
    let len = len as isize;
    match start {
        None => 0,
        Some(s) if s < 0 => (s + len).max(0) as usize,
        Some(s) => s.min(len) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::IndexItem::*;
    use super::*;

    fn g(shape: &[usize], halo: &[(usize, usize)]) -> Geometry {
        Geometry {
            layout: Layout::c_contiguous(shape, 8).unwrap(),
            offset: 0,
            halo: halo.into(),
            dims: crate::dims::default_dims(shape.len()),
            order: (0..shape.len() as u8).collect(),
        }
    }

    fn s(start: Option<isize>, stop: Option<isize>) -> IndexItem {
        Slice {
            start,
            stop,
            step: None,
        }
    }

    /// Every step-1 slice of every halo of short dimensions keeps, at each end, the halo
    /// points that are still inside the view: counted one by one here.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "safe arithmetic only, and 14,000 slices take Miri 4 minutes"
    )]
    fn slices_keep_the_halo_points_inside_them() {
        for len in 0..=5usize {
            for h0 in 0..=len {
                for h1 in 0..=len - h0 {
                    let a = g(&[len], &[(h0, h1)]);
                    let bounds = (-7..=7).map(Some).chain([None]);
                    for (start, stop) in bounds
                        .clone()
                        .flat_map(|a| bounds.clone().map(move |b| (a, b)))
                    {
                        let Selection::View(v) = a.select(&[s(start, stop)]).unwrap() else {
                            panic!()
                        };
                        let first = (v.offset / 8) as usize;
                        let inside = first..first + v.layout.shape()[0];
                        let lo = inside.clone().filter(|&j| j < h0).count();
                        let hi = inside.filter(|&j| j >= len - h1).count();
                        assert_eq!(
                            v.halo[0],
                            (lo, hi),
                            "len {len}, halo ({h0}, {h1}), [{start:?}:{stop:?}]"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn items_and_views() {
        let a = g(&[4, 5, 6], &[(1, 1), (2, 0), (0, 3)]);
        assert_eq!(
            a.select(&[Int(1), Int(-1), Int(2)]).unwrap(),
            Selection::Item(240 + 4 * 48 + 16)
        );
        let Selection::View(v) = a.select(&[Int(1), Ellipsis]).unwrap() else {
            panic!()
        };
        assert_eq!(v.layout.shape(), [5, 6]);
        assert_eq!((v.offset, v.dims.as_slice()), (240, &[Dim::J, Dim::K][..]));
        assert_eq!(v.halo[..], [(2, 0), (0, 3)]);
        // A slice keeps what is left of the halo inside it.
        let Selection::View(v) = a
            .select(&[s(Some(1), None), s(None, Some(4)), Ellipsis])
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(v.layout.shape(), [3, 4, 6]);
        assert_eq!(v.halo[..], [(0, 1), (2, 0), (0, 3)]);
        // Steps drop the halo.
        let Selection::View(v) = a
            .select(&[Slice {
                start: None,
                stop: None,
                step: Some(-1),
            }])
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (v.halo[0], v.offset, v.layout.strides()[0]),
            ((0, 0), 720, -240)
        );
        assert_eq!(a.select(&[]).unwrap(), Selection::View(a.clone()));
        // `...` first: the index applies to the last dimension.
        let Selection::View(v) = a.select(&[Ellipsis, Int(2)]).unwrap() else {
            panic!()
        };
        assert_eq!((v.layout.shape(), v.offset), (&[4usize, 5][..], 16));
        assert_eq!(v.dims.as_slice(), [Dim::I, Dim::J]);
        // Negative starts count from the end, as in Python: `[-3:]` of 4 is items 1 to 3.
        let Selection::View(v) = a.select(&[s(Some(-3), None)]).unwrap() else {
            panic!()
        };
        assert_eq!((v.layout.shape()[0], v.offset), (3, 240));
        assert_eq!(v.halo[0], (0, 1));
        let Selection::View(v) = a.select(&[s(Some(-9), Some(-3))]).unwrap() else {
            panic!()
        };
        assert_eq!((v.layout.shape()[0], v.offset, v.halo[0]), (1, 0, (1, 0)));
    }

    #[test]
    fn numpy_errors() {
        let a = g(&[4, 5], &[(0, 0); 2]);
        let e = a.select(&[Int(4)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "index 4 is out of bounds for axis 0 with size 4"
        );
        assert!(e.is_index_error());
        let e = a.select(&[Int(0), Int(-6)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "index -6 is out of bounds for axis 1 with size 5"
        );
        assert_eq!(
            a.select(&[Int(0), Int(0), Int(0)]).unwrap_err().to_string(),
            "too many indices for storage: storage is 2-dimensional, but 3 were indexed"
        );
        assert_eq!(
            a.select(&[Ellipsis, Ellipsis]).unwrap_err(),
            IndexError::Ellipsis
        );
        let zero = Slice {
            start: None,
            stop: None,
            step: Some(0),
        };
        assert!(!a.select(&[zero]).unwrap_err().is_index_error());
    }

    #[test]
    fn domain_and_transpose() {
        let a = g(&[4, 5, 6], &[(1, 1), (2, 0), (0, 3)]);
        let d = a.domain();
        assert_eq!(d.layout.shape(), [2, 3, 3]);
        assert_eq!(d.offset, 240 + 2 * 48);
        assert_eq!(d.halo[..], [(0, 0); 3]);
        let t = a.transpose(None).unwrap();
        assert_eq!(t.layout.shape(), [6, 5, 4]);
        assert_eq!(t.halo[..], [(0, 3), (2, 0), (1, 1)]);
        assert_eq!(t.dims.as_slice(), [Dim::K, Dim::J, Dim::I]);
        let t = a.transpose(Some(&[1, 0, 2])).unwrap();
        assert_eq!(t.layout.strides(), [48, 240, 8]);
        assert!(a.transpose(Some(&[0, 0, 1])).is_err());
    }
}
