//! The golden vectors of the reference implementation (fixtures/macko-reference, with their
//! provenance in its README): our encoder must reproduce its arrays bit for bit, and its arrays
//! must validate and decode back to the dense input. A missing folder fails the test rather than
//! skipping it, so that CI cannot pass without having compared anything.

mod common;

use std::path::{Path, PathBuf};

use common::bits;
use macko_format::container::{self, AnyMatrix};
use macko_format::{f16, DenseMatrix, MackoMatrix};

/// The fixtures folder: beside this crate in the workspace where the test was built, else
/// relative to the working directory (a test binary run from a copy of the repository, as on a
/// GPU machine, from its root or from format/).
fn golden_dir() -> PathBuf {
    let candidates = [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/macko-reference"),
        PathBuf::from("fixtures/macko-reference"),
        PathBuf::from("../fixtures/macko-reference"),
    ];
    let found = candidates.iter().find(|d| d.join("manifest.tsv").is_file());
    match found {
        Some(dir) => dir.clone(),
        None => panic!(
            "golden vectors not found (no manifest.tsv) in any of {candidates:?}: they live in \
             the repository's fixtures/macko-reference"
        ),
    }
}

struct Case {
    name: String,
    rows: usize,
    cols: usize,
    stored: usize,
    padded: usize,
    description: String,
    dense: Vec<f16>,
    values: Vec<f16>,
    codes: Vec<u8>,
    row_ptr: Vec<u32>,
}

fn read(dir: &Path, file: String) -> Vec<u8> {
    std::fs::read(dir.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn f16s(bytes: &[u8]) -> Vec<f16> {
    assert_eq!(bytes.len() % 2, 0);
    bytes
        .chunks_exact(2)
        .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
        .collect()
}

fn cases() -> Vec<Case> {
    let dir = golden_dir();
    let manifest = std::fs::read_to_string(dir.join("manifest.tsv")).unwrap();
    let mut cases = Vec::new();
    for line in manifest.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        assert!(f.len() >= 6, "manifest line has too few fields: {line}");
        let n = |i: usize| f[i].parse::<usize>().unwrap();
        let name = f[0].to_string();
        let row_ptr_bytes = read(&dir, format!("{name}.rowptr.i32"));
        let row_ptr = row_ptr_bytes
            .chunks_exact(4)
            .map(|b| {
                let v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                u32::try_from(v).unwrap_or_else(|_| panic!("{name}: negative row_ptr {v}"))
            })
            .collect();
        cases.push(Case {
            rows: n(1),
            cols: n(2),
            stored: n(3),
            padded: n(4),
            description: f[5..].join(" "),
            dense: f16s(&read(&dir, format!("{name}.dense.f16"))),
            values: f16s(&read(&dir, format!("{name}.values.f16"))),
            codes: read(&dir, format!("{name}.deltas.u8")),
            row_ptr,
            name,
        });
    }
    // Every case file in the folder is listed (nothing is silently left out), and there is
    // something to compare.
    let on_disk = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".dense.f16")
        })
        .count();
    assert_eq!(
        on_disk,
        cases.len(),
        "manifest.tsv and the case files disagree"
    );
    assert!(!cases.is_empty(), "manifest.tsv lists no case");
    cases
}

/// −0.0 decodes as +0.0 (docs/FORMAT.md: −0.0 is not preserved), so it is compared as +0.0.
fn normalise_zero(v: &[f16]) -> Vec<u16> {
    v.iter()
        .map(|x| {
            if x.to_bits() == 0x8000 {
                0
            } else {
                x.to_bits()
            }
        })
        .collect()
}

#[test]
fn golden_vectors_match_bit_for_bit() {
    let cases = cases();
    let mut negative_zeros = 0;
    for c in &cases {
        let label = format!("{} ({}×{}, {})", c.name, c.rows, c.cols, c.description);
        // The files agree with the manifest.
        assert_eq!(c.dense.len(), c.rows * c.cols, "{label}: dense length");
        assert_eq!(c.row_ptr.len(), c.rows + 1, "{label}: row_ptr length");
        assert_eq!(c.row_ptr[c.rows] as usize, c.stored, "{label}: stored");
        assert_eq!(c.values.len(), c.padded, "{label}: values length");
        assert_eq!(c.codes.len(), c.padded / 2, "{label}: codes length");
        negative_zeros += c.dense.iter().filter(|v| v.to_bits() == 0x8000).count();

        // Our encoder reproduces the reference arrays bit for bit.
        let dense = DenseMatrix::new(c.rows, c.cols, c.dense.clone()).unwrap();
        let ours = MackoMatrix::from_dense(&dense).unwrap();
        assert_eq!(ours.row_ptr(), c.row_ptr.as_slice(), "{label}: row_ptr");
        assert_eq!(bits(ours.values()), bits(&c.values), "{label}: values");
        assert_eq!(ours.codes(), c.codes.as_slice(), "{label}: codes");
        assert!(
            ours.is_canonical(),
            "{label}: our encoding is not canonical"
        );

        // The reference arrays pass validation, are canonical, and decode to the input.
        let theirs = MackoMatrix::from_parts(
            c.rows,
            c.cols,
            c.row_ptr.clone(),
            c.values.clone(),
            c.codes.clone(),
        )
        .unwrap_or_else(|e| panic!("{label}: from_parts refused the reference arrays: {e}"));
        assert!(
            theirs.is_canonical(),
            "{label}: reference arrays not canonical"
        );
        let decoded = theirs.to_dense().unwrap();
        assert_eq!(
            bits(decoded.values()),
            normalise_zero(&c.dense),
            "{label}: decoding does not give back the dense input"
        );
        // Through CSR and back, and through COO, the same arrays come out.
        let csr = theirs.to_csr().unwrap();
        assert_eq!(csr.to_dense().unwrap(), decoded, "{label}: CSR decode");
        assert_eq!(
            MackoMatrix::from_csr(&csr).unwrap(),
            ours,
            "{label}: via CSR"
        );
    }
    // No case has −0.0 today; if one is added, the comparison above already handles it.
    println!(
        "{} golden cases compared; {negative_zeros} negative zeros in the inputs",
        cases.len()
    );
}

#[test]
fn golden_vectors_survive_the_container() {
    let cases = cases();
    let matrices: Vec<(String, MackoMatrix)> = cases
        .iter()
        .map(|c| {
            let m = MackoMatrix::from_parts(
                c.rows,
                c.cols,
                c.row_ptr.clone(),
                c.values.clone(),
                c.codes.clone(),
            )
            .unwrap();
            (c.name.clone(), m)
        })
        .collect();
    let list: Vec<(&str, container::MatrixRef)> = matrices
        .iter()
        .map(|(n, m)| (n.as_str(), m.into()))
        .collect();
    let bytes = container::to_bytes(&list).unwrap();
    let loaded = container::MatrixFile::from_bytes("golden", bytes)
        .unwrap()
        .matrices()
        .unwrap();
    assert_eq!(loaded.len(), matrices.len());
    for ((name, m), (loaded_name, loaded)) in matrices.iter().zip(&loaded) {
        assert_eq!(name, loaded_name);
        assert_eq!(loaded, &AnyMatrix::Macko(m.clone()), "{name}");
    }
}
