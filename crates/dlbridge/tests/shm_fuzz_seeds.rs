//! The committed seed corpus of the `shm_open` fuzz target (fuzz/seeds/shm_open): real segments
//! of several dtypes and layouts that the open checks accept, each reaching only bytes inside
//! its segment, and mutations of them that the checks refuse with typed errors.
#![cfg(target_os = "linux")]

use std::path::Path;

use dlbridge::shm::check_segment_bytes;
use dlbridge::Error;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/shm_open");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn every_seed_is_a_valid_segment_reaching_only_its_own_bytes() {
    let seeds = seeds();
    assert!(seeds.len() >= 7);
    for (name, bytes) in seeds {
        let (shape, reach) = check_segment_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            reach.end <= bytes.len() && reach.start >= 4096,
            "{name}: {reach:?}"
        );
        assert!(shape.iter().all(|&d| d >= 0), "{name}");
    }
}

#[test]
fn mutated_seeds_fail_with_typed_errors() {
    let (_, good) = seeds().into_iter().find(|(n, _)| n == "f32_2x3").unwrap();
    let with = |at: usize, value: &[u8]| {
        let mut b = good.clone();
        b[at..at + value.len()].copy_from_slice(value);
        check_segment_bytes(&b).unwrap_err()
    };
    assert_eq!(
        with(12, &5000u32.to_ne_bytes()),
        Error::NdimOutOfRange(5000)
    );
    assert!(matches!(
        with(56, &(1u64 << 40).to_ne_bytes()),
        Error::ShmInvalid { .. }
    ));
    assert!(matches!(
        with(96, &(1i64 << 30).to_ne_bytes()),
        Error::ShmInvalid { .. }
    ));
    assert!(matches!(
        check_segment_bytes(&good[..100]),
        Err(Error::ShmInvalid { .. })
    ));
}

#[test]
fn packed_sub_byte_dtypes_are_refused_at_open_as_at_creation() {
    let (_, good) = seeds().into_iter().find(|(n, _)| n == "f32_2x3").unwrap();
    for (bits, lanes) in [(4u8, 1u16), (4, 3), (1, 1)] {
        let mut b = good.clone();
        // The header's dtype: code 0 (int), bits, lanes.
        b[32] = 0;
        b[33] = bits;
        b[34..36].copy_from_slice(&lanes.to_ne_bytes());
        match check_segment_bytes(&b) {
            Err(Error::ShmInvalid { reason, .. }) => {
                assert!(reason.contains("packed"), "int{bits}x{lanes}: {reason}")
            }
            other => panic!("int{bits}x{lanes}: {other:?}"),
        }
    }
}
