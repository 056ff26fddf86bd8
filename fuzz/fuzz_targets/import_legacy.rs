//! Fuzzes the import of legacy `DLManagedTensor` (see `dlbridge_fuzz::importer`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dlbridge_fuzz::importer::check_legacy(data);
});
