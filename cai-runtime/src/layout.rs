//! Shapes and byte strides: C and F order, contiguity as NumPy defines it, the bytes an array
//! touches, and NumPy-style views (transpose, slicing with negative steps, integer indexing).
//!
//! All arithmetic is checked: a shape whose byte size or extent does not fit in `isize` (NumPy's
//! limit too) is a [`LayoutError`], never a wrapped number.

use crate::structured::py_tuple;
use smallvec::SmallVec;

/// Memory order of a contiguous layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// Row-major: the last index varies fastest.
    #[default]
    C,
    /// Column-major: the first index varies fastest.
    F,
}

/// The most dimensions an array may have: NumPy's `NPY_MAXDIMS`, which its arrays, `descr`
/// sub-arrays and DLPack imports keep to. Every [`Layout`] has at most this many.
pub const MAX_NDIM: usize = 64;

/// Why a layout cannot exist. Every variant carries the values involved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// More than [`MAX_NDIM`] dimensions.
    #[error("{ndim} dimensions: at most {MAX_NDIM} are supported (NumPy's limit)")]
    TooManyDims {
        /// The number of dimensions asked for.
        ndim: usize,
    },
    /// `shape` times the item size, or a dimension, does not fit in `isize`.
    #[error(
        "`shape` = {} with item size {itemsize} overflows: the array would need more than isize::MAX bytes, or a dimension is larger",
        py_tuple(shape)
    )]
    ShapeOverflow {
        /// The shape.
        shape: Vec<usize>,
        /// The item size in bytes.
        itemsize: usize,
    },
    /// `strides` has another length than `shape`.
    #[error("`strides` = {} has {} entries but `shape` = {} has {}: expected one stride per dimension", py_tuple(strides), strides.len(), py_tuple(shape), shape.len())]
    StridesLength {
        /// The shape.
        shape: Vec<usize>,
        /// The strides.
        strides: Vec<isize>,
    },
    /// The bytes spanned by `shape` and `strides` do not fit in `isize`.
    #[error(
        "`strides` = {} with `shape` = {} overflows: the byte extent does not fit in isize",
        py_tuple(strides),
        py_tuple(shape)
    )]
    ExtentOverflow {
        /// The shape.
        shape: Vec<usize>,
        /// The strides.
        strides: Vec<isize>,
    },
    /// An axis number is not below the number of dimensions.
    #[error("axis {axis} is out of range for an array of {ndim} dimensions")]
    Axis {
        /// The axis.
        axis: usize,
        /// Number of dimensions.
        ndim: usize,
    },
    /// A transpose order is not a permutation of the axes.
    #[error("axes {} are not a permutation of 0..{ndim}", py_tuple(axes))]
    Permutation {
        /// The axes given.
        axes: Vec<usize>,
        /// Number of dimensions.
        ndim: usize,
    },
    /// A slice step of zero.
    #[error("slice step cannot be zero")]
    ZeroStep,
    /// An integer index outside the dimension.
    #[error("index {index} is out of bounds for axis {axis} with size {size}")]
    Index {
        /// The index.
        index: isize,
        /// The axis.
        axis: usize,
        /// The dimension's size.
        size: usize,
    },
}

/// Byte range an array touches, relative to its data pointer: `lo` is the lowest byte offset
/// (negative with negative strides), `hi` is one past the highest byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Extent {
    /// Lowest byte offset touched.
    pub lo: isize,
    /// One past the highest byte offset touched.
    pub hi: isize,
}

impl Extent {
    /// Number of bytes between `lo` and `hi`.
    pub fn len(&self) -> usize {
        self.hi.abs_diff(self.lo)
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.hi <= self.lo
    }
}

/// A shape with byte strides for items of a given size.
///
/// Invariant (checked by every constructor): at most [`MAX_NDIM`] dimensions, and the element
/// count times the item size, and the byte extent, fit in `isize`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Dims<usize>,
    strides: Dims<isize>,
    itemsize: usize,
}

/// A layout's shape or strides: up to four dimensions held inline, so that making, copying
/// and dropping the layouts of everyday arrays allocates nothing.
pub(crate) type Dims<T> = SmallVec<[T; INLINE]>;
const INLINE: usize = 4;

