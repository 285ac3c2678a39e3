//! The MACKO subgroup kernel with x gathered from memory instead of staged in workgroup memory
//! (`MACKO_WGPU_X_IN_WORKGROUP=0`, set before any device opens; this file is its own process, so
//! the setting reaches no other test). The staged path is covered by tests/wgpu_backend.rs.
#![cfg(feature = "wgpu")]

mod common;

use common::random_dense;

use half::f16;
use macko::{reference, BackendKind, Device, DeviceOptions, MackoMatrix, Precision};

#[test]
fn macko_agrees_with_x_gathered_from_memory() {
    std::env::set_var("MACKO_WGPU_X_IN_WORKGROUP", "0");
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
    assert!(!kernels.contains("stages x"), "{kernels}");
    for (i, &(rows, cols, d)) in [
        (1, 1, 1.0),
        (37, 1001, 0.3),
        (130, 4099, 0.7),
        (64, 96, 0.05),
    ]
    .iter()
    .enumerate()
    {
        let dense = random_dense(rows, cols, d, i as u64);
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
