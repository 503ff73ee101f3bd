#!/usr/bin/env python3
"""Host tests of common/harness/results.py, the one reader of the harness's CSV (run in CI)."""
import contextlib
import io
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "harness"))
import results  # noqa: E402

# The header the step executables write (common/harness/report.cpp; host_tests pins it too).
HEADER = ("step,name,precision,m,n,k,alpha,beta,time_ms,gflops,cublas_time_ms,cublas_gflops,"
          "pct_cublas,check,max_err_over_bound,rel_error,cublas_check,gpu,ld_pad")
# The header before ld_pad was added: such files must still read.
OLD_HEADER = HEADER[:-len(",ld_pad")]


def row(step, name, shape, gflops, cublas_gflops, check="pass", precision="fp32",
        cublas_check="pass", ld_pad=0):
    m, n, k = shape
    pct = 100.0 * gflops / cublas_gflops
    return (f"{step},{name},{precision},{m},{n},{k},1,0,1.0,{gflops},1.0,{cublas_gflops},"
            f"{pct:.1f},{check},0.01,1e-7,{cublas_check},\"NVIDIA H100 80GB HBM3, SXM\",{ld_pad}")


def old_row(*args, **kwargs):
    """A row as the executables wrote it before the ld_pad column."""
    return row(*args, **kwargs)[:-len(",0")]


class ReadRows(unittest.TestCase):
    def test_columns_by_name_and_repeated_headers(self):
        text = "\n".join(["# a comment", HEADER, row("01", "naive", (4, 4, 4), 10, 100),
                          HEADER, row("02", "coalesced", (4, 4, 4), 50, 100)])
        rows = results.read_rows([("x.csv", text)])
        self.assertEqual([r["step"] for r in rows], ["01", "02"])
        self.assertEqual(rows[1]["gflops"], 50.0)
        self.assertEqual(rows[0]["gpu"], "NVIDIA H100 80GB HBM3, SXM")  # quoted comma

    def test_missing_column_is_named(self):
        with self.assertRaisesRegex(results.CsvError, "cublas_gflops"):
            results.read_rows([("x.csv", "step,name,precision,m,n,k,gflops\n01,a,fp32,1,1,1,2\n")])

    def test_ld_pad_optional_and_in_the_shape(self):
        old = results.read_rows([("old.csv", OLD_HEADER + "\n" +
                                  old_row("01", "naive", (4, 4, 4), 10, 100) + "\n")])
        self.assertEqual(old[0]["ld_pad"], 0)
        self.assertEqual(results.shape_of(old[0]), "4x4x4")
        rows = results.read_rows([("x.csv", "\n".join([
            HEADER, row("26", "t", (4096, 4096, 4096), 1, 2),
            row("26", "t", (4096, 4096, 4096), 1, 2, ld_pad=8),
            row("26", "t", (1000, 3000, 2000), 1, 2, ld_pad=16)]))])
        self.assertEqual([r["ld_pad"] for r in rows], [0, 8, 16])
        self.assertEqual([results.shape_of(r) for r in rows],
                         ["4096x4096x4096", "4096x4096x4096:ld+8", "1000x3000x2000:ld+16"])
        self.assertEqual([results.size_label(r) for r in rows],
                         ["4096^3", "4096^3:ld+8", "1000x3000x2000:ld+16"])
        tables = results.tables(rows)
        self.assertIn("#### 4096x4096x4096\n", tables)
        self.assertIn("#### 4096x4096x4096:ld+8\n", tables)
        # Both files together (the old one first), as run_all.sh's progression.csv could be.
        both = results.read_rows([("old.csv", OLD_HEADER + "\n" +
                                   old_row("01", "naive", (4, 4, 4), 10, 100)),
                                  ("new.csv", HEADER + "\n" +
                                   row("01", "naive", (4, 4, 4), 10, 100, ld_pad=8))])
        self.assertEqual([results.shape_of(r) for r in both], ["4x4x4", "4x4x4:ld+8"])
        bad = row("01", "naive", (4, 4, 4), 10, 100)[:-1] + "eight"
        with self.assertRaisesRegex(results.CsvError, "ld_pad"):
            results.read_rows([("x.csv", HEADER + "\n" + bad + "\n")])

    def test_short_row_and_non_number(self):
        with self.assertRaisesRegex(results.CsvError, "fields"):
            results.read_rows([("x.csv", HEADER + "\n01,naive\n")])
        bad = row("01", "naive", (4, 4, 4), 10, 100).replace(",10,", ",ten,", 1)
        with self.assertRaisesRegex(results.CsvError, "gflops"):
            results.read_rows([("x.csv", HEADER + "\n" + bad + "\n")])


