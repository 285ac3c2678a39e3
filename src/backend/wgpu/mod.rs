//! The wgpu backend: the products as WGSL compute shaders (shaders/, see shaders/README.md)
//! on any adapter wgpu can open — Vulkan, Metal, DX12, GL — chosen at run time.
//!
//! - `config`: what opening a device needs (`WgpuConfig`); `backend`: the state of an opened
//!   device (`WgpuBackend`) and its opening.
//! - `adapter`: the instance, the choice of adapter and the device request.
//! - `gpu`: the device with error capture (no wgpu panic reaches the caller), waiting, buffers,
//!   staging uploads and downloads, and the pass products are queued in.
//! - `tuning`: the typed tuning (`WgpuTuning`): the plan choices a sweep or a test may force;
//!   `forced`: the named tunings that force each non-default plan.
//! - `plan`: the pure planner: kernel, workgroup size, grid, x staging, layout of a matrix, from
//!   its shape and fill, the device's capabilities (`WgpuCaps`) and the tuning.
//! - `kernel`: which kernel multiplies which matrix on which path, its source and workgroup
//!   size; `pipelines`: bind group layouts, pipelines compiled once on first use, each kernel
//!   specialized first (`specialize`).
//! - `memory`: matrices (planned at upload, split into row blocks), vectors, uploads;
//!   `quant_upload`: the uploads of quantized matrices; `csr_upload`: of CSR and homogeneous
//!   CSR matrices.
//! - `transposed`: sparse vectors and the transposed products y = Aᵀ·x.
//! - `launch`: the recording and queueing of products (few-token products chunk by chunk).
//! - `batch`: a matrix's few-token scratch (the transposed x) and its chunks' bind groups;
//!   their plans, one per chunk width, are `plan`'s too.
//! - `tiles`: x too wide for workgroup memory, cut into column tiles, and the table of where
//!   each row's entries cross from one tile into the next.
//! - `timing`: timestamp-query timing of products and the streaming-read ceiling.
//!
//! No file imports this one: `mod.rs` is the `Backend` adapter on top, and the files below it
//! import each other without cycles.
//!
//! Two kernel paths: with subgroup operations where the adapter has `SUBGROUP` (and
//! `WgpuConfig::subgroups` is on), else workgroup memory only.

mod adapter;
mod backend;
mod batch;
mod config;
mod csr_upload;
mod forced;
mod gpu;
mod kernel;
mod launch;
mod memory;
mod pipelines;
mod plan;
mod quant_upload;
mod sparse_x;
mod specialize;
mod tiles;
mod timing;
mod transposed;
mod tuning;

use half::f16;

use macko_format::SparseVector;

use super::{Backend, BackendKind, DeviceInfo, HostVector, MatrixRef, Precision, SparseInput};
use crate::error::Result;

pub(crate) use backend::WgpuBackend;
pub(crate) use memory::{GpuMatrix, GpuVector};
pub(crate) use transposed::GpuSparseVector;

#[doc(hidden)]
pub use kernel::{Kernel, KernelPath, QuantKey};
#[doc(hidden)]
pub use pipelines::XForm;
#[doc(hidden)]
pub use plan::{batch_width, BatchPlan, BATCH_WIDTHS};
#[doc(hidden)]
pub use plan::{plan, Grid, MatrixStats, WgpuCaps, WgpuPlan, XStaging};
#[doc(hidden)]
pub use tiles::TilePlan;
#[doc(hidden)]
pub use tuning::WgpuTuning;

pub(crate) use config::WgpuConfig;

/// Opens the wgpu device `config` asks for.
pub(crate) fn open(config: &WgpuConfig) -> Result<WgpuBackend> {
    WgpuBackend::open(config)
}

/// "2 GiB", "64 KiB", "1000 B".
fn bytes_text(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v} {}", UNITS[unit])
    } else {
        format!("{v:.2} {} ({n} B)", UNITS[unit])
    }
}

