#!/usr/bin/env python3
"""Host tests of common/harness/results.py, the one reader of the harness's CSV (run in CI)."""
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
          "pct_cublas,check,max_err_over_bound,rel_error,cublas_check,gpu")


def row(step, name, shape, gflops, cublas_gflops, check="pass", precision="fp32",
        cublas_check="pass"):
    m, n, k = shape
    pct = 100.0 * gflops / cublas_gflops
    return (f"{step},{name},{precision},{m},{n},{k},1,0,1.0,{gflops},1.0,{cublas_gflops},"
            f"{pct:.1f},{check},0.01,1e-7,{cublas_check},\"NVIDIA H100 80GB HBM3, SXM\"")


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


if __name__ == "__main__":
    unittest.main()
