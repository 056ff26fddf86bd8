//! Property tests: random shapes, strides (negative and zero too) and offsets survive
//! export → import → copy with identical element values, and the producer is released once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dlbridge::{
    export, AsTensorView, DataType, Element, Flags, ManagedTensor, Order, Tensor, TensorView,
};
use proptest::prelude::*;

/// A random layout over a buffer: shape, strides, element offset and the buffer length needed.
#[derive(Debug, Clone)]
struct Layout {
    shape: Vec<i64>,
    strides: Vec<i64>,
    offset: usize,
    len: usize,
}

fn layouts() -> impl Strategy<Value = Layout> {
    prop::collection::vec((0i64..5, -7i64..8), 0..5).prop_map(|dims| {
        let shape: Vec<i64> = dims.iter().map(|d| d.0).collect();
        let strides: Vec<i64> = dims.iter().map(|d| d.1).collect();
        let (mut low, mut high) = (0i64, 0i64);
        if !shape.contains(&0) {
            for (&d, &s) in shape.iter().zip(&strides) {
                let reach = (d - 1) * s;
                if reach < 0 {
                    low += reach
                } else {
                    high += reach
                }
            }
        }
        Layout {
            shape,
            strides,
            offset: (-low) as usize,
            len: (high - low + 1) as usize,
        }
    })
}

