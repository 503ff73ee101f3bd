// The shared GPU suite: built once per precision and linked with every step of it (meson links
// the FP32 build with a step's sgemm, the BF16 build, -DGEMM_SUITE_BF16, with its bf16_gemm, the
// split-operand build, -DGEMM_SUITE_FP32_SPLIT, with step 28's sgemm and its own error bound, and
// the FP8 builds, -DGEMM_SUITE_FP8 (and -DGEMM_FP8_PROMOTED for the bound of promoted sums), with
// an fp8_gemm: B given as n x k, the precision's scales)
// and run as `meson test`. Every case draws fresh random inputs (rounded to the input format),
// poisons C, surrounds every matrix with guard bands, runs the step and compares each element
// with a float64 CPU reference and its error bound. Without a GPU it reports "skipped" (exit 77).
//
// A failure prints the case and its seed. To replay it with the same inputs:
//   GEMM_TEST_SEED=<seed> build/test_NN_name --test-case="<the case's name>"
// (doctest reads commas in --test-case as separators, so no case name has one.)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.h"
#include "device_buffer.h"
#include "gemm.h"
#include "gpu_info.h"
#include "gpu_reference.h"
#include "precision.h"
#include "verify.h"

namespace {

#if defined(GEMM_SUITE_BF16)
using Precision = gemm::Bf16;
constexpr gemm::StepFunction<Precision> kStep = gemm::bf16_gemm;
#elif defined(GEMM_SUITE_FP32_SPLIT)
using Precision = gemm::Fp32Split;
constexpr gemm::StepFunction<Precision> kStep = gemm::sgemm;
#elif defined(GEMM_SUITE_FP8) && defined(GEMM_FP8_PROMOTED)
using Precision = gemm::Fp8Promoted;
constexpr gemm::StepFunction<Precision> kStep = gemm::fp8_gemm;
#elif defined(GEMM_SUITE_FP8)
using Precision = gemm::Fp8;
constexpr gemm::StepFunction<Precision> kStep = gemm::fp8_gemm;
#else
using Precision = gemm::Fp32;
constexpr gemm::StepFunction<Precision> kStep = gemm::sgemm;
#endif
using In = Precision::Input;
using Out = Precision::Output;
// Input elements per 16 bytes: padding by a multiple of it keeps rows 16-byte aligned (a
// multiple of 16 / sizeof(In) elements is one of 16 / sizeof(Out) too, since C's elements are
// at least as wide as A's).
constexpr int kVector = 16 / sizeof(In);
static_assert(sizeof(Out) >= sizeof(In), "the placements below pad C as A and B");

// The step, called as the precision calls it (FP8 adds its scales).
void step_call(int m, int n, int k, float alpha, In const* A, int lda, In const* B, int ldb,
               float beta, Out* C, int ldc, cudaStream_t stream) {
  Precision::call(kStep, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}

using gemm::CheckResult;
using gemm::HostMatrix;
using gemm::MatrixLayout;
using gemm::Shape;

constexpr std::size_t kGuard = 256;  // guard elements before and after every buffer

// How the matrices sit in memory: extra columns per row (ld = row length + pad) and an offset
// of the first element in elements (1, 2 or 3 breaks 16-byte alignment of the pointers).
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

// A fresh seed per case, or the one in GEMM_TEST_SEED, to replay a failure.
std::uint64_t fresh_seed() {
  if (char const* replay = std::getenv("GEMM_TEST_SEED")) return std::strtoull(replay, nullptr, 10);
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

struct Matrices {
  HostMatrix A, B, C0;
};

// A, B and C0 of shape s, placed as p says, not yet filled. B is k x n, or n x k where the
// precision gives it transposed (FP8).
Matrices placed_matrices(Shape const& s, Placement const& p) {
  return {HostMatrix(layout(s.m, s.k, p.lda_pad, p.misalign)),
          Precision::b_transposed ? HostMatrix(layout(s.n, s.k, p.ldb_pad, p.misalign))
                                  : HostMatrix(layout(s.k, s.n, p.ldb_pad, p.misalign)),
          HostMatrix(layout(s.m, s.n, p.ldc_pad, p.misalign))};
}

// The float64 reference of one case: B as k x n, and alpha times the precision's scales.
gemm::Reference reference(Matrices const& x, float alpha, float beta,
                          gemm::ErrorModel const& model) {
  float const scaled_alpha = static_cast<float>(alpha * Precision::scale);  // a power of 2: exact
  if (Precision::b_transposed) {
    return gemm::reference_gemm_cpu(scaled_alpha, x.A, gemm::transposed(x.B), beta, x.C0, model);
  }
  return gemm::reference_gemm_cpu(scaled_alpha, x.A, x.B, beta, x.C0, model);
}

Matrices random_matrices(Shape const& s, Placement const& p, Scalars const& c, std::uint64_t seed) {
  gemm::Random random(seed);
  Matrices x = placed_matrices(s, p);
  gemm::fill_random(x.A, random, Precision::element);
  gemm::fill_random(x.B, random, Precision::element);
  gemm::fill_initial_c(x.C0, c.beta, random, Precision::output_element);
  return x;
}

// Runs the step once on a non-default stream, from C0, and returns the whole buffer of C.
HostMatrix run_step(Matrices const& x, Shape const& s, Scalars const& c) {
  gemm::DeviceMatrix<In> dA(x.A), dB(x.B);
  gemm::DeviceMatrix<Out> dC(x.C0);
  step_call(s.m, s.n, s.k, c.alpha, dA.data(), x.A.layout.ld, dB.data(), x.B.layout.ld, c.beta,
            dC.data(), x.C0.layout.ld, test_stream());
  gemm::check_cuda(cudaStreamSynchronize(test_stream()), "the step");
  HostMatrix C(x.C0.layout);
  dC.download(C);
  return C;
}

// One case: the step on fresh random inputs, every element against the float64 reference,
// every guard element against its sentinel.
void check_case(Shape const& s, Placement const& p = {}, Scalars const& c = {}) {
  std::uint64_t const seed = fresh_seed();
  INFO(describe(s, p, c, seed));  // printed if anything below fails or throws
  Matrices const x = random_matrices(s, p, c, seed);
  HostMatrix const C = run_step(x, s, c);
  CheckResult const result = gemm::check_result(C, reference(x, c.alpha, c.beta, Precision::error));
  INFO(result.summary());
  CHECK(result.passed());
}

// Integer inputs small enough that every product and partial sum is exact in FP32 and the
// result exact in the output format: then any correct kernel, whatever its order of additions,
// returns exactly the reference, and the check allows no error at all. `max_abs` and k are
// chosen by the caller so that |alpha| * k * max_abs^2 + |beta| * max_abs stays within the
// integers the output format holds exactly (2^24 in FP32, 2^8 in bf16).
void check_exact_case(Shape const& s, int max_abs, Placement const& p = {}, Scalars const& c = {}) {
  std::uint64_t const seed = fresh_seed();
  INFO(describe(s, p, c, seed) << " max_abs=" << max_abs);
  gemm::Random random(seed);
  Matrices x = placed_matrices(s, p);
  gemm::fill_integers(x.A, random, max_abs);
  gemm::fill_integers(x.B, random, max_abs);
  if (c.beta == 0.0f) {
    gemm::fill_constant(x.C0, gemm::bits_to_float(gemm::kPoisonBits));
  } else {
    gemm::fill_integers(x.C0, random, max_abs);
  }
  HostMatrix const C = run_step(x, s, c);
  gemm::Reference exact = reference(x, c.alpha, c.beta, {});
  // The bounds hold only the underflow slack (about 1e-37): in effect, exact equality.
  CheckResult const result = gemm::check_result(C, exact);
  INFO(result.summary());
  CHECK(result.passed());
}

// Every element of two C buffers, guards included, must be the same bits.
void check_same_bits(HostMatrix const& first, HostMatrix const& second) {
  std::size_t differing = 0, first_difference = 0;
  for (std::size_t i = 0; i < first.data.size(); ++i) {
    if (gemm::float_to_bits(first.data[i]) != gemm::float_to_bits(second.data[i])) {
      if (differing == 0) first_difference = i;
      ++differing;
    }
  }
  INFO("elements that differ between two runs: " << differing << " (first at buffer index "
                                                 << first_difference << ")");
  CHECK(differing == 0);
}

// Two runs on the same inputs must give the same bits, everywhere in C's buffer: the promise
// cuBLAS makes by default, and the one split-K breaks if its partial sums are added in
// whatever order the blocks finish.
void check_bitwise_repeatable(Shape const& s, Placement const& p = {}, Scalars const& c = {}) {
  std::uint64_t const seed = fresh_seed();
  INFO(describe(s, p, c, seed));
  Matrices const x = random_matrices(s, p, c, seed);
  HostMatrix const first = run_step(x, s, c);
  check_same_bits(first, run_step(x, s, c));
  CheckResult const result =
      gemm::check_result(first, reference(x, c.alpha, c.beta, Precision::error));
  INFO(result.summary());
  CHECK(result.passed());
}

// A problem too large for the CPU's reference: the step runs twice on the same inputs, the two
// C buffers must be the same bits, and C is checked against the float64 reference computed on the
// GPU (cuBLAS DGEMM, as the harness does).
void check_large_case(Shape const& s, Placement const& p = {}, Scalars const& c = {}) {
  std::uint64_t const seed = fresh_seed();
  INFO(describe(s, p, c, seed));
  Matrices const x = random_matrices(s, p, c, seed);
  HostMatrix const first = run_step(x, s, c);
  check_same_bits(first, run_step(x, s, c));
  static cublasHandle_t const handle = [] {
    cublasHandle_t h = nullptr;
    gemm::check_cublas(cublasCreate(&h), "cublasCreate");
    return h;
  }();
  gemm::DeviceMatrix<In> const dA(x.A), dB(x.B);
  gemm::DeviceMatrix<Out> const dC0(x.C0);
  gemm::Reference const reference = gemm::reference_gemm_gpu(
      handle, static_cast<double>(c.alpha) * Precision::scale, dA.data(), x.A.layout, dB.data(),
      x.B.layout, c.beta, dC0.data(), x.C0.layout, Precision::error, Precision::b_transposed);
  CheckResult const result = gemm::check_result(first, reference);
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

TEST_CASE("awkward shapes with tight leading dimensions") {
  for (auto const& s : kShapes)
    check_case(s);
}

TEST_CASE("leading dimensions larger than the rows") {
  for (auto const& s : kShapes) {
    check_case(s, {3, 5, 7, 0});  // odd padding: rows lose 16-byte alignment
    check_case(s, {kVector, 2 * kVector, 3 * kVector, 0});  // whole 16-byte units: aligned
  }
}

TEST_CASE("pointers that are not 16-byte aligned") {
  for (auto const& s : kShapes) {
    check_case(s, {0, 0, 0, 1});
    check_case(s, {kVector, 2 * kVector, 3 * kVector, 2});
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

TEST_CASE("beta == 0 never reads C even when C is full of NaN") {
  // check_case poisons C with NaN whenever beta == 0; alpha == 0 as well must give exact zeros.
  for (auto const& s : std::vector<Shape>{{35, 79, 19}, {256, 256, 256}}) {
    check_case(s, {}, {1.0f, 0.0f});
    check_case(s, {}, {0.0f, 0.0f});
  }
}

TEST_CASE("integer inputs give the exact result") {
  // bf16 holds the integers up to 2^8 exactly: entries in [-2, 2] and k <= 48 keep every sum
  // within 4 k + 2 <= 194. FP32 holds them up to 2^24: entries in [-8, 8] and k <= 1000. FP8's
  // output is bf16 and its scales multiply by 2: entries in [-1, 1] and k <= 100 keep every
  // result within 2 k + 1 <= 201 (and its tensor-core sums within their 14 bits).
  bool const bf16 = Precision::element == gemm::Element::bf16;
  bool const fp8 = Precision::element == gemm::Element::e4m3;
  int const max_abs = bf16 ? 2 : fp8 ? 1 : 8;
  int const long_k = bf16 ? 48 : fp8 ? 100 : 1000;
  for (auto const& s : std::vector<Shape>{{1, 1, 1},
                                          {7, 13, 17},
                                          {35, 79, long_k},
                                          {128, 128, 32},
                                          {127, 129, long_k},
                                          {257, 255, 40},
                                          {300, 200, long_k}}) {
    check_exact_case(s, max_abs);
    check_exact_case(s, max_abs, {3, 5, 7, 1}, {1.0f, 1.0f});
  }
}

TEST_CASE("a larger problem with many blocks and a long K") {
  check_case({1024, 768, 512});
  // More output tiles than an H100 has SMs even with step 19's 128 x 256 tiles (16 x 18 = 288):
  // the persistent kernels (step 20 on) walk two or three tiles per block, their stage ring and
  // barrier phases running on from one tile to the next.
  check_case({2048, 4608, 100});
  check_case({1000, 1000, 333}, {1, 1, 1, 1}, {0.75f, -0.5f});
  // An odd number of 128-row tiles (31) with several 256-column tiles per cluster of two blocks
  // (step 21 on), once with rows padded by 8 elements: 16-byte aligned, but a pitch that is not
  // a multiple of 128 bytes, and beta != 0.
  check_case({3900, 2048, 200});
  check_case({3900, 2048, 200}, {8, 8, 8, 0}, {0.75f, -0.5f});
  // Fewer tiles than clusters with a long K (step 25 cuts each tile into slices of K, one
  // cluster per slice, and adds the slices' partial sums): 16 tiles of 128 columns with 35 k
  // tiles each, 4 slices per tile; then 16 tiles with 94 k tiles, B copied (ldb not a multiple
  // of 8), C written in pairs (ldc not a multiple of 8), and beta.
  check_case({250, 2000, 2200});
  check_case({300, 1000, 6000}, {8, 4, 2, 0}, {0.75f, -0.5f});
  // A round fewer of 144-column tiles than of 128, and a long K (step 39 takes 144 there): 8 pairs
  // of 128-row tiles by 8 columns of 144 = 64 cluster tiles on an H100's 66, against 8 x 9 = 72 of
  // 128; the last column holds 136 of 144, so the last 16-column piece of C is clipped; 17 k tiles.
  check_case({2047, 1144, 2100}, {8, 8, 8, 0}, {0.75f, -0.5f});
  // Short tiles in stacked pairs, where B is wider than A is tall (step 42): 64-row tiles with a
  // last tile of 2 rows (450 = 7 x 64 + 2), rows padded by 8 and beta; 96-row tiles with B copied
  // (ldb 3333, not a multiple of 8) and C written element by element; 112-row tiles.
  check_case({450, 2000, 700}, {8, 8, 8, 0}, {0.75f, -0.5f});
  check_case({333, 3333, 333});
  check_case({650, 2600, 260});
  // Short tiles stacked where m >= n, where stacked they need fewer pairs than side by side (step
  // 43): 96-row tiles padded by 8 with beta; 64-row tiles with B copied (ldb 797) and C written
  // element by element; 112-row tiles.
  check_case({1100, 1090, 700}, {8, 8, 8, 0}, {0.75f, -0.5f});
  check_case({801, 797, 301});
  check_case({1750, 880, 333});
  // The FP8 tile's widths of step 44: 208 columns, 8 pairs of 128-row tiles by 8 columns = 64
  // cluster tiles, the last column holding 200 of 208, so the last 16-column piece of C is
  // clipped, with rows padded by 8 and beta; 208 columns with C written element by element (n
  // odd); 192 columns, 4 pairs by 16 columns, the last holding 120 of 192.
  check_case({2000, 1656, 700}, {8, 8, 8, 0}, {0.75f, -0.5f});
  check_case({2047, 1649, 333});
  check_case({1000, 3000, 333}, {}, {0.75f, -0.5f});
  // C read by TMA where beta != 0 (step 45): 176-row tiles of three consumers, whose last group of
  // C is 16 rows, over a last tile row that mostly lies outside C (1640 = 9 x 176 + 56: TMA
  // zero-fills the loads there and clips the stores); 112-row tiles side by side, 20 of them split
  // in 3 slices, whose last slice asks for C only in its epilogue; 112-row stacked tiles split
  // in 7.
  check_case({1640, 2176, 200}, {8, 8, 8, 0}, {0.75f, -0.5f});
  // The same tiles over more than one round (115 cluster tiles on 66 clusters), A's rows off the
  // 128-byte lines (lda 208: 416 bytes): step 47 loads A in boxes of 88 rows.
  check_case({1640, 4400, 200}, {8, 8, 8, 0}, {0.75f, -0.5f});
  check_case({520, 960, 3000}, {}, {-1.0f, 2.0f});
  check_case({200, 1088, 3000}, {}, {0.75f, 1.0f});
  // An odd number of tile rows in a stacked plan (steps 21-45 pair the last row with a tile wholly
  // outside C): 144-row tiles of three consumers, 9 rows (1284 = 8 x 144 + 132), rows padded by
  // 8 and beta; 128-row tiles of two consumers, 17 rows, whose last row's 7 tiles make 4 pairs.
  check_case({1284, 2240, 200}, {8, 8, 8, 0}, {0.75f, -0.5f});
  check_case({2052, 776, 200});
}

TEST_CASE("problems of several rounds, against the GPU's reference") {
  // Step 46 runs the odd last tile row of a stacked plan side by side only where that saves part
  // of a round, which takes problems of this size. 192-row tiles of three consumers: 17 tile rows
  // by 23 (the odd row's 12 pairs bring 207 cluster tiles to 196, three whole rounds on 66
  // clusters), rows padded by 8 and beta; 45 rows by 9 (207 to 203), the last 5 pairs, all of
  // the odd row, split in slices of K.
  check_large_case({3240, 4360, 2048}, {8, 8, 8, 0}, {0.75f, -0.5f});
  check_large_case({8480, 1680, 2048});
  // A's rows off the 128-byte lines (lda 1008: 2,016 bytes), 176-row tiles of three consumers, 24
  // tile rows (4100 = 23 x 176 + 52) in four rounds: step 47 loads A in boxes of 88 rows there.
  check_large_case({4100, 4104, 1000}, {8, 8, 8, 0}, {0.75f, -0.5f});
  // Two consumers taking 128-column tiles in turn (step 48), rows padded to keep A's on 128-byte
  // lines (lda 1088 and 640) and beta: 160-row tiles, 340 cluster tiles on 66 clusters, the last 10
  // split in 4 slices of K, each slice's two boxes handing over on their own; 192-row tiles over a
  // last tile row that is mostly outside C (3900 = 20 x 192 + 60) and a last column of 56 of 128
  // (3000 = 23 x 128 + 56): 264 cluster tiles, four per cluster, two per consumer.
  check_large_case({3200, 4352, 1024}, {64, 8, 8, 0}, {0.75f, -0.5f});
  check_large_case({3900, 3000, 600}, {40, 8, 8, 0}, {0.75f, -0.5f});
}

TEST_CASE("bitwise the same C on every run") {
  // Small M x N with a long K is where split-K kernels cut K into many slices.
  check_bitwise_repeatable({64, 64, 65536});
  check_bitwise_repeatable({257, 263, 8191});
  check_bitwise_repeatable({257, 263, 8191}, {1, 2, 3, 1}, {-0.5f, 0.75f});
  check_bitwise_repeatable({1031, 1031, 1031});
  check_bitwise_repeatable({35, 79, 19});
  check_bitwise_repeatable({1000, 1000, 333}, {}, {1.5f, 2.0f});
  check_bitwise_repeatable({2048, 1152, 2048});  // step 39's 144-column tiles
  check_bitwise_repeatable({450, 2000, 700});    // step 42's stacked 64-row tiles
  check_bitwise_repeatable({1100, 1090, 700});   // step 43's stacked 96-row tiles, m > n
  check_bitwise_repeatable({2000, 1656, 700});   // step 44's 208-column FP8 tiles
  check_bitwise_repeatable({1640, 2176, 200}, {8, 8, 8, 0}, {0.75f, -0.5f});  // step 45's C by TMA
  check_bitwise_repeatable({2048, 2048, 192});  // step 48's tiles in turn, three k tiles each
}

TEST_CASE("invalid arguments throw std::invalid_argument naming the argument and touch nothing") {
  HostMatrix A(layout(8, 8, 0, 0)), B(layout(8, 8, 0, 0)), C(layout(8, 8, 0, 0));
  gemm::fill_constant(A, 1.0f);
  gemm::fill_constant(B, 1.0f);
  gemm::fill_constant(C, 3.0f);
  gemm::DeviceMatrix<In> dA(A), dB(B);
  gemm::DeviceMatrix<Out> dC(C);
  In const* a = dA.data();
  In const* b = dB.data();
  Out* c = dC.data();
  cudaStream_t st = test_stream();
  using std::invalid_argument;
  auto const step = step_call;
  CHECK_THROWS_WITH_AS(step(0, 8, 8, 1, a, 8, b, 8, 0, c, 8, st),
                       doctest::Contains("m must be >= 1"), invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, -1, 8, 1, a, 8, b, 8, 0, c, 8, st),
                       doctest::Contains("n must be >= 1"), invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, 8, -8, 1, a, 8, b, 8, 0, c, 8, st),
                       doctest::Contains("k must be >= 1"), invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, 8, 8, 1, a, 7, b, 8, 0, c, 8, st), doctest::Contains("lda"),
                       invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, 8, 8, 1, a, 8, b, 7, 0, c, 8, st), doctest::Contains("ldb"),
                       invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, 8, 8, 1, a, 8, b, 8, 0, c, 7, st), doctest::Contains("ldc"),
                       invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, 8, 8, 1, nullptr, 8, b, 8, 0, c, 8, st),
                       doctest::Contains("A must not be null"), invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, 8, 8, 1, a, 8, nullptr, 8, 0, c, 8, st),
                       doctest::Contains("B must not be null"), invalid_argument);
  CHECK_THROWS_WITH_AS(step(8, 8, 8, 1, a, 8, b, 8, 0, nullptr, 8, st),
                       doctest::Contains("C must not be null"), invalid_argument);
  gemm::check_cuda(cudaStreamSynchronize(st), "sync");
  HostMatrix after(C.layout);
  dC.download(after);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < C.data.size(); ++i)
    changed += gemm::float_to_bits(after.data[i]) != gemm::float_to_bits(C.data[i]);
  CHECK(changed == 0);
}

int main(int argc, char** argv) {
  if (auto const missing = gemm::why_no_gpu()) {
    std::printf("%s: GPU suite skipped\n", missing->c_str());
    return gemm::kExitSkipped;
  }
#ifdef GEMM_NEEDS_SM90A
  if (auto const why = gemm::why_not_sm90a()) {
    std::printf("%s: GPU suite skipped\n", why->c_str());
    return gemm::kExitSkipped;
  }
#endif
  doctest::Context context(argc, argv);
  return context.run();
}
