//! Binding and dispatch: each product queues the kernels its stored plan names, with the
//! matrix's arrays as arguments. Nothing here chooses: the plan (`plan.rs`) was computed at
//! upload. One generic path per format serves both output precisions ([`Output`]); the only
//! match on the precision is where the output vector's type is read ([`product`]).

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};

use super::batch_plan::BatchPlan;
use super::caps::{Kernel, BLOCK};
use super::errors::{cuda_error, internal};
use super::kernels::Kernels;
use super::memory::{
    CsrDev, DenseDev, DenseQuantDev, DeviceArray, FlatDev, MackoDev, QuantScales, VectorData,
};
use super::plan::CudaPlan;
use crate::backend::Precision;
use crate::error::Result;

/// An element type of y: binary16 bits or binary32.
pub(crate) trait Output: DeviceRepr {
    /// The precision whose kernel variant writes it.
    const PRECISION: Precision;
}

impl Output for u16 {
    const PRECISION: Precision = Precision::F16;
}

impl Output for f32 {
    const PRECISION: Precision = Precision::F32;
}

/// A matrix format that macko's own kernels multiply.
#[derive(Clone, Copy)]
pub(crate) enum Product<'a> {
    /// binary16 values, or int8 / int4 (`MackoDev::quant`).
    Macko(&'a MackoDev),
    Csr(&'a CsrDev),
    Dense(&'a DenseDev, &'a CudaPlan),
    DenseQuant(&'a DenseQuantDev, &'a CudaPlan),
}

/// Vectors `first .. first + count` of a few-token product (`backend::chunks`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchChunk {
    pub first: u32,
    pub count: u32,
}

/// What a launch needs besides the matrix and vectors.
#[derive(Clone, Copy)]
pub(crate) struct Launcher<'a> {
    pub kernels: &'a Kernels,
    pub stream: &'a CudaStream,
    /// SMs, for the grids of the second (combine) launches.
    pub sms: u32,
}

