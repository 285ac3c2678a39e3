//! Crafted checkpoints for fuzzing `convert` (issue 27), shared by `tests/fuzz_convert.rs` and
//! the command-line test (`cli/tests/hardening.rs` includes this file by path): seeded random
//! safetensors files written by hand — so that dtypes, shapes, names and metadata no writer
//! would produce can be tried — and seeded byte mutations of them.
//!
//! Independent of `format/tests/fuzz_smoke.rs` (another crate's test), with the same ideas:
//! bit flips, interesting bytes, truncations, extensions, splices, the header's length word and
//! its numbers set to boundary values.
#![allow(dead_code)] // each including test uses its own part

use rand::rngs::StdRng;
use rand::Rng;

/// One tensor as it is written: dtype name, shape and raw little-endian bytes.
pub struct RawTensor {
    pub name: String,
    pub dtype: &'static str,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// A safetensors image of `tensors` and `metadata` (a JSON object of strings, or none).
pub fn checkpoint_bytes(tensors: &[RawTensor], metadata: Option<serde_json::Value>) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    if let Some(m) = metadata {
        header.insert("__metadata__".into(), m);
    }
    let mut data = Vec::new();
    for t in tensors {
        let start = data.len();
        data.extend_from_slice(&t.data);
        header.insert(
            t.name.clone(),
            serde_json::json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [start, data.len()]}),
        );
    }
    let header = serde_json::Value::Object(header).to_string();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    bytes
}

/// One weight as f32, drawn to reach every rule of `convert`: mostly ordinary values and
/// zeros, sometimes −0.0, NaN, ±∞, binary16's largest finite value, values that round to
/// binary16 subnormals or to zero, and (rarely) finite values beyond binary16's range, which
/// `convert` must refuse. `tame` leaves the last out, so that a large weight converts.
fn weight(rng: &mut StdRng, density: f64, tame: bool) -> f32 {
    if !rng.random_bool(density) {
        return if rng.random_bool(0.1) { -0.0 } else { 0.0 };
    }
    match rng.random_range(0..200) {
        7 if tame => 1.0,
        0 => f32::NAN,
        1 => f32::INFINITY,
        2 => f32::NEG_INFINITY,
        3 => 65504.0,
        4 => -65504.0,
        5 => 3.0e-6,  // a binary16 subnormal
        6 => -1.0e-9, // rounds to −0 in binary16
        7 => 1.0e6,   // beyond binary16: an error
        _ => rng.random_range(-4.0..4.0),
    }
}

/// `n` weights in `dtype` (F32, BF16 or F16), little-endian; `tame` as for [`weight`].
fn weights(rng: &mut StdRng, dtype: &str, n: usize, density: f64, tame: bool) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            let w = weight(rng, density, tame);
            match dtype {
                "F32" => w.to_le_bytes().to_vec(),
                "BF16" => half::bf16::from_f32(w).to_le_bytes().to_vec(),
                _ => half::f16::from_f32(w).to_le_bytes().to_vec(),
            }
        })
        .collect()
}

