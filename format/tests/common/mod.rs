//! Helpers shared by the integration tests of macko-format (each test file uses a subset).
#![allow(dead_code)]

use macko_format::{f16, DenseMatrix};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Shorthand for a binary16 from an f32.
pub fn h(v: f32) -> f16 {
    f16::from_f32(v)
}

/// A non-zero binary16 drawn from a mix of ordinary, negative, subnormal and large values.
pub fn nonzero_value(rng: &mut StdRng) -> f16 {
    loop {
        let v = match rng.random_range(0..10) {
            0 => f16::from_bits(rng.random_range(1..0x0400)), // subnormal
            1 => h(rng.random_range(-60000.0..60000.0)),
            _ => h(rng.random_range(-4.0..4.0)),
        };
        if v.to_bits() & 0x7fff != 0 {
            return v;
        }
    }
}

/// A seeded random dense matrix: each element is non-zero with probability `density`.
pub fn random_dense(rows: usize, cols: usize, density: f64, seed: u64) -> DenseMatrix {
    let mut rng = StdRng::seed_from_u64(seed);
    let values = (0..rows * cols)
        .map(|_| {
            if rng.random_bool(density) {
                nonzero_value(&mut rng)
            } else {
                f16::ZERO
            }
        })
        .collect();
    DenseMatrix::new(rows, cols, values).unwrap()
}

/// Bit patterns of a slice of binary16 values (for bit-exact comparisons that NaN would defeat).
pub fn bits(v: &[f16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}
