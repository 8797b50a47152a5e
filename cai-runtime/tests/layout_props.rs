//! Property tests of the layout arithmetic and the export builder: no input panics, overflow is
//! always an error, and what is accepted is consistent.

use cai_runtime::{
    DescriptorBuilder, DescriptorError, Device, Element, Layout, LayoutError, Order,
    RawDeviceMemory, TypeStr,
};
use proptest::prelude::*;

fn small_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..6, 0..5)
}

/// Small dimension sizes, with more dimensions than a layout keeps inline.
fn many_dims_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..5, 0..9)
}

/// Any dimension sizes, including ones whose product overflows.
fn wild_shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![
            0usize..4,
            any::<usize>(),
            Just(usize::MAX),
            Just(1usize << 62)
        ],
        0..5,
    )
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::C), Just(Order::F)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn contiguous_layouts_are_contiguous(shape in many_dims_shape(), itemsize in 1usize..17, order in order()) {
        let l = Layout::contiguous(&shape, itemsize, order).unwrap();
        prop_assert_eq!(l.shape(), &shape[..]);
        prop_assert_eq!(l.size(), shape.iter().product::<usize>());
        // NumPy's strides: the item size times the dimensions after (C) or before (F) the
        // axis; all zero when the array has no items.
        let expected: Vec<isize> = (0..shape.len())
            .map(|i| {
                let rest = match order {
                    Order::C => &shape[i + 1..],
                    Order::F => &shape[..i],
                };
                if shape.contains(&0) { 0 } else { (itemsize * rest.iter().product::<usize>()) as isize }
            })
            .collect();
        prop_assert_eq!(l.strides(), &expected[..]);
        match order {
            Order::C => prop_assert!(l.is_c_contiguous()),
            Order::F => prop_assert!(l.is_f_contiguous()),
        }
        // F order of a shape is the transpose of C order of the reversed shape.
        let rev: Vec<usize> = shape.iter().rev().copied().collect();
        if order == Order::F {
            prop_assert_eq!(l.transposed(), Layout::c_contiguous(&rev, itemsize).unwrap());
        }
        match l.extent() {
            None => prop_assert!(l.is_empty()),
            Some(e) => prop_assert_eq!((e.lo, e.hi), (0, (l.size() * itemsize) as isize)),
        }
        prop_assert!(l.fits_in(0, l.nbytes()));
        prop_assert_eq!(l.exported_strides().is_none(), l.is_c_contiguous());
    }

    #[test]
    fn item_offsets_visit_every_item_in_c_order(
        shape in small_shape(),
        strides in prop::collection::vec(-40isize..40, 5),
        itemsize in 1usize..9,
    ) {
        let strides = &strides[..shape.len()];
        let Ok(l) = Layout::strided(&shape, strides, itemsize) else { return Ok(()) };
        let offsets: Vec<isize> = l.item_offsets().collect();
        prop_assert_eq!(offsets.len(), if l.is_empty() { 0 } else { l.size() });
        // The naive computation, index by index in C order.
        let mut expected = Vec::new();
        if !l.is_empty() {
            for k in 0..l.size() {
                let (mut rest, mut off) = (k, 0isize);
                for axis in (0..shape.len()).rev() {
                    off += (rest % shape[axis]) as isize * strides[axis];
                    rest /= shape[axis];
                }
                expected.push(off);
            }
        }
        prop_assert_eq!(&offsets, &expected);
        if let Some(e) = l.extent() {
            prop_assert!(offsets.iter().all(|&o| e.lo <= o && o + itemsize as isize <= e.hi));
        }
    }

    #[test]
    fn overflow_is_an_error_never_a_wrap(shape in wild_shape(), itemsize in prop_oneof![1usize..17, any::<usize>()], order in order()) {
        let max = isize::MAX as u128;
        // NumPy's rule: every dimension, and the product of the non-zero ones times the item
        // size, fit `npy_intp`, even where another dimension is 0.
        let nonzero = shape.iter().filter(|&&d| d != 0).try_fold(1u128, |a, &d| a.checked_mul(d as u128));
        let bytes = nonzero.and_then(|c| c.checked_mul(itemsize as u128));
        let exact = bytes.map(|n| if shape.contains(&0) { 0 } else { n });
        let dims_fit = shape.iter().all(|&d| d as u128 <= max);
        let fits = dims_fit && itemsize as u128 <= max && nonzero.is_some_and(|c| c <= max) && bytes.is_some_and(|n| n <= max);
        match Layout::contiguous(&shape, itemsize, order) {
            Ok(l) => {
                prop_assert!(fits);
                prop_assert_eq!(l.nbytes() as u128, exact.unwrap());
            }
            Err(LayoutError::ShapeOverflow { shape: s, itemsize: i }) => {
                prop_assert!(!fits);
                prop_assert_eq!((s, i), (shape, itemsize));
            }
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }

    #[test]
    fn arbitrary_strides_never_panic(
        shape in wild_shape(),
        strides in prop::collection::vec(any::<isize>(), 0..5),
        itemsize in 0usize..33,
    ) {
        if let Ok(l) = Layout::strided(&shape, &strides, itemsize) {
            prop_assert_eq!(shape.len(), strides.len());
            if let Some(e) = l.extent() {
                prop_assert!(e.lo <= 0 && e.hi >= itemsize as isize && e.lo < e.hi || itemsize == 0);
            }
            let _ = (l.is_c_contiguous(), l.is_f_contiguous(), l.exported_strides());
        }
    }

    #[test]
    fn strided_layouts_are_refused_exactly_where_they_overflow(
        shape in wild_shape(),
        strides in prop::collection::vec(prop_oneof![any::<isize>(), -9isize..9], 0..5),
        itemsize in prop_oneof![0usize..33, any::<usize>()],
    ) {
        let n = shape.len().min(strides.len());
        let (shape, strides) = (&shape[..n], &strides[..n]);
        // By definition: the items' bytes fit `isize`, then the bytes an array with items
        // spans, below and above its pointer, do.
        let extent = || {
            let (mut lo, mut hi) = (0isize, 0isize);
            for (&d, &s) in shape.iter().zip(strides) {
                let span = isize::try_from(d - 1).ok()?.checked_mul(s)?;
                lo = lo.checked_add(span.min(0))?;
                hi = hi.checked_add(span.max(0))?;
            }
            hi.checked_add(isize::try_from(itemsize).ok()?)?.checked_sub(lo)
        };
        let max = isize::MAX as usize;
        let bytes = shape
            .iter()
            .filter(|&&d| d != 0)
            .try_fold(1usize, |n, &d| n.checked_mul(d).filter(|&n| n <= max))
            .and_then(|n| n.checked_mul(itemsize))
            .filter(|&n| n <= max && itemsize <= max && shape.iter().all(|&d| d <= max));
        let expected = if bytes.is_none() {
            "shape"
        } else if !shape.contains(&0) && extent().is_none() {
            "extent"
        } else {
            "ok"
        };
        let got = match Layout::strided(shape, strides, itemsize) {
            Ok(_) => "ok",
            Err(LayoutError::ShapeOverflow { .. }) => "shape",
            Err(LayoutError::ExtentOverflow { .. }) => "extent",
            Err(e) => return Err(TestCaseError::fail(format!("unexpected {e}"))),
        };
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn views_stay_inside_their_base(
        shape in prop::collection::vec(1usize..7, 1..4),
        itemsize in 1usize..9,
        order in order(),
        ops in prop::collection::vec((0usize..4, prop::option::of(-9isize..9), prop::option::of(-9isize..9), prop_oneof![-4isize..0, 1isize..5]), 0..4),
    ) {
        let base = Layout::contiguous(&shape, itemsize, order).unwrap();
        let mut view = base.clone();
        let mut offset = 0isize;
        for (axis, start, stop, step) in ops {
            if view.ndim() == 0 { break; }
            let (v, off) = view.slice(axis % view.ndim(), start, stop, step).unwrap();
            view = v;
            offset += off;
        }
        prop_assert!(view.fits_in(offset, base.nbytes()));
    }

    #[test]
    fn builder_never_panics_and_accepts_only_what_fits(
        len in 0usize..64,
        shape in prop::option::of(wild_shape()),
        strides in prop::option::of(prop::collection::vec(-64isize..64, 0..5)),
        version in 0u32..5,
        f_order in any::<bool>(),
    ) {
        // SAFETY: never dereferenced; only descriptors are computed.
        let mem = unsafe { RawDeviceMemory::<f32>::from_raw_parts(0x1000, len) };
        let result = DescriptorBuilder::<Device>::device(&mem)
            .shape(shape.clone().unwrap_or_else(|| vec![len]))
            .strides(strides)
            .order(if f_order { Order::F } else { Order::C })
            .version(version)
            .build_with_layout();
        match result {
            Ok((d, layout)) => {
                // The layout handed out is the one the descriptor reads back as.
                let read_back = d.layout();
                prop_assert_eq!(read_back.as_ref(), Ok(&layout));
                prop_assert!(d.validate().is_ok());
                d.check_within(0x1000, len * 4).unwrap();
                prop_assert!(d.layout().unwrap().is_empty() == (d.data.ptr == 0));
            }
            Err(e) => {
                // Every error names a key of the descriptor.
                prop_assert!(["shape", "strides", "version", "data"].contains(&e.key()), "{e}");
                prop_assert!(!e.to_string().is_empty());
                if let DescriptorError::Version { version: v, .. } = e { prop_assert!(v > 3); }
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "TypeStr is safe code, and Miri took 50 s generating the regex's strings"
    )]
    fn typestr_parse_never_panics_and_round_trips(s in "[<>|=x]?[biufcmMOSUVtq]?[0-9]{0,22}(\\[[0-9]{0,3}[a-zμ]{0,3}\\]?)?") {
        if let Ok(t) = TypeStr::parse(&s) {
            let again = TypeStr::parse(&t.to_string()).unwrap();
            if t.extended_type().is_some() {
                // ml_dtypes' spelling of float8_e5m2 (`<f1`): the type, written as its bytes,
                // which read back as bytes.
                prop_assert_eq!(again, TypeStr::void(t.itemsize()));
            } else {
                prop_assert!(again.same_type(&t));
                prop_assert_eq!(again.canonical(), t.canonical());
            }
        }
    }
}

#[test]
fn element_itemsizes_match_size_of() {
    fn check<T: Element>() {
        assert_eq!(T::DTYPE.itemsize(), size_of::<T>());
    }
    check::<bool>();
    check::<i8>();
    check::<u16>();
    check::<i32>();
    check::<u64>();
    check::<isize>();
    check::<f32>();
    check::<f64>();
}

/// A C-contiguous array of `shape` sliced with a step (possibly negative) and start on each
/// axis, then permuted: the views a mirror copy must copy exactly.
fn sliced_view() -> impl Strategy<Value = Layout> {
    (prop::collection::vec(1usize..6, 0..4), 1usize..9).prop_flat_map(|(shape, itemsize)| {
        let n = shape.len();
        (
            Just(shape.clone()),
            Just(itemsize),
            prop::collection::vec((0isize..3, prop_oneof![-3isize..0, 1isize..4]), n),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
        )
            .prop_map(|(shape, itemsize, steps, axes)| {
                let mut l = Layout::c_contiguous(&shape, itemsize).unwrap();
                for (axis, &(start, step)) in steps.iter().enumerate() {
                    // (The offset to the new first item does not change the runs' shape.)
                    l = l.slice(axis, Some(start), None, step).unwrap().0;
                }
                l.permute(&axes).unwrap()
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// `Layout::runs` covers each item's bytes exactly once and no byte between items.
    #[test]
    fn runs_cover_exactly_the_items(l in sliced_view()) {
        let item_bytes = |offsets: &mut dyn Iterator<Item = (isize, usize)>| {
            let mut bytes: Vec<isize> = offsets.flat_map(|(o, n)| o..o + n as isize).collect();
            bytes.sort_unstable();
            bytes
        };
        let itemsize = l.itemsize();
        let expected = item_bytes(&mut l.item_offsets().map(|o| (o, itemsize)));
        let runs: Vec<(isize, usize)> = l.runs().collect();
        let got = item_bytes(&mut runs.iter().copied());
        // Sorted byte lists equal: the same bytes, none twice (a view's items never overlap).
        prop_assert_eq!(&got, &expected);
        // Runs are maximal within a row: a contiguous array (in any order) is one run.
        if l.nbytes() > 0 && l.extent().unwrap().len() == l.nbytes() {
            prop_assert_eq!(runs.len(), 1);
        }
    }
}

/// A broadcast dimension (stride 0) repeats the same bytes: they are one run, not one per
/// item (a mirror copy of a broadcast view made one driver call per item).
#[test]
fn broadcast_dimensions_are_run_once() {
    let runs = |shape: &[usize], strides: &[isize]| {
        Layout::strided(shape, strides, 8)
            .unwrap()
            .runs()
            .collect::<Vec<_>>()
    };
    assert_eq!(runs(&[100_000], &[0]), [(0, 8)]);
    assert_eq!(runs(&[3, 4], &[0, 8]), [(0, 32)]);
    assert_eq!(runs(&[3, 4], &[8, 0]), [(0, 24)]);
    assert_eq!(
        runs(&[2, 5, 3], &[-48, 0, 16]),
        [(-48, 8), (-32, 8), (-16, 8), (0, 8), (16, 8), (32, 8)]
    );
}
