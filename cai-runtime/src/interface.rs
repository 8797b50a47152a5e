//! The traits a derived struct implements, and the traits its annotated fields must implement.

use crate::descriptor::{
    ArrayDescriptor, CudaArrayDescriptor, DescriptorBuilder, Device, Host, HostArrayDescriptor,
    Space,
};
use crate::error::DescriptorError;

/// A type that exports a `__cuda_array_interface__` descriptor for device memory it holds.
/// Usually derived: `#[derive(CudaArrayInterface)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not export a CUDA Array Interface",
    label = "no `__cuda_array_interface__`",
    note = "derive it: `#[derive(CudaArrayInterface)]` with `#[cai(data)]` on the field holding device memory"
)]
pub trait CudaArrayInterface {
    /// The descriptor; an error when the struct's current shape, strides or stream cannot be
    /// exported (shape larger than the buffer, overflow...).
    fn cuda_array_interface(&self) -> Result<CudaArrayDescriptor, DescriptorError>;

    /// The builder whose `build()` gives the descriptor, when the implementation has one (the
    /// derive's does). Lets the Python getter memoize on the builder's inputs.
    #[doc(hidden)]
    fn __cai_builder(&self) -> Option<Result<DescriptorBuilder<'_, Device>, DescriptorError>> {
        None
    }
}

/// A type that exports a NumPy `__array_interface__` descriptor for host memory it holds.
/// Usually derived: `#[derive(ArrayInterface)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not export a NumPy array interface",
    label = "no `__array_interface__`",
    note = "derive it: `#[derive(ArrayInterface)]` with `#[cai(data)]` on the field holding host memory"
)]
pub trait ArrayInterface {
    /// The descriptor; see [`CudaArrayInterface::cuda_array_interface`].
    fn array_interface(&self) -> Result<HostArrayDescriptor, DescriptorError>;

    /// See [`CudaArrayInterface::__cai_builder`].
    #[doc(hidden)]
    fn __cai_builder(&self) -> Option<Result<DescriptorBuilder<'_, Host>, DescriptorError>> {
        None
    }
}

impl<T: CudaArrayInterface + ?Sized> CudaArrayInterface for &T {
    fn cuda_array_interface(&self) -> Result<CudaArrayDescriptor, DescriptorError> {
        (**self).cuda_array_interface()
    }
    fn __cai_builder(&self) -> Option<Result<DescriptorBuilder<'_, Device>, DescriptorError>> {
        (**self).__cai_builder()
    }
}

impl<T: ArrayInterface + ?Sized> ArrayInterface for &T {
    fn array_interface(&self) -> Result<HostArrayDescriptor, DescriptorError> {
        (**self).array_interface()
    }
    fn __cai_builder(&self) -> Option<Result<DescriptorBuilder<'_, Host>, DescriptorError>> {
        (**self).__cai_builder()
    }
}

/// Values usable as a shape: `#[cai(shape)]` fields and `shape = ...` expressions.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a shape",
    label = "expected a shape of `usize` dimensions",
    note = "a shape is a `usize` (one dimension), `[usize; N]`, `(usize, usize, ...)`, `Vec<usize>` or `&[usize]`; convert other integers with `as usize` or `try_into()`"
)]
pub trait AsShape {
    /// The dimensions.
    fn to_shape(&self) -> Vec<usize>;
}

/// Values usable as byte strides: `#[cai(strides)]` fields and `strides = ...` expressions.
/// `None` means "contiguous in the declared order".
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as strides",
    label = "expected byte strides of `isize`",
    note = "strides are in bytes, one `isize` per dimension: `[isize; N]`, `Vec<isize>`, `&[isize]`, or an `Option` of one (None: contiguous)"
)]
pub trait AsStrides {
    /// The byte strides, or `None` for a contiguous layout.
    fn to_strides(&self) -> Option<Vec<isize>>;
}

/// Implements a sequence trait for arrays, slices, `Vec` and references of the item type.
macro_rules! impl_sequences {
    ($tr:ident :: $m:ident -> $out:ty, $item:ty, |$v:ident| $wrap:expr) => {
        impl<const N: usize> $tr for [$item; N] {
            fn $m(&self) -> $out {
                let $v = self.to_vec();
                $wrap
            }
        }
        impl $tr for [$item] {
            fn $m(&self) -> $out {
                let $v = self.to_vec();
                $wrap
            }
        }
        impl $tr for Vec<$item> {
            fn $m(&self) -> $out {
                let $v = self.clone();
                $wrap
            }
        }
        impl<T: $tr + ?Sized> $tr for &T {
            fn $m(&self) -> $out {
                (**self).$m()
            }
        }
    };
}

