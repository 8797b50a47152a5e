//! ndarray's arrays (feature `ndarray`, ndarray 0.17), both ways:
//!
//! - **Export.** `Array`, `ArcArray`, `ArrayView`, `ArrayViewMut` and `CowArray` are
//!   [`HostMemory`] that carries its own shape and strides ([`HostMemory::own_layout`]): a
//!   derive's `#[cai(data)]` field of one of these types needs no `shape` (naming one is a
//!   compile error), and exports C, F, sliced, negative-stride and empty arrays as they are.
//!   `ArrayView`, `ArcArray` (whose data its clones share) and `CowArray` (which may borrow) are
//!   exported read-only.
//!
//!   A struct generic over its memory learns that it holds an ndarray array only where the
//!   type is known, so there the refusal of layout keys comes with a build, not a check:
//!
//!   ```compile_fail,E0080
//!   use cai_runtime::{ArrayInterface, HostMemory};
//!
//!   #[derive(ArrayInterface)]
//!   #[cai(order = "F")]
//!   struct Any<M: HostMemory> {
//!       #[cai(data)]
//!       values: M,
//!   }
//!
//!   let _ = Any { values: ndarray::Array2::<f32>::zeros((2, 3)) }.array_interface();
//!   ```
//! - **Import** (with `python`). [`ForeignArray::as_array`] and [`ForeignArray::as_array_mut`]
//!   view an imported host array as an `ArrayView` / `ArrayViewMut`, rust-numpy's names.

use ndarray::{ArrayBase, CowRepr, Data, Dimension, OwnedArcRepr, OwnedRepr, ViewRepr};

use crate::element::Element;
use crate::memory::{HostMemory, OwnLayout};

/// The lowest address an array's items occupy and how many items from there its extent spans
/// (0 for an array with no items).
fn span<S: Data, D: Dimension>(a: &ArrayBase<S, D>) -> (*const S::Elem, usize) {
    if a.is_empty() {
        return (a.as_ptr(), 0);
    }
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&d, &s) in a.shape().iter().zip(a.strides()) {
        // A live array's items are inside one allocation: no overflow.
        let reach = (d as isize - 1) * s;
        lo += reach.min(0);
        hi += reach.max(0);
    }
    (a.as_ptr().wrapping_offset(lo), (hi - lo) as usize + 1)
}

fn own_layout<S: Data, D: Dimension>(a: &ArrayBase<S, D>) -> OwnLayout {
    let size = size_of::<S::Elem>() as isize;
    let (low, _) = span(a);
    // The stride of an axis of length 1 (or of an array with no items) is never used, and
    // ndarray lets it be anything: 0 then. The others stay inside the array's allocation.
    let used = |d: usize| d > 1 && !a.is_empty();
    OwnLayout {
        shape: a.shape().to_vec(),
        strides: a
            .shape()
            .iter()
            .zip(a.strides())
            .map(|(&d, &s)| if used(d) { s * size } else { 0 })
            .collect(),
        offset: (a.as_ptr() as usize).wrapping_sub(low as usize),
    }
}

macro_rules! ndarray_memory {
    ($( [$($g:tt)*] $repr:ty, writable: $w:expr; )*) => {$(
        // SAFETY: `own_layout` gives the array's items, which it owns or borrows for as long
        // as it lives, and `span` the extent around them (which may hold another view's items
        // between them: exports take the own layout as it is, the builder refusing any
        // other); only arrays that own their data alone, or borrow it mutably, are writable.
        unsafe impl<$($g)* D: Dimension> HostMemory for ArrayBase<$repr, D> {
            type Elem = T;
            const OWN_LAYOUT: bool = true;
            fn host_ptr(&self) -> *const T {
                span(self).0
            }
            fn len(&self) -> usize {
                span(self).1
            }
            fn is_writable(&self) -> bool {
                $w
            }
            fn own_layout(&self) -> Option<OwnLayout> {
                Some(own_layout(self))
            }
        }
    )*};
}

