#!/usr/bin/env bash
# Nsight Compute profile of one kernel per case, on the GPU machine (issue 7: the warp-state and
# memory counters that the tuning notes lacked). Through .gpu/remote.sh:
#   bash .gpu/remote.sh bash scripts/gpu/profile.sh [KERNEL_REGEX] -- ROWSxCOLS:D ['ENV=V ...'] ...
# Each case runs `macko bench --backend cuda` on one shape and density under ncu (clocks left
# alone: --clock-control none) and profiles the third launch of the kernels matching
# KERNEL_REGEX (default: the MACKO product, whichever of the row, lean and flat kernels the plan
# runs). A case's environment (a quoted word of ENV=V pairs
# after it, optional) selects kernel knobs. Full reports go to $OUT/ncu.tar.gz; the condensed
# table (time, DRAM throughput, issue slots, shared-memory pipe, stalls per issued instruction)
# is printed and written to $OUT/profile.txt.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out" /tmp/ncu
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
regex='^macko_(spmv|lean|flat)_'
if [ $# -gt 0 ] && [ "$1" != "--" ]; then regex=$1; shift; fi
[ "${1:-}" = "--" ] && shift
summary=$out/profile.txt; : > "$summary"
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__bytes_read.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics+=,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed
metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
metrics+=,smsp__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
metrics+=,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,launch__registers_per_thread,launch__grid_size,launch__block_size
# The shared memory the driver carved out of each SM's L1 for the launch (the rest is L1 cache).
metrics+=,launch__shared_mem_config_size,launch__shared_mem_per_block_dynamic
# How evenly the SMs are kept busy: a partial last round on few SMs shows as min << max.
metrics+=,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max
stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
while [ $# -gt 0 ]; do
  case_=$1; shift
  envs=
  if [ $# -gt 0 ] && [[ "$1" == *=* ]]; then envs=$1; shift; fi
  shape=${case_%%:*}; d=${case_##*:}
  name=$(echo "${shape}_d${d}_${envs}" | tr -c 'A-Za-z0-9_.\n-' '_' | cut -c1-80)
  rep=/tmp/ncu/$name.txt
  env $envs timeout 240 "$ncu" --clock-control none -k "regex:$regex" --launch-skip 2 \
    --launch-count 1 --metrics "$metrics,$stalls" --print-units base \
    "$(pwd)/.gpu/bin/macko" bench --backend cuda --shapes "$shape" --densities "$d" --iters 3 \
    --warmup 1 --check-rows 64 > "$rep" 2>&1
  rc=$?
  {
    echo "== $shape d=$d [$envs] rc=$rc"
    grep -E '^ +[a-z]+__' "$rep" | grep -vE 'stalled_.*_per_issue_active' | awk '{print "  " $1, $(NF)}'
    # The stall reasons above 0.05 cycles per issued instruction, largest first.
    grep -E 'stalled_.*_per_issue_active' "$rep" \
      | awk '{v=$NF; gsub(",","",v); n=$1; sub(/.*stalled_/,"",n); sub(/_per_issue.*/,"",n);
             if (v+0 > 0.05) printf "  %-28s %s\n", n, v}' \
      | sort -k2 -gr
    grep -E '==ERR|error' "$rep" | head -3
  } | tee -a "$summary"
done
tar -C /tmp -czf "$out/ncu.tar.gz" ncu