/// Bytes of `shape` with `itemsize`, or `None` unless the item size, every dimension, and the
/// product of the non-zero dimensions (times the item size) all fit in `isize`, as NumPy
/// requires ("array is too big" even where another dimension is 0: `np.empty((0, 2**62))`).
/// A zero dimension makes the count 0.
pub fn checked_nbytes(shape: &[usize], itemsize: usize) -> Option<usize> {
    const MAX: usize = isize::MAX as usize;
    if itemsize > MAX {
        return None;
    }
    let (mut count, mut empty) = (1usize, false);
    for &d in shape {
        if d > MAX {
            return None;
        }
        if d == 0 {
            empty = true;
        } else {
            count = count.checked_mul(d).filter(|&n| n <= MAX)?;
        }
    }
    let bytes = count.checked_mul(itemsize).filter(|&n| n <= MAX)?;
    Some(if empty { 0 } else { bytes })
}

/// What does not fit in `isize`: the items' bytes ([`checked_nbytes`]), or the extent of an
/// array with items ([`Layout::extent`]).
enum Overflow {
    Bytes,
    Extent,
}

/// [`checked_nbytes`], then the extent where there are items, in one pass over the dimensions
/// (what every strided layout is checked for: the second is `compute_extent`'s arithmetic).
#[inline]
fn fits(shape: &[usize], strides: &[isize], itemsize: usize) -> Result<(), Overflow> {
    const MAX: usize = isize::MAX as usize;
    if itemsize > MAX {
        return Err(Overflow::Bytes);
    }
    let (mut count, mut empty) = (1usize, false);
    let (mut lo, mut hi, mut spanned) = (0isize, 0isize, true);
    for (&d, &s) in shape.iter().zip(strides) {
        if d > MAX {
            return Err(Overflow::Bytes);
        }
        if d == 0 {
            empty = true;
            continue;
        }
        count = count
            .checked_mul(d)
            .filter(|&n| n <= MAX)
            .ok_or(Overflow::Bytes)?;
        // (`d - 1` fits: `d` does.)
        let span = ((d - 1) as isize).checked_mul(s);
        let added = span
            .and_then(|span| Some((lo.checked_add(span.min(0))?, hi.checked_add(span.max(0))?)));
        match added {
            Some((l, h)) => (lo, hi) = (l, h),
            None => spanned = false,
        }
    }
    count
        .checked_mul(itemsize)
        .filter(|&n| n <= MAX)
        .ok_or(Overflow::Bytes)?;
    // The bytes spanned fit `isize` below the pointer as above it (`lo` may reach
    // `isize::MIN`, one more than `hi` can).
    let extent = hi
        .checked_add(itemsize as isize)
        .and_then(|hi| hi.checked_sub(lo));
    if empty || (spanned && extent.is_some()) {
        Ok(())
    } else {
        Err(Overflow::Extent)
    }
}

impl Layout {
    /// A contiguous layout in the given order.
    pub fn contiguous(
        shape: &[usize],
        itemsize: usize,
        order: Order,
    ) -> Result<Layout, LayoutError> {
        if shape.len() > MAX_NDIM {
            return Err(LayoutError::TooManyDims { ndim: shape.len() });
        }
        checked_nbytes(shape, itemsize).ok_or_else(|| LayoutError::ShapeOverflow {
            shape: shape.to_vec(),
            itemsize,
        })?;
        // NumPy 2 gives arrays created with no items all-zero strides; otherwise each stride
        // is the item size times the dimensions after (C) or before (F) its own, at most the
        // checked total, so nothing below can overflow.
        let empty = shape.contains(&0);
        let stride = |i: usize| -> isize {
            if empty {
                return 0;
            }
            let rest = match order {
                Order::C => &shape[i + 1..],
                Order::F => &shape[..i],
            };
            rest.iter()
                .fold(itemsize as isize, |acc, &d| acc * d as isize)
        };
        let n = shape.len();
        let (shape, strides) = if n <= INLINE {
            // Built in fixed-size arrays, which the compiler keeps in registers, and stored
            // whole: writing item by item into the small vectors made the copies that follow
            // wait on those stores (measured: 25 ns of a 220 ns import).
            let mut dims = [0usize; INLINE];
            let mut steps = [0isize; INLINE];
            for i in 0..INLINE {
                if i < n {
                    dims[i] = shape[i];
                    steps[i] = stride(i);
                }
            }
            (
                Dims::from_buf_and_len(dims, n),
                Dims::from_buf_and_len(steps, n),
            )
        } else {
            (Dims::from_slice(shape), (0..n).map(stride).collect())
        };
        Ok(Layout {
            shape,
            strides,
            itemsize,
        })
    }

