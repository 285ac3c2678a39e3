//! Fuzzing that stays (issue 27): a bounded, seeded mutation run over the doors untrusted bytes
//! come in by — the container parser (`MatrixFile::from_bytes`, then every matrix it describes,
//! and every tensor read as `convert` reads a checkpoint's weights: `dense_tensor`, then
//! encoded) and `MackoMatrix::from_parts` — with the properties every input must keep:
//!
//! - nothing panics (each input runs under `catch_unwind`; a panicking input is written to
//!   `target/fuzz-crashes/` and named in the failure, so it can join the corpus);
//! - loading allocates at most [`ALLOC_PER_INPUT_BYTE`] bytes per input byte plus
//!   [`ALLOC_SLACK`] (a counting allocator measures the peak of each call);
//! - a matrix that loads multiplies without error, and where x is finite its f64 reference
//!   product equals that of its dense decoding (padding and explicit zeros never count).
//!
//! Inputs: seeds made here from every kind of matrix the container stores, the files of
//! `fixtures/fuzz/container/` (the kept corpus: crashers found once stay as regressions), and
//! seeded mutations of those — bit flips, interesting bytes, truncations, extensions, spliced
//! chunks, the header's length word, and the header's numbers replaced by boundary values. The
//! run is one test, sequential (the allocator's peak is process-wide), bounded by a count of
//! inputs (fewer in debug builds) rather than time, and prints its figures: inputs tried, how
//! many loaded, crashes, the largest allocation per input byte.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use common::{h, random_dense};
use macko_format::container::{self, AnyMatrix, MatrixFile, MatrixRef};
use macko_format::reference;
use macko_format::{
    f16, CsrMatrix, MackoMatrix, QuantBits, QuantDenseMatrix, QuantMackoMatrix, Quantization,
    ScaleLayout,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use safetensors::tensor::TensorView;

/// Container inputs per run: every seed and corpus file, then mutations of them up to this.
const CONTAINER_INPUTS: usize = if cfg!(debug_assertions) {
    30_000
} else {
    100_000
};
/// `from_parts` calls per run.
const PARTS_INPUTS: usize = if cfg!(debug_assertions) {
    30_000
} else {
    100_000
};
/// Loading may allocate this many bytes per input byte at its peak...
const ALLOC_PER_INPUT_BYTE: usize = 4;
/// ...plus this much.
const ALLOC_SLACK: usize = 1 << 20;
/// Products are computed only for matrices at most this wide (a valid one-row MACKO matrix may
/// claim 2^32 − 1 columns; its x would be the test's allocation, not the library's).
const MAX_PRODUCT_COLS: usize = 1 << 16;

mod counting_alloc;
use counting_alloc::measured;

// ---------------------------------------------------------------------------------------------
// Inputs.

/// One small matrix of every kind the container stores, each in its own file, and all in one.
fn seeds() -> Vec<Vec<u8>> {
    let dense = random_dense(9, 45, 0.3, 11);
    let macko = MackoMatrix::from_dense(&dense).expect("seed");
    let csr = CsrMatrix::from_dense(&dense).expect("seed");
    let q8 = Quantization {
        bits: QuantBits::Int8,
        scales: ScaleLayout::PerRow,
    };
    let q4 = Quantization {
        bits: QuantBits::Int4,
        scales: ScaleLayout::PerGroup(8),
    };
    let mq8 = QuantMackoMatrix::quantize(&macko, q8).expect("seed");
    let mq4 = QuantMackoMatrix::quantize(&macko, q4).expect("seed");
    let dq4 = QuantDenseMatrix::quantize(&dense, q4).expect("seed");
    let all: Vec<(&str, MatrixRef<'_>)> = vec![
        ("m", (&macko).into()),
        ("c", (&csr).into()),
        ("d", (&dense).into()),
        ("q8", (&mq8).into()),
        ("q4", (&mq4).into()),
        ("dq4", (&dq4).into()),
    ];
    let mut out: Vec<Vec<u8>> = all
        .iter()
        .map(|m| container::to_bytes(std::slice::from_ref(m)).expect("seed"))
        .collect();
    out.push(container::to_bytes(&all).expect("seed"));
    // A checkpoint as `convert` reads one: plain 2-D F32, BF16 and F16 weights, and a 1-D bias.
    out.push(checkpoint_seed());
    // A larger one, so that the allocation per input byte means something.
    let big = MackoMatrix::from_dense(&random_dense(256, 320, 0.5, 12)).expect("seed");
    out.push(container::to_bytes(&[("big", (&big).into())]).expect("seed"));
    // Each also without its checksum record, as another tool writes it: mutations of the
    // arrays then reach the format's rules instead of stopping at the checksum.
    let bare: Vec<Vec<u8>> = out.iter().map(|b| without_checksums(b)).collect();
    out.extend(bare);
    out
}

/// A small model checkpoint: what `macko convert` reads through `MatrixFile::dense_tensor`.
fn checkpoint_seed() -> Vec<u8> {
    let f32s: Vec<u8> = (0..6 * 10)
        .flat_map(|i| (i as f32 * 0.37 - 9.0).to_le_bytes())
        .collect();
    let bf16s: Vec<u8> = (0..4 * 8)
        .flat_map(|i| half::bf16::from_f32(i as f32 - 15.5).to_le_bytes())
        .collect();
    let f16s: Vec<u8> = (0..3 * 5)
        .flat_map(|i| h(i as f32 * 0.25).to_le_bytes())
        .collect();
    let bias: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    fn view(dtype: safetensors::Dtype, shape: Vec<usize>, data: &[u8]) -> TensorView<'_> {
        TensorView::new(dtype, shape, data).expect("seed")
    }
    let tensors = vec![
        (
            "a.weight",
            view(safetensors::Dtype::F32, vec![6, 10], &f32s),
        ),
        (
            "b.weight",
            view(safetensors::Dtype::BF16, vec![4, 8], &bf16s),
        ),
        ("c.weight", view(safetensors::Dtype::F16, vec![3, 5], &f16s)),
        ("a.bias", view(safetensors::Dtype::F32, vec![6], &bias)),
    ];
    safetensors::serialize(tensors, None).expect("seed")
}

