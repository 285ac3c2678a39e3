//! `macko bench --merge DIR [--merge DIR …] --out OUT`: combines the results of earlier runs
//! (say a long GPU run split over two calls by density) into one set of results and plots,
//! measuring nothing and opening no device.
//!
//! Each DIR/results.json is read in order. A record is known by its backend, shape, density,
//! batch and kernel (a record without a batch, written before `--batch`, is batch 1); a later
//! DIR's record replaces an earlier one's with the same key, and the merged records are sorted
//! the way one run writes them (shapes in order of first appearance, densities falling,
//! batches rising, then backend and kernel in order of first appearance). The runs must
//! agree on the version of macko, on every measurement setting (iters, warmup, check_rows,
//! seed, output, rotation_bytes) and on the device of each backend they share: medians over
//! different repetitions or matrices, or of another GPU, do not belong in one plot. A backend
//! measured by only some of the runs is fine. So is a quantized value type (`--values int8`)
//! measured by only some of them, but runs that both measured a type must have used the same
//! scale layout (`settings.scales`), and the merged settings list every type's layout. Where
//! the runs' hosts or a device's properties (driver, kernel description) differ, the merge
//! goes on, says so, and keeps the later one's.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::error::CliError;

use super::record::{DeviceEntry, Record, Results, Source, TOOL};
use super::report;

/// Why results could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A DIR that does not exist or is not a directory.
    #[error("cannot merge {path}: {why}")]
    NotADir {
        /// The DIR given.
        path: PathBuf,
        /// "no such directory" or "not a directory".
        why: &'static str,
    },
    /// A DIR without results.json.
    #[error("cannot merge {path}: no such file (is the directory the --out of `macko bench`?)")]
    NoResults {
        /// DIR/results.json.
        path: PathBuf,
    },
    /// A results.json that cannot be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// DIR/results.json.
        path: PathBuf,
        /// What the file system said.
        message: String,
    },
    /// A results.json that is not one `macko bench` wrote.
    #[error("{path} is not the results.json of `macko bench`: {message}")]
    Malformed {
        /// DIR/results.json.
        path: PathBuf,
        /// What is wrong, with the line and column where the JSON parser says.
        message: String,
    },
    /// Two runs measured differently (a setting, the version, or a backend's device).
    #[error("cannot merge: {what} is {first_value} in {first} but {other_value} in {other}")]
    Incompatible {
        /// What differs: "settings.iters", "version", "the cuda device".
        what: String,
        /// The results.json of the earlier run.
        first: PathBuf,
        /// Its value (JSON).
        first_value: String,
        /// The results.json of the later run.
        other: PathBuf,
        /// Its value (JSON).
        other_value: String,
    },
    /// --out is one of the directories merged.
    #[error(
        "--out {path} is also one of the --merge directories; write the merged results elsewhere"
    )]
    OutIsInput {
        /// The directory.
        path: PathBuf,
    },
}

impl From<MergeError> for CliError {
    fn from(e: MergeError) -> Self {
        CliError::Usage(e.to_string())
    }
}

/// Reads DIR/results.json.
pub fn read(dir: &Path) -> Result<Results, MergeError> {
    if !dir.is_dir() {
        return Err(MergeError::NotADir {
            path: dir.to_path_buf(),
            why: if dir.exists() {
                "not a directory"
            } else {
                "no such directory"
            },
        });
    }
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => MergeError::NoResults { path: path.clone() },
        _ => MergeError::Read {
            path: path.clone(),
            message: e.to_string(),
        },
    })?;
    let doc: Results = serde_json::from_str(&text).map_err(|e| MergeError::Malformed {
        path: path.clone(),
        message: e.to_string(),
    })?;
    if doc.tool != TOOL {
        return Err(MergeError::Malformed {
            path,
            message: format!("its tool is {:?}, not {TOOL:?}", doc.tool),
        });
    }
    Ok(doc)
}

/// A record's identity: backend, rows, cols, density (parts per million), batch, kernel.
type Key = (String, usize, usize, i64, usize, String);

fn key(r: &Record) -> Key {
    (
        r.backend.clone(),
        r.rows,
        r.cols,
        density_ppm(r.density),
        r.batch,
        r.kernel.clone(),
    )
}

