//! Fuzzes the shared-memory open path: the input is the whole content of a segment (header,
//! dims, data) as a hostile peer might leave it, checked exactly as `shm::open` checks a mapped
//! segment. Every input must give a typed error or a tensor whose every byte lies inside the
//! segment; every byte it reaches is read.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok((shape, reach)) = dlbridge::shm::check_segment_bytes(data) {
        assert!(reach.start <= reach.end && reach.end <= data.len());
        let sum: u64 = data[reach].iter().map(|&b| u64::from(b)).sum();
        std::hint::black_box((shape, sum));
    }
});
