//! One measured figure of `macko bench`, as written to results.csv / results.json and read by
//! the plots.

use serde::{Deserialize, Serialize};

/// One (backend, shape, density, kernel) measurement.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Backend name: "cuda", "wgpu", "cpu".
    pub backend: String,
    /// Device name as the backend reports it.
    pub device: String,
    /// Rows (output features).
    pub rows: usize,
    /// Columns (input features).
    pub cols: usize,
    /// Fraction of non-zeros of the matrix (exactly ⌊d·rows·cols⌋ of them).
    pub density: f64,
    /// Kernel: "macko", "csr", "dense" (ours), "cublas", "cusparse", or "stream" (the
    /// streaming-read ceiling over the bytes of the MACKO matrix).
    pub kernel: String,
    /// Bytes that must move: the stored matrix, x read once and y written once.
    pub bytes: u64,
    /// Bytes of the stored matrix over dense f16 bytes.
    pub effective_density: f64,
    /// Median time of one product, µs.
    pub median_us: f64,
    /// Fastest product, µs.
    pub min_us: f64,
    /// 10th and 90th percentile, µs (the spread).
    pub p10_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// bytes / median time, GB/s.
    pub gbps: f64,
    /// gbps over the streaming-read ceiling measured in the same run over the same bytes.
    pub fraction_of_ceiling: Option<f64>,
    /// Time of the backend's dense baseline (cuBLAS on CUDA, our dense elsewhere) over this
    /// kernel's time, same shape, same run.
    pub speedup_over_dense: Option<f64>,
    /// How it was timed: "cuda events", "wgpu timestamp queries", "wall clock".
    pub timer: String,
    /// Timed repetitions.
    pub iters: usize,
}
