#!/usr/bin/env bash
# Profiles one launch of every step's kernel, and of cuBLAS's SGEMM kernel, with Nsight
# Compute, and writes the raw numbers: the metrics that docs/07_profiling.md and the step
# write-ups quote (issue slots, FFMA share, shared-memory wavefronts and bank conflicts, DRAM
# and L2 bytes) and the warp stall reasons per issued instruction.
#
#   docs/demos/profile_steps.sh [BUILD_DIR [SIZE [OUT.csv]]]     defaults: build 4096 stdout
#
# Needs a GPU, ncu on PATH (it comes with the CUDA toolkit) and a built BUILD_DIR. Clocks are
# left as the GPU sets them (--clock-control none): these GPUs may be shared.
#
# The stall columns are smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio:
# for each reason, the warps stalled on it per cycle in which an instruction issued. They add
# up (with "selected", the issuing warp itself) to the average cycles between two
# instructions of a warp, Nsight Compute's "Warp Cycles Per Issued Instruction", so they can
# be compared between kernels that issue very different numbers of instructions.
set -euo pipefail

build_dir=${1:-build}
size=${2:-4096}
out=${3:-/dev/stdout}
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 0
fi
command -v ncu >/dev/null || { echo "profile_steps.sh: ncu not found on PATH" >&2; exit 1; }

reasons=(barrier branch_resolving dispatch_stall drain imc_miss lg_throttle long_scoreboard
  math_pipe_throttle membar mio_throttle misc no_instruction not_selected selected
  short_scoreboard sleeping tex_throttle wait)
metrics=(gpu__time_duration.sum launch__registers_per_thread launch__occupancy_limit_registers
  sm__warps_active.avg.pct_of_peak_sustained_active
  smsp__issue_active.avg.pct_of_peak_sustained_active
  smsp__average_warp_latency_per_inst_issued.ratio
  smsp__inst_executed.sum smsp__sass_thread_inst_executed_op_ffma_pred_on.sum
  sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
  dram__bytes_read.sum dram__bytes_write.sum lts__t_bytes.sum
  smsp__inst_executed_op_shared_ld.sum smsp__inst_executed_op_shared_st.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum
  l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum)
for reason in "${reasons[@]}"; do
  metrics+=("smsp__average_warps_issue_stalled_${reason}_per_issue_active.ratio")
done
metric_list=$(IFS=,; echo "${metrics[*]}")

first=1
profile() {  # label, kernel regex, executable
  local label=$1 kernel=$2 exe=$3
  echo "# $label: ncu --clock-control none -k regex:$kernel -c 1 --csv --page raw --metrics <list> $exe $size --warmup 1 --repeats 1" >&2
  ncu --clock-control none -k "regex:$kernel" -c 1 --csv --page raw --metrics "$metric_list" \
    "$exe" "$size" --warmup 1 --repeats 1 2>/dev/null |
    awk -v label="$label" -v first="$first" '/^"ID"/ { header = $0; next }
                           /^"",/ { units = $0; next }
                           /^"[0-9]/ { rows = rows "\"" label "\"," $0 "\n" }
                           END { if (rows == "") { print "profile_steps.sh: no kernel matched for " label > "/dev/stderr"; exit 1 }
                                 if (first) { print "\"label\"," header; print "\"units\"," units }
                                 printf "%s", rows }'
  first=0
}

step_dirs=(steps/*/)
{
  for dir in "${step_dirs[@]}"; do
    step=$(basename "$dir")
    if [[ ! -x $build_dir/$step ]]; then
      echo "profile_steps.sh: $build_dir/$step not built; skipped" >&2
      continue
    fi
    profile "$step" "sgemm_kernel" "$build_dir/$step" || true
  done
  # cuBLAS's SGEMM kernel, launched by the last step's executable for its own check: its name
  # ends in "ffma" (the float64 reference's DGEMM kernel, launched earlier, does not).
  last=$(basename "${step_dirs[-1]}")
  profile "cublas" "ffma" "$build_dir/$last" || true
} >"$out"
