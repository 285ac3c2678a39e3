//! Fuzzing that stays, end to end (issue 27): `macko::checkpoint::convert` over seeded crafted
//! checkpoints (`common/checkpoint_fuzz.rs`: random 2-D F32/BF16/F16 weights with NaN, ±∞,
//! −0.0, subnormals and out-of-range values, 1-D, 3-D and I64 tensors, clashing names, stale
//! metadata) and byte mutations of them, under every option combination the command offers
//! (no pruning, `prune_to` 0.5 and 0.1, int8 and int4 quantization, a minimum size). Each input
//! is converted into a fresh directory and must keep these properties:
//!
//! - nothing panics (each call runs under `catch_unwind`; a failing input is written to
//!   `target/fuzz-crashes/convert-<index>.safetensors` and named with its index and options);
//! - on `Err`, the directory holds the input alone: no output, no temporary file;
//! - on `Ok`, the output loads as `macko verify` loads it (`MatrixFile::open`, checksums
//!   checked) and passes `verify` against its input; every matrix's f64 product equals that of
//!   its dense decoding (quantized values decoded exactly), and without pruning or quantization
//!   the decoding is the input's weights as `convert` reads them (−0.0 read back as +0.0);
//! - `convert` allocates at most [`ALLOC_PER_INPUT_BYTE`] bytes per input byte plus
//!   [`ALLOC_SLACK`] at its peak (a counting allocator).
//!
//! The kept corpus, `fixtures/fuzz/convert/`, runs first under every option set. One test,
//! sequential (the allocator's peak is process-wide), bounded by a count of inputs (fewer in
//! debug builds), printing its figures.

#[path = "common/checkpoint_fuzz.rs"]
mod checkpoint_fuzz;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use macko::checkpoint::{self, ConvertOptions};
use macko::format::container::MatrixFile;
use macko::half::f16;
use macko::{reference, AnyMatrix, QuantBits, Quantization, ScaleLayout};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Inputs per run (each converted once, under one option combination).
const INPUTS: usize = if cfg!(debug_assertions) { 400 } else { 3000 };
/// `convert` may allocate this many bytes per input byte at its peak... Measured beyond the
/// writer's buffer: at most 2.11 bytes per input byte over 30 inputs of 50 to 100 KiB (debug,
/// 400 inputs) and 221 (release, 3000), 2.15 in an earlier release run: the f16 copy of the
/// largest weight, its pruned copy, MACKO encoding and quantized one, and the serialised
/// container image are live together. 4 leaves nearly twice that.
const ALLOC_PER_INPUT_BYTE: usize = 4;
/// ...plus this much: the writer's buffer, and 64 KiB (measured: at most 35 KiB beyond the
/// buffer for inputs under 4 KiB — the thread pool's first use, the output's header).
const ALLOC_SLACK: usize = WRITE_BUFFER + (64 << 10);
/// The output writer's buffer (`src/checkpoint/output.rs`), live while any output is written.
const WRITE_BUFFER: usize = 1 << 20;
/// The seed of the run: a failure is reproduced by running the test again.
const SEED: u64 = 0x27c0;

#[path = "../format/tests/counting_alloc/mod.rs"]
mod counting_alloc;
use counting_alloc::measured;

// ---------------------------------------------------------------------------------------------
// Options and scratch directories.

/// The option combinations inputs cycle through: what `macko convert` can be asked.
fn option_sets() -> Vec<ConvertOptions> {
    let quant = |bits, scales| Some(Quantization { bits, scales });
    let base = ConvertOptions::default();
    vec![
        base.clone(),
        ConvertOptions {
            prune_to: Some(0.5),
            ..base.clone()
        },
        ConvertOptions {
            prune_to: Some(0.1),
            ..base.clone()
        },
        ConvertOptions {
            quantize: quant(QuantBits::Int8, ScaleLayout::PerRow),
            ..base.clone()
        },
        ConvertOptions {
            quantize: quant(QuantBits::Int4, ScaleLayout::PerGroup(8)),
            ..base.clone()
        },
        ConvertOptions {
            prune_to: Some(0.5),
            quantize: quant(QuantBits::Int4, ScaleLayout::PerGroup(64)),
            ..base.clone()
        },
        ConvertOptions {
            min_size: 20,
            ..base
        },
    ]
}

/// A fresh directory for one input, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(index: usize) -> std::io::Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("macko-fuzz-convert-{}-{index}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
    /// The names in the directory, hidden temporaries too, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a failing input where it can be found, and says where.
fn save_failure(bytes: &[u8], index: usize) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-crashes");
    let path = dir.join(format!("convert-{index}.safetensors"));
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("(not saved: {e})"),
    }
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// What one input did.
enum Outcome {
    Refused,
    Converted { matrices: usize },
}