/// The same file without the `macko-checksums` metadata entry.
fn without_checksums(bytes: &[u8]) -> Vec<u8> {
    let file = safetensors::SafeTensors::deserialize(bytes).expect("seed");
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).expect("seed");
    let mut metadata = meta.metadata().clone().unwrap_or_default();
    metadata.remove(container::CHECKSUMS_KEY);
    safetensors::serialize(file.tensors(), Some(metadata)).expect("seed")
}

/// The kept corpus: fixtures/fuzz/container/*.safetensors.
fn corpus() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fuzz/container");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// Numbers a header's digits are replaced by: the edges of u32, u64 and beyond.
const BOUNDARY_NUMBERS: [&str; 9] = [
    "0",
    "1",
    "7",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "99999999999999999999999",
    "-1",
];

/// The header's byte range (after the 8-byte length), clamped to the input.
fn header_range(bytes: &[u8]) -> std::ops::Range<usize> {
    let len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .unwrap_or(0);
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(8))
        .map_or(bytes.len(), |e| e.min(bytes.len()));
    8.min(end)..end
}

/// One seeded mutation of `input`.
fn mutate(rng: &mut StdRng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    if b.is_empty() {
        b.push(0);
    }
    match rng.random_range(0..8) {
        0 => {
            for _ in 0..rng.random_range(1..=8) {
                let i = rng.random_range(0..b.len());
                b[i] ^= 1 << rng.random_range(0..8);
            }
        }
        1 => {
            let i = rng.random_range(0..b.len());
            b[i] = [0x00, 0xff, 0x7f, 0x80, b'"', b'{', b'9'][rng.random_range(0..7)];
        }
        2 => b.truncate(rng.random_range(0..b.len())),
        3 => {
            let n = rng.random_range(1..64);
            b.extend((0..n).map(|_| rng.random::<u8>()));
        }
        4 => {
            // Splice: a chunk copied over another place.
            let len = rng.random_range(1..=b.len().min(32));
            let from = rng.random_range(0..=b.len() - len);
            let to = rng.random_range(0..=b.len() - len);
            let chunk = b[from..from + len].to_vec();
            b[to..to + len].copy_from_slice(&chunk);
        }
        5 if b.len() >= 8 => {
            let len: u64 = match rng.random_range(0..3) {
                0 => rng.random_range(0..b.len() as u64 * 2),
                1 => u64::MAX - rng.random_range(0..16),
                _ => 100_000_001,
            };
            b[..8].copy_from_slice(&len.to_le_bytes());
        }
        _ => {
            // A run of digits in the header replaced by a boundary number.
            let range = header_range(&b);
            let runs: Vec<(usize, usize)> = digit_runs(&b[range.clone()])
                .into_iter()
                .map(|(s, e)| (s + range.start, e + range.start))
                .collect();
            if let Some(&(s, e)) = runs.get(rng.random_range(0..runs.len().max(1))) {
                let number = BOUNDARY_NUMBERS[rng.random_range(0..BOUNDARY_NUMBERS.len())];
                b.splice(s..e, number.bytes());
                // Keep the length word true to the header, so the edit reaches the parser.
                let new_len = (range.end - 8 + number.len()).saturating_sub(e - s) as u64;
                b[..8].copy_from_slice(&new_len.to_le_bytes());
            }
        }
    }
    b
}