class Tables(unittest.TestCase):
    def setUp(self):
        big, odd = (4096, 4096, 4096), (4097, 4097, 4097)
        lines = [HEADER,
                 row("02", "coalesced", big, 20000, 50000),  # out of order on purpose
                 row("01", "naive", big, 5000, 50000),
                 row("01", "naive", odd, 4000, 40000),
                 row("02", "coalesced", odd, 8000, 40000, check="FAIL"),
                 row("20", "wmma", big, 300000, 750000, precision="bf16", cublas_check="FAIL")]
        self.text = results.tables(results.read_rows([("x.csv", "\n".join(lines))]))

    def test_one_table_per_precision_and_shape_steps_in_order(self):
        t = self.text
        fp32, bf16 = t.index("### FP32"), t.index("### BF16")
        big, odd = t.index("#### 4096x4096x4096"), t.index("#### 4097x4097x4097")
        self.assertLess(fp32, big)
        self.assertLess(big, odd)
        self.assertLess(odd, bf16)
        self.assertLess(t.index("| 01 | naive | 5,000 |"), t.index("| 02 | coalesced | 20,000 |"))

    def test_every_percentage_recomputable_from_its_row(self):
        self.assertIn("| 01 | naive | 5,000 | 50,000 | 10.0% |  |", self.text)
        self.assertIn("| 02 | coalesced | 20,000 | 50,000 | 40.0% | 4.00x |", self.text)

    def test_failures_show(self):
        self.assertIn("| 8,000 | 40,000 | 20.0% | 2.00x | FAIL |", self.text)
        self.assertIn("pass (cuBLAS: FAIL)", self.text)


class NoBaseline(unittest.TestCase):
    """A shape where the baseline offers nothing (cuBLASLt's FP8 at 4097^3): its time, GFLOPS and
    percentage are NaN and its check is "none"; the tables say n/a instead of failing."""

    def test_nan_baseline_reads_and_prints_as_n_a(self):
        line = ("29,fp8_wgmma,fp8,4097,4097,4097,1,0,0.2840,486487.1,nan,nan,nan,pass,0.0006,"
                "0.002,none,NVIDIA H100 80GB HBM3,0")
        rows = results.read_rows([("x.csv", HEADER + "\n" + line + "\n")])
        text = results.tables(rows)
        self.assertIn("| 29 | fp8_wgmma | 486,487 | n/a | n/a |  | pass (no baseline at this shape) |",
                      text)
        self.assertIn("### scaled FP8", text)
        self.assertEqual(results.with_check(float("nan"), "none"), "n/a")


