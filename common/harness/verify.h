// Host-side data and checking shared by the benchmark harness and the GPU test suite:
// random matrices, guard bands, a float64 reference with a per-element error bound, and the
// comparison that decides pass or fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gemm {

// A row-major matrix stored with leading dimension ld >= cols, inside a buffer that starts
// `front` elements before element (0, 0) and ends `back` elements after the last row. The
// elements outside the rows x cols block (front band, back band, the padding columns
// cols..ld-1 of every row) form the guard band: a kernel must never write them.
struct MatrixLayout {
  int rows = 0;
  int cols = 0;
  int ld = 0;
  std::size_t front = 0;
  std::size_t back = 0;

  std::size_t buffer_elements() const {
    return front + static_cast<std::size_t>(rows) * static_cast<std::size_t>(ld) + back;
  }
  // Buffer index of element (row, col).
  std::size_t index(int row, int col) const {
    return front + static_cast<std::size_t>(row) * static_cast<std::size_t>(ld) +
           static_cast<std::size_t>(col);
  }
  bool is_element(std::size_t buffer_index) const;
};

// A matrix plus its whole buffer on the host; element (r, c) is data[layout.index(r, c)].
struct HostMatrix {
  MatrixLayout layout;
  std::vector<float> data;

  explicit HostMatrix(MatrixLayout const& l, float fill = 0.0f)
      : layout(l), data(l.buffer_elements(), fill) {}
  float& at(int row, int col) { return data[layout.index(row, col)]; }
  float at(int row, int col) const { return data[layout.index(row, col)]; }
};

// Bit patterns the checks look for. Both are quiet NaNs, so any arithmetic that reads them
// produces NaN, which always fails the element check. Their low 16 bits are zero, so they are
// also bf16 values (the top 16 bits) and survive the trip to a bf16 matrix and back unchanged;
// neither is the NaN a GPU produces (0x7fffffff).
inline constexpr std::uint32_t kGuardBits = 0x7fd00000u;   // guard bands: must stay untouched
inline constexpr std::uint32_t kPoisonBits = 0x7fe00000u;  // C before a beta == 0 call
float bits_to_float(std::uint32_t bits);
std::uint32_t float_to_bits(float value);

// The element formats of the device matrices. The host keeps every matrix as floats. For a
// narrower format every generated value is first rounded to that format, so the float on the
// host and the element on the device are the same number, and the reference sees the inputs
// the kernel sees. e4m3 is FP8 with 4 exponent and 3 mantissa bits (the FP8 steps' A and B):
// 4 significant bits, largest value 448, smallest 2^-9 (subnormal).
enum class Element { fp32, bf16, e4m3 };
// Rounds to the nearest value of the format (ties to even); NaN and infinities pass unchanged.
// An e4m3 value beyond +-448 throws std::invalid_argument (the format has no infinity).
float round_to(Element element, float value);
// bf16 is the top half of a float: these two convert exactly, NaN payloads included. bf16_bits
// throws std::invalid_argument if `value` is not a bf16 value (low 16 bits not zero).
std::uint16_t bf16_bits(float value);
float from_bf16_bits(std::uint16_t bits);

// A small, fast, seedable generator (splitmix64): the same seed gives the same matrices on
// every machine, so a failure can be reproduced from the seed the checker prints.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [-1, 1], never exactly zero (zeros hide unwritten outputs and wrong indexing).
  float nonzero_uniform();

 private:
  std::uint64_t state_;
};

// Fills the rows x cols block with nonzero_uniform() values rounded to `element` (never zero: a
// value that rounds to zero in e4m3, below 2^-10, is drawn again) and the guard band with
// kGuardBits.
void fill_random(HostMatrix& matrix, Random& random, Element element = Element::fp32);
// Fills the rows x cols block with integers in [-max_abs, max_abs], never zero, and the guard
// band with kGuardBits. Products and sums of small integers are exact in floating point as
// long as every partial sum stays below 2^(significand bits): 2^24 in FP32, 2^8 in bf16.
void fill_integers(HostMatrix& matrix, Random& random, int max_abs);
// Fills the rows x cols block with `value` and the guard band with kGuardBits.
void fill_constant(HostMatrix& matrix, float value);
// C before a call: with beta == 0 it must not be read, so it is NaN poison (any element the
// call fails to write, or computes from the old C, stays NaN and fails the check); otherwise
// random values that the call must read.
void fill_initial_c(HostMatrix& C, float beta, Random& random, Element element = Element::fp32);

