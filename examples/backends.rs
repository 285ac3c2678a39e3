//! The same product on every backend that works here, side by side: time (median of the
//! device's own timer) and agreement (with the f64 reference, and the largest difference from
//! the CPU backend). The cross-vendor story in one screen.
//!
//! ```sh
//! cargo run --release --example backends                   # 4096×4096 at density 0.5
//! cargo run --release --example backends -- 11008 4096 0.3 # rows cols density
//! ```

use macko::{reference, synthetic, BackendKind, Device, MackoMatrix, Precision};

/// `ROWS COLS DENSITY`, each optional.
fn args() -> Result<(usize, usize, f64), String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let get = |i: usize, default: &str| a.get(i).cloned().unwrap_or_else(|| default.to_string());
    let rows = get(0, "4096");
    let cols = get(1, "4096");
    let density = get(2, "0.5");
    let rows = rows.parse().map_err(|e| format!("rows {rows:?}: {e}"))?;
    let cols = cols.parse().map_err(|e| format!("cols {cols:?}: {e}"))?;
    let density: f64 = density
        .parse()
        .map_err(|e| format!("density {density:?}: {e}"))?;
    macko::prune::check_density(density).map_err(|e| e.to_string())?;
    Ok((rows, cols, density))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols, density) = args()?;
    let dense = synthetic::pruned_matrix(rows, cols, density, 1)?;
    let a = MackoMatrix::from_dense(&dense)?;
    let x = synthetic::activations(cols, 1);
    let r = reference::spmv_macko(&a, &x)?;
    println!(
        "{rows}×{cols} at density {density}: {} bytes in MACKO-16-4 ({:.2}× dense f16)\n",
        a.bytes(),
        a.effective_density()
    );

    // Every backend, with the device it found or why it has none.
    let mut results: Vec<(String, Vec<f64>, f64, &'static str)> = Vec::new();
    for status in Device::available() {
        let info = match status.device {
            Ok(info) => info,
            Err(why) => {
                println!("{:<6} unavailable: {why}", status.backend);
                continue;
            }
        };
        let dev = Device::new(status.backend)?;
        let a_dev = dev.upload(&a)?;
        let x_dev = dev.upload_vector(&x)?;
        let mut y_dev = dev.zeros(rows, Precision::F16)?;
        dev.spmv(&a_dev, &x_dev, &mut y_dev)?;
        let y = dev.download(&y_dev)?.to_f64();
        let mut times = dev.time_spmv(&[&a_dev], &x_dev, &mut y_dev, 5, 30)?;
        times.sort_by(f64::total_cmp);
        let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
        results.push((
            format!("{}: {}", status.backend, info.name),
            y,
            median,
            dev.timer(),
        ));
    }

    let cpu = results
        .iter()
        .find(|(name, ..)| name.starts_with(BackendKind::Cpu.name()))
        .map(|(_, y, ..)| y.clone());
    println!(
        "\n{:<44} {:>10} {:>8} {:>12} {:>14}  timer",
        "device", "time µs", "GB/s", "reference", "max |Δ cpu|"
    );
    let mut failed = false;
    for (name, y, median, timer) in &results {
        let bad = (0..rows)
            .filter(|&i| !r.agrees(i, y[i], Precision::F16))
            .count();
        failed |= bad > 0;
        let diff = cpu.as_ref().map_or(f64::NAN, |c| {
            y.iter()
                .zip(c)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max)
        });
        let name: String = name.chars().take(44).collect();
        println!(
            "{name:<44} {:>10.1} {:>8.1} {:>12} {diff:>14.2e}  {timer}",
            median * 1e6,
            a.bytes() as f64 / median / 1e9,
            if bad == 0 {
                "all rows ok".to_string()
            } else {
                format!("{bad} rows bad")
            }
        );
    }
    if failed {
        return Err("some backend disagrees with the f64 reference".into());
    }
    Ok(())
}
