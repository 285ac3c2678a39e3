//! SVG plots of `macko bench` results, drawn with plotters:
//!
//! - `speedup_<backend>.svg`: speedup of MACKO over the backend's dense baseline by density,
//!   one line per shape group (median over the group's shapes, min–max as thin bars), with
//!   the dense break-even line and the CSR / cuSPARSE medians for contrast;
//! - `effective_density.svg`: MACKO's measured effective density against the storage formulas
//!   of docs/FORMAT.md (expected, best, worst), CSR and dense;
//! - `ceiling_<backend>.svg`: the fraction of the streaming-read ceiling that MACKO and the
//!   dense kernels reach, with the 85 % goal marked;
//! - with several batch sizes (`--batch`), `speedup_by_batch_<backend>.svg`: MACKO's speedup
//!   over the dense baseline with the same B, one line per B.
//!
//! Quantized kernels (`--values int8,int4`: `macko-int8`, `dense-int4`, …) are extra median
//! lines on the speedup and ceiling plots, over the same f16 baseline and each over its own
//! bytes; the effective-density plot compares MACKO-16-4 with its formulas and leaves them out.
//!
//! The speedup and ceiling plots are drawn per batch size B: `speedup_<backend>.svg` for one
//! vector (the names from before `--batch`), `speedup_<backend>_b<B>.svg` for B vectors. The
//! effective-density plot (storage only, the same for every B) uses the smallest B measured.
//!
//! Density runs from dense on the left to sparse on the right on every plot, so "more pruning"
//! reads left to right. Only finite figures are drawn (NaN, infinities and missing optional
//! figures are left out), and a plot whose data is absent is skipped, not drawn empty.

mod batch;
mod ceiling;
mod chart;
mod data;
mod effective_density;
mod labels;
mod legend;
mod speedup;
mod style;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::record::Record;
use batch::{draw_batch_speedup, has_batch_lines};
use ceiling::{draw_ceiling, has_ceiling};
use chart::{HEIGHT, WIDTH};
use effective_density::{draw_effective_density, has_effective_density};
use labels::{batch_suffix, file_stem};
use speedup::{draw_speedup, has_speedup};

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output directory could not be created.
    #[error("cannot create the plot directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// Drawing or writing one SVG file failed.
    #[error("cannot draw {path}: {message}")]
    Draw {
        /// The SVG file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
}