/// Whether two f64 products of the same row agree: equal within `tol`, or both the same
/// non-finite value (NaN and ±∞ weights are stored as they are).
fn same(got: f64, want: f64, tol: f64) -> bool {
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    got == want || (got - want).abs() <= tol
}

/// A seeded finite x of `cols` elements in [−2, 2].
fn finite_x(rng: &mut StdRng, cols: usize) -> Vec<f16> {
    (0..cols)
        .map(|_| f16::from_f32(rng.random_range(-2.0..2.0)))
        .collect()
}

/// The f64 product of `m`'s dense decoding with `x`, and the sums of the terms' magnitudes:
/// MACKO decoded to binary16 (exact), quantized MACKO to the exact f64 values `scale · q`,
/// since its binary16 dequantization may overflow (int4 of a group holding 65 504 stores
/// 7 · 9 360 = 65 520, which `dequantize` rounds to ∞).
fn dense_product(m: &AnyMatrix, x: &[f16]) -> Result<(Vec<f64>, Vec<f64>), String> {
    match m {
        AnyMatrix::Macko(a) => {
            let dense = a.to_dense().map_err(|e| e.to_string())?;
            let r = reference::spmv_dense(&dense, x).map_err(|e| e.to_string())?;
            Ok((r.y, r.abs_sum))
        }
        AnyMatrix::MackoQuant(a) => {
            let (mut y, mut abs) = (Vec::new(), Vec::new());
            let mut row = vec![0.0f64; a.cols()];
            for r in 0..a.rows() {
                row.fill(0.0);
                for (c, v) in a.row_entries(r) {
                    row[c] += v;
                }
                let terms = row.iter().zip(x).map(|(v, x)| v * x.to_f64());
                y.push(terms.clone().sum());
                abs.push(terms.map(f64::abs).sum());
            }
            Ok((y, abs))
        }
        other => Err(format!("convert wrote a {:?} matrix", other.kind())),
    }
}

/// `m`'s f64 product equals its dense decoding's on a seeded finite x, row by row.
fn check_product(rng: &mut StdRng, name: &str, m: &AnyMatrix) -> Result<(), String> {
    let x = finite_x(rng, m.cols());
    let got = reference::spmv(m.as_ref(), &x).map_err(|e| format!("`{name}`: {e}"))?;
    let (want, abs_sum) = dense_product(m, &x).map_err(|e| format!("`{name}`: {e}"))?;
    for (r, (g, w)) in got.y.iter().zip(&want).enumerate() {
        if !same(*g, *w, 1e-12 * abs_sum[r].max(1.0)) {
            return Err(format!("`{name}` row {r}: {g}, its dense decoding's {w}"));
        }
    }
    Ok(())
}

/// Without pruning or quantization the stored matrix is the input's weights, bit for bit but
/// for the sign of zero.
fn check_exact(name: &str, m: &AnyMatrix, source: &MatrixFile) -> Result<(), String> {
    let AnyMatrix::Macko(m) = m else {
        return Err(format!("`{name}` is stored as {:?}", m.kind()));
    };
    let dense = m.to_dense().map_err(|e| format!("`{name}`: {e}"))?;
    let want = source
        .dense_tensor(name)
        .map_err(|e| format!("`{name}` converted, but the source reads as {e}"))?;
    let bits = |v: &f16| {
        if v.to_bits() == 0x8000 {
            0
        } else {
            v.to_bits()
        }
    };
    let differs = dense
        .values()
        .iter()
        .zip(want.values())
        .position(|(a, b)| bits(a) != bits(b));
    match differs {
        _ if (dense.rows(), dense.cols()) != (want.rows(), want.cols()) => {
            Err(format!("`{name}`: shape changed"))
        }
        Some(i) => Err(format!("`{name}` element {i} changed")),
        None => Ok(()),
    }
}

/// Every property of a successful conversion's output.
fn check_output(
    rng: &mut StdRng,
    input: &Path,
    output: &Path,
    opts: &ConvertOptions,
) -> Result<usize, String> {
    let file = MatrixFile::open(output).map_err(|e| format!("output does not load: {e}"))?;
    let matrices = file.matrices().map_err(|e| format!("matrices: {e}"))?;
    let source = MatrixFile::open(input).map_err(|e| format!("input reloads as {e}"))?;
    let exact = opts.prune_to.is_none() && opts.quantize.is_none();
    for (name, m) in &matrices {
        check_product(rng, name, m)?;
        if exact {
            check_exact(name, m, &source)?;
        }
    }
    let report = checkpoint::verify(output, Some(input)).map_err(|e| format!("verify: {e}"))?;
    if !report.passed() {
        return Err(format!("verify against the input fails: {report:?}"));
    }
    Ok(matrices.len())
}

