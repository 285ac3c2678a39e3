//! The CUDA backend: CUDA C kernels from `kernels/`, compiled at run time by NVRTC for the GPU's
//! own architecture and launched through cudarc, which loads the driver and the libraries at run
//! time. A binary built without any CUDA installed runs everywhere: where the driver, a GPU and
//! NVRTC are present this backend opens, elsewhere `open` says which is missing and
//! `Device::auto()` moves on.
//!
//! - `probe`: libraries, device, context, properties;
//! - [`nvrtc`]: compilation and the process-wide cache of compiled kernels;
//! - `launch`: kernels loaded into a context, launch shapes, products;
//! - `memory`: device arrays, matrices, vectors;
//! - `vendor`: the cuBLAS and cuSPARSE baselines;
//! - `timing`: CUDA events around queued products, the streaming-read ceiling.
//!
//! Everything is queued on one stream, in order: products return once queued, and
//! `synchronize`/`download` wait.

mod flat;
mod launch;
mod memory;
pub mod nvrtc;
mod probe;
mod split;
mod timing;
mod vendor;

use std::fmt::Debug;
use std::sync::Arc;

use half::f16;

use self::launch::{Kernels, XPolicy};
use self::memory::{
    dim, CsrDev, CudaMatrix, CudaVector, DenseDev, DeviceArray, FlatDev, MackoDev, SplitDev,
    VectorData,
};
use self::probe::{human_bytes, Gpu};
use self::vendor::Vendor;
use macko_format::aligned::align_rows;

use super::{
    downcast, downcast_mut, Backend, BackendKind, DeviceInfo, HostVector, MatrixRef, Precision,
    Storage, VendorBaseline,
};
use crate::device::DeviceOptions;
use crate::error::{Error, Result};

pub use self::launch::ENV_X;

/// An error reported by the driver or a CUDA library, with what macko was doing. The libraries'
/// error types print their status name (and the driver's its description) through `Debug`.
pub(crate) fn cuda_error(what: &str, e: impl Debug) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("{what}: {e:?}"),
    }
}

/// Opens the CUDA GPU `opts.cuda_ordinal`: probes the driver, the GPU and NVRTC, creates the
/// context and stream, and compiles (once per process) and loads every kernel.
pub(crate) fn open(opts: &DeviceOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(CudaBackend::open(opts.cuda_ordinal)?))
}

/// One CUDA GPU.
pub(crate) struct CudaBackend {
    gpu: Gpu,
    kernels: Kernels,
    vendor: Vendor,
    info: DeviceInfo,
}

impl CudaBackend {
    fn open(ordinal: usize) -> Result<Self> {
        let x_policy = XPolicy::from_env()?;
        let gpu = probe::open_gpu(ordinal)?;
        let kernels = Kernels::load(&gpu.ctx, &gpu.props, x_policy)?;
        let vendor = Vendor::new(gpu.ctx.clone(), gpu.stream.clone());
        let info = describe(&gpu);
        Ok(Self {
            gpu,
            kernels,
            vendor,
            info,
        })
    }