/// A density as a key, in parts per million, so that 0.9 and 0.900000001 meet.
fn density_ppm(d: f64) -> i64 {
    (d * 1e6).round() as i64
}

/// Merged results and what the merge noticed on the way.
pub struct Merged {
    /// The merged results; `merged_from` lists the sources with their counts.
    pub results: Results,
    /// Differences that do not stop a merge (hosts, device properties), one line each.
    pub notes: Vec<String>,
}

/// Merges `inputs` (each a result directory and its results.json), later replacing earlier.
/// `inputs` is not empty (the command line gives at least one DIR).
pub fn merge(inputs: Vec<(PathBuf, Results)>) -> Result<Merged, MergeError> {
    let mut inputs = inputs
        .into_iter()
        .map(|(dir, doc)| (dir.join("results.json"), dir, doc));
    let Some((first_path, first_dir, first)) = inputs.next() else {
        unreachable!("merge of no results");
    };
    let settings =
        serde_json::to_value(&first.settings).expect("settings serialize to a JSON object");
    let mut notes = Vec::new();
    // The device name of each backend, and the results.json that first named it.
    let mut device_of: BTreeMap<String, (String, PathBuf)> = BTreeMap::new();
    // The merged device list, in order of first appearance, each from the latest run with it.
    let mut devices: Vec<(DeviceEntry, PathBuf)> = Vec::new();
    let mut records: Vec<Record> = Vec::new();
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut sources = Vec::new();
    let mut host = (first.host.clone(), first_path.clone());
    let mut date = first.date.clone();
    let (version, mut settings_out) = (first.version.clone(), first.settings.clone());
    // The scale layout of each quantized value type, and the results.json that first had it.
    let mut scales_of: BTreeMap<String, (String, PathBuf)> = BTreeMap::new();
    for (path, dir, doc) in std::iter::once((first_path.clone(), first_dir, first)).chain(inputs) {
        let incompatible = |what: &str, a: String, b: String| MergeError::Incompatible {
            what: what.into(),
            first: first_path.clone(),
            first_value: a,
            other: path.clone(),
            other_value: b,
        };
        if doc.version != version {
            return Err(incompatible(
                "version",
                format!("{version:?}"),
                format!("{:?}", doc.version),
            ));
        }
        let these = serde_json::to_value(&doc.settings).expect("settings serialize");
        if let (Some(a), Some(b)) = (settings.as_object(), these.as_object()) {
            // `scales` is compared per value type below: a run without int4 is no conflict.
            for (field, va) in a.iter().filter(|(f, _)| f.as_str() != "scales") {
                let vb = b.get(field).unwrap_or(&serde_json::Value::Null);
                if va != vb {
                    return Err(incompatible(
                        &format!("settings.{field}"),
                        va.to_string(),
                        vb.to_string(),
                    ));
                }
            }
        }
        for (value, layout) in &doc.settings.scales {
            match scales_of.get(value) {
                Some((known, at)) if known != layout => {
                    return Err(MergeError::Incompatible {
                        what: format!("settings.scales.{value}"),
                        first: at.clone(),
                        first_value: format!("{known:?}"),
                        other: path.clone(),
                        other_value: format!("{layout:?}"),
                    })
                }
                Some(_) => {}
                None => {
                    scales_of.insert(value.clone(), (layout.clone(), path.clone()));
                }
            }
        }
        settings_out = doc.settings.clone();
        settings_out.scales = scales_of
            .iter()
            .map(|(v, (layout, _))| (v.clone(), layout.clone()))
            .collect();
        let named = doc
            .devices
            .iter()
            .map(|d| (&d.backend, &d.name))
            .chain(doc.results.iter().map(|r| (&r.backend, &r.device)));
        for (backend, name) in named {
            match device_of.get(backend) {
                Some((known, at)) if !same_device(known, name) => {
                    return Err(MergeError::Incompatible {
                        what: format!("the {backend} device"),
                        first: at.clone(),
                        first_value: format!("{known:?}"),
                        other: path.clone(),
                        other_value: format!("{name:?}"),
                    })
                }
                Some(_) => {}
                None => {
                    device_of.insert(backend.clone(), (name.clone(), path.clone()));
                }
            }
        }
        for d in &doc.devices {
            match devices.iter_mut().find(|(e, _)| e.backend == d.backend) {
                Some((e, at)) => {
                    if e.properties != d.properties {
                        notes.push(property_note(e, at, d, &path));
                    }
                    *e = d.clone();
                    *at = path.clone();
                }
                None => devices.push((d.clone(), path.clone())),
            }
        }
        if doc.host != host.0 {
            notes.push(format!(
                "note: the host differs: {:?} in {} but {:?} in {}; the merged results.json keeps the latter",
                host.0,
                host.1.display(),
                doc.host,
                path.display()
            ));
        }
        host = (doc.host.clone(), path.clone());
        date = date.max(doc.date.clone());
        let mut replaced = 0;
        let count = doc.results.len();
        for r in doc.results {
            match index.get(&key(&r)) {
                Some(&i) => {
                    records[i] = r;
                    replaced += 1;
                }
                None => {
                    index.insert(key(&r), records.len());
                    records.push(r);
                }
            }
        }
        sources.push(Source {
            dir: dir.display().to_string(),
            date: doc.date,
            host: doc.host,
            records: count,
            replaced,
            merged_from: doc.merged_from,
        });
    }
    sort_like_a_run(&mut records);
    Ok(Merged {
        results: Results {
            tool: TOOL.into(),
            version,
            date,
            host: host.0,
            settings: settings_out,
            devices: devices.into_iter().map(|(d, _)| d).collect(),
            merged_from: sources,
            results: records,
        },
        notes,
    })
}

