//! End-to-end tests of the `macko` binary's `convert` and `verify`: small safetensors files are
//! written by hand (so that any dtype, rank or corruption can be built), converted, verified,
//! and every kind of bad input is checked to fail with a message naming the file, tensor and
//! problem, a non-zero exit status, and nothing written; `convert --quantize` and the error
//! bound `verify` holds it to. `bench.rs` has the tests of `macko bench`.

mod common;

use std::path::Path;

use common::{assert_fails, macko, stderr, stdout, Arg, TempDir};

use macko::checkpoint::{Checkpoint, CONVERT_METADATA_KEY, CONVERT_METADATA_PREFIX};
use macko::format::container::{self, AnyMatrix, MatrixFile};
use macko::half::{bf16, f16};
use macko::{DenseMatrix, MackoMatrix};

/// One tensor of a hand-written file.
struct T {
    name: &'static str,
    dtype: &'static str,
    shape: Vec<usize>,
    data: Vec<u8>,
}

fn f32_tensor(name: &'static str, rows: usize, cols: usize, f: impl Fn(usize, usize) -> f32) -> T {
    let data = (0..rows * cols)
        .flat_map(|i| f(i / cols, i % cols).to_le_bytes())
        .collect();
    T {
        name,
        dtype: "F32",
        shape: vec![rows, cols],
        data,
    }
}

/// Writes a safetensors file: 8-byte header length, JSON header, data.
fn write_safetensors(path: &Path, tensors: &[T], metadata: &[(&str, &str)]) {
    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        let m: serde_json::Map<String, serde_json::Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect();
        header.insert("__metadata__".into(), m.into());
    }
    let mut data = Vec::new();
    for t in tensors {
        let start = data.len();
        data.extend_from_slice(&t.data);
        header.insert(
            t.name.into(),
            serde_json::json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [start, data.len()]}),
        );
    }
    let header = serde_json::Value::Object(header).to_string();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    std::fs::write(path, bytes).expect("write test file");
}

