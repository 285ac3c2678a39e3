//! Uploading matrices: each is planned once (`plan.rs`), laid out as its plan asks (whole rows
//! row-aligned, rows cut into segments, or entries cut into flat ranges) and copied to the
//! device with its plan.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use macko_format::aligned::align_rows;
use macko_format::{CsrMatrix, DenseMatrix, MackoMatrix};

use super::batch_plan::{batch_plans, BatchMatrix, BatchPlan};
use super::caps::CudaCaps;
use super::cursors;
use super::errors::internal;
use super::flat;
use super::memory::SplitDev;
use super::memory::{dim, kernel_descriptors, CsrDev, DenseDev, DeviceArray, FlatDev, MackoDev};
use super::plan::{self, CudaPlan, MackoStats};
use super::split;
use super::tuning::CudaTuning;
use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// The arrays of a MACKO matrix as an upload reads them.
pub(crate) struct MackoLayout<'a> {
    pub rows: usize,
    pub cols: usize,
    pub row_ptr: &'a [u32],
    /// 4-bit gap codes, two per byte.
    pub codes: &'a [u8],
    /// The value words as 16-bit units: binary16 values, or packed int8 / int4 codes.
    pub values: &'a [u16],
    /// The binary16 matrix itself (it may be laid out row-aligned and run the flat and
    /// few-token kernels), or None for quantized values.
    pub binary16: Option<&'a MackoMatrix>,
}

/// What an upload needs: the stream the copies are queued on, and what the plans depend on.
pub(crate) struct Uploader<'a> {
    pub stream: &'a Arc<CudaStream>,
    pub caps: &'a CudaCaps,
    pub tuning: &'a CudaTuning,
}

