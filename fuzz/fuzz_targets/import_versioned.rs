//! Fuzzes the import of `DLManagedTensorVersioned` (see `dlbridge_fuzz::importer`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dlbridge_fuzz::importer::check_versioned(data);
});