    /// A C-ordered (row-major) contiguous layout.
    pub fn c_contiguous(shape: &[usize], itemsize: usize) -> Result<Layout, LayoutError> {
        Layout::contiguous(shape, itemsize, Order::C)
    }

    /// An F-ordered (column-major) contiguous layout.
    pub fn f_contiguous(shape: &[usize], itemsize: usize) -> Result<Layout, LayoutError> {
        Layout::contiguous(shape, itemsize, Order::F)
    }

    /// A layout with explicit byte strides.
    pub fn strided(
        shape: &[usize],
        strides: &[isize],
        itemsize: usize,
    ) -> Result<Layout, LayoutError> {
        Layout::from_dims(Dims::from_slice(shape), Dims::from_slice(strides), itemsize)
    }

    /// [`Layout::strided`] taking the vectors it keeps (no copy).
    pub fn from_parts(
        shape: Vec<usize>,
        strides: Vec<isize>,
        itemsize: usize,
    ) -> Result<Layout, LayoutError> {
        Layout::from_dims(Dims::from_vec(shape), Dims::from_vec(strides), itemsize)
    }

    /// [`Layout::strided`] taking the dimensions it keeps (no copy).
    pub(crate) fn from_dims(
        shape: Dims<usize>,
        strides: Dims<isize>,
        itemsize: usize,
    ) -> Result<Layout, LayoutError> {
        if shape.len() > MAX_NDIM {
            return Err(LayoutError::TooManyDims { ndim: shape.len() });
        }
        if shape.len() != strides.len() {
            return Err(LayoutError::StridesLength {
                shape: shape.into_vec(),
                strides: strides.into_vec(),
            });
        }
        match fits(&shape, &strides, itemsize) {
            Ok(()) => Ok(Layout {
                shape,
                strides,
                itemsize,
            }),
            Err(Overflow::Bytes) => Err(LayoutError::ShapeOverflow {
                shape: shape.into_vec(),
                itemsize,
            }),
            Err(Overflow::Extent) => Err(LayoutError::ExtentOverflow {
                shape: shape.into_vec(),
                strides: strides.into_vec(),
            }),
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The byte strides.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Item size in bytes.
    pub fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of items (1 for a 0-d array). Cannot overflow (constructor invariant).
    pub fn size(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            self.shape.iter().product()
        }
    }

    /// Whether the array has no items.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    /// Bytes of the items themselves (`size * itemsize`).
    pub fn nbytes(&self) -> usize {
        self.size() * self.itemsize
    }

    /// NumPy's `C_CONTIGUOUS` flag: dimensions of size 1 are ignored, and an array with no
    /// items is contiguous whatever its strides.
    pub fn is_c_contiguous(&self) -> bool {
        self.is_contiguous_in(self.shape.len(), |n, i| n - 1 - i)
    }

    /// NumPy's `F_CONTIGUOUS` flag, with the same rules as [`Layout::is_c_contiguous`].
    pub fn is_f_contiguous(&self) -> bool {
        self.is_contiguous_in(self.shape.len(), |_, i| i)
    }

    fn is_contiguous_in(&self, n: usize, axis: impl Fn(usize, usize) -> usize) -> bool {
        if self.is_empty() {
            return true;
        }
        let mut expected = self.itemsize as isize;
        for i in 0..n {
            let a = axis(n, i);
            let dim = self.shape[a];
            if dim != 1 {
                if self.strides[a] != expected {
                    return false;
                }
                // Cannot overflow: bounded by nbytes, which fits in isize.
                expected *= dim as isize;
            }
        }
        true
    }

    /// The `strides` entry to export: `None` exactly when the array is C-contiguous (what NumPy
    /// and the CUDA Array Interface v3 prescribe), else the byte strides.
    pub fn exported_strides(&self) -> Option<&[isize]> {
        if self.is_c_contiguous() {
            None
        } else {
            Some(&self.strides)
        }
    }

    /// The byte offset of every item relative to the data pointer, in C order (last index
    /// fastest); nothing for an array with no items.
    pub fn item_offsets(&self) -> impl ExactSizeIterator<Item = isize> + '_ {
        let n = if self.is_empty() { 0 } else { self.size() };
        let mut index = vec![0usize; self.ndim()];
        let mut offset = 0isize;
        (0..n).map(move |k| {
            if k > 0 {
                // Odometer step: bump the last axis, carrying into earlier ones. Offsets stay
                // inside the validated extent, so the arithmetic cannot overflow.
                for axis in (0..index.len()).rev() {
                    index[axis] += 1;
                    offset += self.strides[axis];
                    if index[axis] < self.shape[axis] {
                        break;
                    }
                    offset -= self.strides[axis] * self.shape[axis] as isize;
                    index[axis] = 0;
                }
            }
            offset
        })
    }

