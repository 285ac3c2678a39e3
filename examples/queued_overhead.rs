//! What one product costs beyond the kernel: the per-call overhead of queued products (issue 7).
//!
//! For each backend here and each shape, three figures for one MACKO matrix (the same one every
//! time, so all three see the same caches):
//! - `device`: the median of the device's own timer over back-to-back products (what
//!   `macko bench` reports; no host in it);
//! - `queued`: the wall time of N products queued with `Device::spmv` and one `synchronize`,
//!   divided by N — what a decode loop that never waits pays per product;
//! - `host`: the part of `queued` spent inside the N `Device::spmv` calls, before the
//!   `synchronize` (recording, and the submissions made along the way) — the host's share;
//! - `synced`: the wall time of one product followed by `synchronize`, median of N — a loop
//!   that waits for every result.
//!
//! `queued − device` is what a product costs beyond its kernel. Where `host` is well below
//! `queued`, the host keeps ahead and that cost is spent on the device (barriers and gaps
//! between dispatches); where `host` ≈ `queued`, the host's launch path is the limit.
//!
//! ```sh
//! cargo run --release --example queued_overhead                 # 3 shapes at d = 0.5
//! cargo run --release --example queued_overhead -- 0.3 2000     # density, products per figure
//! ```

use std::time::Instant;

use macko::{synthetic, Device, MackoMatrix, Precision};

/// The issue's small shapes, where a product is a few microseconds of memory traffic, and one
/// whose rows the CUDA backend splits (two launches per product there).
const SHAPES: [(usize, usize); 3] = [(4096, 4096), (4096, 11008), (5120, 13824)];

/// `DENSITY N`, each optional.
fn args() -> Result<(f64, usize), String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let density = a.first().map_or("0.5", String::as_str);
    let n = a.get(1).map_or("1000", String::as_str);
    let density: f64 = density
        .parse()
        .map_err(|e| format!("density {density:?}: {e}"))?;
    macko::prune::check_density(density).map_err(|e| e.to_string())?;
    let n: usize = n.parse().map_err(|e| format!("N {n:?}: {e}"))?;
    if n == 0 {
        return Err("N must be at least 1".into());
    }
    Ok((density, n))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (density, n) = args()?;
    println!("MACKO products at density {density}, {n} per figure (µs per product)\n");
    println!(
        "{:<8} {:<13} {:>9} {:>9} {:>9} {:>9} {:>15}  device",
        "backend", "shape", "device", "queued", "host", "synced", "queued − device"
    );
    for status in Device::available() {
        let Ok(info) = status.device else {
            continue;
        };
        let dev = Device::new(status.backend)?;
        for (rows, cols) in SHAPES {
            let dense = synthetic::pruned_matrix(rows, cols, density, 1)?;
            let a = dev.upload(&MackoMatrix::from_dense(&dense)?)?;
            let x = dev.upload_vector(&synthetic::activations(cols, 1))?;
            let mut y = dev.zeros(rows, Precision::F16)?;
            let device = median(dev.time_spmv(&[&a], &x, &mut y, 20, n)?);
            // Warm the host path too, then N products queued without waiting.
            for _ in 0..20 {
                dev.spmv(&a, &x, &mut y)?;
            }
            dev.synchronize()?;
            let t = Instant::now();
            for _ in 0..n {
                dev.spmv(&a, &x, &mut y)?;
            }
            let host = t.elapsed().as_secs_f64() / n as f64;
            dev.synchronize()?;
            let queued = t.elapsed().as_secs_f64() / n as f64;
            let mut synced = Vec::with_capacity(n);
            for _ in 0..n {
                let t = Instant::now();
                dev.spmv(&a, &x, &mut y)?;
                dev.synchronize()?;
                synced.push(t.elapsed().as_secs_f64());
            }
            let synced = median(synced);
            println!(
                "{:<8} {:<13} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>15.2}  {}",
                status.backend.name(),
                format!("{rows}×{cols}"),
                device * 1e6,
                queued * 1e6,
                host * 1e6,
                synced * 1e6,
                (queued - device).max(0.0) * 1e6,
                info.name
            );
        }
    }
    Ok(())
}
