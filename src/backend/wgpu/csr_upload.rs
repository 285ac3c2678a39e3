//! The uploads of CSR and homogeneous CSR matrices: one layout (row blocks of rebased row
//! pointers, columns and values, read by the csr_* kernels), the values either one binary16 per
//! entry or, for homogeneous CSR, the one weight (shaders/csr.wgsl, `HOMOGENEOUS`).

use macko_format::{CsrMatrix, HomogeneousCsrMatrix, MatrixKind};

use crate::error::Result;

use super::backend::WgpuBackend;
use super::memory::{plan_sparse_blocks, to_u32, GpuMatrix, MatrixParams};

/// The values of a CSR matrix as uploaded: one binary16 per entry (CSR), or one weight for
/// every entry (homogeneous CSR, its binary16 bits in the low half of the word).
#[derive(Clone, Copy)]
enum CsrValues<'a> {
    PerEntry(&'a [u8]),
    One(u32),
}

/// What `upload_csr_parts` uploads: CSR's arrays, borrowed from a CSR or homogeneous CSR
/// matrix.
struct CsrParts<'a> {
    format: MatrixKind,
    rows: usize,
    cols: usize,
    row_ptr: &'a [u32],
    col_idx: &'a [u32],
    values: CsrValues<'a>,
}

impl WgpuBackend {
    pub(super) fn upload_csr(&self, m: &CsrMatrix) -> Result<GpuMatrix> {
        let values: &[u8] = bytemuck::cast_slice(m.values());
        let parts = CsrParts {
            format: MatrixKind::Csr,
            rows: m.rows(),
            cols: m.cols(),
            row_ptr: m.row_ptr(),
            col_idx: m.col_idx(),
            values: CsrValues::PerEntry(values),
        };
        self.upload_csr_parts(parts)
    }

    /// A homogeneous CSR matrix: CSR's row pointers and columns, and in place of the values
    /// one word holding the weight (shaders/csr.wgsl, `HOMOGENEOUS`), in every block.
    pub(super) fn upload_homogeneous_csr(&self, m: &HomogeneousCsrMatrix) -> Result<GpuMatrix> {
        let parts = CsrParts {
            format: MatrixKind::HomogeneousCsr,
            rows: m.rows(),
            cols: m.cols(),
            row_ptr: m.row_ptr(),
            col_idx: m.col_idx(),
            values: CsrValues::One(u32::from(m.weight().to_bits())),
        };
        self.upload_csr_parts(parts)
    }

    fn upload_csr_parts(&self, m: CsrParts<'_>) -> Result<GpuMatrix> {
        let plan = self.plan_for(m.format, m.rows, m.cols, 0);
        let row_ptr = m.row_ptr;
        let name = match m.values {
            CsrValues::PerEntry(_) => "CSR",
            CsrValues::One(_) => "homogeneous CSR",
        };
        let blocks_rows = plan_sparse_blocks(row_ptr, 2, 4, 4, self.matrix_limit, name)?;
        let partials = self.partials(0)?;
        let cols: &[u8] = bytemuck::cast_slice(m.col_idx);
        let weight = match m.values {
            CsrValues::One(w) => w,
            CsrValues::PerEntry(_) => 0,
        };
        let mut blocks = Vec::with_capacity(blocks_rows.len());
        for (slot, rows) in blocks_rows.into_iter().enumerate() {
            // Entries of the block from an even one, so f16 pairs keep their u32 words.
            let base = row_ptr[rows.start] as usize & !1;
            let end = row_ptr[rows.end] as usize;
            let rebased: Vec<u32> = row_ptr[rows.start..=rows.end]
                .iter()
                .map(|&p| p - base as u32)
                .collect();
            let mut params = MatrixParams::block(
                to_u32(rows.len(), "rows of a block")?,
                m.cols as u32,
                to_u32(rows.start, "first row of a block")?,
            );
            params.slot = to_u32(slot, "block index")?;
            // The whole matrix's rows, which the transposed kernels cut a dense x's rows by
            // (transposed.wgsl).
            params.stride = m.rows as u32;
            let values = match m.values {
                CsrValues::PerEntry(v) => &v[2 * base..2 * end],
                CsrValues::One(_) => bytemuck::bytes_of(&weight),
            };
            blocks.push(self.sparse_block(
                &plan,
                params,
                &rebased,
                values,
                &cols[4 * base..4 * end],
                &partials,
                name,
            )?);
        }
        Ok(GpuMatrix {
            plan,
            rows: m.rows,
            blocks,
            _partials: Some(partials),
            batch: self.batch_state(m.rows, m.cols),
        })
    }
}
