//! Runs the Python test suite (`python/tests/test_*.py`) against the extension module this
//! `cargo test` just built, so that the README's one test command covers the Python package
//! too. The module is assembled in a temporary folder (the `macko/` sources plus the built
//! library as `macko/_native.abi3.so`) and Python's unittest runs there.
//!
//! Needs `python3` with NumPy; without them the test says so and passes (CI's `.ci/run` builds
//! the wheel with maturin, installs it and runs the same suite, where nothing may be missing).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The shared library cargo built for this package, beside this test's executable.
fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let deps = exe
        .parent()
        .expect("test executables live in target/<profile>/deps");
    let name = if cfg!(target_os = "windows") {
        "macko_py.dll"
    } else if cfg!(target_os = "macos") {
        "libmacko_py.dylib"
    } else {
        "libmacko_py.so"
    };
    deps.join(name)
}

/// The module's file name under `macko/` as Python's import system looks for it.
fn module_file() -> &'static str {
    if cfg!(target_os = "windows") {
        "_native.pyd"
    } else {
        "_native.abi3.so"
    }
}

/// A Python interpreter with NumPy, or why there is none.
fn python() -> Result<String, String> {
    let exe = if cfg!(target_os = "windows") {
        "python"
    } else {
        "python3"
    };
    match Command::new(exe).args(["-c", "import numpy"]).output() {
        Ok(out) if out.status.success() => Ok(exe.to_string()),
        Ok(out) => Err(format!(
            "{exe} has no NumPy ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("no {exe} ({e})")),
    }
}

/// Copies the Python sources and the built library into `dir/macko/`.
fn assemble(package: &Path, dir: &Path) {
    let target = dir.join("macko");
    std::fs::create_dir_all(&target).expect("a temporary package folder");
    for entry in std::fs::read_dir(package.join("macko")).expect("python/macko/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "py") {
            let to = target.join(path.file_name().expect("a file name"));
            std::fs::copy(&path, to).expect("copy a Python source");
        }
    }
    let library = built_library();
    std::fs::copy(&library, target.join(module_file())).unwrap_or_else(|e| {
        panic!(
            "the extension module {} was not built: {e}",
            library.display()
        )
    });
}

#[test]
fn python_suite_passes() {
    let python = match python() {
        Ok(p) => p,
        Err(why) => {
            println!("skipped: {why}; `.ci/run` runs this suite from the built wheel");
            return;
        }
    };
    let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python-suite");
    let _ = std::fs::remove_dir_all(&dir);
    assemble(&package, &dir);
    let out = Command::new(&python)
        .args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(package.join("tests"))
        // Not python/: `-m` puts the working directory first on the path, where the sources
        // without the built module would shadow the assembled package.
        .current_dir(&dir)
        .env("PYTHONPATH", &dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "the Python suite failed:\n{stderr}");
}