ndarray_memory! {
    [T: Element,] OwnedRepr<T>, writable: true;
    [T: Element,] OwnedArcRepr<T>, writable: false;
    ['a, T: Element,] ViewRepr<&'a T>, writable: false;
    ['a, T: Element,] ViewRepr<&'a mut T>, writable: true;
    ['a, T: Element,] CowRepr<'a, T>, writable: false;
}

#[cfg(all(feature = "python", feature = "testing"))]
pub use import::lent_plan_paths;

#[cfg(feature = "python")]
mod import {
    use bytemuck::{AnyBitPattern, NoUninit};
    use ndarray::{ArrayView, ArrayViewMut, Axis, Dimension, ShapeBuilder};

    use crate::descriptor::Host;
    use crate::element::Element;
    use crate::python::ForeignArray;
    use crate::python::ViewError;
    use crate::python::claim::Access;

    /// What `ArrayView::from_shape_ptr` takes: the shape and item strides from the lowest
    /// corner, the axes to invert after, and the pointer there.
    struct Plan<T, D> {
        shape: D,
        strides: D,
        invert: Vec<usize>,
        ptr: *mut T,
    }

    impl ForeignArray<Host> {
        /// The items as an ndarray view, for any layout (C, F, sliced, negative strides,
        /// broadcast, empty), `D` a fixed dimensionality (`Ix2`) or `IxDyn`:
        ///
        /// ```
        /// # use cai_runtime::python::ForeignHostArray;
        /// # use cai_runtime::__private::pyo3::PyResult;
        /// fn column_sums(a: &ForeignHostArray) -> PyResult<Vec<f64>> {
        ///     let v = a.as_array::<f64, ndarray::Ix2>()?;
        ///     Ok(v.sum_axis(ndarray::Axis(0)).to_vec())
        /// }
        /// ```
        ///
        /// Refused with a [`ViewError`] (in Python a `TypeError` or `ValueError`), never a
        /// panic: another element type ([`ViewError::Dtype`]), another dimensionality
        /// ([`ViewError::Dimensionality`]), items not aligned for `T` or byte strides that are
        /// not whole items ([`ViewError::Misaligned`]: [`Self::typed`] reads those), or bytes
        /// another live import of the same memory writes or views mutably
        /// ([`ViewError::Claimed`]).
        ///
        /// The view borrows the import, which keeps the memory alive. While the import lives,
        /// it holds a claim on the bytes it spans, as rust-numpy's borrow checking does: no
        /// other import in this extension module may then view them mutably, nor write them
        /// while this one views them. Python code that writes the array while the view is
        /// alive (a callback, another thread while this one has detached from the
        /// interpreter) is not seen: do not let it run.
        pub fn as_array<T, D>(&self) -> Result<ArrayView<'_, T, D>, ViewError>
        where
            T: Element + AnyBitPattern,
            D: Dimension,
        {
            let plan = self.plan::<T, D>()?;
            self.claim_lasting(Access::Shared)?;
            // SAFETY: the plan is of this import, which keeps its memory alive while the view
            // borrows `self`; `T` matches the typestr (`plan`); the claim keeps other imports
            // from writing the bytes meanwhile.
            Ok(unsafe { plan.view() })
        }

        /// [`Self::as_array`] for writing: refused also for read-only data
        /// ([`ViewError::ReadOnly`]), for an array in which two indices name the same bytes (a
        /// broadcast: [`ViewError::Overlapping`]), and while any other live import of the same
        /// memory reads, writes or views it ([`ViewError::Claimed`]).
        pub fn as_array_mut<T, D>(&mut self) -> Result<ArrayViewMut<'_, T, D>, ViewError>
        where
            T: Element + AnyBitPattern + NoUninit,
            D: Dimension,
        {
            if self.readonly() {
                return Err(ViewError::ReadOnly);
            }
            let plan = self.plan::<T, D>()?;
            if overlapping(
                self.layout().shape(),
                self.layout().strides(),
                size_of::<T>(),
            ) {
                return Err(ViewError::Overlapping {
                    shape: self.layout().shape().to_vec(),
                    strides: self.layout().strides().to_vec(),
                });
            }
            self.claim_lasting(Access::Unique)?;
            // SAFETY: as in `as_array`; besides, the producer declared the data writable, no
            // two indices name the same item (`overlapping`), `T`'s bytes are all initialized
            // (`NoUninit`), and the claim keeps every other import from the bytes while the
            // view borrows `self` mutably.
            let mut view =
                unsafe { ArrayViewMut::from_shape_ptr(plan.shape.strides(plan.strides), plan.ptr) };
            for axis in plan.invert {
                view.invert_axis(Axis(axis));
            }
            Ok(view)
        }

        /// Runs `f` on an ndarray view of `obj`'s items that lasts for the call: the scoped,
        /// typed import of DLPack's exchange table. Where `obj`'s type has a table that lends
        /// tensors (`dltensor_from_py_object_no_sync`) and the lent tensor is in host memory
        /// (`kDLCPU`), no import is made: the view reads the lent tensor (checked as any
        /// import's tensor, and as [`Self::as_array`] checks a view), claiming its bytes for
        /// the call (`ViewError::Claimed` where another import writes or views them mutably).
        /// Else it is [`Self::with_dlpack`]'s view, read through [`Self::as_array`].
        ///
        /// ```
        /// # use cai_runtime::{Host, python::ForeignArray, sync::ImportOptions};
        /// # use cai_runtime::__private::pyo3::prelude::*;
        /// fn total(obj: &Bound<'_, PyAny>) -> PyResult<f64> {
        ///     // SAFETY: the closure runs no Python code and keeps the GIL.
        ///     unsafe {
        ///         ForeignArray::<Host>::with_dlpack_array::<f64, ndarray::Ix2, _>(
        ///             obj,
        ///             &ImportOptions::default(),
        ///             |v| v.sum(),
        ///         )
        ///     }
        /// }
        /// ```
        ///
        /// The view cannot leave `f`, which borrows it:
        ///
        /// ```compile_fail
        /// # use cai_runtime::{Host, python::ForeignArray, sync::ImportOptions};
        /// # use cai_runtime::__private::pyo3::prelude::*;
        /// fn escape<'a>(obj: &Bound<'_, PyAny>) -> PyResult<ndarray::ArrayViewD<'a, f64>> {
        ///     // SAFETY: the closure runs no Python code.
        ///     unsafe {
        ///         ForeignArray::<Host>::with_dlpack_array(obj, &ImportOptions::default(), |v| v)
        ///     }
        /// }
        /// ```
        ///
        /// Errors: those of [`Self::with_dlpack`] and of [`Self::as_array`].
        ///
        /// # Safety
        /// As [`Self::with_dlpack`]'s: `f` must run no Python code that may change `obj`'s
        /// memory, and must not let the GIL go while other threads could.
        pub unsafe fn with_dlpack_array<T, D, R>(
            obj: &pyo3::Bound<'_, pyo3::PyAny>,
            options: &crate::sync::ImportOptions,
            f: impl FnOnce(ArrayView<'_, T, D>) -> R,
        ) -> pyo3::PyResult<R>
        where
            T: Element + AnyBitPattern,
            D: Dimension,
        {
            use dlpark::ffi::DLDeviceType;
            let mut t = crate::python::dlpack::unlent();
            let Some(table) = crate::python::dlpack::lent(obj, &mut t)? else {
                let a = Self::from_dlpack_with(obj, options, None)?;
                return Ok(f(a.as_array()?));
            };
            if t.device.device_type != DLDeviceType::CPU {
                // (Host-accessible CUDA memory, ordered after the producer's stream first.)
                // SAFETY: this function's contract, which is `with_dlpack`'s; `t` was lent now.
                let viewed =
                    unsafe { Self::with_lent(obj, table, &t, options, |a| a.as_array().map(f)) };
                return Ok(viewed??);
            }
            let (plan, ptr, extent) = match Plan::of_plain_tensor(&t) {
                Some(plain) => plain,
                None => {
                    let (head, layout) = crate::python::dlpack::describe_lent(&t)?;
                    crate::python::foreign::check_dtype::<T>(head.typestr(), None)?;
                    let plan = Plan::of(head.data().ptr, &layout)?;
                    (plan, head.data().ptr, layout.extent())
                }
            };
            // The claim an import would hold, for the call (released as it drops).
            let claim = crate::python::claim::Claim::new();
            let (lo, hi) = crate::python::foreign::claimed_range(ptr, extent);
            claim.lasting(lo, hi, Access::Shared)?;
            // SAFETY: the tensor `obj`'s producer lends, valid until control returns to Python,
            // which it does not while `f` runs (this function's contract): its memory lives
            // and no Python code writes it; `T` matches its type; the claim keeps other
            // imports from writing the bytes until it drops, after `f`.
            Ok(f(unsafe { plan.view() }))
        }

        fn plan<T: Element, D: Dimension>(&self) -> Result<Plan<T, D>, ViewError> {
            self.check_element::<T>()?;
            Plan::of(self.ptr(), self.layout())
        }
    }

    impl<T, D: Dimension> Plan<T, D> {
        /// The plan of a view of the items of type `T` at `ptr` with `layout` (a validated
        /// extent): refused for another dimensionality, a pointer not aligned for `T`, or
        /// byte strides that are not whole items.
        fn of(ptr: u64, layout: &crate::layout::Layout) -> Result<Self, ViewError> {
            let ndim = layout.ndim();
            if let Some(expected) = D::NDIM.filter(|&n| n != ndim) {
                return Err(ViewError::Dimensionality {
                    expected,
                    found: ndim,
                });
            }
            let mut shape = D::zeros(ndim);
            let mut strides = D::zeros(ndim);
            shape.slice_mut().copy_from_slice(layout.shape());
            if layout.is_empty() {
                return Ok(Self::empty(shape));
            }
            let size = size_of::<T>() as isize;
            let misaligned = || ViewError::Misaligned {
                rust: std::any::type_name::<T>(),
                ptr,
                strides: layout.strides().to_vec(),
                align: align_of::<T>(),
            };
            if !(ptr as usize).is_multiple_of(align_of::<T>()) {
                return Err(misaligned());
            }
            for (axis, (&d, &s)) in layout.shape().iter().zip(layout.strides()).enumerate() {
                // (A stride of a dimension of 1 is never used: any will do.)
                if d != 1 {
                    if s % size != 0 {
                        return Err(misaligned());
                    }
                    strides[axis] = (s / size) as usize;
                }
            }
            // (It cannot fail: the layout's extent was checked where it was made.)
            let (plan, _) = Self::from_corner(ptr, shape, strides, size).ok_or_else(misaligned)?;
            Ok(plan)
        }

        /// The plan of an array with no items: none is read, so any aligned pointer and C
        /// strides do.
        #[inline]
        fn empty(shape: D) -> Self {
            Plan {
                strides: shape.default_strides(),
                shape,
                invert: Vec::new(),
                ptr: std::ptr::NonNull::<T>::dangling().as_ptr(),
            }
        }

        /// The plan of the items at `ptr` with `shape` and item `strides` (signed, as `usize`
        /// bits) of `item` bytes, from the item at the lowest address along every axis, with
        /// positive strides; and the bytes it spans from `ptr`. `None` where those do not fit
        /// `isize`. (Inlined: its answer, returned through memory out of line, made the
        /// one-pass view wait on its stores.)
        #[inline(always)]
        fn from_corner(
            ptr: u64,
            shape: D,
            mut strides: D,
            item: isize,
        ) -> Option<(Self, crate::layout::Extent)> {
            let (mut lo, mut hi, mut invert) = (0isize, 0isize, Vec::new());
            for axis in 0..shape.ndim() {
                let (d, s) = (shape[axis], strides[axis] as isize);
                if d == 1 {
                    strides[axis] = 0; // never used: any will do (0)
                    continue;
                }
                let span = (d as isize - 1).checked_mul(s)?.checked_mul(item)?;
                if span < 0 {
                    lo = lo.checked_add(span)?;
                    invert.push(axis);
                } else {
                    hi = hi.checked_add(span)?;
                }
                strides[axis] = s.unsigned_abs();
            }
            let hi = hi.checked_add(item)?;
            hi.checked_sub(lo)?;
            let plan = Plan {
                shape,
                strides,
                invert,
                ptr: (ptr as usize as *mut u8).wrapping_offset(lo).cast::<T>(),
            };
            Some((plan, crate::layout::Extent { lo, hi }))
        }

        /// The plan of a lent host tensor that is a plain view of `T`s, with its address and
        /// extent; `None` for anything else (another device, type or dimensionality, a missing field,
        /// a misaligned address, a size or extent past `isize`). The caller then reads the
        /// tensor as an import reads one ([`describe_lent`](crate::python::dlpack::describe_lent)
        /// and [`Plan::of`]), which takes what this does not, or names what is wrong: this
        /// takes only what that takes, alike (`_lent_plan_paths`' test compares the two), in
        /// one pass with no layout made.
        #[inline]
        fn of_plain_tensor(
            t: &dlpark::ffi::DLTensor,
        ) -> Option<(Self, u64, Option<crate::layout::Extent>)>
        where
            T: Element,
        {
            let cpu = dlpark::ffi::DLDeviceType::CPU;
            if (t.device.device_type, t.device.device_id) != (cpu, 0)
                || crate::python::dlpack::typestr_of(t.dtype).ok()? != T::DTYPE.typestr()
            {
                return None;
            }
            let ndim = usize::try_from(t.ndim)
                .ok()
                .filter(|&n| n <= crate::layout::MAX_NDIM)?;
            if D::NDIM.is_some_and(|n| n != ndim) || (ndim > 0 && t.shape.is_null()) {
                return None;
            }
            let item = isize::try_from(size_of::<T>()).ok()?;
            let mut shape = D::zeros(ndim);
            let (mut count, mut empty) = (1isize, false);
            // SAFETY: DLPack: a non-null shape points to `ndim` int64s, alive while the tensor
            // is lent (for the call); none is read where `ndim` is 0.
            for (i, n) in unsafe { crate::python::dlpack::int64s(t.shape, ndim) }.enumerate() {
                shape[i] = usize::try_from(n).ok()?;
                match n {
                    0 => empty = true,
                    n => count = count.checked_mul(isize::try_from(n).ok()?)?,
                }
            }
            count.checked_mul(item)?;
            let data = (t.data as u64).checked_add(t.byte_offset)?;
            if t.data.is_null() && !empty {
                return None;
            }
            // The item strides: the tensor's, or C order's where it gives none.
            let mut strides = D::zeros(ndim);
            if !t.strides.is_null() {
                // SAFETY: as the shape's.
                let given = unsafe { crate::python::dlpack::int64s(t.strides, ndim) };
                for (i, s) in given.enumerate() {
                    let s = isize::try_from(s).ok()?;
                    s.checked_mul(item)?;
                    strides[i] = s as usize;
                }
            } else {
                let mut c = 1usize;
                for i in (0..ndim).rev() {
                    strides[i] = c;
                    c = c.wrapping_mul(shape[i]);
                }
            }
            if empty {
                return Some((Self::empty(shape), data, None));
            }
            if !data.is_multiple_of(align_of::<T>() as u64) {
                return None;
            }
            let (plan, extent) = Self::from_corner(data, shape, strides, item)?;
            Some((plan, data, Some(extent)))
        }

        /// The view the plan describes.
        ///
        /// # Safety
        /// The plan's memory is alive, holds `T`s (which accept any bits), and nothing writes
        /// it for `'a`. (The plan itself checked that the pointer is non-null and aligned,
        /// and made the strides whole, non-negative items from the lowest corner of the
        /// validated extent.)
        #[inline]
        unsafe fn view<'a>(self) -> ArrayView<'a, T, D> {
            // SAFETY: this function's contract.
            let mut view = unsafe {
                ArrayView::from_shape_ptr(self.shape.strides(self.strides), self.ptr.cast_const())
            };
            for axis in self.invert {
                view.invert_axis(Axis(axis));
            }
            view
        }
    }

    /// Test support (feature `testing`): what [`ForeignArray::with_dlpack_array`] makes of
    /// the host tensor `obj`'s table lends (`None` where it lends none) in one pass and as an
    /// import reads it, as `Debug` text of the view's shape, item strides from the lowest
    /// corner, inverted axes, first item's address, the data's address and the extent (the
    /// one-pass side `None` where it leaves the tensor to the other; the other an error's
    /// text where it refuses), so a test can check that the one pass never takes what the
    /// import would not, nor makes another view of it.
    #[cfg(feature = "testing")]
    pub fn lent_plan_paths<T: Element + AnyBitPattern>(
        obj: &pyo3::Bound<'_, pyo3::PyAny>,
    ) -> pyo3::PyResult<Option<(Option<String>, String)>> {
        type Shown = (
            Vec<usize>,
            Vec<usize>,
            Vec<usize>,
            usize,
            u64,
            Option<(isize, isize)>,
        );
        let show = |(p, data, e): (Plan<T, ndarray::IxDyn>, u64, Option<crate::layout::Extent>)| {
            let shown: Shown = (
                p.shape.slice().to_vec(),
                p.strides.slice().to_vec(),
                p.invert,
                p.ptr as usize,
                data,
                e.map(|e| (e.lo, e.hi)),
            );
            format!("{shown:?}")
        };
        let mut t = crate::python::dlpack::unlent();
        let lent = crate::python::dlpack::lent(obj, &mut t)?.is_some();
        if !lent || t.device.device_type != dlpark::ffi::DLDeviceType::CPU {
            return Ok(None);
        }
        let plain = Plan::of_plain_tensor(&t).map(show);
        let read = crate::python::dlpack::describe_lent(&t).and_then(|(head, layout)| {
            crate::python::foreign::check_dtype::<T>(head.typestr(), None)?;
            let plan = Plan::of(head.data().ptr, &layout)?;
            Ok((plan, head.data().ptr, layout.extent()))
        });
        Ok(Some((plain, read.map_or_else(|e| e.to_string(), show))))
    }

    /// Whether two indices of a non-empty layout may name overlapping bytes: false only when,
    /// axes sorted by stride, each stride steps past everything the smaller ones reach (a
    /// sufficient test; layouts that interleave without overlapping are refused too).
    fn overlapping(shape: &[usize], strides: &[isize], itemsize: usize) -> bool {
        if shape.contains(&0) {
            return false;
        }
        let mut axes: Vec<(usize, usize)> = shape
            .iter()
            .zip(strides)
            .filter(|(d, _)| **d > 1)
            .map(|(&d, &s)| (s.unsigned_abs(), d))
            .collect();
        axes.sort_unstable();
        let mut reach = itemsize;
        for (stride, d) in axes {
            if stride < reach {
                return true;
            }
            // Inside the validated extent: no overflow.
            reach += stride * (d - 1);
        }
        false
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn overlap_is_found_where_items_share_bytes() {
            use super::overlapping;
            assert!(!overlapping(&[3, 4], &[32, 8], 8));
            assert!(!overlapping(&[3, 4], &[8, 24], 8)); // F order
            assert!(!overlapping(&[3, 4], &[-32, 8], 8));
            assert!(!overlapping(&[0, 4], &[0, 0], 8)); // empty
            assert!(!overlapping(&[1, 4], &[0, 8], 8)); // a length-1 axis's stride is unused
            assert!(overlapping(&[3, 4], &[0, 8], 8)); // broadcast
            assert!(overlapping(&[3, 4], &[8, 8], 8));
            assert!(overlapping(&[2], &[4], 8)); // items of 8 bytes, 4 apart
        }
    }
}