/// The byte ranges of the runs of ASCII digits in `b`.
fn digit_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((s, i));
        } else {
            i += 1;
        }
    }
    runs
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// A seeded x for a matrix of `cols` columns, finite or with NaN and ±∞.
fn vector(rng: &mut StdRng, cols: usize, finite: bool) -> Vec<f16> {
    (0..cols)
        .map(|_| match rng.random_range(0..if finite { 3 } else { 5 }) {
            0 => f16::ZERO,
            1 | 2 => h(rng.random_range(-2.0..2.0)),
            3 => f16::NAN,
            _ => f16::INFINITY,
        })
        .collect()
}

/// The properties of one loaded matrix: its product runs, and with a finite x it equals the
/// product of its dense decoding (to f64 rounding of the sums' order).
fn check_product(rng: &mut StdRng, m: &AnyMatrix) -> Result<(), String> {
    if m.cols() > MAX_PRODUCT_COLS || m.rows().saturating_mul(m.cols()) > 1 << 20 {
        return Ok(());
    }
    let x = vector(rng, m.cols(), false);
    reference::spmv(m.as_ref(), &x).map_err(|e| format!("product refused: {e}"))?;
    let finite = vector(rng, m.cols(), true);
    let got = reference::spmv(m.as_ref(), &finite).map_err(|e| e.to_string())?;
    let dense = match m {
        AnyMatrix::Macko(a) => a.to_dense().map_err(|e| e.to_string())?,
        AnyMatrix::Csr(a) => a.to_dense().map_err(|e| e.to_string())?,
        _ => return Ok(()),
    };
    let want = reference::spmv_dense(&dense, &finite).map_err(|e| e.to_string())?;
    for (r, (g, w)) in got.y.iter().zip(&want.y).enumerate() {
        let tol = 1e-12 * want.abs_sum[r].max(1.0);
        if (g - w).abs() > tol {
            return Err(format!("row {r}: {g} against its dense decoding's {w}"));
        }
    }
    Ok(())
}

/// What one container input did.
enum Outcome {
    Refused,
    Loaded,
}

fn run_container(rng: &mut StdRng, bytes: Vec<u8>) -> Result<(Outcome, usize), String> {
    let len = bytes.len();
    let (loaded, peak) = measured(|| {
        let file = MatrixFile::from_bytes("fuzz", bytes).ok()?;
        let matrices = file.matrices().ok()?;
        Some((file, matrices))
    });
    if peak > ALLOC_PER_INPUT_BYTE * len + ALLOC_SLACK {
        return Err(format!("loading {len} bytes allocated {peak} at its peak"));
    }
    let Some((file, matrices)) = loaded else {
        return Ok((Outcome::Refused, peak));
    };
    for (name, m) in &matrices {
        check_product(rng, m).map_err(|e| format!("matrix `{name}`: {e}"))?;
    }
    // What `convert` does with each tensor: read it as binary16 weights (2-D F32/BF16/F16
    // only; others are errors), encode it, and multiply it.
    for name in file.tensor_names() {
        let (dense, peak) = measured(|| file.dense_tensor(&name));
        if peak > ALLOC_PER_INPUT_BYTE * len + ALLOC_SLACK {
            return Err(format!(
                "tensor `{name}` of {len} bytes allocated {peak} as dense"
            ));
        }
        let Ok(dense) = dense else { continue };
        if dense.rows().saturating_mul(dense.cols()) <= 1 << 20 {
            let m = MackoMatrix::from_dense(&dense).map_err(|e| format!("`{name}`: {e}"))?;
            check_product(rng, &AnyMatrix::Macko(m)).map_err(|e| format!("`{name}`: {e}"))?;
        }
    }
    Ok((Outcome::Loaded, peak))
}

