//! End-to-end tests of `macko bench` on the CPU: `bench --merge`, two small runs merged into
//! one set of results and plots, and the merges it refuses; `bench --batch`: records, summary
//! and plots per batch size, and the batch sizes it refuses; and `bench --values`: the quantized
//! kernels' records, bytes and table, the scale groups it refuses, and a backend without
//! quantized kernels skipped with one note.

mod common;

use std::path::Path;

use common::{assert_fails, macko, stderr, stdout, Arg, TempDir};

use macko::{
    synthetic, MackoMatrix, QuantBits, QuantDenseMatrix, QuantMackoMatrix, Quantization,
    ScaleLayout,
};

/// `macko bench` on the CPU over two tiny shapes at `densities`, into `out`; returns stdout.
fn cpu_bench(out: &Path, densities: &str) -> String {
    let o = macko(&[
        &"bench",
        &"--backend",
        &"cpu",
        &"--shapes",
        &"64x96,96x64",
        &"--densities",
        &densities,
        &"--iters",
        &"3",
        &"--warmup",
        &"1",
        &"--out",
        &out,
    ]);
    assert!(
        o.status.success(),
        "bench failed:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    // Without --values: no quantized kernel, table or setting, as before they existed.
    let text = stdout(&o);
    assert!(!text.contains("-int") && !text.contains("values"), "{text}");
    let json = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    assert!(!json.contains("-int") && !json.contains("scales"));
    text
}

/// The data rows of a results.csv, header left out.
fn csv_rows(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("results.csv");
    text.lines().skip(1).map(str::to_owned).collect()
}

/// The rows of the summary table on stdout: (backend, batch, density, shapes).
fn summary_rows(out: &str) -> Vec<(String, usize, String, usize)> {
    out.lines()
        .skip_while(|l| !l.starts_with("backend   B density"))
        .skip(1)
        .take_while(|l| !l.starts_with('('))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].into(),
                f[1].parse().expect("batch"),
                f[2].into(),
                f[3].parse().expect("shape count"),
            )
        })
        .collect()
}

/// Two results.csv rows with the same fields, byte for byte: results.json is read back with
/// serde_json's `float_roundtrip`, so every figure survives the merge exactly.
fn same_rows(a: &[String], b: &[String]) -> bool {
    a == b
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read json")).expect("json")
}

#[test]
fn bench_merge_combines_runs_without_measuring() {
    let dir = TempDir::new("merge");
    let (a, b, out) = (dir.path("a"), dir.path("b"), dir.path("merged"));
    cpu_bench(&a, "1.0,0.7");
    cpu_bench(&b, "0.5,0.1");
    let o = macko(&[&"bench", &"--merge", &a, &"--merge", &b, &"--out", &out]);
    assert!(
        o.status.success(),
        "merge failed:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    let text = stdout(&o);
    assert!(text.contains("nothing is measured"), "{text}");
    assert!(
        text.contains("0 records replaced by a later directory"),
        "{text}"
    );
    // Every row of both runs, densest first as one run writes them.
    let (rows_a, rows_b, merged) = (
        csv_rows(&a.join("results.csv")),
        csv_rows(&b.join("results.csv")),
        csv_rows(&out.join("results.csv")),
    );
    assert_eq!(merged.len(), rows_a.len() + rows_b.len());
    let mut union = [rows_a.clone(), rows_b].concat();
    let mut sorted = merged.clone();
    union.sort();
    sorted.sort();
    assert!(same_rows(&sorted, &union), "{sorted:#?}\n{union:#?}");
    let density_of = |row: &str| row.split(',').nth(4).expect("density").to_owned();
    assert_eq!(density_of(&merged[0]), "1");
    // The summary: cpu at four densities, two shapes each.
    let summary = summary_rows(&text);
    let densities: Vec<&str> = summary.iter().map(|(_, _, d, _)| d.as_str()).collect();
    assert_eq!(densities, ["1.00", "0.70", "0.50", "0.10"], "{text}");
    assert!(
        summary
            .iter()
            .all(|(b, batch, _, n)| b == "cpu" && *batch == 1 && *n == 2),
        "{text}"
    );
    // results.json: the records, the settings and devices of the runs, and where they came from.
    let json = read_json(&out.join("results.json"));
    assert_eq!(
        json["results"].as_array().expect("results").len(),
        merged.len()
    );
    assert_eq!(json["settings"]["iters"], 3);
    assert_eq!(json["devices"][0]["backend"], "cpu");
    let sources = json["merged_from"].as_array().expect("merged_from");
    assert_eq!(sources.len(), 2);
    assert_eq!(sources[1]["records"], rows_a.len() as u64);
    assert_eq!(sources[1]["replaced"], 0);
    for plot in [
        "speedup_cpu.svg",
        "effective_density.svg",
        "ceiling_cpu.svg",
    ] {
        let svg = std::fs::read_to_string(out.join(plot)).expect(plot);
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{plot}");
        assert!(text.contains(plot), "{plot} not named on stdout");
    }

    // A later directory's records replace an earlier one's of the same key: merging the merged
    // results with `b` again replaces b's rows and adds none.
    let again = dir.path("again");
    let o = macko(&[&"bench", &"--merge", &out, &"--merge", &b, &"--out", &again]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!(
            "{} records replaced by a later directory",
            csv_rows(&b.join("results.csv")).len()
        )),
        "{}",
        stdout(&o)
    );
    assert!(same_rows(&csv_rows(&again.join("results.csv")), &merged));
}