impl Launcher<'_> {
    /// Queues y = A·x with the kernels of A's plan, y of either precision.
    pub fn product(&self, a: Product<'_>, x: &DeviceArray<u16>, y: &mut VectorData) -> Result<()> {
        match y {
            VectorData::F16(y) => self.product_into(a, x, y.buf_mut()),
            VectorData::F32(y) => self.product_into(a, x, y.buf_mut()),
        }
    }

    fn product_into<T: Output>(
        &self,
        a: Product<'_>,
        x: &DeviceArray<u16>,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        match a {
            Product::Macko(m) => self.macko(m, x, y),
            Product::Csr(m) if m.rows > 0 => {
                csr_into(self.stream, self.pick::<T>(m.plan.kernel), m, x, y)
            }
            Product::Dense(m, plan) if m.rows > 0 => {
                dense_into(self.stream, self.pick::<T>(plan.kernel), m, plan, x, y)
            }
            Product::DenseQuant(m, plan) if m.rows > 0 => {
                let f = m.scales.kernels.dense(m.layout)?.pick(T::PRECISION);
                dense_quant_into(self.stream, f, m, plan, x, y)
            }
            Product::Csr(_) | Product::Dense(..) | Product::DenseQuant(..) => Ok(()),
        }
    }

    /// The variant of `kernel` that writes `T`.
    fn pick<T: Output>(&self, kernel: Kernel) -> &CudaFunction {
        self.kernels.get(kernel).pick(T::PRECISION)
    }

    /// Queues a MACKO product: the flat kernel and its combine of cut rows, or the row kernel
    /// and, for split rows, the combine of their partial sums.
    fn macko<T: Output>(
        &self,
        m: &MackoDev,
        x: &DeviceArray<u16>,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        if m.rows == 0 {
            return Ok(());
        }
        if let Some(q) = &m.quant {
            if m.flat.is_some() {
                return Err(internal(
                    "a quantized MACKO matrix planned for the flat kernel",
                ));
            }
            let f = q.kernels.row(m.plan.kernel)?.pick(T::PRECISION);
            macko_into(self.stream, f, m, x, y)?;
            let combine = q.kernels.row(Kernel::Combine)?.pick(T::PRECISION);
            return combine_into(self.stream, combine, self.sms, m, y);
        }
        let f = self.pick::<T>(m.plan.kernel);
        if let Some(fl) = &m.flat {
            flat_into(self.stream, f, m, fl, x, y)?;
            return combine_rows_into(
                self.stream,
                self.pick::<T>(Kernel::CombineRows),
                self.sms,
                fl,
                y,
            );
        }
        macko_into(self.stream, f, m, x, y)?;
        combine_into(self.stream, self.pick::<T>(Kernel::Combine), self.sms, m, y)
    }

    /// Queues one chunk of a few-token product Y = A·X: the transpose of the chunk's vectors of
    /// `x` (`[batch][cols]`) into `xt` (at least `plan.xt_len()` halves, as 32-bit words), then
    /// the product kernel of `plan` into the chunk's vectors of `y` (`[batch][rows]`).
    pub fn batch(
        &self,
        a: Product<'_>,
        plan: &BatchPlan,
        chunk: BatchChunk,
        x: &DeviceArray<u16>,
        xt: &mut DeviceArray<u32>,
        y: &mut VectorData,
    ) -> Result<()> {
        match y {
            VectorData::F16(y) => self.batch_into(a, plan, chunk, x, xt, y.buf_mut()),
            VectorData::F32(y) => self.batch_into(a, plan, chunk, x, xt, y.buf_mut()),
        }
    }

    fn batch_into<T: Output>(
        &self,
        a: Product<'_>,
        plan: &BatchPlan,
        chunk: BatchChunk,
        x: &DeviceArray<u16>,
        xt: &mut DeviceArray<u32>,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (rows, cols) = match a {
            Product::Macko(m) if m.quant.is_some() => {
                return Err(internal("a few-token plan for quantized MACKO"))
            }
            Product::Macko(m) => (m.rows, m.cols),
            Product::Csr(m) => (m.rows, m.cols),
            Product::Dense(m, _) => (m.rows, m.cols),
            Product::DenseQuant(..) => return Err(internal("a few-token plan for dense int8/4")),
        };
        if rows == 0 {
            return Ok(());
        }
        let width = plan
            .width()
            .ok_or_else(|| internal("a few-token plan without a width"))?;
        if chunk.count == 0 || chunk.count > width.lanes() || xt.len() * 2 < plan.xt_len() {
            return Err(internal("a few-token chunk does not fit its plan"));
        }
        if plan.tensor_cores() {
            return self.mma_into(a, plan, chunk, x, y);
        }
        self.transpose(plan, chunk, width.lanes(), cols, x, xt)?;
        let f = self.pick::<T>(plan.kernel);
        let mut args = self.stream.launch_builder(f);
        match a {
            Product::Macko(m) => args
                .arg(m.row_ptr.buf())
                .arg(m.values.buf())
                .arg(m.codes.buf())
                .arg(xt.buf())
                .arg(y)
                .arg(&m.rows)
                .arg(&plan.slots),
            Product::Csr(m) => args
                .arg(m.row_ptr.buf())
                .arg(m.col_idx.buf())
                .arg(m.values.buf())
                .arg(xt.buf())
                .arg(y)
                .arg(&m.rows)
                .arg(&plan.slots),
            Product::DenseQuant(..) => return Err(internal("a few-token plan for dense int8/4")),
            Product::Dense(m, _) => args
                .arg(m.values.buf())
                .arg(xt.buf())
                .arg(y)
                .arg(&m.rows)
                .arg(&m.cols),
        };
        args.arg(&chunk.first).arg(&chunk.count);
        let cfg = LaunchConfig {
            grid_dim: (plan.grid, 1, 1),
            block_dim: (plan.block, 1, 1),
            shared_mem_bytes: plan.smem_bytes,
        };
        // SAFETY: the arguments match `macko_batch_*` (row_ptr, values, codes, xt, y, rows,
        // slots, first, count), `csr_batch_*` (row_ptr, col_idx, values, xt, y, rows, slots,
        // first, count) or `dense_batch_*` (a, xt, y, rows, cols, first, count) of
        // kernels/batch.cu in order and type, as the plan's kernel is of the matrix's format
        // (batch_plan.rs); xt holds plan.slots × W halves (checked above) written by the
        // transpose queued before on this stream; y holds batch × rows elements of the kernel's
        // output type and the kernel writes only vectors first .. first + count (the backend
        // checked first + count <= batch); the matrix arrays are those of the single-vector
        // kernels, read the same way (MACKO slots stay inside XT's slack: kernels/README.md,
        // "Correctness: every read in bounds").
        unsafe { args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_error("launching a few-token product kernel", e))
    }

    /// Queues one chunk on tensor cores (kernels/batch_mma.cu): X read as it is, no transpose.
    fn mma_into<T: Output>(
        &self,
        a: Product<'_>,
        plan: &BatchPlan,
        chunk: BatchChunk,
        x: &DeviceArray<u16>,
        y: &mut CudaSlice<T>,
    ) -> Result<()> {
        let mut args = self.stream.launch_builder(self.pick::<T>(plan.kernel));
        match a {
            Product::Dense(m, _) => args
                .arg(m.values.buf())
                .arg(x.buf())
                .arg(y)
                .arg(&m.rows)
                .arg(&m.cols),
            Product::Macko(m) => {
                let cursors = m
                    .cursors
                    .as_ref()
                    .ok_or_else(|| internal("a tensor-core plan without column cursors"))?;
                args.arg(m.row_ptr.buf())
                    .arg(m.values.buf())
                    .arg(m.codes.buf())
                    .arg(cursors.buf())
                    .arg(x.buf())
                    .arg(y)
                    .arg(&m.rows)
                    .arg(&m.cols)
                    .arg(&plan.windows)
                    .arg(&plan.stage_groups)
            }
            Product::Csr(_) | Product::DenseQuant(..) => {
                return Err(internal("a tensor-core plan for a CSR or quantized matrix"))
            }
        };
        args.arg(&chunk.first).arg(&chunk.count);
        let cfg = LaunchConfig {
            grid_dim: (plan.grid, 1, 1),
            block_dim: (plan.block, 1, 1),
            shared_mem_bytes: plan.smem_bytes,
        };
        // SAFETY: the arguments match `dense_batch_mma_*` (a, x, y, rows, cols, first, count)
        // or `macko_batch_mma_*` (row_ptr, values, codes, cursors, x, y, rows, cols, nwin,
        // stage_groups, first, count) of kernels/batch_mma.cu in order and type, as
        // the plan's kernel is of the matrix's format (batch_plan.rs). x holds batch × cols halves
        // and the kernels read vectors first .. first + count only (count <= W, first + count
        // <= batch: checked by the callers), in 16-byte words (cols % 8 == 0, the planner's
        // condition; the buffers are allocation-aligned); y holds batch × rows elements of the
        // kernel's output type. The MACKO arrays are those of the single-vector kernels, read
        // in the same aligned groups (row_ptr bounds them); cursors holds rows × windows
        // packed cursors computed from these arrays at upload (`cursors::window_cursors`),
        // each bounding its row's groups by ⌈end / 8⌉; plan.smem_bytes holds the stages of
        // plan.stage_groups groups that `cursors::stage_groups` measured on these arrays (the
        // kernel also cuts a band's groups at the stage, never writing past it).
        unsafe { args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_error("launching a tensor-core few-token kernel", e))
    }

    /// Queues the transpose of a chunk of x into XT (kernels/batch.cu, `batch_transpose`).
    fn transpose(
        &self,
        plan: &BatchPlan,
        chunk: BatchChunk,
        width: u32,
        cols: u32,
        x: &DeviceArray<u16>,
        xt: &mut DeviceArray<u32>,
    ) -> Result<()> {
        let f = self
            .kernels
            .get(Kernel::BatchTranspose)
            .pick(Precision::F32);
        let mut args = self.stream.launch_builder(f);
        args.arg(x.buf())
            .arg(xt.buf_mut())
            .arg(&cols)
            .arg(&chunk.first)
            .arg(&chunk.count)
            .arg(&width)
            .arg(&plan.slots);
        let cfg = LaunchConfig {
            grid_dim: (plan.transpose_grid, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches `batch_transpose(const unsigned short* x, unsigned* xt, unsigned cols,
        // unsigned first, unsigned count, unsigned width, unsigned slots)`: x holds batch × cols
        // halves and the kernel reads vectors first .. first + count only (count <= width,
        // first + count <= batch, checked by the callers); xt holds slots × width / 2 words.
        unsafe { args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_error("launching the few-token transpose", e))
    }

    /// Queues a one-thread kernel that holds the stream for `ns` nanoseconds (see
    /// kernels/stream.cu, `spin_wait`).
    pub fn spin_wait(&self, ns: u64) -> Result<()> {
        let mut args = self.stream.launch_builder(self.kernels.spin_wait());
        args.arg(&ns);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches `spin_wait(unsigned long long)`; the kernel touches no memory.
        unsafe { args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_error("launching the spin-wait kernel", e))
    }

    /// Queues one pass of the streaming-read kernel over `words` 16-byte words of `buf`, in
    /// `grid` blocks.
    pub fn stream_read(
        &self,
        buf: &CudaSlice<u32>,
        words: u64,
        out: &mut CudaSlice<u32>,
        grid: u32,
    ) -> Result<()> {
        if (buf.len() as u64) < words.saturating_mul(4) || (out.len() as u64) < u64::from(grid) {
            return Err(internal("streaming-read buffers are too small"));
        }
        let f = self.kernels.get(Kernel::StreamRead).pick(Precision::F32);
        let mut args = self.stream.launch_builder(f);
        args.arg(buf).arg(&words).arg(out);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches `stream_read(const uint4*, unsigned long long, unsigned*)`; `buf`
        // holds at least 16·words bytes and `out` one word per block (checked above).
        unsafe { args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_error("launching the streaming-read kernel", e))
    }
}

/// The launch shape of a plan.
fn config(plan: &CudaPlan) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (plan.grid, 1, 1),
        block_dim: (plan.block, 1, 1),
        shared_mem_bytes: plan.smem_bytes,
    }
}

