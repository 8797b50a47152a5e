//! ndarray's arrays both ways (feature `ndarray`): derived exports take the array's own shape
//! and strides, checked item by item against ndarray's own addresses for random shapes and
//! slices; imports as `ArrayView`s (with `python`) are checked item by item against the
//! descriptor's addresses for random layouts, and every refusal is a typed error.
#![cfg(all(feature = "ndarray", feature = "derive"))]

use cai_runtime::{ArrayInterface, HostArrayDescriptor};
use ndarray::{
    ArcArray, Array, Array2, ArrayD, ArrayView, ArrayViewMut, IxDyn, ShapeBuilder, SliceInfoElem, s,
};
use proptest::prelude::*;

#[derive(ArrayInterface)]
struct Owned<D: ndarray::Dimension> {
    #[cai(data)]
    values: Array<f64, D>,
}

#[derive(ArrayInterface)]
struct Viewed<'a> {
    #[cai(data)]
    values: ArrayView<'a, i32, ndarray::Ix2>,
}

#[derive(ArrayInterface)]
struct ViewedMut<'a> {
    #[cai(data)]
    values: ArrayViewMut<'a, i32, ndarray::Ix2>,
}

#[derive(ArrayInterface)]
struct Shared {
    #[cai(data)]
    values: ArcArray<u8, ndarray::Ix1>,
}

/// The address the descriptor gives item `index`.
fn address(d: &HostArrayDescriptor, index: &[usize]) -> u64 {
    let layout = d.layout().unwrap();
    let off: isize = index
        .iter()
        .zip(layout.strides())
        .map(|(&i, &s)| i as isize * s)
        .sum();
    d.data.ptr.wrapping_add_signed(off as i64)
}

/// Every item of `a` is where the descriptor says, and the descriptor's shape is `a`'s.
fn same_items<S: ndarray::Data<Elem = T>, T, D: ndarray::Dimension>(
    d: &HostArrayDescriptor,
    a: &ndarray::ArrayBase<S, D>,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(&d.shape[..], a.shape());
    if a.is_empty() {
        prop_assert_eq!(d.data.ptr, 0); // zero-size arrays export no pointer
        return Ok(());
    }
    for (index, item) in a.indexed_iter() {
        let index = index.into_dimension();
        prop_assert_eq!(address(d, index.slice()), item as *const T as u64);
    }
    Ok(())
}

use ndarray::IntoDimension;

#[test]
fn layouts_come_from_the_array() {
    // C order: no strides exported.
    let c = Owned {
        values: Array2::from_shape_fn((2, 3), |(i, j)| (i * 3 + j) as f64),
    };
    let d = c.array_interface().unwrap();
    assert_eq!(
        (d.shape.as_slice(), d.strides.as_deref()),
        (&[2, 3][..], None)
    );
    assert_eq!(d.data.ptr, c.values.as_ptr() as u64);
    assert!(!d.data.readonly);
    same_items(&d, &c.values).unwrap();
    // F order (a transposed array), sliced with a negative step, 0-d, empty.
    let f = Owned {
        values: c.values.clone().reversed_axes(),
    };
    let d = f.array_interface().unwrap();
    assert_eq!(d.strides.as_deref(), Some(&[8, 24][..]));
    same_items(&d, &f.values).unwrap();
    let sliced = Owned {
        values: c.values.slice(s![.., ..;-2]).to_owned(),
    };
    same_items(&sliced.array_interface().unwrap(), &sliced.values).unwrap();
    let mut backwards = c.values.clone();
    backwards.invert_axis(ndarray::Axis(1));
    let b = Owned { values: backwards };
    let d = b.array_interface().unwrap();
    assert_eq!(d.strides.as_deref(), Some(&[24, -8][..]));
    assert_eq!(d.data.ptr, &b.values[[0, 0]] as *const f64 as u64);
    same_items(&d, &b.values).unwrap();
    let scalar = Owned {
        values: ndarray::arr0(4.0),
    };
    let d = scalar.array_interface().unwrap();
    assert!(d.shape.is_empty());
    assert_eq!(d.data.ptr, scalar.values.as_ptr() as u64);
    let empty = Owned {
        values: Array2::<f64>::zeros((0, 3)),
    };
    same_items(&empty.array_interface().unwrap(), &empty.values).unwrap();
}