    fn stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        &self.gpu.stream
    }

    fn upload_macko(&self, m: &macko_format::MackoMatrix) -> Result<CudaMatrix> {
        let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
        let values: &[u16] = bytemuck::cast_slice(m.values());
        let entries = m.row_ptr().last().map_or(0, |&n| u64::from(n));
        let mut plan = self.kernels.macko_plan(rows, cols, entries)?;
        let flat = if plan.flat && flat::rows_long_enough(m.row_ptr()) {
            self.upload_flat(m, &mut plan)?
        } else {
            plan.flat = false;
            None
        };
        let split = match plan.split_entries {
            Some(seg) if flat.is_none() => {
                self.upload_split(m, seg, plan.split_from_row, &mut plan)?
            }
            _ => None,
        };
        // Row-aligned where the row kernel runs on whole rows (split items and flat ranges
        // start inside rows, so they keep the format's layout): no batch then masks.
        let aligned = if flat.is_none() && split.is_none() && launch::aligned_rows_from_env()? {
            // The whole matrix: only offsets past 32 bits keep the format's own layout.
            match align_rows(m, 0..m.rows()) {
                Ok(a) => Some(a),
                Err(macko_format::FormatError::AlignedTooLarge { .. }) => None,
                Err(e) => return Err(e.into()),
            }
        } else {
            None
        };
        plan.aligned_rows = aligned.is_some();
        if launch::log_plans() {
            eprintln!("macko cuda plan {rows}x{cols} ({entries} entries): {plan:?}");
        }
        let (row_ptr, values, codes) = match &aligned {
            Some(a) => (
                &a.row_ptr[..],
                bytemuck::cast_slice(&a.values),
                &a.codes[..],
            ),
            None => (m.row_ptr(), values, m.codes()),
        };
        Ok(CudaMatrix::Macko(MackoDev {
            rows,
            cols,
            row_ptr: DeviceArray::upload(self.stream(), row_ptr, "MACKO row pointers")?,
            values: DeviceArray::upload(self.stream(), values, "MACKO values")?,
            codes: DeviceArray::upload(self.stream(), codes, "MACKO codes")?,
            plan,
            split,
            flat,
        }))
    }

    /// Cuts the entries of `m` into one range per resident warp of the flat kernel and uploads
    /// the kernels' table of them (the plan becomes the flat kernel's).
    fn upload_flat(
        &self,
        m: &macko_format::MackoMatrix,
        plan: &mut launch::Plan,
    ) -> Result<Option<Box<FlatDev>>> {
        let entries = u64::from(m.row_ptr().last().copied().unwrap_or(0));
        let ranges = self.kernels.flat_plan(plan, entries)?;
        let table = flat::flat_ranges(m.row_ptr(), m.codes(), ranges, self.kernels.flat_snap())?;
        let ranges = u32::try_from(table.ranges()).map_err(|_| probe::internal("flat ranges"))?;
        let cut_rows =
            u32::try_from(table.cut_rows()).map_err(|_| probe::internal("flat cut rows"))?;
        // A buffer of no elements cannot be allocated: one unused entry stands in.
        let cut = if table.cut.is_empty() {
            vec![0u32; 4]
        } else {
            table.cut
        };
        Ok(Some(Box::new(FlatDev {
            desc: DeviceArray::upload(self.stream(), &table.desc, "MACKO flat ranges")?,
            cut: DeviceArray::upload(self.stream(), &cut, "MACKO flat cut rows")?,
            partials: DeviceArray::zeros(self.stream(), 2 * ranges as usize, "MACKO partial sums")?,
            ranges,
            cut_rows,
        })))
    }

    /// Cuts the rows of `m` from `from_row` on into segments of `seg` entries and uploads the
    /// kernels' table of them (and sets the plan's grid for the items: `macko_split_grid`).
    fn upload_split(
        &self,
        m: &macko_format::MackoMatrix,
        seg: u32,
        from_row: u32,
        plan: &mut launch::Plan,
    ) -> Result<Option<SplitDev>> {
        let table = split::split_rows(m.row_ptr(), m.codes(), seg, from_row)?;
        let desc = memory::kernel_descriptors(&table)
            .ok_or_else(|| probe::internal("split table lengths"))?;
        let items = u32::try_from(table.items()).map_err(|_| probe::internal("split items"))?;
        plan.grid = self.kernels.macko_split_grid(plan, items)?;
        Ok(Some(SplitDev {
            desc: DeviceArray::upload(self.stream(), &desc, "MACKO row segments")?,
            row_item: DeviceArray::upload(self.stream(), &table.row_item, "MACKO row segments")?,
            partials: DeviceArray::zeros(self.stream(), table.items(), "MACKO partial sums")?,
            items,
        }))
    }

    fn upload_csr(&self, m: &macko_format::CsrMatrix) -> Result<CudaMatrix> {
        let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
        // The kernel steps entry indices by 128 from below nnz: keep that inside u32.
        if m.nnz() > (u32::MAX - 1024) as usize {
            return Err(Error::Backend {
                backend: BackendKind::Cuda,
                message: format!(
                    "the CUDA CSR kernel takes at most {} entries, not {}",
                    u32::MAX - 1024,
                    m.nnz()
                ),
            });
        }
        let values: &[u16] = bytemuck::cast_slice(m.values());
        Ok(CudaMatrix::Csr(CsrDev {
            rows,
            cols,
            row_ptr: DeviceArray::upload(self.stream(), m.row_ptr(), "CSR row pointers")?,
            col_idx: DeviceArray::upload(self.stream(), m.col_idx(), "CSR column indices")?,
            values: DeviceArray::upload(self.stream(), values, "CSR values")?,
            plan: self.kernels.csr_plan(rows, cols)?,
        }))
    }

    fn upload_dense(&self, m: &macko_format::DenseMatrix) -> Result<CudaMatrix> {
        let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
        let values: &[u16] = bytemuck::cast_slice(m.values());
        Ok(CudaMatrix::Dense(DenseDev {
            rows,
            cols,
            values: DeviceArray::upload(self.stream(), values, "dense values")?,
            plan: self.kernels.dense_plan(rows, cols)?,
        }))
    }

    /// Queues y = A·x with the implementation the matrix was uploaded for.
    fn product(&self, a: &CudaMatrix, x: &CudaVector, y: &mut CudaVector) -> Result<()> {
        let (rows, cols) = a.shape();
        if x.len() != cols as usize || y.len() != rows as usize {
            return Err(probe::internal(
                "vector lengths reached the backend unchecked",
            ));
        }
        let x = x.as_input()?;
        let stream = self.stream();
        match a {
            CudaMatrix::Macko(m) => self.kernels.macko(stream, m, x, &mut y.data),
            CudaMatrix::Csr(m) => self.kernels.csr(stream, m, x, &mut y.data),
            CudaMatrix::Dense(m) => self.kernels.dense(stream, m, x, &mut y.data),
            CudaMatrix::Cublas(m) => self.vendor.cublas_gemv(m, x, &mut y.data),
            CudaMatrix::Cusparse(m) => self.vendor.cusparse_spmv(m, x, &mut y.data),
        }
    }
}