class Lessons(unittest.TestCase):
    """The measured tables of the step READMEs (results.py lessons)."""
    CUBE, ODD = (4096, 4096, 4096), (1000, 3000, 2000)

    def rows(self, *lines):
        return results.read_rows([("canonical.csv", "\n".join([HEADER, *lines]))])

    def setUp(self):
        # Steps 12, 13 (FP32) and 14, 16 (BF16; no step 15 in this CSV), sizes in CSV order.
        self.canonical = self.rows(
            row("12", "autotuned_tile", self.CUBE, 46704.3, 49380.0),
            row("12", "autotuned_tile", self.ODD, 30000.0, 40000.0),
            row("13", "block_scheduling", self.CUBE, 45938.0, 49299.0),
            row("13", "block_scheduling", self.ODD, 36000.0, 40000.0),
            row("14", "wmma", self.ODD, 102684.0, 329526.0, precision="bf16"),
            row("14", "wmma", self.CUBE, 202746.0, 720632.0, precision="bf16"),
            row("16", "swizzled_pipeline", self.CUBE, 405492.0, 720632.0, precision="bf16"),
            row("16", "swizzled_pipeline", (8192, 8192, 8192), 500000.0, 785545.0,
                precision="bf16", check="FAIL"))

    def test_first_step_has_no_previous_step(self):
        self.assertEqual(results.lesson_table(self.canonical, 12), [
            "| size | step 12 GFLOPS | cuBLAS GFLOPS | % of cuBLAS |",
            "|---|---:|---:|---:|",
            "| 4096^3 | 46,704 | 49,380 | 94.6% |",
            "| 1000x3000x2000 | 30,000 | 40,000 | 75.0% |"])

    def test_previous_step_ratio_and_size_order(self):
        self.assertEqual(results.lesson_table(self.canonical, 13), [
            "| size | step 13 GFLOPS | step 12 GFLOPS | cuBLAS GFLOPS | % of cuBLAS | x step 12 |",
            "|---|---:|---:|---:|---:|---:|",
            "| 4096^3 | 45,938 | 46,704 | 49,299 | 93.2% | 0.98 |",
            "| 1000x3000x2000 | 36,000 | 30,000 | 40,000 | 90.0% | 1.20 |"])

    def test_previous_precision_named_and_csv_order_kept(self):
        table = results.lesson_table(self.canonical, 14)
        self.assertEqual(table[0], "| size | step 14 GFLOPS | step 13 (FP32) GFLOPS | "
                                   "cuBLAS GFLOPS | % of cuBLAS | x step 13 |")
        self.assertEqual(table[2], "| 1000x3000x2000 | 102,684 | 36,000 | 329,526 | 31.2% | 2.85 |")
        self.assertEqual(table[3], "| 4096^3 | 202,746 | 45,938 | 720,632 | 28.1% | 4.41 |")

    def test_previous_step_present_not_number_minus_one(self):
        table = results.lesson_table(self.canonical, 16)
        self.assertIn("step 14 GFLOPS", table[0])
        self.assertNotIn("(BF16)", table[0])
        self.assertEqual(table[2], "| 4096^3 | 405,492 | 202,746 | 720,632 | 56.3% | 2.00 |")
        # No step 14 row at 8192^3, and step 16's check failed there: both show.
        self.assertEqual(table[3], "| 8192^3 | 500,000 (check: FAIL) | - | 785,545 | 63.7% | - |")

    def test_percentage_as_printed_in_the_csv(self):
        line = row("12", "autotuned_tile", self.CUBE, 1000.0, 3000.0).replace(",33.3,", ",33.34,")
        self.assertIn("| 33.34% |", results.lesson_table(self.rows(line), 12)[2])

    def test_step_not_in_csv_and_two_rows_of_one_size(self):
        with self.assertRaisesRegex(results.LessonError, "step 15 is not in the CSV"):
            results.lesson_table(self.canonical, 15)
        twice = self.rows(row("12", "a", self.CUBE, 1.0, 2.0), row("12", "a", self.CUBE, 1.0, 2.0))
        with self.assertRaisesRegex(results.LessonError, "2 rows for 4096"):
            results.lesson_table(twice, 12)

    def test_fill_replaces_only_the_blocks(self):
        text = ("# Step 13\n\n## Measured\n\n<!-- measured table: step 13 -->\n"
                "<!-- end measured table -->\n\nThe [results](x.md).\n\n"
                "<!-- measured table: step 12 -->\n| an old | table |\n"
                "<!-- end measured table -->\n")
        filled, blocks = results.fill_tables(text, {"": self.canonical}, "README.md")
        self.assertEqual(blocks, [(5, 13, True), (10, 12, True)])
        self.assertTrue(filled.startswith("# Step 13\n\n## Measured\n\n"
                                          "<!-- measured table: step 13 -->\n\n| size |"))
        self.assertIn("| 0.98 |\n| 1000x3000x2000 | 36,000 | 30,000 | 40,000 | 90.0% | 1.20 |\n\n"
                      "<!-- end measured table -->\n\nThe [results](x.md).\n", filled)
        self.assertNotIn("an old", filled)
        self.assertTrue(filled.endswith("| 75.0% |\n\n<!-- end measured table -->\n"))
        again, blocks = results.fill_tables(filled, {"": self.canonical}, "README.md")
        self.assertEqual(again, filled)
        self.assertEqual(blocks, [(5, 13, False), (16, 12, False)])

    def test_fill_errors_name_file_line_and_step(self):
        cases = [("<!-- measured table: step 15 -->\n<!-- end measured table -->\n",
                  "R.md:1: step 15 is not in the CSV"),
                 ("x\n<!-- measured table: step 13 -->\n", "R.md:2: .*step 13 has no"),
                 ("<!-- end measured table -->\n", "R.md:1: .*without"),
                 ("<!-- measured table: step five -->\n", "R.md:1: expected")]
        for text, message in cases:
            with self.assertRaisesRegex(results.LessonError, message):
                results.fill_tables(text, {"": self.canonical}, "R.md")


