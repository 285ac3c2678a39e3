//! What `macko bench` prints and writes: per-case lines, the summary table, results.csv and
//! results.json.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use macko::QuantBits;

use crate::error::CliError;

use super::plots;
use super::record::{Record, Results};
use super::values::quant_kernels;

/// Fills in the derived figures of one case (one shape, density and batch) on one device:
/// fraction of the streaming-read ceiling over each kernel's own bytes (matrix, X and Y), and
/// speedup over the backend's dense baseline with the same batch. Adds a "stream" record (the
/// ceiling over the MACKO product's bytes).
pub fn finish_case(
    records: &mut Vec<Record>,
    baseline: &str,
    mut ceiling_gbps: impl FnMut(u64) -> Option<f64>,
) {
    let base = records
        .iter()
        .find(|r| r.kernel == baseline)
        .or_else(|| records.iter().find(|r| r.kernel == "dense"))
        .map(|r| r.median_us);
    let mut stream = None;
    for r in records.iter_mut() {
        if let Some(c) = ceiling_for(r.gbps, r.bytes, &mut ceiling_gbps) {
            r.fraction_of_ceiling = Some(r.gbps / c);
            if r.kernel == "macko" {
                stream = Some(Record {
                    kernel: "stream".into(),
                    median_us: r.bytes as f64 / c / 1e3,
                    min_us: f64::NAN,
                    p10_us: f64::NAN,
                    p90_us: f64::NAN,
                    gbps: c,
                    fraction_of_ceiling: Some(1.0),
                    speedup_over_dense: None,
                    ..r.clone()
                });
            }
        }
        r.speedup_over_dense = base.map(|b| b / r.median_us);
    }
    records.extend(stream);
}

/// Why a kernel can read its bytes faster than the streaming-read ceiling over the same bytes
/// even after the ceiling was measured again ([`ceiling_for`]): the two are timed apart, so the
/// kernel may find more of its (rotated) matrices in cache, or less load from other processes,
/// than the streaming read did.
pub const ABOVE_CEILING: &str =
    "above it: timed apart from the ceiling, with warmer caches or a quieter machine";

/// A share of the ceiling as the case line prints it: labelled, and above 100 % with the
/// reason beside it rather than a bare figure.
fn share_of_ceiling(fraction: f64) -> String {
    let percent = fraction * 100.0;
    if format!("{percent:.0}")
        .parse::<f64>()
        .is_ok_and(|p| p > 100.0)
    {
        format!("({percent:.0}% of ceiling, {ABOVE_CEILING})")
    } else {
        format!("({percent:.0}% of ceiling)")
    }
}

/// The ceiling over `bytes` for a kernel that read them at `gbps`, measured again once where
/// the kernel beat it and the faster of the two kept: a plain kernel outrunning a streaming
/// read of its own bytes shows the read was slowed (another process on the cores, a colder
/// cache), and a second look is cheaper than a wrong ceiling. One retry only, so a kernel
/// that truly reads faster (its copies cached) costs one extra read and is then explained.
fn ceiling_for(gbps: f64, bytes: u64, measure: &mut impl FnMut(u64) -> Option<f64>) -> Option<f64> {
    let first = measure(bytes)?;
    if gbps <= first {
        return Some(first);
    }
    Some(measure(bytes).map_or(first, |again| again.max(first)))
}

