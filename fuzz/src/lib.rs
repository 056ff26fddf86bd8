//! Checks run by the fuzz targets. Each module depends only on `dlbridge` and `std`, so the
//! stable test suite replays the committed corpora through the very same code.

pub mod importer;
