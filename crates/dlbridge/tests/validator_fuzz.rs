//! Fuzz-style test: random field values in a `DLManagedTensorVersioned` must give either a typed
//! error or a tensor whose accessors are all well-defined — never a panic — and the deleter runs
//! exactly once either way. Pointers are always valid for `ndim` entries (the producer's side of
//! the contract); every other field is arbitrary.

mod common;

use common::{count, versioned, Fields};
use dlbridge::ffi::*;
use dlbridge::{AsTensorView, ManagedTensor, Order};
use proptest::prelude::*;

fn any_dim() -> impl Strategy<Value = i64> {
    prop_oneof![4 => -2i64..6, 1 => any::<i64>(), 1 => Just(i64::MAX), 1 => Just(1i64 << 32)]
}

fn fields() -> impl Strategy<Value = Fields> {
    (
        (any::<u32>(), 0u32..5, any::<u64>()),
        prop_oneof![8 => 0i32..8, 1 => any::<i32>(), 1 => 1020i32..1030],
        prop::collection::vec(any_dim(), 0..8),
        prop::option::of(prop::collection::vec(any_dim(), 0..8)),
        (
            prop_oneof![3 => 0u8..20, 1 => any::<u8>()],
            any::<u8>(),
            prop_oneof![3 => 0u16..3, 1 => any::<u16>()],
        ),
        (prop_oneof![3 => 0i32..20, 1 => any::<i32>()], any::<i32>()),
        prop_oneof![3 => 0u64..64, 1 => any::<u64>()],
        (any::<bool>(), any::<bool>(), 0usize..64),
    )
        .prop_map(
            |(v, ndim, shape, strides, dt, dev, byte_offset, (null_data, null_shape, data_len))| {
                let n = ndim.clamp(0, 1024) as usize;
                let pad = |mut v: Vec<i64>| {
                    v.resize(n.max(v.len()), 1);
                    v
                };
                Fields {
                    version: DLPackVersion {
                        major: if v.0 % 4 == 0 { v.0 } else { 1 },
                        minor: v.1,
                    },
                    flags: v.2,
                    ndim,
                    shape: pad(shape),
                    strides: strides.map(pad),
                    dtype: DLDataType {
                        code: dt.0,
                        bits: dt.1,
                        lanes: dt.2,
                    },
                    device: DLDevice {
                        device_type: dev.0,
                        device_id: dev.1,
                    },
                    byte_offset,
                    data_len,
                    null_data,
                    null_shape,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_fields_never_panic_and_always_delete_once(f in fields()) {
        let (ptr, deletions) = versioned(&f);
        // SAFETY: the fake owns valid shape/strides arrays of at least `ndim` entries.
        let result = unsafe { ManagedTensor::from_versioned(ptr) };
        if let Ok(t) = &result {
            let v = t.view();
            prop_assert_eq!(f.version.major, 1);
            prop_assert!(v.ndim() <= dlbridge::MAX_NDIM);
            prop_assert!(v.shape().iter().all(|&d| d >= 0));
            let _ = (v.size(), v.nbytes(), v.byte_span(), v.compact_order(), v.is_contiguous(Order::F));
            prop_assert_eq!(v.strides().len(), v.ndim());
        }
        drop(result);
        prop_assert_eq!(count(&deletions), 1);
    }
}