impl_sequences!(AsShape::to_shape -> Vec<usize>, usize, |v| v);
impl_sequences!(AsStrides::to_strides -> Option<Vec<isize>>, isize, |v| Some(v));

impl AsShape for usize {
    fn to_shape(&self) -> Vec<usize> {
        vec![*self]
    }
}

macro_rules! shape_tuples {
    ($(($($n:ident),*)),*) => {$(
        impl AsShape for ($(shape_tuples!(@u $n),)*) {
            #[allow(non_snake_case)]
            fn to_shape(&self) -> Vec<usize> {
                let ($($n,)*) = *self;
                vec![$($n),*]
            }
        }
    )*};
    (@u $n:ident) => { usize };
}
shape_tuples!(
    (),
    (a),
    (a, b),
    (a, b, c),
    (a, b, c, d),
    (a, b, c, d, e),
    (a, b, c, d, e, f)
);

impl<T: AsStrides> AsStrides for Option<T> {
    fn to_strides(&self) -> Option<Vec<isize>> {
        self.as_ref().and_then(AsStrides::to_strides)
    }
}

/// Values usable as the byte offset of the first item: `#[cai(offset)]` fields and
/// `offset = ...` expressions.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a byte offset",
    label = "expected a `usize` byte offset",
    note = "`offset` is the number of bytes from the start of the buffer to the first item, as a `usize`"
)]
pub trait AsOffset {
    /// The offset in bytes.
    fn to_offset(&self) -> usize;
}

impl AsOffset for usize {
    fn to_offset(&self) -> usize {
        *self
    }
}

impl<T: AsOffset + ?Sized> AsOffset for &T {
    fn to_offset(&self) -> usize {
        (**self).to_offset()
    }
}

/// Fields usable as the read-only flag with `#[cai(readonly)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a read-only flag",
    label = "expected `bool`",
    note = "`#[cai(readonly)]` on a field takes a `bool` field (true: consumers must not write); to make every export read-only, put `#[cai(readonly)]` on the struct instead"
)]
pub trait AsReadonly {
    /// Whether the data must be exported read-only.
    fn is_readonly(&self) -> bool;
}

impl AsReadonly for bool {
    fn is_readonly(&self) -> bool {
        *self
    }
}

impl<T: AsReadonly + ?Sized> AsReadonly for &T {
    fn is_readonly(&self) -> bool {
        (**self).is_readonly()
    }
}

/// Values usable as a mask with `#[cai(mask)]`: an array exporting the same protocol, or an
/// `Option` of one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a mask for `{S}` descriptors",
    label = "not a mask",
    note = "a mask is a value (or `Option` of one) that itself derives `CudaArrayInterface` (device) or `ArrayInterface` (host)"
)]
pub trait AsMask<S: Space> {
    /// The mask's descriptor, or `None` for no mask.
    fn mask_descriptor(&self) -> Result<Option<ArrayDescriptor<S>>, DescriptorError>;
}

impl<T: CudaArrayInterface> AsMask<Device> for T {
    fn mask_descriptor(&self) -> Result<Option<CudaArrayDescriptor>, DescriptorError> {
        self.cuda_array_interface().map(Some)
    }
}

impl<T: CudaArrayInterface> AsMask<Device> for Option<T> {
    fn mask_descriptor(&self) -> Result<Option<CudaArrayDescriptor>, DescriptorError> {
        self.as_ref().map(T::cuda_array_interface).transpose()
    }
}

impl<T: ArrayInterface> AsMask<Host> for T {
    fn mask_descriptor(&self) -> Result<Option<HostArrayDescriptor>, DescriptorError> {
        self.array_interface().map(Some)
    }
}

impl<T: ArrayInterface> AsMask<Host> for Option<T> {
    fn mask_descriptor(&self) -> Result<Option<HostArrayDescriptor>, DescriptorError> {
        self.as_ref().map(T::array_interface).transpose()
    }
}
