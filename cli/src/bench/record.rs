//! One measured figure of `macko bench`, as written to results.csv / results.json and read by
//! the plots, and results.json as a whole (the run's description around the figures), which
//! `macko bench --merge` reads back.

use std::collections::BTreeMap;

use macko::DeviceInfo;
use serde::{Deserialize, Deserializer, Serialize};

/// The `tool` of every results.json.
pub const TOOL: &str = "macko bench";

/// One (backend, shape, density, batch, kernel) measurement.
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
    /// Vectors per product (B of Y = A·X, `--batch`); results written before the few-token
    /// products existed have no such field and read as 1.
    #[serde(default = "one_vector")]
    pub batch: usize,
    /// Kernel: "macko", "csr", "dense" (ours), "cublas", "cusparse", "stream" (the
    /// streaming-read ceiling over the bytes of the MACKO matrix), or with `--values`
    /// "macko-int8", "dense-int8", "macko-int4", "dense-int4" (the MACKO or dense matrix with
    /// quantized values; the scale layout is in the run's settings).
    pub kernel: String,
    /// Bytes that must move: the stored matrix once, X (B vectors of f16) read once and Y
    /// (B vectors of f16) written once.
    pub bytes: u64,
    /// Bytes of the stored matrix over dense f16 bytes.
    #[serde(deserialize_with = "nan_if_null")]
    pub effective_density: f64,
    /// Median time of one product, µs.
    #[serde(deserialize_with = "nan_if_null")]
    pub median_us: f64,
    /// Fastest product, µs.
    #[serde(deserialize_with = "nan_if_null")]
    pub min_us: f64,
    /// 10th and 90th percentile, µs (the spread).
    #[serde(deserialize_with = "nan_if_null")]
    pub p10_us: f64,
    /// 90th percentile, µs.
    #[serde(deserialize_with = "nan_if_null")]
    pub p90_us: f64,
    /// bytes / median time, GB/s.
    #[serde(deserialize_with = "nan_if_null")]
    pub gbps: f64,
    /// gbps over the streaming-read ceiling measured in the same run over the same bytes (the
    /// streaming read's median pass, or its fastest where the timer is the wall clock).
    pub fraction_of_ceiling: Option<f64>,
    /// Time of the backend's dense baseline (cuBLAS on CUDA, our dense elsewhere) over this
    /// kernel's time, same shape, same run.
    pub speedup_over_dense: Option<f64>,
    /// How it was timed: "cuda events", "wgpu timestamp queries", "wall clock".
    pub timer: String,
    /// Timed repetitions.
    pub iters: usize,
}

/// The batch of a record written before `--batch` existed: one vector.
fn one_vector() -> usize {
    1
}

/// JSON has no NaN: serde_json writes a NaN figure (the spread of a "stream" record) as `null`,
/// so `null` reads back as NaN.
fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// results.json: what was measured where, how, and every record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// Always "macko bench".
    pub tool: String,
    /// Version of macko that measured.
    pub version: String,
    /// Date of the measurement (UTC, YYYY-MM-DD); for merged results, the latest source's.
    pub date: String,
    /// The machine that measured.
    pub host: Host,
    /// How it measured.
    pub settings: Settings,
    /// Each device measured, one per backend.
    pub devices: Vec<DeviceEntry>,
    /// For merged results (`macko bench --merge`): the result directories, in merge order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<Source>,
    /// Every figure.
    pub results: Vec<Record>,
}

/// The machine that ran `macko bench`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Host {
    /// Operating system ("linux").
    pub os: String,
    /// CPU architecture ("x86_64").
    pub arch: String,
    /// Hardware threads.
    pub threads: usize,
}

impl Host {
    /// This machine.
    pub fn here() -> Self {
        Self {
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            threads: std::thread::available_parallelism().map_or(0, |n| n.get()),
        }
    }
}

/// The measurement settings of a run; results measured with different settings are not merged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Settings {
    /// Timed products per measurement.
    pub iters: usize,
    /// Untimed products first.
    pub warmup: usize,
    /// Rows checked against the f64 reference (0 = all).
    pub check_rows: usize,
    /// Seed of the synthetic matrices and vectors.
    pub seed: u64,
    /// Output precision of the products ("f16").
    pub output: String,
    /// Bytes of rotated matrix copies (so that products read from memory, not cache).
    pub rotation_bytes: u64,
    /// The scale layout of each quantized value type measured (`--values`, `--group`): value
    /// type ("int8", "int4") to layout ("row", "G64"). The kernel names (`macko-int4`) do not
    /// say it, so it is a setting: merged runs must agree on it where both measured a type.
    /// Empty, and absent from results.json, in an f16-only run, whose file stays as it was.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scales: BTreeMap<String, String>,
}

/// One device measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceEntry {
    /// Backend name.
    pub backend: String,
    /// Device name as the backend reports it.
    pub name: String,
    /// Key properties (driver, memory, kernels, …).
    pub properties: BTreeMap<String, String>,
}

impl From<&DeviceInfo> for DeviceEntry {
    fn from(d: &DeviceInfo) -> Self {
        Self {
            backend: d.backend.name().into(),
            name: d.name.clone(),
            properties: d.properties.iter().cloned().collect(),
        }
    }
}

/// One result directory of a merge.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Source {
    /// The directory, as given on the command line.
    pub dir: String,
    /// Its measurement date.
    pub date: String,
    /// The machine that measured it.
    pub host: Host,
    /// Its records.
    pub records: usize,
    /// How many of them replaced a record of an earlier directory (same backend, shape,
    /// density, batch and kernel).
    pub replaced: usize,
    /// Where it was itself merged from, if it was.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<Source>,
}
