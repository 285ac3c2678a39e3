//! A GPU whose memory runs out gives a typed error, not a crash, and keeps working.
//!
//! The test uploads one 512 MiB dense matrix again and again, keeping every copy, until the
//! device refuses; the refusal must be `Error::OutOfMemory` (or `TooLarge`), and after the
//! copies are dropped a small product on the same device must still agree with the f64
//! reference. Filling the memory with copies reaches the same allocation failure as one matrix
//! larger than the device, without a host matrix of that size (the GPU machine's 128 GiB of
//! host memory would not hold a matrix larger than an H200's 141 GiB).
//!
//! Runs on hardware GPUs only: CUDA, and wgpu on a non-software adapter. The CPU backend and
//! lavapipe allocate host memory, where exhausting it would take the whole machine down
//! rather than test a device's refusal, so they are skipped (with a line saying so).

mod common;

use common::{assert_agrees, open_or_skip, progress, random_dense, random_x};

use half::f16;
use macko::{
    reference, BackendKind, DenseMatrix, Device, DeviceOptions, Error, MackoMatrix, Precision,
};

/// One copy: 16384 × 16384 binary16 values, 512 MiB (under every binding limit wgpu reports
/// on the GPUs measured here, so a copy is one buffer).
const SIDE: usize = 16 << 10;
const COPY_BYTES: u64 = (SIDE * SIDE * 2) as u64;
/// Copies tried before the test gives up: 150 GiB, more than any GPU here has (an H200 has
/// 141 GiB) and not far above the GPU machine's host memory. A device that accepts them all
/// spills to host memory without saying so, which the test reports.
const MAX_COPIES: usize = 300;

/// The devices whose memory is the GPU's own.
fn gpus() -> Vec<(String, Device)> {
    [BackendKind::Cuda, BackendKind::Wgpu]
        .into_iter()
        .filter_map(|kind| {
            let label = kind.name().to_string();
            let dev = open_or_skip(&label, &DeviceOptions::for_backend(kind))?;
            let software = dev
                .info()
                .properties
                .iter()
                .any(|(k, v)| k == "device type" && v == "Cpu");
            if software {
                println!("skipping {label}: a software adapter, whose memory is the host's");
                return None;
            }
            Some((label, dev))
        })
        .collect()
}

/// Uploads `copy` until the device refuses; returns how many copies fit and the refusal.
fn fill(label: &str, dev: &Device, copy: &DenseMatrix) -> (usize, Option<Error>) {
    let mut held = Vec::new();
    for n in 0..MAX_COPIES {
        match dev.upload(copy) {
            Ok(m) => held.push(m),
            Err(e) => return (n, Some(e)),
        }
        if n % 32 == 31 {
            progress(
                "device_memory",
                format_args!(
                    "{label}: {} GiB uploaded",
                    ((n + 1) as u64 * COPY_BYTES) >> 30
                ),
            );
        }
    }
    (held.len(), None)
}

/// A small product on `dev`, checked against the reference.
fn still_works(label: &str, dev: &Device) {
    let dense = random_dense(300, 500, 0.5, 77);
    let m = MackoMatrix::from_dense(&dense).expect("a valid matrix");
    let x = random_x(500, 78);
    let r = reference::spmv_macko(&m, &x).expect("shapes agree");
    let a = dev.upload(&m).expect("upload after the refusal");
    let xv = dev.upload_vector(&x).expect("x after the refusal");
    let mut y = dev.zeros(300, Precision::F32).expect("y after the refusal");
    dev.spmv(&a, &xv, &mut y)
        .expect("product after the refusal");
    let y = dev.download(&y).expect("download after the refusal");
    assert_agrees(label, "the product after the refusal", &r, &y);
}

#[test]
fn exhausted_device_memory_is_a_typed_error_and_the_device_recovers() {
    let devices = gpus();
    if devices.is_empty() {
        return;
    }
    let copy = DenseMatrix::new(SIDE, SIDE, vec![f16::from_f32(0.25); SIDE * SIDE])
        .expect("shape matches");
    for (label, dev) in devices {
        let (fitted, refusal) = fill(&label, &dev, &copy);
        match refusal {
            Some(Error::OutOfMemory { .. } | Error::TooLarge { .. }) => {}
            Some(other) => panic!("{label}: after {fitted} copies, not a memory error: {other}"),
            None => {
                // wgpu may place buffers in host memory once the GPU's is full; that is the
                // driver's choice, not a crash, but CUDA must refuse.
                assert!(
                    label != "cuda",
                    "{label}: {MAX_COPIES} copies of {COPY_BYTES} bytes all fit"
                );
                println!("{label}: {MAX_COPIES} copies all fit (buffers spill to host memory)");
            }
        }
        println!(
            "{label}: {fitted} copies ({} GiB) fitted, then: {}",
            (fitted as u64 * COPY_BYTES) >> 30,
            refusal.map_or("no refusal".to_string(), |e| e.to_string())
        );
        still_works(&label, &dev);
    }
}