fn macko_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &MackoDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let flags: u32 = u32::from(m.plan.half_warp)
        | (u32::from(m.plan.short_chunks) << 1)
        | (u32::from(m.split.is_some()) << 2)
        | (u32::from(m.plan.pipelined) << 3)
        | (u32::from(m.plan.aligned_rows) << 4)
        | m.quant.as_ref().map_or(0, QuantScales::flags);
    let mut args = stream.launch_builder(f);
    args.arg(m.row_ptr.buf())
        .arg(m.values.buf())
        .arg(m.codes.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(&flags);
    // Unsplit: the split arguments are never read; any device pointer stands in for them.
    match &m.split {
        Some(sp) => args
            .arg(sp.desc.buf())
            .arg(sp.partials.buf())
            .arg(&sp.items),
        None => args.arg(m.row_ptr.buf()).arg(m.row_ptr.buf()).arg(&m.rows),
    };
    let quant_last = m.quant.as_ref().map_or(0, |q| q.last());
    if let Some(q) = &m.quant {
        args.arg(q.scales.buf())
            .arg(&q.mul)
            .arg(&q.shift)
            .arg(&quant_last);
    }
    // SAFETY: the arguments match `macko_spmv_*` (and `macko_lean_*`, which take the same
    // parameters and never read the split table) in kernels/macko.cu in order and type — or,
    // for a quantized matrix, `macko_q_spmv_*` / `macko_q_lean_*` of kernels/macko_quant.cu,
    // the same followed by the scales (one per row, or ⌈P / G⌉ of them, all read at an index
    // capped at `last`) with mul, shift and last as u32, values then being P/8 words of 8 or 4
    // bytes of packed codes (padded to 16 bytes) — (u32
    // row_ptr of rows + 1, P/8 16-byte value words, P/8 32-bit code words, f16 x of cols, y of
    // rows in the kernel's output type, rows, cols and flags as u32, then the split table: items
    // + 1 8-byte descriptors, items f32 partials, items as u32 — read and written only when
    // flags bit 2 is set, which it is exactly when `m.split` is); every buffer lives on this
    // stream and outlives the launch in stream order; the kernel reads only inside the arrays
    // of a valid matrix, which macko-format guarantees (or of its row-aligned copy, whose row
    // pointers, values and codes macko_format::aligned keeps consistent; kernels/README.md,
    // "Rows aligned to groups", for its columns past x), and the split table's entries lie
    // inside them (split.rs; argued in kernels/README.md, "Correctness: split rows and flat
    // ranges").
    unsafe { args.launch(config(&m.plan)) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the MACKO kernel", e))
}

/// Launch shape of a second (combine) launch: one thread per item, grid-stride over at most
/// `sms` × 4 blocks.
fn per_item_config(items: u32, sms: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (items.div_ceil(BLOCK).clamp(1, sms.max(1) * 4), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Queues the flat kernel's product (see `flat.rs`).
fn flat_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &MackoDev,
    fl: &FlatDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let mut args = stream.launch_builder(f);
    args.arg(m.row_ptr.buf())
        .arg(m.values.buf())
        .arg(m.codes.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(fl.desc.buf())
        .arg(fl.partials.buf())
        .arg(&fl.ranges);
    // SAFETY: the arguments match `macko_flat_*` in kernels/macko.cu in order and type (the
    // matrix arrays as for `macko_spmv_*`, y of rows elements of the kernel's output type, rows
    // and cols as u32, then ranges + 1 16-byte range descriptors, 2 · ranges f32 partials and
    // ranges as u32); every buffer lives on this stream and outlives the launch in stream order;
    // the descriptors come from `flat_ranges` (entries inside the matrix, every row of at least 9
    // entries, checked there), and the kernel reads only inside the arrays of a valid matrix.
    unsafe { args.launch(config(&m.plan)) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the flat MACKO kernel", e))
}

/// Queues the second launch of a flat product when some row is cut by a range (nothing
/// otherwise): the cut rows' partial sums into y, one thread per cut row.
fn combine_rows_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    sms: u32,
    fl: &FlatDev,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    if fl.cut_rows == 0 {
        return Ok(());
    }
    let cfg = per_item_config(fl.cut_rows, sms);
    let mut args = stream.launch_builder(f);
    args.arg(fl.cut.buf())
        .arg(fl.partials.buf())
        .arg(y)
        .arg(&fl.cut_rows);
    // SAFETY: matches `macko_combine_rows_*(const uint4* cut, const float* partials, OUT* y,
    // unsigned count)`: `cut` holds cut_rows entries of (row < rows, first <= end <= 2 · ranges),
    // partials 2 · ranges floats, y rows elements; all on this stream, after the product.
    unsafe { args.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the MACKO combine-rows kernel", e))
}

/// Queues the second launch of a split matrix's product (nothing for an unsplit one): y from the
/// partial sums, one thread per row over `sms` × 4 blocks at most.
fn combine_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    sms: u32,
    m: &MackoDev,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let Some(sp) = &m.split else {
        return Ok(());
    };
    let cfg = per_item_config(m.rows, sms);
    let mut args = stream.launch_builder(f);
    args.arg(sp.row_item.buf())
        .arg(sp.partials.buf())
        .arg(y)
        .arg(&m.rows);
    let quant_flags = m.quant.as_ref().map_or(0, QuantScales::flags);
    if let Some(q) = &m.quant {
        args.arg(q.scales.buf()).arg(&quant_flags);
    }
    // SAFETY: matches `macko_combine_*(const unsigned* row_item, const float* partials, OUT* y,
    // unsigned rows)` (for a quantized matrix `macko_q_combine_*`, the same then the scales,
    // read at rows' indices only without flags bit 5, and the flags): row_item holds rows + 1 non-decreasing item indices up to `items`,
    // partials `items` floats, y rows elements of the kernel's output type; all on this stream,
    // queued after the product that wrote the partials.
    unsafe { args.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the MACKO combine kernel", e))
}

fn csr_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &CsrDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let mut args = stream.launch_builder(f);
    args.arg(m.row_ptr.buf())
        .arg(m.col_idx.buf())
        .arg(m.values.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols);
    // SAFETY: the arguments match `csr_spmv_*` in kernels/csr.cu in order and type; the CSR
    // arrays were validated by macko-format (indices < cols, row_ptr non-decreasing up to nnz).
    unsafe { args.launch(config(&m.plan)) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the CSR kernel", e))
}

fn dense_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &DenseDev,
    plan: &CudaPlan,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let mut args = stream.launch_builder(f);
    args.arg(m.values.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols);
    // SAFETY: the arguments match `dense_gemv_*` in kernels/dense.cu; A holds rows·cols halves,
    // x cols, y rows; the aligned variant runs only when cols % 8 == 0, so that every row starts
    // on a 16-byte boundary of the (256-byte aligned) allocation.
    unsafe { args.launch(config(plan)) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the dense kernel", e))
}

fn dense_quant_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &DenseQuantDev,
    plan: &CudaPlan,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let sc = &m.scales;
    let flags = sc.flags();
    let group = sc.group.unwrap_or(0);
    let mut args = stream.launch_builder(f);
    args.arg(m.q.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(sc.scales.buf())
        .arg(&flags)
        .arg(&group)
        .arg(&sc.mul)
        .arg(&sc.shift);
    // SAFETY: the arguments match `dense_q_*` in kernels/dense_quant.cu in order and type; q
    // holds rows·cols codes packed (padded to a 16-byte word), x cols halves, y rows elements,
    // scales one per row or one per `group` codes (group ≥ 8 whenever flags bit 5 is set); the
    // `_a16`, `_xs` and `_tc` entries run only when rows start on 16-byte boundaries and group
    // divides cols (`DenseQuantDev::layout`), so every index they compute stays inside the
    // arrays (`_tc` also only for groups of 32, 64 or a multiple of 128 int4 codes, per row, and
    // a grid of one block per 16 rows: its windows never cross a group); the plan's shared
    // memory holds x staged as f32 with its slack for `_xs` (quant.rs).
    unsafe { args.launch(config(plan)) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the dense int8/int4 kernel", e))
}
