// The shared GPU suite: built once per step (meson links it with that step's sgemm) and run
// as `meson test`. Every case draws fresh random inputs, poisons C, surrounds every matrix with
// guard bands, runs the step and compares each element with a float64 CPU reference.
// Without a GPU it reports "skipped" (exit 77).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "device_buffer.h"
#include "gemm.h"
#include "verify.h"

namespace {

using gemm::CheckResult;
using gemm::HostMatrix;
using gemm::MatrixLayout;
using gemm::Shape;

constexpr std::size_t kGuard = 256;  // guard elements before and after every buffer

// How the matrices sit in memory: extra columns per row (ld = row length + pad) and an offset
// of the first element in floats (1, 2 or 3 breaks 16-byte alignment of the pointers).
struct Placement {
  int lda_pad = 0;
  int ldb_pad = 0;
  int ldc_pad = 0;
  int misalign = 0;
};

struct Scalars {
  float alpha = 1.0f;
  float beta = 0.0f;
};

std::string describe(Shape const& s, Placement const& p, Scalars const& c, std::uint64_t seed) {
  char text[256];
  std::snprintf(text, sizeof text,
                "m=%d n=%d k=%d lda=k+%d ldb=n+%d ldc=n+%d misalign=%d alpha=%g beta=%g seed=%llu",
                s.m, s.n, s.k, p.lda_pad, p.ldb_pad, p.ldc_pad, p.misalign, c.alpha, c.beta,
                static_cast<unsigned long long>(seed));
  return text;
}

MatrixLayout layout(int rows, int cols, int pad, int misalign) {
  return {rows, cols, cols + pad, kGuard + static_cast<std::size_t>(misalign), kGuard};
}

std::uint64_t fresh_seed() {
  static std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) | device();
}

cudaStream_t test_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    gemm::check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }();
  return stream;
}

// Runs one GEMM through the step on a non-default stream and checks it.
CheckResult run_case(Shape const& s, Placement const& p, Scalars const& c, std::uint64_t seed) {
  gemm::Random random(seed);
  HostMatrix A(layout(s.m, s.k, p.lda_pad, p.misalign));
  HostMatrix B(layout(s.k, s.n, p.ldb_pad, p.misalign));
  HostMatrix C0(layout(s.m, s.n, p.ldc_pad, p.misalign));
  gemm::fill_random(A, random);
  gemm::fill_random(B, random);
  gemm::fill_initial_c(C0, c.beta, random);
  gemm::DeviceMatrix<float> dA(A), dB(B), dC(C0);
  gemm::sgemm(s.m, s.n, s.k, c.alpha, dA.data(), A.layout.ld, dB.data(), B.layout.ld, c.beta,
              dC.data(), C0.layout.ld, test_stream());
  gemm::check_cuda(cudaStreamSynchronize(test_stream()), "sgemm");
  HostMatrix C(C0.layout);
  dC.download(C);
  auto const reference =
      gemm::reference_gemm_cpu(c.alpha, A, B, c.beta, C0, gemm::kFloatUnitRoundoff);
  return gemm::check_result(C, reference);
}

void check_case(Shape const& s, Placement const& p = {}, Scalars const& c = {}) {
  std::uint64_t const seed = fresh_seed();
  std::string const what = describe(s, p, c, seed);
  CheckResult const result = run_case(s, p, c, seed);
  INFO(what);
  INFO(result.summary());
  CHECK(result.passed());
}

// Shapes chosen to break kernels: single elements, primes, sizes just off every power of two,
// K not a multiple of any tile, one row or one column, tall-skinny and short-wide, and a few
// multiples of large tiles so that the fast paths run too.
std::vector<Shape> const kShapes = {
    {1, 1, 1},       {1, 1, 7},       {2, 3, 4},      {7, 13, 17},     {35, 79, 19},
    {31, 33, 65},    {64, 64, 64},    {128, 128, 8},  {128, 128, 128}, {127, 129, 131},
    {256, 256, 256}, {257, 255, 129}, {1031, 7, 64},  {5, 1500, 37},   {1, 777, 300},
    {600, 1, 300},   {96, 160, 1},    {64, 64, 1000}, {384, 512, 136}, {513, 257, 72}};

}  // namespace

