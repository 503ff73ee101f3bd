// Argument checks shared by every step: the contract's rules are written once, here.
#include <stdexcept>
#include <string>

#include "cuda_check.h"
#include "gemm.h"

namespace gemm {
namespace {

void require(bool ok, char const* routine, std::string const& message) {
  if (!ok) throw std::invalid_argument(std::string(routine) + ": " + message);
}

std::string got(int value) {
  return " (got " + std::to_string(value) + ")";
}

}  // namespace

namespace {

// The rules both contracts share; `ldb_minimum` is n for a k x n B and k for B given as n x k.
void check_sizes_and_pointers(char const* routine, int m, int n, int k, void const* A, int lda,
                              void const* B, int ldb, char const* ldb_minimum_name, int ldb_minimum,
                              void const* C, int ldc) {
  require(m >= 1, routine, "m must be >= 1" + got(m));
  require(n >= 1, routine, "n must be >= 1" + got(n));
  require(k >= 1, routine, "k must be >= 1" + got(k));
  // Row-major: a row of A holds k elements, a row of C n.
  require(lda >= k, routine, "lda must be >= k = " + std::to_string(k) + got(lda));
  require(ldb >= ldb_minimum, routine,
          std::string("ldb must be >= ") + ldb_minimum_name + " = " + std::to_string(ldb_minimum) +
              got(ldb));
  require(ldc >= n, routine, "ldc must be >= n = " + std::to_string(n) + got(ldc));
  require(A != nullptr, routine, "A must not be null");
  require(B != nullptr, routine, "B must not be null");
  require(C != nullptr, routine, "C must not be null");
}

}  // namespace

void check_gemm_arguments(char const* routine, int m, int n, int k, void const* A, int lda,
                          void const* B, int ldb, void const* C, int ldc) {
  // A row of B (k x n) holds n elements.
  check_sizes_and_pointers(routine, m, n, k, A, lda, B, ldb, "n", n, C, ldc);
}

void check_fp8_gemm_arguments(char const* routine, int m, int n, int k, void const* A, int lda,
                              void const* B, int ldb, float const* a_scale, float const* b_scale,
                              void const* C, int ldc) {
  // B is given as n x k: a row of it holds k elements.
  check_sizes_and_pointers(routine, m, n, k, A, lda, B, ldb, "k", k, C, ldc);
  require(a_scale != nullptr, routine, "a_scale must not be null");
  require(b_scale != nullptr, routine, "b_scale must not be null");
}

void check_launch(char const* routine) {
  check_cuda(cudaGetLastError(), (std::string(routine) + ": kernel launch failed").c_str());
}

}  // namespace gemm