    /// The items' bytes as contiguous runs `(offset relative to the data pointer, length)`,
    /// every item's bytes in exactly one run (for items that do not overlap), never a byte
    /// between items: what a copy of exactly the described items moves. Dimensions whose
    /// items follow each other are merged, so a contiguous array (in any order) is one run and
    /// `a[::2, :]` of a C array one run per row; a dimension of stride 0 (a broadcast) repeats
    /// the same bytes, which are run once. Nothing for an array with no items.
    pub fn runs(&self) -> Runs {
        if self.is_empty() {
            return Runs {
                outer: Vec::new(),
                index: Vec::new(),
                base: 0,
                block: 0,
                done: true,
            };
        }
        // Negative strides walked forwards from their lowest item; dimensions of one item
        // address nothing. Offsets stay inside the validated extent: no overflow.
        let mut base = 0isize;
        let mut dims: Vec<(usize, usize)> = Vec::with_capacity(self.ndim());
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n == 1 || s == 0 {
                continue;
            }
            if s < 0 {
                base += (n as isize - 1) * s;
            }
            dims.push((n, s.unsigned_abs()));
        }
        // Outermost (largest stride) first; merge inner dimensions while each one's stride is
        // the size of the block inside it.
        dims.sort_by_key(|&(_, s)| std::cmp::Reverse(s));
        let mut block = self.itemsize;
        while let Some(&(n, s)) = dims.last() {
            if s != block {
                break;
            }
            block *= n;
            dims.pop();
        }
        Runs {
            index: vec![0; dims.len()],
            outer: dims,
            base,
            block,
            done: false,
        }
    }

    /// The bytes touched relative to the data pointer, or `None` for an array with no items.
    pub fn extent(&self) -> Option<Extent> {
        if self.is_empty() {
            return None;
        }
        // Checked at construction.
        self.compute_extent()
    }

    fn compute_extent(&self) -> Option<Extent> {
        if self.is_empty() {
            return Some(Extent { lo: 0, hi: 0 });
        }
        let mut lo = 0isize;
        let mut hi = 0isize;
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let span = isize::try_from(d - 1).ok()?.checked_mul(s)?;
            lo = lo.checked_add(span.min(0))?;
            hi = hi.checked_add(span.max(0))?;
        }
        let hi = hi.checked_add(isize::try_from(self.itemsize).ok()?)?;
        // The bytes spanned fit `isize` below the pointer as above it (`lo` may reach
        // `isize::MIN`, one more than `hi` can).
        hi.checked_sub(lo)?;
        Some(Extent { lo, hi })
    }

    /// Whether an array with this layout, whose data pointer lies `offset` bytes into an
    /// allocation of `alloc_len` bytes, stays inside the allocation.
    pub fn fits_in(&self, offset: isize, alloc_len: usize) -> bool {
        match self.extent() {
            None => true,
            Some(e) => {
                let (Some(lo), Some(hi)) = (offset.checked_add(e.lo), offset.checked_add(e.hi))
                else {
                    return false;
                };
                lo >= 0 && (hi as usize) <= alloc_len
            }
        }
    }

    /// NumPy's `a.transpose(axes)`.
    pub fn permute(&self, axes: &[usize]) -> Result<Layout, LayoutError> {
        let n = self.ndim();
        let mut seen = vec![false; n];
        let bad = || LayoutError::Permutation {
            axes: axes.to_vec(),
            ndim: n,
        };
        if axes.len() != n {
            return Err(bad());
        }
        for &a in axes {
            if a >= n || std::mem::replace(&mut seen[a], true) {
                return Err(bad());
            }
        }
        Ok(Layout {
            shape: axes.iter().map(|&a| self.shape[a]).collect(),
            strides: axes.iter().map(|&a| self.strides[a]).collect(),
            itemsize: self.itemsize,
        })
    }

    /// NumPy's `a.T`: reversed axes.
    pub fn transposed(&self) -> Layout {
        Layout {
            shape: self.shape.iter().rev().copied().collect(),
            strides: self.strides.iter().rev().copied().collect(),
            itemsize: self.itemsize,
        }
    }

    /// Python's `a[..., start:stop:step, ...]` on `axis`, with Python's rules for negative and
    /// omitted bounds. Returns the view and the byte offset of its first item.
    pub fn slice(
        &self,
        axis: usize,
        start: Option<isize>,
        stop: Option<isize>,
        step: isize,
    ) -> Result<(Layout, isize), LayoutError> {
        let n = self.ndim();
        if axis >= n {
            return Err(LayoutError::Axis { axis, ndim: n });
        }
        if step == 0 {
            return Err(LayoutError::ZeroStep);
        }
        let len = self.shape[axis] as isize;
        let (start, count) = adjust_slice(len, start, stop, step);
        // NumPy (mapping.c) points an empty slice at the first item with step 1.
        let (start, step) = if count == 0 { (0, 1) } else { (start, step) };
        let overflow = || LayoutError::ExtentOverflow {
            shape: self.shape.to_vec(),
            strides: self.strides.to_vec(),
        };
        // The stride times the step, as NumPy gives it. The product overflows only for a
        // huge step (`[::2**62]`): two or more items need |step| < len, and (len - 1) times
        // the stride fits (the extent is checked). So such a slice has one item, which never
        // moves by its stride: it keeps the dimension's stride where NumPy would wrap.
        let stride = self.strides[axis]
            .checked_mul(step)
            .unwrap_or(self.strides[axis]);
        // Cannot overflow: `start` indexes an existing item, inside the checked extent.
        let offset = start * self.strides[axis];
        let mut out = self.clone();
        out.shape[axis] = count;
        out.strides[axis] = stride;
        out.compute_extent().ok_or_else(overflow)?;
        Ok((out, offset))
    }

    /// `a[..., index, ...]`: removes `axis`, returning the view and its byte offset.
    pub fn index(&self, axis: usize, index: isize) -> Result<(Layout, isize), LayoutError> {
        let n = self.ndim();
        if axis >= n {
            return Err(LayoutError::Axis { axis, ndim: n });
        }
        let size = self.shape[axis];
        let i = if index < 0 {
            index + size as isize
        } else {
            index
        };
        if i < 0 || i >= size as isize {
            return Err(LayoutError::Index { index, axis, size });
        }
        let mut out = self.clone();
        out.shape.remove(axis);
        let stride = out.strides.remove(axis);
        Ok((out, i * stride))
    }
}

