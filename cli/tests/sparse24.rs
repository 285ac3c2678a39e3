//! `macko convert --prune-to 2:4` end to end: a small checkpoint's weights pruned to 2:4 and
//! stored as 2:4 matrices, the conversion records saying so, `verify --against` pruning the
//! source the same way (and failing where the stored weights differ from it), and the options
//! it refuses before anything is written.

mod common;

use std::path::Path;

use common::{assert_one_line_error, macko, stderr, stdout, write_f32, Arg, TempDir};
use macko::checkpoint::{CONVERT_METADATA_KEY, CONVERT_METADATA_PREFIX};
use macko::format::container::{self, AnyMatrix, MatrixFile};
use macko::Sparse24Matrix;

/// Seeded weights of mixed sign and magnitude, about one in seven zero.
fn weight(rows: usize, cols: usize, seed: usize) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| {
            let k = (i * 37 + seed * 11) % 29;
            if k % 7 == 0 {
                0.0
            } else {
                (k as f32 - 14.0) / 8.0
            }
        })
        .collect()
}

/// A checkpoint of two weights (one whose columns are not a multiple of 4) and a bias.
fn checkpoint(path: &Path, bump: f32) {
    let mut w0 = weight(6, 10, 1);
    w0[0] += bump;
    write_f32(
        path,
        &[
            ("layer.0.weight", vec![6, 10], w0),
            ("layer.1.weight", vec![4, 16], weight(4, 16, 2)),
            ("layer.0.bias", vec![6], vec![0.5; 6]),
        ],
    );
}

fn sparse24(path: &Path, name: &str) -> Sparse24Matrix {
    match container::load_matrix(path, name).expect("load matrix") {
        AnyMatrix::Sparse24(m) => m,
        other => panic!("{name} is {:?}, not 2:4", other.kind()),
    }
}

#[test]
fn prune_to_2_4_stores_2_4_matrices_and_verify_reapplies_it() {
    let dir = TempDir::new("s24");
    let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
    checkpoint(&input, 0.0);
    let o = macko(&[&"convert", &input, &output, &"--prune-to", &"2:4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("2:4") && out.contains("to 2:4"), "{out}");

    for name in ["layer.0.weight", "layer.1.weight"] {
        let stored = sparse24(&output, name);
        let source = container::load_dense_tensor(&input, name).expect("source");
        let pruned = Sparse24Matrix::prune_from_dense(&source).expect("prune");
        assert_eq!(stored, pruned, "{name}");
        let record: serde_json::Value = serde_json::from_str(
            &MatrixFile::open(&output)
                .expect("output")
                .metadata()
                .expect("metadata")[&format!("{CONVERT_METADATA_PREFIX}{name}")],
        )
        .expect("JSON");
        assert_eq!(record["prune_to"], "2:4", "{name}");
    }
    let file = MatrixFile::open(&output).expect("output");
    let meta = file.metadata().expect("metadata");
    let run: serde_json::Value = serde_json::from_str(&meta[CONVERT_METADATA_KEY]).expect("JSON");
    assert_eq!(run["prune_to"], "2:4");
    // The bias is copied, not converted.
    assert!(file.tensor_names().contains(&"layer.0.bias".to_string()));
    assert_eq!(file.matrix_infos().expect("infos").len(), 2);

    let v = macko(&[&"verify", &output, &"--against", &input]);
    assert!(v.status.success(), "{}{}", stdout(&v), stderr(&v));
    let listing = stdout(&v);
    assert!(
        listing.contains("sparse24 layer.0.weight 6×10") && listing.contains("pruned to 2:4"),
        "{listing}"
    );
    let alone = macko(&[&"verify", &output]);
    assert!(alone.status.success(), "{}", stderr(&alone));

    // Against a source whose largest weight of one group differs, the check fails, naming it.
    let other = dir.path("other.safetensors");
    checkpoint(&other, 8.0);
    let v = macko(&[&"verify", &output, &"--against", &other]);
    assert!(!v.status.success(), "{}", stdout(&v));
    let all = format!("{}{}", stdout(&v), stderr(&v));
    assert!(
        all.contains("layer.0.weight") && all.contains("pruned to 2:4") && all.contains("(0, 0)"),
        "{all}"
    );
}

#[test]
fn prune_to_2_4_with_quantize_is_refused_naming_both_flags() {
    let dir = TempDir::new("s24-args");
    let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
    checkpoint(&input, 0.0);
    let before = dir.files();
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--prune-to", "2:4", "--quantize", "int8"],
            &["--prune-to 2:4", "--quantize int8"],
        ),
        (
            &["--quantize", "int4", "--group", "64", "--prune-to", "2:4"],
            &["--prune-to 2:4", "--quantize int4"],
        ),
        (&["--prune-to", "3:4"], &["3:4", "2:4"]),
    ];
    for (flags, needles) in cases {
        let mut args: Vec<Arg<'_>> = vec![&"convert", &input, &output];
        for f in flags {
            args.push(f);
        }
        let o = macko(&args);
        if flags.contains(&"3:4") {
            // clap's own usage error (exit 2), naming the value and what is accepted.
            assert!(!o.status.success());
            for n in needles {
                assert!(stderr(&o).contains(n), "{}", stderr(&o));
            }
        } else {
            assert_one_line_error(&o, needles);
        }
        assert_eq!(dir.files(), before, "{flags:?} wrote something");
    }
    // The library refuses the same combination with its typed error.
    let opts = macko::checkpoint::ConvertOptions {
        prune_24: true,
        quantize: Some(macko::Quantization::int8_per_row()),
        ..Default::default()
    };
    let e = macko::checkpoint::convert(&input, &output, &opts, &mut |_| {});
    assert!(
        matches!(
            e,
            Err(macko::checkpoint::CheckpointError::Conflict {
                first: "--prune-to 2:4",
                second: "--quantize",
                ..
            })
        ),
        "{e:?}"
    );
    assert_eq!(dir.files(), before);
}
