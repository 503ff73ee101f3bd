#!/usr/bin/env python3
"""Turns the raw Nsight Compute CSV that profile_steps.sh writes into the Markdown tables the
write-ups quote: what each kernel spends its issue slots on, its shared-memory traffic, and
its warp stall reasons per issued instruction.

usage: profile_table.py PROFILE.csv [TITLE]
"""
import csv
import sys

REASONS = ["selected", "not_selected", "long_scoreboard", "short_scoreboard", "mio_throttle",
           "lg_throttle", "barrier", "wait", "dispatch_stall", "math_pipe_throttle"]


def number(row, name):
    return float(row[name].replace(",", ""))


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    with open(argv[0], newline="") as f:
        rows = list(csv.DictReader(f))
    units = next(r for r in rows if r["label"] == "units")
    kernels = [r for r in rows if r["label"] != "units"]
    assert units["gpu__time_duration.sum"] == "ns", "time expected in ns"
    title = argv[1] if len(argv) > 1 else "Nsight Compute, one launch of each kernel"
    out = [f"### {title}", "",
           "| kernel | time (ms) | registers | warps active (% of 64) | issue slots used (%) "
           "| instructions (M) | FFMA share (%) | FMA pipe busy (%) | shared load instr. (M) "
           "| shared load wavefronts (M) | per instr. | load conflicts (M) | store conflicts (M) "
           "| DRAM read (GB) | L2 (GB) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in kernels:
        instructions = number(r, "smsp__inst_executed.sum")
        ffma = number(r, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum") / 32
        loads = number(r, "smsp__inst_executed_op_shared_ld.sum")
        wavefronts = number(r, "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
        per = f"{wavefronts / loads:.2f}" if loads else ""
        out.append(
            f"| {r['label']} | {number(r, 'gpu__time_duration.sum') / 1e6:.2f} "
            f"| {r['launch__registers_per_thread']} "
            f"| {number(r, 'sm__warps_active.avg.pct_of_peak_sustained_active'):.1f} "
            f"| {number(r, 'smsp__issue_active.avg.pct_of_peak_sustained_active'):.1f} "
            f"| {instructions / 1e6:,.0f} | {100 * ffma / instructions:.1f} "
            f"| {number(r, 'sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active'):.1f} "
            f"| {loads / 1e6:,.1f} | {wavefronts / 1e6:,.1f} | {per} "
            f"| {number(r, 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum') / 1e6:,.2f} "
            f"| {number(r, 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum') / 1e6:,.2f} "
            f"| {number(r, 'dram__bytes_read.sum') / 1e9:.2f} "
            f"| {number(r, 'lts__t_bytes.sum') / 1e9:.1f} |")
    out += ["", "FFMA share = thread-level FFMAs / 32 / warp instructions issued. Per instr. = "
            "shared load wavefronts per shared load instruction.", ""]
    out += ["#### Warp stall reasons, cycles per issued instruction", "",
            "`smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`: on average, "
            "how many warps were in that state per cycle in which the scheduler issued. "
            "Summed over all reasons (the column 'all') they give the cycles between two "
            "instructions of one warp, Nsight Compute's Warp Cycles Per Issued Instruction "
            "(`smsp__average_warp_latency_per_inst_issued.ratio`, the column 'ncu'); 'selected' "
            "is the issuing warp itself, 1 by definition. The remaining reasons are under 'other'.",
            ""]
    out.append("| kernel | " + " | ".join(REASONS) + " | other | all | ncu |")
    out.append("|---|" + "---:|" * (len(REASONS) + 3))
    for r in kernels:
        stalls = {k.split("stalled_")[1].split("_per_issue")[0]: number(r, k)
                  for k in r if k.startswith("smsp__average_warps_issue_stalled_")}
        other = sum(v for k, v in stalls.items() if k not in REASONS)
        out.append(f"| {r['label']} | " + " | ".join(f"{stalls[k]:.2f}" for k in REASONS)
                   + f" | {other:.2f} | {sum(stalls.values()):.2f} "
                   f"| {number(r, 'smsp__average_warp_latency_per_inst_issued.ratio'):.2f} |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