/// CPython's `PySlice_AdjustIndices`: the first index and the number of items.
fn adjust_slice(
    len: isize,
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
) -> (isize, usize) {
    let clamp = |v: isize, neg_lo: isize, hi: isize| -> isize {
        if v < 0 {
            (v + len).max(neg_lo)
        } else {
            v.min(hi)
        }
    };
    // The caller has refused a zero step.
    let forward = step.is_positive();
    let (start, stop) = if forward {
        (
            start.map_or(0, |s| clamp(s, 0, len)),
            stop.map_or(len, |s| clamp(s, 0, len)),
        )
    } else {
        let last = len - 1;
        (
            start.map_or(last, |s| clamp(s, -1, last)),
            stop.map_or(-1, |s| clamp(s, -1, last)),
        )
    };
    // The items run from `start` towards `stop`, which they never reach. Both are clamped to
    // [-1, len], so `hi - lo` cannot overflow; the step is divided as unsigned, so that
    // `isize::MIN` needs no negation.
    let (lo, hi) = if forward {
        (start, stop)
    } else {
        (stop, start)
    };
    let count = if hi > lo {
        (hi - lo - 1) as usize / step.unsigned_abs() + 1
    } else {
        0
    };
    (start, count)
}

/// The contiguous runs of an array's bytes ([`Layout::runs`]): `(offset, length)` pairs.
#[derive(Clone, Debug)]
pub struct Runs {
    /// The dimensions not merged into a run: `(extent, byte stride)`, outermost first.
    outer: Vec<(usize, usize)>,
    /// The next run's index in `outer`.
    index: Vec<usize>,
    /// Offset of the lowest item.
    base: isize,
    /// Bytes per run.
    block: usize,
    done: bool,
}

impl Iterator for Runs {
    type Item = (isize, usize);

