// Step 01: the naive kernel.
//
// One thread computes one element of C: a dot product of a row of A and a column of B, read
// straight from global memory. It is the definition of matrix multiplication written as a
// kernel, and the baseline every later step is measured against.
//
// The mapping is the one most people write first: threadIdx.x runs down the ROWS of C.
// The 32 threads of a warp therefore hold 32 consecutive rows of one column, and in every
// iteration of the k loop they read
//   A[row][p]  for 32 different rows: 32 addresses lda floats apart, 32 separate sectors;
//   B[p][col]  one address: a broadcast;
// and at the end they write C down a column: 32 more scattered sectors. Step 02 changes only
// this mapping.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBlockSide = 32;  // 32 x 32 = 1024 threads, one per element of a 32 x 32 tile of C

__global__ void naive_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                   float const* B, int ldb, float beta, float* C, int ldc) {
  // x -> row, y -> column: consecutive threads of a warp get consecutive rows (the slow way).
  int const row = blockIdx.x * blockDim.x + threadIdx.x;
  int const col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;

  // size_t offsets: row * lda can exceed 2^31 for large matrices.
  float const* a_row = A + static_cast<size_t>(row) * lda;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) {
    acc += a_row[p] * B[static_cast<size_t>(p) * ldb + col];
  }
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
