//! A newcomer's first hour (issue 29): small inputs that slipped through. An empty shape or
//! matrix is refused naming the value, `info` claims no `MACKO_BACKEND` override that is not
//! there, and `convert`'s output gets the mode any new file would.

mod common;

use std::process::{Command, Output};

use common::{assert_one_line_error, macko, stderr, stdout, write_f32, TempDir, BIN};

#[test]
fn bench_refuses_an_empty_shape_naming_it() {
    for (shape, says) in [
        ("0x10", "--shapes 0x10: rows must be from 1"),
        ("10x0", "--shapes 10x0: columns must be from 1"),
    ] {
        let o = macko(&[&"bench", &"--backend", &"cpu", &"--shapes", &shape]);
        assert_one_line_error(&o, &[says]);
        assert!(!stdout(&o).contains("ceiling"), "{}", stdout(&o));
    }
}

#[test]
fn demo_refuses_an_empty_matrix_or_no_iterations_naming_the_value() {
    for (args, says) in [
        (["--rows", "0"], "--rows 0: must be at least 1"),
        (["--cols", "0"], "--cols 0: must be at least 1"),
        (["--iters", "0"], "--iters 0"),
    ] {
        let o = macko(&[&"demo", &"--backend", &"cpu", &args[0], &args[1]]);
        assert_one_line_error(&o, &[says]);
        let out = stdout(&o);
        assert!(!out.contains("inf") && !out.contains("NaN"), "{out}");
    }
}

/// `macko info` with `MACKO_BACKEND` set to `value`, or removed.
fn info(value: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("info");
    match value {
        Some(v) => cmd.env("MACKO_BACKEND", v),
        None => cmd.env_remove("MACKO_BACKEND"),
    };
    cmd.output().expect("run the macko binary")
}

#[test]
fn info_names_the_backend_variable_only_when_it_chose() {
    let unset = info(None);
    assert_eq!(unset.status.code(), Some(0), "{}", stderr(&unset));
    let out = stdout(&unset);
    assert!(out.contains("selected: "), "{out}");
    assert!(
        !out.contains("overrides") && !out.contains("MACKO_BACKEND"),
        "{out}"
    );
    let set = info(Some("cpu"));
    let out = stdout(&set);
    assert!(out.contains("(MACKO_BACKEND=cpu chose it)"), "{out}");
}

/// The permission bits of `path`.
#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("output exists")
        .permissions()
        .mode()
        & 0o777
}

#[cfg(unix)]
#[test]
fn convert_output_gets_the_mode_of_a_new_file_under_the_umask() {
    let dir = TempDir::new("mode");
    let input = dir.path("in.safetensors");
    let values: Vec<f32> = (0..64).map(|i| i as f32 - 31.5).collect();
    write_f32(&input, &[("layer.weight", vec![8, 8], values)]);
    for (umask, want) in [("022", 0o644), ("027", 0o640)] {
        let output = dir.path(&format!("out-{umask}.safetensors"));
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
            .arg(BIN)
            .arg("convert")
            .arg(&input)
            .arg(&output)
            .output()
            .expect("run sh");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(
            mode(&output),
            want,
            "umask {umask}: mode {:o}",
            mode(&output)
        );
    }
}

/// Every `%` of bench's output is a labelled share of the ceiling: "(N% of ceiling)" in a case
/// line, above 100 with its reason beside it, or a summary column headed "%ceil" whose footnote
/// says what it is.
#[test]
fn bench_labels_every_percentage_and_explains_any_above_100() {
    let o = macko(&[
        &"bench",
        &"--backend",
        &"cpu",
        &"--shapes",
        &"64x64",
        &"--densities",
        &"1,0.5",
        &"--iters",
        &"3",
        &"--warmup",
        &"1",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}\n{out}", stderr(&o));
    assert!(
        out.contains("%ceil: a kernel's GB/s over its own bytes"),
        "{out}"
    );
    for line in out
        .lines()
        .filter(|l| l.starts_with("cpu ") && l.contains('×'))
    {
        for (i, _) in line.match_indices('%') {
            let after = &line[i..];
            assert!(
                after.starts_with("% of ceiling"),
                "unlabelled % in {line:?}"
            );
            let percent: String = line[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_digit())
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let above = percent.parse::<u32>().is_ok_and(|p| p > 100);
            assert!(
                !above || after.starts_with("% of ceiling, above it: "),
                "{line:?}"
            );
        }
    }
    let summary = out
        .lines()
        .skip_while(|l| !l.starts_with("backend"))
        .skip(1);
    for row in summary.filter(|l| l.starts_with("cpu ")) {
        for cell in row.split_whitespace().rev().take(2) {
            let above = cell
                .trim_end_matches('*')
                .parse::<f64>()
                .is_ok_and(|p| p > 100.0);
            assert_eq!(above, cell.ends_with('*'), "{row:?}");
        }
    }
}
