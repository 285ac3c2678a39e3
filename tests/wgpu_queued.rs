//! Queued products on the wgpu backend, each checked on its own: hundreds of products recorded
//! into one compute pass per submission (several submissions), on one matrix and on several,
//! MACKO, CSR and dense, f16 and f32 y, a product's y read as the next one's x, matrices split
//! into row blocks, and timed products (passes of their own) in between.
//!
//! Every product writes a y of its own, still zero before it runs, so a product that computed
//! no rows or only some (for instance because partial sums of x in column tiles leaked from one
//! product into the next: nothing clears them, see macko_sg.wgsl; one of the devices below
//! tiles x) shows as rows of zeros, never as the correct values a previous product left behind.
#![cfg(feature = "wgpu")]

mod common;

use common::{assert_agrees, open_or_skip, random_dense, random_x};

use half::f16;
use macko::{
    reference, BackendKind, CsrMatrix, DeviceOptions, DeviceVector, HostVector, MackoMatrix,
    Precision,
};

/// Subgroup kernels, workgroup-memory kernels, row blocks of at most 16 KiB (A below is split
/// into about ten blocks, B into several), and x in column tiles (each row's partial sums kept
/// between tiles).
fn configs() -> Vec<(String, macko::Device)> {
    let wgpu = DeviceOptions::for_backend(BackendKind::Wgpu);
    [
        ("wgpu", wgpu.clone()),
        (
            "wgpu without subgroups",
            DeviceOptions {
                wgpu_subgroups: false,
                ..wgpu.clone()
            },
        ),
        (
            "wgpu with 16 KiB bindings",
            DeviceOptions {
                max_binding_bytes: Some(16 << 10),
                ..wgpu.clone()
            },
        ),
        (
            "wgpu with x in column tiles of 128",
            DeviceOptions {
                tuning: {
                    let mut t = macko::Tuning::default();
                    t.wgpu.x_tile_cols = Some(128);
                    Some(t)
                },
                ..wgpu
            },
        ),
    ]
    .into_iter()
    .filter_map(|(label, opts)| open_or_skip(label, &opts).map(|d| (label.to_string(), d)))
    .collect()
}

/// What one queued product should give.
enum Want {
    /// y = M·x for a known host x.
    Direct(reference::Reference),
    /// y = B·(the f16 y of round `round`), known once that y is downloaded.
    Chained { round: usize },
}

#[test]
fn every_queued_product_computes_all_its_rows() {
    // A: 301 rows (odd, so the last f16 word of y is half used), B takes A's y as x.
    let a_dense = random_dense(301, 200, 0.5, 11);
    let a = MackoMatrix::from_dense(&a_dense).unwrap();
    let a_csr = CsrMatrix::from_dense(&a_dense).unwrap();
    let b = MackoMatrix::from_dense(&random_dense(150, 301, 0.3, 12)).unwrap();
    let d_dense = random_dense(40, 200, 0.7, 13);
    let xs: Vec<Vec<f16>> = (0..3).map(|s| random_x(200, 20 + s)).collect();
    let refs_a: Vec<_> = xs
        .iter()
        .map(|x| reference::spmv_macko(&a, x).unwrap())
        .collect();
    let refs_csr: Vec<_> = xs
        .iter()
        .map(|x| reference::spmv_csr(&a_csr, x).unwrap())
        .collect();
    let refs_dense: Vec<_> = xs
        .iter()
        .map(|x| reference::spmv_dense(&d_dense, x).unwrap())
        .collect();
    // 4 products a round: more than one submission's worth (256) in all.
    const ROUNDS: usize = 80;
    for (label, dev) in configs() {
        let (ad, bd) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
        let (cd, dd) = (dev.upload(&a_csr).unwrap(), dev.upload(&d_dense).unwrap());
        let xd: Vec<DeviceVector> = xs.iter().map(|x| dev.upload_vector(x).unwrap()).collect();
        let mut outputs: Vec<(String, DeviceVector, Want)> = Vec::new();
        let mut chain_from = Vec::new();
        for round in 0..ROUNDS {
            let k = round % 3;
            let p = if round % 2 == 0 {
                Precision::F32
            } else {
                Precision::F16
            };
            // A·x into an f16 y, which B then reads as its x.
            let mut y = dev.zeros(301, Precision::F16).unwrap();
            dev.spmv(&ad, &xd[k], &mut y).unwrap();
            let mut z = dev.zeros(150, p).unwrap();
            dev.spmv(&bd, &y, &mut z).unwrap();
            // The same rows as CSR, and a dense matrix, in between.
            let mut c = dev.zeros(301, p).unwrap();
            dev.spmv(&cd, &xd[k], &mut c).unwrap();
            let mut d = dev.zeros(40, p).unwrap();
            dev.spmv(&dd, &xd[k], &mut d).unwrap();
            chain_from.push(outputs.len());
            outputs.push((
                format!("round {round}: A·x{k}"),
                y,
                Want::Direct(refs_a[k].clone()),
            ));
            outputs.push((format!("round {round}: B·y"), z, Want::Chained { round }));
            outputs.push((
                format!("round {round}: A as CSR·x{k}"),
                c,
                Want::Direct(refs_csr[k].clone()),
            ));
            outputs.push((
                format!("round {round}: dense·x{k}"),
                d,
                Want::Direct(refs_dense[k].clone()),
            ));
            if round == ROUNDS / 2 {
                // Timed products record passes of their own; queued ones go on after them.
                let mut t = dev.zeros(301, Precision::F32).unwrap();
                let times = dev.time_spmv(&[&ad], &xd[0], &mut t, 2, 3).unwrap();
                assert_eq!(times.len(), 3, "{label}");
                outputs.push(("timed A·x0".into(), t, Want::Direct(refs_a[0].clone())));
            }
        }
        dev.synchronize().unwrap();
        let mut hosts: Vec<HostVector> = Vec::with_capacity(outputs.len());
        for (what, v, want) in &outputs {
            let got = dev.download(v).unwrap();
            let r = match want {
                Want::Direct(r) => r.clone(),
                Want::Chained { round } => {
                    let HostVector::F16(x) = &hosts[chain_from[*round]] else {
                        panic!("{label}, {what}: A's y is not f16");
                    };
                    reference::spmv_macko(&b, x).unwrap()
                }
            };
            assert_agrees(&label, what, &r, &got);
            hosts.push(got);
        }
    }
}
