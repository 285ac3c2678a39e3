//! The smallest complete program: pick a device, build a 50%-pruned matrix, multiply, check the
//! result against the CPU backend and the f64 reference, print the device and the time.
//!
//! ```sh
//! cargo run --release --example quickstart            # the best device here
//! MACKO_BACKEND=cpu cargo run --release --example quickstart
//! ```

use macko::{reference, synthetic, BackendKind, Device, MackoMatrix, Precision};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols, density) = (4096, 4096, 0.5);

    // CUDA, else a GPU through wgpu, else the CPU; MACKO_BACKEND=cpu|wgpu|cuda forces one.
    let dev = Device::from_env()?;
    println!("device: {}", dev.describe());

    // A seeded matrix with half of its weights zero, encoded as MACKO-16-4.
    let dense = synthetic::pruned_matrix(rows, cols, density, 1)?;
    let a = MackoMatrix::from_dense(&dense)?;
    let x = synthetic::activations(cols, 1);
    println!(
        "matrix: {rows}×{cols} at density {density}: {} bytes as MACKO, {} as dense f16 ({:.2}×)",
        a.bytes(),
        dense.bytes(),
        a.effective_density()
    );

    // y = A·x on the device.
    let a_dev = dev.upload(&a)?;
    let x_dev = dev.upload_vector(&x)?;
    let mut y_dev = dev.zeros(rows, Precision::F16)?;
    dev.spmv(&a_dev, &x_dev, &mut y_dev)?;
    let y = dev.download(&y_dev)?.to_f64();

    // The same product on the CPU backend, and the f64 reference with its error bound.
    let cpu = Device::new(BackendKind::Cpu)?;
    let (a_cpu, x_cpu) = (cpu.upload(&a)?, cpu.upload_vector(&x)?);
    let mut y_cpu = cpu.zeros(rows, Precision::F16)?;
    cpu.spmv(&a_cpu, &x_cpu, &mut y_cpu)?;
    let y_cpu = cpu.download(&y_cpu)?.to_f64();
    let max_diff = y
        .iter()
        .zip(&y_cpu)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let r = reference::spmv_macko(&a, &x)?;
    if let Some((row, got, want, tol)) = r.first_disagreement(&y, Precision::F16) {
        return Err(format!("row {row}: {got} but the f64 reference is {want} (± {tol})").into());
    }
    println!(
        "check: every row within the f64 reference's bound; max |device − cpu| = {max_diff:.2e}"
    );

    // Median of 50 timed products, on the device's own timer.
    let mut times = dev.time_spmv(&[&a_dev], &x_dev, &mut y_dev, 5, 50)?;
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    println!(
        "time: {:.1} µs per product ({:.1} GB/s of matrix, {})",
        median * 1e6,
        a.bytes() as f64 / median / 1e9,
        dev.timer()
    );
    Ok(())
}
