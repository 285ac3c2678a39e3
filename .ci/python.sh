#!/usr/bin/env bash
# The Python package in CI, in two steps (.ci/run calls both):
#
#   bash .ci/python.sh venv DIR    # a virtual environment in DIR with NumPy and maturin;
#                                  # prints DIR/bin, to put first on PATH for `cargo test`
#                                  # (python/tests/python_suite.rs then runs the suite there)
#   bash .ci/python.sh wheel DIR   # builds the abi3 wheel with maturin (dev profile: it reuses
#                                  # `cargo test`'s build), installs it in DIR's environment
#                                  # and runs python/tests against the installed package
set -euo pipefail
cd "$(dirname "$0")/.."
step=$1
dir=$2
log() { echo "python.sh: $*" >&2; }

case $step in
  venv)
    python=$(command -v python3 || command -v python || true)
    [ -n "$python" ] || { log "needs python3 (3.9 or newer)"; exit 1; }
    if [ ! -x "$dir/bin/python" ]; then
      log "creating $dir with $("$python" --version 2>&1)"
      "$python" -m venv "$dir" >&2
    fi
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "numpy>=1.21" "maturin>=1.5,<2" >&2
    # torch too, so that macko.torch and macko.compat are tested here on the CPU (their CUDA
    # halves run on the GPU machine). PyPI's Linux torch brings its CUDA libraries (about
    # 3 GB, a few minutes); a failed download is a failed run, not a silent skip.
    log "installing torch (large download)"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check torch >&2
    echo "$dir/bin"
    ;;
  wheel)
    out="$dir/wheels"
    rm -rf "$out"
    "$dir/bin/maturin" build --profile dev -m python/Cargo.toml --out "$out" >&2
    "$dir/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$out"/*.whl >&2
    # From outside the checkout, so that `import macko` finds the installed wheel, not python/.
    (cd "$dir" && "$dir/bin/python" -m unittest discover -v -s "$OLDPWD/python/tests")
    ;;
  *)
    log "unknown step '$step': expected venv or wheel"
    exit 2
    ;;
esac