#[test]
fn docs_rust_md_heights_example() {
    #[derive(ArrayInterface)]
    struct Heights {
        #[cai(data)]
        values: Array2<f32>,
    }
    let mut values = Array2::<f32>::zeros((4, 6));
    values.slice_collapse(s![..;2, ..;-3]);
    let h = Heights { values };
    let d = h.array_interface().unwrap();
    assert_eq!(d.shape, [2, 2]);
    assert_eq!(d.strides.as_deref(), Some(&[48, -12][..]));
    same_items(&d, &h.values).unwrap();
}

#[test]
fn the_own_layout_is_exported_as_it_is() {
    use cai_runtime::{DescriptorBuilder, DescriptorError};
    // ndarray lets a length-1 axis have any stride, which is never used: exported as 0, not
    // multiplied into an overflow.
    let data = [1.0f64, 2.0, 3.0, 4.0];
    let odd = ArrayView::from_shape((1, 4).strides((1 << 62, 1)), &data).unwrap();
    let d = DescriptorBuilder::host(&odd).build().unwrap();
    assert_eq!(
        (d.shape.as_slice(), d.strides.as_deref()),
        (&[1, 4][..], None)
    );
    // A shape, strides, offset or order, or an element of another size, would describe
    // bytes the array does not own (another view's, between its items): refused.
    let mut all: Vec<i32> = (0..10).collect();
    let mut whole = ndarray::ArrayViewMut1::from(&mut all[..]);
    let (even, _odd) = whole.multi_slice_mut((s![..;2], s![1..;2]));
    for (given, b) in [
        ("`shape`", DescriptorBuilder::host(&even).shape([9])),
        ("`strides`", DescriptorBuilder::host(&even).strides(None)),
        ("`offset`", DescriptorBuilder::host(&even).offset(0)),
        (
            "`order`",
            DescriptorBuilder::host(&even).order(cai_runtime::Order::F),
        ),
        (
            "an element type of another size",
            DescriptorBuilder::host_as::<u8, _>(&even),
        ),
    ] {
        match b.build() {
            Err(DescriptorError::OwnLayout { given: g }) => assert_eq!(g, given),
            other => panic!("{given}: {other:?}"),
        }
    }
    // An element of the same size reads the same items.
    let d = DescriptorBuilder::host_as::<u32, _>(&even).build().unwrap();
    assert_eq!(d.strides.as_deref(), Some(&[8][..]));
}

#[test]
fn views_and_shared_arrays_are_read_only() {
    let mut data: Vec<i32> = (0..12).collect();
    let base = ArrayView::from_shape((3, 4), &data).unwrap();
    let v = Viewed {
        values: base.slice_move(s![1.., ..;3]),
    };
    let d = v.array_interface().unwrap();
    assert!(d.data.readonly);
    same_items(&d, &v.values).unwrap();
    let m = ViewedMut {
        values: ArrayViewMut::from_shape((3, 4), &mut data).unwrap(),
    };
    assert!(!m.array_interface().unwrap().data.readonly);
    let a = Shared {
        values: ArcArray::from(vec![1u8, 2, 3]),
    };
    assert!(a.array_interface().unwrap().data.readonly);
}

