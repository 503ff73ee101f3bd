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


if __name__ == "__main__":
    unittest.main()
