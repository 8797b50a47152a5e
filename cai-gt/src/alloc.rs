//! The aligned allocation plan, as GT4Py's allocator computes it
//! (`gt4py.storage.allocators`): the contiguous dimension (the largest `layout` entry) is
//! padded to a whole number of alignment blocks, strides follow the layout over the padded
//! shape, and the buffer gets `alignment_size - 1` spare bytes so that the first item can be
//! shifted until the item at `aligned_index` starts on an `alignment_size`-byte boundary.

use crate::StorageError;
use crate::dims::PerDim;
use cai_runtime::Layout;

/// Where every item of a new storage goes in its buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocationPlan {
    /// The requested shape with the strides of the padded one.
    layout: Layout,
    /// The contiguous dimension and its padded size (none for 0-d storages).
    padded: Option<(usize, usize)>,
    alignment: usize,
    /// Bytes from item `[0, ..., 0]` to the aligned item, modulo `alignment`.
    to_aligned: usize,
    buffer_bytes: usize,
}

/// Whether `layout` is a permutation of `0..ndim`.
pub fn check_layout(layout: &[usize], ndim: usize) -> Result<(), StorageError> {
    // Entries seen so far, as bits (no allocation for up to 128 dimensions, more than NumPy's
    // 64); a vector beyond.
    let ok = layout.len() == ndim
        && if ndim <= 128 {
            let mut seen = 0u128;
            layout.iter().all(|&l| {
                let fresh = l < ndim && seen & (1 << l) == 0;
                if fresh {
                    seen |= 1 << l;
                }
                fresh
            })
        } else {
            let mut seen = vec![false; ndim];
            layout
                .iter()
                .all(|&l| l < ndim && !std::mem::replace(&mut seen[l], true))
        };
    if ok {
        Ok(())
    } else {
        Err(StorageError::Layout {
            layout: layout.to_vec(),
            ndim,
        })
    }
}

/// Whether `alignment` and `aligned_index` can hold for a storage of `shape` with items of
/// `itemsize` bytes: one index per dimension, each at most the dimension's size, and an
/// alignment that is not zero and is a multiple or a divisor of the item size (so that aligned
/// items recur every `alignment` bytes). A new storage's plan checks this, and so does wrapping
/// memory that already exists.
pub fn check_alignment(
    shape: &[usize],
    itemsize: usize,
    alignment: usize,
    aligned_index: &[usize],
) -> Result<(), StorageError> {
    let ndim = shape.len();
    if aligned_index.len() != ndim {
        return Err(StorageError::Length {
            param: "aligned_index",
            got: aligned_index.len(),
            ndim,
        });
    }
    if let Some(axis) = (0..ndim).find(|&d| aligned_index[d] > shape[d]) {
        return Err(StorageError::AlignedIndex {
            index: aligned_index.to_vec(),
            shape: shape.to_vec(),
            axis,
        });
    }
    if alignment == 0 {
        return Err(StorageError::ZeroAlignment);
    }
    if itemsize == 0 || (!alignment.is_multiple_of(itemsize) && !itemsize.is_multiple_of(alignment))
    {
        return Err(StorageError::Alignment {
            alignment,
            itemsize,
        });
    }
    Ok(())
}

impl AllocationPlan {
    /// Plans a buffer for `shape` items of `itemsize` bytes with stride order `layout` (a
    /// permutation; the largest entry has the smallest stride), such that the item at
    /// `aligned_index` starts on an `alignment`-byte boundary.
    pub fn new(
        shape: &[usize],
        itemsize: usize,
        layout: &[usize],
        alignment: usize,
        aligned_index: &[usize],
    ) -> Result<Self, StorageError> {
        let ndim = shape.len();
        check_layout(layout, ndim)?;
        check_alignment(shape, itemsize, alignment, aligned_index)?;
        let overflow = || StorageError::Overflow {
            shape: shape.to_vec(),
            itemsize,
        };
        let per_block = (alignment / itemsize).max(1);
        // Dimensions from the largest stride to the smallest.
        let mut order: PerDim<usize> = (0..ndim).collect();
        order.sort_by_key(|&d| layout[d]);
        let padded = match order.last() {
            Some(&contiguous) => Some((
                contiguous,
                shape[contiguous]
                    .div_ceil(per_block)
                    .checked_mul(per_block)
                    .ok_or_else(overflow)?,
            )),
            None => None,
        };
        let mut strides: PerDim<isize> = PerDim::from_elem(0, ndim);
        let mut step = itemsize;
        for &d in order.iter().rev() {
            strides[d] = isize::try_from(step).map_err(|_| overflow())?;
            let size = match padded {
                Some((c, size)) if c == d => size,
                _ => shape[d],
            };
            step = step.checked_mul(size).ok_or_else(overflow)?;
        }
        // `step` is now the padded array's size in bytes.
        let buffer_bytes = step.checked_add(alignment - 1).ok_or_else(overflow)?;
        if buffer_bytes > isize::MAX as usize {
            return Err(overflow());
        }
        // Bytes from item 0 to the aligned item, modulo the alignment. Each term `i * s` is at
        // most the partial size `step` had after its dimension (`i` <= the dimension's size;
        // checked above), so below 2^64, and there are fewer than 2^64 terms: the u128 sum
        // cannot overflow. One division at the end.
        let to_aligned = aligned_index
            .iter()
            .zip(&strides)
            .map(|(&i, &s)| i as u128 * s.unsigned_abs() as u128)
            .sum::<u128>()
            % alignment as u128;
        let layout = Layout::strided(shape, &strides, itemsize).map_err(|_| overflow())?;
        Ok(AllocationPlan {
            layout,
            padded,
            alignment,
            // Below `alignment`, a usize.
            to_aligned: to_aligned as usize,
            buffer_bytes,
        })
    }