/// `info()` of a GPU: name with architecture, then the properties that explain its figures.
fn describe(gpu: &Gpu) -> DeviceInfo {
    let p = &gpu.props;
    let properties = vec![
        ("compute capability".into(), p.arch()),
        (
            "driver".into(),
            format!("CUDA {}.{}", p.driver_version.0, p.driver_version.1),
        ),
        (
            "NVRTC".into(),
            format!("{}.{}", p.nvrtc_version.0, p.nvrtc_version.1),
        ),
        ("memory".into(), human_bytes(p.total_memory)),
        ("SMs".into(), p.sms.to_string()),
        ("L2 cache".into(), human_bytes(p.l2_bytes)),
        (
            "shared memory per block".into(),
            human_bytes(u64::from(p.smem_per_block_optin)),
        ),
        (
            "DRAM bytes per SM cycle".into(),
            p.dram_bytes_per_sm_cycle
                .map_or("unknown (no clocks reported)".into(), |b| format!("{b:.1}")),
        ),
        (
            "plan rules it decides".into(),
            launch::gpu_dependent_rules(p.dram_bytes_per_sm_cycle),
        ),
        ("ordinal".into(), gpu.ctx.ordinal().to_string()),
    ];
    DeviceInfo {
        backend: BackendKind::Cuda,
        name: format!("{} ({})", p.name, p.arch()),
        properties,
    }
}

impl Backend for CudaBackend {
    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<Storage> {
        let matrix = match m {
            MatrixRef::Macko(m) => self.upload_macko(m)?,
            MatrixRef::Csr(m) => self.upload_csr(m)?,
            MatrixRef::Dense(m) => self.upload_dense(m)?,
        };
        Ok(Box::new(matrix))
    }

    fn upload_vector(&self, x: &[f16]) -> Result<Storage> {
        let bits: &[u16] = bytemuck::cast_slice(x);
        Ok(Box::new(CudaVector {
            data: VectorData::F16(DeviceArray::upload(self.stream(), bits, "a vector")?),
        }))
    }

    fn alloc_vector(&self, len: usize, precision: Precision) -> Result<Storage> {
        let data = match precision {
            Precision::F16 => VectorData::F16(DeviceArray::zeros(self.stream(), len, "a vector")?),
            Precision::F32 => VectorData::F32(DeviceArray::zeros(self.stream(), len, "a vector")?),
        };
        Ok(Box::new(CudaVector { data }))
    }

    fn spmv(&self, a: &Storage, x: &Storage, y: &mut Storage) -> Result<()> {
        let a = downcast::<CudaMatrix>(a, BackendKind::Cuda, "matrix")?;
        let x = downcast::<CudaVector>(x, BackendKind::Cuda, "x")?;
        let y = downcast_mut::<CudaVector>(y, BackendKind::Cuda, "y")?;
        self.product(a, x, y)
    }

    fn synchronize(&self) -> Result<()> {
        self.stream()
            .synchronize()
            .map_err(|e| cuda_error("waiting for queued products", e))
    }

    fn download(&self, v: &Storage) -> Result<HostVector> {
        let v = downcast::<CudaVector>(v, BackendKind::Cuda, "vector")?;
        Ok(match &v.data {
            VectorData::F16(a) => HostVector::F16(
                a.download(self.stream(), "a vector")?
                    .into_iter()
                    .map(f16::from_bits)
                    .collect(),
            ),
            VectorData::F32(a) => HostVector::F32(a.download(self.stream(), "a vector")?),
        })
    }