class Atlas(unittest.TestCase):
    """The shape atlas: its grid, its summary and its Markdown (results.py atlas)."""

    def test_grid_once_per_shape_in_the_executables_syntax(self):
        shapes = results.atlas_shapes()
        cells = sum(len(p.rows) * len(p.columns) for p in results.PANELS)
        self.assertEqual(cells, 100)
        # 1024^3 and 4096^3 are in panels 1 and 3; 128x4096x4096 and 512x4096x4096 in 2 and 4.
        self.assertEqual(len(shapes), 96)
        self.assertEqual(len(set(shapes)), len(shapes))
        for shape in ["4096x4096x4100", "4096x4100x4096", "128x8192x8192", "4096x4096x4096:ld+8",
                      "1025x1025x1025", "8192x28672x4096", "2048x4096x14336", "64x64x16384"]:
            self.assertIn(shape, shapes)
        self.assertLess(shapes.index("64x64x64"), shapes.index("64x2048x2048"))  # panel order
        for shape in shapes:
            self.assertRegex(shape, r"^[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*(:ld\+[1-9][0-9]*)?$")

    def rows(self, *lines):
        return results.read_rows([("atlas.csv", "\n".join([HEADER, *lines]))])

    def setUp(self):
        bf16 = {"precision": "bf16"}
        self.atlas_rows = self.rows(
            row("26", "t", (4096, 4096, 4096), 720000, 720000, **bf16),  # panels 1 and 3
            row("26", "t", (128, 4096, 4096), 200000, 400000, **bf16),  # panels 2 and 4
            row("26", "t", (4096, 4096, 4096), 800000, 400000, ld_pad=8, **bf16),
            row("26", "t", (4097, 4097, 4097), 540000, 600000, check="FAIL", **bf16),
            row("26", "t", (64, 64, 64), 100, 80, cublas_check="FAIL", **bf16),
            row("26", "t", (100, 100, 100), 1, 1000, **bf16))  # off the grid: ignored

    def test_summary_counts_each_shape_once(self):
        s = results.atlas_summary(self.atlas_rows)
        self.assertEqual((s.cells, s.shapes, s.measured), (100, 96, 5))
        # 100%, 50%, 200%, 90%, 125%: the off-grid 0.1% does not count.
        self.assertAlmostEqual(s.geomean_pct, (100 * 50 * 200 * 90 * 125) ** (1 / 5), places=6)
        self.assertEqual(s.worst, ("128x4096x4096", 50.0))
        self.assertEqual((s.at_least_100, s.below_90), (3, 1))
        self.assertEqual((s.step_failures, s.cublas_failures), (1, 1))

    def test_summary_of_nothing_on_the_grid(self):
        s = results.atlas_summary(self.rows(row("26", "t", (100, 100, 100), 1, 2)))
        self.assertEqual((s.measured, s.worst, s.at_least_100), (0, None, 0))
        self.assertTrue(s.geomean_pct != s.geomean_pct)  # nan
        self.assertIn("- geometric mean: -", results.atlas_markdown(
            self.rows(row("26", "t", (100, 100, 100), 1, 2))))

    def test_markdown_summary_and_cells(self):
        md = results.atlas_markdown(self.atlas_rows)
        self.assertTrue(md.startswith("# Shape atlas: step 26 t (bf16) on NVIDIA H100 80GB HBM3, "
                                      "SXM\n"))
        self.assertIn("- 100 cells, 96 distinct shapes, 5 measured", md)
        self.assertIn("- worst: 128x4096x4096 at 50.0% of cuBLAS\n", md)
        self.assertIn("- at or above 100% of cuBLAS: 3 of 5 shapes (60%)\n", md)
        self.assertIn("- failed checks: 2 (step 1, cuBLAS 1)\n", md)
        self.assertEqual(md.count("\n## "), len(results.PANELS))
        # Panel 3's row S = 4096: S^3, +1, +8, ld+8, K+4, N+4.
        self.assertIn("| 4096 | 100.0% (720 / 720) | 90.0% (540 / 600) FAIL | - | "
                      "200.0% (800 / 400) | - | - |", md)
        # The same shape fills a cell in two panels.
        self.assertEqual(md.count("50.0% (200 / 400)"), 2)
        self.assertIn("| 64 | 125.0% (0.10 / 0.08) (cuBLAS: FAIL) | - |", md)
        self.assertIn("| M \\ projection | QKV (N 6144, K 4096) |", md)

    def test_progress_lines_as_rows_arrive(self):
        text = "\n".join([HEADER, row("26", "t", (128, 8192, 8192), 612345.6, 580100.0),
                          row("26", "t", (4096, 4096, 4096), 1, 2, ld_pad=8, check="FAIL"),
                          "not,a,row"]) + "\n"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            results.atlas_progress(io.StringIO(text), "96")
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[0], "[ 1/96] 128x8192x8192        612.3 vs  580.1 TFLOP/s  105.6% "
                                   "of cuBLAS  pass")
        self.assertIn("[ 2/96] 4096x4096x4096:ld+8", lines[1])
        self.assertTrue(lines[1].endswith("FAIL"))
        self.assertIn("unreadable", lines[2])


