//! 2:4 structured sparsity (docs/FORMAT.md, "2:4 structured sparsity"): every aligned group of
//! four columns of a row keeps at most two values, stored as exactly two binary16 values and
//! the two columns' positions in the group (2 bits each, one 4-bit nibble per group). That is
//! 4.5 bytes per 8 weights, 0.5625 of dense binary16, the layout NVIDIA's sparse tensor cores
//! read (reordered for them at upload).
//!
//! ```
//! use macko_format::{f16, DenseMatrix, Sparse24Matrix};
//!
//! // One row of 6 columns: groups [1, 0, 3, 2] and [0, 5, _, _] (columns 6 and 7 are padding).
//! let w: Vec<f16> = [1.0, 0.0, 3.0, 2.0, 0.0, 5.0].map(f16::from_f32).to_vec();
//! let m = Sparse24Matrix::prune_from_dense(&DenseMatrix::new(1, 6, w)?)?;
//! // The two largest |w| of each group, lower column first among ties.
//! assert_eq!(m.row_entries(0).collect::<Vec<_>>(), [
//!     (2, f16::from_f32(3.0)), (3, f16::from_f32(2.0)),
//!     (4, f16::ZERO), (5, f16::from_f32(5.0)),
//! ]);
//! assert_eq!(m.storage_bytes(), 2 * 2 * 2 + 1); // 4 values, 2 nibbles
//! # Ok::<(), macko_format::FormatError>(())
//! ```

use half::f16;

use crate::dense::{element_count, is_zero, DenseMatrix};
use crate::error::{FormatError, Result};

/// Columns per group.
pub const GROUP24: usize = 4;
/// Values kept (and stored) per group.
pub const KEPT24: usize = 2;

/// A 2:4 sparse matrix: per row, ⌈cols / 4⌉ groups, each two values (`values[2g]`,
/// `values[2g + 1]` for group g in row-major group order) at the positions of nibble g of
/// `meta` (byte g / 2, the low nibble for even g: bits 0–1 the first position, bits 2–3 the
/// second, first < second). Positions at or past `cols` in a row's last group are padding and
/// hold zero values.
#[derive(Debug, Clone)]
pub struct Sparse24Matrix {
    rows: usize,
    cols: usize,
    values: Vec<f16>,
    meta: Vec<u8>,
}

/// Equal when every array is the same, the values bit for bit (a stored NaN equals itself).
impl PartialEq for Sparse24Matrix {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
            && self.cols == other.cols
            && self.meta == other.meta
            && crate::dense::same_bits(&self.values, &other.values)
    }
}

impl Eq for Sparse24Matrix {}

/// Groups per row of a matrix of `cols` columns.
pub fn groups_per_row(cols: usize) -> usize {
    cols.div_ceil(GROUP24)
}

/// The nibble of a group whose kept positions are `first < second`.
fn nibble(first: usize, second: usize) -> u8 {
    (first | (second << 2)) as u8
}

/// The two positions of a group's nibble.
fn positions(n: u8) -> (usize, usize) {
    ((n & 3) as usize, ((n >> 2) & 3) as usize)
}

/// The groups of a `rows × cols` matrix, checked against usize.
fn group_count(rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(groups_per_row(cols))
        .filter(|g| g.checked_mul(KEPT24).is_some())
        .ok_or(FormatError::ShapeTooLarge {
            rows,
            cols,
            what: "the 2:4 groups overflow usize",
        })
}

/// The positions (in the group) of the two values to keep among `w` (the group's weights,
/// columns past the row's end given as +0): the two largest |w|, the lower column first among
/// equals, NaN above every number; returned in column order.
fn keep_two(w: [f16; GROUP24]) -> (usize, usize) {
    let mut order = [0usize, 1, 2, 3];
    // Stable: equal magnitudes keep their column order.
    order.sort_by(|&a, &b| w[b].to_f32().abs().total_cmp(&w[a].to_f32().abs()));
    let (a, b) = (order[0], order[1]);
    (a.min(b), a.max(b))
}

impl Sparse24Matrix {
    /// Validates untrusted arrays against every rule of the layout (docs/FORMAT.md, "2:4
    /// structured sparsity"); each broken rule is its own typed error naming the bad value.
    pub fn from_parts(rows: usize, cols: usize, values: Vec<f16>, meta: Vec<u8>) -> Result<Self> {
        element_count(rows, cols)?;
        let groups = group_count(rows, cols)?;
        let lengths = [
            ("values (two per group)", groups * KEPT24, values.len()),
            (
                "metadata (a nibble per group)",
                groups.div_ceil(2),
                meta.len(),
            ),
        ];
        for (what, expected, found) in lengths {
            if expected != found {
                return Err(FormatError::Sparse24Length {
                    what,
                    expected,
                    found,
                });
            }
        }
        if groups % 2 == 1 && meta[groups / 2] >> 4 != 0 {
            return Err(FormatError::Sparse24SpareNibble {
                found: meta[groups / 2] >> 4,
            });
        }
        let m = Self {
            rows,
            cols,
            values,
            meta,
        };
        for g in 0..groups {
            m.check_group(g)?;
        }
        Ok(m)
    }

