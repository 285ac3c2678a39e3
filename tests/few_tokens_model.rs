//! The `few_tokens` example's code path on the real model: all-MiniLM-L6-v2's
//! `model.safetensors` (`.ci/fetch-model.sh` fetches it) when `MACKO_MODEL` points at it. A
//! sentence of 11 tokens runs through the six BERT layers with every linear layer one
//! few-token product on the device `MACKO_BACKEND` picks, at density 1.0 (nothing pruned):
//! every product must agree with the f64 reference of its matrix at f32-accumulation level,
//! and the sentence embedding must match the host's dense f32 pass (cosine ≥ 0.999: the
//! passes differ only by f16 rounding of weights and activations). At density 0.5 pruning
//! must change the embedding measurably but not destroy it. Without `MACKO_MODEL` the test
//! prints a skip line and passes.

#[path = "../examples/few_tokens/minilm.rs"]
mod minilm;

use std::path::PathBuf;

use macko::checkpoint::Checkpoint;
use macko::Device;
use minilm::{cosine, mean_pool, DevicePruned, HostDense, Model, HIDDEN, SENTENCE};

const ENV_MODEL: &str = "MACKO_MODEL";

fn model() -> Option<PathBuf> {
    match std::env::var_os(ENV_MODEL) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            println!(
                "skip: {ENV_MODEL} is not set (point it at all-MiniLM-L6-v2's model.safetensors; \
                 .ci/fetch-model.sh fetches it)"
            );
            None
        }
    }
}

/// The device pass at `density`: (cosine against the host's dense pass, worst relative error
/// of a product, products made, MACKO bytes over dense f16 bytes of the weights).
fn device_pass(
    dev: &Device,
    ckpt: &Checkpoint,
    model: &Model,
    density: f64,
) -> (f64, f64, usize, f64) {
    let mut pruned = DevicePruned::new(dev, ckpt, model, density, None).expect("prune and upload");
    let on_device = model.forward(&SENTENCE, &mut pruned).expect("device pass");
    let on_host = model.forward(&SENTENCE, &mut HostDense).expect("host pass");
    assert_eq!(on_device.len(), SENTENCE.len() * HIDDEN);
    assert!(on_device.iter().all(|v| v.is_finite()));
    for c in &pruned.checks {
        assert_eq!(
            c.tokens,
            SENTENCE.len(),
            "{}: one product over all tokens",
            c.name
        );
    }
    let worst = pruned
        .checks
        .iter()
        .map(|c| c.relative_error)
        .fold(0.0, f64::max);
    (
        cosine(&mean_pool(&on_device), &mean_pool(&on_host)),
        worst,
        pruned.checks.len(),
        pruned.macko_bytes as f64 / pruned.dense_f16_bytes as f64,
    )
}

#[test]
fn a_sentence_through_minilm_as_few_token_products() {
    let Some(path) = model() else { return };
    let ckpt = Checkpoint::open(&path).expect("MACKO_MODEL opens as a safetensors checkpoint");
    let model = Model::load(&ckpt).expect("all-MiniLM-L6-v2's encoder tensors");
    let dev = Device::from_env().expect("a device");
    println!("device: {}", dev.describe());

    let (similarity, worst, products, _) = device_pass(&dev, &ckpt, &model, 1.0);
    println!("density 1.0: cosine {similarity:.6}, worst relative error {worst:.2e}");
    // 6 layers × (query, key, value, attention output, intermediate, output).
    assert_eq!(products, 36);
    // f32 accumulation of at most 1536 f16 products per row: ~1e-6 relative; f16 outputs or
    // a lost term would be ≥ 1e-4.
    assert!(worst < 1e-5, "a product is off by {worst:e}");
    assert!(similarity >= 0.999, "cosine {similarity} at density 1.0");

    let (pruned, worst, _, memory) = device_pass(&dev, &ckpt, &model, 0.5);
    println!("density 0.5: cosine {pruned:.6}, worst relative error {worst:.2e}, memory {memory:.3} of dense f16");
    // docs/FORMAT.md: about 0.63 of dense f16 at d = 0.5, never dense's size or more.
    assert!(
        memory > 0.5 && memory < 0.75,
        "MACKO holds {memory} of dense f16 at d = 0.5"
    );
    assert!(worst < 1e-5, "a product is off by {worst:e}");
    assert!(
        pruned < similarity && pruned > 0.5,
        "pruning half of each row gives cosine {pruned}"
    );
}

/// Quantized values on the real model, on the CPU (the backend that multiplies them today):
/// at density 0.5, int8 per row and int4 per 64 values must keep each product within f32
/// accumulation of its own reference, move each layer's output from the pruned binary16
/// layer's by a bounded amount (int8 far less than int4), and shrink the weights' memory
/// below MACKO-16-4's (1.5 and 1 byte per entry against 2.5, plus scales).
#[test]
fn quantized_weights_through_minilm_on_the_cpu() {
    let Some(path) = model() else { return };
    let ckpt = Checkpoint::open(&path).expect("MACKO_MODEL opens as a safetensors checkpoint");
    let model = Model::load(&ckpt).expect("all-MiniLM-L6-v2's encoder tensors");
    let dev = Device::new(macko::BackendKind::Cpu).expect("the CPU device");
    let f16_pass = DevicePruned::new(&dev, &ckpt, &model, 0.5, None).expect("prune and upload");
    let f16_bytes = f16_pass.macko_bytes as f64;
    let mut worst_quant = Vec::new();
    for quant in [
        macko::Quantization::int8_per_row(),
        macko::Quantization::int4_per_group(64),
    ] {
        let mut pass =
            DevicePruned::new(&dev, &ckpt, &model, 0.5, Some(quant)).expect("quantize and upload");
        let out = model.forward(&SENTENCE, &mut pass).expect("quantized pass");
        assert!(out.iter().all(|v| v.is_finite()));
        let worst = pass
            .checks
            .iter()
            .map(|c| c.relative_error)
            .fold(0.0, f64::max);
        let quant_err = pass
            .checks
            .iter()
            .map(|c| c.quantization_error)
            .fold(0.0, f64::max);
        let memory = pass.macko_bytes as f64 / f16_bytes;
        println!(
            "{quant:?}: worst product error {worst:.2e}, worst quantization Δ {quant_err:.2e}, \
             memory {memory:.3} of MACKO-16-4"
        );
        assert!(worst < 1e-5, "{quant:?}: a product is off by {worst:e}");
        assert!(quant_err > 0.0, "{quant:?}: quantization changed nothing");
        assert!(memory < 0.7, "{quant:?}: {memory} of MACKO-16-4's bytes");
        worst_quant.push(quant_err);
    }
    assert!(
        worst_quant[0] < 0.05,
        "int8 per row moves a layer by {}",
        worst_quant[0]
    );
    assert!(
        worst_quant[1] < 0.5,
        "int4 per 64 moves a layer by {}",
        worst_quant[1]
    );
    assert!(
        worst_quant[0] < worst_quant[1],
        "int8 should be closer than int4: {worst_quant:?}"
    );
}