/// "note: …" naming the properties of a device that differ between two runs.
fn property_note(a: &DeviceEntry, a_path: &Path, b: &DeviceEntry, b_path: &Path) -> String {
    let keys: std::collections::BTreeSet<&String> =
        a.properties.keys().chain(b.properties.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| a.properties.get(*k) != b.properties.get(*k))
        .map(|k| {
            let show = |v: Option<&String>| v.map_or("absent".into(), |v| format!("{v:?}"));
            format!(
                "{k}: {} / {}",
                show(a.properties.get(k)),
                show(b.properties.get(k))
            )
        })
        .collect();
    format!(
        "note: the {} device's properties differ between {} and {} ({}); the merged results.json keeps the latter's",
        a.backend,
        a_path.display(),
        b_path.display(),
        differ.join("; ")
    )
}

/// Sorts records the way one run writes them: by shape (in order of first appearance),
/// density (densest first), batch (smallest first), backend and kernel (in order of first
/// appearance). Stable.
fn sort_like_a_run(records: &mut [Record]) {
    fn first_seen<T: Eq + std::hash::Hash>(items: impl Iterator<Item = T>) -> HashMap<T, usize> {
        let mut seen = HashMap::new();
        for t in items {
            let n = seen.len();
            seen.entry(t).or_insert(n);
        }
        seen
    }
    let shapes = first_seen(records.iter().map(|r| (r.rows, r.cols)));
    let backends = first_seen(records.iter().map(|r| r.backend.clone()));
    let kernels = first_seen(records.iter().map(|r| r.kernel.clone()));
    records.sort_by_cached_key(|r| {
        (
            shapes[&(r.rows, r.cols)],
            std::cmp::Reverse(density_ppm(r.density)),
            r.batch,
            backends[&r.backend],
            kernels[&r.kernel],
        )
    });
}

/// "N records: cuda, wgpu; S shapes × densities 1, 0.7, 0.5".
fn describe(records: &[Record]) -> String {
    let mut backends: Vec<&str> = Vec::new();
    let mut shapes: Vec<(usize, usize)> = Vec::new();
    let mut densities: Vec<i64> = Vec::new();
    for r in records {
        if !backends.contains(&r.backend.as_str()) {
            backends.push(&r.backend);
        }
        if !shapes.contains(&(r.rows, r.cols)) {
            shapes.push((r.rows, r.cols));
        }
        if !densities.contains(&density_ppm(r.density)) {
            densities.push(density_ppm(r.density));
        }
    }
    densities.sort_by(|a, b| b.cmp(a));
    let densities: Vec<String> = densities
        .iter()
        .map(|d| format!("{}", *d as f64 / 1e6))
        .collect();
    format!(
        "{} records: {}; {} shape{} × densities {}",
        records.len(),
        if backends.is_empty() {
            "no backend".into()
        } else {
            backends.join(", ")
        },
        shapes.len(),
        if shapes.len() == 1 { "" } else { "s" },
        if densities.is_empty() {
            "-".into()
        } else {
            densities.join(", ")
        }
    )
}

