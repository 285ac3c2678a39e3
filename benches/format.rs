//! Encoder benchmarks of macko-format: dense → MACKO-16-4 on an 11008×4096 matrix (a 7B-class
//! MLP projection) at densities 0.1 / 0.5 / 0.9, plus decoding to dense and validating
//! untrusted arrays (`from_parts`) at 0.5. Throughput is in bytes of dense binary16 input, so
//! the figures compare directly with the reference encoder's ~56 MB/s.
//!
//! Run: `cargo bench --bench format -- --warm-up-time 1 --measurement-time 5`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use macko_format::{f16, DenseMatrix, MackoMatrix};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const ROWS: usize = 11008;
const COLS: usize = 4096;

/// A seeded matrix whose elements are non-zero independently with probability `density`,
/// with values uniform in (−1, 1) like typical weights (a value that rounds to zero becomes 1).
fn random_dense(density: f64, seed: u64) -> DenseMatrix {
    let mut rng = StdRng::seed_from_u64(seed);
    let threshold = (density * f64::from(u32::MAX)) as u32;
    let values = (0..ROWS * COLS)
        .map(|_| {
            let draw = rng.random::<u64>();
            if (draw as u32) < threshold {
                let magnitude = f16::from_f32(((draw >> 32) as u32 >> 9) as f32 / 8_388_608.0);
                let v = if is_zero(magnitude) {
                    f16::ONE
                } else {
                    magnitude
                };
                if draw >> 63 == 1 {
                    -v
                } else {
                    v
                }
            } else {
                f16::ZERO
            }
        })
        .collect();
    DenseMatrix::new(ROWS, COLS, values).expect("shape matches")
}

fn is_zero(v: f16) -> bool {
    v.to_bits() & 0x7fff == 0
}

fn bench_encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode");
    group.sample_size(10);
    group.throughput(Throughput::Bytes((2 * ROWS * COLS) as u64));
    for density in [0.1, 0.5, 0.9] {
        let dense = random_dense(density, 42);
        group.bench_with_input(
            BenchmarkId::new("dense_to_macko_11008x4096", density),
            &dense,
            |b, dense| b.iter(|| MackoMatrix::from_dense(black_box(dense)).expect("encodes")),
        );
    }
    group.finish();
}

fn bench_decode_validate(c: &mut Criterion) {
    let dense = random_dense(0.5, 42);
    let m = MackoMatrix::from_dense(&dense).expect("encodes");
    let mut group = c.benchmark_group("decode");
    group.sample_size(10);
    group.throughput(Throughput::Bytes((2 * ROWS * COLS) as u64));
    group.bench_function(BenchmarkId::new("macko_to_dense_11008x4096", 0.5), |b| {
        b.iter(|| black_box(&m).to_dense().expect("decodes"))
    });
    // Validation of untrusted arrays; the clone that hands them over is setup, not timed.
    group.bench_function(BenchmarkId::new("from_parts_11008x4096", 0.5), |b| {
        b.iter_batched(
            || m.clone().into_parts(),
            |(row_ptr, values, codes)| {
                MackoMatrix::from_parts(ROWS, COLS, row_ptr, values, codes).expect("valid")
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_encode, bench_decode_validate);
criterion_main!(benches);