impl WgpuBackend {
    fn properties(&self) -> Vec<(String, String)> {
        let a = &self.gpu.adapter;
        let l = &self.gpu.limits;
        let mut p = vec![
            ("API".to_string(), adapter::api_name(a.backend).to_string()),
            ("device type".to_string(), format!("{:?}", a.device_type)),
            (
                "driver".to_string(),
                format!("{} {}", a.driver, a.driver_info).trim().to_string(),
            ),
            (
                "vendor:device".to_string(),
                format!("{:04x}:{:04x}", a.vendor, a.device),
            ),
            (
                "subgroup size".to_string(),
                if a.subgroup_min_size == a.subgroup_max_size {
                    a.subgroup_min_size.to_string()
                } else {
                    format!("{}–{}", a.subgroup_min_size, a.subgroup_max_size)
                },
            ),
            (
                "max_storage_buffer_binding_size".to_string(),
                bytes_text(l.max_storage_buffer_binding_size),
            ),
            ("max_buffer_size".to_string(), bytes_text(l.max_buffer_size)),
            (
                "workgroup memory".to_string(),
                bytes_text(l.max_compute_workgroup_storage_size as u64),
            ),
        ];
        if let Some(cap) = self.binding_cap {
            p.push((
                "binding cap (option)".to_string(),
                format!("{} (matrices split into row blocks)", bytes_text(cap)),
            ));
        }
        let features: Vec<String> = self
            .gpu
            .features
            .iter_names()
            .map(|(name, _)| name.to_string())
            .collect();
        p.push((
            "features".to_string(),
            if features.is_empty() {
                "none".to_string()
            } else {
                features.join(", ")
            },
        ));
        let mut kernels = self.path_reason.clone();
        let tuning = self.tuning.describe();
        if !tuning.is_empty() {
            kernels += &format!("; tuning {}", tuning.join(" "));
        }
        p.push(("kernels".to_string(), kernels));
        p.push(("timer".to_string(), self.timer().to_string()));
        p
    }
}

