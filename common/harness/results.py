#!/usr/bin/env python3
"""Reads the CSV rows that the step executables print with --csv, by column name, and turns
them into what run_all.sh shows: one progress line per row, the Markdown progression tables
(one per precision and problem shape), and the progression plot.

usage:
  results.py progress FILE.csv             one line per row: shape, GFLOPS, % of cuBLAS, check
  results.py table FILE.csv [FILE.csv ...]  the Markdown progression tables
  results.py plot FILE.csv OUT.png          GFLOPS per step, log scale (needs matplotlib)
  results.py --help

"% of cuBLAS" is always the step's GFLOPS divided by cuBLAS's GFLOPS measured in the same
process on the same inputs (equivalently cuBLAS's median time over the step's): the tables
print both GFLOPS beside it, so every percentage can be recomputed from its own row.

Exit status: 0 done, 2 bad usage or a CSV without the columns needed, 3 (plot) no matplotlib.
"""
import csv
import io
import statistics
import sys

# The columns this reader needs; the step executables write more (common/harness/report.cpp).
REQUIRED = ["step", "name", "precision", "m", "n", "k", "gflops", "cublas_gflops",
            "pct_cublas", "check", "cublas_check"]
NUMERIC = ["m", "n", "k", "gflops", "cublas_gflops", "pct_cublas"]

# How each precision's table is titled, and what its steps are measured against.
PRECISION_TITLES = {
    "fp32": "FP32 (CUDA cores) against cuBLAS SGEMM",
    "bf16": "BF16 in, FP32 accumulation (tensor cores) against cuBLAS BF16",
}


class CsvError(Exception):
    pass


def read_rows(texts):
    """Rows (dicts) of one or more CSV texts; repeated headers and '#' lines are skipped.
    Raises CsvError naming what is wrong: a missing column, a short row, a non-number."""
    rows = []
    for name, text in texts:
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        if not lines:
            continue
        reader = csv.reader(io.StringIO("\n".join(lines)))
        header = next(reader)
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise CsvError(f"{name}: no column {', '.join(missing)} in the header")
        for number, fields in enumerate(reader, start=2):
            if fields == header:
                continue  # a header repeated by concatenated files
            if len(fields) != len(header):
                raise CsvError(f"{name}:{number}: {len(fields)} fields, the header has "
                               f"{len(header)}")
            row = dict(zip(header, fields))
            for column in NUMERIC:
                try:
                    row[column] = float(row[column])
                except ValueError:
                    raise CsvError(f"{name}:{number}: column {column} holds "
                                   f"'{row[column]}', not a number") from None
            rows.append(row)
    return rows


def shape_of(row):
    return f"{int(row['m'])}x{int(row['n'])}x{int(row['k'])}"


def grouped(value):
    """50712.3 -> '50,712'."""
    return f"{round(value):,}"


def progress_lines(rows):
    return [f"{shape_of(r):<20} {r['gflops']:10.1f} GFLOPS  {r['pct_cublas']:5.1f}% of cuBLAS "
            f"({r['cublas_gflops']:.1f})  {r['check']}" for r in rows]


def tables(rows):
    """Markdown: a heading per precision, a table per shape, steps in order."""
    out = []
    precisions = list(dict.fromkeys(r["precision"] for r in rows))
    for precision in precisions:
        in_precision = [r for r in rows if r["precision"] == precision]
        out.append(f"### {PRECISION_TITLES.get(precision, precision)}\n")
        for shape in dict.fromkeys(shape_of(r) for r in in_precision):
            in_shape = sorted((r for r in in_precision if shape_of(r) == shape),
                              key=lambda r: r["step"])
            out.append(f"#### {shape}\n")
            out.append("| step | kernel | GFLOPS | cuBLAS GFLOPS (same run) | % of cuBLAS "
                       "| speedup over previous step | check |")
            out.append("|---:|---|---:|---:|---:|---:|---|")
            previous = None
            for r in in_shape:
                speedup = f"{r['gflops'] / previous:.2f}x" if previous else ""
                check = r["check"]
                if r["cublas_check"] != "pass":
                    check += " (cuBLAS: " + r["cublas_check"] + ")"
                out.append(f"| {r['step']} | {r['name']} | {grouped(r['gflops'])} | "
                           f"{grouped(r['cublas_gflops'])} | {r['pct_cublas']:.1f}% | {speedup} "
                           f"| {check} |")
                previous = r["gflops"]
            out.append("")
    out.append("% of cuBLAS = GFLOPS / cuBLAS GFLOPS of the same row: both medians, measured in "
               "the step's own process on the same inputs, step and cuBLAS runs alternating.")
    return "\n".join(out) + "\n"


def plot(rows, out_path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("results.py: matplotlib is not installed (pip install matplotlib); no plot drawn",
              file=sys.stderr)
        return 3
    steps = sorted({(r["step"], r["name"]) for r in rows})
    fig, ax = plt.subplots(figsize=(12, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    series = list(dict.fromkeys((r["precision"], shape_of(r)) for r in rows))
    for i, (precision, shape) in enumerate(series):
        color = colors[i % len(colors)]
        by_step = {(r["step"], r["name"]): r for r in rows
                   if r["precision"] == precision and shape_of(r) == shape}
        xs = [j for j, s in enumerate(steps) if s in by_step]
        ys = [by_step[steps[j]]["gflops"] for j in xs]
        cublas = statistics.median(r["cublas_gflops"] for r in by_step.values())
        ax.plot(xs, ys, marker="o", color=color,
                label=f"{precision} {shape}  (cuBLAS {cublas / 1000:.1f} TFLOP/s, dashed)")
        ax.axhline(cublas, color=color, linestyle="--", linewidth=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(steps)))
    ax.set_xticklabels([f"{s} {n}" for s, n in steps], rotation=30, ha="right")
    ax.set_ylabel("GFLOPS (log scale)")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    # Upper left: above the first FP32 steps and below the tensor-core yardsticks, where no
    # step's point lands.
    ax.legend(title="precision, problem (MxNxK)", loc="upper left", fontsize="small")
    ax.set_title(f"GEMM, step by step: {rows[0].get('gpu', '')}")
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    print(f"plot written to {out_path}", file=sys.stderr)
    return 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    command, files = argv[0], argv[1:]
    expected = {"progress": (1, 1), "table": (1, None), "plot": (2, 2)}
    if command not in expected:
        print(f"results.py: unknown command '{command}' (progress, table, plot)", file=sys.stderr)
        return 2
    low, high = expected[command]
    if len(files) < low or (high is not None and len(files) > high):
        print(f"results.py: wrong number of files for '{command}'; see --help", file=sys.stderr)
        return 2
    inputs = files[:1] if command == "plot" else files
    try:
        texts = []
        for name in inputs:
            with open(name, encoding="utf-8") as f:
                texts.append((name, f.read()))
        rows = read_rows(texts)
    except (OSError, CsvError) as error:
        print(f"results.py: {error}", file=sys.stderr)
        return 2
    if not rows and command != "progress":
        print(f"results.py: no result rows in {', '.join(inputs)}", file=sys.stderr)
        return 2
    if command == "progress":
        for line in progress_lines(rows):
            print(line)
    elif command == "table":
        print(tables(rows), end="")
    else:
        return plot(rows, files[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