/// A random array of up to four dimensions, sliced along each with a random step (negative
/// too) and start, maybe transposed.
fn sliced_array() -> impl Strategy<Value = (Vec<usize>, Vec<(isize, isize)>, bool)> {
    prop::collection::vec(0usize..6, 0..5).prop_flat_map(|shape| {
        let n = shape.len();
        (
            Just(shape),
            prop::collection::vec((0isize..3, prop_oneof![-3isize..0, 1isize..4]), n),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_item_is_where_the_descriptor_says((shape, cuts, transpose) in sliced_array()) {
        let n: usize = shape.iter().product();
        let full = ArrayD::from_shape_vec(IxDyn(&shape), (0..n).map(|i| i as f64).collect()).unwrap();
        let info: Vec<SliceInfoElem> = cuts
            .iter()
            .zip(&shape)
            .map(|(&(start, step), &d)| SliceInfoElem::Slice {
                start: start.min(d as isize),
                end: None,
                step,
            })
            .collect();
        let mut view = full.slice(info.as_slice());
        if transpose {
            view = view.reversed_axes();
        }
        // An owned array keeps its layout only as built: test the view as memory, and an
        // owned copy of it.
        let d = Viewed2 { values: view.clone() }.array_interface().unwrap();
        same_items(&d, &view)?;
        let owned = Owned { values: view.to_owned() };
        same_items(&owned.array_interface().unwrap(), &owned.values)?;
    }
}

#[derive(ArrayInterface)]
struct Viewed2<'a> {
    #[cai(data)]
    values: ArrayView<'a, f64, IxDyn>,
}

#[cfg(feature = "python")]
mod import {
    use cai_runtime::Host;
    use cai_runtime::python::{ForeignArray, ViewError};
    use ndarray::{Dimension, Ix1, Ix2, IxDyn};
    use proptest::prelude::*;
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    /// Imports `len` items of `buf` from byte `offset` with `shape` and byte `strides`.
    fn import<'py>(
        py: Python<'py>,
        ptr: usize,
        typestr: &str,
        shape: &[usize],
        strides: Option<&[isize]>,
        readonly: bool,
    ) -> ForeignArray<Host> {
        let d = PyDict::new(py);
        d.set_item("shape", pyo3::types::PyTuple::new(py, shape).unwrap())
            .unwrap();
        d.set_item("typestr", typestr).unwrap();
        d.set_item("data", (ptr, readonly)).unwrap();
        match strides {
            Some(s) => d
                .set_item("strides", pyo3::types::PyTuple::new(py, s).unwrap())
                .unwrap(),
            None => d.set_item("strides", py.None()).unwrap(),
        }
        d.set_item("version", 3).unwrap();
        // SAFETY: every caller's dict describes items inside a buffer that outlives the import.
        unsafe { ForeignArray::from_interface(d.as_any(), None, false) }.unwrap()
    }

    /// A layout within a buffer: shape, byte strides (any sign, whole items, gaps), and the
    /// first item's offset so that every item is inside.
    fn strided() -> impl Strategy<Value = (Vec<usize>, Vec<isize>)> {
        prop::collection::vec(0usize..5, 0..5).prop_flat_map(|shape| {
            let n = shape.len();
            (Just(shape), prop::collection::vec(-40isize..40, n))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn as_array_reads_what_the_descriptor_describes((shape, item_strides) in strided()) {
            let strides: Vec<isize> = item_strides.iter().map(|s| s * 8).collect();
            // The buffer: the items from the lowest to the highest reach, each holding its
            // own position.
            let (mut lo, mut hi) = (0isize, 0isize);
            if !shape.contains(&0) {
                for (&d, &s) in shape.iter().zip(&item_strides) {
                    lo += (d as isize - 1).max(0) * s.min(0);
                    hi += (d as isize - 1).max(0) * s.max(0);
                }
            }
            let buf: Vec<f64> = (0..=(hi - lo)).map(|i| i as f64).collect();
            let ptr = buf.as_ptr().wrapping_offset(-lo) as usize;
            Python::initialize();
            Python::attach(|py| -> Result<(), TestCaseError> {
                let a = import(py, ptr, "<f8", &shape, Some(&strides), false);
                let view = a.as_array::<f64, IxDyn>().unwrap();
                prop_assert_eq!(view.shape(), &shape[..]);
                let expected: Vec<f64> = a.typed::<f64>().unwrap().iter().collect();
                prop_assert_eq!(view.iter().copied().collect::<Vec<_>>(), expected);
                for (index, item) in view.indexed_iter() {
                    let addr = a.typed::<f64>().unwrap().address_of(index.slice());
                    prop_assert_eq!(Some(item as *const f64 as u64), addr);
                }
                if shape.len() == 2 {
                    let fixed = a.as_array::<f64, Ix2>().unwrap();
                    prop_assert_eq!(fixed.into_dyn(), view);
                }
                Ok(())
            })?;
        }
    }

    #[test]
    fn too_big_empty_shapes_are_refused_at_import() {
        // NumPy refuses `np.empty((0, 2**62, 4))`; an ndarray view of it would break
        // ndarray's rule (the non-zero dimensions' product fits isize).
        Python::initialize();
        Python::attach(|py| {
            let d = PyDict::new(py);
            d.set_item("shape", (0usize, 1usize << 62, 4usize)).unwrap();
            d.set_item("typestr", "<f8").unwrap();
            d.set_item("data", (0usize, false)).unwrap();
            d.set_item("version", 3).unwrap();
            // SAFETY: an empty array at address 0: nothing to read.
            let err = unsafe { ForeignArray::<Host>::from_interface(d.as_any(), None, false) }
                .unwrap_err();
            assert!(err.to_string().contains("4611686018427387904"), "{err}");
        });
    }

    #[test]
    fn refusals_are_typed_errors() {
        let mut buf = vec![0f64; 16];
        let ptr = buf.as_mut_ptr() as usize;
        Python::initialize();
        Python::attach(|py| {
            let a = import(py, ptr, "<f8", &[4], None, false);
            assert!(matches!(
                a.as_array::<f32, Ix1>(),
                Err(ViewError::Dtype { .. })
            ));
            assert!(matches!(
                a.as_array::<f64, Ix2>(),
                Err(ViewError::Dimensionality {
                    expected: 2,
                    found: 1
                })
            ));
            // Misaligned: a pointer one byte in, and strides of half an item.
            let m = import(py, ptr + 1, "<f8", &[2], None, false);
            assert!(matches!(
                m.as_array::<f64, Ix1>(),
                Err(ViewError::Misaligned { .. })
            ));
            assert_eq!(m.typed::<f64>().unwrap().iter().count(), 2); // typed() reads them
            let half = import(py, ptr, "<f8", &[3], Some(&[12]), false);
            assert!(matches!(
                half.as_array::<f64, Ix1>(),
                Err(ViewError::Misaligned { .. })
            ));
            // A length-1 axis's stride is never used: whatever it is.
            let one = import(py, ptr, "<f8", &[1, 4], Some(&[12, 8]), false);
            assert_eq!(one.as_array::<f64, Ix2>().unwrap().shape(), &[1, 4]);
            // Read-only data and broadcast items: no mutable view, a shared one is fine.
            let mut ro = import(py, ptr, "<f8", &[4], None, true);
            assert!(matches!(
                ro.as_array_mut::<f64, Ix1>(),
                Err(ViewError::ReadOnly)
            ));
            let mut b = import(py, ptr, "<f8", &[3, 2], Some(&[0, 8]), false);
            assert!(matches!(
                b.as_array_mut::<f64, Ix2>(),
                Err(ViewError::Overlapping { .. })
            ));
            assert_eq!(b.as_array::<f64, Ix2>().unwrap().sum(), 0.0);
        });
    }

    #[test]
    fn typed_views_give_slices_of_contiguous_items() {
        let mut buf: Vec<f64> = (0..6).map(f64::from).collect();
        let ptr = buf.as_mut_ptr() as usize;
        Python::initialize();
        Python::attach(|py| {
            let a = import(py, ptr, "<f8", &[2, 3], None, false);
            assert_eq!(
                a.typed::<f64>().unwrap().as_slice().unwrap(),
                &[0., 1., 2., 3., 4., 5.]
            );
            let f = import(py, ptr, "<f8", &[2, 3], Some(&[8, 16]), false);
            let err = f.typed::<f64>().unwrap().as_slice().unwrap_err();
            assert!(matches!(err, ViewError::NotContiguous { .. }), "{err}");
            let m = import(py, ptr + 4, "<f8", &[1], None, false);
            assert!(matches!(
                m.typed::<f64>().unwrap().as_slice(),
                Err(ViewError::Misaligned { .. })
            ));
            let empty = import(py, 0, "<f8", &[0, 3], None, false);
            assert!(empty.typed::<f64>().unwrap().as_slice().unwrap().is_empty());
            // A slice of `a` lasts as its import does: no other import may then write.
            let mut w = import(py, ptr + 8, "<f8", &[1], None, false);
            assert!(matches!(
                w.typed_mut::<f64>(),
                Err(ViewError::Claimed { .. })
            ));
            drop(a);
            let mut t = w.typed_mut::<f64>().unwrap();
            t.as_slice_mut().unwrap()[0] = 10.0;
        });
        assert_eq!(buf[1], 10.0);
    }

    #[test]
    fn two_imports_of_one_memory_never_alias_a_mutable_view() {
        let mut buf: Vec<f64> = (0..8).map(f64::from).collect();
        let ptr = buf.as_mut_ptr() as usize;
        Python::initialize();
        Python::attach(|py| {
            let mut writer = import(py, ptr, "<f8", &[8], None, false);
            let reader = import(py, ptr + 32, "<f8", &[4], None, false); // the last four
            // Readers share, a writer is alone (imports may be used on two threads).
            {
                let typed = reader.typed::<f64>().unwrap();
                assert!(matches!(
                    writer.typed_mut::<f64>(),
                    Err(ViewError::Claimed { .. })
                ));
                let _other_reader = writer.typed::<f64>().unwrap();
                drop(typed);
            }
            // A typed read claims the bytes only while the typed view lives.
            assert_eq!(reader.typed::<f64>().unwrap().get(&[0]), Some(4.0));
            let mut w = writer.as_array_mut::<f64, Ix1>().unwrap();
            w[7] = 70.0;
            // While `writer` lives, `reader` can neither view nor read the bytes.
            let err = reader.as_array::<f64, Ix1>().unwrap_err();
            assert!(matches!(err, ViewError::Claimed { .. }), "{err}");
            assert!(err.to_string().contains("as_array_mut"), "{err}");
            assert!(matches!(
                reader.typed::<f64>(),
                Err(ViewError::Claimed { .. })
            ));
            assert!(matches!(reader.to_bytes(), Err(ViewError::Claimed { .. })));
            // Disjoint bytes are free.
            let first = import(py, ptr, "<f8", &[0], None, false);
            assert_eq!(first.as_array::<f64, Ix1>().unwrap().len(), 0);
            drop(writer);
            assert_eq!(reader.as_array::<f64, Ix1>().unwrap()[3], 70.0);
            // A shared view excludes raw writes and mutable views elsewhere, not reads.
            let mut other = import(py, ptr, "<f8", &[8], None, false);
            assert!(matches!(
                other.typed_mut::<f64>(),
                Err(ViewError::Claimed { .. })
            ));
            assert!(matches!(
                other.as_array_mut::<f64, Ix1>(),
                Err(ViewError::Claimed { .. })
            ));
            assert_eq!(other.typed::<f64>().unwrap().get(&[7]), Some(70.0));
            // Within one import, Rust's borrows order its views.
            let mut one = import(py, ptr + 8, "<f8", &[1], None, false);
            drop(reader);
            drop(other);
            one.as_array_mut::<f64, Ix1>().unwrap()[0] = 10.0;
            assert_eq!(one.as_array::<f64, Ix1>().unwrap()[0], 10.0);
            assert!(one.typed_mut::<f64>().unwrap().set(&[0], 11.0));
        });
        assert_eq!(buf[1], 11.0);
    }
}