/// Random arrays for `from_parts`: a valid matrix's arrays, mutated.
fn run_parts(rng: &mut StdRng) -> Result<bool, String> {
    let (rows, cols) = (rng.random_range(0..12), rng.random_range(0..80));
    let base = MackoMatrix::from_dense(&random_dense(rows, cols, rng.random_range(0.0..1.0), 3))
        .map_err(|e| e.to_string())?;
    let mut row_ptr = base.row_ptr().to_vec();
    let mut values = base.values().to_vec();
    let mut codes = base.codes().to_vec();
    let (mut r, mut c) = (rows, cols);
    for _ in 0..rng.random_range(1..4) {
        match rng.random_range(0..7) {
            0 if !row_ptr.is_empty() => {
                let i = rng.random_range(0..row_ptr.len());
                row_ptr[i] =
                    [0, 1, 7, 8, u32::MAX, row_ptr[i].wrapping_add(1)][rng.random_range(0..6)];
            }
            1 if !codes.is_empty() => {
                let i = rng.random_range(0..codes.len());
                codes[i] = rng.random();
            }
            2 if !values.is_empty() => {
                let i = rng.random_range(0..values.len());
                values[i] = [f16::ZERO, f16::NEG_ZERO, f16::NAN, f16::INFINITY, h(1.0)]
                    [rng.random_range(0..5)];
            }
            3 => values.truncate(rng.random_range(0..=values.len())),
            4 => codes.push(rng.random()),
            5 => r = [0, 1, rows + 1, usize::MAX, 1 << 40][rng.random_range(0..5)],
            _ => c = [0, 1, cols + 1, u32::MAX as usize, usize::MAX][rng.random_range(0..5)],
        }
    }
    let Ok(m) = MackoMatrix::from_parts(r, c, row_ptr, values, codes) else {
        return Ok(false);
    };
    let _ = m.is_canonical();
    check_product(rng, &AnyMatrix::Macko(m))?;
    Ok(true)
}

/// Writes a panicking input where it can be found and added to the corpus.
fn save_crash(bytes: &[u8], index: usize) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-crashes");
    let path = dir.join(format!("crash-{index}.safetensors"));
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("(not saved: {e})"),
    }
}

#[test]
fn untrusted_bytes_never_panic_overallocate_or_disagree() {
    let mut rng = StdRng::seed_from_u64(27);
    let mut pool = seeds();
    pool.extend(corpus());
    let (mut loaded, mut crashes, mut worst, mut largest) = (0usize, Vec::new(), 0f64, 0usize);
    let mut inputs: Vec<Vec<u8>> = pool.clone();
    while inputs.len() < CONTAINER_INPUTS {
        let parent = &pool[rng.random_range(0..pool.len())];
        let child = mutate(&mut rng, parent);
        // Mutations of mutations reach deeper; keep a bounded few as parents.
        if pool.len() < 256 && rng.random_bool(0.05) {
            pool.push(child.clone());
        }
        inputs.push(child);
    }
    for (i, bytes) in inputs.into_iter().enumerate() {
        let len = bytes.len().max(1);
        let copy = bytes.clone();
        match catch_unwind(AssertUnwindSafe(|| run_container(&mut rng, bytes))) {
            Ok(Ok((outcome, peak))) => {
                loaded += matches!(outcome, Outcome::Loaded) as usize;
                if len >= 64 << 10 {
                    worst = worst.max(peak as f64 / len as f64);
                }
                largest = largest.max(peak);
            }
            Ok(Err(e)) => crashes.push(format!("input {i} ({}): {e}", save_crash(&copy, i))),
            Err(_) => crashes.push(format!("input {i} panicked: {}", save_crash(&copy, i))),
        }
    }
    let mut valid = 0usize;
    for i in 0..PARTS_INPUTS {
        match catch_unwind(AssertUnwindSafe(|| run_parts(&mut rng))) {
            Ok(Ok(ok)) => valid += ok as usize,
            Ok(Err(e)) => crashes.push(format!("from_parts call {i}: {e}")),
            Err(_) => crashes.push(format!("from_parts call {i} panicked")),
        }
    }
    println!(
        "container: {CONTAINER_INPUTS} inputs, {loaded} loaded, largest peak allocation \
         {largest} bytes, at most {worst:.2} bytes per input byte for inputs of 64 KiB or more; \
         from_parts: {PARTS_INPUTS} calls, {valid} valid; {} failures",
        crashes.len()
    );
    assert!(crashes.is_empty(), "{}", crashes.join("\n"));
}
