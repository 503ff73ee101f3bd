#include "verify.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

namespace gemm {

bool MatrixLayout::is_element(std::size_t buffer_index) const {
  if (buffer_index < front) return false;
  std::size_t const offset = buffer_index - front;
  std::size_t const row = offset / static_cast<std::size_t>(ld);
  std::size_t const col = offset % static_cast<std::size_t>(ld);
  return row < static_cast<std::size_t>(rows) && col < static_cast<std::size_t>(cols);
}

float bits_to_float(std::uint32_t bits) {
  return std::bit_cast<float>(bits);
}
std::uint32_t float_to_bits(float value) {
  return std::bit_cast<std::uint32_t>(value);
}

namespace {

// Round to nearest, ties to even, onto the e4m3 grid: 4 significant bits for |x| >= 2^-6 (the
// smallest normal), a fixed step of 2^-9 below it.
float round_to_e4m3(float value) {
  double const magnitude = std::fabs(static_cast<double>(value));
  if (magnitude == 0.0) return value;
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  int const quantum_exponent = std::max(exponent - 4, -9);
  double const rounded =
      std::ldexp(std::nearbyint(std::ldexp(magnitude, -quantum_exponent)), quantum_exponent);
  if (rounded > 448.0) {
    throw std::invalid_argument("round_to: " + std::to_string(value) +
                                " is beyond e4m3's largest value, 448");
  }
  return static_cast<float>(std::copysign(rounded, static_cast<double>(value)));
}

}  // namespace

float round_to(Element element, float value) {
  if (element == Element::fp32 || !std::isfinite(value)) return value;
  if (element == Element::e4m3) return round_to_e4m3(value);
  // Round the float to its top 16 bits, to nearest with ties to even: add half of the dropped
  // range minus one, plus the lowest kept bit, and cut. A carry into the exponent is correct
  // (it rounds up to the next binade, or to infinity).
  std::uint32_t const bits = float_to_bits(value);
  std::uint32_t const lowest_kept = (bits >> 16) & 1u;
  return bits_to_float((bits + 0x7fffu + lowest_kept) & 0xffff0000u);
}

std::uint16_t bf16_bits(float value) {
  std::uint32_t const bits = float_to_bits(value);
  if ((bits & 0xffffu) != 0) {
    throw std::invalid_argument("bf16_bits: the value is not a bf16 value (use round_to first)");
  }
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16_bits(std::uint16_t bits) {
  return bits_to_float(static_cast<std::uint32_t>(bits) << 16);
}

std::uint64_t Random::next() {
  state_ += 0x9e3779b97f4a7c15ull;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float Random::nonzero_uniform() {
  for (;;) {
    // 24 random bits give every float in [-1, 1) on a grid of 2^-23; skip the single zero.
    auto const bits = static_cast<std::int32_t>(next() >> 40);  // 0 .. 2^24 - 1
    float const value = static_cast<float>(bits - (1 << 23)) * 0x1p-23f;
    if (value != 0.0f) return value;
  }
}

namespace {

template <typename ElementValue>
void fill(HostMatrix& matrix, ElementValue element_value) {
  MatrixLayout const& l = matrix.layout;
  float const guard = bits_to_float(kGuardBits);
  std::fill(matrix.data.begin(), matrix.data.end(), guard);
  for (int r = 0; r < l.rows; ++r) {
    for (int c = 0; c < l.cols; ++c)
      matrix.at(r, c) = element_value();
  }
}

}  // namespace

void fill_random(HostMatrix& matrix, Random& random, Element element) {
  // Rounding a nonzero value in [-1, 1] of magnitude >= 2^-23 to bf16 never gives zero; to e4m3
  // it does below 2^-10, and such a value is drawn again.
  fill(matrix, [&] {
    for (;;) {
      float const value = round_to(element, random.nonzero_uniform());
      if (value != 0.0f) return value;
    }
  });
}

void fill_integers(HostMatrix& matrix, Random& random, int max_abs) {
  if (max_abs < 1) throw std::invalid_argument("fill_integers: max_abs must be >= 1");
  auto const choices = static_cast<std::uint64_t>(2 * max_abs);  // -max..-1 and 1..max
  fill(matrix, [&] {
    int const pick = static_cast<int>(random.next() % choices);
    return static_cast<float>(pick < max_abs ? pick - max_abs : pick - max_abs + 1);
  });
}

void fill_constant(HostMatrix& matrix, float value) {
  fill(matrix, [=] { return value; });
}

void fill_initial_c(HostMatrix& C, float beta, Random& random, Element element) {
  if (beta == 0.0f) {
    fill_constant(C, bits_to_float(kPoisonBits));
  } else {
    fill_random(C, random, element);
  }
}

namespace {

// gamma(n) = n u / (1 - n u): infinite once n u reaches 1 (the worst case then bounds nothing).
double gamma_of(double n, double u) {
  if (n * u >= 1.0) return std::numeric_limits<double>::infinity();
  return n * u / (1.0 - n * u);
}

}  // namespace

double error_bound(double magnitude, double value, int k, ErrorModel const& model) {
  double gamma = 0.0;
  if (model.promote_every > 0 && k > model.promote_every) {
    double const chunk = gamma_of(model.additions * model.promote_every, model.accumulation);
    double const chunks = std::ceil(static_cast<double>(k) / model.promote_every);
    gamma = chunk + gamma_of(chunks + 2.0, model.promoted_accumulation) * (1.0 + chunk);
  } else {
    gamma = gamma_of(model.additions * k + 2.0, model.accumulation);
  }
  if (std::isinf(gamma)) return gamma;
  double const accumulated = (gamma * model.kept_magnitude + model.dropped) * magnitude;
  double const rounded = model.output * (std::fabs(value) + accumulated);
  // Products of values in the subnormal range lose relative accuracy; a few times the
  // smallest normal float absorbs that without hiding any real error.
  double const underflow_slack = 4.0 * static_cast<double>(std::numeric_limits<float>::min());
  return accumulated + rounded + underflow_slack;
}

HostMatrix transposed(HostMatrix const& matrix) {
  MatrixLayout const& l = matrix.layout;
  HostMatrix result(MatrixLayout{l.cols, l.rows, l.rows, 0, 0});
  for (int r = 0; r < l.rows; ++r) {
    for (int c = 0; c < l.cols; ++c)
      result.at(c, r) = matrix.at(r, c);
  }
  return result;
}

Reference reference_gemm_cpu(float alpha, HostMatrix const& A, HostMatrix const& B, float beta,
                             HostMatrix const& C0, ErrorModel const& model) {
  int const m = A.layout.rows;
  int const k = A.layout.cols;
  int const n = B.layout.cols;
  if (B.layout.rows != k || C0.layout.rows != m || C0.layout.cols != n) {
    throw std::invalid_argument("reference_gemm_cpu: shapes of A, B and C do not match");
  }
  Reference ref;
  ref.m = m;
  ref.n = n;
  ref.value.assign(static_cast<std::size_t>(m) * n, 0.0);
  ref.bound.assign(static_cast<std::size_t>(m) * n, 0.0);
  std::vector<double> row_value(n);
  std::vector<double> row_magnitude(n);
  for (int i = 0; i < m; ++i) {
    std::fill(row_value.begin(), row_value.end(), 0.0);
    std::fill(row_magnitude.begin(), row_magnitude.end(), 0.0);
    for (int p = 0; p < k; ++p) {
      double const a = A.at(i, p);
      for (int j = 0; j < n; ++j) {
        double const b = B.at(p, j);
        row_value[j] += a * b;
        row_magnitude[j] += std::fabs(a * b);
      }
    }
    for (int j = 0; j < n; ++j) {
      double value = static_cast<double>(alpha) * row_value[j];
      double magnitude = std::fabs(static_cast<double>(alpha)) * row_magnitude[j];
      if (beta != 0.0f) {  // beta == 0: C0 is not read, as in BLAS
        value += static_cast<double>(beta) * C0.at(i, j);
        magnitude += std::fabs(static_cast<double>(beta) * C0.at(i, j));
      }
      std::size_t const out = static_cast<std::size_t>(i) * n + j;
      ref.value[out] = value;
      ref.bound[out] = error_bound(magnitude, value, k, model);
    }
  }
  return ref;
}

Reference reference_from_magnitude(int m, int n, int k, std::vector<double> value,
                                   std::vector<double> const& magnitude, ErrorModel const& model) {
  std::size_t const count = static_cast<std::size_t>(m) * n;
  if (value.size() != count || magnitude.size() != count) {
    throw std::invalid_argument("reference_from_magnitude: arrays do not hold m x n elements");
  }
  Reference ref;
  ref.m = m;
  ref.n = n;
  ref.value = std::move(value);
  ref.bound.resize(count);
  for (std::size_t i = 0; i < count; ++i)
    ref.bound[i] = error_bound(magnitude[i], ref.value[i], k, model);
  return ref;
}

CheckResult check_result(HostMatrix const& C, Reference const& reference) {
  MatrixLayout const& l = C.layout;
  if (l.rows != reference.m || l.cols != reference.n) {
    throw std::invalid_argument("check_result: C and the reference differ in shape");
  }
  CheckResult result;
  double error_squares = 0.0;
  double reference_squares = 0.0;
  for (int i = 0; i < l.rows; ++i) {
    for (int j = 0; j < l.cols; ++j) {
      std::size_t const r = static_cast<std::size_t>(i) * l.cols + j;
      double const value = C.at(i, j);
      double const expected = reference.value[r];
      double const error = std::fabs(value - expected);
      ++result.checked;
      // Written so that NaN fails: every comparison with NaN is false.
      bool const ok = error <= reference.bound[r];
      double const ratio = std::isfinite(error) ? error / reference.bound[r]
                                                : std::numeric_limits<double>::infinity();
      if (!ok) ++result.failures;
      if (ratio > result.worst_ratio || result.worst_row < 0) {
        result.worst_ratio = ratio;
        result.worst_row = i;
        result.worst_col = j;
        result.worst_value = value;
        result.worst_expected = expected;
      }
      error_squares +=
          std::isfinite(error) ? error * error : std::numeric_limits<double>::infinity();
      reference_squares += expected * expected;
    }
  }
  result.relative_error = reference_squares > 0.0 ? std::sqrt(error_squares / reference_squares)
                                                  : std::sqrt(error_squares);

  for (std::size_t i = 0; i < C.data.size(); ++i) {
    if (l.is_element(i)) continue;
    if (float_to_bits(C.data[i]) != kGuardBits) {
      if (result.guard_violations == 0) result.first_guard_violation = i;
      ++result.guard_violations;
    }
  }
  return result;
}

std::string CheckResult::summary() const {
  char line[256];
  if (passed()) {
    std::snprintf(line, sizeof line, "pass (max err/bound %.3g, rel err %.2g)", worst_ratio,
                  relative_error);
  } else if (failures > 0) {
    std::snprintf(line, sizeof line,
                  "FAIL: %zu of %zu elements outside the bound; worst C[%d][%d] = %.9g, expected "
                  "%.9g (err/bound %.3g)%s",
                  failures, checked, worst_row, worst_col, worst_value, worst_expected, worst_ratio,
                  guard_violations > 0 ? "; guard band overwritten too" : "");
  } else {
    std::snprintf(line, sizeof line,
                  "FAIL: %zu guard-band elements overwritten (first at buffer index %zu)",
                  guard_violations, first_guard_violation);
  }
  return line;
}

}  // namespace gemm
