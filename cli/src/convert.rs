//! `macko convert`: a checkpoint's weight matrices encoded as MACKO-16-4 (optionally pruned
//! first, optionally with int8/int4 values) or pruned to 2:4 and stored as such, every other
//! tensor copied, written atomically, with
//! a progress bar and a report table of what each tensor costs as dense f16, CSR and MACKO (and,
//! quantized, what quantization changed in its products).

use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::error::CliError;
use crate::text::printable;
use macko::checkpoint::{
    self, describe_quantization, human_bytes, CheckpointError, ConvertOptions, ConvertReport,
    Pattern, Progress, ERROR_VECTORS,
};
use macko::{QuantBits, Quantization, ScaleLayout};

/// Arguments of `macko convert` (the help text is the fields' documentation).
#[derive(Args)]
pub struct ConvertArgs {
    /// The checkpoint to read (.safetensors; F32, BF16 or F16 weights).
    input: PathBuf,
    /// The file to write (.safetensors): written to a temporary file beside it, then renamed.
    output: PathBuf,
    /// Convert only tensors matching this pattern (`*` any characters, `?` one); repeatable.
    /// Default: every 2-D F16/BF16/F32 tensor. A name without wildcards must exist and be 2-D.
    #[arg(long, value_name = "PAT")]
    include: Vec<String>,
    /// Leave tensors matching this pattern unconverted (copied unchanged); repeatable.
    #[arg(long, value_name = "PAT")]
    exclude: Vec<String>,
    /// Prune each output row to this density first (keep the ⌊d·cols⌋ largest |w| of every
    /// row), for checkpoints that are not pruned yet. In (0, 1], and keeping at least one weight
    /// of each row of the narrowest converted matrix (⌊d·cols⌋ ≥ 1). `2:4` instead keeps the
    /// two largest |w| of every group of four columns and stores 2:4 matrices (f16 values,
    /// 0.5625 of dense f16), the pattern of sparse tensor cores.
    #[arg(
        long,
        value_name = "DENSITY|2:4",
        allow_negative_numbers = true,
        value_parser = parse_prune
    )]
    prune_to: Option<PruneTo>,
    /// Leave matrices with fewer elements than this unconverted (names given literally to
    /// --include are converted whatever their size).
    #[arg(long, value_name = "N", default_value_t = 0)]
    min_size: u64,
    /// Store int8 or int4 values (symmetric round-to-nearest, absmax f16 scales) instead of f16,
    /// after pruning and encoding; the report and the file record each tensor's relative error
    /// of W·x against the (pruned) f16 weights, which `verify --against` checks.
    #[arg(long, value_name = "int8|int4", value_parser = parse_bits)]
    quantize: Option<QuantBits>,
    /// With --quantize: one scale per G consecutive stored values (G a multiple of 8, from 8 to
    /// 2^24) instead of one per row. Smaller groups follow the weights more closely and cost 2
    /// bytes per group.
    #[arg(long, value_name = "G")]
    group: Option<u32>,
}

/// What `--prune-to` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PruneTo {
    /// Every row to this density (MACKO output).
    Density(f64),
    /// 2:4 structured sparsity (2:4 output).
    TwoOfFour,
}

/// `--prune-to`'s value: `2:4`, or a number (its range is checked with the other options, so
/// that the message names the rule).
fn parse_prune(s: &str) -> Result<PruneTo, String> {
    if s == "2:4" {
        return Ok(PruneTo::TwoOfFour);
    }
    s.parse::<f64>()
        .map(PruneTo::Density)
        .map_err(|_| format!("`{s}` is neither a density (a number in (0, 1]) nor 2:4"))
}

/// `--quantize`'s value: a width the format stores, named as files name it.
fn parse_bits(s: &str) -> Result<QuantBits, String> {
    QuantBits::parse(s).ok_or_else(|| {
        format!("`{s}` is not a quantized width; expected int8 or int4 (f16 is the default)")
    })
}

