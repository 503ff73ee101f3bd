#!/usr/bin/env python3
"""Reads the CSV rows that the step executables print with --csv, by column name, and turns
them into what run_all.sh shows: one progress line per row, the Markdown progression tables
(one per precision and problem shape), the progression plot, and the shape atlas; and fills the
measured table of every step's README from the canonical run.

usage:
  results.py progress FILE.csv             one line per row: shape, GFLOPS, % of cuBLAS, check
  results.py table FILE.csv [FILE.csv ...]  the Markdown progression tables
  results.py plot FILE.csv OUT.png          GFLOPS per step, log scale (needs matplotlib)
  results.py lessons CANONICAL.csv [--shapes SHAPES.csv] [--check] [README.md ...]
                                            fill the measured tables of the step READMEs
                                            (default: steps/*/README.md); --check rewrites
                                            nothing and lists every table that differs
  results.py atlas-shapes                   the shape atlas's grid, one size a line, in the
                                            executables' syntax (MxNxK, MxNxK:ld+P)
  results.py atlas-progress TOTAL           reads a step's CSV on stdin as it is printed and
                                            prints one progress line per row ([i/TOTAL] ...)
  results.py atlas FILE.csv OUT_PREFIX      the atlas of the one step in FILE.csv: OUT_PREFIX.md
                                            (a summary, then a table per panel) and, with
                                            matplotlib, the heat maps OUT_PREFIX_pct.png (% of
                                            cuBLAS) and OUT_PREFIX_cublas.png (cuBLAS TFLOP/s)
  results.py --help

A step README marks where its table goes with two lines, and everything between them is
replaced by a table generated from the canonical CSV (never edit it by hand):

    <!-- measured table: step NN -->
    <!-- end measured table -->

A block that starts with `<!-- measured table: step NN, shapes -->` is filled the same way from
SHAPES.csv instead (the steps measured at the shapes where one idea or another pays).

The table has one row per problem size that the CSV has for step NN, in the CSV's order: step
NN's GFLOPS, the GFLOPS of the step before it in the CSV (PP), the cuBLAS GFLOPS measured beside
step NN, step NN's % of cuBLAS, and step NN's GFLOPS over step PP's. The first step of the CSV
has no PP columns; where PP has another precision (step 14, the first BF16 step, after the FP32
step 13), the column says so: "step 13 (FP32) GFLOPS". A result whose check failed says so
beside its GFLOPS; "-" marks a size that PP was not measured at.

"% of cuBLAS" is always the step's GFLOPS divided by cuBLAS's GFLOPS measured in the same
process on the same inputs (equivalently cuBLAS's median time over the step's): the tables
print both GFLOPS beside it, so every percentage can be recomputed from its own row.

The shape atlas measures one step over a fixed grid of about a hundred shapes (PANELS below):
square outputs by depth, small M against large N = K, sizes just off the powers of two and
padded leading dimensions, and the projections of a real model. Each panel is a heat map whose
cells say how far the step is from cuBLAS at that shape; a shape that two panels share is
measured once, and the summary counts it once.

Exit status: 0 done, 1 (lessons --check) a table differs, 2 bad usage, a CSV without the
columns needed, (lessons) a marker without its partner or a step the CSV does not have, or
(atlas) rows of several steps, 3 (plot) no matplotlib. The atlas's heat maps are optional:
without matplotlib it writes the Markdown, says so and exits 0.
"""
import csv
import dataclasses
import io
import math
import pathlib
import statistics
import sys
from typing import Callable

# The columns this reader needs; the step executables write more (common/harness/report.cpp).
REQUIRED = ["step", "name", "precision", "m", "n", "k", "gflops", "cublas_gflops",
            "pct_cublas", "check", "cublas_check"]
NUMERIC = ["m", "n", "k", "gflops", "cublas_gflops", "pct_cublas"]
# Columns added later, at the end of the row: a file written before has none, read as 0.
LATER_INTEGERS = ["ld_pad"]

# How each precision's table is titled, and what its steps are measured against.
PRECISION_TITLES = {
    "fp32": "FP32 against cuBLAS SGEMM (steps 01-13 on CUDA cores, 28 on tensor cores)",
    "bf16": "BF16 in, FP32 accumulation (tensor cores) against cuBLAS BF16",
    "fp8": "scaled FP8 (E4M3) in, BF16 out (tensor cores) against cuBLASLt FP8, fast accumulation off",
}