    fn next(&mut self) -> Option<(isize, usize)> {
        if self.done {
            return None;
        }
        let offset = self
            .index
            .iter()
            .zip(&self.outer)
            .fold(self.base, |o, (&i, &(_, s))| o + (i * s) as isize);
        // Odometer step over the outer dimensions, last fastest.
        self.done = true;
        for (i, &(n, _)) in self.index.iter_mut().zip(&self.outer).rev() {
            *i += 1;
            if *i < n {
                self.done = false;
                break;
            }
            *i = 0;
        }
        Some((offset, self.block))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_numpys_64_dimensions() {
        let ones = [1usize; MAX_NDIM + 1];
        let steps = [8isize; MAX_NDIM + 1];
        assert_eq!(
            Layout::c_contiguous(&ones[..MAX_NDIM], 8).unwrap().ndim(),
            64
        );
        assert!(Layout::strided(&ones[..MAX_NDIM], &steps[..MAX_NDIM], 8).is_ok());
        let refused = LayoutError::TooManyDims { ndim: 65 };
        assert_eq!(Layout::c_contiguous(&ones, 8), Err(refused.clone()));
        assert_eq!(Layout::f_contiguous(&ones, 8), Err(refused.clone()));
        assert_eq!(Layout::strided(&ones, &steps, 8), Err(refused.clone()));
        assert_eq!(
            Layout::from_parts(ones.to_vec(), steps.to_vec(), 8),
            Err(refused.clone())
        );
        assert_eq!(
            refused.to_string(),
            "65 dimensions: at most 64 are supported (NumPy's limit)"
        );
    }

    #[test]
    fn an_extent_below_the_pointer_fits_isize_as_one_above_does() {
        // Three items 2**62 bytes apart span 2**63 bytes: too many, whichever way they go.
        assert!(Layout::strided(&[3], &[1 << 62], 8).is_err());
        assert!(Layout::strided(&[3, 2], &[-(1 << 62), 8], 8).is_err());
        assert!(Layout::strided(&[2, 2], &[-(1 << 62), 8], 8).is_ok());
    }

    #[test]
    fn contiguous_strides() {
        let c = Layout::c_contiguous(&[2, 3, 4], 8).unwrap();
        assert_eq!(c.strides(), &[96, 32, 8]);
        let f = Layout::f_contiguous(&[2, 3, 4], 8).unwrap();
        assert_eq!(f.strides(), &[8, 16, 48]);
        assert!(c.is_c_contiguous() && !c.is_f_contiguous());
        assert!(f.is_f_contiguous() && !f.is_c_contiguous());
        assert_eq!(c.exported_strides(), None);
        assert_eq!(f.exported_strides(), Some(&[8isize, 16, 48][..]));
        // More dimensions than are kept inline.
        let c6 = Layout::c_contiguous(&[2, 1, 3, 1, 2, 5], 4).unwrap();
        assert_eq!(c6.strides(), &[120, 120, 40, 40, 20, 4]);
        let f6 = Layout::f_contiguous(&[2, 1, 3, 1, 2, 5], 4).unwrap();
        assert_eq!(f6.strides(), &[4, 8, 8, 24, 24, 48]);
        // No items: all-zero strides, as NumPy 2 gives.
        let z = Layout::c_contiguous(&[2, 0, 3], 4).unwrap();
        assert_eq!(z.strides(), &[0, 0, 0]);
    }

    #[test]
    fn zero_d_and_zero_size() {
        let s = Layout::c_contiguous(&[], 4).unwrap();
        assert_eq!((s.size(), s.extent()), (1, Some(Extent { lo: 0, hi: 4 })));
        assert!(s.is_c_contiguous() && s.is_f_contiguous());
        let z = Layout::strided(&[3, 0], &[-5, 7], 4).unwrap();
        assert!(z.is_c_contiguous() && z.is_f_contiguous());
        assert_eq!(z.extent(), None);
        assert!(z.fits_in(0, 0));
    }

    #[test]
    fn negative_strides_extent() {
        let base = Layout::c_contiguous(&[4, 5], 2).unwrap();
        let (v, off) = base.slice(1, None, None, -2).unwrap();
        assert_eq!(
            (v.shape(), v.strides(), off),
            (&[4usize, 3][..], &[10isize, -4][..], 8)
        );
        let e = v.extent().unwrap();
        assert_eq!((e.lo, e.hi), (-8, 32));
        assert_eq!((e.len(), e.is_empty(), v.itemsize()), (40, false, 2));
        let none = Extent { lo: 4, hi: 4 };
        assert!(none.is_empty());
        assert_eq!(none.len(), 0);
        assert!(v.fits_in(off, base.nbytes()));
        assert!(!v.fits_in(0, base.nbytes()));
    }

    #[test]
    fn overflow_is_an_error() {
        // The largest item size NumPy allows (`npy_intp`) is isize::MAX, and one more is not.
        let max = isize::MAX as usize;
        assert_eq!(checked_nbytes(&[1], max), Some(max));
        assert_eq!(checked_nbytes(&[0, 1], max), Some(0));
        // A zero dimension does not excuse the others: NumPy refuses `np.empty((0, 2**62))`
        // (float64), and an ndarray view of such a shape breaks ndarray's rule.
        assert_eq!(checked_nbytes(&[0, 7], max), None);
        assert_eq!(checked_nbytes(&[0, 1 << 62], 8), None);
        assert_eq!(checked_nbytes(&[1 << 62, 0, 4], 1), None);
        assert_eq!(checked_nbytes(&[0, 1 << 60], 4), Some(0));
        assert_eq!(checked_nbytes(&[1], max + 1), None);
        assert_eq!(checked_nbytes(&[2], max), None);
        assert_eq!(checked_nbytes(&[max, 1], 1), Some(max));
        assert_eq!(checked_nbytes(&[max + 1], 1), None);
        assert!(matches!(
            Layout::c_contiguous(&[usize::MAX, 2], 1),
            Err(LayoutError::ShapeOverflow { .. })
        ));
        assert!(matches!(
            Layout::c_contiguous(&[1 << 62, 4], 1),
            Err(LayoutError::ShapeOverflow { .. })
        ));
        assert!(matches!(
            Layout::strided(&[3, 3], &[isize::MAX, 1], 1),
            Err(LayoutError::ExtentOverflow { .. })
        ));
        let e = Layout::strided(&[2], &[1, 2], 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`strides` = (1, 2) has 2 entries but `shape` = (2,) has 1: expected one stride per dimension"
        );
    }

    #[test]
    fn python_slice_rules() {
        assert_eq!(adjust_slice(10, None, None, 1), (0, 10));
        assert_eq!(adjust_slice(10, Some(-3), None, 1), (7, 3));
        assert_eq!(adjust_slice(10, None, None, -1), (9, 10));
        assert_eq!(adjust_slice(10, Some(100), Some(-100), -3), (9, 4));
        assert_eq!(adjust_slice(10, Some(5), Some(2), 1), (5, 0));
        assert_eq!(adjust_slice(0, None, None, -1), (-1, 0));
        // Empty where the bounds meet, or run against the step (`[3:3]`, `[2:5:-1]`).
        assert_eq!(adjust_slice(10, Some(3), Some(3), 1), (3, 0));
        assert_eq!(adjust_slice(10, Some(3), Some(3), -1), (3, 0));
        assert_eq!(adjust_slice(10, Some(2), Some(5), -1), (2, 0));
        // Backwards with a stop past the end, and a start past it clamped to the last item.
        assert_eq!(adjust_slice(10, Some(5), Some(20), -1), (5, 0));
        assert_eq!(adjust_slice(10, Some(20), Some(7), -1), (9, 2));
        // Bounds and steps at the ends of the index range (Python clamps larger ints there).
        assert_eq!(adjust_slice(10, None, None, isize::MIN), (9, 1));
        assert_eq!(adjust_slice(10, None, None, isize::MAX), (0, 1));
        assert_eq!(
            adjust_slice(10, Some(isize::MIN), Some(isize::MAX), 3),
            (0, 4)
        );
        assert_eq!(
            adjust_slice(10, Some(isize::MAX), Some(isize::MIN), -4),
            (9, 3)
        );
    }

    #[test]
    fn a_huge_step_selecting_one_item_keeps_the_stride() {
        // `a[::2**62]` and `a[::-2**63]` select one item; the step times the stride would not
        // fit in isize, but a dimension of one item moves nowhere.
        let l = Layout::c_contiguous(&[3, 4], 8).unwrap();
        for (step, first) in [
            (isize::MAX, 0),
            (1 << 62, 0),
            (isize::MIN, 2),
            (-(1 << 62), 2),
        ] {
            let (v, offset) = l.slice(0, None, None, step).unwrap();
            assert_eq!(
                (v.shape(), v.strides(), offset),
                (&[1, 4][..], &[32, 8][..], first * 32)
            );
        }
    }
}
