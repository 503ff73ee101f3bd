// Host tests: everything in common/ that runs without a GPU. These run in CI.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "report.h"
#include "verify.h"

using namespace gemm;

namespace {

ParseResult parse(std::vector<char const*> args) {
  return parse_command_line(std::span<char const* const>(args.data(), args.size()));
}

MatrixLayout tight(int rows, int cols) {
  return {rows, cols, cols, 0, 0};
}

// C = A * B computed in FP32 the ordinary way (one accumulator, increasing p), as a kernel
// would; `reverse` sums in the opposite order, to show the bound holds for any order.
HostMatrix float_gemm(HostMatrix const& A, HostMatrix const& B, MatrixLayout c_layout,
                      bool reverse) {
  HostMatrix C(c_layout, bits_to_float(kGuardBits));
  int const k = A.layout.cols;
  for (int i = 0; i < C.layout.rows; ++i) {
    for (int j = 0; j < C.layout.cols; ++j) {
      float acc = 0.0f;
      for (int q = 0; q < k; ++q) {
        int const p = reverse ? k - 1 - q : q;
        acc = std::fma(A.at(i, p), B.at(p, j), acc);
      }
      C.at(i, j) = acc;
    }
  }
  return C;
}

}  // namespace

TEST_CASE("parse_shape accepts N and MxNxK") {
  std::string error;
  CHECK(parse_shape("4096", error) == Shape{4096, 4096, 4096});
  CHECK(parse_shape("1000x3000x2000", error) == Shape{1000, 3000, 2000});
  CHECK(parse_shape("1x1x1", error) == Shape{1, 1, 1});
}

TEST_CASE("parse_shape rejects what is not a size") {
  for (char const* bad : {"", "abc", "-5", "0", "12x3", "4096x", "x4x4", "99999999999", "1e3", " 5",
                          "5 ", "4x4x4x4", "3.5", "4x0x4"}) {
    std::string error;
    CAPTURE(bad);
    CHECK_FALSE(parse_shape(bad, error).has_value());
    CHECK_FALSE(error.empty());
  }
}

TEST_CASE("command line: defaults") {
  auto const r = parse({});
  REQUIRE(r.options.has_value());
  CHECK(r.options->shapes == std::vector<Shape>{{4096, 4096, 4096}});
  CHECK(r.options->alpha == 1.0f);
  CHECK(r.options->beta == 0.0f);
  CHECK_FALSE(r.options->csv);
  CHECK_FALSE(r.options->seed.has_value());
}

TEST_CASE("command line: options and several sizes") {
  auto const r = parse({"4096", "--alpha", "2", "--beta", "-0.5", "4097", "1000x3000x2000",
                        "--repeats", "7", "--warmup", "2", "--seed", "42", "--csv"});
  REQUIRE(r.options.has_value());
  CHECK(r.options->shapes ==
        std::vector<Shape>{{4096, 4096, 4096}, {4097, 4097, 4097}, {1000, 3000, 2000}});
  CHECK(r.options->alpha == 2.0f);
  CHECK(r.options->beta == -0.5f);
  CHECK(r.options->repeats == 7);
  CHECK(r.options->warmup == 2);
  CHECK(r.options->seed == 42u);
  CHECK(r.options->csv);
}

TEST_CASE("command line: errors are reported, not thrown") {
  for (auto const& args : std::vector<std::vector<char const*>>{{"--alpha"},
                                                                {"--alpha", "x"},
                                                                {"--beta", "nan"},
                                                                {"--beta", "inf"},
                                                                {"--repeats", "0"},
                                                                {"--repeats", "-3"},
                                                                {"--warmup", "many"},
                                                                {"--seed", "-1"},
                                                                {"--frobnicate"},
                                                                {"-5"},
                                                                {"abc"},
                                                                {"0"}}) {
    auto const r = parse(args);
    CAPTURE(args[0]);
    CHECK_FALSE(r.options.has_value());
    CHECK_FALSE(r.error.empty());
  }
  CHECK(parse({"--help"}).options->help);
  CHECK(usage("prog").find("usage: prog") == 0);
}

