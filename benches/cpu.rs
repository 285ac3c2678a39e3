//! CPU products at 11008×4096 (a LLaMA-7B MLP weight): MACKO-16-4, CSR and dense, at densities
//! 0.1/0.3/0.5/0.7, through the public `Device` API on the CPU backend. Throughput is reported
//! in GB/s of the dense f16 matrix (the same for every format), so the figures compare directly:
//! higher is faster.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use macko::{synthetic, BackendKind, CsrMatrix, Device, MackoMatrix, MatrixRef, Precision};

const ROWS: usize = 11008;
const COLS: usize = 4096;

fn products(c: &mut Criterion) {
    let dev = Device::new(BackendKind::Cpu).expect("the CPU backend always opens");
    let x = dev
        .upload_vector(&synthetic::activations(COLS, 1))
        .expect("upload x");
    let mut y = dev.zeros(ROWS, Precision::F16).expect("alloc y");
    let mut group = c.benchmark_group("cpu_spmv_11008x4096");
    group.throughput(Throughput::Bytes(2 * (ROWS * COLS) as u64));
    group.sample_size(20);
    for density in [0.1, 0.3, 0.5, 0.7] {
        let dense = synthetic::pruned_matrix(ROWS, COLS, density, 7).expect("matrix");
        let macko = MackoMatrix::from_dense(&dense).expect("encode");
        let csr = CsrMatrix::from_dense(&dense).expect("csr");
        let formats: [(&str, MatrixRef); 3] = [
            ("macko", (&macko).into()),
            ("csr", (&csr).into()),
            ("dense", (&dense).into()),
        ];
        for (name, m) in formats {
            if name == "dense" && density != 0.5 {
                continue; // dense time does not depend on density
            }
            let a = dev.upload(m).expect("upload");
            group.bench_with_input(BenchmarkId::new(name, density), &a, |b, a| {
                b.iter(|| dev.spmv(a, &x, &mut y).expect("spmv"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, products);
criterion_main!(benches);
