// Step 02: coalesced global memory access.
//
// The kernel body is step 01's; only the thread-to-element mapping changes. threadIdx.x now
// runs along the COLUMNS of C, so the 32 threads of a warp hold 32 consecutive columns of one
// row, and in every iteration of the k loop they read
//   A[row][p]        one address: a broadcast;
//   B[p][col..col+31] 32 consecutive floats: 128 contiguous bytes, 4 sectors, one request;
// and they write C along a row: again 128 contiguous bytes. The memory system serves a warp's
// request in 32-byte sectors, so step 01's scattered reads fetched 32 sectors (1024 bytes) to
// deliver 128 useful bytes; here 4 sectors deliver the same 128 bytes.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBlockSide = 32;  // 32 x 32 = 1024 threads, one per element of a 32 x 32 tile of C

__global__ void coalesced_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                       float const* B, int ldb, float beta, float* C, int ldc) {
  // x -> column, y -> row: consecutive threads of a warp get consecutive columns.
  int const col = blockIdx.x * blockDim.x + threadIdx.x;
  int const row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;

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
  char const* const routine = "sgemm (step 02_coalesced)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const block(kBlockSide, kBlockSide);
  dim3 const grid = make_grid(ceil_div(n, kBlockSide), ceil_div(m, kBlockSide), routine);
  coalesced_sgemm_kernel<<<grid, block, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  check_launch(routine);
}
