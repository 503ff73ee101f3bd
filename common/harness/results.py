#!/usr/bin/env python3
"""Reads the CSV rows that the step executables print with --csv, by column name, and turns
them into what run_all.sh shows: one progress line per row, the Markdown progression tables
(one per precision and problem shape), and the progression plot; and fills the measured table
of every step's README from the canonical run.

usage:
  results.py progress FILE.csv             one line per row: shape, GFLOPS, % of cuBLAS, check
  results.py table FILE.csv [FILE.csv ...]  the Markdown progression tables
  results.py plot FILE.csv OUT.png          GFLOPS per step, log scale (needs matplotlib)
  results.py lessons CANONICAL.csv [--shapes SHAPES.csv] [--check] [README.md ...]
                                            fill the measured tables of the step READMEs
                                            (default: steps/*/README.md); --check rewrites
                                            nothing and lists every table that differs
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

Exit status: 0 done, 1 (lessons --check) a table differs, 2 bad usage, a CSV without the
columns needed, or (lessons) a marker without its partner or a step the CSV does not have,
3 (plot) no matplotlib.
"""
import csv
import io
import pathlib
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


# --- the measured tables of the step READMEs --------------------------------------------------
TABLE_BEGIN = "<!-- measured table: step "
TABLE_END = "<!-- end measured table -->"
REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


def size_label(row):
    """4096^3 for a cube, else MxNxK."""
    m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
    return f"{m}^3" if m == n == k else f"{m}x{n}x{k}"


def step_number(row):
    try:
        return int(row["step"])
    except ValueError:
        raise LessonError(f"step '{row['step']}' in the CSV is not a number") from None


def with_check(value, check):
    """A GFLOPS cell; a result that failed its check says so."""
    return grouped(value) if check == "pass" else f"{grouped(value)} (check: {check})"


def lesson_table(rows, step):
    """The Markdown table of step `step` (an int): see the module's docstring."""
    numbers = sorted({step_number(r) for r in rows})
    if step not in numbers:
        raise LessonError(f"step {step:02d} is not in the CSV (it has steps "
                          f"{', '.join(f'{n:02d}' for n in numbers)})")
    earlier = [n for n in numbers if n < step]
    previous = earlier[-1] if earlier else None
    mine = [r for r in rows if step_number(r) == step]
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
        cells += [with_check(r["cublas_gflops"], r["cublas_check"]), r["pct_cublas_text"] + "%"]
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
    expected = {"progress": (1, 1), "table": (1, None), "plot": (2, 2), "lessons": (1, None)}
    if command not in expected:
        print(f"results.py: unknown command '{command}' (progress, table, plot, lessons)",
              file=sys.stderr)
        return 2
    low, high = expected[command]
    if len(files) < low or (high is not None and len(files) > high):
        print(f"results.py: wrong number of files for '{command}'; see --help", file=sys.stderr)
        return 2
    inputs = files[:1] if command in ("plot", "lessons") else files
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
    else:
        return plot(rows, files[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
