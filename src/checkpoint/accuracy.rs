//! How far a stored (quantized) matrix's products are from those of the f16 weights it was made
//! from: the one measurement `convert --quantize` records and `verify --against` recomputes, so
//! that the promise and its check can never drift apart.

use half::f16;
use macko_format::{reference, DenseMatrix, MatrixRef};
use rayon::prelude::*;

use super::file::Result;
use super::products::activation_like;

/// Number of activation vectors the error is measured on: enough that one unlucky vector does
/// not decide it, few enough that the f64 reference products stay cheap beside the conversion.
pub const ERROR_VECTORS: u64 = 4;

/// Seed of the first activation vector (vector `i` uses `ERROR_SEED + i`). Part of what a
/// recorded `rel_error` means: `verify` must multiply by exactly the vectors `convert` did.
pub const ERROR_SEED: u64 = 24;

/// The activation vectors of length `cols` that [`relative_error`] multiplies by: standard
/// normal binary16 values with a few outlier channels ([`activation_like`]), seeded
/// deterministically, so the same matrix always gives the same error.
pub fn error_vectors(cols: usize) -> Vec<Vec<f16>> {
    (0..ERROR_VECTORS)
        .map(|i| activation_like(cols, ERROR_SEED + i))
        .collect()
}

/// The relative error of the stored matrix's products against the f16 weights:
/// ‖Y_stored − Y‖_F / ‖Y‖_F over the [`error_vectors`] (Y = W·X, one column per vector), both
/// products exact f64 references ([`reference::spmv_dense`] for `weights`,
/// [`reference::spmv`] for `stored`, which uses the exact `scale · q` of quantized values).
///
/// Pooling the vectors (rather than averaging per-vector errors) weighs each output by its
/// size, as a model's next layer does. When every product of `weights` is zero the absolute
/// error ‖Y_stored‖_F is returned instead (0 for an all-zero stored matrix), so the result is
/// always finite for finite inputs.
///
/// `weights` must be the matrix `stored` was encoded from (after any pruning): the result then
/// isolates what quantization changed. Shapes that differ are an error naming both.
pub fn relative_error(stored: MatrixRef<'_>, weights: &DenseMatrix) -> Result<f64> {
    if stored.shape() != (weights.rows(), weights.cols()) {
        return Err(macko_format::FormatError::Container {
            context: "relative error".into(),
            message: format!(
                "the stored matrix is {}×{} but the weights are {}×{}",
                stored.rows(),
                stored.cols(),
                weights.rows(),
                weights.cols()
            ),
        }
        .into());
    }
    let sums = error_vectors(weights.cols())
        .par_iter()
        .map(|x| -> Result<(f64, f64)> {
            let want = reference::spmv_dense(weights, x)?;
            let got = reference::spmv(stored, x)?;
            Ok(got
                .y
                .iter()
                .zip(&want.y)
                .fold((0.0, 0.0), |(diff, norm), (g, w)| {
                    (diff + (g - w) * (g - w), norm + w * w)
                }))
        })
        .collect::<Result<Vec<_>>>()?;
    // Summed in vector order, not in rayon's: the same inputs give the same bits every time.
    let (diff, norm) = sums
        .iter()
        .fold((0.0, 0.0), |(d, n), (vd, vn)| (d + vd, n + vn));
    Ok(if norm > 0.0 {
        (diff / norm).sqrt()
    } else {
        diff.sqrt()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use macko_format::{MackoMatrix, QuantMackoMatrix, Quantization};

    fn weights(rows: usize, cols: usize) -> DenseMatrix {
        let values = (0..rows * cols)
            .map(|i| f16::from_f32(((i * 7919 % 613) as f32 - 306.0) / 200.0))
            .collect();
        DenseMatrix::new(rows, cols, values).expect("weights")
    }

    #[test]
    fn an_exact_copy_has_no_error_and_quantization_some() {
        let w = weights(16, 96);
        let m = MackoMatrix::from_dense(&w).expect("encode");
        assert_eq!(relative_error((&m).into(), &w).expect("error"), 0.0);
        let q8 = QuantMackoMatrix::quantize(&m, Quantization::int8_per_row()).expect("q8");
        let q4 = QuantMackoMatrix::quantize(&m, Quantization::int4_per_group(32)).expect("q4");
        let e8 = relative_error((&q8).into(), &w).expect("error");
        let e4 = relative_error((&q4).into(), &w).expect("error");
        assert!(e8 > 0.0 && e8 < 1e-2, "int8: {e8}");
        assert!(e4 > e8 && e4 < 0.2, "int4: {e4}");
        // Deterministic: the same bits again.
        assert_eq!(relative_error((&q4).into(), &w).expect("error"), e4);
    }

    #[test]
    fn zero_weights_give_the_absolute_error_and_shapes_must_match() {
        let zero = DenseMatrix::new(2, 8, vec![f16::ZERO; 16]).expect("zero");
        let m = MackoMatrix::from_dense(&zero).expect("encode");
        assert_eq!(relative_error((&m).into(), &zero).expect("error"), 0.0);
        let other = weights(3, 8);
        let e = relative_error((&m).into(), &other);
        assert!(
            e.is_err_and(|e| e.to_string().contains("2×8") && e.to_string().contains("3×8")),
            "shape mismatch must be named"
        );
    }
}
