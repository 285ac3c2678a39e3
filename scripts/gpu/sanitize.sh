#!/usr/bin/env bash
# Runs on the GPU machine, through .gpu/remote.sh (see ../../../shared/gpu/README.md):
#   bash .gpu/remote.sh bash scripts/gpu/sanitize.sh [SECONDS_PER_RUN [TOOL ...]]
# compute-sanitizer's four tools (memcheck, initcheck, racecheck, synccheck) over the tests that
# reach every CUDA kernel a plan can choose:
# - cuda_backend `edge_`: the binary16 MACKO kernels on degenerate, ragged, long and
#   non-canonical matrices, padding against NaN/inf in x;
# - plans `every_forced_cuda_plan`: every plan the CUDA tuning can force (row kernels, half
#   warps, long and pipelined batches, split rows, the flat and lean kernels, x staging, blocks
#   of 512 and 1024, the spread grid), dense, CSR;
# - quantized `quantized_edge_cases`: the int8/int4 MACKO and dense kernels, every scale layout;
# - few_token `padding_never_contributes`: the few-token kernels (CUDA cores and tensor cores)
#   for every batch size.
# Only CUDA runs (wgpu is given no adapter, so it is skipped; the CPU device is cheap).
# Each run is bounded (default 240 s) so one slow tool cannot eat the call; the summary says
# which finished. Staging here first:
#   cargo test --release --no-run --test cuda_backend --test plans --test quantized --test few_token
#   (copy the four executables to .gpu/tests/macko--<name>, strip them)
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log=$out/sanitize.log
: > "$log"
limit=${1:-240}
shift $(( $# > 0 ? 1 : 0 ))
# The tools to run: those named after the bound, else all four.
if [ $# -gt 0 ]; then tools=("$@"); else tools=(memcheck initcheck racecheck synccheck); fi
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# No Vulkan driver and only Vulkan asked of wgpu: without the first alone, wgpu falls back to
# the machine's GL adapter, whose GLSL lacks what the kernels need (seen 2026-11-27).
export VK_DRIVER_FILES=/nonexistent.json
export WGPU_BACKEND=vulkan
export MACKO_REQUIRE_BACKENDS=cuda
# Cheapest first, so that a bounded call covers the most kernels.
runs=(
  "quantized quantized_edge_cases"
  "few_token padding_never_contributes"
  "cuda_backend edge_"
  "plans every_forced_cuda_plan"
)
status=0
for tool in "${tools[@]}"; do
  for run in "${runs[@]}"; do
    set -- $run
    exe=.gpu/tests/macko--$1
    [ -x "$exe" ] || { echo "$tool $1: not staged" | tee -a "$log"; continue; }
    one=$out/one.log
    start=$(date +%s)
    timeout "$limit" "$sanitizer" --tool "$tool" --error-exitcode 1 "$exe" "$2" --test-threads=1 \
      > "$one" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    { echo "== $tool: $1 $2"; cat "$one"; } >> "$log"
    errors=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$one" | tail -n 1)
    tests=$(grep -E '^test result:' "$one" | tail -n 1)
    case $rc in
      0) verdict="clean" ;;
      124) verdict="cut at ${limit} s" ;;
      *) verdict="FAILED (exit $rc)"; status=1 ;;
    esac
    echo "$tool $1 ($2): $verdict in ${secs} s; ${errors:-no summary}; ${tests:-}" | tee -a "$log"
  done
done
rm -f "$out/one.log"
exit $status
