//! Property tests of GDP-3 storage allocation: for any item size, 1 to 4 dimensions, layout,
//! alignment, aligned index and buffer address, the storage lies inside its buffer, the item at
//! `aligned_index` is aligned, and every item (the corners included) is addressable.

use cai_gt::AllocationPlan;
use proptest::prelude::*;

fn case() -> impl Strategy<Value = (Vec<usize>, usize, Vec<usize>, usize, Vec<usize>, usize)> {
    (
        1usize..=4,
        prop_oneof![Just(1usize), Just(2), Just(4), Just(8), Just(16)],
    )
        .prop_flat_map(|(ndim, itemsize)| {
            let shape = prop::collection::vec(0usize..9, ndim);
            let layout = Just((0..ndim).collect::<Vec<_>>()).prop_shuffle();
            // Alignments that are multiples of the item size, or divisors of it.
            let alignment = prop_oneof![(0u32..5).prop_map(move |k| itemsize << k), Just(1usize)];
            let base = 0usize..4096;
            (shape, Just(itemsize), layout, alignment, base)
        })
        .prop_flat_map(|(shape, itemsize, layout, alignment, base)| {
            let index: Vec<_> = shape.iter().map(|&s| 0..=s).collect();
            (
                Just(shape),
                Just(itemsize),
                Just(layout),
                Just(alignment),
                index,
                Just(base),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn storages_fit_and_the_aligned_item_is_aligned(
        (shape, itemsize, layout, alignment, aligned_index, base) in case()
    ) {
        let plan = AllocationPlan::new(&shape, itemsize, &layout, alignment, &aligned_index).unwrap();
        let l = plan.layout();
        let offset = plan.byte_offset(base);
        prop_assert!(offset < alignment.max(1));
        // Inside the buffer.
        if let Some(e) = l.extent() {
            prop_assert!(e.lo >= 0);
            prop_assert!(offset + e.hi as usize <= plan.buffer_bytes());
        }
        prop_assert!(l.fits_in(offset as isize, plan.buffer_bytes()));
        // The aligned item's address is a multiple of the alignment (also when the index is
        // one past the end of a dimension: the address it would have).
        let at: isize = aligned_index.iter().zip(plan.strides()).map(|(&i, &s)| i as isize * s).sum();
        prop_assert_eq!((base + offset + at as usize) % alignment, 0);
        // Strides follow the layout: larger layout entry, smaller stride (when no dimension
        // is empty: a zero-size dimension makes the strides outside it 0).
        for a in (0..shape.len()).filter(|_| !shape.contains(&0)) {
            for b in 0..shape.len() {
                if layout[a] < layout[b] {
                    prop_assert!(plan.strides()[a] >= plan.strides()[b]);
                }
            }
        }
        // Every item, corners included, is addressable and distinct items do not overlap.
        let mut offsets: Vec<isize> = l.item_offsets().collect();
        let n = offsets.len();
        offsets.sort_unstable();
        offsets.dedup();
        prop_assert_eq!(offsets.len(), n);
        if let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) {
            prop_assert!(first >= 0 && offset + last as usize + itemsize <= plan.buffer_bytes());
        }
    }

    #[test]
    fn only_the_contiguous_dimension_is_padded(
        (shape, itemsize, layout, alignment, aligned_index, _base) in case()
    ) {
        let plan = AllocationPlan::new(&shape, itemsize, &layout, alignment, &aligned_index).unwrap();
        let contiguous = (0..shape.len()).max_by_key(|&d| layout[d]).unwrap();
        for (d, &size) in shape.iter().enumerate() {
            let padded = plan.padded_shape()[d];
            if d == contiguous {
                let block = (alignment / itemsize).max(1);
                prop_assert_eq!(padded % block, 0);
                prop_assert!(padded < size + block);
                prop_assert_eq!(plan.strides()[d], itemsize as isize);
            } else {
                prop_assert_eq!(padded, size);
            }
        }
    }
}

mod allocated {
    //! The same properties on real host storages: allocated, aligned at their actual
    //! address, corners written through item offsets, out-of-range indices refused.

    use cai_gt::{ElementType, IndexItem, Init, Selected, Storage, StorageParams};
    use cai_runtime::TypeStr;
    use proptest::prelude::*;

    fn case() -> impl Strategy<Value = (Vec<usize>, &'static str, Vec<usize>, usize, Vec<usize>)> {
        (
            1usize..=4,
            prop::sample::select(vec!["<f8", "<f4", "<i2", "|u1", "<c16"]),
        )
            .prop_flat_map(|(ndim, dtype)| {
                let shape = prop::collection::vec(1usize..7, ndim);
                let layout = Just((0..ndim).collect::<Vec<_>>()).prop_shuffle();
                let alignment = prop::sample::select(vec![1usize, 16, 32, 64, 128]);
                (shape, Just(dtype), layout, alignment)
            })
            .prop_flat_map(|(shape, dtype, layout, alignment)| {
                let index: Vec<_> = shape.iter().map(|&s| 0..s).collect();
                (
                    Just(shape),
                    Just(dtype),
                    Just(layout),
                    Just(alignment),
                    index,
                )
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn storages_are_aligned_and_corners_writable(
            (shape, dtype, layout, alignment, aligned_index) in case()
        ) {
            let typestr = TypeStr::parse(dtype).unwrap();
            let itemsize = typestr.itemsize();
            let alignment = if alignment.is_multiple_of(itemsize) || itemsize.is_multiple_of(alignment) { alignment } else { itemsize };
            let element = ElementType::new(typestr, None).unwrap();
            let params = StorageParams {
                layout: Some(layout.into()),
                alignment_size: Some(alignment),
                aligned_index: Some(aligned_index.as_slice().into()),
                ..Default::default()
            }
            .resolve(&shape, itemsize, &StorageParams::default())
            .unwrap();
            let s = Storage::allocate(&shape, element, &params, Init::Zeros).unwrap();
            let b = s.buffers().host().unwrap();
            let (start, end) = (b.buffer().addr() as u64, b.buffer().addr() as u64 + b.buffer().len() as u64);
            let key: Vec<IndexItem> = aligned_index.iter().map(|&i| IndexItem::Int(i as isize)).collect();
            let Selected::Item(off) = s.select(&key).unwrap() else { panic!("an item") };
            prop_assert_eq!(s.item_host_ptr(off).unwrap() % alignment as u64, 0);
            // Every corner lies inside the buffer and can be written.
            for corner in 0..(1u32 << shape.len()) {
                let key: Vec<IndexItem> = shape
                    .iter()
                    .enumerate()
                    .map(|(d, &n)| IndexItem::Int(if corner >> d & 1 == 1 { n as isize - 1 } else { 0 }))
                    .collect();
                let Selected::Item(off) = s.select(&key).unwrap() else { panic!("an item") };
                let p = s.item_host_ptr(off).unwrap();
                prop_assert!(p >= start && p + itemsize as u64 <= end);
                // SAFETY: inside the storage's own live buffer (checked just above).
                unsafe { std::ptr::write_bytes(p as *mut u8, 0xAB, itemsize) };
            }
            // Out of range on any axis, either end, is refused.
            for (d, &n) in shape.iter().enumerate() {
                for bad in [n as isize, -(n as isize) - 1] {
                    let mut key = vec![IndexItem::Int(0); shape.len()];
                    key[d] = IndexItem::Int(bad);
                    prop_assert!(s.select(&key).unwrap_err().is_index_error());
                }
            }
            // The domain view and the host descriptor stay inside too.
            let d = s.host_descriptor().unwrap().unwrap();
            prop_assert_eq!(d.shape, shape);
        }
    }
}