class CommandLine(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, str(HERE.parent / "harness" / "results.py"), *args],
                              capture_output=True, text=True)

    def test_help_and_bad_usage(self):
        self.assertEqual(self.run_tool("--help").returncode, 0)
        self.assertIn("usage", self.run_tool("--help").stdout)
        self.assertEqual(self.run_tool().returncode, 2)
        self.assertEqual(self.run_tool("frobnicate", "x.csv").returncode, 2)
        self.assertEqual(self.run_tool("table").returncode, 2)

    def test_unreadable_or_empty_file(self):
        result = self.run_tool("table", "/nonexistent/file.csv")
        self.assertEqual(result.returncode, 2)
        self.assertIn("nonexistent", result.stderr)
        with tempfile.TemporaryDirectory() as d:
            empty = os.path.join(d, "empty.csv")
            pathlib.Path(empty).write_text("")
            self.assertEqual(self.run_tool("table", empty).returncode, 2)

    def test_progress_and_table(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.csv")
            pathlib.Path(path).write_text(HEADER + "\n" + row("05", "x", (8, 8, 8), 30, 60) + "\n")
            progress = self.run_tool("progress", path)
            self.assertEqual(progress.returncode, 0)
            self.assertIn("8x8x8", progress.stdout)
            self.assertIn("50.0% of cuBLAS", progress.stdout)
            self.assertIn("| 05 | x | 30 | 60 | 50.0% |", self.run_tool("table", path).stdout)


    def test_lessons_check_then_write(self):
        with tempfile.TemporaryDirectory() as d:
            csv_path = os.path.join(d, "canonical.csv")
            pathlib.Path(csv_path).write_text("\n".join([
                HEADER, row("01", "naive", (8, 8, 8), 30, 60),
                row("02", "coalesced", (8, 8, 8), 45, 60)]) + "\n")
            readme = pathlib.Path(d, "README.md")
            blank = ("## Measured\n\n<!-- measured table: step 02 -->\n"
                     "<!-- end measured table -->\n")
            readme.write_text(blank)
            check = self.run_tool("lessons", csv_path, "--check", str(readme))
            self.assertEqual(check.returncode, 1)
            self.assertIn(f"{readme}:3: the measured table of step 02 differs", check.stdout)
            self.assertEqual(readme.read_text(), blank)  # --check writes nothing
            self.assertEqual(self.run_tool("lessons", csv_path, str(readme)).returncode, 0)
            self.assertIn("| 8^3 | 45 | 30 | 60 | 75.0% | 1.50 |", readme.read_text())
            self.assertEqual(self.run_tool("lessons", csv_path, "--check", str(readme)).returncode,
                             0)
            other = pathlib.Path(d, "other.md")
            other.write_text("<!-- measured table: step 03 -->\n<!-- end measured table -->\n")
            missing = self.run_tool("lessons", csv_path, str(other))
            self.assertEqual(missing.returncode, 2)
            self.assertIn(f"{other}:1: step 03 is not in the CSV", missing.stderr)

    def test_atlas_shapes_and_atlas(self):
        shapes = self.run_tool("atlas-shapes")
        self.assertEqual(shapes.returncode, 0)
        self.assertEqual(shapes.stdout.splitlines(), results.atlas_shapes())
        self.assertEqual(self.run_tool("atlas-shapes", "x").returncode, 2)
        self.assertEqual(self.run_tool("atlas-progress").returncode, 2)
        with tempfile.TemporaryDirectory() as d:
            csv_path = os.path.join(d, "atlas.csv")
            pathlib.Path(csv_path).write_text("\n".join([
                HEADER, row("26", "t", (4096, 4096, 4096), 600, 700),
                row("26", "t", (4096, 4096, 4096), 600, 700, ld_pad=8)]) + "\n")
            prefix = os.path.join(d, "atlas_26")
            done = self.run_tool("atlas", csv_path, prefix)
            # The heat maps need matplotlib; without it the Markdown alone, and still success.
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("- 100 cells, 96 distinct shapes, 2 measured",
                          pathlib.Path(prefix + ".md").read_text())
            self.assertEqual(self.run_tool("atlas", csv_path).returncode, 2)
            two = os.path.join(d, "two.csv")
            pathlib.Path(two).write_text("\n".join([
                HEADER, row("25", "a", (64, 64, 64), 1, 2), row("26", "t", (64, 64, 64), 1, 2)]))
            several = self.run_tool("atlas", two, prefix)
            self.assertEqual(several.returncode, 2)
            self.assertIn("steps 25, 26", several.stderr)


if __name__ == "__main__":
    unittest.main()
