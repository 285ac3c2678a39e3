#!/usr/bin/env bash
# MACKO CUDA variant sweep on the GPU machine (issue 7). Binaries staged by
# `../shared/gpu/pack.sh -p macko` in .gpu/ (bin/macko, tests/macko--agreement,
# tests/macko--cuda_backend; see README.md). Usage, through remote.sh (CUDA libraries on the path):
#   bash .gpu/remote.sh bash kernels/sweep.sh [tests] [aligned] [lean] [xhalf] [spread] [sanitize] -- NAME 'cuda.key=value ...' ...
# Each variant runs `macko bench --backend cuda` with MACKO_TUNING set to its items (src/backend/
# cuda/tuning.rs lists the keys; '' for the default plans) on $SHAPES/$DENSITIES; full
# output in $OUT/<NAME>.log, and a table of macko % of ceiling and speedup over cuBLAS last.
set -uo pipefail
final=${OUT:-/tmp/out}; out=/tmp/sweep-logs; rm -rf "$out"; mkdir -p "$out" "$final"
B=${SWEEP_BIN:-.gpu}
bin_macko=$B/bin/macko
test_bin() { echo "$B/tests/macko--$1"; }
SHAPES=${SHAPES:-12288x12288,4096x11008,11008x4096}
DENS=${DENSITIES:-1.0,0.5,0.3,0.1}
ITERS=${ITERS:-100}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export MACKO_REQUIRE_BACKENDS=cuda
# The summary goes straight to the returned folder: a run cut short still brings it back.
# Appended to, under a header line per sweep: two sweeps in one command keep both tables. Their
# packed logs and CSVs are told apart by $SWEEP_TAG (csv-TAG.tar.gz, logs-TAG.tar.gz).
summary=$final/summary.txt
tag=${SWEEP_TAG:+-$SWEEP_TAG}
echo "== $(basename "$0") $* ($(date -u +%FT%TZ))" >> "$summary"
# The agreement and cuda_backend tests under each tuning given (MACKO_TUNING strings of
# `cuda.key=value` items, "" for the default plans); logs named after $1.
tests_under() {
  local tag=$1 i=0 e t; shift
  for e in "$@"; do
    i=$((i+1))
    for t in agreement cuda_backend; do
      MACKO_TUNING="$e" timeout 120 "$(test_bin $t)" --test-threads=1 > "$out/test_${tag}_${t}_$i.log" 2>&1
      echo "test $t [$e]: rc=$? $(grep -E '^test result' "$out/test_${tag}_${t}_$i.log" | tail -1)" | tee -a "$summary"
    done
  done
}
# compute-sanitizer memcheck on the edge_ tests of cuda_backend under each tuning given.
memcheck_under() {
  local e
  for e in "$@"; do
    MACKO_TUNING="$e" timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$(test_bin cuda_backend)" edge_ --test-threads=1 > "$out/memcheck.log" 2>&1
    echo "memcheck [$e]: rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1)" | tee -a "$summary"
  done
}
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    tests)
      # Every kernel path: lanes per row, x layout, x in global memory, batches pipelined or not,
      # rows split into segments (3, or 8: many tiny items), 1024-thread blocks.
      tests_under paths "" "cuda.lanes=16 cuda.chunks=short cuda.xpad=off" \
        "cuda.lanes=16 cuda.chunks=long cuda.xpad=on cuda.split=3" \
        "cuda.lanes=32 cuda.chunks=short cuda.xpad=on cuda.split=8 cuda.block=1024" \
        "cuda.lanes=32 cuda.chunks=long cuda.xpad=off cuda.block=1024" \
        "cuda.lanes=16 cuda.chunks=short cuda.x=global cuda.split=2" \
        "cuda.lanes=32 cuda.chunks=short cuda.pipe=off cuda.split=3" \
        "cuda.lean=on cuda.xpad=off" "cuda.xhalf=on cuda.xpad=off" ;;
    aligned)
      # Row-aligned uploads (macko_format::aligned, flags bit 4; every whole-row plan): the
      # default plans, and paths the default plans do not take for the tests' shapes:
      # half-warps with x in global memory, pipelined warps; memcheck on the edge tests with
      # half-warps (teams past their row's end).
      tests_under aligned "" "cuda.lanes=16 cuda.chunks=short cuda.x=global" \
        "cuda.lanes=32 cuda.chunks=short cuda.pipe=on"
      memcheck_under "cuda.lanes=16 cuda.chunks=short" ;;
    lean)
      # The lean row kernel (macko_lean_*, rules.rs lean_rows) forced onto every matrix it can
      # run (nearly dense ones too, with x plain); memcheck on the edge tests.
      tests_under lean "cuda.lean=on cuda.xpad=off"
      memcheck_under "cuda.lean=on cuda.xpad=off" ;;
    xhalf)
      # x staged as binary16 (macko_*_xh_*, cuda.xhalf) under the regular, lean and flat
      # kernels and split rows, x plain everywhere; memcheck on the edge tests.
      tests_under xhalf "cuda.xhalf=on cuda.xpad=off" \
        "cuda.xhalf=on cuda.xpad=off cuda.lean=on" \
        "cuda.xhalf=on cuda.xpad=off cuda.flat=on cuda.flat_snap=0" \
        "cuda.xhalf=on cuda.xpad=off cuda.split=3 cuda.lanes=16"
      memcheck_under "cuda.xhalf=on cuda.xpad=off" \
        "cuda.xhalf=on cuda.xpad=off cuda.flat=on cuda.flat_snap=0" ;;
    spread)
      # Every resident block launched where the items are fewer (cuda.spread=on, forced on
      # every matrix): warps, half-warps, the lean kernel, split rows; memcheck on the edge
      # tests (blocks whose warps find no item).
      tests_under spread "cuda.spread=on" "cuda.spread=on cuda.lanes=16" \
        "cuda.spread=on cuda.lean=on cuda.xpad=off" \
        "cuda.spread=on cuda.split=3"
      memcheck_under "cuda.spread=on" "cuda.spread=on cuda.lanes=16" \
        "cuda.spread=on cuda.split=3" "cuda.spread=on cuda.lean=on cuda.xpad=off" \
        "cuda.spread=on cuda.x=global cuda.lanes=16" ;;
    sanitize)
      memcheck_under "cuda.lanes=16 cuda.chunks=short cuda.split=3" \
        "cuda.lanes=32 cuda.chunks=short cuda.split=8 cuda.block=1024" ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