/// The quantization `--quantize` and `--group` ask for, checked before any file is touched: a
/// group without a width means nothing, and a group size must satisfy the format's rule.
fn quantization(args: &ConvertArgs) -> Result<Option<Quantization>, CliError> {
    if let (Some(PruneTo::TwoOfFour), Some(bits)) = (args.prune_to, args.quantize) {
        return Err(CliError::Usage(format!(
            "--prune-to 2:4 cannot be combined with --quantize {}: 2:4 matrices store f16 values",
            bits.as_str()
        )));
    }
    match (args.quantize, args.group) {
        (None, None) => Ok(None),
        (None, Some(g)) => Err(CliError::Usage(format!(
            "--group {g} needs --quantize int8|int4: a scale group only applies to quantized \
             values"
        ))),
        (Some(bits), group) => {
            let scales = group.map_or(ScaleLayout::PerRow, ScaleLayout::PerGroup);
            scales.check().map_err(|e| {
                CliError::Usage(format!("--group {}: {e}", group.unwrap_or_default()))
            })?;
            Ok(Some(Quantization { bits, scales }))
        }
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn print_report(report: &ConvertReport) {
    let name_width = report
        .converted
        .iter()
        .map(|t| printable(&t.name).chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    // The error column only exists with quantization, so that a plain conversion prints what
    // it always printed.
    let quantized = report.quantize.is_some();
    let error_column = |e: Option<f64>| match (quantized, e) {
        (false, _) => String::new(),
        (true, Some(e)) => format!(" {e:>9.3e}"),
        (true, None) => format!(" {:>9}", ""),
    };
    println!(
        "{:<name_width$} {:>11} {:>5} {:>8} {:>11} {:>11} {:>11} {:>9}{}",
        "tensor",
        "shape",
        "src",
        "density",
        "dense f16",
        "CSR",
        if report.prune_24 { "2:4" } else { "MACKO" },
        "eff.dens",
        if quantized {
            format!(" {:>9}", "rel.err")
        } else {
            String::new()
        }
    );
    for t in &report.converted {
        println!(
            "{:<name_width$} {:>11} {:>5} {:>8.4} {:>11} {:>11} {:>11} {:>9.4}{}",
            printable(&t.name),
            format!("{}×{}", t.rows, t.cols),
            t.source_dtype,
            t.density(),
            human_bytes(t.dense_f16_bytes),
            human_bytes(t.csr_bytes),
            human_bytes(t.macko_bytes),
            t.effective_density(),
            error_column(t.rel_error)
        );
    }
    let density = if report.elements() == 0 {
        0.0
    } else {
        report.nonzeros() as f64 / report.elements() as f64
    };
    let effective = if report.dense_f16_bytes() == 0 {
        0.0
    } else {
        report.macko_bytes() as f64 / report.dense_f16_bytes() as f64
    };
    println!(
        "{:<name_width$} {:>11} {:>5} {:>8.4} {:>11} {:>11} {:>11} {:>9.4}",
        format!("total ({} tensors)", report.converted.len()),
        "",
        "",
        density,
        human_bytes(report.dense_f16_bytes()),
        human_bytes(report.csr_bytes()),
        human_bytes(report.macko_bytes()),
        effective
    );
    let copied: u64 = report.copied.iter().map(|c| c.bytes).sum();
    println!(
        "\ncopied unchanged: {} tensors, {}",
        report.copied.len(),
        human_bytes(copied)
    );
    match (report.prune_to, report.prune_24) {
        (_, true) => println!(
            "pruned: every group of four columns of every converted tensor to 2:4 (the two \
             largest |w| kept), stored as 2:4"
        ),
        (Some(d), false) => {
            println!("pruned: every row of every converted tensor to density {d}")
        }
        (None, false) => println!("pruned: no (weights kept as they are)"),
    }
    if let Some(q) = report.quantize {
        let worst = report
            .converted
            .iter()
            .filter_map(|t| t.rel_error.map(|e| (e, t.name.as_str())))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        println!(
            "quantized: {} (rel.err: ‖W_q·x − W·x‖ / ‖W·x‖ against the {}f16 weights, {} seeded \
             activation vectors{})",
            describe_quantization(q),
            if report.prune_to.is_some() {
                "pruned "
            } else {
                ""
            },
            ERROR_VECTORS,
            worst.map_or(String::new(), |(e, name)| format!(
                "; largest {e:.3e}, {}",
                printable(name)
            ))
        );
    }
    println!(
        "file: {} → {}",
        human_bytes(report.input_bytes),
        human_bytes(report.output_bytes)
    );
}

/// Runs `macko convert`: converts, then prints the report table.
pub fn run(args: &ConvertArgs) -> Result<(), CliError> {
    let density = match args.prune_to {
        Some(PruneTo::Density(d)) => Some(d),
        _ => None,
    };
    let opts = ConvertOptions {
        include: args.include.iter().map(Pattern::new).collect(),
        exclude: args.exclude.iter().map(Pattern::new).collect(),
        prune_to: density,
        min_size: args.min_size,
        quantize: quantization(args)?,
        prune_24: args.prune_to == Some(PruneTo::TwoOfFour),
    };
    if let Some(d) = density {
        macko::prune::check_density(d).map_err(|e| CliError::Usage(format!("--prune-to: {e}")))?;
    }
    let bar = ProgressBar::new(0);
    bar.set_style(bar_style());
    let result = checkpoint::convert(&args.input, &args.output, &opts, &mut |p| match p {
        Progress::Planned { tensors } => bar.set_length(tensors as u64),
        Progress::Converting { index, name } => {
            bar.set_position(index as u64);
            bar.set_message(printable(name).into_owned());
        }
        Progress::Writing => {
            bar.set_position(bar.length().unwrap_or(0));
            bar.set_message(format!(
                "writing {}",
                printable(&args.output.display().to_string())
            ));
        }
    });
    bar.finish_and_clear();
    let report = result.map_err(cli_error)?;
    print_report(&report);
    println!("wrote {}", printable(&args.output.display().to_string()));
    Ok(())
}

/// Checkpoint errors as the command's own: usage for a bad selection, the rest as they are.
pub fn cli_error(e: CheckpointError) -> CliError {
    match e {
        CheckpointError::Format(e) => CliError::Format(e),
        CheckpointError::Device(e) => CliError::Macko(e),
        CheckpointError::Write { path, message } => CliError::Write { path, message },
        other => CliError::Usage(other.to_string()),
    }
}