/// Writes every plot that the records have data for into `dir` (created if missing) and
/// returns the paths written, in order: per backend (sorted by name) and batch (rising) the
/// speedup plot, then per backend the by-batch speedup plot, then the effective-density
/// plot, then per backend and batch the ceiling plot. Empty input writes nothing.
pub fn write_plots(records: &[Record], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let backends: BTreeSet<&str> = records.iter().map(|r| r.backend.as_str()).collect();
    let per_backend: Vec<(&str, Vec<&Record>)> = backends
        .into_iter()
        .map(|b| (b, records.iter().filter(|r| r.backend == b).collect()))
        .collect();
    // (backend, batch, records of both), batches rising within a backend.
    let per_batch: Vec<(&str, usize, Vec<&Record>)> = per_backend
        .iter()
        .flat_map(|(backend, recs)| {
            let batches: BTreeSet<usize> = recs.iter().map(|r| r.batch).collect();
            batches.into_iter().map(move |b| {
                let mine = recs.iter().copied().filter(|r| r.batch == b).collect();
                (*backend, b, mine)
            })
        })
        .collect();
    let smallest = records.iter().map(|r| r.batch).min().unwrap_or(1);
    let storage: Vec<Record> = records
        .iter()
        .filter(|r| r.batch == smallest)
        .cloned()
        .collect();
    let mut jobs: Vec<(PathBuf, Job<'_>)> = Vec::new();
    for (backend, batch, recs) in &per_batch {
        if has_speedup(recs) {
            let name = format!("speedup_{}{}.svg", file_stem(backend), batch_suffix(*batch));
            jobs.push((dir.join(name), Job::Speedup(backend, recs)));
        }
    }
    for (backend, recs) in &per_backend {
        if has_batch_lines(recs) {
            let name = format!("speedup_by_batch_{}.svg", file_stem(backend));
            jobs.push((dir.join(name), Job::BatchSpeedup(backend, recs)));
        }
    }
    if has_effective_density(&storage) {
        jobs.push((dir.join("effective_density.svg"), Job::EffectiveDensity));
    }
    for (backend, batch, recs) in &per_batch {
        if has_ceiling(recs) {
            let name = format!("ceiling_{}{}.svg", file_stem(backend), batch_suffix(*batch));
            jobs.push((dir.join(name), Job::Ceiling(backend, recs)));
        }
    }
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir).map_err(|source| PlotError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;

    let mut written = Vec::with_capacity(jobs.len());
    for (path, job) in jobs {
        let result = {
            let root = SVGBackend::new(&path, (WIDTH, HEIGHT)).into_drawing_area();
            let drawn = match &job {
                Job::Speedup(backend, recs) => draw_speedup(&root, backend, recs),
                Job::BatchSpeedup(backend, recs) => draw_batch_speedup(&root, backend, recs),
                Job::EffectiveDensity => draw_effective_density(&root, &storage),
                Job::Ceiling(backend, recs) => draw_ceiling(&root, backend, recs),
            };
            drawn.and_then(|()| root.present().map_err(Into::into))
        };
        result.map_err(|e| PlotError::Draw {
            path: path.clone(),
            message: e.to_string(),
        })?;
        written.push(path);
    }
    Ok(written)
}

/// One plot to draw.
enum Job<'r> {
    /// Speedup over dense for one backend, with that backend's records.
    Speedup(&'r str, &'r [&'r Record]),
    /// Speedup over dense by batch size for one backend, with that backend's records.
    BatchSpeedup(&'r str, &'r [&'r Record]),
    /// Effective density over the records of the smallest batch.
    EffectiveDensity,
    /// Fraction of the ceiling for one backend, with that backend's records.
    Ceiling(&'r str, &'r [&'r Record]),
}

#[cfg(test)]
mod tests {
    use macko::storage;

    use super::*;

    /// A plausible record: `eff` bytes relative to dense, reaching `frac` of a 1000 GB/s
    /// ceiling; `base_us` is the dense baseline's time.
    fn record(
        backend: &str,
        shape: (usize, usize),
        d: f64,
        kernel: &str,
        eff: f64,
        frac: f64,
    ) -> Record {
        let dense_bytes = (shape.0 * shape.1 * 2) as f64;
        let bytes = dense_bytes * eff;
        let gbps = 1000.0 * frac;
        let us = bytes / gbps / 1e3;
        let base_us = dense_bytes / 900.0 / 1e3;
        Record {
            backend: backend.to_string(),
            device: format!("{backend} test device"),
            rows: shape.0,
            cols: shape.1,
            density: d,
            batch: 1,
            kernel: kernel.to_string(),
            bytes: bytes as u64,
            effective_density: eff,
            median_us: us,
            min_us: us * 0.97,
            p10_us: us * 0.98,
            p90_us: us * 1.05,
            gbps,
            fraction_of_ceiling: Some(frac),
            speedup_over_dense: Some(base_us / us),
            timer: "wall clock".to_string(),
            iters: 10,
        }
    }

    /// Fake results over several shapes, densities 1.0 … 0.05, two backends, every kernel,
    /// with a NaN and missing figures mixed in.
    fn fake_records() -> Vec<Record> {
        let shapes = [(4096, 4096), (8192, 8192), (32000, 8192), (4096, 11008)];
        let densities = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05];
        let mut out = Vec::new();
        for backend in ["cuda", "cpu"] {
            for (i, &shape) in shapes.iter().enumerate() {
                for &d in &densities {
                    let wiggle = 1.0 - 0.03 * i as f64;
                    let mut push = |kernel: &str, eff: f64, frac: f64| {
                        out.push(record(backend, shape, d, kernel, eff, frac * wiggle));
                    };
                    push("macko", storage::macko_expected(d), 0.8);
                    push("csr", storage::csr(d), 0.5);
                    push("dense", 1.0, 0.85);
                    push("stream", storage::macko_expected(d), 1.0);
                    if backend == "cuda" {
                        push("cublas", 1.0, 0.9);
                        push("cusparse", storage::csr(d), 0.55);
                    }
                }
            }
        }
        if let Some(r) = out.first_mut() {
            r.speedup_over_dense = Some(f64::NAN);
            r.fraction_of_ceiling = None;
        }
        out
    }

    /// A fresh directory under the system's temp dir.
    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("macko-plots-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn writes_every_plot_as_svg() {
        let dir = temp_dir("all");
        let written = write_plots(&fake_records(), &dir).expect("plots are written");
        let names: Vec<String> = written
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            names,
            [
                "speedup_cpu.svg",
                "speedup_cuda.svg",
                "effective_density.svg",
                "ceiling_cpu.svg",
                "ceiling_cuda.svg"
            ]
        );
        for p in &written {
            let svg = std::fs::read_to_string(p).expect("the plot is readable");
            assert!(svg.contains("<svg"), "{} is not an SVG", p.display());
            assert!(svg.contains("MACKO"), "{} has no MACKO text", p.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn several_batches_get_plots_named_by_batch_and_one_by_batch_plot() {
        let dir = temp_dir("batches");
        let mut recs: Vec<Record> = fake_records()
            .into_iter()
            .filter(|r| r.backend == "cpu")
            .collect();
        let four: Vec<Record> = recs
            .iter()
            .map(|r| Record {
                batch: 4,
                speedup_over_dense: r.speedup_over_dense.map(|s| s * 0.8),
                ..r.clone()
            })
            .collect();
        recs.extend(four);
        let written = write_plots(&recs, &dir).expect("plots are written");
        let names: Vec<String> = written
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            names,
            [
                "speedup_cpu.svg",
                "speedup_cpu_b4.svg",
                "speedup_by_batch_cpu.svg",
                "effective_density.svg",
                "ceiling_cpu.svg",
                "ceiling_cpu_b4.svg"
            ]
        );
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("readable");
        assert!(read("speedup_cpu_b4.svg").contains("B = 4"));
        assert!(!read("speedup_cpu.svg").contains("B = "));
        let by_batch = read("speedup_by_batch_cpu.svg");
        assert!(by_batch.contains("MACKO, B = 1") && by_batch.contains("MACKO, B = 4"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn quantized_kernels_are_extra_lines_of_the_speedup_and_ceiling_plots() {
        let dir = temp_dir("quant");
        let mut recs: Vec<Record> = fake_records()
            .into_iter()
            .filter(|r| r.backend == "cuda")
            .collect();
        let quant: Vec<Record> = recs
            .iter()
            .filter(|r| r.kernel == "macko" || r.kernel == "dense")
            .flat_map(|r| {
                [("int8", 0.6), ("int4", 0.35)].map(|(v, eff)| Record {
                    kernel: format!("{}-{v}", r.kernel),
                    effective_density: r.effective_density * eff,
                    speedup_over_dense: r.speedup_over_dense.map(|s| s / eff),
                    ..r.clone()
                })
            })
            .collect();
        recs.extend(quant);
        let written = write_plots(&recs, &dir).expect("plots are written");
        assert_eq!(written.len(), 3);
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("readable");
        for plot in ["speedup_cuda.svg", "ceiling_cuda.svg"] {
            let svg = read(plot);
            for name in [
                "MACKO int8",
                "MACKO int4",
                "dense int8 (ours)",
                "dense int4 (ours)",
            ] {
                assert!(svg.contains(name), "{plot} has no {name}");
            }
        }
        assert!(!read("effective_density.svg").contains("int8"));
        // Without quantized records, no quantized line.
        let f16 = dir.join("f16");
        write_plots(&fake_records(), &f16).expect("plots are written");
        let svg = std::fs::read_to_string(f16.join("speedup_cuda.svg")).expect("readable");
        assert!(!svg.contains("int8") && !svg.contains("int4"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn empty_or_unusable_input_writes_nothing() {
        let dir = temp_dir("empty");
        assert!(write_plots(&[], &dir).expect("no error").is_empty());
        let mut r = record("cpu", (64, 64), f64::NAN, "macko", f64::NAN, 0.5);
        r.speedup_over_dense = Some(f64::INFINITY);
        r.fraction_of_ceiling = None;
        assert!(write_plots(&[r], &dir).expect("no error").is_empty());
        assert!(!dir.exists());
    }

    #[test]
    fn absent_ceiling_skips_only_the_ceiling_plot() {
        let dir = temp_dir("noceiling");
        let mut recs = fake_records();
        recs.retain(|r| r.backend == "cpu");
        for r in &mut recs {
            r.fraction_of_ceiling = None;
        }
        let written = write_plots(&recs, &dir).expect("plots are written");
        assert_eq!(written.len(), 2);
        assert!(written.iter().all(|p| p.exists()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
