#!/bin/bash
# WGSL MACKO sweep on the GPU machine (see shaders/NOTES.md, "Measurements"). Run from the
# repository root of the device copy, after staging .gpu-wgpu/ (macko, agreement, wgpu_backend,
# debs, golden; optionally macko-old: the binary of the previous shaders, for a same-run
# baseline). Arguments: variants as NAME:ENV=V,ENV=V (or NAME:default), run in order while the
# time budget (SWEEP_BUDGET seconds, default 330) lasts. SWEEP_TESTS=1 runs the agreement and
# wgpu backend suites first. SHAPES / DENSITIES / ITERS override the bench cases; CUDA_WITH=NAME
# adds --backend cuda to that variant for the ratio; CUDA_ALL=1 to every variant (this also keeps
# the GPU busy between wgpu cases: wgpu-only runs on the H200 gave erratic figures, see NOTES.md).
set -u
OUT=${OUT:-/tmp/sweep-out}
mkdir -p "$OUT"
START=$(date +%s)
BUDGET=${SWEEP_BUDGET:-330}
for f in .gpu-wgpu/debs/*.deb; do dpkg -x "$f" / ; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export MACKO_SHARED=$PWD/.gpu-wgpu MACKO_REQUIRE_BACKENDS=cpu,wgpu
SHAPES=${SHAPES:-36864x12288,12288x12288}
DENSITIES=${DENSITIES:-1.0,0.5,0.3,0.1}
ITERS=${ITERS:-100}
summary="$OUT/summary.txt"
: > "$summary"
# Other work on the GPU distorts every figure: show it (and judge each line by its own ceiling
# and dense figure: a clean H200 line has a ceiling above 4 TB/s on the large shapes and dense
# at 95%+).
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1 \
    | sed 's/^/gpu apps: /' | tee -a "$summary"
if [ "${SWEEP_TESTS:-0}" = 1 ]; then
    for t in agreement wgpu_backend wgpu_global_x wgpu_macko_variants; do
        [ -x .gpu-wgpu/$t ] || continue
        .gpu-wgpu/$t > "$OUT/test-$t.log" 2>&1
        echo "test $t rc=$? $(grep 'test result' "$OUT/test-$t.log")" | tee -a "$summary"
    done
    # The agreement suite again under each NAME:ENV=V,ENV=V of TEST_ENVS (space-separated).
    for spec in ${TEST_ENVS:-}; do
        name=${spec%%:*}
        IFS=',' read -ra kv <<< "${spec#*:}"
        env "${kv[@]}" .gpu-wgpu/agreement > "$OUT/test-agreement-$name.log" 2>&1
        echo "test agreement ($name) rc=$? $(grep 'test result' "$OUT/test-agreement-$name.log")" \
            | tee -a "$summary"
    done
fi
for spec in "$@"; do
    name=${spec%%:*}
    envs=${spec#*:}
    now=$(( $(date +%s) - START ))
    if [ "$now" -gt "$BUDGET" ]; then
        echo "skip $name (at ${now}s)" | tee -a "$summary"
        continue
    fi
    bin=.gpu-wgpu/macko
    backends=wgpu
    { [ "${CUDA_WITH:-}" = "$name" ] || [ "${CUDA_ALL:-0}" = 1 ]; } && backends=cuda,wgpu
    vars=()
    if [ "$envs" != default ]; then
        IFS=',' read -ra kv <<< "$envs"
        for e in "${kv[@]}"; do
            if [ "$e" = OLD ]; then bin=.gpu-wgpu/macko-old; else vars+=("$e"); fi
        done
    fi
    t0=$(date +%s)
    env "${vars[@]}" $bin bench --backend $backends --shapes "$SHAPES" --densities "$DENSITIES" \
        --iters "$ITERS" >> "$OUT/bench-$name.log" 2>&1
    rc=$?
    echo "== $name ($envs) rc=$rc $(( $(date +%s) - t0 ))s" \
        "gpu apps now: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | wc -l)" \
        | tee -a "$summary"
    # The case lines of this run (the log accumulates repeats of a variant).
    tail -n 40 "$OUT/bench-$name.log" | grep -E '^(wgpu|cuda) +[0-9]+×' | sed 's/  */ /g' \
        | tee -a "$summary"
done
echo "total $(( $(date +%s) - START ))s" | tee -a "$summary"
# Few files come back: the logs travel as one archive.
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