/// A random small checkpoint: one to four 2-D F32/BF16/F16 weights (empty shapes and single
/// rows or columns among them), sometimes a 1-D bias, a 3-D tensor, an I64 tensor, a name that
/// clashes with a converted matrix's arrays, and metadata (including stale conversion records).
/// `big` adds one 128×200 weight (50 to 100 KiB), so that allocation per input byte means
/// something.
pub fn random_checkpoint(rng: &mut StdRng, big: bool) -> Vec<u8> {
    let mut tensors = Vec::new();
    for i in 0..rng.random_range(1..=4) {
        let dtype = ["F32", "BF16", "F16"][rng.random_range(0..3)];
        let rows = [0, 1, 2, 3, 7, 16][rng.random_range(0..6)];
        let cols = [0, 1, 5, 16, 17, 40, 130][rng.random_range(0..7)];
        let density = [0.0, 0.05, 0.5, 1.0][rng.random_range(0..4)];
        tensors.push(RawTensor {
            name: format!("l{i}.weight"),
            dtype,
            shape: vec![rows, cols],
            data: weights(rng, dtype, rows * cols, density, false),
        });
    }
    if big {
        let dtype = ["F32", "BF16", "F16"][rng.random_range(0..3)];
        tensors.push(RawTensor {
            name: "big.weight".into(),
            dtype,
            shape: vec![128, 200],
            data: weights(rng, dtype, 128 * 200, 0.6, true),
        });
    }
    let extras: [(&str, &'static str, Vec<usize>); 4] = [
        ("l0.bias", "F32", vec![5]),
        ("conv.weight", "F16", vec![2, 3, 4]),
        ("steps", "I64", vec![1]),
        ("l0.weight.values", "F16", vec![3]), // clashes with l0.weight's MACKO arrays
    ];
    for (name, dtype, shape) in extras {
        if rng.random_bool(0.3) {
            let n: usize = shape.iter().product();
            let data = match dtype {
                "I64" => (0..n).flat_map(|i| (i as i64).to_le_bytes()).collect(),
                _ => weights(rng, dtype, n, 0.8, false),
            };
            tensors.push(RawTensor {
                name: name.into(),
                dtype,
                shape,
                data,
            });
        }
    }
    let metadata = match rng.random_range(0..4) {
        0 => None,
        1 => Some(serde_json::json!({"format": "pt"})),
        2 => Some(serde_json::json!({"macko-convert": "stale", "macko.l0.weight": "{\"kind\":1}"})),
        _ => Some(serde_json::json!({"macko-convert.l1.weight": "{}", "note": "x"})),
    };
    checkpoint_bytes(&tensors, metadata)
}

/// Numbers a header's digit runs are replaced by: the edges of u32, u64 and beyond.
const BOUNDARY_NUMBERS: [&str; 8] = [
    "0",
    "1",
    "65537",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "99999999999999999999999",
    "-1",
];

/// One seeded mutation of `input` (never empty on return).
pub fn mutate(rng: &mut StdRng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    if b.is_empty() {
        b.push(b'{');
    }
    let n = b.len();
    match rng.random_range(0..7) {
        0 => {
            for _ in 0..rng.random_range(1..=4) {
                let i = rng.random_range(0..n);
                b[i] ^= 1 << rng.random_range(0..8);
            }
        }
        1 => {
            let i = rng.random_range(0..n);
            b[i] = [0x00, 0xff, 0x7f, 0x80, b'"', b'}', b'9', b'-'][rng.random_range(0..8)];
        }
        2 => b.truncate(rng.random_range(1..=n)),
        3 => b.extend((0..rng.random_range(1..32)).map(|_| rng.random::<u8>())),
        4 => {
            let len = rng.random_range(1..=n.min(16));
            let from = rng.random_range(0..=n - len);
            let to = rng.random_range(0..=n - len);
            b.copy_within(from..from + len, to);
        }
        5 if n >= 8 => {
            let len = [0, 1, n as u64, u64::MAX, 100_000_001][rng.random_range(0..5)];
            b[..8].copy_from_slice(&len.to_le_bytes());
        }
        _ => replace_header_number(rng, &mut b),
    }
    b
}

/// Replaces one run of digits in the header by a boundary number, keeping the length word true
/// to the header so that the edit reaches the JSON and the rules rather than the framing.
fn replace_header_number(rng: &mut StdRng, b: &mut Vec<u8>) {
    let Some(word) = b.get(..8).and_then(|w| <[u8; 8]>::try_from(w).ok()) else {
        return;
    };
    let header_len = usize::try_from(u64::from_le_bytes(word)).unwrap_or(usize::MAX);
    let end = header_len.saturating_add(8).min(b.len());
    let runs = digit_runs(&b[8..end]);
    if runs.is_empty() {
        return;
    }
    let (s, e) = runs[rng.random_range(0..runs.len())];
    let number = BOUNDARY_NUMBERS[rng.random_range(0..BOUNDARY_NUMBERS.len())];
    b.splice(8 + s..8 + e, number.bytes());
    let new_len = (end - 8 + number.len() - (e - s)) as u64;
    b[..8].copy_from_slice(&new_len.to_le_bytes());
}

/// The byte ranges of the runs of ASCII digits in `b`.
fn digit_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, c) in b.iter().enumerate() {
        match (c.is_ascii_digit(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, b.len()));
    }
    runs
}

/// The `index`-th input of a run seeded by `rng`: even indices a fresh random checkpoint, odd
/// ones one to three mutations of one; two in 25 (one of each) hold the big weight.
pub fn input(rng: &mut StdRng, index: usize) -> Vec<u8> {
    let base = random_checkpoint(rng, index % 25 < 2);
    if index % 2 == 0 {
        return base;
    }
    let mut b = base;
    for _ in 0..rng.random_range(1..=3) {
        b = mutate(rng, &b);
    }
    b
}