impl Uploader<'_> {
    /// A MACKO matrix with its plan: the flat kernel's ranges, the split rows' items, or whole
    /// rows row-aligned (macko_format::aligned: no batch then masks) where the row kernel runs
    /// on whole rows (split items and flat ranges start inside rows, so they keep the format's
    /// layout, as does a matrix whose aligned offsets would pass 32 bits).
    pub fn macko(&self, m: &MackoMatrix) -> Result<MackoDev> {
        let values: &[u16] = bytemuck::cast_slice(m.values());
        let layout = MackoLayout {
            rows: m.rows(),
            cols: m.cols(),
            row_ptr: m.row_ptr(),
            codes: m.codes(),
            values,
            binary16: Some(m),
        };
        self.macko_layout(&layout)
    }

    /// [`Uploader::macko`] for the arrays of `m`: the f16 matrix itself, or (`binary16` None)
    /// the row pointers and codes of a quantized one with its value words as `values`, planned
    /// without the flat kernel (which has no quantized entries) and kept in the format's
    /// layout (per-group scales index values in storage order; few-token plans are not made).
    pub fn macko_layout(&self, m: &MackoLayout<'_>) -> Result<MackoDev> {
        let (rows, cols) = (dim(m.rows, "rows")?, dim(m.cols, "columns")?);
        let mut stats = MackoStats::new(rows, cols, m.row_ptr);
        stats.rows_fit_flat &= m.binary16.is_some();
        let mut plan = plan::macko_plan(self.caps, self.tuning, &stats)?;
        let flat = if plan.flat {
            Some(self.flat(m.row_ptr, m.codes, &plan)?)
        } else {
            None
        };
        let split = match plan.split_entries {
            Some(seg) if !plan.flat => {
                let (split, items) = self.split(m.row_ptr, m.codes, seg)?;
                plan = plan::with_split_items(self.caps, self.tuning, &plan, items)?;
                Some(split)
            }
            _ => None,
        };
        let aligned = match m.binary16 {
            Some(f16) if flat.is_none() && split.is_none() => match align_rows(f16, 0..m.rows) {
                Ok(a) => Some(a),
                Err(macko_format::FormatError::AlignedTooLarge { .. }) => None,
                Err(e) => return Err(e.into()),
            },
            _ => None,
        };
        plan.aligned_rows = aligned.is_some();
        if m.binary16.is_none() {
            plan.batch = None;
        }
        let (row_ptr, values, codes) = match &aligned {
            Some(a) => (
                &a.row_ptr[..],
                bytemuck::cast_slice(&a.values),
                &a.codes[..],
            ),
            None => (m.row_ptr, m.values, m.codes),
        };
        let cursors = match (plan.batch, m.binary16) {
            (Some(b), Some(f16)) if b.0.iter().any(BatchPlan::tensor_cores) => {
                self.mma_cursors(&mut plan, row_ptr, codes, cols, f16.entries())?
            }
            _ => None,
        };
        Ok(MackoDev {
            rows,
            cols,
            row_ptr: DeviceArray::upload(self.stream, row_ptr, "MACKO row pointers")?,
            values: DeviceArray::upload(self.stream, values, "MACKO values")?,
            codes: DeviceArray::upload(self.stream, codes, "MACKO codes")?,
            plan,
            split,
            flat,
            cursors,
            quant: None,
            finite: m
                .binary16
                .is_some_and(|f16| f16.values().iter().all(|v| v.is_finite())),
        })
    }

    /// The tensor-core kernel's window cursors (`cursors.rs`), and the few-token plans again
    /// with the stage the cursors measured (the planner estimated it from the density): a
    /// width whose stages no longer fit goes to the CUDA-core kernels. `None` (no cursors kept)
    /// when no width stays on tensor cores.
    fn mma_cursors(
        &self,
        plan: &mut CudaPlan,
        row_ptr: &[u32],
        codes: &[u8],
        cols: u32,
        entries: usize,
    ) -> Result<Option<DeviceArray<u32>>> {
        let table = cursors::window_cursors(row_ptr, codes, cols)?;
        let stage = cursors::stage_groups(row_ptr, &table, cols);
        let rows = dim(row_ptr.len().saturating_sub(1), "rows")?;
        let m = BatchMatrix::Macko {
            entries: entries as u64,
            stage_groups: Some(stage),
        };
        let plans = batch_plans(self.caps, self.tuning, m, rows, cols)?;
        plan.batch = Some(plans);
        if !plans.0.iter().any(BatchPlan::tensor_cores) {
            return Ok(None);
        }
        DeviceArray::upload(self.stream, &table, "MACKO window cursors").map(Some)
    }

    /// Cuts the entries of `m` into the plan's ranges (one per resident warp of the flat
    /// kernel) and uploads the kernels' table of them.
    fn flat(&self, row_ptr: &[u32], codes: &[u8], plan: &CudaPlan) -> Result<Box<FlatDev>> {
        let table = flat::flat_ranges(row_ptr, codes, plan.flat_ranges as usize, plan.flat_snap)?;
        let ranges = u32::try_from(table.ranges()).map_err(|_| internal("flat ranges"))?;
        let cut_rows = u32::try_from(table.cut_rows()).map_err(|_| internal("flat cut rows"))?;
        // A buffer of no elements cannot be allocated: one unused entry stands in.
        let cut = if table.cut.is_empty() {
            vec![0u32; 4]
        } else {
            table.cut
        };
        Ok(Box::new(FlatDev {
            desc: DeviceArray::upload(self.stream, &table.desc, "MACKO flat ranges")?,
            cut: DeviceArray::upload(self.stream, &cut, "MACKO flat cut rows")?,
            partials: DeviceArray::zeros(self.stream, 2 * ranges as usize, "MACKO partial sums")?,
            ranges,
            cut_rows,
        }))
    }

    /// Cuts the rows of `m` into segments of `seg` entries and uploads the kernels' table of
    /// them; returns it with the number of items.
    fn split(&self, row_ptr: &[u32], codes: &[u8], seg: u32) -> Result<(SplitDev, u32)> {
        let table = split::split_rows(row_ptr, codes, seg)?;
        let desc = kernel_descriptors(&table).ok_or_else(|| internal("split table lengths"))?;
        let items = u32::try_from(table.items()).map_err(|_| internal("split items"))?;
        let split = SplitDev {
            desc: DeviceArray::upload(self.stream, &desc, "MACKO row segments")?,
            row_item: DeviceArray::upload(self.stream, &table.row_item, "MACKO row segments")?,
            partials: DeviceArray::zeros(self.stream, table.items(), "MACKO partial sums")?,
            items,
        };
        Ok((split, items))
    }

    /// A CSR matrix for macko's CSR kernel.
    pub fn csr(&self, m: &CsrMatrix) -> Result<CsrDev> {
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
        Ok(CsrDev {
            rows,
            cols,
            row_ptr: DeviceArray::upload(self.stream, m.row_ptr(), "CSR row pointers")?,
            col_idx: DeviceArray::upload(self.stream, m.col_idx(), "CSR column indices")?,
            values: DeviceArray::upload(self.stream, values, "CSR values")?,
            plan: plan::csr_plan(self.caps, self.tuning, rows, cols)?,
        })
    }

    /// A dense matrix for macko's GEMV, with its plan.
    pub fn dense(&self, m: &DenseMatrix) -> Result<(DenseDev, CudaPlan)> {
        let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
        let values: &[u16] = bytemuck::cast_slice(m.values());
        let dev = DenseDev {
            rows,
            cols,
            values: DeviceArray::upload(self.stream, values, "dense values")?,
        };
        Ok((dev, plan::dense_plan(self.caps, self.tuning, rows, cols)?))
    }
}