class CsvError(Exception):
    pass


class LessonError(Exception):
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
            row["pct_cublas_text"] = row["pct_cublas"]  # as printed, for the lessons' tables
            for column in NUMERIC:
                try:
                    row[column] = float(row[column])
                except ValueError:
                    raise CsvError(f"{name}:{number}: column {column} holds "
                                   f"'{row[column]}', not a number") from None
            for column in LATER_INTEGERS:
                try:
                    row[column] = int(row.get(column, "0"))
                except ValueError:
                    raise CsvError(f"{name}:{number}: column {column} holds "
                                   f"'{row[column]}', not a whole number") from None
            rows.append(row)
    return rows


def shape_text(m, n, k, ld_pad=0):
    """A size as the executables write and read it: 4096x4096x4096, or 4096x4096x4096:ld+8."""
    return f"{m}x{n}x{k}" + (f":ld+{ld_pad}" if ld_pad else "")


def shape_of(row):
    return shape_text(int(row["m"]), int(row["n"]), int(row["k"]), row.get("ld_pad", 0))


def grouped(value):
    """50712.3 -> '50,712'; 'n/a' for NaN (a baseline that offers nothing at the shape)."""
    return "n/a" if math.isnan(value) else f"{round(value):,}"


def percent(value):
    """99.04 -> '99.0%'; 'n/a' for NaN."""
    return "n/a" if math.isnan(value) else f"{value:.1f}%"


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
                if r["cublas_check"] == "none":
                    check += " (no baseline at this shape)"
                elif r["cublas_check"] != "pass":
                    check += " (cuBLAS: " + r["cublas_check"] + ")"
                out.append(f"| {r['step']} | {r['name']} | {grouped(r['gflops'])} | "
                           f"{grouped(r['cublas_gflops'])} | {percent(r['pct_cublas'])} | {speedup} "
                           f"| {check} |")
                previous = r["gflops"]
            out.append("")
    out.append("% of cuBLAS = GFLOPS / cuBLAS GFLOPS of the same row: both medians, measured in "
               "the step's own process on the same inputs, step and cuBLAS runs alternating.")
    return "\n".join(out) + "\n"


# --- the measured tables of the step READMEs --------------------------------------------------
TABLE_BEGIN = "<!-- measured table: step "
TABLE_END = "<!-- end measured table -->"
REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


def size_label(row):
    """4096^3 for a cube, else MxNxK; either with :ld+P when the rows are padded."""
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    padding = f":ld+{row['ld_pad']}" if row.get("ld_pad", 0) else ""
    return (f"{m}^3" if m == n == k else f"{m}x{n}x{k}") + padding


def step_number(row):
    try:
        return int(row["step"])
    except ValueError:
        raise LessonError(f"step '{row['step']}' in the CSV is not a number") from None


def with_check(value, check):
    """A GFLOPS cell; a result that failed its check says so ("none": nothing was run)."""
    if check == "none":
        return "n/a"
    return grouped(value) if check == "pass" else f"{grouped(value)} (check: {check})"