while [ $# -ge 2 ]; do
  name=$1; envs=$2; shift 2
  log=$out/$name.log
  echo "== $name: $envs" > "$log"
  MACKO_TUNING="$envs" timeout ${VTIMEOUT:-120} $bin_macko bench --backend cuda --shapes "$SHAPES" \
    --densities "$DENS" --iters "$ITERS" --check-rows 512 --out /tmp/b-$name >> "$log" 2>&1
  echo "rc=$?" >> "$log"
  csv=/tmp/b-$name/results.csv
  {
    echo "== $name ($envs)"
    [ -f "$csv" ] && awk -F, '$1=="cuda"{k=$3"x"$4" d="$5; t[k","$6]=$9; keys[k]=1}
      END{for(k in keys){m=t[k",macko"]; s=t[k",stream"]; c=t[k",cublas"];
        if(m>0) printf "%-22s macko=%7.2fus %5.1f%% ceil  x%.2f cublas\n", k, m, 100*s/m, c/m}}' "$csv" | sort
    grep -iE "error|mismatch|panick" "$log" | head -3
  } | tee -a "$summary"
done
# At most 8 files come back: the summary, and the logs and CSVs packed.

tar -C /tmp -czf "$final/csv$tag.tar.gz" $(cd /tmp && ls -d b-* 2>/dev/null) 2>/dev/null
tar -C "$out" -czf "$final/logs$tag.tar.gz" . 2>/dev/null
