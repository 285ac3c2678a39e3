//! `macko bench --sparse-inputs`: the products with a sparse input measured on the CPU over one
//! small case, every (format, product) in sparse_inputs.csv with the bytes the product must
//! move (which follow nnz(x): fewer for a sparser x), and the arguments it refuses.

mod common;

use std::path::Path;

use common::{macko, stderr, stdout, Arg, TempDir};

/// `macko bench --sparse-inputs X --backend cpu` over one 300×200 case at d = 0.1 into `out`;
/// returns the CSV's rows as (format, product, bytes, x density) after checking its header.
fn run(out: &Path, x: &str) -> Vec<(String, String, u64, f64)> {
    let args: [Arg<'_>; 15] = [
        &"bench",
        &"--sparse-inputs",
        &x,
        &"--backend",
        &"cpu",
        &"--shapes",
        &"300x200",
        &"--densities",
        &"0.1",
        &"--iters",
        &"3",
        &"--warmup",
        &"1",
        &"--out",
        &out,
    ];
    let o = macko(&args);
    let text = stdout(&o);
    assert!(o.status.success(), "bench failed:\n{text}{}", stderr(&o));
    assert!(text.contains("×full A·x"), "no medians table:\n{text}");
    let csv = std::fs::read_to_string(out.join("sparse_inputs.csv")).expect("sparse_inputs.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
    };
    let (format, product, bytes, xd, us) = (
        col("format"),
        col("product"),
        col("bytes"),
        col("x_density"),
        col("median_us"),
    );
    // cuSPARSE is CUDA's: on the CPU its column is there and empty, and no row is its own.
    let over_cusparse = col("over_cusparse");
    assert!(
        text.contains("×cuSPARSE"),
        "no cuSPARSE column in the medians:\n{text}"
    );
    lines
        .map(|l| {
            // The device name is quoted and holds no comma on this machine's CPU name.
            let f: Vec<&str> = l.split(',').collect();
            let t: f64 = f[us].parse().expect("median_us");
            assert_eq!(f[over_cusparse], "", "a cuSPARSE ratio on the CPU in {l}");
            assert_ne!(f[format], "cusparse", "a cuSPARSE row on the CPU: {l}");
            assert!(t > 0.0 && t.is_finite(), "time {t} in {l}");
            (
                f[format].to_string(),
                f[product].to_string(),
                f[bytes].parse().expect("bytes"),
                f[xd].parse().expect("x_density"),
            )
        })
        .collect()
}

#[test]
fn every_format_and_product_is_measured_and_bytes_follow_nnz_x() {
    let dir = TempDir::new("sparse-inputs");
    let sparse = run(&dir.path("sparse"), "0.05");
    let denser = run(&dir.path("denser"), "0.5");
    for rows in [&sparse, &denser] {
        for format in ["csr", "csr-homogeneous", "macko"] {
            for product in ["sparse-x", "transposed", "transposed-sparse-x"] {
                assert_eq!(
                    rows.iter()
                        .filter(|r| (r.0.as_str(), r.1.as_str()) == (format, product))
                        .count(),
                    1,
                    "{format} {product} in {rows:?}"
                );
            }
        }
    }
    // A sparser x needs fewer bytes for every product: the transposed ones read fewer rows (a
    // tenth as many x entries: less than half the bytes), A·x with x sparse fewer values (its
    // column indices or gap codes are read whatever x holds).
    for (s, d) in sparse.iter().zip(&denser) {
        assert_eq!((&s.0, &s.1), (&d.0, &d.1));
        assert!((s.3, d.3) == (0.05, 0.5), "x densities {} {}", s.3, d.3);
        if s.1 == "sparse-x" {
            assert!(s.2 < d.2, "{s:?} against {d:?}");
        } else {
            assert!(2 * s.2 < d.2, "{s:?} against {d:?}");
        }
    }
}

#[test]
fn bad_sparse_input_arguments_are_refused() {
    for (args, says) in [
        (
            vec!["--sparse-inputs", "1.5"],
            "x density 1.5 is outside (0, 1]",
        ),
        (
            vec!["--sparse-inputs", "0"],
            "x density 0 is outside (0, 1]",
        ),
        (
            vec!["--sparse-inputs", "0.1", "--batch", "2"],
            "cannot be used with",
        ),
        (
            vec!["--sparse-inputs", "0.1", "--sparse24"],
            "cannot be used with",
        ),
    ] {
        let mut all: Vec<Arg<'_>> = vec![&"bench", &"--backend", &"cpu"];
        all.extend(args.iter().map(|a| a as Arg<'_>));
        let o = macko(&all);
        assert!(!o.status.success(), "{args:?} passed:\n{}", stdout(&o));
        assert!(
            stderr(&o).contains(says),
            "{args:?}: stderr lacks {says:?}:\n{}",
            stderr(&o)
        );
    }
}
