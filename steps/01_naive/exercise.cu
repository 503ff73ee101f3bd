// Exercise for step 01: the naive kernel. Read README.md first.
//
// Fill in the two TODO(student) blocks, then build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_01_naive --print-errorlogs   the shared GPU suite
//   build/exercise_01_naive 4096                                time it against cuBLAS
// The suite fails until both blocks are right. The solution is naive.cu, beside this file.

#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBlockSide = 32;  // 32 x 32 = 1024 threads, one per element of a 32 x 32 tile of C

__global__ void naive_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                   float const* B, int ldb, float beta, float* C, int ldc) {
  // TODO(student): give this thread its element of C. Map the x dimension of the grid and
  // block to ROWS of C and y to COLUMNS (the launcher below sizes the grid that way), so the
  // 32 threads of a warp get 32 consecutive rows of one column.
  int const row = 0;
  int const col = 0;
  // END TODO
  if (row >= m || col >= n) return;

  // size_t offsets: row * lda can exceed 2^31 for large matrices.
  float const* a_row = A + static_cast<size_t>(row) * lda;
  float acc = 0.0f;
  // TODO(student): accumulate the dot product of row `row` of A (a_row[p]) and column `col`
  // of B over p = 0 .. k-1. Element (p, col) of B is at B[p * ldb + col]; compute the offset
  // in size_t, since p * ldb can exceed 2^31 for large matrices.
  (void)a_row[0];
  // END TODO
  gemm::store_scaled(&C[static_cast<size_t>(row) * ldc + col], acc, alpha, beta);
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 01_naive)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const block(kBlockSide, kBlockSide);
  dim3 const grid = make_grid(ceil_div(m, kBlockSide), ceil_div(n, kBlockSide), routine);
  naive_sgemm_kernel<<<grid, block, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  check_launch(routine);
}
