#!/usr/bin/env bash
# WGSL MACKO tuning sweep on the GPU machine (see shaders/README.md, "Forcing a plan for a
# measurement"). Binaries staged by `../shared/gpu/pack.sh -p macko` in .gpu/ (bin/macko,
# tests/macko--agreement, tests/macko--wgpu_backend, tests/macko--plans). Usage, through
# remote.sh (Vulkan loader and CUDA libraries on the path):
#   bash .gpu/remote.sh bash shaders/sweep.sh [tests] -- NAME 'KEY=V KEY=V' ...
# ('-' for the default plans). Each variant's items are the wgpu tuning's keys (`WgpuTuning::KEYS`,
# src/backend/wgpu/tuning.rs), passed as MACKO_TUNING="wgpu.KEY=V ..." (an item that already names
# its backend, `cuda.KEY=V`, is passed as it is). Each variant runs `macko bench --backend
# cuda,wgpu` with that tuning on $SHAPES/$DENSITIES: CUDA and wgpu cases interleaved, because
# wgpu-only runs on the H200 gave erratic figures (the GPU idles and drops its clocks between cases;
# docs/journal/shaders.md, "Tuning log"). The summary lists per case the WGSL MACKO time, its % of
# the streaming read, and its throughput against CUDA MACKO and our WGSL dense GEMV in the same run.
# $SWEEP_BUDGET seconds (default 480) bound the whole sweep: variants that would start later are
# skipped and say so.
set -uo pipefail
# MACKO_TUNING's value for the items $1 (KEY=V ..., wgpu. prefixed where no backend is named).
tuning() {
  local items=() i
  for i in $1; do
    case "$i" in *.*=*) items+=("$i") ;; *) items+=("wgpu.$i") ;; esac
  done
  echo "${items[*]}"
}
final=${OUT:-/tmp/out}; out=/tmp/sweep-logs; rm -rf "$out"; mkdir -p "$out" "$final"
B=${SWEEP_BIN:-.gpu}
bin_macko=$B/bin/macko
test_bin() { echo "$B/tests/macko--$1"; }
SHAPES=${SHAPES:-36864x12288,12288x12288,11008x4096,4096x4096}
DENS=${DENSITIES:-1.0,0.5,0.3,0.1}
ITERS=${ITERS:-100}
BUDGET=${SWEEP_BUDGET:-480}
START=$(date +%s)
export MACKO_REQUIRE_BACKENDS=cpu,wgpu
# The summary goes straight to the returned folder: a run cut short still brings it back.
# Appended to, under a header line per sweep: two sweeps in one command keep both tables. Their
# packed logs and CSVs are told apart by $SWEEP_TAG (csv-TAG.tar.gz, logs-TAG.tar.gz).
summary=$final/summary.txt
tag=${SWEEP_TAG:+-$SWEEP_TAG}
echo "== $(basename "$0") $* ($(date -u +%FT%TZ))" >> "$summary"
nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>&1 \
  | sed 's/^/gpu apps: /' | tee -a "$summary"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    tests)
      for t in agreement wgpu_backend plans; do
        [ -x "$(test_bin $t)" ] || continue
        timeout 180 "$(test_bin $t)" > "$out/test_$t.log" 2>&1
        echo "test $t: rc=$? $(grep -E '^test result' "$out/test_$t.log" | tail -1)" | tee -a "$summary"
      done
      # The agreement suite again with each tuning of $TEST_TUNINGS ('KEY=V KEY=V;KEY=V ...').
      IFS=';' read -ra sets <<< "${TEST_TUNINGS:-}"
      for e in "${sets[@]}"; do
        MACKO_TUNING="$(tuning "$e")" timeout 180 "$(test_bin agreement)" \
          > "$out/test_agreement_env.log" 2>&1
        echo "test agreement [$e]: rc=$? $(grep -E '^test result' "$out/test_agreement_env.log" | tail -1)" \
          | tee -a "$summary"
      done ;;
  esac
  shift
done
[ "${1:-}" = "--" ] && shift
while [ $# -ge 2 ]; do
  name=$1; envs=$2; shift 2
  [ "$envs" = - ] && envs=
  now=$(( $(date +%s) - START ))
  if [ "$now" -gt "$BUDGET" ]; then
    echo "skip $name (at ${now}s)" | tee -a "$summary"; continue
  fi
  log=$out/$name.log
  echo "== $name: $envs" > "$log"
  t0=$(date +%s)
  MACKO_TUNING="$(tuning "$envs")" timeout ${VTIMEOUT:-150} $bin_macko bench --backend cuda,wgpu --shapes "$SHAPES" \
    --densities "$DENS" --iters "$ITERS" --check-rows 512 --out /tmp/b-$name >> "$log" 2>&1
  echo "rc=$?" >> "$log"
  csv=/tmp/b-$name/results.csv
  {
    echo "== $name ($envs) $(( $(date +%s) - t0 ))s"
    [ -f "$csv" ] && awk -F, 'NR>1{k=$3"x"$4" d="$5; t[$1","k","$6]=$9; keys[k]=1}
      END{for(k in keys){m=t["wgpu,"k",macko"]; s=t["wgpu,"k",stream"]; c=t["cuda,"k",macko"];
        d=t["wgpu,"k",dense"];
        if(m>0) printf "%-22s wgsl=%7.2fus %5.1f%% ceil  /cuda %.2f  x%.2f wgsl-dense  (cuda %6.2fus)\n",
          k, m, 100*s/m, c/m, d/m, c}}' "$csv" | sort -t= -k1,1 -k2,2r
    grep -iE "error|mismatch|panick" "$log" | head -3
  } | tee -a "$summary"
done
echo "total $(( $(date +%s) - START ))s" | tee -a "$summary"
# At most 8 files come back: the summary, and the logs and CSVs packed.
tar -C /tmp -czf "$final/csv$tag.tar.gz" $(cd /tmp && ls -d b-* 2>/dev/null) 2>/dev/null
tar -C "$out" -czf "$final/logs$tag.tar.gz" . 2>/dev/null