TEST_CASE("random inputs are non-zero, in [-1, 1], and reproducible from the seed") {
  Random a(7), b(7), c(8);
  std::set<float> seen;
  for (int i = 0; i < 100000; ++i) {
    float const x = a.nonzero_uniform();
    REQUIRE(x != 0.0f);
    REQUIRE(x >= -1.0f);
    REQUIRE(x <= 1.0f);
    REQUIRE(x == b.nonzero_uniform());
    seen.insert(x);
  }
  CHECK(seen.size() > 90000);  // not a handful of repeated values
  Random d(7);
  CHECK(d.nonzero_uniform() != c.nonzero_uniform());
}

TEST_CASE("matrix layout: indices and the guard band") {
  MatrixLayout const l{3, 4, 6, 5, 2};  // 3 x 4 with ld 6, 5 guard elements before, 2 after
  CHECK(l.buffer_elements() == 5 + 18 + 2);
  CHECK(l.index(0, 0) == 5);
  CHECK(l.index(2, 3) == 5 + 12 + 3);
  CHECK_FALSE(l.is_element(4));
  CHECK(l.is_element(5));
  CHECK(l.is_element(8));
  CHECK_FALSE(l.is_element(9));   // padding column 4 of row 0
  CHECK_FALSE(l.is_element(10));  // padding column 5 of row 0
  CHECK(l.is_element(11));
  CHECK_FALSE(l.is_element(23));  // back guard
  HostMatrix m(l);
  fill_constant(m, 2.0f);
  int elements = 0, guards = 0;
  for (std::size_t i = 0; i < m.data.size(); ++i) {
    if (float_to_bits(m.data[i]) == kGuardBits) ++guards;
    if (m.data[i] == 2.0f) ++elements;
  }
  CHECK(elements == 12);
  CHECK(guards == 25 - 12);
}

TEST_CASE("error bound: gamma(k + 2) times the magnitude") {
  double const u = kFloatUnitRoundoff;
  double const expected = 10.0 * u / (1.0 - 10.0 * u) * 3.0;
  CHECK(error_bound(3.0, 8, u) == doctest::Approx(expected).epsilon(1e-6));
  CHECK(error_bound(3.0, 100, u) > error_bound(3.0, 8, u));
  CHECK(error_bound(0.0, 8, u) > 0.0);  // underflow slack
  CHECK(error_bound(0.0, 8, u) < 1e-36);
}

TEST_CASE("CPU reference: a product small enough to check by hand") {
  HostMatrix A(tight(2, 3)), B(tight(3, 2)), C0(tight(2, 2));
  float const a[] = {1, 2, 3, 4, 5, 6};
  float const b[] = {7, 8, 9, 10, 11, 12};
  for (int i = 0; i < 6; ++i)
    A.data[i] = a[i], B.data[i] = b[i];
  float const c0[] = {1, -1, 2, -2};
  for (int i = 0; i < 4; ++i)
    C0.data[i] = c0[i];

  auto const r = reference_gemm_cpu(2.0f, A, B, 0.5f, C0, kFloatUnitRoundoff);
  // A * B = [[58, 64], [139, 154]]
  CHECK(r.value == std::vector<double>{2 * 58 + 0.5, 2 * 64 - 0.5, 2 * 139 + 1, 2 * 154 - 1});
  CHECK(r.bound[0] > 0.0);
  CHECK(r.bound[0] < 1e-3);
}

TEST_CASE("CPU reference: beta == 0 does not read C") {
  HostMatrix A(tight(2, 2)), B(tight(2, 2)), C0(tight(2, 2));
  fill_constant(A, 1.0f);
  fill_constant(B, 1.0f);
  fill_constant(C0, std::numeric_limits<float>::quiet_NaN());
  auto const r = reference_gemm_cpu(1.0f, A, B, 0.0f, C0, kFloatUnitRoundoff);
  for (double v : r.value)
    CHECK(v == 2.0);
}

TEST_CASE("check: an FP32 result computed in any order passes") {
  Random random(11);
  HostMatrix A(tight(16, 2048)), B(tight(2048, 8)), C0(tight(16, 8));
  fill_random(A, random);
  fill_random(B, random);
  fill_constant(C0, bits_to_float(kPoisonBits));
  auto const ref = reference_gemm_cpu(1.0f, A, B, 0.0f, C0, kFloatUnitRoundoff);
  for (bool reverse : {false, true}) {
    auto const result = check_result(float_gemm(A, B, C0.layout, reverse), ref);
    CAPTURE(result.summary());
    CHECK(result.passed());
    CHECK(result.worst_ratio < 1.0);
    CHECK(result.relative_error < 1e-5);
  }
}

