//! The MACKO subgroup kernel in its non-default shapes: two sets of 4 groups per step instead of
//! one, x staged as f32 instead of f16 pairs, swizzled, in workgroups of 128, and a grid of
//! only 3 workgroups (so every subgroup works through many rows and the counter hands out rows
//! far beyond one pass). The settings are environment variables read when a device opens; this
//! file is its own process, so they reach no other test. The defaults are covered by
//! tests/wgpu_backend.rs and tests/agreement.rs.
#![cfg(feature = "wgpu")]

mod common;

use common::random_dense;

use half::f16;
use macko::{reference, BackendKind, Device, DeviceOptions, MackoMatrix, Precision};

#[test]
fn macko_agrees_in_every_tuning_of_the_subgroup_kernel() {
    std::env::set_var("MACKO_WGPU_MACKO_DEPTH", "2");
    std::env::set_var("MACKO_WGPU_X_F32", "1");
    std::env::set_var("MACKO_WGPU_X_SWIZZLE", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUP", "128");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let required = std::env::var("MACKO_REQUIRE_BACKENDS")
        .unwrap_or_default()
        .split(',')
        .any(|s| s.trim().eq_ignore_ascii_case("wgpu"));
    let dev = match Device::with_options(&DeviceOptions::for_backend(BackendKind::Wgpu)) {
        Ok(d) => d,
        Err(e) if required => panic!("wgpu is required but unavailable: {e}"),
        Err(e) => {
            println!("skipping: {e}");
            return;
        }
    };
    let kernels = &dev
        .info()
        .properties
        .iter()
        .find(|(k, _)| k == "kernels")
        .expect("kernels property")
        .1;
    println!("{}: {kernels}", dev.describe());
    if !kernels.contains("subgroup operations") {
        println!("skipping: no subgroup path on this adapter");
        return;
    }
    assert!(kernels.contains("workgroups of 128, 2 x 4"), "{kernels}");
    assert!(kernels.contains("swizzled"), "{kernels}");
    assert!(kernels.contains("at most 3 workgroups"), "{kernels}");
    for (i, &(rows, cols, d)) in [
        (1, 1, 1.0),
        (37, 1001, 0.3),
        (130, 4099, 0.7),
        (300, 2000, 1.0),
        (64, 96, 0.05),
        (5, 9000, 0.5),
    ]
    .iter()
    .enumerate()
    {
        let dense = random_dense(rows, cols, d, 100 + i as u64);
        let m = MackoMatrix::from_dense(&dense).unwrap();
        let x: Vec<f16> = (0..cols)
            .map(|c| f16::from_f32(((c % 13) as f32 - 6.0) / 8.0))
            .collect();
        let r = reference::spmv_macko(&m, &x).unwrap();
        let a = dev.upload(&m).unwrap();
        let xd = dev.upload_vector(&x).unwrap();
        for p in [Precision::F16, Precision::F32] {
            let mut y = dev.zeros(rows, p).unwrap();
            dev.spmv(&a, &xd, &mut y).unwrap();
            let got = dev.download(&y).unwrap();
            if let Some((row, g, want, tol)) = r.first_disagreement(&got.to_f64(), p) {
                panic!("{rows}×{cols} d={d} {p:?}: row {row} is {g}, reference {want} (±{tol:e})");
            }
        }
    }
}
