// Host tests: everything in common/ that runs without a GPU. These run in CI.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <stdexcept>
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
  CHECK(parse_shape("4096", error)->ld_pad == 0);
}

TEST_CASE("parse_shape accepts a leading-dimension padding :ld+P") {
  std::string error;
  CHECK(parse_shape("4096:ld+8", error) == Shape{4096, 4096, 4096, 8});
  CHECK(parse_shape("1000x3000x2000:ld+8", error) == Shape{1000, 3000, 2000, 8});
  CHECK(parse_shape("1x1x1:ld+1", error) == Shape{1, 1, 1, 1});
  CHECK(parse_shape("64:ld+65536", error) == Shape{64, 64, 64, 65536});
  // The text round-trips, and a shape without padding prints as before.
  CHECK(Shape{4096, 4096, 4096, 8}.text() == "4096x4096x4096:ld+8");
  CHECK(Shape{1000, 3000, 2000}.text() == "1000x3000x2000");
  CHECK(parse_shape(Shape{1000, 3000, 2000, 8}.text(), error) == Shape{1000, 3000, 2000, 8});
  CHECK_FALSE(Shape{4096, 4096, 4096, 8} == Shape{4096, 4096, 4096});
}

TEST_CASE("parse_shape rejects a malformed padding") {
  for (char const* bad :
       {"4096:", "4096:ld", "4096:ld+", "4096:ld+0", "4096:ld+-8", "4096:ld+65537", "4096:ld+8x",
        "4096:ld+ 8", "4096:ld8", "4096:LD+8", "4096:pad+8", ":ld+8", "4096x:ld+8", "4x4:ld+8",
        "4096:ld+8:ld+8", "4096:ld+99999999999", "2147483647:ld+1", "1x1x2147483600:ld+48"}) {
    std::string error;
    CAPTURE(bad);
    CHECK_FALSE(parse_shape(bad, error).has_value());
    CHECK_FALSE(error.empty());
  }
  std::string error;
  parse_shape("4096:ld+0", error);
  CHECK(error.find("between 1 and 65536") != std::string::npos);
  parse_shape("4096:pad+8", error);
  CHECK(error.find("ld+P") != std::string::npos);
  // m takes no padding: only k and n are leading dimensions.
  CHECK(parse_shape("2147483647x1x1:ld+1", error) == Shape{2147483647, 1, 1, 1});
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
                        "--repeats", "7", "--warmup", "2", "--seed", "42", "--csv", "4096:ld+8"});
  REQUIRE(r.options.has_value());
  CHECK(r.options->shapes ==
        std::vector<Shape>{
            {4096, 4096, 4096}, {4097, 4097, 4097}, {1000, 3000, 2000}, {4096, 4096, 4096, 8}});
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
                                                                {"0"},
                                                                {"4096:ld+0"},
                                                                {"4096:ld"}}) {
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
  int zeros = 0, out_of_range = 0, mismatches = 0;
  for (int i = 0; i < 100000; ++i) {
    float const x = a.nonzero_uniform();
    zeros += x == 0.0f;
    out_of_range += !(x >= -1.0f && x <= 1.0f);
    mismatches += x != b.nonzero_uniform();
    seen.insert(x);
  }
  CHECK(zeros == 0);
  CHECK(out_of_range == 0);
  CHECK(mismatches == 0);      // the same seed gives the same sequence
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
  double const u = kFp32Error.accumulation;
  double const expected = 10.0 * u / (1.0 - 10.0 * u) * 3.0;
  CHECK(error_bound(3.0, 1.0, 8, kFp32Error) == doctest::Approx(expected).epsilon(1e-6));
  CHECK(error_bound(3.0, 1.0, 100, kFp32Error) > error_bound(3.0, 1.0, 8, kFp32Error));
  CHECK(error_bound(0.0, 0.0, 8, kFp32Error) > 0.0);  // underflow slack
  CHECK(error_bound(0.0, 0.0, 8, kFp32Error) < 1e-36);
}