TEST_CASE("awkward shapes, tight leading dimensions") {
  for (auto const& s : kShapes)
    check_case(s);
}

TEST_CASE("leading dimensions larger than the rows") {
  for (auto const& s : kShapes) {
    check_case(s, {3, 5, 7, 0});   // odd padding: rows lose 16-byte alignment
    check_case(s, {4, 8, 12, 0});  // padding by whole float4s: alignment kept
  }
}

TEST_CASE("pointers that are not 16-byte aligned") {
  for (auto const& s : kShapes) {
    check_case(s, {0, 0, 0, 1});
    check_case(s, {4, 8, 12, 2});
    check_case(s, {1, 2, 3, 3});
  }
}

TEST_CASE("alpha and beta") {
  std::vector<Scalars> const scalars = {{2.5f, 0.0f}, {1.0f, 1.0f},  {-1.5f, 0.25f},
                                        {0.0f, 2.0f}, {0.5f, -1.0f}, {1e-3f, 1e3f}};
  std::vector<Shape> const shapes = {{1, 1, 1}, {35, 79, 19}, {128, 128, 128}, {257, 255, 129}};
  for (auto const& s : shapes) {
    for (auto const& c : scalars)
      check_case(s, {}, c);
  }
}

TEST_CASE("beta == 0 never reads C, even when C is full of NaN") {
  // run_case poisons C with NaN whenever beta == 0; alpha == 0 as well must give exact zeros.
  for (auto const& s : std::vector<Shape>{{35, 79, 19}, {256, 256, 256}}) {
    check_case(s, {}, {1.0f, 0.0f});
    check_case(s, {}, {0.0f, 0.0f});
  }
}

TEST_CASE("a larger problem: many blocks, long K") {
  check_case({1024, 768, 512});
  check_case({1000, 1000, 333}, {1, 1, 1, 1}, {0.75f, -0.5f});
}

TEST_CASE("invalid arguments throw std::invalid_argument and touch nothing") {
  HostMatrix A(layout(8, 8, 0, 0)), B(layout(8, 8, 0, 0)), C(layout(8, 8, 0, 0));
  gemm::fill_constant(A, 1.0f);
  gemm::fill_constant(B, 1.0f);
  gemm::fill_constant(C, 3.0f);
  gemm::DeviceMatrix<float> dA(A), dB(B), dC(C);
  float const* a = dA.data();
  float const* b = dB.data();
  float* c = dC.data();
  cudaStream_t st = test_stream();
  CHECK_THROWS_AS(gemm::sgemm(0, 8, 8, 1, a, 8, b, 8, 0, c, 8, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, -1, 8, 1, a, 8, b, 8, 0, c, 8, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, 8, -8, 1, a, 8, b, 8, 0, c, 8, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, 8, 8, 1, a, 7, b, 8, 0, c, 8, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, 8, 8, 1, a, 8, b, 7, 0, c, 8, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, 8, 8, 1, a, 8, b, 8, 0, c, 7, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, 8, 8, 1, nullptr, 8, b, 8, 0, c, 8, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, 8, 8, 1, a, 8, nullptr, 8, 0, c, 8, st), std::invalid_argument);
  CHECK_THROWS_AS(gemm::sgemm(8, 8, 8, 1, a, 8, b, 8, 0, nullptr, 8, st), std::invalid_argument);
  gemm::check_cuda(cudaStreamSynchronize(st), "sync");
  HostMatrix after(C.layout);
  dC.download(after);
  for (std::size_t i = 0; i < C.data.size(); ++i) {
    REQUIRE(gemm::float_to_bits(after.data[i]) == gemm::float_to_bits(C.data[i]));
  }
  // And the message names the argument.
  try {
    gemm::sgemm(8, 8, 8, 1, a, 5, b, 8, 0, c, 8, st);
  } catch (std::invalid_argument const& e) {
    CHECK(std::string(e.what()).find("lda") != std::string::npos);
  }
}

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA GPU: GPU suite skipped\n");
    return gemm::kExitSkipped;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