    /// Bytes to allocate (the padded array plus `alignment - 1` for the shift).
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_bytes
    }

    /// The shape with the contiguous dimension padded.
    pub fn padded_shape(&self) -> Vec<usize> {
        let mut shape = self.layout.shape().to_vec();
        if let Some((d, size)) = self.padded {
            shape[d] = size;
        }
        shape
    }

    /// Byte strides (over the padded shape).
    pub fn strides(&self) -> &[isize] {
        self.layout.strides()
    }

    /// The items' layout (the requested shape with the padded strides).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The items' layout, taken out of the plan.
    pub fn into_layout(self) -> Layout {
        self.layout
    }

    /// The alignment in bytes of the item at `aligned_index` (1: none).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Where item `[0, ..., 0]` goes, in bytes from the start of a buffer at address `base`,
    /// so that the item at `aligned_index` is aligned. Always less than `alignment`.
    pub fn byte_offset(&self, base: usize) -> usize {
        let a = self.alignment;
        // Want (base + offset + to_aligned) % a == 0, that is offset = need - to_aligned
        // (mod a), with `need` the bytes from `base` to the next boundary. Both are below `a`.
        let need = (a - base % a) % a;
        if need >= self.to_aligned {
            need - self.to_aligned
        } else {
            need + (a - self.to_aligned)
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_and_f_without_alignment_are_numpy_layouts() {
        let c = AllocationPlan::new(&[2, 3, 4], 8, &[0, 1, 2], 1, &[0, 0, 0]).unwrap();
        assert_eq!(c.strides(), [96, 32, 8]);
        assert_eq!(c.buffer_bytes(), 192);
        let f = AllocationPlan::new(&[2, 3, 4], 8, &[2, 1, 0], 1, &[0, 0, 0]).unwrap();
        assert_eq!(f.strides(), [8, 16, 48]);
        assert_eq!(f.byte_offset(12345), 0);
    }

    #[test]
    fn the_contiguous_dimension_is_padded_to_whole_blocks() {
        // 64-byte alignment of f64: blocks of 8 items; K (last) is contiguous.
        let p = AllocationPlan::new(&[3, 5, 10], 8, &[0, 1, 2], 64, &[1, 1, 3]).unwrap();
        assert_eq!(p.padded_shape(), [3, 5, 16]);
        assert_eq!(p.strides(), [5 * 16 * 8, 16 * 8, 8]);
        assert_eq!(p.buffer_bytes(), 3 * 5 * 16 * 8 + 63);
        for base in [0usize, 8, 64, 4096 + 24] {
            let off = p.byte_offset(base);
            assert!(off < 64);
            let aligned = base + off + 5 * 16 * 8 + 16 * 8 + 3 * 8;
            assert_eq!(aligned % 64, 0, "base {base}");
        }
    }

    #[test]
    fn bad_parameters_name_themselves() {
        let e = AllocationPlan::new(&[2, 2], 8, &[0, 0], 1, &[0, 0]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "layout = [0, 0] is not a permutation of 0..2 (one entry per dimension, each once; the largest entry is the contiguous dimension)"
        );
        let e = AllocationPlan::new(&[2, 2], 8, &[0, 1], 12, &[0, 0]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("alignment_size = 12 is not a multiple of the item size 8")
        );
        assert_eq!(
            AllocationPlan::new(&[2, 2], 8, &[0, 1], 0, &[0, 0]).unwrap_err(),
            StorageError::ZeroAlignment
        );
        let e = AllocationPlan::new(&[2, 2], 8, &[0, 1], 1, &[0, 3]).unwrap_err();
        assert!(
            e.to_string()
                .contains("outside the shape [2, 2] (dimension 1)"),
            "{e}"
        );
        let e = AllocationPlan::new(&[usize::MAX / 2, 4], 8, &[0, 1], 1, &[0, 0]).unwrap_err();
        assert!(matches!(e, StorageError::Overflow { .. }));
        // An alignment smaller than the item, dividing it, is no constraint.
        assert!(AllocationPlan::new(&[3], 8, &[0], 4, &[0]).is_ok());
    }

    /// Up to 128 dimensions are checked with a bit set, beyond with a vector: both agree.
    #[test]
    fn permutations_of_any_length() {
        for n in [0, 1, 3, 127, 128, 129, 200] {
            let identity: Vec<usize> = (0..n).collect();
            let reversed: Vec<usize> = (0..n).rev().collect();
            assert!(check_layout(&identity, n).is_ok(), "{n}");
            assert!(check_layout(&reversed, n).is_ok(), "{n}");
            assert!(check_layout(&identity, n + 1).is_err(), "{n}: too short");
            if n == 0 {
                continue;
            }
            // An entry repeated, one out of range (n itself: for 128, past the bit set).
            let mut repeated = identity.clone();
            repeated[n - 1] = 0;
            let mut out_of_range = identity.clone();
            out_of_range[n - 1] = n;
            for bad in [repeated, out_of_range]
                .into_iter()
                .filter(|b| *b != identity)
            {
                assert_eq!(
                    check_layout(&bad, n),
                    Err(StorageError::Layout {
                        layout: bad.clone(),
                        ndim: n
                    }),
                    "{n}"
                );
            }
        }
    }

    #[test]
    fn zero_dimensional_and_empty() {
        let p = AllocationPlan::new(&[], 4, &[], 16, &[]).unwrap();
        assert_eq!((p.buffer_bytes(), p.byte_offset(3)), (4 + 15, 13));
        let p = AllocationPlan::new(&[0, 5], 4, &[0, 1], 16, &[0, 0]).unwrap();
        assert_eq!(p.padded_shape(), [0, 8]);
        assert!(p.layout().is_empty());
    }
}