    fn timer(&self) -> &'static str {
        "cuda events"
    }

    fn time_spmv(
        &self,
        a: &[&Storage],
        x: &Storage,
        y: &mut Storage,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let matrices = a
            .iter()
            .map(|m| downcast::<CudaMatrix>(m, BackendKind::Cuda, "matrix"))
            .collect::<Result<Vec<_>>>()?;
        if matrices.is_empty() {
            return Ok(Vec::new());
        }
        let x = downcast::<CudaVector>(x, BackendKind::Cuda, "x")?;
        let y = downcast_mut::<CudaVector>(y, BackendKind::Cuda, "y")?;
        timing::time_queued(
            &self.gpu.ctx,
            self.stream(),
            warmup,
            iters,
            |ns| self.kernels.spin_wait(self.stream(), ns),
            |i| self.product(matrices[i % matrices.len()], x, y),
        )
    }

    fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        let grid = self.kernels.stream_grid()?;
        let copies = timing::stream_copies(bytes, self.gpu.props.l2_bytes);
        let mut bufs = timing::StreamBuffers::new(self.stream(), bytes, copies, grid)?;
        let words = bufs.words;
        let times = timing::time_queued(
            &self.gpu.ctx,
            self.stream(),
            warmup,
            iters,
            |ns| self.kernels.spin_wait(self.stream(), ns),
            |i| {
                let n = bufs.copies.len();
                let (copies, out) = (&bufs.copies, &mut bufs.out);
                let copy = copies[i % n].buf();
                self.kernels
                    .stream_read(self.stream(), copy, words, out.buf_mut(), grid)
            },
        )?;
        Ok(Some(times))
    }

    fn upload_vendor(&self, m: MatrixRef<'_>, vendor: VendorBaseline) -> Result<Storage> {
        let matrix = match (vendor, m) {
            (VendorBaseline::CublasDense, MatrixRef::Dense(d)) => self.vendor.upload_cublas(d)?,
            (VendorBaseline::CusparseCsr, MatrixRef::Csr(c)) => self.vendor.upload_cusparse(c)?,
            (VendorBaseline::CublasDense, other) => {
                return Err(wrong_format(vendor, "dense", other))
            }
            (VendorBaseline::CusparseCsr, other) => return Err(wrong_format(vendor, "CSR", other)),
        };
        Ok(Box::new(matrix))
    }
}

/// A baseline asked for a format it does not take.
fn wrong_format(vendor: VendorBaseline, wants: &str, got: MatrixRef<'_>) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!(
            "the {} baseline multiplies {wants} matrices, not {}",
            vendor.name(),
            got.kind().as_str()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a driver (CI, this repository's build machine) opening must fail with a reason,
    /// never panic; with one it must succeed or say why not.
    #[test]
    fn open_never_panics_and_explains_itself() {
        match open(&DeviceOptions::for_backend(BackendKind::Cuda)) {
            Ok(b) => assert!(b.info().name.contains("sm_")),
            Err(Error::Unavailable { reason, .. }) => assert!(!reason.is_empty()),
            Err(other) => panic!("unexpected error kind: {other}"),
        }
    }

    #[test]
    fn x_staging_size_covers_the_last_padded_slot() {
        // cols + 24 slots, the last at index cols + 23, padded by one word per 32.
        for cols in [0u32, 1, 7, 8, 31, 4096, 12288, 28672] {
            let last = u64::from(cols) + 23;
            let floats = last + last / 32 + 1;
            assert_eq!(launch::x_smem_bytes(cols), 4 * floats);
        }
        assert!(launch::x_smem_bytes(12288) < 64 << 10);
    }

    #[test]
    fn x_staged_as_binary16_covers_the_slack_in_whole_16_byte_words() {
        // cols + 24 halves (slots 0 .. cols + 23), rounded up to 16 bytes: the kernel stores
        // x's 16-byte words from slot 8 on, so cols rounded up to 8 must fit as well.
        for cols in [0u32, 1, 7, 8, 9, 31, 4096, 28672, 36864, 49152] {
            let bytes = launch::x_smem_half_bytes(cols);
            assert_eq!(bytes % 16, 0);
            assert!(bytes >= 2 * (u64::from(cols) + 24));
            assert!(bytes >= 2 * (8 + u64::from(cols.div_ceil(8)) * 8));
            assert!(bytes < 2 * (u64::from(cols) + 24) + 16);
        }
        // Three lean blocks' copies of x fit an H100's 228 KiB up to 36 864 columns.
        assert!(3 * (launch::x_smem_half_bytes(36864) + 1024) <= 228 << 10);
    }

    #[test]
    fn the_stream_is_held_long_enough_to_queue_but_bounded() {
        assert_eq!(timing::hold_ns(0), 100_000);
        assert!(timing::hold_ns(100) >= 100 * 10_000);
        assert_eq!(timing::hold_ns(usize::MAX), 200_000_000);
    }

    #[test]
    fn stream_copies_exceed_the_cache() {
        let l2 = 50 << 20;
        assert_eq!(timing::stream_copies(1 << 30, l2), 1);
        assert_eq!(timing::stream_copies(50 << 20, l2), 3);
        assert_eq!(timing::stream_copies(1, l2), 64);
        assert!(timing::stream_copies(5 << 20, l2) * (5 << 20) >= 3 * l2);
    }
}
