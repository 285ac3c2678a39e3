//! Measured plan choice: for a device the plan rules were not fitted to, time the candidate
//! plans of a matrix class and keep the fastest in a cache file, which every later device of
//! the same kind, driver and library version reads at open and applies at upload.
//!
//! - [`MatrixClass`]: what a tuned plan is filed under (format, shape, fill in 5 % buckets).
//! - [`tune_matrix`]: times the candidates ([`candidates::candidates`]) for one matrix on one
//!   device, every candidate's product checked against the f64 reference first, so a tuned
//!   plan never changes a result beyond the rounding every plan is allowed.
//! - [`PlanCacheFile`]: the file (JSON), in [`default_cache_path`] unless
//!   [`crate::DeviceOptions::plan_cache`] (or `MACKO_PLAN_CACHE`) says otherwise. A corrupt or
//!   foreign file is ignored with a warning on stderr, never trusted.
//! - `macko tune` fills it for the 31 paper shapes or a checkpoint's matrices.
//!
//! Products use a cached plan when the device opened with no forced tuning (neither
//! [`crate::DeviceOptions`]'s nor `MACKO_TUNING`) and the cache has the matrix's class; the
//! rules otherwise. Only single-vector MACKO products with binary16 values are tuned: the
//! other formats' plans, and the few-token plans, are the rules' own.
//!
//! ```no_run
//! use macko::{tune, Device, MackoMatrix};
//!
//! let dev = Device::auto()?;
//! let w = macko::synthetic::pruned_matrix(4096, 4096, 0.5, 1)?;
//! let m = MackoMatrix::from_dense(&w)?;
//! if let Some(outcome) = tune::tune_matrix(&dev, (&m).into(), &tune::TuneSettings::default(), &mut |_| {})? {
//!     let path = tune::default_cache_path().expect("a cache directory");
//!     let mut file = tune::PlanCacheFile::load(&path).unwrap_or_default();
//!     file.insert(&tune::DeviceKey::of(dev.info()), outcome.entry);
//!     file.save(&path)?;
//! }
//! # Ok::<(), macko::Error>(())
//! ```

mod cache;
pub mod candidates;
pub(crate) mod class;
pub(crate) mod loaded;
mod timing;

pub use cache::{CacheProblem, DeviceKey, PlanCacheFile, TunedEntry, MAX_FILE_BYTES};
pub use class::{bucket, MatrixClass, MatrixKindKey, FILL_STEP_PERCENT};
pub use loaded::PlanCacheStatus;
pub use timing::{tune_matrix, TuneOutcome, TuneProgress, TuneSettings};

pub use crate::options::default_cache_path;