#[test]
fn bench_merge_refuses_what_cannot_be_merged() {
    let dir = TempDir::new("merge-bad");
    let (a, b, out) = (dir.path("a"), dir.path("b"), dir.path("merged"));
    cpu_bench(&a, "1.0");
    cpu_bench(&b, "0.5");
    let merge = |x: &Path, y: &Path, out: &Path| {
        macko(&[&"bench", &"--merge", &x, &"--merge", &y, &"--out", &out])
    };

    let missing = dir.path("missing");
    assert_fails(
        &merge(&a, &missing, &out),
        &["missing", "no such directory"],
    );
    let empty = dir.path("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    assert_fails(
        &merge(&a, &empty, &out),
        &["empty/results.json", "no such file"],
    );
    let broken = dir.path("broken");
    std::fs::create_dir_all(&broken).expect("mkdir");
    std::fs::write(
        broken.join("results.json"),
        "{\"tool\": \"macko bench\", \"results\": [",
    )
    .expect("write");
    assert_fails(
        &merge(&a, &broken, &out),
        &["broken/results.json", "not the results.json"],
    );
    assert_fails(&merge(&a, &b, &b), &["also one of the --merge directories"]);

    // Another setting: named, with both values and both files.
    let other = dir.path("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    let mut json = read_json(&b.join("results.json"));
    json["settings"]["iters"] = 7.into();
    std::fs::write(other.join("results.json"), json.to_string()).expect("write");
    assert_fails(
        &merge(&a, &other, &out),
        &[
            "settings.iters is 3",
            "but 7",
            "a/results.json",
            "other/results.json",
        ],
    );
    // Another device on the same backend.
    json["settings"]["iters"] = 3.into();
    json["devices"][0]["name"] = "another cpu".into();
    std::fs::write(other.join("results.json"), json.to_string()).expect("write");
    assert_fails(
        &merge(&a, &other, &out),
        &["the cpu device", "\"another cpu\""],
    );
    // Measuring flags do not go with --merge, and --merge needs --out.
    assert_fails(
        &macko(&[&"bench", &"--merge", &a, &"--iters", &"5", &"--out", &out]),
        &["cannot be used with"],
    );
    assert_fails(&macko(&[&"bench", &"--merge", &a]), &["--out"]);
    assert!(!out.exists(), "a refused merge wrote {}", out.display());
}

#[test]
fn bench_batches_measure_every_case_once_per_batch() {
    let dir = TempDir::new("batch");
    let out = dir.path("out");
    let o = macko(&[
        &"bench",
        &"--quick",
        &"--backend",
        &"cpu",
        &"--batch",
        &"1,3",
        &"--iters",
        &"3",
        &"--warmup",
        &"1",
        &"--out",
        &out,
    ]);
    let text = stdout(&o);
    assert!(o.status.success(), "bench failed:\n{text}{}", stderr(&o));
    let json = read_json(&out.join("results.json"));
    let records = json["results"].as_array().expect("results");
    // Every (shape, density, kernel) of one batch is measured with the other too.
    let key = |r: &serde_json::Value, batch: u64| {
        (
            r["rows"].to_string(),
            r["cols"].to_string(),
            r["density"].to_string(),
            r["kernel"].to_string(),
            batch,
        )
    };
    let with = |batch: u64| {
        let mut v: Vec<_> = records
            .iter()
            .filter(|r| r["batch"] == batch)
            .map(|r| key(r, 0))
            .collect();
        v.sort();
        v
    };
    let (ones, threes) = (with(1), with(3));
    assert_eq!(
        ones.len() + threes.len(),
        records.len(),
        "only batches 1 and 3"
    );
    assert_eq!(ones, threes);
    // 3 quick shapes × 5 densities × (macko, dense, csr).
    assert!(
        ones.iter().filter(|k| k.3 == "\"macko\"").count() == 15,
        "{ones:?}"
    );
    // Bytes of three vectors: the matrix once, X and Y three times.
    let macko_bytes = |batch: u64| {
        records
            .iter()
            .find(|r| {
                r["batch"] == batch
                    && r["kernel"] == "macko"
                    && r["rows"] == 1024
                    && r["cols"] == 1024
                    && r["density"] == 0.5
            })
            .and_then(|r| r["bytes"].as_u64())
            .expect("macko record")
    };
    assert_eq!(macko_bytes(3) - macko_bytes(1), 2 * 2 * (1024 + 1024));
    // results.csv: the batch column last, one row per record.
    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    assert!(
        csv.lines()
            .next()
            .is_some_and(|h| h.ends_with(",iters,batch")),
        "{csv}"
    );
    assert_eq!(csv_rows(&out.join("results.csv")).len(), records.len());
    // The summary: each density once per batch, then the few-token tables.
    let summary = summary_rows(&text);
    assert_eq!(summary.len(), 10, "{text}");
    assert!(
        summary.iter().filter(|(_, b, _, _)| *b == 3).count() == 5,
        "{text}"
    );
    assert!(
        text.contains("MACKO over the dense baseline, same B"),
        "{text}"
    );
    assert!(text.contains("MACKO time(B) / time(1)"), "{text}");
    for plot in [
        "speedup_cpu.svg",
        "speedup_cpu_b3.svg",
        "speedup_by_batch_cpu.svg",
        "ceiling_cpu_b3.svg",
        "effective_density.svg",
    ] {
        assert!(text.contains(plot), "{plot} not written:\n{text}");
    }
}

#[test]
fn bench_refuses_a_batch_outside_one_to_64() {
    for (batch, says) in [
        ("0", "batch 0 is outside 1..=64"),
        ("2,65", "batch 65 is outside 1..=64"),
        ("x", "\"x\" is not a whole number"),
    ] {
        let o = macko(&[&"bench", &"--backend", &"cpu", &"--batch", &batch]);
        assert_fails(&o, &["--batch", says]);
    }
}

/// `macko bench --values f16,int8,int4` on the CPU over one tiny case, plus `extra` arguments,
/// into `out`; returns stdout.
fn quant_bench(out: &Path, extra: &[&str]) -> String {
    let mut args: Vec<Arg<'_>> = vec![
        &"bench",
        &"--backend",
        &"cpu",
        &"--shapes",
        &"64x96",
        &"--densities",
        &"0.5",
        &"--iters",
        &"2",
        &"--warmup",
        &"1",
        &"--values",
        &"f16,int8,int4",
        &"--out",
        &out,
    ];
    args.extend(extra.iter().map(|a| a as Arg<'_>));
    let o = macko(&args);
    let text = stdout(&o);
    assert!(o.status.success(), "bench failed:\n{text}{}", stderr(&o));
    text
}

/// The `kernel` → `bytes` of every record of a results.json.
fn bytes_by_kernel(json: &serde_json::Value) -> Vec<(String, u64)> {
    json["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let kernel = r["kernel"].as_str().expect("kernel").to_owned();
            (kernel, r["bytes"].as_u64().expect("bytes"))
        })
        .collect()
}

#[test]
fn bench_values_measure_quantized_macko_and_dense_kernels() {
    let dir = TempDir::new("values");
    let out = dir.path("out");
    let text = quant_bench(&out, &[]);
    let json = read_json(&out.join("results.json"));
    let bytes = bytes_by_kernel(&json);
    let kernels: Vec<&str> = bytes.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kernels,
        [
            "macko",
            "dense",
            "csr",
            "macko-int8",
            "dense-int8",
            "macko-int4",
            "dense-int4",
            "stream"
        ]
    );
    let of = |k: &str| {
        bytes
            .iter()
            .find(|(name, _)| name == k)
            .map(|(_, b)| *b)
            .expect("record")
    };
    // Each the quantized matrix's bytes plus x and y: the bench's own matrix (seed 1 for the
    // first case), quantized as the defaults say (int8 per row, int4 per 64 values).
    let dense = synthetic::pruned_matrix(64, 96, 0.5, 1).expect("matrix");
    let pruned = MackoMatrix::from_dense(&dense).expect("macko");
    let vectors = 2 * (64 + 96);
    for (bits, scales, name) in [
        (QuantBits::Int8, ScaleLayout::PerRow, "int8"),
        (QuantBits::Int4, ScaleLayout::PerGroup(64), "int4"),
    ] {
        let q = Quantization { bits, scales };
        let qm = QuantMackoMatrix::quantize(&pruned, q).expect("quantize");
        let qd = QuantDenseMatrix::quantize(&dense, q).expect("quantize");
        assert_eq!(of(&format!("macko-{name}")), qm.bytes() + vectors);
        assert_eq!(of(&format!("dense-{name}")), qd.bytes() + vectors);
    }
    assert!(of("macko-int4") < of("macko-int8") && of("macko-int8") < of("macko"));
    assert!(of("dense-int4") < of("dense-int8") && of("dense-int8") < of("dense"));
    // Every quantized record has its speedup over the same dense f16 baseline and its ceiling.
    for r in json["results"].as_array().expect("results") {
        if r["kernel"].as_str().is_some_and(|k| k.contains("-int")) {
            assert!(r["speedup_over_dense"].as_f64().is_some_and(|s| s > 0.0));
            assert!(r["fraction_of_ceiling"].as_f64().is_some_and(|f| f > 0.0));
            let eff = r["effective_density"].as_f64().expect("effective density");
            assert!(eff > 0.0 && eff < 1.0, "{r}");
        }
    }
    assert_eq!(json["settings"]["scales"]["int8"], "row");
    assert_eq!(json["settings"]["scales"]["int4"], "G64");
    // The case line and the quantized table.
    assert!(
        text.contains(" macko-int8=") && text.contains(" dense-int4="),
        "{text}"
    );
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("backend   B density values"))
        .skip(1)
        .take_while(|l| !l.starts_with('('))
        .collect();
    assert_eq!(table.len(), 2, "{text}");
    assert!(
        table[0].contains(" int8 ") && table[1].contains(" int4 "),
        "{text}"
    );
    // The f16 table is the one of a run without --values.
    assert_eq!(summary_rows(&text).len(), 1, "{text}");
    for plot in ["speedup_cpu.svg", "ceiling_cpu.svg"] {
        let svg = std::fs::read_to_string(out.join(plot)).expect(plot);
        assert!(
            svg.contains("MACKO int8") && svg.contains("dense int4"),
            "{plot}"
        );
    }

    // --group sets the group of both widths.
    let grouped = dir.path("grouped");
    quant_bench(&grouped, &["--group", "32"]);
    let json = read_json(&grouped.join("results.json"));
    assert_eq!(json["settings"]["scales"]["int8"], "G32");
    assert_eq!(json["settings"]["scales"]["int4"], "G32");
    let q = Quantization {
        bits: QuantBits::Int8,
        scales: ScaleLayout::PerGroup(32),
    };
    let qm = QuantMackoMatrix::quantize(&pruned, q).expect("quantize");
    let got = bytes_by_kernel(&json)
        .into_iter()
        .find(|(k, _)| k == "macko-int8")
        .map(|(_, b)| b);
    assert_eq!(got, Some(qm.bytes() + vectors));

    // Runs of other groups do not merge; the same groups do, kernels and all.
    let merged = dir.path("merged");
    let o = macko(&[
        &"bench", &"--merge", &out, &"--merge", &grouped, &"--out", &merged,
    ]);
    assert_fails(&o, &["settings.scales.int4", "\"G64\"", "\"G32\""]);
    let o = macko(&[
        &"bench", &"--merge", &out, &"--merge", &out, &"--out", &merged,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        csv_rows(&merged.join("results.csv")),
        csv_rows(&out.join("results.csv"))
    );
}

