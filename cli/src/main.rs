//! The `macko` command: `info` (backends and devices), `demo` (one product on the chosen
//! device, checked against the f64 reference), `bench`, `convert` (a checkpoint to MACKO-16-4,
//! optionally with int8/int4 values) and `verify` (a converted file against the format's rules
//! and its source), `tune` (time candidate plans, keep the fastest in the plan cache). Exit
//! status 1 on
//! any error, with the message.

mod bench;
mod convert;
mod demo;
mod error;
mod info;
mod text;
mod tune;
mod verify;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "macko",
    version,
    about = "Sparse matrix-vector products in MACKO-16-4 on CUDA, wgpu or the CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every backend and device, with key properties, and why a missing one is missing.
    Info,
    /// Measure MACKO against dense and CSR (and cuBLAS/cuSPARSE on CUDA) on every available
    /// backend, over LLM weight shapes and densities, with the device's streaming-read ceiling;
    /// with --values int8,int4 also MACKO and dense with quantized values.
    Bench(bench::BenchArgs),
    /// Multiply a synthetic pruned matrix on one device in MACKO, CSR and dense, check each
    /// against the f64 reference, and print time and storage.
    Demo(demo::DemoArgs),
    /// Encode the weight matrices of a .safetensors checkpoint as MACKO-16-4 (optionally
    /// pruning each row to a density first, and quantizing the values to int8 or int4), copy
    /// every other tensor, and report the storage of each tensor as dense f16, CSR and MACKO,
    /// with quantization's relative error of W·x.
    Convert(convert::ConvertArgs),
    /// Time the candidate plans of MACKO matrices on every GPU backend here and keep the
    /// fastest per matrix class in the plan cache, which products then use (over the 31 paper
    /// shapes at d = 0.5, 0.3, 0.1 by default, or a converted checkpoint's matrices).
    Tune(tune::TuneArgs),
    /// Check every matrix of a converted file against the format's rules and, with --against,
    /// bit for bit against the (pruned) f16 source, or for quantized values within the relative
    /// error convert recorded.
    Verify(verify::VerifyArgs),
}

/// On Ctrl-C or SIGTERM during `convert`: remove the temporary file being written beside the
/// output (the output itself is only ever replaced by a complete file), say so, and exit 130.
/// Without it the process would die with the temporary left behind.
fn remove_temporaries_on_interrupt() {
    let installed = ctrlc::set_handler(|| {
        let removed = macko::checkpoint::remove_unfinished_outputs();
        eprintln!(
            "error: interrupted; the output is unchanged and {removed} unfinished temporary \
             file{} removed",
            if removed == 1 { " was" } else { "s were" }
        );
        std::process::exit(130);
    });
    if let Err(e) = installed {
        eprintln!("warning: no interrupt handler ({e}): an interrupt may leave a temporary file");
    }
}

fn main() {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Convert(_)) {
        remove_temporaries_on_interrupt();
    }
    let result = match cli.command {
        Command::Info => info::run(),
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Convert(args) => convert::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Tune(args) => tune::run(&args),
    };
    if let Err(e) = result {
        eprintln!("error: {}", e.one_line());
        std::process::exit(1);
    }
}