/// `macko bench --merge DIR… --out OUT`.
pub fn run(dirs: &[PathBuf], out: &Path) -> Result<(), CliError> {
    println!(
        "merging {} result director{} into {} (nothing is measured)",
        dirs.len(),
        if dirs.len() == 1 { "y" } else { "ies" },
        out.display()
    );
    let mut inputs = Vec::with_capacity(dirs.len());
    for dir in dirs {
        inputs.push((dir.clone(), read(dir)?));
    }
    if let Ok(out_c) = out.canonicalize() {
        if dirs
            .iter()
            .any(|d| d.canonicalize().is_ok_and(|d| d == out_c))
        {
            return Err(MergeError::OutIsInput {
                path: out.to_path_buf(),
            }
            .into());
        }
    }
    let descriptions: Vec<String> = inputs
        .iter()
        .map(|(_, doc)| describe(&doc.results))
        .collect();
    let merged = merge(inputs)?;
    for ((dir, what), source) in dirs
        .iter()
        .zip(&descriptions)
        .zip(&merged.results.merged_from)
    {
        print!("{} ({}): {what}", dir.display(), source.date);
        if source.replaced > 0 {
            println!(", {} replacing earlier records", source.replaced);
        } else {
            println!();
        }
    }
    for n in &merged.notes {
        println!("{n}");
    }
    let replaced: usize = merged.results.merged_from.iter().map(|s| s.replaced).sum();
    println!(
        "merged: {}; {replaced} record{} replaced by a later directory",
        describe(&merged.results.results),
        if replaced == 1 { "" } else { "s" }
    );
    report::finish(&merged.results, Some(out))
}

/// The graphics APIs a wgpu device name may end with (" via Vulkan"), since labels named them.
const APIS: [&str; 6] = ["Vulkan", "Metal", "DX12", "GL", "WebGPU", "no API"];

/// A device name without its ` via API` ending (" via Vulkan"), and whether it had one.
fn without_api(name: &str) -> (&str, bool) {
    APIS.iter()
        .find_map(|api| name.strip_suffix(api)?.strip_suffix(" via "))
        .map_or((name, false), |bare| (bare, true))
}

/// Whether two records name the same device: equal names, or the same adapter where one name
/// was written before labels named the graphics API ("NVIDIA H100 80GB HBM3" and "NVIDIA H100
/// 80GB HBM3 via Vulkan"). The same adapter through two APIs is two devices.
fn same_device(a: &str, b: &str) -> bool {
    let ((bare_a, api_a), (bare_b, api_b)) = (without_api(a), without_api(b));
    a == b || (bare_a == bare_b && !(api_a && api_b))
}

#[cfg(test)]
mod tests {
    use super::super::record::{Host, Settings};
    use super::*;

    fn record(backend: &str, shape: (usize, usize), d: f64, kernel: &str, us: f64) -> Record {
        Record {
            backend: backend.into(),
            device: format!("{backend} device"),
            rows: shape.0,
            cols: shape.1,
            density: d,
            batch: 1,
            kernel: kernel.into(),
            bytes: 1000,
            effective_density: 1.0,
            median_us: us,
            min_us: f64::NAN,
            p10_us: us,
            p90_us: us,
            gbps: 1.0,
            fraction_of_ceiling: None,
            speedup_over_dense: Some(1.0),
            timer: "wall clock".into(),
            iters: 10,
        }
    }