TEST_CASE("check: a wrong element, NaN, Inf, poison or a written guard fails") {
  Random random(12);
  int const k = 64;
  MatrixLayout const c_layout{6, 5, 7, 3, 3};  // ld 7: two padding columns per row
  HostMatrix A(tight(6, k)), B(tight(k, 5)), C0(c_layout);
  fill_random(A, random);
  fill_random(B, random);
  fill_constant(C0, bits_to_float(kPoisonBits));
  auto const ref = reference_gemm_cpu(1.0f, A, B, 0.0f, C0, kFloatUnitRoundoff);
  HostMatrix const good = float_gemm(A, B, c_layout, false);
  REQUIRE(check_result(good, ref).passed());

  SUBCASE("one product term missing") {
    HostMatrix bad = good;
    bad.at(2, 3) -= A.at(2, 17) * B.at(17, 3);
    auto const r = check_result(bad, ref);
    CHECK_FALSE(r.passed());
    CHECK(r.failures == 1);
    CHECK(r.worst_row == 2);
    CHECK(r.worst_col == 3);
  }
  SUBCASE("NaN") {
    HostMatrix bad = good;
    bad.at(5, 4) = std::numeric_limits<float>::quiet_NaN();
    CHECK(check_result(bad, ref).failures == 1);
  }
  SUBCASE("Inf") {
    HostMatrix bad = good;
    bad.at(0, 0) = std::numeric_limits<float>::infinity();
    CHECK(check_result(bad, ref).failures == 1);
  }
  SUBCASE("an element never written keeps the poison") {
    HostMatrix bad = good;
    bad.at(1, 1) = bits_to_float(kPoisonBits);
    CHECK(check_result(bad, ref).failures == 1);
  }
  SUBCASE("a write into a padding column") {
    HostMatrix bad = good;
    bad.data[c_layout.index(4, 5)] = 0.0f;  // column 5 of row 4 is padding (cols = 5, ld = 7)
    auto const r = check_result(bad, ref);
    CHECK(r.failures == 0);
    CHECK(r.guard_violations == 1);
    CHECK_FALSE(r.passed());
  }
  SUBCASE("a write just before and just after the matrix") {
    HostMatrix bad = good;
    bad.data[c_layout.front - 1] = 1.0f;
    bad.data[bad.data.size() - 1] = 1.0f;
    CHECK(check_result(bad, ref).guard_violations == 2);
  }
  SUBCASE("rows swapped") {
    HostMatrix bad = good;
    for (int j = 0; j < 5; ++j)
      std::swap(bad.at(0, j), bad.at(1, j));
    CHECK(check_result(bad, ref).failures == 10);
  }
}

TEST_CASE("reference_from_magnitude scales each bound by its magnitude") {
  auto const r = reference_from_magnitude(1, 2, 100, {1.0, 2.0}, {10.0, 20.0}, kFloatUnitRoundoff);
  CHECK(r.value == std::vector<double>{1.0, 2.0});
  CHECK(r.bound[1] == doctest::Approx(2.0 * r.bound[0]).epsilon(1e-9));
  CHECK_THROWS(reference_from_magnitude(2, 2, 1, {1.0}, {1.0}, kFloatUnitRoundoff));
}

TEST_CASE("CSV: escaping round-trips") {
  for (std::string const field : {"plain", "with,comma", "with \"quotes\"", "", "a,\"b\",c"}) {
    auto const fields = parse_csv_line(csv_escape(field) + "," + csv_escape("x"));
    REQUIRE(fields.size() == 2);
    CHECK(fields[0] == field);
    CHECK(fields[1] == "x");
  }
  CHECK(csv_escape("plain") == "plain");
  CHECK(csv_escape("a,b") == "\"a,b\"");
}

namespace {

Measurement measurement(std::string step, std::string name, Shape shape, double ms,
                        double cublas_ms) {
  Measurement m;
  m.step = std::move(step);
  m.name = std::move(name);
  m.precision = "fp32";
  m.shape = shape;
  m.step_ms = ms;
  m.cublas_ms = cublas_ms;
  m.check_passed = true;
  m.cublas_check_passed = true;
  m.gpu = "NVIDIA H100 80GB HBM3";
  return m;
}

}  // namespace