TEST_CASE("error bound: bf16 output adds one rounding of the result") {
  double const u = kBf16Error.accumulation;
  double const accumulated = 10.0 * u / (1.0 - 10.0 * u) * 3.0;
  double const expected = accumulated + 0x1p-8 * (2.0 + accumulated);
  CHECK(error_bound(3.0, -2.0, 8, kBf16Error) == doctest::Approx(expected).epsilon(1e-6));
  // A correctly rounded bf16 result of an exactly computed value always meets it.
  Random random(5);
  for (int i = 0; i < 1000; ++i) {
    double const exact = random.nonzero_uniform() * 3.0;
    double const stored = round_to(Element::bf16, static_cast<float>(exact));
    CHECK(std::fabs(stored - exact) <= error_bound(std::fabs(exact), exact, 1, kBf16Error));
  }
}

TEST_CASE("error bound: BF16x6 sums six products per term and adds what it leaves out") {
  double const u = kBf16x6Error.accumulation;
  double const terms = 6.0 * 8 + 2.0;
  double const expected =
      (terms * u / (1.0 - terms * u) * kBf16x6Error.kept_magnitude + kBf16x6Error.dropped) * 3.0;
  CHECK(error_bound(3.0, 1.0, 8, kBf16x6Error) == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("error bound: FP8 sums, one long truncated sum or promoted every 128 terms") {
  auto const gamma = [](double n, double u) { return n * u / (1.0 - n * u); };
  // Unpromoted: 33 cuts per 32 terms at 2^-13, finite only while n u < 1.
  double const n256 = 33.0 / 32.0 * 256 + 2.0;
  // The bf16 output adds 2^-8 of the accumulated error (the exact value is 0 here).
  double const plain = gamma(n256, 0x1p-13) * 3.0 * (1.0 + 0x1p-8);
  CHECK(error_bound(3.0, 0.0, 256, kFp8Error) == doctest::Approx(plain).epsilon(1e-6));
  CHECK(std::isinf(error_bound(3.0, 0.0, 8000, kFp8Error)));
  // Promoted: 132 cuts per k tile of 128, then ceil(k / 128) + 2 FP32 additions.
  double const chunk = gamma(132.0, 0x1p-13);
  double const promoted =
      (chunk + gamma(512.0 + 2.0, 0x1p-24) * (1.0 + chunk)) * 3.0 * (1.0 + 0x1p-8);
  CHECK(error_bound(3.0, 0.0, 65536, kFp8PromotedError) == doctest::Approx(promoted).epsilon(1e-6));
  // Below one k tile the two are the same sum.
  CHECK(error_bound(3.0, 0.0, 100, kFp8PromotedError) == error_bound(3.0, 0.0, 100, kFp8Error));
}

TEST_CASE("BF16x6: three bf16 parts hold a float exactly, within the constants of the bound") {
  // The split of step 28, on the host: each part rounds what is left to bf16.
  auto const split = [](float x, double(&part)[3]) {
    float rest = x;
    for (double& p : part) {
      float const rounded = round_to(Element::bf16, rest);
      p = rounded;
      rest -= rounded;
    }
  };
  Random random(28);
  for (int i = 0; i < 100000; ++i) {
    // Every exponent from 2^-60 to 2^60, every significand.
    float const a =
        std::ldexp(random.nonzero_uniform(), static_cast<int>(random.next() % 121) - 60);
    float const b =
        std::ldexp(random.nonzero_uniform(), static_cast<int>(random.next() % 121) - 60);
    double pa[3];
    double pb[3];
    split(a, pa);
    split(b, pb);
    REQUIRE(pa[0] + pa[1] + pa[2] == static_cast<double>(a));  // exact, in float64
    REQUIRE(pb[0] + pb[1] + pb[2] == static_cast<double>(b));
    double const ab = std::fabs(static_cast<double>(a) * b);
    double kept = 0.0;
    double dropped = 0.0;
    for (int x = 0; x < 3; ++x) {
      for (int y = 0; y < 3; ++y) {
        if (x + y <= 2)
          kept += std::fabs(pa[x] * pb[y]);
        else
          dropped += pa[x] * pb[y];
      }
    }
    CHECK(kept <= kBf16x6Error.kept_magnitude * ab);
    CHECK(std::fabs(dropped) <= kBf16x6Error.dropped * ab);
  }
}

TEST_CASE("e4m3 rounding: 4 significant bits, ties to even, a fixed step below 2^-6") {
  CHECK(round_to(Element::e4m3, 1.0f) == 1.0f);
  CHECK(round_to(Element::e4m3, 1.0625f) == 1.0f);   // a tie: to even (1.000)
  CHECK(round_to(Element::e4m3, 1.1875f) == 1.25f);  // a tie: to even (1.010)
  CHECK(round_to(Element::e4m3, 1.07f) == 1.125f);   // above the tie: up
  CHECK(round_to(Element::e4m3, -3.3f) == -3.25f);
  CHECK(round_to(Element::e4m3, 448.0f) == 448.0f);        // the largest value
  CHECK(round_to(Element::e4m3, 0x1p-9f) == 0x1p-9f);      // the smallest subnormal
  CHECK(round_to(Element::e4m3, 0x1p-10f) == 0.0f);        // a tie with zero: to even
  CHECK(round_to(Element::e4m3, 0x1.8p-10f) == 0x1p-9f);   // above it: up
  CHECK(round_to(Element::e4m3, 0x1.3p-7f) == 0x1.4p-7f);  // 4.75 steps of 2^-9: 5 steps
  CHECK_THROWS_AS(round_to(Element::e4m3, 480.0f), std::invalid_argument);
  CHECK(std::isnan(round_to(Element::e4m3, bits_to_float(kGuardBits))));
  // The same values as CUDA's own conversion, everywhere in range.
  Random random(8);
  for (int i = 0; i < 100000; ++i) {
    float const x = std::ldexp(random.nonzero_uniform(), static_cast<int>(random.next() % 20) - 11);
    CHECK(round_to(Element::e4m3, x) == static_cast<float>(__nv_fp8_e4m3(x)));
  }
}

TEST_CASE("bf16 rounding: to nearest, ties to even, and exact conversions") {
  CHECK(round_to(Element::bf16, 1.0f) == 1.0f);
  CHECK(round_to(Element::fp32, 1.0f + 0x1p-20f) == 1.0f + 0x1p-20f);
  CHECK(round_to(Element::bf16, 1.0f + 0x1p-9f) == 1.0f);                // below half an ulp: down
  CHECK(round_to(Element::bf16, 1.0f + 0x1p-8f) == 1.0f);                // a tie: to even (1.0)
  CHECK(round_to(Element::bf16, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);  // a tie: to even, up
  CHECK(round_to(Element::bf16, 1.0f + 0x1p-8f + 0x1p-16f) == 1.0f + 0x1p-7f);  // above: up
  CHECK(round_to(Element::bf16, -1.0f - 0x1p-8f - 0x1p-16f) == -1.0f - 0x1p-7f);
  CHECK(bf16_bits(1.0f) == 0x3f80);
  CHECK(from_bf16_bits(0x3f80) == 1.0f);
  CHECK_THROWS_AS(bf16_bits(1.0f + 0x1p-20f), std::invalid_argument);
  // The sentinels survive a trip through bf16 bit for bit.
  for (std::uint32_t bits : {kGuardBits, kPoisonBits})
    CHECK(float_to_bits(from_bf16_bits(bf16_bits(bits_to_float(bits)))) == bits);
  CHECK(std::isnan(round_to(Element::bf16, bits_to_float(kGuardBits))));
}

TEST_CASE("random bf16 inputs are bf16 values and never zero") {
  Random random(3);
  HostMatrix m(tight(64, 64));
  fill_random(m, random, Element::bf16);
  for (float x : m.data) {
    CHECK(x != 0.0f);
    CHECK((float_to_bits(x) & 0xffffu) == 0u);
  }
}

TEST_CASE("integer fill: nonzero integers within the limit, both signs") {
  Random random(4);
  HostMatrix m(tight(50, 40));
  fill_integers(m, random, 2);
  std::set<float> seen(m.data.begin(), m.data.end());
  CHECK(seen == std::set<float>{-2.0f, -1.0f, 1.0f, 2.0f});
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

  auto const r = reference_gemm_cpu(2.0f, A, B, 0.5f, C0, kFp32Error);
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
  auto const r = reference_gemm_cpu(1.0f, A, B, 0.0f, C0, kFp32Error);
  for (double v : r.value)
    CHECK(v == 2.0);
}

TEST_CASE("check: an FP32 result computed in any order passes") {
  Random random(11);
  HostMatrix A(tight(16, 2048)), B(tight(2048, 8)), C0(tight(16, 8));
  fill_random(A, random);
  fill_random(B, random);
  fill_constant(C0, bits_to_float(kPoisonBits));
  auto const ref = reference_gemm_cpu(1.0f, A, B, 0.0f, C0, kFp32Error);
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
  auto const ref = reference_gemm_cpu(1.0f, A, B, 0.0f, C0, kFp32Error);
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
  auto const r = reference_from_magnitude(1, 2, 100, {1.0, 2.0}, {10.0, 20.0}, kFp32Error);
  CHECK(r.value == std::vector<double>{1.0, 2.0});
  CHECK(r.bound[1] == doctest::Approx(2.0 * r.bound[0]).epsilon(1e-9));
  CHECK_THROWS(reference_from_magnitude(2, 2, 1, {1.0}, {1.0}, kFp32Error));
}

TEST_CASE("CSV: fields with commas, quotes or line breaks are quoted (RFC 4180)") {
  CHECK(csv_escape("plain") == "plain");
  CHECK(csv_escape("") == "");
  CHECK(csv_escape("a,b") == "\"a,b\"");
  CHECK(csv_escape("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_escape("two\nlines") == "\"two\nlines\"");
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
  m.gpu = "NVIDIA H100 80GB HBM3, SXM";
  return m;
}

}  // namespace

TEST_CASE("CSV: the header results.py reads by name, and a row that matches it") {
  // common/tests/test_results.py pins the same header: change both together.
  CHECK(csv_header() ==
        "step,name,precision,m,n,k,alpha,beta,time_ms,gflops,cublas_time_ms,cublas_gflops,"
        "pct_cublas,check,max_err_over_bound,rel_error,cublas_check,gpu,ld_pad");
  Measurement const m = measurement("03", "shared_tiling", {4096, 4096, 4096}, 10.0, 2.5);
  CHECK(m.gflops() == doctest::Approx(2.0 * 4096.0 * 4096 * 4096 / 10e-3 / 1e9));
  CHECK(m.percent_of_cublas() == doctest::Approx(25.0));
  CHECK(m.percent_of_cublas() == doctest::Approx(100.0 * m.gflops() / m.cublas_gflops()));
  std::string const row = csv_row(m);
  CHECK(row.rfind("03,shared_tiling,fp32,4096,4096,4096,1,0,10.0000,13743.9,2.5000,54975.6,25.0,"
                  "pass,",
                  0) == 0);
  // The GPU name holds a comma, so it is quoted: one comma more than the header has.
  CHECK(row.find(",\"NVIDIA H100 80GB HBM3, SXM\"") != std::string::npos);
  auto const commas = [](std::string const& line) {
    return std::count(line.begin(), line.end(), ',');
  };
  CHECK(commas(row) == commas(csv_header()) + 1);
  // ld_pad is the last column, after the quoted GPU name.
  CHECK(row.substr(row.size() - 2) == ",0");
  Measurement padded = m;
  padded.shape.ld_pad = 8;
  CHECK(csv_row(padded).substr(csv_row(padded).size() - 2) == ",8");
  CHECK(human_row(padded, "pass").rfind("4096x4096x4096:ld+8 ", 0) == 0);
}

TEST_CASE("step names split into number and kernel") {
  CHECK(split_step_name("03_shared_tiling") ==
        std::pair<std::string, std::string>{"03", "shared_tiling"});
  CHECK(split_step_name("weird") == std::pair<std::string, std::string>{"weird", "weird"});
}

TEST_CASE("command line of the programs that take no sizes (the demos)") {
  auto run = [](std::vector<char const*> args) {
    return simple_command_line(static_cast<int>(args.size()), const_cast<char**>(args.data()),
                               "usage: demo\n", {"--profile"});
  };
  CHECK(run({"demo", "--help"}) == kExitOk);
  CHECK(run({"demo", "-h"}) == kExitOk);
  CHECK(run({"demo", "--frobnicate"}) == kExitUsage);
  CHECK(run({"demo", "4096"}) == kExitUsage);
  CHECK_FALSE(run({"demo", "--profile"}).has_value());
  CHECK_FALSE(run({"demo"}).has_value());
}

TEST_CASE("command line: without sizes, the caller's default sizes") {
  std::vector<char const*> none;
  auto const r = parse_command_line(std::span<char const* const>(none.data(), none.size()),
                                    {{1, 2, 3}, {4, 5, 6}});
  REQUIRE(r.options.has_value());
  CHECK(r.options->shapes == std::vector<Shape>{{1, 2, 3}, {4, 5, 6}});
}