    fn results(date: &str, records: Vec<Record>) -> Results {
        let mut devices: Vec<DeviceEntry> = Vec::new();
        for r in &records {
            if !devices.iter().any(|d| d.backend == r.backend) {
                devices.push(DeviceEntry {
                    backend: r.backend.clone(),
                    name: r.device.clone(),
                    properties: BTreeMap::new(),
                });
            }
        }
        Results {
            tool: TOOL.into(),
            version: "0.1.0".into(),
            date: date.into(),
            host: Host::here(),
            settings: Settings {
                iters: 10,
                warmup: 1,
                check_rows: 512,
                seed: 1,
                output: "f16".into(),
                rotation_bytes: 1 << 28,
                scales: BTreeMap::new(),
            },
            devices,
            merged_from: Vec::new(),
            results: records,
        }
    }

    fn case(backend: &str, shape: (usize, usize), d: f64, us: f64) -> Vec<Record> {
        ["macko", "dense", "csr", "stream"]
            .iter()
            .map(|k| record(backend, shape, d, k, us))
            .collect()
    }

    #[test]
    fn halves_by_density_merge_into_the_order_of_one_run() {
        let shapes = [(64, 32), (32, 64)];
        let run = |ds: &[f64], us: f64| -> Vec<Record> {
            let mut v = Vec::new();
            for &s in &shapes {
                for &d in ds {
                    for b in ["wgpu", "cpu"] {
                        v.extend(case(b, s, d, us));
                    }
                }
            }
            v
        };
        let whole = run(&[1.0, 0.7, 0.5, 0.3], 1.0);
        let a = results("2026-01-01", run(&[1.0, 0.7], 1.0));
        let b = results("2026-01-02", run(&[0.5, 0.3], 1.0));
        let m = merge(vec![("a".into(), a), ("b".into(), b)]).unwrap();
        assert_eq!(m.results.date, "2026-01-02");
        assert_eq!(m.results.merged_from.len(), 2);
        assert!(m.results.merged_from.iter().all(|s| s.replaced == 0));
        assert!(m.notes.is_empty(), "{:?}", m.notes);
        // NaN != NaN: compare the keys and times.
        let keys = |v: &[Record]| v.iter().map(|r| (key(r), r.median_us)).collect::<Vec<_>>();
        assert_eq!(keys(&m.results.results), keys(&whole));
    }

