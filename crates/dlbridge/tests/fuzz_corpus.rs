//! Replays every committed fuzz corpus file (`fuzz/seeds/<target>/`) through the same checks the
//! cargo-fuzz targets run, so the stable suite keeps what fuzzing found without a nightly
//! toolchain.

#[path = "../../../fuzz/src/importer.rs"]
mod importer;

use std::collections::BTreeSet;
use std::path::PathBuf;

/// Runs `check` on each file of `target`'s committed corpus, which must reach every outcome
/// (rejected, accepted, and accepted with its memory read and compared).
fn replay(target: &str, check: fn(&[u8]) -> importer::Outcome) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    let mut outcomes = BTreeSet::new();
    for file in files {
        let bytes = std::fs::read(&file).expect("a readable corpus file");
        eprintln!("replaying {}", file.display());
        outcomes.insert(check(&bytes));
    }
    use importer::Outcome::*;
    assert_eq!(
        outcomes,
        BTreeSet::from([Rejected, Accepted, Read]),
        "in {}",
        dir.display()
    );
}

#[test]
fn versioned_import_corpus_replays_clean() {
    replay("import_versioned", importer::check_versioned);
}

#[test]
fn legacy_import_corpus_replays_clean() {
    replay("import_legacy", importer::check_legacy);
}
