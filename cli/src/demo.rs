//! `macko demo`: the smallest end-to-end run on the chosen device: a synthetic pruned matrix in
//! MACKO-16-4, CSR and dense, each multiplied on the device, checked row by row against the f64
//! reference, timed, and its storage reported.

use clap::Args;

use crate::error::CliError;
use macko::{
    reference, synthetic, BackendKind, CsrMatrix, Device, DeviceOptions, MackoMatrix, MatrixRef,
    Precision,
};

#[derive(Args)]
pub struct DemoArgs {
    /// Rows of the matrix (output features).
    #[arg(long, default_value_t = 4096)]
    rows: usize,
    /// Columns of the matrix (input features).
    #[arg(long, default_value_t = 4096)]
    cols: usize,
    /// Fraction of non-zero weights, in (0, 1].
    #[arg(long, default_value_t = 0.5)]
    density: f64,
    /// Backend to use (cpu, wgpu, cuda); default: MACKO_BACKEND, else the best available.
    #[arg(long)]
    backend: Option<BackendKind>,
    /// Timed repetitions per format (median reported).
    #[arg(long, default_value_t = 20)]
    iters: usize,
}

fn median_us(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t.get(t.len() / 2).map_or(f64::NAN, |s| s * 1e6)
}

/// A `demo` argument that describes no product to measure, naming the value and the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DemoLimit {
    /// `--rows 0` or `--cols 0`: an empty matrix has no bytes to time, so its effective density
    /// and GB/s would be 0/0.
    #[error("--{flag} {value}: must be at least 1 (an empty matrix has no product to measure)")]
    Empty {
        /// `rows` or `cols`.
        flag: &'static str,
        /// The value given.
        value: usize,
    },
    /// `--iters 0`: the time printed is the median of the timed products.
    #[error("--iters 0: the time is the median of the timed products, so at least one is needed")]
    NoIterations,
    /// A density outside (0, 1].
    #[error("--density {0} is outside (0, 1]")]
    Density(f64),
}

/// Checks the arguments before any device is opened or matrix built.
fn check(args: &DemoArgs) -> Result<(), DemoLimit> {
    for (flag, value) in [("rows", args.rows), ("cols", args.cols)] {
        if value == 0 {
            return Err(DemoLimit::Empty { flag, value });
        }
    }
    if args.iters == 0 {
        return Err(DemoLimit::NoIterations);
    }
    if !(args.density > 0.0 && args.density <= 1.0) {
        return Err(DemoLimit::Density(args.density));
    }
    Ok(())
}

pub fn run(args: &DemoArgs) -> Result<(), CliError> {
    check(args).map_err(|e| CliError::Usage(e.to_string()))?;
    let dev = match args.backend {
        Some(kind) => Device::with_options(&DeviceOptions {
            backend: Some(kind),
            allow_software_adapter: true,
            ..DeviceOptions::from_env()?
        })?,
        None => Device::from_env()?,
    };
    println!("device: {}", dev.describe());
    println!(
        "matrix: {}×{}, density {}, seed 1",
        args.rows, args.cols, args.density
    );
    let dense = synthetic::pruned_matrix(args.rows, args.cols, args.density, 1)?;
    let x = synthetic::activations(args.cols, 1);
    let macko = MackoMatrix::from_dense(&dense)?;
    let csr = CsrMatrix::from_dense(&dense)?;
    let formats: [(&str, MatrixRef, reference::Reference); 3] = [
        ("macko", (&macko).into(), reference::spmv_macko(&macko, &x)?),
        ("csr", (&csr).into(), reference::spmv_csr(&csr, &x)?),
        ("dense", (&dense).into(), reference::spmv_dense(&dense, &x)?),
    ];
    let x_dev = dev.upload_vector(&x)?;
    println!(
        "\n{:<6} {:>12} {:>9} {:>10} {:>11} {:>8}",
        "format", "bytes", "eff.dens", "time µs", "GB/s", "check"
    );
    let mut failed = false;
    for (name, m, r) in formats {
        let a = dev.upload(m)?;
        let mut y = dev.zeros(args.rows, Precision::F16)?;
        dev.spmv(&a, &x_dev, &mut y)?;
        let got = dev.download(&y)?.to_f64();
        let bad = (0..args.rows)
            .filter(|&i| !r.agrees(i, got[i], Precision::F16))
            .count();
        failed |= bad > 0;
        let us = median_us(dev.time_spmv(&[&a], &x_dev, &mut y, 3, args.iters)?);
        let bytes = m.bytes();
        println!(
            "{name:<6} {bytes:>12} {:>9.3} {us:>10.1} {:>11.1} {:>8}",
            bytes as f64 / dense.bytes() as f64,
            bytes as f64 / us / 1e3,
            if bad == 0 {
                "ok".to_string()
            } else {
                format!("{bad} bad")
            }
        );
    }
    println!("\ntimer: {}", dev.timer());
    if failed {
        return Err(CliError::Check(format!(
            "{}: some rows disagree with the f64 reference",
            dev.describe()
        )));
    }
    println!("all rows agree with the f64 reference");
    Ok(())
}
