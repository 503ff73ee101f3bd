#!/usr/bin/env python3
"""Draws the progression plot: GFLOPS of every step, one line per problem size, each against a
dashed line at the median cuBLAS GFLOPS of the same runs. Reads the CSV that run_all.sh writes.

usage: plot_progression.py PROGRESSION.csv OUT.png [TITLE]
Needs matplotlib; exits with status 3 and a message when it is missing.
"""
import csv
import statistics
import sys


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_progression.py: matplotlib is not installed (pip install matplotlib); no plot drawn")
        return 3
    rows = list(csv.DictReader(open(argv[0])))
    if not rows:
        print(f"plot_progression.py: {argv[0]} has no rows")
        return 2
    shapes = []
    for r in rows:
        shape = f"{r['m']}x{r['n']}x{r['k']}"
        if shape not in shapes:
            shapes.append(shape)
    steps = sorted({(r["step"], r["name"]) for r in rows})
    labels = [f"{s} {n}" for s, n in steps]

    fig, ax = plt.subplots(figsize=(11, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, shape in enumerate(shapes):
        color = colors[i % len(colors)]
        by_step = {(r["step"], r["name"]): r for r in rows if f"{r['m']}x{r['n']}x{r['k']}" == shape}
        xs = [j for j, s in enumerate(steps) if s in by_step]
        ys = [float(by_step[steps[j]]["gflops"]) for j in xs]
        cublas = statistics.median(float(r["cublas_gflops"]) for r in by_step.values())
        ax.plot(xs, ys, marker="o", color=color,
                label=f"{shape}  (cuBLAS {cublas / 1000:.1f} TFLOP/s, dashed)")
        ax.axhline(cublas, color=color, linestyle="--", linewidth=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(steps)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.set_ylabel("GFLOPS (log scale)")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(title="problem (MxNxK)", loc="lower right")
    gpu = rows[0].get("gpu", "")
    ax.set_title(argv[2] if len(argv) > 2 else f"SGEMM, step by step: {gpu}")
    fig.tight_layout()
    fig.savefig(argv[1], dpi=120)
    print(f"plot written to {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