/// Converts one input in a fresh directory and checks every property; `Ok` with the outcome
/// and the peak allocation of `convert`.
fn run_one(
    rng: &mut StdRng,
    index: usize,
    bytes: &[u8],
    opts: &ConvertOptions,
) -> Result<(Outcome, usize), String> {
    let dir = Scratch::new(index).map_err(|e| format!("scratch directory: {e}"))?;
    let (input, output) = (dir.0.join("in.safetensors"), dir.0.join("out.safetensors"));
    std::fs::write(&input, bytes).map_err(|e| format!("writing the input: {e}"))?;
    let (result, peak) = measured(|| checkpoint::convert(&input, &output, opts, &mut |_| {}));
    let bound = ALLOC_PER_INPUT_BYTE * bytes.len() + ALLOC_SLACK;
    if peak > bound {
        return Err(format!(
            "{} bytes allocated {peak} at the peak (bound {bound})",
            bytes.len()
        ));
    }
    let names = dir.names();
    match result {
        Err(_) if names != ["in.safetensors"] => Err(format!("refused, but left {names:?}")),
        Err(_) => Ok((Outcome::Refused, peak)),
        Ok(_) => {
            let matrices = check_output(rng, &input, &output, opts)?;
            Ok((Outcome::Converted { matrices }, peak))
        }
    }
}

/// The kept corpus, `fixtures/fuzz/convert/*.safetensors` (inputs that once failed), by name.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fuzz/convert");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "safetensors"));
    files.sort();
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    files
        .iter()
        .filter_map(|p| Some((name(p)?, std::fs::read(p).ok()?)))
        .collect()
}

/// The run's figures.
#[derive(Default)]
struct Tally {
    inputs: usize,
    converted: usize,
    matrices: usize,
    /// The largest peak allocation beyond the writer's buffer per input byte, over inputs of
    /// 32 KiB or more, and how many such inputs there were.
    worst: f64,
    big: usize,
    /// The largest peak allocation of an input under 4 KiB.
    small: usize,
    failures: Vec<String>,
}

impl Tally {
    /// Runs one input under `catch_unwind` and records what it did.
    fn run(&mut self, rng: &mut StdRng, label: &str, bytes: &[u8], opts: &ConvertOptions) {
        self.inputs += 1;
        let index = self.inputs;
        match catch_unwind(AssertUnwindSafe(|| run_one(rng, index, bytes, opts))) {
            Ok(Ok((outcome, peak))) => {
                if let Outcome::Converted { matrices } = outcome {
                    self.converted += 1;
                    self.matrices += matrices;
                }
                if bytes.len() >= 32 << 10 {
                    self.big += 1;
                    let beyond = peak.saturating_sub(WRITE_BUFFER);
                    self.worst = self.worst.max(beyond as f64 / bytes.len() as f64);
                } else if bytes.len() < 4 << 10 {
                    self.small = self.small.max(peak);
                }
            }
            Ok(Err(e)) => self.fail(label, bytes, opts, &e),
            Err(_) => self.fail(label, bytes, opts, "panicked"),
        }
    }

    fn fail(&mut self, label: &str, bytes: &[u8], opts: &ConvertOptions, what: &str) {
        let saved = save_failure(bytes, self.inputs);
        self.failures
            .push(format!("{label} ({saved}), {opts:?}: {what}"));
    }
}

#[test]
fn convert_never_panics_leaves_nothing_on_error_and_writes_what_verifies() {
    let mut rng = StdRng::seed_from_u64(SEED);
    let options = option_sets();
    let mut t = Tally::default();
    let corpus = corpus();
    for (name, bytes) in &corpus {
        for opts in &options {
            t.run(&mut rng, &format!("corpus file {name}"), bytes, opts);
        }
    }
    for index in 0..INPUTS {
        let bytes = checkpoint_fuzz::input(&mut rng, index);
        let opts = &options[index % options.len()];
        t.run(
            &mut rng,
            &format!("input {index} (seed {SEED:#x})"),
            &bytes,
            opts,
        );
    }
    println!(
        "convert: {} corpus files under {} option sets, then {INPUTS} inputs (seed {SEED:#x}): \
         {} converted ({} matrices), {} refused; beyond the writer's 1 MiB buffer at most \
         {:.2} bytes allocated per input byte over {} inputs of 32 KiB or more, at most {} \
         bytes for inputs under 4 KiB; {} failures",
        corpus.len(),
        options.len(),
        t.converted,
        t.matrices,
        t.inputs - t.converted - t.failures.len(),
        t.worst,
        t.big,
        t.small,
        t.failures.len()
    );
    assert!(t.failures.is_empty(), "{}", t.failures.join("\n"));
}
