//! The examples' package has no library code: its programs are its `[[example]]` targets
//! (`cargo run --release --example quickstart` from the repository's root). It is a package
//! of its own so that building an example builds only what the examples use, not the
//! library's test and bench dependencies (proptest, criterion).