#[test]
fn bench_refuses_a_scale_group_the_format_refuses() {
    for group in ["12", "0", "4", "33554432"] {
        let o = macko(&[
            &"bench",
            &"--backend",
            &"cpu",
            &"--values",
            &"int4",
            &"--group",
            &group,
        ]);
        assert_fails(
            &o,
            &[
                "--group",
                "a group must hold a multiple of 8 values, from 8 to",
            ],
        );
    }
    let o = macko(&[
        &"bench",
        &"--backend",
        &"cpu",
        &"--group",
        &"x",
        &"--values",
        &"int8",
    ]);
    assert_fails(&o, &["--group", "\"x\" is not a whole number"]);
    let o = macko(&[&"bench", &"--backend", &"cpu", &"--group", &"16"]);
    assert_fails(&o, &["--group 16", "--values names neither"]);
    let o = macko(&[&"bench", &"--backend", &"cpu", &"--values", &"int9"]);
    assert_fails(&o, &["--values", "int9"]);
}

#[test]
fn every_backend_measures_the_quantized_kernels() {
    let dir = TempDir::new("values-wgpu");
    let out = dir.path("out");
    let o = macko(&[
        &"bench",
        &"--backend",
        &"wgpu,cpu",
        &"--shapes",
        &"64x96",
        &"--densities",
        &"1.0,0.5",
        &"--iters",
        &"2",
        &"--warmup",
        &"1",
        &"--values",
        &"int8",
        &"--out",
        &out,
    ]);
    let text = stdout(&o);
    assert!(o.status.success(), "bench failed:\n{text}{}", stderr(&o));
    let json = read_json(&out.join("results.json"));
    let records = json["results"].as_array().expect("results");
    let count = |backend: &str, kernel: &str| {
        records
            .iter()
            .filter(|r| r["backend"] == backend && r["kernel"] == kernel)
            .count()
    };
    assert_eq!(count("cpu", "macko-int8"), 2);
    assert_eq!(count("cpu", "dense-int8"), 2);
    let devices = json["devices"].as_array().expect("devices");
    if !devices.iter().any(|d| d["backend"] == "wgpu") {
        return; // no wgpu here (no adapter, or not compiled in): only the CPU part is checked
    }
    // wgpu multiplies quantized matrices too: its int8 kernels are measured like the CPU's,
    // and no backend is skipped for them.
    assert_eq!(count("wgpu", "macko"), 2, "{text}");
    assert_eq!(count("wgpu", "macko-int8"), 2, "{text}");
    assert_eq!(count("wgpu", "dense-int8"), 2, "{text}");
    assert!(!text.contains("not measured in this run"), "{text}");
}
