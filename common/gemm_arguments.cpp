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

void check_gemm_arguments(char const* routine, int m, int n, int k, void const* A, int lda,
                          void const* B, int ldb, void const* C, int ldc) {
  require(m >= 1, routine, "m must be >= 1" + got(m));
  require(n >= 1, routine, "n must be >= 1" + got(n));
  require(k >= 1, routine, "k must be >= 1" + got(k));
  // Row-major: a row of A holds k elements, a row of B and of C holds n.
  require(lda >= k, routine, "lda must be >= k = " + std::to_string(k) + got(lda));
  require(ldb >= n, routine, "ldb must be >= n = " + std::to_string(n) + got(ldb));
  require(ldc >= n, routine, "ldc must be >= n = " + std::to_string(n) + got(ldc));
  require(A != nullptr, routine, "A must not be null");
  require(B != nullptr, routine, "B must not be null");
  require(C != nullptr, routine, "C must not be null");
}

void check_launch(char const* routine) {
  check_cuda(cudaGetLastError(), (std::string(routine) + ": kernel launch failed").c_str());
}

}  // namespace gemm