    /// Rules of group `g`: positions increasing, padding positions holding zeros.
    fn check_group(&self, g: usize) -> Result<()> {
        let per_row = groups_per_row(self.cols);
        let (row, group) = (g / per_row, g % per_row);
        let (first, second) = positions(self.nibble(g));
        if first >= second {
            return Err(FormatError::Sparse24Positions {
                row,
                group,
                first,
                second,
            });
        }
        for (k, p) in [first, second].into_iter().enumerate() {
            let col = group * GROUP24 + p;
            let v = self.values[g * KEPT24 + k];
            if col >= self.cols && !is_zero(v) {
                return Err(FormatError::Sparse24PaddingNotZero {
                    row,
                    col,
                    bits: v.to_bits(),
                });
            }
        }
        Ok(())
    }

    /// The 2:4 matrix holding exactly `dense`'s non-zeros; a group with more than two non-zeros
    /// is an error naming it (prune with [`Sparse24Matrix::prune_from_dense`] instead). Zeros
    /// fill the groups with fewer, at their lowest columns. `to_dense` gives `dense` back, up to
    /// the sign of zeros that were not stored.
    pub fn from_dense(dense: &DenseMatrix) -> Result<Self> {
        Self::encode(dense, true)
    }

    /// Prunes `dense` to 2:4: each group of four keeps its two largest |w| (the lower column
    /// first among equals; NaN counts as the largest), the others become zero.
    pub fn prune_from_dense(dense: &DenseMatrix) -> Result<Self> {
        Self::encode(dense, false)
    }

    fn encode(dense: &DenseMatrix, exact: bool) -> Result<Self> {
        let (rows, cols) = (dense.rows(), dense.cols());
        let groups = group_count(rows, cols)?;
        let per_row = groups_per_row(cols);
        let mut values = Vec::with_capacity(groups * KEPT24);
        let mut meta = vec![0u8; groups.div_ceil(2)];
        for r in 0..rows {
            let row = dense.row(r);
            for j in 0..per_row {
                let mut w = [f16::ZERO; GROUP24];
                for (k, slot) in w.iter_mut().enumerate() {
                    if let Some(&v) = row.get(j * GROUP24 + k) {
                        *slot = v;
                    }
                }
                let nonzeros = w.iter().filter(|v| !is_zero(**v)).count();
                if exact && nonzeros > KEPT24 {
                    return Err(FormatError::Not24 {
                        row: r,
                        group: j,
                        nonzeros,
                    });
                }
                let (first, second) = keep_two(w);
                values.push(w[first]);
                values.push(w[second]);
                let g = r * per_row + j;
                meta[g / 2] |= nibble(first, second) << (4 * (g % 2));
            }
        }
        Ok(Self {
            rows,
            cols,
            values,
            meta,
        })
    }

    /// The dense matrix: stored values at their columns, +0 elsewhere.
    pub fn to_dense(&self) -> Result<DenseMatrix> {
        let mut out = vec![f16::ZERO; element_count(self.rows, self.cols)?];
        for r in 0..self.rows {
            for (c, v) in self.row_entries(r) {
                if c < self.cols {
                    out[r * self.cols + c] = v;
                }
            }
        }
        DenseMatrix::new(self.rows, self.cols, out)
    }

    /// The stored entries of row `r` as (column, value), in column order, padding positions of
    /// the last group included (their columns are `cols` or more, their values zero).
    pub fn row_entries(&self, r: usize) -> impl Iterator<Item = (usize, f16)> + '_ {
        let per_row = groups_per_row(self.cols);
        (0..per_row).flat_map(move |j| {
            let g = r * per_row + j;
            let (first, second) = positions(self.nibble(g));
            [
                (j * GROUP24 + first, self.values[g * KEPT24]),
                (j * GROUP24 + second, self.values[g * KEPT24 + 1]),
            ]
        })
    }

    /// The metadata nibble of group `g` (row-major).
    fn nibble(&self, g: usize) -> u8 {
        (self.meta[g / 2] >> (4 * (g % 2))) & 0xf
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Two values per group, row-major groups.
    pub fn values(&self) -> &[f16] {
        &self.values
    }

    /// A nibble per group (low nibble first), the positions of its two values.
    pub fn meta(&self) -> &[u8] {
        &self.meta
    }

    /// Bytes stored: the values and the metadata.
    pub fn storage_bytes(&self) -> usize {
        self.values.len() * 2 + self.meta.len()
    }

    /// [`Sparse24Matrix::storage_bytes`] as u64, the unit the other formats' `bytes()` use
    /// (what a product must read, vectors aside).
    pub fn bytes(&self) -> u64 {
        self.storage_bytes() as u64
    }
}