def lesson_table(rows, step):
    """The Markdown table of step `step` (an int): see the module's docstring."""
    numbers = sorted({step_number(r) for r in rows})
    if step not in numbers:
        raise LessonError(f"step {step:02d} is not in the CSV (it has steps "
                          f"{', '.join(f'{n:02d}' for n in numbers)})")
    mine = [r for r in rows if step_number(r) == step]
    # The step before it in its own precision (step 28, FP32 on tensor cores, after step 13), or
    # where there is none, the step just before it (step 14, the first BF16 step, after step 13).
    earlier = [n for n in numbers if n < step]
    same_precision = [n for n in earlier
                      if any(step_number(r) == n and r["precision"] == mine[0]["precision"]
                             for r in rows)]
    previous = (same_precision or earlier or [None])[-1]
    theirs = {size_label(r): r for r in rows if step_number(r) == previous}
    sizes = [size_label(r) for r in mine]
    for size in sizes:
        if sizes.count(size) > 1:
            raise LessonError(f"step {step:02d} has {sizes.count(size)} rows for {size} in the CSV")

    header = ["size", f"step {step:02d} GFLOPS"]
    if previous is not None:
        previous_label = f"step {previous:02d}"
        precisions = {r["precision"] for r in rows if step_number(r) == previous}
        if precisions != {mine[0]["precision"]}:
            previous_label += f" ({'/'.join(sorted(p.upper() for p in precisions))})"
        header.append(f"{previous_label} GFLOPS")
    header += ["cuBLAS GFLOPS", "% of cuBLAS"]
    if previous is not None:
        header.append(f"x step {previous:02d}")
    lines = ["| " + " | ".join(header) + " |",
             "|---" + "|---:" * (len(header) - 1) + "|"]
    for r in mine:
        cells = [size_label(r), with_check(r["gflops"], r["check"])]
        other = theirs.get(size_label(r))
        if previous is not None:
            cells.append(with_check(other["gflops"], other["check"]) if other else "-")
        cells += [with_check(r["cublas_gflops"], r["cublas_check"]),
                  "n/a" if math.isnan(r["pct_cublas"]) else r["pct_cublas_text"] + "%"]
        if previous is not None:
            ratio = r["gflops"] / other["gflops"] if other and other["gflops"] > 0 else None
            cells.append(f"{ratio:.2f}" if ratio is not None else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def fill_tables(text, rows, name):
    """The text with every measured-table block filled from rows[""] (the canonical run) or, for
    a block marked ", shapes", rows["shapes"], and [(line, step, changed)] for each block. Raises LessonError naming the file and line of a malformed block or a step that the
    CSV does not have."""
    lines = text.split("\n")
    out, blocks, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        stripped = line.strip()
        if stripped == TABLE_END:
            raise LessonError(f"{name}:{i + 1}: '{TABLE_END}' without a '{TABLE_BEGIN}NN -->' "
                              "before it")
        if not stripped.startswith(TABLE_BEGIN):
            i += 1
            continue
        number = stripped[len(TABLE_BEGIN):]
        source = ""
        if number.endswith(", shapes -->"):
            source = "shapes"
            number = number[:-len(", shapes -->")] + " -->"
        if not number.endswith(" -->") or not number[:-4].isdigit():
            raise LessonError(f"{name}:{i + 1}: expected '{TABLE_BEGIN}NN -->' or "
                              f"'{TABLE_BEGIN}NN, shapes -->' (NN: a step number), found "
                              f"'{stripped}'")
        step = int(number[:-4])
        if source not in rows:
            raise LessonError(f"{name}:{i + 1}: the measured table of step {step:02d} is "
                              "filled from the shapes CSV, and none was given (--shapes FILE)")
        end = i + 1
        while end < len(lines) and lines[end].strip() != TABLE_END:
            if lines[end].strip().startswith(TABLE_BEGIN):
                break
            end += 1
        if end == len(lines) or lines[end].strip() != TABLE_END:
            raise LessonError(f"{name}:{i + 1}: the measured table of step {step:02d} has no "
                              f"'{TABLE_END}' after it")
        try:
            table = [""] + lesson_table(rows[source], step) + [""]
        except LessonError as error:
            raise LessonError(f"{name}:{i + 1}: {error}") from None
        blocks.append((i + 1, step, lines[i + 1:end] != table))
        out += table + [lines[end]]
        i = end + 1
    return "\n".join(out), blocks


def lessons(csv_name, rows, files, check):
    """The `lessons` command; returns the exit status."""
    if not files:
        files = [(str(p.relative_to(REPOSITORY)), p)
                 for p in sorted(REPOSITORY.glob("steps/*/README.md"))]
    else:
        files = [(f, pathlib.Path(f)) for f in files]
    updates, errors, differing, count = [], [], [], 0
    for name, path in files:
        try:
            text = path.read_text(encoding="utf-8")
            filled, blocks = fill_tables(text, rows, name)
        except (OSError, LessonError) as error:
            errors.append(str(error))
            continue
        count += len(blocks)
        differing += [(name, line, step) for line, step, changed in blocks if changed]
        if filled != text:
            updates.append((path, filled))
    for error in errors:
        print(f"results.py: {error}", file=sys.stderr)
    if errors:
        return 2
    if check:
        for name, line, step in differing:
            print(f"{name}:{line}: the measured table of step {step:02d} differs from {csv_name}")
        if differing:
            print(f"results.py: {len(differing)} measured table(s) differ; to rewrite them: "
                  f"python3 common/harness/results.py lessons {csv_name}", file=sys.stderr)
            return 1
        print(f"results.py: the {count} measured table(s) in {len(files)} file(s) match {csv_name}")
        return 0
    for path, filled in updates:
        path.write_text(filled, encoding="utf-8")
    print(f"results.py: {count} measured table(s) in {len(files)} file(s), {len(differing)} "
          f"rewritten from {csv_name}", file=sys.stderr)
    return 0


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
    colors = plt.get_cmap("tab20").colors  # 20 distinct colours: one per series of every precision
    series = list(dict.fromkeys((r["precision"], shape_of(r)) for r in rows))
    for i, (precision, shape) in enumerate(series):
        color = colors[i % len(colors)]
        by_step = {(r["step"], r["name"]): r for r in rows
                   if r["precision"] == precision and shape_of(r) == shape}
        xs = [j for j, s in enumerate(steps) if s in by_step]
        measured = [r["cublas_gflops"] for r in by_step.values() if not math.isnan(r["cublas_gflops"])]
        cublas = statistics.median(measured) if measured else math.nan
        # A line joins consecutive steps only: FP32 step 28 (on the tensor cores) stands apart
        # from FP32 step 13 rather than being joined to it across the BF16 steps.
        segments = [[xs[0]]]
        for previous, x in zip(xs, xs[1:]):
            if int(steps[x][0]) == int(steps[previous][0]) + 1:
                segments[-1].append(x)
            else:
                segments.append([x])
        for number, segment in enumerate(segments):
            baseline = ("no baseline" if math.isnan(cublas)
                        else f"cuBLAS {cublas / 1000:.1f} TFLOP/s, dashed")
            label = f"{precision} {shape}  ({baseline})" if number == 0 else None
            ax.plot(segment, [by_step[steps[j]]["gflops"] for j in segment], marker="o",
                    color=color, label=label)
        if not math.isnan(cublas):
            ax.axhline(cublas, color=color, linestyle="--", linewidth=1)
    ax.set_yscale("log")
    ax.set_xticks(range(len(steps)))
    ax.set_xticklabels([f"{s} {n}" for s, n in steps], rotation=30, ha="right")
    ax.set_ylabel("GFLOPS (log scale)")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    # Lower right: below the tensor-core steps, where no step's point lands; in two columns, so
    # that the three precisions' series fit.
    ax.legend(title="precision, problem (MxNxK)", loc="lower right", fontsize="x-small", ncol=2)
    ax.set_title(f"GEMM, step by step: {rows[0].get('gpu', '')}")
    fig.tight_layout()
    fig.savefig(out_path, dpi=120)
    print(f"plot written to {out_path}", file=sys.stderr)
    return 0


# --- the shape atlas --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Panel:
    """One heat map of the atlas: a shape (m, n, k, ld_pad) for every row and column."""
    title: str
    row_axis: str
    rows: list
    column_axis: str
    columns: list
    cell: Callable  # (row, column) -> (m, n, k, ld_pad)
    column_label: Callable = str


# Llama 3 8B (https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json): hidden
# size 4096; 32 query heads and 8 key-value heads of 128, so the fused QKV projection has
# 4096 + 2 * 8 * 128 = 6144 outputs; MLP size 14336, gate and up fused into 2 * 14336 = 28672.
# With M tokens a projection is C (M x N) = X (M x K) W (K x N): name -> (N, K).
LLAMA3_8B = {"QKV": (6144, 4096), "O": (4096, 4096), "gate+up": (28672, 4096),
             "down": (4096, 14336)}

# The neighbours of S^3 where tiled kernels fall off their fast path. The row pitches are
# given in bf16; FP32 rows are twice as long.
AWKWARD = {
    "S^3": lambda s: (s, s, s, 0),
    # Every dimension odd: pitches not a multiple of 16 bytes, every tile grid ragged.
    "+1": lambda s: (s + 1, s + 1, s + 1, 0),
    # Pitches a multiple of 16 bytes (what TMA and 16-byte loads need), ragged tile grids.
    "+8": lambda s: (s + 8, s + 8, s + 8, 0),
    # Whole tiles, but a pitch of S + 8 elements: a multiple of 16 bytes, not of 128.
    "ld+8": lambda s: (s, s, s, 8),
    # One dimension off by 4: the pitch of A (K+4), or of B and C (N+4), a multiple of 8 bytes
    # only, and a ragged last tile along it.
    "K+4": lambda s: (s, s, s + 4, 0),
    "N+4": lambda s: (s, s + 4, s, 0),
}

PANELS = [
    Panel("Square output (M = N) by depth K", "M = N", [64, 128, 256, 512, 1024, 2048, 4096, 8192],
          "K", [64, 256, 1024, 4096, 16384], lambda mn, k: (mn, mn, k, 0)),
    Panel("Small M against N = K", "M", [64, 128, 256, 512, 1024],
          "N = K", [2048, 4096, 8192, 16384], lambda m, nk: (m, nk, nk, 0)),
    Panel("Awkward neighbours of S^3", "S", [1024, 2048, 4096, 8192],
          "shape", list(AWKWARD), lambda s, name: AWKWARD[name](s)),
    Panel("Llama 3 8B projections (M = tokens)", "M", [128, 512, 2048, 8192],
          "projection", list(LLAMA3_8B), lambda m, name: (m, *LLAMA3_8B[name], 0),
          lambda name: f"{name} (N {LLAMA3_8B[name][0]}, K {LLAMA3_8B[name][1]})"),
]


def atlas_cell_shapes(panel):
    """The shape text of every cell of `panel`, row by row."""
    return [[shape_text(*panel.cell(r, c)) for c in panel.columns] for r in panel.rows]


def atlas_shapes():
    """Every shape of the grid once, in panel order (the first cell that needs it)."""
    return list(dict.fromkeys(s for p in PANELS for line in atlas_cell_shapes(p) for s in line))


def atlas_by_shape(rows):
    """The row of each shape (the first, should a shape have been measured twice)."""
    by_shape = {}
    for r in rows:
        by_shape.setdefault(shape_of(r), r)
    return by_shape


@dataclasses.dataclass
class AtlasSummary:
    """What the atlas's Markdown says first; every count but `cells` is of distinct shapes."""
    cells: int          # cells of all panels
    shapes: int         # distinct shapes among them
    measured: int       # distinct shapes with a row in the CSV
    geomean_pct: float  # geometric mean of % of cuBLAS over the measured shapes (nan if none)
    worst: tuple        # (shape, % of cuBLAS) of the slowest measured shape, or None
    at_least_100: int   # measured shapes at or above 100% of cuBLAS
    below_90: int       # measured shapes below 90% of cuBLAS
    step_failures: int  # measured shapes whose check failed
    cublas_failures: int  # measured shapes where cuBLAS's own check failed


def atlas_summary(rows):
    """The atlas's headline numbers from the rows of one step; each distinct shape counts once,
    whatever the number of cells that show it, and rows at shapes off the grid are ignored."""
    by_shape = atlas_by_shape(rows)
    shapes = atlas_shapes()
    measured = [by_shape[s] for s in shapes if s in by_shape]
    pcts = [r["pct_cublas"] for r in measured]
    positive = [p for p in pcts if p > 0]
    worst = min(measured, key=lambda r: r["pct_cublas"]) if measured else None
    return AtlasSummary(
        cells=sum(len(p.rows) * len(p.columns) for p in PANELS),
        shapes=len(shapes),
        measured=len(measured),
        geomean_pct=(math.exp(statistics.fmean(math.log(p) for p in positive))
                     if positive else math.nan),
        worst=(shape_of(worst), worst["pct_cublas"]) if worst else None,
        at_least_100=sum(p >= 100.0 for p in pcts),
        below_90=sum(p < 90.0 for p in pcts),
        step_failures=sum(r["check"] != "pass" for r in measured),
        cublas_failures=sum(r["cublas_check"] != "pass" for r in measured))


def tflops(gflops):
    """TFLOP/s with about three significant digits: 612, 58.1, 0.05."""
    value = gflops / 1000
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def share(count, total):
    return f"{count} of {total} shapes ({100.0 * count / total:.0f}%)" if total else "-"


def atlas_markdown(rows):
    """OUT_PREFIX.md: a title, the summary, then one table per panel."""
    first, s = rows[0], atlas_summary(rows)
    by_shape = atlas_by_shape(rows)
    geomean = f"{s.geomean_pct:.1f}% of cuBLAS" if s.measured else "-"
    worst = f"{s.worst[0]} at {s.worst[1]:.1f}% of cuBLAS" if s.worst else "-"
    out = [f"# Shape atlas: step {first['step']} {first['name']} ({first['precision']}) "
           f"on {first.get('gpu') or 'an unnamed GPU'}",
           "",
           f"- {s.cells} cells, {s.shapes} distinct shapes, {s.measured} measured "
           "(the numbers below count a shape that two panels share once)",
           f"- geometric mean: {geomean}",
           f"- worst: {worst}",
           f"- at or above 100% of cuBLAS: {share(s.at_least_100, s.measured)}",
           f"- below 90% of cuBLAS: {share(s.below_90, s.measured)}",
           f"- failed checks: {s.step_failures + s.cublas_failures} (step {s.step_failures}, "
           f"cuBLAS {s.cublas_failures})",
           ""]
    for panel in PANELS:
        out += [f"## {panel.title}", "",
                "% of cuBLAS (step TFLOP/s / cuBLAS TFLOP/s); rows: "
                f"{panel.row_axis}, columns: {panel.column_axis}; \"-\": not measured", "",
                f"| {panel.row_axis} \\ {panel.column_axis} | "
                + " | ".join(panel.column_label(c) for c in panel.columns) + " |",
                "|---:" * (len(panel.columns) + 1) + "|"]
        for value, line in zip(panel.rows, atlas_cell_shapes(panel)):
            cells = []
            for shape in line:
                r = by_shape.get(shape)
                if r is None:
                    cells.append("-")
                    continue
                cell = (f"{r['pct_cublas']:.1f}% ({tflops(r['gflops'])} / "
                        f"{tflops(r['cublas_gflops'])})")
                cell += "" if r["check"] == "pass" else f" {r['check']}"
                cell += "" if r["cublas_check"] == "pass" else f" (cuBLAS: {r['cublas_check']})"
                cells.append(cell)
            out.append(f"| {value} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("% of cuBLAS = the step's TFLOP/s over cuBLAS's: both medians, measured in the "
               "step's own process on the same inputs, step and cuBLAS runs alternating.")
    return "\n".join(out) + "\n"


def atlas_plots(rows, prefix):
    """OUT_PREFIX_pct.png and OUT_PREFIX_cublas.png, a heat map per panel; False (and a note)
    without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm, Normalize
    except ImportError:
        print("results.py: matplotlib is not installed (pip install matplotlib); no heat maps "
              f"drawn, only {prefix}.md", file=sys.stderr)
        return False
    by_shape = atlas_by_shape(rows)
    first = rows[0]
    step = f"step {first['step']} {first['name']} ({first['precision']})"
    titles = {"pct": f"Shape atlas: {step} in % of cuBLAS",
              "cublas": f"Shape atlas: cuBLAS's own TFLOP/s, measured beside {step}"}
    for kind in ("pct", "cublas"):
        fig, axes = plt.subplots(2, 2, figsize=(18, 13))
        for ax, panel in zip(axes.flat, PANELS):
            grid = [[by_shape.get(s) for s in line] for line in atlas_cell_shapes(panel)]
            if kind == "pct":
                values = [[r["pct_cublas"] if r else math.nan for r in line] for line in grid]
                # Diverging around 100%: red where the step is slower than cuBLAS, blue faster.
                norm, cmap = Normalize(vmin=50, vmax=150, clip=True), plt.get_cmap("RdBu").copy()
            else:
                values = [[r["cublas_gflops"] / 1000 if r else math.nan for r in line]
                          for line in grid]
                found = [v for line in values for v in line if v > 0]
                # Log scale: the panels span four orders of magnitude, and a cliff is a ratio.
                low, high = (min(found), max(found)) if found else (1, 10)
                norm = LogNorm(vmin=low, vmax=max(high, low * 1.01))
                cmap = plt.get_cmap("viridis").copy()
            cmap.set_bad("0.85")  # not measured
            image = ax.imshow(values, cmap=cmap, norm=norm, aspect="auto")
            for i, line in enumerate(grid):
                for j, r in enumerate(line):
                    if r is None:
                        ax.text(j, i, "-", ha="center", va="center", fontsize=8)
                        continue
                    failed = r["check"] != "pass" if kind == "pct" else r["cublas_check"] != "pass"
                    value = values[i][j]
                    text = f"{value:.1f}" if kind == "pct" else tflops(r["cublas_gflops"])
                    if failed:
                        text += "\nFAIL"
                    shade = norm(value)
                    dark = shade < 0.2 or shade > 0.8 if kind == "pct" else shade < 0.5
                    ax.text(j, i, text, ha="center", va="center", fontsize=8,
                            color="white" if dark else "black",
                            fontweight="bold" if failed else "normal")
            ax.set_xticks(range(len(panel.columns)))
            ax.set_xticklabels([panel.column_label(c) for c in panel.columns], fontsize=8)
            ax.set_yticks(range(len(panel.rows)))
            ax.set_yticklabels([str(v) for v in panel.rows], fontsize=8)
            ax.set_xlabel(panel.column_axis)
            ax.set_ylabel(panel.row_axis)
            ax.set_title(panel.title)
            label = "% of cuBLAS (colours clipped to 50-150)" if kind == "pct" else "TFLOP/s"
            fig.colorbar(image, ax=ax, label=label)
        fig.suptitle(f"{titles[kind]}, {first.get('gpu', '')}")
        fig.tight_layout()
        path = f"{prefix}_{kind}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(f"heat map written to {path}", file=sys.stderr)
    return True


def atlas(rows, prefix):
    """The `atlas` command; returns the exit status."""
    steps = list(dict.fromkeys(r["step"] for r in rows))
    if len(steps) > 1:
        print(f"results.py: the atlas is of one step, and the CSV has steps {', '.join(steps)}",
              file=sys.stderr)
        return 2
    path = f"{prefix}.md"
    with open(path, "w", encoding="utf-8") as f:
        f.write(atlas_markdown(rows))
    print(f"atlas written to {path}", file=sys.stderr)
    atlas_plots(rows, prefix)
    return 0


def atlas_progress(stream, total):
    """The `atlas-progress` command: one line per CSV row of `stream`, as soon as it arrives.
    It never stops early, so that the executable writing into the pipe is never cut off."""
    header = None
    count = 0
    for line in iter(stream.readline, ""):
        if not line.strip() or line.startswith("#"):
            continue
        if header is None or line == header:
            header = line
            continue
        count += 1
        try:
            r = read_rows([("stdin", header + line)])[0]
            check = r["check"] + ("" if r["cublas_check"] == "pass"
                                  else f" (cuBLAS: {r['cublas_check']})")
            text = (f"{shape_of(r):<19} {r['gflops'] / 1000:6.1f} vs "
                    f"{r['cublas_gflops'] / 1000:6.1f} TFLOP/s  {r['pct_cublas']:5.1f}% of "
                    f"cuBLAS  {check}")
        except (CsvError, KeyError, IndexError) as error:
            text = f"(unreadable row: {error})"
        print(f"[{count:>{len(total)}}/{total}] {text}", flush=True)
    return 0


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    command, files = argv[0], argv[1:]
    if command == "atlas-shapes":
        if files:
            print("results.py: atlas-shapes takes no arguments", file=sys.stderr)
            return 2
        for shape in atlas_shapes():
            print(shape)
        return 0
    if command == "atlas-progress":
        if len(files) != 1 or not files[0].isdigit():
            print("results.py: atlas-progress takes the number of shapes, e.g. "
                  "'atlas-progress 96'", file=sys.stderr)
            return 2
        return atlas_progress(sys.stdin, files[0])
    check = False
    shapes_csv = None
    if command == "lessons":
        check = "--check" in files
        files = [f for f in files if f != "--check"]
        if "--shapes" in files:
            at = files.index("--shapes")
            if at + 1 >= len(files):
                print("results.py: --shapes needs a CSV file", file=sys.stderr)
                return 2
            shapes_csv = files[at + 1]
            files = files[:at] + files[at + 2:]
    expected = {"progress": (1, 1), "table": (1, None), "plot": (2, 2), "lessons": (1, None),
                "atlas": (2, 2)}
    if command not in expected:
        print(f"results.py: unknown command '{command}' (progress, table, plot, lessons, "
              "atlas-shapes, atlas-progress, atlas)", file=sys.stderr)
        return 2
    low, high = expected[command]
    if len(files) < low or (high is not None and len(files) > high):
        print(f"results.py: wrong number of files for '{command}'; see --help", file=sys.stderr)
        return 2
    inputs = files[:1] if command in ("plot", "lessons", "atlas") else files
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
    elif command == "lessons":
        sources = {"": rows}
        if shapes_csv is not None:
            try:
                with open(shapes_csv, encoding="utf-8") as f:
                    sources["shapes"] = read_rows([(shapes_csv, f.read())])
            except (OSError, CsvError) as error:
                print(f"results.py: {error}", file=sys.stderr)
                return 2
        try:
            return lessons(files[0], sources, files[1:], check)
        except LessonError as error:
            print(f"results.py: {error}", file=sys.stderr)
            return 2
    elif command == "atlas":
        return atlas(rows, files[1])
    else:
        return plot(rows, files[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