/// A small checkpoint: an F32 weight, a BF16 weight, an F16 weight, a 1-D bias, a 3-D I64
/// tensor and an F64 matrix.
fn checkpoint(path: &Path) {
    let w = |r: usize, c: usize| ((r * 37 + c * 11) % 23) as f32 / 8.0 - 1.375;
    let bf: Vec<u8> = (0..8 * 40)
        .flat_map(|i| {
            bf16::from_f32(((i % 9) as f32 - 4.0) / 4.0)
                .to_bits()
                .to_le_bytes()
        })
        .collect();
    let h: Vec<u8> = (0..5 * 70)
        .flat_map(|i| {
            let v = if i % 3 == 0 {
                0.0
            } else {
                (i % 13) as f32 - 6.0
            };
            f16::from_f32(v).to_bits().to_le_bytes()
        })
        .collect();
    write_safetensors(
        path,
        &[
            f32_tensor("layer.0.weight", 12, 48, w),
            T {
                name: "layer.0.bias",
                dtype: "F32",
                shape: vec![12],
                data: (0..12).flat_map(|i| (i as f32).to_le_bytes()).collect(),
            },
            T {
                name: "layer.1.weight",
                dtype: "BF16",
                shape: vec![8, 40],
                data: bf,
            },
            T {
                name: "layer.2.weight",
                dtype: "F16",
                shape: vec![5, 70],
                data: h,
            },
            T {
                name: "positions",
                dtype: "I64",
                shape: vec![1, 2, 3],
                data: (0..6i64).flat_map(|i| i.to_le_bytes()).collect(),
            },
            T {
                name: "table",
                dtype: "F64",
                shape: vec![2, 2],
                data: [1.0f64, 2.0, 3.0, 4.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            },
        ],
        &[("format", "pt")],
    );
}

/// The f16 rounding of the F32/BF16/F16 test tensors, as the container reads them.
fn source_f16(path: &Path, name: &str) -> DenseMatrix {
    container::load_dense_tensor(path, name).expect("source tensor")
}

fn load_macko(path: &Path, name: &str) -> MackoMatrix {
    match container::load_matrix(path, name).expect("load matrix") {
        AnyMatrix::Macko(m) => m,
        other => panic!("{name} is {:?}, not MACKO", other.kind()),
    }
}

#[test]
fn convert_encodes_every_float_matrix_and_copies_the_rest_bit_for_bit() {
    let dir = TempDir::new("plain");
    let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
    checkpoint(&input);
    let o = macko(&[&"convert", &input, &output]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for name in [
        "layer.0.weight",
        "layer.1.weight",
        "layer.2.weight",
        "total (3 tensors)",
    ] {
        assert!(out.contains(name), "report lacks {name}:\n{out}");
    }
    assert_eq!(dir.files(), ["in.safetensors", "out.safetensors"]);

    // Converted: decode to exactly the f16 source (−0.0 aside; the sources have none).
    for name in ["layer.0.weight", "layer.1.weight", "layer.2.weight"] {
        let m = load_macko(&output, name);
        assert!(m.is_canonical());
        assert_eq!(
            m.to_dense().expect("decode"),
            source_f16(&input, name),
            "{name}"
        );
    }
    // Copied: same dtype, shape and bytes (the 1-D bias, the 3-D I64, the F64 matrix).
    let (src, dst) = (
        Checkpoint::open(&input).expect("input"),
        Checkpoint::open(&output).expect("output"),
    );
    for name in ["layer.0.bias", "positions", "table"] {
        let (a, b) = (
            src.tensor(name).expect("in source"),
            dst.tensor(name).expect("copied"),
        );
        assert_eq!((&a.dtype, &a.shape), (&b.dtype, &b.shape), "{name}");
        assert_eq!(
            src.raw_bytes(a).expect("read"),
            dst.raw_bytes(b).expect("read"),
            "{name}"
        );
    }
    assert!(
        dst.tensor("layer.0.weight").is_none(),
        "the dense original is replaced"
    );

    // Metadata: the input's kept, the conversion recorded per matrix.
    let file = MatrixFile::open(&output).expect("output");
    let meta = file.metadata().expect("metadata");
    assert_eq!(meta.get("format").map(String::as_str), Some("pt"));
    let record: serde_json::Value = serde_json::from_str(
        meta.get(&format!("{CONVERT_METADATA_PREFIX}layer.1.weight"))
            .expect("conversion record"),
    )
    .expect("JSON");
    assert_eq!(record["source_dtype"], "BF16");
    assert_eq!(record["version"], 1);
    assert!(record["prune_to"].is_null());
    let density = record["density"].as_f64().expect("density");
    let expected = source_f16(&input, "layer.1.weight").count_nonzero() as f64 / 320.0;
    assert!(
        (density - expected).abs() < 1e-12,
        "{density} vs {expected}"
    );

    let v = macko(&[&"verify", &output, &"--against", &input]);
    assert!(v.status.success(), "{}{}", stdout(&v), stderr(&v));
    assert!(stdout(&v).contains("all 3 matrices pass"), "{}", stdout(&v));
    assert!(
        stdout(&v).contains("other tensors: 3 compared with the source, 0 differ"),
        "{}",
        stdout(&v)
    );
}

#[test]
fn prune_keeps_the_largest_of_each_row_and_verify_reapplies_it() {
    let dir = TempDir::new("prune");
    let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
    checkpoint(&input);
    let o = macko(&[&"convert", &input, &output, &"--prune-to", &"0.25"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (name, cols) in [("layer.0.weight", 48), ("layer.1.weight", 40)] {
        let m = load_macko(&output, name);
        let d = m.to_dense().expect("decode");
        let src = source_f16(&input, name);
        for r in 0..m.rows() {
            let kept: Vec<usize> = (0..cols).filter(|&c| d.row(r)[c].to_bits() != 0).collect();
            assert!(
                kept.len() <= cols / 4,
                "{name} row {r} keeps {}",
                kept.len()
            );
            let min_kept = kept
                .iter()
                .map(|&c| src.row(r)[c].to_f32().abs())
                .fold(f32::INFINITY, f32::min);
            for c in 0..cols {
                if kept.contains(&c) {
                    assert_eq!(d.row(r)[c], src.row(r)[c]);
                } else {
                    assert!(
                        src.row(r)[c].to_f32().abs() <= min_kept,
                        "{name} ({r},{c}) dropped"
                    );
                }
            }
        }
    }
    let file = MatrixFile::open(&output).expect("output");
    let meta = file.metadata().expect("metadata");
    let run: serde_json::Value =
        serde_json::from_str(meta.get(CONVERT_METADATA_KEY).expect("run record")).expect("JSON");
    assert_eq!(run["prune_to"], 0.25);
    assert_eq!(run["format"], "MACKO-16-4");
    let v = macko(&[&"verify", &output, &"--against", &input]);
    assert!(v.status.success(), "{}{}", stdout(&v), stderr(&v));
    assert!(stdout(&v).contains("pruned to 0.25"), "{}", stdout(&v));
}

#[test]
fn include_exclude_and_min_size_choose_the_tensors() {
    let dir = TempDir::new("select");
    let input = dir.path("in.safetensors");
    checkpoint(&input);
    let converted = |args: &[&str]| -> Vec<String> {
        let output = dir.path("out.safetensors");
        let mut all: Vec<Arg<'_>> = vec![&"convert", &input, &output];
        for a in args {
            all.push(a);
        }
        let o = macko(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        MatrixFile::open(&output)
            .expect("output")
            .matrix_infos()
            .expect("infos")
            .into_iter()
            .map(|i| i.name)
            .collect()
    };
    assert_eq!(
        converted(&["--include", "layer.?.weight", "--exclude", "layer.1.*"]),
        ["layer.0.weight", "layer.2.weight"]
    );
    assert_eq!(converted(&["--min-size", "400"]), ["layer.0.weight"]);
    // A literal name is converted whatever its size.
    assert_eq!(
        converted(&["--min-size", "400", "--include", "layer.2.weight"]),
        ["layer.2.weight"]
    );
    // F64 is not a weight dtype: left as it is.
    assert!(!converted(&[]).contains(&"table".to_string()));
}

#[test]
fn verify_names_the_tensor_and_rule_when_the_source_differs() {
    let dir = TempDir::new("mismatch");
    let (input, output, other) = (
        dir.path("in.safetensors"),
        dir.path("out.safetensors"),
        dir.path("other.safetensors"),
    );
    checkpoint(&input);
    let o = macko(&[&"convert", &input, &output, &"--include", &"layer.0.weight"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The same checkpoint with one weight changed.
    write_safetensors(
        &other,
        &[f32_tensor("layer.0.weight", 12, 48, |r, c| {
            if (r, c) == (3, 7) {
                100.0
            } else {
                ((r * 37 + c * 11) % 23) as f32 / 8.0 - 1.375
            }
        })],
        &[],
    );
    let v = macko(&[&"verify", &output, &"--against", &other]);
    assert_fails(&v, &["layer.0.weight", "source check", "(3, 7)", "100"]);

    // The same weight, but a bias that differs from the one copied: the copy check names it.
    let biased = dir.path("biased.safetensors");
    write_safetensors(
        &biased,
        &[
            f32_tensor("layer.0.weight", 12, 48, |r, c| {
                ((r * 37 + c * 11) % 23) as f32 / 8.0 - 1.375
            }),
            T {
                name: "layer.0.bias",
                dtype: "F32",
                shape: vec![12],
                data: (0..12)
                    .flat_map(|i| (i as f32 + 0.5).to_le_bytes())
                    .collect(),
            },
        ],
        &[],
    );
    let v = macko(&[&"verify", &output, &"--against", &biased]);
    assert_fails(&v, &["layer.0.bias", "copy check", "bytes differ"]);
    assert!(
        stdout(&v).contains("ok   macko layer.0.weight"),
        "{}",
        stdout(&v)
    );
}

#[test]
fn verify_names_the_rule_a_stored_matrix_breaks() {
    let dir = TempDir::new("rule");
    let path = dir.path("bad.safetensors");
    // One row of one entry: N = 1, P = 8; tail value 5 is not +0.0 (rule 3).
    let mut values = vec![0u8; 16];
    values[..2].copy_from_slice(&f16::from_f32(1.5).to_bits().to_le_bytes());
    values[10..12].copy_from_slice(&f16::from_f32(2.0).to_bits().to_le_bytes());
    write_safetensors(
        &path,
        &[
            T {
                name: "w.row_ptr",
                dtype: "U32",
                shape: vec![2],
                data: [0u32, 1].iter().flat_map(|v| v.to_le_bytes()).collect(),
            },
            T {
                name: "w.values",
                dtype: "F16",
                shape: vec![8],
                data: values,
            },
            T {
                name: "w.codes",
                dtype: "U8",
                shape: vec![4],
                data: vec![0; 4],
            },
        ],
        &[(
            "macko.w",
            r#"{"format":"MACKO-16-4","version":1,"kind":"macko","rows":1,"cols":4}"#,
        )],
    );
    let v = macko(&[&"verify", &path]);
    assert_fails(
        &v,
        &["bad.safetensors", "w", "rule 3 (tail padding)", "value 5"],
    );

    // A column beyond the matrix (rule 4) in a file written by the container itself.
    let dense = DenseMatrix::new(1, 20, {
        let mut v = vec![f16::ZERO; 20];
        v[19] = f16::ONE;
        v
    })
    .expect("dense");
    let m = MackoMatrix::from_dense(&dense).expect("encode");
    let good = dir.path("good.safetensors");
    container::save(&good, &[("m", (&m).into())]).expect("save");
    assert!(macko(&[&"verify", &good]).status.success());
    // The metadata JSON sits escaped inside the header's JSON: `\"cols\":20`. Patched in
    // place to 19, same length, so the header length prefix stays right.
    let mut bytes = std::fs::read(&good).expect("read");
    let from = br#"\"cols\":20"#;
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("metadata holds cols");
    bytes[at..at + from.len()].copy_from_slice(br#"\"cols\":19"#);
    let shrunk = dir.path("shrunk.safetensors");
    std::fs::write(&shrunk, &bytes).expect("write");
    let v = macko(&[&"verify", &shrunk]);
    assert_fails(&v, &["shrunk.safetensors", "`m`", "rule 4 (column range)"]);
}

#[test]
fn bad_input_fails_clearly_and_writes_nothing() {
    let dir = TempDir::new("bad");
    let input = dir.path("in.safetensors");
    checkpoint(&input);
    let output = dir.path("out.safetensors");
    let corrupt = dir.path("corrupt.safetensors");
    std::fs::write(
        &corrupt,
        b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}",
    )
    .expect("write");
    let huge = dir.path("huge.safetensors");
    std::fs::write(&huge, u64::MAX.to_le_bytes()).expect("write");
    let overflow = dir.path("overflow.safetensors");
    write_safetensors(
        &overflow,
        &[f32_tensor("big.weight", 3, 5, |r, c| {
            if (r, c) == (2, 1) {
                1.0e6
            } else {
                0.5
            }
        })],
        &[],
    );
    let missing = dir.path("missing.safetensors");

    let cases: Vec<(Vec<Arg<'_>>, Vec<&str>)> = vec![
        (vec![&missing], vec!["missing.safetensors"]),
        (
            vec![&input, &"--include", &"layer.9.weight"],
            vec!["in.safetensors", "layer.9.weight", "no tensor named"],
        ),
        (
            vec![&input, &"--exclude", &"nothing.*"],
            vec!["in.safetensors", "nothing.*", "matches none"],
        ),
        (
            vec![&input, &"--include", &"positions"],
            vec!["in.safetensors", "positions", "[1, 2, 3]", "2-D"],
        ),
        (vec![&input, &"--include", &"table"], vec!["table", "F64"]),
        (
            vec![&corrupt],
            vec!["corrupt.safetensors", "not a valid safetensors file"],
        ),
        (vec![&huge], vec!["huge.safetensors", "header length"]),
        (
            vec![&overflow],
            vec!["overflow.safetensors", "big.weight", "(2, 1)", "1000000"],
        ),
        (vec![&input, &"--prune-to", &"0"], vec!["outside (0, 1]"]),
        (
            vec![&input, &"--prune-to", &"1.5"],
            vec!["1.5", "outside (0, 1]"],
        ),
        (vec![&input, &"--prune-to", &"-0.5"], vec!["outside (0, 1]"]),
        (vec![&input, &"--prune-to", &"NaN"], vec!["outside (0, 1]"]),
    ];
    let before = dir.files();
    for (args, needles) in cases {
        let mut all: Vec<Arg<'_>> = vec![&"convert"];
        all.extend(args.iter().take(1));
        all.push(&output);
        all.extend(args.iter().skip(1));
        let o = macko(&all);
        assert_fails(&o, &needles);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(dir.files(), before, "something was written for {needles:?}");
    }

    // verify: a missing file, a corrupt one, a missing source, a file with no matrix.
    assert_fails(&macko(&[&"verify", &missing]), &["missing.safetensors"]);
    assert_fails(
        &macko(&[&"verify", &corrupt]),
        &["corrupt.safetensors", "not a valid safetensors file"],
    );
    assert_fails(
        &macko(&[&"verify", &input]),
        &["in.safetensors", "no MACKO"],
    );
    let o = macko(&[&"convert", &input, &output, &"--include", &"layer.0.weight"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_fails(
        &macko(&[&"verify", &output, &"--against", &missing]),
        &["missing.safetensors"],
    );
    // A source without the matrix's tensor.
    assert_fails(
        &macko(&[&"verify", &output, &"--against", &overflow]),
        &["layer.0.weight", "no tensor named"],
    );
}

#[test]
fn a_failed_conversion_leaves_an_existing_output_untouched() {
    let dir = TempDir::new("atomic");
    let input = dir.path("in.safetensors");
    checkpoint(&input);
    let output = dir.path("out.safetensors");
    std::fs::write(&output, b"previous contents").expect("write");
    let o = macko(&[&"convert", &input, &output, &"--include", &"no.such.tensor"]);
    assert_fails(&o, &["no.such.tensor"]);
    assert_eq!(std::fs::read(&output).expect("read"), b"previous contents");
    assert_eq!(dir.files(), ["in.safetensors", "out.safetensors"]);
    // An output directory that does not exist: refused, nothing created.
    let nowhere = dir.path("no-dir").join("out.safetensors");
    let o = macko(&[&"convert", &input, &nowhere]);
    assert_fails(&o, &["no-dir", "temporary file"]);
    // A successful conversion replaces it.
    let o = macko(&[&"convert", &input, &output]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        MatrixFile::open(&output)
            .expect("new output")
            .matrix_infos()
            .expect("infos")
            .len(),
        3
    );
}

#[test]
fn the_report_counts_the_bytes_each_format_really_takes() {
    let dir = TempDir::new("report");
    let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
    checkpoint(&input);
    let opts = macko::checkpoint::ConvertOptions {
        prune_to: Some(0.5),
        ..Default::default()
    };
    let mut events = Vec::new();
    let report = macko::checkpoint::convert(&input, &output, &opts, &mut |p| {
        events.push(format!("{p:?}"))
    })
    .expect("convert");
    assert_eq!(
        events.first().map(String::as_str),
        Some("Planned { tensors: 3 }")
    );
    assert_eq!(events.last().map(String::as_str), Some("Writing"));
    assert_eq!(events.len(), 5);
    assert_eq!(report.converted.len(), 3);
    assert_eq!(report.copied.len(), 3);
    for t in &report.converted {
        let m = load_macko(&output, &t.name);
        let dense = m.to_dense().expect("decode");
        let csr = macko::CsrMatrix::from_dense(&dense).expect("csr");
        assert_eq!(t.macko_bytes, m.bytes(), "{}", t.name);
        assert_eq!(t.csr_bytes, csr.bytes(), "{}", t.name);
        assert_eq!(t.dense_f16_bytes, dense.bytes(), "{}", t.name);
        assert_eq!(t.nonzeros, dense.count_nonzero() as u64, "{}", t.name);
        assert!((t.effective_density() - m.effective_density()).abs() < 1e-12);
    }
    assert_eq!(
        report.output_bytes,
        std::fs::metadata(&output).expect("output").len()
    );
    assert_eq!(
        report.macko_bytes(),
        report.converted.iter().map(|t| t.macko_bytes).sum::<u64>()
    );
}

#[test]
fn a_copied_tensor_that_clashes_with_a_matrix_array_is_refused() {
    let dir = TempDir::new("clash");
    let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
    write_safetensors(
        &input,
        &[
            f32_tensor("a", 4, 8, |r, c| (r + c) as f32),
            // A 1-D tensor named like the codes array of matrix `a`.
            T {
                name: "a.codes",
                dtype: "U8",
                shape: vec![3],
                data: vec![1, 2, 3],
            },
        ],
        &[],
    );
    let o = macko(&[&"convert", &input, &output]);
    assert_fails(&o, &["in.safetensors", "a.codes", "written twice"]);
    assert_eq!(dir.files(), ["in.safetensors"]);
    // Leaving `a` unconverted avoids the clash, but then nothing is selected.
    let o = macko(&[&"convert", &input, &output, &"--exclude", &"a"]);
    assert_fails(&o, &["no tensor selected"]);
}

/// A checkpoint of random weights (normal, seeded): an F32 48×256 weight, a BF16 24×136 weight
/// (a row length no group size divides) and an F32 bias. Quantization error bounds are stated
/// for weights like these, not for the few distinct values of [`checkpoint`].
fn random_checkpoint(path: &Path) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut normal = move || {
        let mut uniform = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (u1, u2) = (uniform(), uniform());
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32 * 0.05
    };
    let a: Vec<f32> = (0..48 * 256).map(|_| normal()).collect();
    let b: Vec<u8> = (0..24 * 136)
        .flat_map(|_| bf16::from_f32(normal()).to_bits().to_le_bytes())
        .collect();
    write_safetensors(
        path,
        &[
            f32_tensor("attn.weight", 48, 256, |r, c| a[r * 256 + c]),
            T {
                name: "mlp.weight",
                dtype: "BF16",
                shape: vec![24, 136],
                data: b,
            },
            T {
                name: "attn.bias",
                dtype: "F32",
                shape: vec![48],
                data: (0..48).flat_map(|i| (i as f32).to_le_bytes()).collect(),
            },
        ],
        &[("format", "pt")],
    );
}

/// The conversion record of matrix `name`.
fn record(path: &Path, name: &str) -> serde_json::Value {
    let file = MatrixFile::open(path).expect("open");
    let meta = file.metadata().expect("metadata");
    serde_json::from_str(
        meta.get(&format!("{CONVERT_METADATA_PREFIX}{name}"))
            .expect("conversion record"),
    )
    .expect("JSON")
}

/// Copies a safetensors file with its `__metadata__` changed by `edit` (the header rewritten,
/// padded to 8 bytes as safetensors does; the data section, addressed relative to its start, is
/// kept as it is).
fn with_metadata(
    from: &Path,
    to: &Path,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) {
    let bytes = std::fs::read(from).expect("read");
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let mut header: serde_json::Value =
        serde_json::from_slice(&bytes[8..8 + n]).expect("header JSON");
    edit(
        header["__metadata__"]
            .as_object_mut()
            .expect("metadata object"),
    );
    let mut text = header.to_string();
    while (8 + text.len()) % 8 != 0 {
        text.push(' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(to, out).expect("write");
}

/// Edits the JSON record `macko-convert.NAME` inside the metadata.
fn edit_record(
    meta: &mut serde_json::Map<String, serde_json::Value>,
    name: &str,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) {
    let key = format!("{CONVERT_METADATA_PREFIX}{name}");
    let mut record: serde_json::Value =
        serde_json::from_str(meta[&key].as_str().expect("record string")).expect("JSON");
    edit(record.as_object_mut().expect("record object"));
    meta.insert(key, record.to_string().into());
}

#[test]
fn quantize_stores_int8_and_int4_matrices_and_records_their_error() {
    use macko::checkpoint::relative_error;
    use macko::{QuantBits, Quantization, ScaleLayout};

    let dir = TempDir::new("quantize");
    let input = dir.path("in.safetensors");
    random_checkpoint(&input);
    let cases: [(&[&str], Quantization, Option<f64>, f64); 2] = [
        (
            &["--quantize", "int8"],
            Quantization::int8_per_row(),
            None,
            1e-2,
        ),
        (
            &["--quantize", "int4", "--group", "64", "--prune-to", "0.5"],
            Quantization::int4_per_group(64),
            Some(0.5),
            0.2,
        ),
    ];
    for (flags, quant, prune_to, bound) in cases {
        let output = dir.path("out.safetensors");
        let mut args: Vec<Arg<'_>> = vec![&"convert", &input, &output];
        for f in flags {
            args.push(f);
        }
        let o = macko(&args);
        assert!(o.status.success(), "{flags:?}: {}", stderr(&o));
        let out = stdout(&o);
        let described = match quant.scales {
            ScaleLayout::PerRow => "int8 per row",
            ScaleLayout::PerGroup(_) => "int4 per group of 64",
        };
        assert!(out.contains("rel.err"), "{out}");
        assert!(out.contains(&format!("quantized: {described}")), "{out}");

        let run: serde_json::Value = serde_json::from_str(
            MatrixFile::open(&output)
                .expect("output")
                .metadata()
                .expect("metadata")
                .get(CONVERT_METADATA_KEY)
                .expect("run record"),
        )
        .expect("JSON");
        assert_eq!(run["quantize"], quant.bits.as_str());
        for name in ["attn.weight", "mlp.weight"] {
            let m = match container::load_matrix(&output, name).expect("load") {
                AnyMatrix::MackoQuant(m) => m,
                other => panic!("{name} is {:?}, not quantized MACKO", other.kind()),
            };
            assert_eq!(m.quantization(), quant, "{name}");
            // The structure is the f16 encoding's of the (pruned) source; only values change.
            let mut w = source_f16(&input, name);
            if let Some(d) = prune_to {
                w = macko::prune::magnitude_per_row(&w, d).expect("prune");
            }
            let f16_encoding = MackoMatrix::from_dense(&w).expect("encode");
            assert_eq!(m.row_ptr(), f16_encoding.row_ptr(), "{name}");
            assert_eq!(m.codes(), f16_encoding.codes(), "{name}");

            let r = record(&output, name);
            assert_eq!(r["quantize"], quant.bits.as_str(), "{name}");
            match quant.scales {
                ScaleLayout::PerRow => assert!(r["group"].is_null(), "{name}"),
                ScaleLayout::PerGroup(g) => assert_eq!(r["group"], g, "{name}"),
            }
            let e = r["rel_error"].as_f64().expect("rel_error");
            assert!(e > 0.0 && e < bound, "{name} {quant:?}: rel_error {e}");
            // What the library computes from the stored matrix and the pruned f16 source.
            let again = relative_error((&m).into(), &w).expect("error");
            assert!((again - e).abs() <= e * 1e-12, "{name}: {again} vs {e}");
            assert!(out.contains(&format!("{e:.3e}")), "{name} {e:.3e}:\n{out}");
        }
        assert_eq!(quant.bits == QuantBits::Int8, flags[1] == "int8");

        let v = macko(&[&"verify", &output, &"--against", &input]);
        assert!(
            v.status.success(),
            "{flags:?}: {}{}",
            stdout(&v),
            stderr(&v)
        );
        let vout = stdout(&v);
        assert!(vout.contains("ok   macko-quant attn.weight"), "{vout}");
        assert!(vout.contains(described), "{vout}");
        assert!(vout.contains("rel. error"), "{vout}");
        assert!(vout.contains("all 2 matrices pass"), "{vout}");
        assert!(
            vout.contains("1 compared with the source, 0 differ"),
            "{vout}"
        );
    }
}

#[test]
fn verify_holds_quantized_matrices_to_their_recorded_error_and_quantization() {
    let dir = TempDir::new("quant-verify");
    let (input, output, tampered) = (
        dir.path("in.safetensors"),
        dir.path("out.safetensors"),
        dir.path("tampered.safetensors"),
    );
    random_checkpoint(&input);
    let o = macko(&[
        &"convert",
        &input,
        &output,
        &"--quantize",
        &"int4",
        &"--group",
        &"64",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = record(&output, "attn.weight")["rel_error"]
        .as_f64()
        .expect("rel_error");
    let verify = |edit: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        with_metadata(&output, &tampered, |meta| {
            edit_record(meta, "attn.weight", |r| edit(r))
        });
        macko(&[&"verify", &tampered, &"--against", &input])
    };

    // Unchanged metadata, rewritten: passes. Within the slack (JSON round trips): passes.
    assert!(verify(&|_| {}).status.success());
    let v = verify(&|r| {
        r.insert("rel_error".into(), (e * (1.0 - 1e-12)).into());
    });
    assert!(v.status.success(), "{}{}", stdout(&v), stderr(&v));

    // A promise the stored values do not keep.
    let v = verify(&|r| {
        r.insert("rel_error".into(), (e * (1.0 - 1e-6)).into());
    });
    assert_fails(
        &v,
        &[
            "attn.weight",
            "error check",
            "recomputed",
            "1 of 2 matrices fail",
        ],
    );
    assert!(
        stdout(&v).contains("ok   macko-quant mlp.weight"),
        "{}",
        stdout(&v)
    );
    let v = verify(&|r| {
        r.insert("rel_error".into(), (e / 2.0).into());
    });
    assert_fails(&v, &["attn.weight", "error check", &format!("{e:.6e}")]);

    // A quantization that is not the stored one.
    let v = verify(&|r| {
        r.insert("group".into(), 128.into());
    });
    assert_fails(
        &v,
        &[
            "attn.weight",
            "quantization check",
            "holds int4 per group of 64",
            "records int4 per group of 128",
        ],
    );
    let v = verify(&|r| {
        r.insert("quantize".into(), "int8".into());
        r.insert("group".into(), serde_json::Value::Null);
    });
    assert_fails(&v, &["quantization check", "records int8 per row"]);
    let v = verify(&|r| {
        r.remove("quantize");
        r.remove("group");
        r.remove("rel_error");
    });
    assert_fails(
        &v,
        &["records f16 values", "records no rel_error", "no bound"],
    );
    // Fields of the wrong type or outside the format's rule are named.
    let v = verify(&|r| {
        r.insert("group".into(), 12.into());
    });
    assert_fails(&v, &["attn.weight", "group", "multiple of 8"]);
    let v = verify(&|r| {
        r.insert("rel_error".into(), "small".into());
    });
    assert_fails(&v, &["rel_error is \"small\"", "finite number"]);

    // A different source: the stored values no longer approximate it.
    let other = dir.path("other.safetensors");
    write_safetensors(
        &other,
        &[
            f32_tensor("attn.weight", 48, 256, |r, c| ((r + c) % 7) as f32 - 3.0),
            f32_tensor("mlp.weight", 24, 136, |r, c| ((r * c) % 5) as f32 - 2.0),
        ],
        &[],
    );
    let v = macko(&[&"verify", &output, &"--against", &other]);
    assert_fails(&v, &["attn.weight", "mlp.weight", "error check", "2 of 2"]);
}

#[test]
fn quantize_options_are_checked_before_anything_is_written() {
    let dir = TempDir::new("quant-args");
    let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
    random_checkpoint(&input);
    let before = dir.files();
    let cases: [(&[&str], &[&str]); 5] = [
        (&["--group", "64"], &["--group 64", "needs --quantize"]),
        (
            &["--group", "64", "--prune-to", "0.5"],
            &["--group 64", "needs --quantize"],
        ),
        (
            &["--quantize", "int4", "--group", "12"],
            &["--group 12", "scale group", "multiple of 8"],
        ),
        (
            &["--quantize", "int8", "--group", "0"],
            &["--group 0", "multiple of 8"],
        ),
        (&["--quantize", "int3"], &["int3", "int8 or int4"]),
    ];
    for (flags, needles) in cases {
        let mut args: Vec<Arg<'_>> = vec![&"convert", &input, &output];
        for f in flags {
            args.push(f);
        }
        let o = macko(&args);
        assert_fails(&o, needles);
        assert_eq!(dir.files(), before, "{flags:?} wrote something");
    }
    // The library refuses the same group size, with the format's typed error.
    let opts = macko::checkpoint::ConvertOptions {
        quantize: Some(macko::Quantization::int4_per_group(12)),
        ..Default::default()
    };
    let e = macko::checkpoint::convert(&input, &output, &opts, &mut |_| {});
    assert!(
        matches!(
            e,
            Err(macko::checkpoint::CheckpointError::Format(
                macko::FormatError::ScaleGroup { group: 12 }
            ))
        ),
        "{e:?}"
    );
    assert_eq!(dir.files(), before);
}