impl Backend for WgpuBackend {
    type Matrix = GpuMatrix;
    type Vector = GpuVector;
    // Sparse vectors are the x of transposed products (transposed.rs) and of y = A·x with x
    // sparse (sparse_x.rs), for CSR, homogeneous CSR and binary16 MACKO; the other formats are
    // refused when queued.
    type SparseVector = GpuSparseVector;
    type Plan = WgpuPlan;

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: BackendKind::Wgpu,
            name: adapter::describe(&self.gpu.adapter),
            properties: self.properties(),
        }
    }

    fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<GpuMatrix> {
        self.upload_matrix_impl(m)
    }

    fn upload_vector(&self, x: &[f16]) -> Result<GpuVector> {
        self.upload_vector_impl(x)
    }

    fn alloc_vector(&self, len: usize, precision: Precision) -> Result<GpuVector> {
        self.alloc_vector_impl(len, precision)
    }

    fn multiply(
        &self,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &mut GpuVector,
        batch: usize,
    ) -> Result<()> {
        self.spmv_impl(a, x, y, batch)
    }

    fn upload_sparse_vector(&self, x: &SparseVector) -> Result<GpuSparseVector> {
        self.upload_sparse_vector_impl(x)
    }

    fn multiply_sparse_x(
        &self,
        a: &GpuMatrix,
        x: &GpuSparseVector,
        y: &mut GpuVector,
    ) -> Result<()> {
        self.sparse_x_impl(a, x, y)
    }

    fn multiply_transposed(
        &self,
        a: &GpuMatrix,
        x: SparseInput<'_, GpuVector, GpuSparseVector>,
        y: &mut GpuVector,
    ) -> Result<()> {
        self.transposed_impl(a, x, y)
    }

    fn plan(&self, a: &GpuMatrix) -> Result<WgpuPlan> {
        Ok(a.plan.clone())
    }

    fn synchronize(&self) -> Result<()> {
        self.synchronize_impl()
    }

    fn download(&self, v: &GpuVector) -> Result<HostVector> {
        self.download_impl(v)
    }

    fn timer(&self) -> &'static str {
        if self.has_timestamps() {
            "wgpu timestamp queries"
        } else {
            "wall clock (the adapter lacks TIMESTAMP_QUERY)"
        }
    }

    fn time_sparse_input(
        &self,
        a: &[&GpuMatrix],
        x: SparseInput<'_, GpuVector, GpuSparseVector>,
        transposed: bool,
        y: &mut GpuVector,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        match (transposed, x) {
            (true, x) => self.time_transposed(a, x, y, warmup, iters),
            (false, SparseInput::Sparse(x)) => self.time_sparse_x(a, x, y, warmup, iters),
            (false, SparseInput::Dense(_)) => Err(gpu::backend_error(
                "internal: a sparse-input product of a dense x that is not transposed",
            )),
        }
    }

    fn sparse_input_timer(&self) -> &'static str {
        self.timer()
    }

    fn time_multiply(
        &self,
        a: &[&GpuMatrix],
        x: &GpuVector,
        y: &mut GpuVector,
        batch: usize,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        self.time_products(a, x, y, batch, warmup, iters)
    }

    fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        self.stream_read_impl(bytes, warmup, iters).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backend on lavapipe or any adapter, or `None` (printed) where wgpu has none.
    fn backend() -> Option<WgpuBackend> {
        let config = WgpuConfig {
            allow_software_adapter: true,
            ..WgpuConfig::default()
        };
        match WgpuBackend::open(&config) {
            Ok(b) => Some(b),
            Err(e) => {
                println!("skipping: {e}");
                None
            }
        }
    }

    /// Whichever thread polls runs the map callbacks that are due, so a thread's own callback
    /// may run on another thread after its poll has returned; the wait must go on until it has.
    #[test]
    fn a_map_callback_run_late_by_another_thread_is_waited_for() {
        let Some(b) = backend() else { return };
        let (tx, rx) = std::sync::mpsc::channel();
        let late = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let _ = tx.send(Ok(()));
        });
        let waited = b.gpu.await_map(&rx);
        late.join().unwrap();
        assert!(waited.is_ok(), "{:?}", waited.err());
    }

    /// A map that fails must not leave the buffer marked as mapped: wgpu then fails every
    /// later map of it, and the staging buffers are shared by all downloads and uploads.
    #[test]
    fn a_failed_map_leaves_the_buffer_usable() {
        let Some(b) = backend() else { return };
        let usage = wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC;
        let buffer = b
            .gpu
            .create_buffer(256, usage, "staging under test")
            .unwrap();
        // A buffer made for writing cannot be mapped for reading: this map fails.
        let failed = b.gpu.map(&buffer, wgpu::MapMode::Read, 256).map(|_| ());
        assert!(failed.is_err(), "mapping for reading succeeded");
        // Drop the validation error wgpu recorded for the failed map, if it is still there.
        let _ = b.gpu.check();
        for round in 0..3 {
            let mapped = b.gpu.map(&buffer, wgpu::MapMode::Write, 256);
            assert!(
                mapped.is_ok(),
                "map {round} after a failed one: {:?}",
                mapped.err()
            );
        }
        b.gpu.check().unwrap();
    }

    #[test]
    fn a_lost_device_turns_every_later_call_into_an_error() {
        let Some(b) = backend() else { return };
        let x = b.upload_vector(&[f16::ONE; 8]).unwrap();
        b.gpu.device.destroy();
        let after: [(&str, Result<()>); 4] = [
            ("synchronize", b.synchronize()),
            ("download", b.download(&x).map(|_| ())),
            ("upload", b.upload_vector(&[f16::ONE; 8]).map(|_| ())),
            ("alloc", b.alloc_vector(8, Precision::F32).map(|_| ())),
        ];
        for (what, r) in after {
            match r {
                Err(e) => println!("{what}: {e}"),
                Ok(()) => panic!("{what} succeeded on a destroyed device"),
            }
        }
    }
}
