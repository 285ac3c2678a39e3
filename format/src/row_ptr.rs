//! Rule 1 of the format (docs/FORMAT.md), shared by the MACKO and CSR layouts: a leaf module,
//! so that neither layout imports the other for it.

use crate::error::{FormatError, Result};

/// Rule 1 for MACKO and CSR alike; returns N = row_ptr[rows].
pub(crate) fn check_row_ptr(rows: usize, row_ptr: &[u32]) -> Result<usize> {
    let expected = rows.checked_add(1).ok_or(FormatError::ShapeTooLarge {
        rows,
        cols: 0,
        what: "rows + 1 overflows usize",
    })?;
    if row_ptr.len() != expected {
        return Err(FormatError::RowPtrLength {
            rows,
            expected,
            found: row_ptr.len(),
        });
    }
    if row_ptr[0] != 0 {
        return Err(FormatError::RowPtrStart { found: row_ptr[0] });
    }
    if let Some(row) = row_ptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(FormatError::RowPtrDecreasing {
            row,
            start: row_ptr[row],
            end: row_ptr[row + 1],
        });
    }
    Ok(row_ptr[rows] as usize)
}
