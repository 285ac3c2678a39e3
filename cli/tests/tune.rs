//! `macko tune`: what it refuses, what it does where nothing can be tuned, and on a software
//! adapter (where CI has one) that the cache it writes is the one devices then read.

mod common;

use std::process::Command;

use common::{assert_one_line_error, macko, stderr, stdout, TempDir, BIN};

#[test]
fn tune_refuses_bad_densities_shapes_and_forced_plans() {
    let o = macko(&[&"tune", &"--backend", &"cpu", &"--densities", &"0"]);
    assert_one_line_error(&o, &["--densities 0: a density is in (0, 1]"]);
    let o = macko(&[&"tune", &"--backend", &"cpu", &"--shapes", &"0x8"]);
    assert_one_line_error(&o, &["--shapes 0x8"]);
    let o = Command::new(BIN)
        .args(["tune", "--backend", "cpu"])
        .env("MACKO_TUNING", "cuda.flat=on")
        .output()
        .expect("run the macko binary");
    assert_one_line_error(&o, &["MACKO_TUNING is set"]);
}

#[test]
fn the_cpu_has_nothing_to_tune_and_no_cache_is_written() {
    let dir = TempDir::new("tune-cpu");
    let cache = dir.path("plans.json");
    let o = macko(&[
        &"tune",
        &"--backend",
        &"cpu",
        &"--quick",
        &"--cache",
        &cache,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing to tune"), "{}", stdout(&o));
    assert!(!cache.exists());
}

#[test]
fn a_tuned_cache_is_what_devices_read() {
    let dir = TempDir::new("tune-wgpu");
    let cache = dir.path("plans.json");
    // A corrupt file in the way is replaced, with a warning.
    std::fs::write(&cache, "{ not json").unwrap();
    let o = macko(&[
        &"tune",
        &"--backend",
        &"wgpu",
        &"--quick",
        &"--iters",
        &"2",
        &"--warmup",
        &"1",
        &"--cache",
        &cache,
    ]);
    if o.status.code() != Some(0) && !common_requires_wgpu() {
        println!("skipping: no wgpu adapter ({})", stderr(&o));
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("starting a new cache"),
        "{}",
        stderr(&o)
    );
    let out = stdout(&o);
    assert_eq!(out.matches("fill 50%").count(), 2, "{out}");
    let info = Command::new(BIN)
        .arg("info")
        .env("MACKO_BACKEND", "wgpu")
        .env("MACKO_PLAN_CACHE", &cache)
        .output()
        .expect("run the macko binary");
    assert!(
        stdout(&info).contains("2 tuned classes for this device"),
        "{}",
        stdout(&info)
    );
    let shown = macko(&[&"tune", &"--show", &"--cache", &cache]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    assert_eq!(
        stdout(&shown).matches("fill 50%").count(),
        2,
        "{}",
        stdout(&shown)
    );
    // Tuning again measures nothing: both classes are filed.
    let again = macko(&[
        &"tune",
        &"--backend",
        &"wgpu",
        &"--quick",
        &"--iters",
        &"2",
        &"--cache",
        &cache,
    ]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(!stdout(&again).contains("fill 50%"), "{}", stdout(&again));
}

fn common_requires_wgpu() -> bool {
    std::env::var("MACKO_REQUIRE_BACKENDS")
        .unwrap_or_default()
        .split(',')
        .any(|s| s.trim().eq_ignore_ascii_case("wgpu"))
}