/// Row-major multi-indices of `shape`.
fn indices(shape: &[i64]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &d in shape {
        out = out
            .into_iter()
            .flat_map(|prefix| (0..d as usize).map(move |i| [prefix.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

/// The expected logical elements: buffer[offset + sum(i * stride)].
fn expected<T: Copy>(buf: &[T], l: &Layout) -> Vec<T> {
    indices(&l.shape)
        .iter()
        .map(|idx| {
            let at = l.offset as i64
                + idx
                    .iter()
                    .zip(&l.strides)
                    .map(|(&i, &s)| i as i64 * s)
                    .sum::<i64>();
            buf[at as usize]
        })
        .collect()
}

/// An owner that counts its own drop, so tests can see the producer released exactly once.
struct Counted<T> {
    data: Vec<T>,
    drops: Arc<AtomicUsize>,
}

impl<T> AsMut<[T]> for Counted<T> {
    fn as_mut(&mut self) -> &mut [T] {
        &mut self.data
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn check_roundtrip<T: Element + PartialEq + std::fmt::Debug>(
    buf: Vec<T>,
    l: &Layout,
    legacy: bool,
    order: Order,
) {
    let want = expected(&buf, l);
    let drops = Arc::new(AtomicUsize::new(0));
    let owner = Counted {
        data: buf,
        drops: drops.clone(),
    };
    let t = Tensor::from_elements(owner, &l.shape, Some(&l.strides), l.offset).unwrap();
    let ptr0 = t.data_ptr();
    let imported = if legacy {
        let p = export::to_legacy(t, false).unwrap();
        // SAFETY: fresh export handed over to the importer.
        unsafe { ManagedTensor::from_legacy(p.as_ptr(), Flags::empty()) }.unwrap()
    } else {
        let p = export::to_versioned(t, Flags::empty());
        // SAFETY: as above.
        unsafe { ManagedTensor::from_versioned(p.as_ptr()) }.unwrap()
    };
    let v: TensorView<'_> = imported.view();
    assert_eq!(v.shape(), &l.shape[..]);
    if v.size() > 0 {
        assert_eq!(v.data_ptr(), ptr0, "zero-copy: same element 0");
        assert_eq!(v.strides(), &l.strides[..]);
    }
    let copy = v.to_contiguous(order).unwrap();
    assert!(copy.flags().contains(Flags::IS_COPIED));
    assert!(copy.view().is_contiguous(order));
    let got: Vec<T> = indices(&l.shape)
        .iter()
        .map(|idx| copy.view().read_at::<T>(idx).unwrap())
        .collect();
    assert_eq!(got, want);
    assert_eq!(v.to_vec::<T>().unwrap(), want);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(imported);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "producer released exactly once"
    );
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::C), Just(Order::F)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn u8_layouts_round_trip(l in layouts(), legacy: bool, o in order()) {
        check_roundtrip((0..l.len).map(|i| i as u8).collect::<Vec<u8>>(), &l, legacy, o);
    }

    #[test]
    fn f32_layouts_round_trip(l in layouts(), legacy: bool, o in order()) {
        check_roundtrip((0..l.len).map(|i| i as f32 * 0.5).collect::<Vec<f32>>(), &l, legacy, o);
    }

    #[test]
    fn u16_layouts_round_trip(l in layouts(), legacy: bool, o in order()) {
        check_roundtrip((0..l.len).map(|i| i as u16).collect::<Vec<u16>>(), &l, legacy, o);
    }

    #[test]
    fn i64_layouts_round_trip(l in layouts(), legacy: bool, o in order()) {
        check_roundtrip((0..l.len).map(|i| -(i as i64)).collect::<Vec<i64>>(), &l, legacy, o);
    }

    #[test]
    fn complex128_layouts_round_trip(l in layouts(), legacy: bool, o in order()) {
        let buf = (0..l.len).map(|i| num_complex::Complex64::new(i as f64, -(i as f64))).collect::<Vec<_>>();
        check_roundtrip(buf, &l, legacy, o);
    }

    #[test]
    fn three_byte_vector_elements_copy_by_layout(l in layouts(), o in order()) {
        // uint8x3: a 3-byte element, copied by the generic path.
        let bytes: Vec<u8> = (0..l.len * 3).map(|i| (i * 7 % 251) as u8).collect();
        let elems: Vec<[u8; 3]> = bytes.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
        let want = expected(&elems, &l);
        let dtype = DataType::new(dlbridge::DataTypeCode::UInt, 8, 3).unwrap();
        let base = bytes.as_ptr() as *mut u8;
        // SAFETY: `bytes` outlives the tensor (dropped at the end of this block) and the layout
        // stays inside it by construction.
        let t = unsafe {
            Tensor::from_raw_parts(base.add(l.offset * 3), &l.shape, Some(&l.strides), dtype,
                dlbridge::Device::CPU, Flags::READ_ONLY, Box::new(()))
        }.unwrap();
        let copy = t.view().to_contiguous(o).unwrap();
        let out = copy.view();
        for (idx, w) in indices(&l.shape).iter().zip(&want) {
            let at: i64 = idx.iter().zip(out.strides()).map(|(&i, &s)| i as i64 * s).sum();
            // SAFETY: `idx` is in bounds of the compact copy.
            let got = unsafe { std::slice::from_raw_parts(out.data_ptr().add(at as usize * 3), 3) };
            prop_assert_eq!(got, &w[..]);
        }
        prop_assert!(!copy.view().is_read_only(), "a copy is ours to write");
        drop(t);
    }
}

/// A source layout and a destination layout over the same shape whose elements never alias:
/// a compact layout in a random axis order, each axis stepping forwards or backwards.
fn layout_pairs() -> impl Strategy<Value = (Layout, Layout)> {
    layouts()
        .prop_flat_map(|a| {
            let n = a.shape.len();
            (
                Just(a),
                Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                prop::collection::vec(any::<bool>(), n),
            )
        })
        .prop_map(|(a, perm, backwards)| {
            let mut strides = vec![0i64; a.shape.len()];
            let mut step = 1i64;
            for &axis in perm.iter().rev() {
                strides[axis] = if backwards[axis] { -step } else { step };
                step *= a.shape[axis].max(1);
            }
            let (mut low, mut high) = (0i64, 0i64);
            if !a.shape.contains(&0) {
                for (&d, &s) in a.shape.iter().zip(&strides) {
                    let reach = (d - 1) * s;
                    if reach < 0 {
                        low += reach
                    } else {
                        high += reach
                    }
                }
            }
            let b = Layout {
                shape: a.shape.clone(),
                strides,
                offset: (-low) as usize,
                len: (high - low + 1) as usize,
            };
            (a, b)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn copy_into_any_strided_destination(pair in layout_pairs()) {
        let (a, b) = pair;
        let src = Tensor::from_elements((0..a.len as u32).collect::<Vec<_>>(), &a.shape, Some(&a.strides), a.offset).unwrap();
        let dst = Tensor::from_elements(vec![u32::MAX; b.len], &b.shape, Some(&b.strides), b.offset).unwrap();
        dlbridge::copy::copy_into(&src.view(), &dst.view()).unwrap();
        let want = expected(&(0..a.len as u32).collect::<Vec<_>>(), &a);
        let got: Vec<u32> = indices(&a.shape).iter().map(|i| dst.view().read_at::<u32>(i).unwrap()).collect();
        prop_assert_eq!(got, want);
    }
}
