//! Inputs a hostile user could give the `macko` command (issue 27): tiny checkpoints whose
//! shapes ask for terabytes, converted files that claim huge matrices, tensor names holding
//! newlines and terminal escapes, and bench arguments that measure nothing or cannot be held.
//! Each must end in a one-line error and exit status 1, with nothing left behind.

#[path = "../../tests/common/checkpoint_fuzz.rs"]
mod checkpoint_fuzz;
mod common;

use std::path::Path;

use checkpoint_fuzz::RawTensor;
use common::{assert_one_line_error, macko, stderr, stdout, write_f32, TempDir};
use rand::SeedableRng;

use macko::format::container;
use macko::half::f16;
use macko::MackoMatrix;

#[test]
fn tiny_checkpoints_with_huge_shapes_are_refused_before_any_work() {
    let dir = TempDir::new("shapes");
    let output = dir.path("out.safetensors");
    let cases: [(&str, Vec<usize>, &[&str]); 5] = [
        // The 91-byte reproducer: 2^40 rows of no column aborted on an 8 TiB allocation.
        (
            "rows40",
            vec![1 << 40, 0],
            &["rows 1099511627776 exceed 4294967295"],
        ),
        // 2^62 rows panicked (capacity overflow).
        (
            "rows62",
            vec![1 << 62, 0],
            &["rows 4611686018427387904 exceed"],
        ),
        (
            "cols40",
            vec![0, 1 << 40],
            &["columns 1099511627776 exceed"],
        ),
        // 2^26 rows fit u32 but took 1 GB and wrote 256 MiB from 86 bytes.
        (
            "rows26",
            vec![1 << 26, 0],
            &["67108864×0 holds 0 elements", "at most 65536 more rows"],
        ),
        ("rows65537", vec![65537, 0], &["65537×0", "at most 65536"]),
    ];
    for (file, shape, needles) in cases {
        let input = dir.path(&format!("{file}.safetensors"));
        write_f32(&input, &[("z.weight", shape.clone(), Vec::new())]);
        let before = dir.files();
        let o = macko(&[&"convert", &input, &output]);
        let mut all = vec![file, "tensor `z.weight`"];
        all.extend_from_slice(needles);
        assert_one_line_error(&o, &all);
        assert_eq!(dir.files(), before, "{shape:?} left something behind");
    }
    // At the bound, an empty matrix converts: its 65536 row offsets cost 256 KiB.
    let input = dir.path("edge.safetensors");
    write_f32(&input, &[("z.weight", vec![65536, 0], Vec::new())]);
    let o = macko(&[&"convert", &input, &output]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn pruning_that_would_empty_every_row_is_refused() {
    let dir = TempDir::new("prune");
    let input = dir.path("in.safetensors");
    let w = |n: usize| (0..n).map(|i| i as f32 + 1.0).collect::<Vec<_>>();
    write_f32(
        &input,
        &[("wide", vec![2, 64], w(128)), ("narrow", vec![3, 4], w(12))],
    );
    let output = dir.path("out.safetensors");
    let before = dir.files();
    for density in ["1e-300", "0.2"] {
        let o = macko(&[&"convert", &input, &output, &"--prune-to", &density]);
        assert_one_line_error(
            &o,
            &[
                "tensor `narrow`",
                "keeps ⌊density·4⌋ = 0 of the 4 weights",
                "1/4",
            ],
        );
        assert_eq!(dir.files(), before);
    }
    // 1/4 keeps one weight of each row of the narrowest matrix: accepted.
    let o = macko(&[&"convert", &input, &output, &"--prune-to", &"0.25"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A valid MACKO file of one row and `cols` columns holding a single entry: a few hundred
/// bytes, whatever `cols` claims.
fn claimed_wide_matrix(path: &Path, cols: usize) {
    let mut values = vec![f16::ZERO; 8];
    values[0] = f16::from_f32(1.5);
    let m = MackoMatrix::from_parts(1, cols, vec![0, 1], values, vec![0; 4]).expect("valid");
    container::save(path, &[("w", (&m).into())]).expect("save");
}

#[test]
fn verify_never_decodes_a_claimed_shape_to_dense() {
    let dir = TempDir::new("verify");
    let file = dir.path("wide.safetensors");
    claimed_wide_matrix(&file, 1 << 45);
    assert!(std::fs::metadata(&file).expect("stat").len() < 1000);
    // Without a source: the structure is checked, nothing decoded.
    let o = macko(&[&"verify", &file]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("1×35184372088832"), "{}", stdout(&o));
    // With a source of another shape: the shapes differ, and nothing was decoded to find out
    // (2^45 columns aborted on a 64 TiB allocation).
    let source = dir.path("source.safetensors");
    write_f32(&source, &[("w", vec![1, 4], vec![1.5, 0.0, 0.0, 0.0])]);
    let o = macko(&[&"verify", &file, &"--against", &source]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the source is 1×4, the stored matrix 1×35184372088832"),
        "{}",
        stderr(&o)
    );
    // Compared row by row, an equal source still passes and a different element is named.
    let narrow = dir.path("narrow.safetensors");
    claimed_wide_matrix(&narrow, 4);
    let o = macko(&[&"verify", &narrow, &"--against", &source]);
    assert!(o.status.success(), "{}", stderr(&o));
    let other = dir.path("other.safetensors");
    write_f32(&other, &[("w", vec![1, 4], vec![1.5, 0.0, 2.0, 0.0])]);
    let o = macko(&[&"verify", &narrow, &"--against", &other]);
    assert!(
        stderr(&o).contains("element (0, 2) is 0 (0x0000) but the source has 2 (0x4000)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn names_with_control_characters_are_printed_escaped_on_one_line() {
    let dir = TempDir::new("names");
    let name = "w\nerror: forged\r\u{1b}[31mred";
    let escaped = "w\\nerror: forged\\r\\u{1b}[31mred";
    let input = dir.path("in.safetensors");
    write_f32(&input, &[(name, vec![2, 4], vec![1.0; 8])]);
    let output = dir.path("out.safetensors");
    let clean = |text: &str| {
        assert!(
            !text.contains(['\r', '\u{1b}']) && !text.contains("\nerror: forged"),
            "raw name printed:\n{text:?}"
        );
        assert!(text.contains(escaped), "escaped name missing:\n{text}");
    };
    let o = macko(&[&"convert", &input, &output]);
    assert!(o.status.success(), "{}", stderr(&o));
    clean(&stdout(&o));
    let o = macko(&[&"verify", &output, &"--against", &input]);
    assert!(o.status.success(), "{}", stderr(&o));
    clean(&stdout(&o));
    // A failing source check prints the name on stderr, and the final error names it.
    let other = dir.path("other.safetensors");
    write_f32(&other, &[(name, vec![2, 4], vec![2.0; 8])]);
    let o = macko(&[&"verify", &output, &"--against", &other]);
    assert_eq!(o.status.code(), Some(1));
    clean(&stderr(&o));
    // An error built around the name is one line.
    let bad = dir.path("bad.safetensors");
    write_f32(&bad, &[(name, vec![1, 2], vec![1.0, 1.0e6])]);
    let o = macko(&[&"convert", &bad, &output]);
    assert_one_line_error(&o, &[escaped, "1000000"]);
}

#[test]
fn bench_refuses_what_it_cannot_measure_before_allocating() {
    let dir = TempDir::new("bench");
    let out = dir.path("results");
    // Each case is cheap even if it were run: one tiny shape at one density (the memory limit
    // itself is tested in `limits`, where nothing is allocated either way).
    let cases: [(&[&str], &str); 3] = [
        (
            &["--shapes", "8x8", "--iters", "0"],
            "--iters 0: each measurement is the median",
        ),
        (
            &["--shapes", "1x1099511627776"],
            "--shapes 1x1099511627776: columns must be from 1 to 4294967295",
        ),
        (&["--shapes", "0x8"], "--shapes 0x8: rows must be from 1"),
    ];
    for (extra, says) in cases {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
            &"bench",
            &"--backend",
            &"cpu",
            &"--densities",
            &"1",
            &"--out",
            &out,
        ];
        args.extend(extra.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>));
        let o = macko(&args);
        assert_one_line_error(&o, &[says]);
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
        assert!(!out.exists(), "{extra:?} wrote results");
    }
}

/// A valid one-tensor checkpoint to convert.
fn small_checkpoint(dir: &TempDir) -> std::path::PathBuf {
    let input = dir.path("in.safetensors");
    let values: Vec<f32> = (0..64).map(|i| i as f32 - 31.5).collect();
    write_f32(&input, &[("layer.weight", vec![8, 8], values)]);
    input
}

/// Finding 1: `convert good.safetensors /dev/null` as root left /dev/null a regular 840-byte
/// file; a FIFO and a symbolic link (even dangling) were replaced by regular files. Anything at
/// OUT but a regular file is refused, named, and left as it was.
#[cfg(unix)]
#[test]
fn convert_refuses_to_replace_what_is_not_a_regular_file() {
    use std::os::unix::fs::FileTypeExt;
    let dir = TempDir::new("special");
    let input = small_checkpoint(&dir);

    let o = macko(&[&"convert", &input, &"/dev/null"]);
    assert_one_line_error(&o, &["/dev/null", "not a regular file"]);
    let null = std::fs::metadata("/dev/null").expect("/dev/null");
    assert!(null.file_type().is_char_device(), "/dev/null was replaced");

    let fifo = dir.path("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let o = macko(&[&"convert", &input, &fifo]);
        assert_one_line_error(&o, &["fifo", "not a regular file"]);
        let kind = std::fs::symlink_metadata(&fifo).expect("fifo").file_type();
        assert!(kind.is_fifo(), "the FIFO was replaced");
    } else {
        println!("no mkfifo here: the FIFO case is not run");
    }

    let target = dir.path("target.safetensors");
    std::fs::write(&target, b"not a checkpoint").expect("write target");
    for (name, points_to) in [("link", target.clone()), ("dangling", dir.path("nowhere"))] {
        let link = dir.path(name);
        std::os::unix::fs::symlink(&points_to, &link).expect("symlink");
        let o = macko(&[&"convert", &input, &link]);
        assert_one_line_error(&o, &[name, "symbolic link"]);
        let kind = std::fs::symlink_metadata(&link).expect("link").file_type();
        assert!(kind.is_symlink(), "{name} was replaced");
    }
    assert_eq!(
        std::fs::read(&target).expect("read target"),
        b"not a checkpoint",
        "the link's target was written"
    );
    // Nothing left behind: no temporary file in the directory.
    assert!(
        dir.files().iter().all(|f| !f.contains(".tmp-")),
        "{:?}",
        dir.files()
    );
}

/// A file this user cannot write is not replaced, even where its directory is writable; one it
/// can write is replaced and keeps its mode. (As root every file is writable: the refusal is
/// then not observable, and only the second half runs.)
#[cfg(unix)]
#[test]
fn convert_replaces_only_files_it_may_write_and_keeps_their_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("readonly");
    let input = small_checkpoint(&dir);

    let locked = dir.path("locked.safetensors");
    std::fs::write(&locked, b"keep me").expect("write");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let privileged = std::fs::OpenOptions::new()
        .write(true)
        .open(&locked)
        .is_ok();
    if privileged {
        println!("running with privileges that write a 0444 file: its refusal is not checked");
    } else {
        let o = macko(&[&"convert", &input, &locked]);
        assert_one_line_error(&o, &["locked.safetensors", "may not write it"]);
        assert_eq!(std::fs::read(&locked).expect("read"), b"keep me");
    }

    let shared = dir.path("shared.safetensors");
    std::fs::write(&shared, b"old").expect("write");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o664)).expect("chmod");
    let o = macko(&[&"convert", &input, &shared]);
    assert!(o.status.success(), "{}", stderr(&o));
    let meta = std::fs::metadata(&shared).expect("output");
    assert_eq!(meta.permissions().mode() & 0o777, 0o664);
    assert!(meta.len() > 3, "the output was not written");
}

/// Finding 5: after `kill -9` during `convert`, the writer's full-size temporary held zeros past
/// what was written, and `verify` said `all 8 matrices pass` (zeros form valid matrices). The
/// output records a CRC-32 per tensor; a file with its tail unwritten is refused, naming the
/// first damaged tensor, on one line with exit 1.
#[test]
fn verify_refuses_a_file_whose_tail_was_never_written() {
    let dir = TempDir::new("truncated");
    let values: Vec<f32> = (0..4096).map(|i| ((i * 7919) % 97) as f32 - 48.0).collect();
    let input = dir.path("in.safetensors");
    write_f32(
        &input,
        &[
            ("a.weight", vec![64, 64], values.clone()),
            ("b.weight", vec![64, 64], values),
        ],
    );
    let output = dir.path("out.safetensors");
    let o = macko(&[&"convert", &input, &output, &"--prune-to", &"0.5"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = macko(&[&"verify", &output]);
    assert!(o.status.success(), "{}", stderr(&o));

    // The last quarter of the file as a crash leaves it: allocated, never written.
    let mut bytes = std::fs::read(&output).expect("read output");
    let cut = bytes.len() - bytes.len() / 4;
    bytes[cut..].fill(0);
    std::fs::write(&output, &bytes).expect("write");
    let o = macko(&[&"verify", &output]);
    assert_one_line_error(&o, &["out.safetensors", "CRC-32", "not completely written"]);
}

/// SIGINT during `convert` removes the temporary file being written and exits 130, the output
/// untouched (issue 27: temporaries removed on SIGINT/SIGTERM). The conversion is made long
/// enough (64 MiB of f32, quantized) that the signal lands while the temporary exists.
#[cfg(unix)]
#[test]
fn an_interrupted_convert_leaves_nothing_behind() {
    let dir = TempDir::new("interrupt");
    let values: Vec<f32> = (0..1024u64 * 4096)
        .map(|i| ((i * 7919) % 201) as f32 - 100.0)
        .collect();
    let input = dir.path("in.safetensors");
    let tensors: Vec<(String, Vec<usize>, Vec<f32>)> = (0..4)
        .map(|i| (format!("l{i}.weight"), vec![1024, 4096], values.clone()))
        .collect();
    let refs: Vec<(&str, Vec<usize>, Vec<f32>)> = tensors
        .iter()
        .map(|(n, s, v)| (n.as_str(), s.clone(), v.clone()))
        .collect();
    write_f32(&input, &refs);
    let output = dir.path("out.safetensors");
    std::fs::write(&output, b"the old output").expect("write");
    let before = dir.files();

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_macko"))
        .arg("convert")
        .arg(&input)
        .arg(&output)
        .args(["--prune-to", "0.5", "--quantize", "int8"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn macko");
    // Wait for the temporary to appear, then interrupt.
    let started = std::time::Instant::now();
    let temp_seen = loop {
        if dir.files().iter().any(|f| f.contains(".tmp-")) {
            break true;
        }
        if child.try_wait().expect("try_wait").is_some()
            || started.elapsed() > std::time::Duration::from_secs(60)
        {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(temp_seen, "convert finished before it could be interrupted");
    let pid = child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -INT failed");
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted") && err.contains("removed"),
        "{err}"
    );
    assert_eq!(dir.files(), before, "something was left behind");
    assert_eq!(std::fs::read(&output).expect("read"), b"the old output");
}

/// Finding 7: 200 000 tiny tensors (a 20.9 MB file) took 657 MB and 7.9 s before the writer
/// said `header too large`. The output header's size is bounded from the names before any
/// work, and the refusal says how to split the conversion.
#[test]
fn a_header_too_large_for_readers_is_refused_before_any_work() {
    let dir = TempDir::new("header");
    let input = dir.path("many.safetensors");
    let names: Vec<String> = (0..200_000).map(|i| format!("t{i:06}.weight")).collect();
    let tensors: Vec<(&str, Vec<usize>, Vec<f32>)> = names
        .iter()
        .map(|n| (n.as_str(), vec![1, 1], vec![1.0]))
        .collect();
    write_f32(&input, &tensors);
    let before = dir.files();
    let output = dir.path("out.safetensors");
    let o = macko(&[&"convert", &input, &output]);
    assert_one_line_error(
        &o,
        &["200000 tensors", "over the limit of 100000000", "--include"],
    );
    assert_eq!(dir.files(), before, "something was left behind");
}

/// Found by `tests/fuzz_convert.rs`: a checkpoint whose metadata held a `macko.w` description
/// that loads nothing, `w` left unconverted (`--min-size`), was converted with the description
/// copied, and the output was refused by every reader (`verify`: "has no field `format`").
/// Such an input is refused before any work, naming the entry; when `w` is converted, its stale
/// description is replaced as before.
#[test]
fn a_kept_matrix_description_that_loads_nothing_is_refused() {
    let dir = TempDir::new("stale");
    let input = dir.path("in.safetensors");
    let f32s = |n: usize| {
        (0..n)
            .flat_map(|i| (i as f32 + 1.0).to_le_bytes())
            .collect()
    };
    let tensors = [
        RawTensor {
            name: "w".into(),
            dtype: "F32",
            shape: vec![2, 2],
            data: f32s(4),
        },
        RawTensor {
            name: "big".into(),
            dtype: "F32",
            shape: vec![4, 8],
            data: f32s(32),
        },
    ];
    let metadata = serde_json::json!({"macko.w": "{\"kind\":1}"});
    let bytes = checkpoint_fuzz::checkpoint_bytes(&tensors, Some(metadata));
    std::fs::write(&input, bytes).expect("write input");
    let output = dir.path("out.safetensors");
    let before = dir.files();
    let o = macko(&[&"convert", &input, &output, &"--min-size", &"10"]);
    assert_one_line_error(&o, &["in.safetensors", "`macko.w`", "does not load"]);
    assert_eq!(dir.files(), before, "something was left behind");
    let o = macko(&[&"convert", &input, &output]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = macko(&[&"verify", &output]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A handful of the crafted and mutated checkpoints of `tests/fuzz_convert.rs` through the
/// binary, with and without pruning and quantization: each ends with exit status 0, or 1 and a
/// one-line error, never a signal or a panic (101); a refusal leaves nothing behind.
#[test]
fn fuzzed_checkpoints_through_the_binary_exit_cleanly() {
    const INPUTS: usize = 24;
    let flags: [&[&str]; 4] = [
        &[],
        &["--prune-to", "0.5"],
        &["--quantize", "int4", "--group", "8"],
        &[
            "--prune-to",
            "0.1",
            "--quantize",
            "int8",
            "--min-size",
            "20",
        ],
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x27c1);
    let (mut converted, mut refused) = (0, 0);
    for index in 0..INPUTS {
        let dir = TempDir::new("fuzz");
        let (input, output) = (dir.path("in.safetensors"), dir.path("out.safetensors"));
        std::fs::write(&input, checkpoint_fuzz::input(&mut rng, index)).expect("write input");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"convert", &input, &output];
        for f in flags[index % flags.len()] {
            args.push(f);
        }
        let o = macko(&args);
        let what = format!("input {index} (seed 0x27c1), flags {:?}", flags[index % 4]);
        match o.status.code() {
            Some(0) => converted += 1,
            Some(1) => {
                assert_one_line_error(&o, &[]);
                assert_eq!(dir.files(), ["in.safetensors"], "{what} left something");
                refused += 1;
            }
            other => panic!("{what}: exit {other:?}, stderr:\n{}", stderr(&o)),
        }
    }
    println!("convert command: {INPUTS} fuzzed inputs, {converted} converted, {refused} refused");
}
