//! Every plan a backend can be forced into, in one process: for each entry of a backend's
//! `forced_plans()` (split rows, tiled x, the lean kernel, the workgroup path, …) a device is
//! opened with that tuning, and every matrix of the suite must agree with the f64 reference in
//! f16 and f32 output. The typed plan of each upload is read back ([`Device::plan`]): a forced
//! plan that is never taken fails the test, so a tuning that silently falls back to the default
//! cannot pass for coverage.
//!
//! The default plans are covered by tests/agreement.rs; this suite covers the others, which the
//! rules pick only on shapes too large for a test (or only on some GPUs). The CUDA plans run
//! through one generic loop here; the wgpu plans (wgpu.rs) run one test each, in parallel, each
//! on the shapes that walk the paths its plan changes, because lavapipe builds every pipeline
//! in about a second.

// The generic loop serves the CUDA plans; without the cuda feature only wgpu.rs runs.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

#[path = "../common/mod.rs"]
mod common;
#[cfg(feature = "wgpu")]
mod wgpu;

use common::*;
use half::f16;
use macko::{
    reference, BackendKind, Device, DeviceOptions, DeviceVector, ForcedPlan, MackoMatrix, Plan,
    Precision, QuantMackoMatrix, Quantization,
};

/// Besides the knob shapes (one entry, short and long rows, nearly dense rows, a very sparse
/// matrix): an x wider than most staging limits, and many rows for the grid's later passes.
const MORE_SHAPES: [(usize, usize, f64); 2] = [(200, 12288, 0.1), (2500, 256, 0.5)];

/// Multiplies every shape on `dev`, checks each against the reference, and says whether the
/// forced plan was taken on at least one of them.
fn products_agree_and_plan_taken<P>(
    label: &str,
    dev: &Device,
    plan_of: fn(&Plan) -> Option<&P>,
    taken: fn(&P) -> bool,
) -> bool {
    let mut seen = false;
    for (i, &(rows, cols, d)) in KNOB_SHAPES.iter().chain(&MORE_SHAPES).enumerate() {
        let seed = 500 + i as u64;
        let m = MackoMatrix::from_dense(&random_dense(rows, cols, d, seed)).unwrap();
        let x = random_x(cols, seed);
        let r = reference::spmv_macko(&m, &x).unwrap();
        let a = dev.upload(&m).unwrap();
        let plan = dev.plan(&a).unwrap();
        let own = plan_of(&plan).unwrap_or_else(|| panic!("{label}: a foreign plan {plan:?}"));
        seen |= taken(own);
        let x_dev = dev.upload_vector(&x).unwrap();
        // A few-token product too (odd, one chunk of width 8), for the plans of batches.
        let batch = 5;
        let xb = random_batch(cols, batch, seed);
        let rb = reference::spmm((&m).into(), &xb, batch).unwrap();
        let xb_dev = dev.upload_batch(&xb, batch).unwrap();
        for precision in [Precision::F16, Precision::F32] {
            let mut y = dev.zeros(rows, precision).unwrap();
            dev.spmv(&a, &x_dev, &mut y).unwrap();
            let what = format!("{rows}×{cols} d={d} ({plan:?})");
            assert_agrees(label, &what, &r, &dev.download(&y).unwrap());
            let mut y = dev.zeros_batch(rows, batch, precision).unwrap();
            dev.spmm(&a, &xb_dev, &mut y).unwrap();
            let what = format!("{rows}×{cols} d={d}, {batch} vectors ({plan:?})");
            assert_agrees(label, &what, &rb, &dev.download(&y).unwrap());
        }
        quantized_products_agree(label, dev, &m, &x_dev, &x);
    }
    seen
}

/// The same rows with int8 (per row) and int4 (per group of 64) values, under the same tuning:
/// the quantized kernels share the plan's row kernel.
fn quantized_products_agree(
    label: &str,
    dev: &Device,
    m: &MackoMatrix,
    x_dev: &DeviceVector,
    x: &[f16],
) {
    for quant in [
        Quantization::int8_per_row(),
        Quantization::int4_per_group(64),
    ] {
        let q = QuantMackoMatrix::quantize(m, quant).unwrap();
        let a = dev
            .upload(&q)
            .unwrap_or_else(|e| panic!("{label}: uploading {quant:?}: {e}"));
        let r = reference::spmv_macko_quant(&q, x).unwrap();
        let mut y = dev.zeros(m.rows(), Precision::F32).unwrap();
        dev.spmv(&a, x_dev, &mut y).unwrap();
        let what = format!("{}×{} {quant:?}", m.rows(), m.cols());
        assert_agrees(label, &what, &r, &dev.download(&y).unwrap());
    }
}

/// Runs every forced plan of one backend; `options` turns a tuning into device options.
fn every_forced_plan<T, P>(
    kind: BackendKind,
    forced: Vec<ForcedPlan<T, P>>,
    options: impl Fn(T) -> DeviceOptions,
    plan_of: fn(&Plan) -> Option<&P>,
) {
    assert!(!forced.is_empty(), "{kind}: no forced plans to test");
    for f in forced {
        let Some(dev) = open_or_skip(f.name, &options(f.tuning)) else {
            return;
        };
        assert!(
            products_agree_and_plan_taken(f.name, &dev, plan_of, f.taken),
            "{}: the forced plan was never taken on the suite's shapes",
            f.name
        );
    }
}

#[cfg(feature = "cuda")]
#[test]
fn every_forced_cuda_plan_agrees_and_is_taken() {
    use macko::backend::cuda::{plan::CudaPlan, tuning::CudaTuning};
    every_forced_plan(
        BackendKind::Cuda,
        CudaTuning::forced_plans(),
        |tuning| {
            let mut o = DeviceOptions::for_backend(BackendKind::Cuda);
            o.tuning.get_or_insert_with(Default::default).cuda = tuning;
            o
        },
        |p: &Plan| -> Option<&CudaPlan> {
            match p {
                Plan::Cuda(p) => Some(p),
                _ => None,
            }
        },
    );
}

#[test]
fn the_cpu_plan_is_typed() {
    let dev = Device::new(BackendKind::Cpu).unwrap();
    let m = MackoMatrix::from_dense(&random_dense(8, 16, 0.5, 1)).unwrap();
    let a = dev.upload(&m).unwrap();
    assert!(matches!(dev.plan(&a).unwrap(), Plan::Cpu(_)));
    let other = Device::new(BackendKind::Cpu).unwrap();
    assert!(matches!(
        other.plan(&a),
        Err(macko::Error::WrongDevice { .. })
    ));
}
