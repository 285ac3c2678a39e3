//! Compiles every CUDA kernel of `kernels/` with NVRTC for sm_80 and sm_90 and fails on any error
//! or warning, so that a broken kernel never lands unseen. Needs NVRTC only (no GPU, no driver):
//! CI gets it from PyPI through `.ci/nvrtc.sh`. Where NVRTC is missing the tests print a line
//! and pass, unless `MACKO_REQUIRE_NVRTC=1`.
#![cfg(feature = "cuda")]

mod common;

use macko::backend::cuda::caps::Kernel;
use macko::backend::cuda::nvrtc::{
    self, KernelSource, KERNELS, QUANT_KERNELS, SPARSE24, SPARSE24_MMA, TRANSPOSED,
};
use macko::Error;

/// Architectures every kernel must compile for: Ampere (the oldest the kernels target) and
/// Hopper (the machines the benchmarks run on).
const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// Whether NVRTC is usable; panics where it is required but missing.
fn nvrtc_or_skip(test: &str) -> bool {
    match nvrtc::version() {
        Ok((major, minor)) => {
            println!("{test}: NVRTC {major}.{minor}");
            true
        }
        Err(e) if std::env::var("MACKO_REQUIRE_NVRTC").is_ok_and(|v| v.trim() == "1") => {
            panic!("{test}: MACKO_REQUIRE_NVRTC=1 but NVRTC is unavailable: {e}")
        }
        Err(e) => {
            println!("skipping {test}: {e}");
            false
        }
    }
}

/// Whether `bytes` contains `needle` (an entry name in the CUBIN's symbol table).
fn contains(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Writes the CUBIN to `$MACKO_CUBIN_DIR/<file>.<arch>.cubin` when that variable is set, for
/// `cuobjdump -res-usage` / `-sass` without a GPU.
fn save_cubin(kernel: &KernelSource, arch: &str, cubin: &[u8]) {
    if let Some(dir) = std::env::var_os("MACKO_CUBIN_DIR") {
        let path = std::path::Path::new(&dir)
            .join(format!("{}{}.{arch}.cubin", kernel.file, kernel.variant));
        if let Err(e) = std::fs::write(&path, cubin) {
            panic!("writing {}: {e}", path.display());
        }
    }
}

/// What compiling one kernel file for one architecture found wrong, if anything.
fn check_compile(kernel: &KernelSource, arch: &str) -> Vec<String> {
    let mut failures = Vec::new();
    match nvrtc::compile(kernel, arch, &[]) {
        Ok(c) if !c.log.is_empty() => failures.push(format!(
            "kernels/{} for {arch}: warnings:\n{}",
            kernel.label(),
            c.log
        )),
        Ok(c) => {
            save_cubin(kernel, arch, &c.cubin);
            for entry in kernel.entries {
                if !contains(&c.cubin, entry) {
                    failures.push(format!(
                        "kernels/{} for {arch}: no entry point {entry} in the CUBIN",
                        kernel.label()
                    ));
                }
            }
        }
        Err(e) => failures.push(e.to_string()),
    }
    failures
}

/// Compiles every kernel file for every architecture, on as many threads as there are cores
/// (NVRTC takes up to a minute for one file on CI's two cores), saying on the terminal as each
/// one is done.
#[test]
fn every_kernel_compiles_without_warnings_for_ampere_and_hopper() {
    const TEST: &str = "kernel compile";
    if !nvrtc_or_skip(TEST) {
        return;
    }
    let jobs: Vec<(&KernelSource, &str)> = KERNELS
        .iter()
        .chain(&QUANT_KERNELS)
        .chain([&SPARSE24, &SPARSE24_MMA, &TRANSPOSED])
        .flat_map(|k| ARCHS.map(|arch| (k, arch)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(kernel, arch)) = jobs.get(i) else {
                    break;
                };
                let start = std::time::Instant::now();
                let found = check_compile(kernel, arch);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                common::progress(
                    TEST,
                    format_args!(
                        "{n}/{}: kernels/{} for {arch} in {:.0} s{}",
                        jobs.len(),
                        kernel.label(),
                        start.elapsed().as_secs_f64(),
                        if found.is_empty() { "" } else { ": FAILED" }
                    ),
                );
                failures
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .extend(found);
            });
        }
    });
    let failures = failures
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Every kernel a plan can name (`caps::Kernel`, both output variants) is an entry point of the
/// kernel files compiled above: plans choose among compiled entries, never among definitions.
#[test]
fn every_kernel_a_plan_names_is_an_entry_point() {
    for kernel in Kernel::ALL {
        let (f16, f32) = kernel.entries();
        for name in [f16, f32] {
            assert!(
                KERNELS.iter().any(|k| k.entries.contains(&name)),
                "{kernel:?}: no kernel file declares {name}"
            );
        }
    }
}

#[test]
fn a_compile_error_returns_nvrtcs_log() {
    if !nvrtc_or_skip("compile error") {
        return;
    }
    let broken = KernelSource {
        file: "broken.cu",
        source: "extern \"C\" __global__ void broken(float* y) { y[0] = undeclared_name; }\n",
        entries: &["broken"],
        variant: "",
        defines: &[],
        headers: &[],
    };
    match nvrtc::compile(&broken, "sm_90", &[]) {
        Err(Error::Backend { message, .. }) => {
            assert!(
                message.contains("undeclared_name"),
                "log missing: {message}"
            );
            assert!(
                message.contains("broken.cu"),
                "file name missing: {message}"
            );
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
}

#[test]
fn a_warning_reaches_the_log() {
    if !nvrtc_or_skip("warning") {
        return;
    }
    // An unused variable: compiles, but must not pass the zero-warning rule above unseen.
    let warns = KernelSource {
        file: "warns.cu",
        source: "extern \"C\" __global__ void warns(float* y) { int unused = 3; y[0] = 1.0f; }\n",
        entries: &["warns"],
        variant: "",
        defines: &[],
        headers: &[],
    };
    let compiled = nvrtc::compile(&warns, "sm_90", &[]).expect("compiles");
    assert!(
        compiled.log.contains("unused"),
        "expected a warning about the unused variable, log: {:?}",
        compiled.log
    );
}