// The expected result, element (i, j) at [i * n + j]: `value` is alpha*A*B + beta*C0 in float64,
// `bound` the largest error a correct FP32 computation may have there (see error_bound).
struct Reference {
  int m = 0;
  int n = 0;
  std::vector<double> value;
  std::vector<double> bound;
};

// How a precision rounds: the unit roundoff of the arithmetic that accumulates the result, and
// of the final conversion to the output format (0 when the accumulator is the output).
//
// `additions` counts the rounded additions per term of the dot product: 1 for a plain sum. A
// split-operand product (step 28) multiplies each input as a sum of parts: 6 products of parts
// per term, whose magnitudes add up to at most `kept_magnitude` times |a| |b|, while the products
// of parts left out are at most `dropped` times |a| |b|. The plain formats multiply once and drop
// nothing.
//
// A promoted sum (step 30) adds `promote_every` terms at a time with `accumulation` and then adds
// these partial sums together with `promoted_accumulation` (FP32, round to nearest: 2^-24).
struct ErrorModel {
  double accumulation = 0.0;
  double output = 0.0;
  double additions = 1.0;
  double kept_magnitude = 1.0;
  double dropped = 0.0;
  int promote_every = 0;  // 0: one sum over all k
  double promoted_accumulation = 0.0;
};
// FP32: accumulation and output in FP32, unit roundoff 2^-24.
inline constexpr ErrorModel kFp32Error{0x1p-24, 0.0};
// BF16 in and out, FP32 accumulation. The accumulation gets 2^-23, twice FP32's unit roundoff,
// because a tensor core may truncate instead of rounding when it adds; the output is rounded
// once to bf16, whose 8 significant bits give 2^-8.
inline constexpr ErrorModel kBf16Error{0x1p-23, 0x1p-8};
// FP32 in and out, computed as BF16x6 (step 28): a = a0 + a1 + a2 exactly, three bf16 parts with
// |a0| <= (1 + 2^-8) |a|, |a1| <= 2^-8 (1 + 2^-8) |a|, |a2| <= 2^-16 |a| (each part rounds what is
// left to 8 significant bits). Each product a_i b_j of two bf16 is exact in FP32. Kept: the six
// with i + j <= 2, whose magnitudes add up to at most
//   (|a0| + |a1| + |a2|) (|b0| + |b1| + |b2|) <= ((1 + 2^-8)(1 + 2^-8 + 2^-16))^2 |a||b|
//                                              <= 1.0158 |a||b| <= (1 + 2^-6 + 2^-9) |a||b|.
// Dropped: a1 b2 + a2 b1 + a2 b2, at most (2 (1 + 2^-8) 2^-24 + 2^-32) |a||b| <= (1 + 2^-7) 2^-23
// |a||b|. The 6 k products are summed by tensor cores, which may truncate (2^-23, as for BF16);
// the output is the FP32 sum itself.
inline constexpr ErrorModel kBf16x6Error{0x1p-23, 0.0, 6.0, 1.0 + 0x1p-6 + 0x1p-9,
                                         (1.0 + 0x1p-7) * 0x1p-23};