TEST_CASE("CSV row: the issue's columns, numbers that read back") {
  Measurement const m = measurement("03", "shared_tiling", {4096, 4096, 4096}, 10.0, 2.5);
  CHECK(m.gflops() == doctest::Approx(2.0 * 4096.0 * 4096 * 4096 / 10e-3 / 1e9));
  CHECK(m.percent_of_cublas() == doctest::Approx(25.0));
  auto const records = parse_csv(csv_header() + "\n" + csv_row(m) + "\n");
  REQUIRE(records.size() == 1);
  auto const& r = records[0];
  for (char const* column :
       {"step", "name", "m", "n", "k", "gflops", "cublas_gflops", "pct_cublas", "check"}) {
    CAPTURE(column);
    CHECK(r.count(column) == 1);
  }
  CHECK(r.at("step") == "03");
  CHECK(r.at("name") == "shared_tiling");
  CHECK(r.at("m") == "4096");
  CHECK(r.at("pct_cublas") == "25.0");
  CHECK(r.at("check") == "pass");
  CHECK(std::stod(r.at("gflops")) == doctest::Approx(m.gflops()).epsilon(1e-4));
}

TEST_CASE("progression table: one table per shape, steps in order, speedups") {
  Shape const big{4096, 4096, 4096}, odd{4097, 4097, 4097};
  std::string csv = csv_header() + "\n";
  // Rows deliberately out of order and interleaved across shapes.
  csv += csv_row(measurement("02", "coalesced", big, 50.0, 2.5)) + "\n";
  csv += csv_row(measurement("01", "naive", big, 200.0, 2.5)) + "\n";
  csv += csv_row(measurement("01", "naive", odd, 300.0, 3.0)) + "\n";
  csv += csv_header() + "\n";  // a second file's header, concatenated
  csv += csv_row(measurement("03", "shared_tiling", big, 25.0, 2.7)) + "\n";
  Measurement failed = measurement("02", "coalesced", odd, 100.0, 3.0);
  failed.check_passed = false;
  csv += csv_row(failed) + "\n";

  std::string const table = progression_tables(parse_csv(csv));
  CAPTURE(table);
  auto const big_at = table.find("#### 4096x4096x4096");
  auto const odd_at = table.find("#### 4097x4097x4097");
  REQUIRE(big_at != std::string::npos);
  REQUIRE(odd_at != std::string::npos);
  CHECK(big_at < odd_at);
  std::string const big_table = table.substr(big_at, odd_at - big_at);
  auto const row01 = big_table.find("| 01 | naive |");
  auto const row02 = big_table.find("| 02 | coalesced |");
  auto const row03 = big_table.find("| 03 | shared_tiling |");
  REQUIRE(row01 != std::string::npos);
  CHECK(row01 < row02);
  CHECK(row02 < row03);
  CHECK(big_table.find("| 4.00x |") != std::string::npos);  // 200 ms -> 50 ms
  CHECK(big_table.find("| 2.00x |") != std::string::npos);  // 50 ms -> 25 ms
  CHECK(big_table.find("cuBLAS (median of the 3 runs)") != std::string::npos);
  CHECK(big_table.find("54,976") != std::string::npos);  // median cuBLAS: 2.5 ms = 54,976 GFLOPS
  std::string const odd_table = table.substr(odd_at);
  CHECK(odd_table.find("| FAIL |") != std::string::npos);
}

TEST_CASE("progression table: malformed CSV is an error, not a silent table") {
  CHECK_THROWS(progression_tables(parse_csv("step,name\n01\n")));
  CHECK_THROWS(progression_tables(parse_csv(
      csv_header() + "\n" + std::string("01,naive,fp32,1,1,1,1,0,x,y,1,1,1,pass,0,0,pass,gpu\n"))));
}

TEST_CASE("step names split into number and kernel") {
  CHECK(split_step_name("03_shared_tiling") ==
        std::pair<std::string, std::string>{"03", "shared_tiling"});
  CHECK(split_step_name("weird") == std::pair<std::string, std::string>{"weird", "weird"});
}
