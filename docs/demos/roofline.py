#!/usr/bin/env python3
"""Draws the GEMM roofline of docs/06_roofline.md: every step at 4096^3 placed by its measured
arithmetic intensity (FLOPs per byte read from DRAM, and per byte of L2 traffic, both counted by
Nsight Compute) and its measured GFLOPS, under this GPU's FP32 peak and copy bandwidth.

usage: roofline.py PROGRESSION.csv PROFILE.csv PEAK_TFLOPS COPY_GBS OUT.png
  PROGRESSION.csv  run_all.sh's CSV (the 4096x4096x4096 rows are used)
  PROFILE.csv      docs/demos/profile_steps.sh's raw Nsight Compute CSV at 4096^3
                   (dram__bytes_read.sum and lts__t_bytes.sum of every step and cuBLAS)
  PEAK_TFLOPS      FP32 FMA peak, e.g. 66.9 (build/demo_device_query prints it)
  COPY_GBS         measured copy bandwidth in GB/s (build/demo_device_query prints it)
"""
import csv
import sys


def profile_bytes(path):
    """label (step directory or "cublas") -> (DRAM read bytes, L2 bytes), from the raw CSV."""
    out = {}
    for row in csv.DictReader(open(path, newline="")):
        if row["label"] == "units":
            if row["dram__bytes_read.sum"] != "byte" or row["lts__t_bytes.sum"] != "byte":
                raise SystemExit("roofline.py: expected DRAM and L2 traffic in bytes")
            continue
        out[row["label"]] = (float(row["dram__bytes_read.sum"].replace(",", "")),
                             float(row["lts__t_bytes.sum"].replace(",", "")))
    return out


def main(argv):
    if len(argv) != 5:
        print(__doc__)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    progression, profile, peak, bandwidth, out = argv[0], argv[1], float(argv[2]) * 1e12, float(argv[3]) * 1e9, argv[4]
    flops = 2.0 * 4096 ** 3
    # The FP32 steps at 4096^3 (a progression CSV may also hold the BF16 steps and cuBLAS BF16).
    rows = [r for r in csv.DictReader(open(progression))
            if (r["m"], r["n"], r["k"]) == ("4096", "4096", "4096") and r.get("precision", "fp32") == "fp32"]
    measured = {f"{r['step']}_{r['name']}": float(r["gflops"]) * 1e9 for r in rows}
    cublas = [float(r["cublas_gflops"]) * 1e9 for r in rows]
    traffic = profile_bytes(profile)

    fig, ax = plt.subplots(figsize=(10, 6.5))
    xs = [10 ** (e / 20) for e in range(-20, 121)]  # 0.1 .. 1e6 FLOP/byte
    ax.plot(xs, [min(peak, x * bandwidth) for x in xs], color="black", linewidth=2,
            label=f"roof: min({peak / 1e12:.1f} TFLOP/s, intensity x {bandwidth / 1e9:.0f} GB/s)")
    print(f"{'step':22} {'GFLOPS':>9} {'FLOP/DRAM byte':>15} {'FLOP/L2 byte':>13} {'% of roof':>10}")
    for step in sorted(measured):
        if step not in traffic:
            continue
        dram, l2 = traffic[step]
        rate = measured[step]
        ai_dram, ai_l2 = flops / dram, flops / l2
        roof = min(peak, ai_dram * bandwidth)
        print(f"{step:22} {rate / 1e9:9.0f} {ai_dram:15.1f} {ai_l2:13.1f} {100 * rate / roof:9.1f}%")
        ax.scatter([ai_dram], [rate], s=40, zorder=3)
        ax.annotate(step[:2], (ai_dram, rate), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.scatter([ai_l2], [rate], s=40, facecolors="none", edgecolors="gray", zorder=3)
    if cublas and "cublas" in traffic:
        ai = flops / traffic["cublas"][0]
        ax.scatter([ai], [sorted(cublas)[len(cublas) // 2]], marker="*", s=160, color="black", zorder=4, label="cuBLAS")
    ax.scatter([], [], s=40, color="C0", label="step: FLOPs per byte read from DRAM")
    ax.scatter([], [], s=40, facecolors="none", edgecolors="gray", label="the same step: FLOPs per byte of L2 traffic")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.5, 1e6)
    ax.set_ylim(1e11, 1.5e14)
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("FLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("SGEMM 4096^3 on the roofline (numbers: step)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