// FP8 (E4M3) in, BF16 out, the sum left to the tensor cores (step 29). The product of two e4m3
// values is exact (4 x 4 significant bits). A tensor core adds keeping 13 bits below the leading
// bit of the largest of the operands and the running sum, and cuts the rest (measured: 2^-13
// survives next to 1, 2^-14 does not; 3 x 2^-15 is cut, not rounded): a unit roundoff of 2^-13.
// One wgmma adds 32 products and its accumulator: 33 truncations per 32 terms. The output is
// rounded once to bf16, 2^-8. For 33 k / 32 + 2 >= 2^13 the worst case bounds nothing (gamma is
// infinite) and error_bound returns infinity: a sum that long has no guarantee without promotion.
inline constexpr ErrorModel kFp8Error{0x1p-13, 0x1p-8, 33.0 / 32.0};
// The same with each k tile of 128 promoted (step 30): the tensor cores' truncating additions act
// on sums of 128 products (132 cuts), whose results are added in FP32 (2^-24).
inline constexpr ErrorModel kFp8PromotedError{0x1p-13, 0x1p-8, 33.0 / 32.0, 1.0, 0.0, 128, 0x1p-24};

// Rounding-error bound for one element of a GEMM (Higham, "Accuracy and Stability of Numerical
// Algorithms", 3.1, 2.2). Accumulated with unit roundoff u in any summation order,
//   |c - exact| <= e = gamma(k + 2) * (|alpha| * sum_p |a_ip| |b_pj| + |beta| |c0|),
//   gamma(n) = n u / (1 - n u);
// then rounding to the output format (unit roundoff v) adds at most v * (|exact| + e).
// `magnitude` is the bracket, `value` the exact result. The k + 2 covers the k-term dot
// product plus the alpha and beta products; a tiny absolute term covers underflow. A correct
// result always meets it, whatever the order of its additions (split-K, tree reductions, FMA
// or not).
// With `additions` per term the sum has additions * k + 2 rounded additions; with split operands
// their terms' magnitudes add up to at most kept_magnitude times the bracket, and the products
// left out add dropped times the bracket:
//   e = gamma(additions * k + 2) * kept_magnitude * bracket + dropped * bracket.
// Promoted every P terms (P < k), each partial sum of P terms is off by at most gamma(additions
// * P) times its own bracket, and adding the ceil(k / P) partial sums and the alpha and beta
// products (unit roundoff v) adds gamma_v(ceil(k / P) + 2) times their magnitudes:
//   e = (gamma(additions * P) + gamma_v(ceil(k / P) + 2) * (1 + gamma(additions * P))) * bracket.
double error_bound(double magnitude, double value, int k, ErrorModel const& model);

// The dense transpose of the rows x cols block of `matrix` (no guard band): the suite's CPU
// reference takes B as k x n, and the FP8 contract gives it as n x k.
HostMatrix transposed(HostMatrix const& matrix);

// Plain triple-loop float64 reference on the CPU; for the small shapes of the test suite.
// With beta == 0, C0 is not read (it may hold NaN), as the contract says.
Reference reference_gemm_cpu(float alpha, HostMatrix const& A, HostMatrix const& B, float beta,
                             HostMatrix const& C0, ErrorModel const& model);

// Builds a Reference from float64 `value` and `magnitude` arrays (m x n, dense), e.g. computed
// on the GPU by two DGEMMs.
Reference reference_from_magnitude(int m, int n, int k, std::vector<double> value,
                                   std::vector<double> const& magnitude, ErrorModel const& model);

// What the comparison found.
struct CheckResult {
  std::size_t checked = 0;
  std::size_t failures = 0;          // elements outside their bound (NaN/Inf included)
  std::size_t guard_violations = 0;  // guard-band elements that changed
  double worst_ratio = 0.0;          // max |c - ref| / bound (inf for NaN/Inf)
  int worst_row = -1;
  int worst_col = -1;
  double worst_value = 0.0;
  double worst_expected = 0.0;
  double relative_error = 0.0;  // ||c - ref||_F / ||ref||_F, for reporting only
  std::size_t first_guard_violation = 0;

  bool passed() const { return failures == 0 && guard_violations == 0; }
  std::string summary() const;  // one line, e.g. "pass (max err/bound 0.003, rel err 2.1e-07)"
};

// Compares every element of the result block of C with the reference and checks that every
// guard-band element still holds kGuardBits.
CheckResult check_result(HostMatrix const& C, Reference const& reference);

}  // namespace gemm