    #[test]
    fn a_later_record_replaces_an_earlier_one_in_place() {
        let a = results(
            "2026-01-01",
            [case("cpu", (8, 8), 1.0, 1.0), case("cpu", (8, 8), 0.5, 1.0)].concat(),
        );
        let mut later = case("cpu", (8, 8), 0.5, 2.0);
        later.truncate(1); // macko only
        let b = results("2026-01-01", later);
        let m = merge(vec![("a".into(), a), ("b".into(), b)]).unwrap();
        assert_eq!(m.results.results.len(), 8);
        assert_eq!(m.results.merged_from[1].replaced, 1);
        let times: Vec<f64> = m.results.results.iter().map(|r| r.median_us).collect();
        assert_eq!(times, [1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn different_settings_or_devices_are_refused_by_name() {
        let a = results("d", case("cpu", (8, 8), 1.0, 1.0));
        let mut b = results("d", case("cpu", (8, 8), 0.5, 1.0));
        b.settings.warmup = 3;
        let e = merge(vec![("a".into(), a.clone()), ("b".into(), b)])
            .err()
            .unwrap();
        assert!(
            matches!(&e, MergeError::Incompatible { what, first_value, other_value, .. }
                if what == "settings.warmup" && first_value == "1" && other_value == "3"),
            "{e}"
        );
        let mut c = results("d", case("cpu", (8, 8), 0.5, 1.0));
        c.results
            .iter_mut()
            .for_each(|r| r.device = "other cpu".into());
        c.devices[0].name = "other cpu".into();
        let e = merge(vec![("a".into(), a.clone()), ("c".into(), c)])
            .err()
            .unwrap();
        assert!(e.to_string().contains("the cpu device"), "{e}");
        // Another backend, another device: fine.
        let w = results("d", case("wgpu", (8, 8), 0.5, 1.0));
        let m = merge(vec![("a".into(), a), ("w".into(), w)]).unwrap();
        assert_eq!(m.results.devices.len(), 2);
    }

    #[test]
    fn quantized_runs_merge_where_their_scale_layouts_agree() {
        let quantized = |layouts: &[(&str, &str)], d: f64| {
            let mut recs = case("cpu", (8, 8), d, 1.0);
            for (v, _) in layouts {
                recs.push(record("cpu", (8, 8), d, &format!("macko-{v}"), 1.0));
                recs.push(record("cpu", (8, 8), d, &format!("dense-{v}"), 1.0));
            }
            let mut r = results("d", recs);
            r.settings.scales = layouts
                .iter()
                .map(|(v, l)| (v.to_string(), l.to_string()))
                .collect();
            r
        };
        // f16 only, then int8 per row, then int4 in groups of 64 (with int8 again): the union.
        let m = merge(vec![
            ("a".into(), quantized(&[], 1.0)),
            ("b".into(), quantized(&[("int8", "row")], 0.5)),
            (
                "c".into(),
                quantized(&[("int4", "G64"), ("int8", "row")], 0.3),
            ),
        ])
        .unwrap();
        let scales: Vec<(&str, &str)> = m
            .results
            .settings
            .scales
            .iter()
            .map(|(v, l)| (v.as_str(), l.as_str()))
            .collect();
        assert_eq!(scales, [("int4", "G64"), ("int8", "row")]);
        assert_eq!(m.results.results.len(), 4 + 6 + 8);
        // The quantized run first and the f16 run after it: no conflict either.
        let m = merge(vec![
            ("b".into(), quantized(&[("int8", "row")], 0.5)),
            ("a".into(), quantized(&[], 1.0)),
        ])
        .unwrap();
        assert_eq!(m.results.settings.scales.len(), 1);
        // int4 in groups of 64 and of 32 do not belong in one plot.
        let e = merge(vec![
            ("c".into(), quantized(&[("int4", "G64")], 0.3)),
            ("a".into(), quantized(&[], 1.0)),
            ("d".into(), quantized(&[("int4", "G32")], 0.5)),
        ])
        .err()
        .unwrap();
        assert!(
            matches!(&e, MergeError::Incompatible { what, first_value, other_value, .. }
                if what == "settings.scales.int4" && first_value == "\"G64\"" && other_value == "\"G32\""),
            "{e}"
        );
    }

    #[test]
    fn a_record_written_before_batches_reads_as_one_vector() {
        let mut a = results("d", case("cpu", (8, 8), 1.0, 1.0));
        a.results[0].batch = 4;
        let mut value = serde_json::to_value(&a).unwrap();
        for r in value["results"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("batch");
        }
        let back: Results = serde_json::from_value(value).unwrap();
        assert!(back.results.iter().all(|r| r.batch == 1));
        // Batch 4 and batch 1 of one case are two records, not one replacing the other.
        let mut b = results("d", case("cpu", (8, 8), 1.0, 2.0));
        b.results.iter_mut().for_each(|r| r.batch = 4);
        let m = merge(vec![("a".into(), back), ("b".into(), b)]).unwrap();
        assert_eq!(m.results.results.len(), 8);
        assert_eq!(m.results.merged_from[1].replaced, 0);
    }

    #[test]
    fn results_json_round_trips_with_nan_figures() {
        let a = results("d", case("cpu", (8, 8), 1.0, 1.0));
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains("\"min_us\":null"));
        let back: Results = serde_json::from_str(&text).unwrap();
        assert!(back.results.iter().all(|r| r.min_us.is_nan()));
        assert_eq!(back.results.len(), a.results.len());
    }

    #[test]
    fn a_name_without_its_api_is_the_same_device() {
        assert!(same_device(
            "NVIDIA H100 80GB HBM3",
            "NVIDIA H100 80GB HBM3 via Vulkan"
        ));
        assert!(same_device(
            "llvmpipe (LLVM 15.0.6, 256 bits) via GL",
            "llvmpipe (LLVM 15.0.6, 256 bits)"
        ));
        assert!(!same_device("llvmpipe via GL", "llvmpipe via Vulkan"));
        assert!(!same_device("NVIDIA H100 80GB HBM3", "NVIDIA H200"));
    }
}
