#!/usr/bin/env bash
# Runs on the GPU machine, through .gpu/remote.sh (see ../../../shared/gpu/README.md):
#   bash .gpu/remote.sh bash scripts/gpu/check.sh [BENCH ARGS...]
# 1. compiles every CUDA kernel with nvcc for sm_90 (ptxas register report);
# 2. prints `macko info`;
# 3. runs every staged test executable with cpu, wgpu and cuda required;
# 4. runs the CUDA edge-case tests under compute-sanitizer (memcheck, racecheck, synccheck);
# 5. runs `macko bench` with the given arguments (cuda and wgpu), into $OUT/bench.tar.gz.
# Everything it prints also lands in $OUT/run.log; the last lines are the test summary.
#
# Staging here first (the device tool carries at most 64 MiB):
#   ../shared/gpu/pack.sh -p macko
#   rm -f .gpu/tests/*format* .gpu/tests/macko--wgpu_shaders .gpu/tests/macko--cuda_kernels
#   strip .gpu/tests/* .gpu/bin/*
# then `run` with carry [".gpu"]. CHECK_BENCH_ONLY=1 skips tests and sanitizer (a second call
# of one measurement); CHECK_BENCH_SECONDS bounds the bench (default 540 s), whose results are
# written after every case, so a run cut short still returns what it measured. Run CUDA and
# wgpu together (`--backend cuda,wgpu`): wgpu alone gave unsteady clocks on the H200.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log=$out/run.log
export MACKO_REQUIRE_BACKENDS=cpu,wgpu,cuda
status=0
{
  echo "== nvcc -arch=sm_90"
  for f in kernels/*.cu; do
    echo "-- $f"
    nvcc -arch=sm_90 -c "$f" -o /tmp/kernel.o -Xptxas -v 2>&1 | grep -E "error|warning|registers|spill" || true
  done
  echo "== macko info"
  .gpu/bin/macko info 2>&1 | grep -v XDG_RUNTIME_DIR
} >> "$log" 2>&1

summary=""
# CHECK_BENCH_ONLY=1 skips the tests and the sanitizer (a second call of one measurement).
[ "${CHECK_BENCH_ONLY:-0}" = 1 ] || for t in .gpu/tests/*; do
  name=$(basename "$t")
  echo "== test $name" >> "$log"
  "$t" --test-threads=1 >> "$log" 2>&1
  rc=$?
  line=$(grep -E '^test result:' "$log" | tail -n 1)
  summary+="$name: rc=$rc $line"$'\n'
  [ $rc -eq 0 ] || status=1
done

sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ "${CHECK_BENCH_ONLY:-0}" != 1 ] && [ -x "$sanitizer" ] && [ -x .gpu/tests/macko--cuda_backend ]; then
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer --tool $tool (edge_ tests)" >> "$log"
    "$sanitizer" --tool "$tool" --error-exitcode 1 .gpu/tests/macko--cuda_backend edge_ --test-threads=1 >> "$log" 2>&1
    rc=$?
    summary+="sanitizer $tool: rc=$rc $(grep -E 'ERROR SUMMARY' "$log" | tail -n 1)"$'\n'
    [ $rc -eq 0 ] || status=1
  done
fi

if [ $# -gt 0 ]; then
  echo "== macko bench $*" >> "$log"
  mkdir -p /tmp/bench
  # The bench rewrites results.csv/json after every case; on a timeout, `timeout` stops it
  # early enough that the partial results are still packed and come back.
  timeout "${CHECK_BENCH_SECONDS:-540}" .gpu/bin/macko bench "$@" --out /tmp/bench 2>&1 \
    | grep -v XDG_RUNTIME_DIR | tee -a "$log" | tail -n 40
fi
[ -d /tmp/bench ] && tar -C /tmp -czf "$out/bench.tar.gz" bench
echo "== summary" | tee -a "$log"
printf '%s' "$summary" | tee -a "$log"
exit $status
