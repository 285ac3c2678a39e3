//! `macko verify`: every matrix of a file checked against the rules of docs/FORMAT.md, and with
//! `--against` compared bit for bit with the (pruned) f16 source, or for quantized values held
//! to the relative error `convert` recorded. Prints one line per matrix; exits non-zero naming
//! every matrix and rule that failed.

use std::path::PathBuf;

use clap::Args;

use crate::convert::cli_error;
use crate::error::CliError;
use crate::text::printable;
use macko::checkpoint::{self, describe_quantization};

/// Arguments of `macko verify` (the help text is the fields' documentation).
#[derive(Args)]
pub struct VerifyArgs {
    /// The file to check (.safetensors written by `macko convert` or the container).
    file: PathBuf,
    /// The checkpoint it was converted from: each decoded matrix must equal the source tensor
    /// of the same name, rounded to f16 and, where the file records a pruning (a density or
    /// 2:4), pruned the same way. A quantized matrix must be quantized as recorded, and the
    /// relative error of its W·x against that source, recomputed on the same seeded vectors,
    /// must not exceed the recorded one.
    #[arg(long, value_name = "IN.safetensors")]
    against: Option<PathBuf>,
}

/// Runs `macko verify`: one line per matrix, problems on stderr, an error if any failed.
pub fn run(args: &VerifyArgs) -> Result<(), CliError> {
    let report = checkpoint::verify(&args.file, args.against.as_deref()).map_err(cli_error)?;
    for m in &report.matrices {
        let status = if m.problems.is_empty() { "ok" } else { "FAIL" };
        let mut notes = Vec::new();
        if let Some(n) = m.entries {
            notes.push(format!("{n} entries"));
        }
        if m.canonical == Some(false) {
            notes.push("valid, not canonical".to_string());
        }
        if let Some(q) = m.quantization {
            notes.push(describe_quantization(q));
        }
        let source = match (m.prune_to, m.prune_24) {
            (_, true) => "the source pruned to 2:4".to_string(),
            (Some(d), false) => format!("the source pruned to {d}"),
            (None, false) => "the source".to_string(),
        };
        if m.compared && m.problems.is_empty() {
            notes.push(match (m.rel_error, m.recorded_rel_error) {
                (Some(e), Some(r)) => {
                    format!("rel. error {e:.3e} against {source}, recorded {r:.3e}")
                }
                _ => format!("equals {source}"),
            });
        }
        println!(
            "{status:<4} {} {} {}×{}{}",
            m.kind,
            printable(&m.name),
            m.rows,
            m.cols,
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            }
        );
        for p in &m.problems {
            eprintln!("  {}: {}", printable(&m.name), printable(p));
        }
    }
    for p in &report.other_tensor_problems {
        eprintln!("  {}", printable(p));
    }
    let failed: Vec<String> = report
        .failures()
        .map(|m| printable(&m.name).into_owned())
        .collect();
    if report.against.is_some() {
        println!(
            "other tensors: {} compared with the source, {} differ",
            report.other_tensors_compared,
            report.other_tensor_problems.len()
        );
    }
    if report.passed() {
        println!(
            "{}: all {} matrices pass{}",
            printable(&report.file),
            report.matrices.len(),
            match report.against.as_deref().map(printable) {
                Some(a) if report.matrices.iter().any(|m| m.quantization.is_some()) => {
                    format!(" and match {a} (quantized ones within their recorded error)")
                }
                Some(a) => format!(" and equal {a}"),
                None => String::new(),
            }
        );
        Ok(())
    } else if failed.is_empty() {
        Err(CliError::Check(format!(
            "{}: {} tensors differ from the source they were copied from",
            report.file,
            report.other_tensor_problems.len()
        )))
    } else {
        Err(CliError::Check(format!(
            "{}: {} of {} matrices fail: {}",
            report.file,
            failed.len(),
            report.matrices.len(),
            failed.join(", ")
        )))
    }
}