/// One line per case and device: each kernel's median and, where known, its share of the
/// ceiling (its GB/s over the streaming read's over the same bytes).
pub fn case_line(records: &[Record]) -> Option<String> {
    let first = records.first()?;
    let mut line = format!(
        "{:<5} {:>6}×{:<6} d={:<4} B={:<2}",
        first.backend, first.rows, first.cols, first.density, first.batch
    );
    for r in records.iter().filter(|r| r.kernel != "stream") {
        line.push_str(&format!(" {}={:.1}µs", r.kernel, r.median_us));
        if let Some(f) = r.fraction_of_ceiling {
            line.push_str(&share_of_ceiling(f));
        }
    }
    if let Some(s) = records.iter().find(|r| r.kernel == "stream") {
        line.push_str(&format!(" ceiling={:.0}GB/s", s.gbps));
    }
    Some(line)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A percentage of the ceiling in a summary column: above 100 (as printed) it is marked `*`,
/// which [`CEILING_NOTE`]'s second line explains.
fn fmt_percent(v: Option<f64>) -> String {
    match v {
        Some(p) if format!("{p:.1}").parse::<f64>().is_ok_and(|p| p > 100.0) => {
            format!("{p:.1}*")
        }
        _ => fmt_opt(v, 1),
    }
}

/// What the summaries' `%ceil` columns are, printed under each table that has them.
const CEILING_NOTE: &str = "%ceil: a kernel's GB/s over its own bytes (matrix, X and Y) as a \
     percentage of the streaming-read ceiling over the same bytes";

/// The footnote of a summary whose `%ceil` columns are `printed`: what they are and, where
/// one is above 100, why.
fn ceiling_note(printed: &[String]) -> String {
    if printed.iter().any(|p| p.ends_with('*')) {
        format!("({CEILING_NOTE}; * {ABOVE_CEILING})")
    } else {
        format!("({CEILING_NOTE})")
    }
}

/// A density as a key that sorts densest first.
fn falling_density(d: f64) -> i64 {
    -(d * 1000.0).round() as i64
}

/// The summary on stdout: per backend, batch and density, median over shapes of MACKO's
/// speedup over the dense baseline (with the same batch) and of each kernel's fraction of the
/// ceiling; then, where quantized kernels were measured, their table ([`quant_summary`]); with
/// several batches, the few-token tables after it ([`batch_summary`]).
pub fn summary(records: &[Record]) {
    let mut groups: BTreeMap<(String, usize, i64), Vec<&Record>> = BTreeMap::new();
    for r in records {
        groups
            .entry((r.backend.clone(), r.batch, falling_density(r.density)))
            .or_default()
            .push(r);
    }
    println!(
        "\n{:<7} {:>3} {:>7} {:>8} {:>12} {:>12} {:>12} {:>10}",
        "backend",
        "B",
        "density",
        "shapes",
        "macko×dense",
        "csr×dense",
        "macko %ceil",
        "dense %ceil"
    );
    let mut percents: Vec<String> = Vec::new();
    for ((backend, batch, d), rs) in &groups {
        let pick = |k: &str, f: fn(&Record) -> Option<f64>| {
            median(
                rs.iter()
                    .filter(|r| r.kernel == k)
                    .filter_map(|r| f(r))
                    .collect(),
            )
        };
        let shapes = rs.iter().filter(|r| r.kernel == "macko").count();
        let ceil = |r: &Record| r.fraction_of_ceiling.map(|f| f * 100.0);
        let (macko_ceil, dense_ceil) = (
            fmt_percent(pick("macko", ceil)),
            fmt_percent(pick("dense", ceil)),
        );
        println!(
            "{:<7} {:>3} {:>7.2} {:>8} {:>12} {:>12} {:>12} {:>10}",
            backend,
            batch,
            -*d as f64 / 1000.0,
            shapes,
            fmt_opt(pick("macko", |r| r.speedup_over_dense), 2),
            fmt_opt(pick("csr", |r| r.speedup_over_dense), 2),
            macko_ceil,
            dense_ceil,
        );
        percents.extend([macko_ceil, dense_ceil]);
    }
    println!("(medians over shapes; speedups are over cuBLAS on cuda, our dense GEMV elsewhere, with the same B)");
    println!("{}", ceiling_note(&percents));
    quant_summary(&groups);
    sparse24_summary(&groups);
    batch_summary(records);
}

/// Where `--sparse24` measured the 2:4 kernel: per backend, batch and density, the median over
/// shapes of `sparse24` over the dense baseline, of its fraction of the ceiling over its own
/// bytes, and of MACKO's time over its time (above 1: 2:4 is faster than MACKO at that density
/// on the same shape). Nothing is printed without such records.
fn sparse24_summary(groups: &BTreeMap<(String, usize, i64), Vec<&Record>>) {
    if !groups
        .values()
        .any(|rs| rs.iter().any(|r| r.kernel == "sparse24"))
    {
        return;
    }
    println!(
        "\n{:<7} {:>3} {:>7} {:>8} {:>14} {:>14} {:>14}",
        "backend", "B", "density", "shapes", "2:4×dense", "2:4 %ceil", "macko/2:4 time"
    );
    let mut percents: Vec<String> = Vec::new();
    for ((backend, batch, d), rs) in groups {
        let two4: Vec<&&Record> = rs.iter().filter(|r| r.kernel == "sparse24").collect();
        if two4.is_empty() {
            continue;
        }
        let ratio: Vec<f64> = two4
            .iter()
            .filter_map(|s| {
                rs.iter()
                    .find(|r| r.kernel == "macko" && (r.rows, r.cols) == (s.rows, s.cols))
                    .map(|m| m.median_us / s.median_us)
            })
            .collect();
        let ceil = fmt_percent(median(
            two4.iter()
                .filter_map(|r| r.fraction_of_ceiling.map(|f| f * 100.0))
                .collect(),
        ));
        println!(
            "{:<7} {:>3} {:>7.2} {:>8} {:>14} {:>14} {:>14}",
            backend,
            batch,
            -*d as f64 / 1000.0,
            two4.len(),
            fmt_opt(
                median(two4.iter().filter_map(|r| r.speedup_over_dense).collect()),
                2
            ),
            ceil,
            fmt_opt(median(ratio), 2),
        );
        percents.push(ceil);
    }
    println!("(medians over shapes; 2:4 storage is 0.5625 of dense at every density, so compare it with MACKO at d = 0.5)");
    println!("{}", ceiling_note(&percents));
}

/// The quantized widths, in the order their rows are printed.
const QUANT_WIDTHS: [QuantBits; 2] = [QuantBits::Int8, QuantBits::Int4];

/// Where `--values` measured quantized kernels: per backend, batch, density and value type V,
/// the median over shapes of `macko-V` and `dense-V` over the same f16 dense baseline as the
/// table above (so "macko-int8 over cuBLAS f16" is read here) and of each one's fraction of
/// the ceiling over its own bytes. One row per value type keeps the table as narrow as the
/// f16 one; without quantized records nothing is printed, so f16-only output is unchanged.
fn quant_summary(groups: &BTreeMap<(String, usize, i64), Vec<&Record>>) {
    let has = |rs: &[&Record], bits: QuantBits| {
        let names = quant_kernels(bits);
        rs.iter().any(|r| names.contains(&r.kernel.as_str()))
    };
    if !groups
        .values()
        .any(|rs| QUANT_WIDTHS.iter().any(|&bits| has(rs, bits)))
    {
        return;
    }
    println!(
        "\n{:<7} {:>3} {:>7} {:>6} {:>8} {:>14} {:>14} {:>14} {:>14}",
        "backend",
        "B",
        "density",
        "values",
        "shapes",
        "macko-V×dense",
        "dense-V×dense",
        "macko-V %ceil",
        "dense-V %ceil"
    );
    let mut percents: Vec<String> = Vec::new();
    for ((backend, batch, d), rs) in groups {
        for bits in QUANT_WIDTHS.into_iter().filter(|&bits| has(rs, bits)) {
            let [macko, dense] = quant_kernels(bits);
            let pick = |k: &str, f: fn(&Record) -> Option<f64>| {
                median(
                    rs.iter()
                        .filter(|r| r.kernel == k)
                        .filter_map(|r| f(r))
                        .collect(),
                )
            };
            let shapes: BTreeSet<(usize, usize)> = rs
                .iter()
                .filter(|r| r.kernel == macko || r.kernel == dense)
                .map(|r| (r.rows, r.cols))
                .collect();
            let ceil = |r: &Record| r.fraction_of_ceiling.map(|f| f * 100.0);
            let (macko_ceil, dense_ceil) = (
                fmt_percent(pick(macko, ceil)),
                fmt_percent(pick(dense, ceil)),
            );
            println!(
                "{:<7} {:>3} {:>7.2} {:>6} {:>8} {:>14} {:>14} {:>14} {:>14}",
                backend,
                batch,
                -*d as f64 / 1000.0,
                bits.as_str(),
                shapes.len(),
                fmt_opt(pick(macko, |r| r.speedup_over_dense), 2),
                fmt_opt(pick(dense, |r| r.speedup_over_dense), 2),
                macko_ceil,
                dense_ceil,
            );
            percents.extend([macko_ceil, dense_ceil]);
        }
    }
    println!("(V: the values' type; medians over shapes; speedups are over the f16 dense baseline above: cuBLAS f16 on cuda, our dense f16 GEMV elsewhere)");
    println!("{}", ceiling_note(&percents));
}

/// With more than one batch size: per backend and density, the median over shapes of MACKO
/// over the dense baseline for each B, and of MACKO's time(B) / time(1) (how well the
/// matrix read is shared by B vectors; 1 would be free vectors, B no sharing at all).
fn batch_summary(records: &[Record]) {
    let batches: BTreeSet<usize> = records.iter().map(|r| r.batch).collect();
    if batches.len() < 2 {
        return;
    }
    let macko: Vec<&Record> = records.iter().filter(|r| r.kernel == "macko").collect();
    let backends: BTreeSet<&str> = macko.iter().map(|r| r.backend.as_str()).collect();
    let densities: BTreeSet<i64> = macko.iter().map(|r| falling_density(r.density)).collect();
    let time_of: BTreeMap<(&str, usize, usize, i64, usize), f64> = macko
        .iter()
        .map(|r| {
            let key = (
                r.backend.as_str(),
                r.rows,
                r.cols,
                falling_density(r.density),
                r.batch,
            );
            (key, r.median_us)
        })
        .collect();
    let header: String = batches
        .iter()
        .map(|b| format!(" {:>7}", format!("B={b}")))
        .collect();
    for (title, ratio) in [
        ("MACKO over the dense baseline, same B", false),
        ("MACKO time(B) / time(1), same shape", true),
    ] {
        println!("\n{title} (medians over shapes):");
        println!("{:<7} {:>7}{header}", "backend", "density");
        for backend in &backends {
            for d in &densities {
                let mut line = format!("{backend:<7} {:>7.2}", -*d as f64 / 1000.0);
                for &batch in &batches {
                    let here = macko
                        .iter()
                        .filter(|r| r.backend == *backend && falling_density(r.density) == *d)
                        .filter(|r| r.batch == batch);
                    let values: Vec<f64> = if ratio {
                        here.filter_map(|r| {
                            let one = time_of.get(&(r.backend.as_str(), r.rows, r.cols, *d, 1))?;
                            Some(r.median_us / one)
                        })
                        .collect()
                    } else {
                        here.filter_map(|r| r.speedup_over_dense).collect()
                    };
                    line.push_str(&format!(" {:>7}", fmt_opt(median(values), 2)));
                }
                println!("{line}");
            }
        }
    }
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Writes results.csv and results.json (the run's description and every record) into `dir`.
/// The CSV's `batch` column comes last, so that scripts reading the earlier columns by position
/// (kernels/sweep.sh) read batch-1 files as they always did.
pub fn write_files(doc: &Results, dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    let csv_path = dir.join("results.csv");
    let mut csv = String::from(
        "backend,device,rows,cols,density,kernel,bytes,effective_density,median_us,min_us,p10_us,p90_us,gbps,fraction_of_ceiling,speedup_over_dense,timer,iters,batch\n",
    );
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    for r in &doc.results {
        csv.push_str(&format!(
            "{},\"{}\",{},{},{},{},{},{:.4},{:.2},{:.2},{:.2},{:.2},{:.1},{},{},{},{},{}\n",
            r.backend,
            r.device.replace('"', "'"),
            r.rows,
            r.cols,
            r.density,
            r.kernel,
            r.bytes,
            r.effective_density,
            r.median_us,
            r.min_us,
            r.p10_us,
            r.p90_us,
            r.gbps,
            opt(r.fraction_of_ceiling),
            opt(r.speedup_over_dense),
            r.timer,
            r.iters,
            r.batch
        ));
    }
    std::fs::write(&csv_path, csv).map_err(|e| io_error(&csv_path, e))?;
    let json_path = dir.join("results.json");
    // Through a `Value`, whose maps are sorted: every object's keys in alphabetical order.
    let text = serde_json::to_value(doc)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .map_err(|e| io_error(&json_path, e))?;
    std::fs::write(&json_path, text).map_err(|e| io_error(&json_path, e))?;
    Ok(vec![csv_path, json_path])
}

/// The end of a run, measured or merged: the summary table on stdout and, with `out`,
/// results.csv, results.json and the plots there, each file written named on stdout.
pub fn finish(doc: &Results, out: Option<&Path>) -> Result<(), CliError> {
    summary(&doc.results);
    if let Some(dir) = out {
        let written = write_files(doc, dir)?;
        match plots::write_plots(&doc.results, dir) {
            Ok(paths) => written
                .iter()
                .chain(&paths)
                .for_each(|p| println!("wrote {}", p.display())),
            Err(e) => println!("plots not written: {e}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kernel: &str, median_us: f64, fraction: Option<f64>) -> Record {
        Record {
            backend: "cpu".into(),
            device: "test".into(),
            rows: 64,
            cols: 64,
            density: 1.0,
            batch: 1,
            kernel: kernel.into(),
            bytes: 8192,
            effective_density: 1.0,
            median_us,
            min_us: median_us,
            p10_us: median_us,
            p90_us: median_us,
            gbps: 1.0,
            fraction_of_ceiling: fraction,
            speedup_over_dense: None,
            timer: "wall clock".into(),
            iters: 1,
        }
    }

    #[test]
    fn case_line_labels_each_share_and_gives_a_reason_above_the_ceiling() {
        let line = case_line(&[
            record("macko", 10.0, Some(0.52)),
            record("dense", 5.0, Some(1.4)),
            record("csr", 7.0, Some(1.004)),
        ])
        .expect("a line");
        assert!(line.contains("macko=10.0µs(52% of ceiling)"), "{line}");
        assert!(
            line.contains(&format!("dense=5.0µs(140% of ceiling, {ABOVE_CEILING})")),
            "{line}"
        );
        // 100.4 % prints as 100 %: not above the ceiling as printed, so no reason.
        assert!(line.contains("csr=7.0µs(100% of ceiling)"), "{line}");
    }

    #[test]
    fn a_ceiling_a_kernel_beat_is_measured_again_and_the_faster_kept() {
        let mut records = vec![record("dense", 5.0, None), record("macko", 9.0, None)];
        records[0].gbps = 2.0; // beats the first ceiling of 1.0 GB/s
        records[1].gbps = 0.5;
        let mut ceilings = vec![1.0, 4.0, 1.5].into_iter();
        let mut calls = 0;
        finish_case(&mut records, "dense", |_| {
            calls += 1;
            ceilings.next()
        });
        assert_eq!(calls, 3, "dense measured twice, macko once");
        assert_eq!(records[0].fraction_of_ceiling, Some(0.5));
        assert_eq!(records[1].fraction_of_ceiling, Some(0.5 / 1.5));
        let stream = records
            .iter()
            .find(|r| r.kernel == "stream")
            .expect("stream");
        assert_eq!(stream.gbps, 1.5);
    }

    #[test]
    fn summary_percentages_above_100_are_marked_and_explained() {
        assert_eq!(fmt_percent(Some(52.04)), "52.0");
        assert_eq!(fmt_percent(Some(100.04)), "100.0");
        assert_eq!(fmt_percent(Some(106.4)), "106.4*");
        assert_eq!(fmt_percent(None), "-");
        let plain = ceiling_note(&["52.0".into(), "-".into()]);
        assert!(plain.contains("%ceil: a kernel's GB/s"), "{plain}");
        assert!(!plain.contains(ABOVE_CEILING), "{plain}");
        let marked = ceiling_note(&["106.4*".into()]);
        assert!(marked.contains(&format!("* {ABOVE_CEILING}")), "{marked}");
    }
}
