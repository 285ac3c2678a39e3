//! Seeded synthetic pruned matrices and vectors, for the demo, the benchmarks and the examples:
//! unstructured random sparsity with exactly ⌊d·rows·cols⌋ non-zeros, values uniform in
//! ±[1/64, 1] (never zero where kept, so the count is exact).

use half::f16;
use macko_format::DenseMatrix;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::error::Result;

/// A kept weight: uniform magnitude in [1/64, 1], random sign.
fn weight(rng: &mut StdRng) -> f16 {
    let m: f32 = rng.random_range(1.0 / 64.0..=1.0);
    f16::from_f32(if rng.random::<bool>() { m } else { -m })
}

/// A `rows × cols` matrix with exactly ⌊density·rows·cols⌋ non-zeros at uniformly random
/// positions. Rows are drawn in parallel (each from its own seeded stream), then the count is
/// corrected by random single-element flips, so the result depends only on the arguments.
pub fn pruned_matrix(rows: usize, cols: usize, density: f64, seed: u64) -> Result<DenseMatrix> {
    let mut values = DenseMatrix::zeros(rows, cols)?.into_values();
    let density = density.clamp(0.0, 1.0);
    let total = values.len();
    let target = (density * total as f64).floor() as usize;
    if total == 0 {
        return Ok(DenseMatrix::new(rows, cols, values)?);
    }
    values
        .par_chunks_mut(cols)
        .enumerate()
        .for_each(|(r, row)| {
            let mut rng =
                StdRng::seed_from_u64(seed ^ (r as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            for v in row.iter_mut() {
                if rng.random::<f64>() < density {
                    *v = weight(&mut rng);
                }
            }
        });
    let mut count = values.par_iter().filter(|v| v.to_bits() != 0).count();
    let mut rng = StdRng::seed_from_u64(seed.rotate_left(17) ^ 0xa5a5);
    while count != target {
        let i = rng.random_range(0..total);
        let nonzero = values[i].to_bits() != 0;
        if count > target && nonzero {
            values[i] = f16::ZERO;
            count -= 1;
        } else if count < target && !nonzero {
            values[i] = weight(&mut rng);
            count += 1;
        }
    }
    Ok(DenseMatrix::new(rows, cols, values)?)
}

/// A seeded activation vector, uniform in [-1, 1].
pub fn activations(len: usize, seed: u64) -> Vec<f16> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0ac7_1fa7);
    (0..len)
        .map(|_| f16::from_f32(rng.random_range(-1.0..=1.0)))
        .collect()
}
