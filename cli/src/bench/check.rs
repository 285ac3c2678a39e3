//! The check of every measured product before it is timed: the f64 reference of sampled rows
//! of each vector, and the first sampled row a device's result disagrees with.

use half::f16;
use macko::{MatrixRef, Precision};

/// Evenly spaced rows to check, first and last included (`n` = 0: every row; `n` = 1: the
/// first and the last, which an even spacing needs at least).
pub(super) fn sample_rows(rows: usize, n: usize) -> Vec<usize> {
    let n = if n == 0 { rows } else { n.max(2) };
    if rows <= n {
        return (0..rows).collect();
    }
    let mut v: Vec<usize> = (0..n).map(|i| i * (rows - 1) / (n - 1)).collect();
    v.dedup();
    v
}

/// The f64 reference of one sampled row: `(value, Σ|terms|, terms)`.
pub(super) type RowRef = (f64, f64, usize);

/// The f64 reference of the sampled rows of each of `batch` vectors (`x` holds them row-major,
/// `[batch][cols]`): entry `b` is [`reference_rows`] of vector `b`, which is what
/// `macko::reference::spmm` gives at those rows (a unit test checks it). The vectors are worked
/// on in parallel: at B = 16 on the largest shapes this is the bench's own hot spot.
pub(super) fn reference_batch(
    m: MatrixRef<'_>,
    x: &[f16],
    batch: usize,
    rows: &[usize],
) -> Vec<Vec<RowRef>> {
    let cols = m.cols().max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = x
            .chunks(cols)
            .take(batch)
            .map(|xb| s.spawn(move || reference_rows(m, xb, rows)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// The f64 reference of the sampled rows, as `(value, Σ|terms|, terms)` per sampled row.
pub(super) fn reference_rows(m: MatrixRef<'_>, x: &[f16], rows: &[usize]) -> Vec<RowRef> {
    let one = |terms: &mut dyn Iterator<Item = f64>| {
        let (mut y, mut abs, mut n) = (0.0, 0.0, 0usize);
        for t in terms {
            y += t;
            abs += t.abs();
            n += 1;
        }
        (y, abs, n)
    };
    rows.iter()
        .map(|&r| match m {
            MatrixRef::Macko(a) => one(&mut a
                .row_entries(r)
                .filter(|(_, v)| !macko::format::is_zero(*v))
                .map(|(c, v)| v.to_f64() * x[c].to_f64())),
            MatrixRef::Csr(a) => one(&mut a
                .row_range(r)
                .filter(|&i| !macko::format::is_zero(a.values()[i]))
                .map(|i| a.values()[i].to_f64() * x[a.col_idx()[i] as usize].to_f64())),
            MatrixRef::Dense(a) => one(&mut a
                .row(r)
                .iter()
                .zip(x)
                .map(|(v, xv)| v.to_f64() * xv.to_f64())),
            // A zero weight makes every entry a stored zero, which contributes nothing.
            MatrixRef::HomogeneousCsr(a) => one(&mut a
                .row_columns(r)
                .filter(|_| !a.is_zero_weight())
                .map(|c| a.weight().to_f64() * x[c].to_f64())),
            // Zero values (fill and padding, whose columns lie past x) contribute nothing.
            MatrixRef::Sparse24(a) => one(&mut a
                .row_entries(r)
                .filter(|(_, v)| !macko::format::is_zero(*v))
                .map(|(c, v)| v.to_f64() * x[c].to_f64())),
            // Quantized values count each term twice, as `reference::spmv_macko_quant` does
            // (scale · q · x may round once more in f32).
            MatrixRef::MackoQuant(a) => {
                let (y, abs, n) = one(&mut a
                    .row_entries(r)
                    .filter(|(_, v)| *v != 0.0)
                    .map(|(c, v)| v * x[c].to_f64()));
                (y, abs, 2 * n)
            }
            MatrixRef::DenseQuant(a) => {
                let (y, abs, n) = one(&mut (0..a.cols()).map(|c| a.value(r, c) * x[c].to_f64()));
                (y, abs, 2 * n)
            }
        })
        .collect()
}

/// One kernel to measure on one device.
/// The first sampled row of `got` (Y of `batch` vectors, `[batch][rows]`) that disagrees with
/// its reference, as a message.
pub(super) fn first_wrong(
    got: &[f64],
    rows: usize,
    sample: &[usize],
    reference: &[Vec<RowRef>],
) -> Option<String> {
    for (b, refs) in reference.iter().enumerate() {
        for (&r, &(want, abs, n)) in sample.iter().zip(refs) {
            let v = got.get(b * rows + r).copied().unwrap_or(f64::NAN);
            if !macko::reference::agrees(v, want, abs, n, Precision::F16) {
                return Some(format!(
                    "vector {b}, row {r}: got {v}, reference {want} (tolerance {:e})",
                    macko::reference::tolerance(want, abs, n, Precision::F16)
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::sample_rows;

    /// Every count gives sorted rows inside the matrix, the first and last among them; 0 and
    /// counts at least the rows give every row; 1 (which once divided by zero) gives two.
    #[test]
    fn sampled_rows_cover_the_ends_for_every_count() {
        assert_eq!(sample_rows(10, 0), (0..10).collect::<Vec<_>>());
        assert_eq!(sample_rows(10, 1), vec![0, 9]);
        assert_eq!(sample_rows(1, 1), vec![0]);
        assert_eq!(sample_rows(0, 1), Vec::<usize>::new());
        assert_eq!(sample_rows(10, 10), (0..10).collect::<Vec<_>>());
        for rows in 1..40 {
            for n in 1..45 {
                let v = sample_rows(rows, n);
                assert_eq!(v.first(), Some(&0));
                assert_eq!(v.last(), Some(&(rows - 1)));
                assert!(v.windows(2).all(|w| w[0] < w[1]), "{rows} {n} {v:?}");
                assert!(v.len() <= n.max(2));
            }
        }
    }
}
