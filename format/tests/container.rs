//! The safetensors container: round trips of every format, and every way a file can be wrong.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::{bits, h, random_dense};
use macko_format::container::{self, AnyMatrix, MatrixFile, MatrixKind, MatrixRef};
use macko_format::{f16, CsrMatrix, DenseMatrix, FormatError, MackoMatrix, FORMAT_NAME};
use proptest::prelude::*;
use safetensors::{Dtype, View};

/// A path in the system's temporary folder, unique to this test and process.
fn temp_path(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "macko-format-test-{}-{test}.safetensors",
        std::process::id()
    ))
}

/// A tensor to write with the safetensors crate directly (to craft files our API would not).
struct Raw {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Raw {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn raw(dtype: Dtype, shape: &[usize], data: Vec<u8>) -> Raw {
    Raw {
        dtype,
        shape: shape.to_vec(),
        data,
    }
}

fn raw_file(tensors: &[(&str, Raw)], metadata: &[(&str, &str)]) -> MatrixFile {
    let meta: HashMap<String, String> = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let bytes = safetensors::serialize(tensors.iter().map(|(n, t)| (n.to_string(), t)), Some(meta))
        .unwrap();
    MatrixFile::from_bytes("crafted", bytes).unwrap()
}

fn f16_le(v: &[f16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect()
}

fn u32_le(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32_le(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn meta(kind: &str, rows: usize, cols: usize) -> String {
    format!(
        r#"{{"format":"{FORMAT_NAME}","version":1,"kind":"{kind}","rows":{rows},"cols":{cols}}}"#
    )
}

fn message(e: &FormatError) -> String {
    e.to_string()
}

#[test]
fn a_macko_matrix_with_nan_and_negative_zero_loads_equal_to_itself() {
    // NaN is stored (it is not zero); −0.0 padding is valid (not canonical). Equality is of the
    // stored bits, so the loaded matrix equals the saved one, and −0.0 is told from +0.0.
    let mut w = vec![f16::ZERO; 40];
    w[0] = f16::NAN;
    w[30] = h(2.0);
    let m = MackoMatrix::from_dense(&DenseMatrix::new(1, 40, w).unwrap()).unwrap();
    assert_eq!(m, m.clone());
    let path = temp_path("nan-equality");
    container::save(&path, &[("w", (&m).into())]).unwrap();
    let loaded = container::load_matrix(&path, "w").unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(loaded, AnyMatrix::Macko(m.clone()));
    let mut values = m.values().to_vec();
    let pad = values.iter().position(|v| v.to_bits() == 0).unwrap();
    values[pad] = -f16::ZERO;
    let negative = MackoMatrix::from_parts(
        m.rows(),
        m.cols(),
        m.row_ptr().to_vec(),
        values,
        m.codes().to_vec(),
    )
    .unwrap();
    assert_ne!(negative, m);
}

#[test]
fn every_format_round_trips_through_one_file() {
    let dense = random_dense(37, 300, 0.3, 1);
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    let csr = CsrMatrix::from_dense(&dense).unwrap();
    let empty = MackoMatrix::from_dense(&DenseMatrix::zeros(0, 5).unwrap()).unwrap();
    let no_cols = DenseMatrix::zeros(4, 0).unwrap();
    let path = temp_path("round-trip");
    container::save(
        &path,
        &[
            ("layers.0.w", (&macko).into()),
            ("layers.0.csr", (&csr).into()),
            ("layers.0.dense", (&dense).into()),
            ("empty", (&empty).into()),
            ("no_cols", (&no_cols).into()),
        ],
    )
    .unwrap();

    let all = container::load(&path).unwrap();
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "empty",
            "layers.0.csr",
            "layers.0.dense",
            "layers.0.w",
            "no_cols"
        ]
    );
    assert_eq!(all[0].1, AnyMatrix::Macko(empty));
    assert_eq!(all[1].1, AnyMatrix::Csr(csr.clone()));
    assert_eq!(all[2].1, AnyMatrix::Dense(dense.clone()));
    assert_eq!(all[3].1, AnyMatrix::Macko(macko.clone()));
    assert_eq!(all[4].1, AnyMatrix::Dense(no_cols));

    let one = container::load_matrix(&path, "layers.0.w").unwrap();
    assert_eq!(one.kind(), MatrixKind::Macko);
    assert_eq!((one.rows(), one.cols()), (37, 300));
    assert_eq!(one.into_macko().unwrap(), macko);
    // CSR and dense encode to the same MACKO matrix.
    let from_csr = container::load_matrix(&path, "layers.0.csr").unwrap();
    assert_eq!(from_csr.into_macko().unwrap(), macko);
    // A dense matrix is also a plain 2-D tensor.
    assert_eq!(
        container::load_dense_tensor(&path, "layers.0.dense").unwrap(),
        dense
    );

    let file = MatrixFile::open(&path).unwrap();
    assert_eq!(file.label(), path.display().to_string());
    let tensors = file.tensor_names();
    assert!(tensors.contains(&"layers.0.w.codes".to_string()));
    assert!(tensors.contains(&"layers.0.csr.col_idx".to_string()));
    let meta = file.metadata().unwrap();
    let w: serde_json::Value = serde_json::from_str(&meta["macko.layers.0.w"]).unwrap();
    assert_eq!(w["format"], FORMAT_NAME);
    assert_eq!(w["version"], 1);
    assert_eq!(w["kind"], "macko");
    assert_eq!(
        (w["rows"].as_u64(), w["cols"].as_u64()),
        (Some(37), Some(300))
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn stored_arrays_are_the_format_arrays() {
    // The tensors hold the arrays of docs/FORMAT.md unchanged, so a backend could upload them
    // as they are.
    let dense = random_dense(5, 40, 0.2, 2);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    let bytes = container::to_bytes(&[("m", (&m).into())]).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let row_ptr = st.tensor("m.row_ptr").unwrap();
    assert_eq!(row_ptr.dtype(), Dtype::U32);
    assert_eq!(row_ptr.data(), u32_le(m.row_ptr()).as_slice());
    let values = st.tensor("m.values").unwrap();
    assert_eq!(values.dtype(), Dtype::F16);
    assert_eq!(values.shape(), [m.padded_entries()]);
    assert_eq!(values.data(), f16_le(m.values()).as_slice());
    let codes = st.tensor("m.codes").unwrap();
    assert_eq!(codes.dtype(), Dtype::U8);
    assert_eq!(codes.data(), m.codes());
}

#[test]
fn clashing_or_reserved_names_are_refused_at_save() {
    let m = MackoMatrix::from_dense(&random_dense(2, 8, 0.5, 3)).unwrap();
    let d = DenseMatrix::zeros(1, 1).unwrap();
    let twice = container::to_bytes(&[("a", (&m).into()), ("a", (&d).into())]).unwrap_err();
    assert!(message(&twice).contains("twice"), "{twice}");
    let clash = container::to_bytes(&[("a", (&m).into()), ("a.values", (&d).into())]).unwrap_err();
    assert!(message(&clash).contains("a.values"), "{clash}");
    for bad in ["", "__metadata__"] {
        let e = container::to_bytes(&[(bad, MatrixRef::Dense(&d))]).unwrap_err();
        assert!(matches!(e, FormatError::Container { .. }), "{e}");
    }
}

#[test]
fn missing_file_is_an_io_error_with_the_path() {
    let path = temp_path("does-not-exist");
    let e = container::load(&path).unwrap_err();
    match &e {
        FormatError::Io { path: p, kind, .. } => {
            assert_eq!(p, &path.display().to_string());
            assert_eq!(*kind, std::io::ErrorKind::NotFound);
        }
        other => panic!("expected Io, got {other:?}"),
    }
    assert!(message(&e).contains("does-not-exist"));
    // Writing into a folder that does not exist fails the same way.
    let d = DenseMatrix::zeros(1, 1).unwrap();
    let e = container::save(
        std::env::temp_dir().join("macko-no-such-dir/x.safetensors"),
        &[("d", (&d).into())],
    )
    .unwrap_err();
    assert!(matches!(e, FormatError::Io { .. }), "{e:?}");
}

#[test]
fn unknown_names_list_some_that_exist() {
    let d = DenseMatrix::zeros(2, 2).unwrap();
    let named: Vec<String> = (0..12).map(|i| format!("layer{i:02}")).collect();
    let list: Vec<(&str, MatrixRef)> = named.iter().map(|n| (n.as_str(), (&d).into())).collect();
    let file = MatrixFile::from_bytes("f", container::to_bytes(&list).unwrap()).unwrap();

    let e = file.dense_tensor("layer99").unwrap_err();
    match &e {
        FormatError::NotFound {
            what,
            name,
            available,
            total,
            ..
        } => {
            assert_eq!((*what, name.as_str(), *total), ("tensor", "layer99", 12));
            assert_eq!(available.len(), 8);
            assert_eq!(available[0], "layer00");
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert!(message(&e).contains("layer00, layer01"), "{e}");

    let e = file.matrix("nope").unwrap_err();
    assert!(
        matches!(
            &e,
            FormatError::NotFound {
                what: "matrix",
                total: 12,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn plain_tensors_of_a_checkpoint_convert_with_round_to_nearest() {
    // f32 values chosen around binary16 rounding boundaries.
    let one = 1.0f32;
    let ulp = 2f32.powi(-10); // spacing of binary16 at 1.0
    let f32s = [
        one + ulp / 2.0,  // tie: rounds to even (1.0)
        one + 1.5 * ulp,  // tie: rounds to even (1 + 2 ulp)
        one + 0.26 * ulp, // rounds down
        65519.0,          // largest value that still rounds to 65504
        -65519.0,
        1e-9,          // below half the smallest subnormal: rounds to +0
        f32::INFINITY, // infinities and NaN in the source are kept
        f32::NAN,
    ];
    let expected = [
        h(1.0),
        f16::from_f32(one + 2.0 * ulp),
        h(1.0),
        f16::MAX,
        f16::MIN,
        f16::ZERO,
        f16::INFINITY,
        f16::NAN,
    ];
    let bf16s: Vec<half::bf16> = [1.0f32, -2.5, 3.0e-3, 65280.0, 0.0, -0.0, 7.0, 1.0e38]
        .iter()
        .map(|&v| half::bf16::from_f32(v))
        .collect();
    let bf16_bytes: Vec<u8> = bf16s
        .iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .collect();
    let file = raw_file(
        &[
            ("f32", raw(Dtype::F32, &[2, 4], f32_le(&f32s))),
            ("bf16", raw(Dtype::BF16, &[2, 4], bf16_bytes.clone())),
            ("f16", raw(Dtype::F16, &[1, 8], f16_le(&expected))),
        ],
        &[],
    );
    let m = file.dense_tensor("f32").unwrap();
    assert_eq!((m.rows(), m.cols()), (2, 4));
    assert_eq!(bits(m.values()), bits(&expected));
    let m = file.dense_tensor("f16").unwrap();
    assert_eq!(bits(m.values()), bits(&expected));
    // bf16: the last value (1e38) overflows binary16; report it instead of turning it into ∞.
    let e = file.dense_tensor("bf16").unwrap_err();
    match e {
        FormatError::F16Overflow {
            context,
            row,
            col,
            value,
        } => {
            assert!(context.contains("`bf16`"), "{context}");
            assert_eq!((row, col), (1, 3));
            assert_eq!(value, f64::from(bf16s[7].to_f32()));
        }
        other => panic!("expected F16Overflow, got {other:?}"),
    }
}

#[test]
fn f32_overflow_names_the_first_offending_element() {
    let mut v = vec![0.5f32; 3 * 5];
    v[7] = 65520.0; // rounds to ∞ in binary16
    v[12] = -1.0e30;
    let file = raw_file(&[("w", raw(Dtype::F32, &[3, 5], f32_le(&v)))], &[]);
    let e = file.dense_tensor("w").unwrap_err();
    assert_eq!(
        e,
        FormatError::F16Overflow {
            context: "crafted, tensor `w`".into(),
            row: 1,
            col: 2,
            value: 65520.0,
        }
    );
    assert!(message(&e).contains("65520"));
}

#[test]
fn tensors_that_are_not_matrices_are_refused() {
    let file = raw_file(
        &[
            ("cube", raw(Dtype::F16, &[2, 2, 2], f16_le(&[h(1.0); 8]))),
            ("bias", raw(Dtype::F16, &[4], f16_le(&[h(1.0); 4]))),
            ("ints", raw(Dtype::I32, &[2, 2], u32_le(&[1, 2, 3, 4]))),
            (
                "f64",
                raw(Dtype::F64, &[1, 1], 1.0f64.to_le_bytes().to_vec()),
            ),
        ],
        &[],
    );
    let e = file.dense_tensor("cube").unwrap_err();
    assert!(matches!(e, FormatError::Container { .. }), "{e:?}");
    assert!(message(&e).contains("3-D"), "{e}");
    assert!(message(&e).contains("`cube`"), "{e}");
    let e = file.dense_tensor("bias").unwrap_err();
    assert!(message(&e).contains("1-D"), "{e}");
    for name in ["ints", "f64"] {
        let e = file.dense_tensor(name).unwrap_err();
        assert!(message(&e).contains("dtype"), "{e}");
        assert!(message(&e).contains(&format!("`{name}`")), "{e}");
    }
}

#[test]
fn corrupt_headers_are_errors() {
    let good = container::to_bytes(&[("d", (&DenseMatrix::zeros(2, 3).unwrap()).into())]).unwrap();
    let corrupt = |bytes: Vec<u8>| match MatrixFile::from_bytes("bad", bytes) {
        Err(FormatError::Container { context, message }) => {
            assert_eq!(context, "bad");
            message
        }
        other => panic!("expected a Container error, got {other:?}"),
    };
    // Shorter than the length prefix.
    assert!(corrupt(vec![1, 2, 3]).contains("shorter"));
    // Length prefix beyond the limit, and beyond the file.
    let mut b = good.clone();
    b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(corrupt(b).contains("limit"));
    let mut b = good.clone();
    b[..8].copy_from_slice(&((good.len() as u64) * 2).to_le_bytes());
    assert!(corrupt(b).contains("past the end"));
    // Header that is not JSON.
    let mut b = good.clone();
    b[8] = b'#';
    assert!(corrupt(b).contains("header"));
    // Truncated data, and data left over.
    assert!(corrupt(good[..good.len() - 2].to_vec()).contains("bytes of tensor data"));
    let mut b = good.clone();
    b.push(0);
    assert!(corrupt(b).contains("bytes of tensor data"));
}

#[test]
fn header_sizes_near_usize_max_are_an_error_not_an_overflow() {
    // Eight U8 tensors of usize::MAX/8 bytes each: their sizes sum to usize::MAX − 7, and
    // adding the header length to that overflows (safetensors 0.8's own parser panics here in
    // debug builds). The file holds no data at all.
    let k = usize::MAX / 8;
    let entries: Vec<String> = (0..8)
        .map(|i| {
            format!(
                r#""t{i}":{{"dtype":"U8","shape":[{k}],"data_offsets":[{},{}]}}"#,
                i * k,
                (i + 1) * k
            )
        })
        .collect();
    let mut header = format!("{{{}}}", entries.join(","));
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    let e = MatrixFile::from_bytes("huge", bytes).unwrap_err();
    assert!(message(&e).contains("bytes of tensor data"), "{e}");
}

#[test]
fn bad_metadata_is_reported() {
    let row_ptr = raw(Dtype::U32, &[2], u32_le(&[0, 1]));
    let values = raw(
        Dtype::F16,
        &[8],
        f16_le(&[
            h(1.0),
            f16::ZERO,
            f16::ZERO,
            f16::ZERO,
            f16::ZERO,
            f16::ZERO,
            f16::ZERO,
            f16::ZERO,
        ]),
    );
    let codes = raw(Dtype::U8, &[4], vec![0; 4]);
    let tensors = [
        ("m.row_ptr", row_ptr),
        ("m.values", values),
        ("m.codes", codes),
    ];
    let ok = raw_file(&tensors, &[("macko.m", &meta("macko", 1, 1))]);
    assert_eq!(ok.matrix("m").unwrap().rows(), 1);

    let cases = [
        ("not json", "is not JSON"),
        (
            r#"{"version":1,"kind":"macko","rows":1,"cols":1}"#,
            "no field `format`",
        ),
        (
            r#"{"format":"MACKO-8-2","version":1,"kind":"macko","rows":1,"cols":1}"#,
            "format is",
        ),
        (
            r#"{"format":"MACKO-16-4","version":2,"kind":"macko","rows":1,"cols":1}"#,
            "version",
        ),
        (
            r#"{"format":"MACKO-16-4","version":1,"kind":"coo","rows":1,"cols":1}"#,
            "kind is",
        ),
        (
            r#"{"format":"MACKO-16-4","version":1,"kind":"macko","rows":-1,"cols":1}"#,
            "rows is",
        ),
        (
            r#"{"format":"MACKO-16-4","version":1,"kind":"macko","rows":1,"cols":1e3}"#,
            "cols is",
        ),
    ];
    for (value, expect) in cases {
        let file = raw_file(&tensors, &[("macko.m", value)]);
        let e = file.matrix("m").unwrap_err();
        assert!(matches!(e, FormatError::Container { .. }), "{e:?}");
        assert!(message(&e).contains(expect), "{value}: {e}");
        assert!(message(&e).contains("macko.m"), "{e}");
        // Listing the matrices reports the same problem rather than skipping the entry.
        assert!(file.matrices().is_err());
    }
}

#[test]
fn stored_arrays_are_validated_with_from_parts() {
    let mut vals = vec![f16::ZERO; 8];
    vals[0] = h(1.0);
    let good_values = f16_le(&vals);
    vals[5] = h(2.0); // tail padding must be +0.0
    let bad_values = f16_le(&vals);
    let file = |values: Vec<u8>, row_ptr: Raw, cols: usize| {
        raw_file(
            &[
                ("m.row_ptr", row_ptr),
                ("m.values", raw(Dtype::F16, &[8], values)),
                ("m.codes", raw(Dtype::U8, &[4], vec![0; 4])),
            ],
            &[("macko.m", &meta("macko", 1, cols))],
        )
    };
    let rp = || raw(Dtype::U32, &[2], u32_le(&[0, 1]));

    let e = file(bad_values, rp(), 1).matrix("m").unwrap_err();
    match &e {
        FormatError::InContainer { context, source } => {
            assert!(
                context.contains("crafted") && context.contains("`m`"),
                "{context}"
            );
            assert_eq!(
                **source,
                FormatError::TailValueNotZero {
                    index: 5,
                    bits: h(2.0).to_bits()
                }
            );
        }
        other => panic!("expected InContainer, got {other:?}"),
    }
    // cols = 0 with an entry: rule 4.
    let e = file(good_values.clone(), rp(), 0).matrix("m").unwrap_err();
    assert!(
        matches!(&e, FormatError::InContainer { source, .. }
            if matches!(**source, FormatError::ColumnOutOfRange { row: 0, column: 0, cols: 0 })),
        "{e:?}"
    );
    // The metadata's rows disagree with row_ptr: rule 1.
    let f = raw_file(
        &[
            ("m.row_ptr", rp()),
            ("m.values", raw(Dtype::F16, &[8], good_values.clone())),
            ("m.codes", raw(Dtype::U8, &[4], vec![0; 4])),
        ],
        &[("macko.m", &meta("macko", 3, 1))],
    );
    let e = f.matrix("m").unwrap_err();
    assert!(
        matches!(&e, FormatError::InContainer { source, .. }
            if matches!(**source, FormatError::RowPtrLength { rows: 3, expected: 4, found: 2 })),
        "{e:?}"
    );
    // I32 row pointers (the reference's dtype) are read when non-negative …
    let i32_rp = raw(Dtype::I32, &[2], u32_le(&[0, 1]));
    assert!(file(good_values.clone(), i32_rp, 1).matrix("m").is_ok());
    // … and refused when negative.
    let neg = raw(
        Dtype::I32,
        &[2],
        [0i32, -1].iter().flat_map(|v| v.to_le_bytes()).collect(),
    );
    let e = file(good_values.clone(), neg, 1).matrix("m").unwrap_err();
    assert!(
        message(&e).contains("negative") && message(&e).contains("m.row_ptr"),
        "{e}"
    );
    // A wrong dtype names the tensor.
    let f32_rp = raw(Dtype::F32, &[2], f32_le(&[0.0, 1.0]));
    let e = file(good_values.clone(), f32_rp, 1)
        .matrix("m")
        .unwrap_err();
    assert!(
        message(&e).contains("`m.row_ptr`") && message(&e).contains("F32"),
        "{e}"
    );
    // A 2-D array where a 1-D one belongs.
    let rp_2d = raw(Dtype::U32, &[1, 2], u32_le(&[0, 1]));
    let e = file(good_values, rp_2d, 1).matrix("m").unwrap_err();
    assert!(message(&e).contains("1-D"), "{e}");
    // A matrix whose tensors are missing.
    let f = raw_file(&[], &[("macko.m", &meta("macko", 1, 1))]);
    let e = f.matrix("m").unwrap_err();
    assert!(
        matches!(&e, FormatError::NotFound { what: "tensor", name, .. } if name == "m.row_ptr"),
        "{e:?}"
    );
}

#[test]
fn csr_and_dense_in_files_are_validated_too() {
    // CSR with decreasing columns.
    let f = raw_file(
        &[
            ("c.row_ptr", raw(Dtype::U32, &[2], u32_le(&[0, 2]))),
            ("c.col_idx", raw(Dtype::U32, &[2], u32_le(&[3, 1]))),
            ("c.values", raw(Dtype::F16, &[2], f16_le(&[h(1.0), h(2.0)]))),
        ],
        &[("macko.c", &meta("csr", 1, 4))],
    );
    let e = f.matrix("c").unwrap_err();
    assert!(
        matches!(&e, FormatError::InContainer { source, .. }
            if matches!(**source, FormatError::CsrColumnsNotIncreasing { row: 0, index: 1, previous: 3, column: 1 })),
        "{e:?}"
    );
    // Dense whose shape disagrees with the metadata, or whose dtype is not F16.
    let f = raw_file(
        &[
            ("d", raw(Dtype::F16, &[2, 3], f16_le(&[h(1.0); 6]))),
            ("e", raw(Dtype::F32, &[2, 3], f32_le(&[1.0; 6]))),
        ],
        &[
            ("macko.d", &meta("dense", 3, 2)),
            ("macko.e", &meta("dense", 2, 3)),
        ],
    );
    for name in ["d", "e"] {
        let e = f.matrix(name).unwrap_err();
        assert!(message(&e).contains("promises"), "{e}");
    }
}

fn valid_file_bytes() -> Vec<u8> {
    let dense = random_dense(6, 70, 0.3, 9);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    let c = CsrMatrix::from_dense(&dense).unwrap();
    container::to_bytes(&[
        ("m", (&m).into()),
        ("c", (&c).into()),
        ("d", (&dense).into()),
    ])
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any byte changed anywhere, or the file cut anywhere, gives a value or an error, never a
    /// panic; and whatever loads is valid (re-checking through from_parts accepts it).
    #[test]
    fn mutated_files_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = valid_file_bytes();
        for (at, byte) in edits {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Some(cut) = cut {
            let n = cut.index(bytes.len());
            bytes.truncate(n);
        }
        if let Ok(file) = MatrixFile::from_bytes("mutated", bytes) {
            for name in ["m", "c", "d"] {
                if let Ok(AnyMatrix::Macko(m)) = file.matrix(name) {
                    let (rows, cols) = (m.rows(), m.cols());
                    let (r, v, c) = m.into_parts();
                    prop_assert!(MackoMatrix::from_parts(rows, cols, r, v, c).is_ok());
                }
                let _ = file.dense_tensor(name);
            }
            let _ = file.matrices();
        }
    }
}

/// A file whose tensors were not all written (issue 27, finding 5: after `kill -9` during
/// writing, a full-size file whose last tensors read as zeros, which form a valid matrix) fails
/// to load, naming the tensor; every tensor the record lists is checked.
#[test]
fn a_file_not_completely_written_is_refused_on_load() {
    let dense = random_dense(12, 70, 0.4, 7);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    let bytes = container::to_bytes(&[("w", (&m).into())]).unwrap();
    let file = MatrixFile::from_bytes("whole", bytes.clone()).unwrap();
    let record = file.metadata().unwrap()[container::CHECKSUMS_KEY].clone();
    for tensor in ["w.row_ptr", "w.values", "w.codes"] {
        assert!(record.contains(&format!("\"{tensor}\"")), "{record}");
    }
    assert_eq!(file.matrix("w").unwrap(), AnyMatrix::Macko(m.clone()));

    // The values zeroed, as an unwritten tail reads: still a valid MACKO matrix, but refused.
    let values = tensor_range(&bytes, "w.values");
    let mut truncated = bytes.clone();
    truncated[values].fill(0);
    let err = MatrixFile::from_bytes("cut", truncated).unwrap_err();
    let text = message(&err);
    assert!(
        text.contains("w.values") && text.contains("not completely written"),
        "{text}"
    );
    // One flipped bit of the row pointers is caught too.
    let row_ptr = tensor_range(&bytes, "w.row_ptr");
    let mut flipped = bytes;
    flipped[row_ptr.start + 5] ^= 1;
    let text = message(&MatrixFile::from_bytes("flip", flipped).unwrap_err());
    assert!(text.contains("w.row_ptr"), "{text}");
}

/// A file written by another tool (no record) loads as before.
#[test]
fn a_file_without_checksums_loads() {
    let dense = random_dense(5, 33, 0.5, 3);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    let file = raw_file(
        &[
            (
                "w.row_ptr",
                raw(Dtype::U32, &[m.row_ptr().len()], u32_le(m.row_ptr())),
            ),
            (
                "w.values",
                raw(Dtype::F16, &[m.values().len()], f16_le(m.values())),
            ),
            (
                "w.codes",
                raw(Dtype::U8, &[m.codes().len()], m.codes().to_vec()),
            ),
        ],
        &[("macko.w", &meta("macko", 5, 33))],
    );
    assert!(!file
        .metadata()
        .unwrap()
        .contains_key(container::CHECKSUMS_KEY));
    assert_eq!(file.matrix("w").unwrap(), AnyMatrix::Macko(m));
}

/// The byte range of a tensor's data in a safetensors file's bytes.
fn tensor_range(bytes: &[u8], name: &str) -> std::ops::Range<usize> {
    let (header_len, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let (start, end) = meta.info(name).unwrap().data_offsets;
    (8 + header_len + start)..(8 + header_len + end)
}

/// Issue 27, finding 7: a header naming a tensor twice, or a metadata key twice, is refused
/// rather than read as its last value (another reader might keep the first).
#[test]
fn duplicate_keys_in_a_header_are_refused() {
    let file = |header: &str, data: &[u8]| {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        MatrixFile::from_bytes("dup", bytes)
    };
    let one = r#""dtype":"F16","shape":[1],"data_offsets":[0,2]"#;
    let ok = format!(r#"{{"a":{{{one}}}}}"#);
    assert!(file(&ok, &[0, 60]).is_ok());
    let twice = format!(r#"{{"a":{{{one}}},"a":{{{one}}}}}"#);
    let text = message(&file(&twice, &[0, 60]).unwrap_err());
    assert!(text.contains("`a` appears twice"), "{text}");
    let meta = format!(r#"{{"__metadata__":{{"macko.a":"x","macko.a":"y"}},"a":{{{one}}}}}"#);
    let text = message(&file(&meta, &[0, 60]).unwrap_err());
    assert!(
        text.contains("metadata key `macko.a` appears twice"),
        "{text}"
    );
}

/// Every kind compares its stored values as bits (issue 27, finding 8, for the formats beside
/// MACKO): a matrix holding NaN equals itself after a round trip, and −0.0 differs from +0.0.
#[test]
fn every_kind_with_nan_loads_equal_to_itself() {
    let mut values = vec![h(0.0); 3 * 20];
    values[1] = f16::NAN;
    values[22] = h(-3.5);
    values[45] = f16::INFINITY;
    let dense = DenseMatrix::new(3, 20, values.clone()).unwrap();
    let csr = CsrMatrix::from_dense(&dense).unwrap();
    let q = macko_format::Quantization {
        bits: macko_format::QuantBits::Int8,
        scales: macko_format::ScaleLayout::PerRow,
    };
    let finite = DenseMatrix::new(
        3,
        20,
        values
            .iter()
            .map(|v| if v.is_finite() { *v } else { h(1.0) })
            .collect(),
    )
    .unwrap();
    let qd = macko_format::QuantDenseMatrix::quantize(&finite, q).unwrap();
    let bytes = container::to_bytes(&[
        ("d", (&dense).into()),
        ("c", (&csr).into()),
        ("q", (&qd).into()),
    ])
    .unwrap();
    let file = MatrixFile::from_bytes("nan", bytes).unwrap();
    assert_eq!(file.matrix("d").unwrap(), AnyMatrix::Dense(dense.clone()));
    assert_eq!(file.matrix("c").unwrap(), AnyMatrix::Csr(csr));
    assert_eq!(file.matrix("q").unwrap(), AnyMatrix::DenseQuant(qd));
    let mut negative = values;
    negative[0] = f16::NEG_ZERO;
    assert_ne!(DenseMatrix::new(3, 20, negative).unwrap(), dense);
}
