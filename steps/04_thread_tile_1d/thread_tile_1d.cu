// Step 04: more work per thread, in one dimension.
//
// In step 03 every FMA needs two shared-memory loads (one from each tile): the kernel is
// limited by shared-memory instructions (the profiler's "MIO throttle" stall), not by
// arithmetic. Here each thread computes a column of kTM = 8 elements of C instead of one.
// For each p it loads ONE value of B from shared memory, keeps it in a register, and uses it
// for 8 FMAs with 8 values of A:
//   step 03: 2 shared loads per FMA;   step 04: (1 + 8) / 8 = 1.125 shared loads per FMA.
// The block tile grows to 64 x 64 (512 threads x 8 elements), which also halves the global
// traffic per FMA compared with 32 x 32 tiles. The k tile is kBK = 8 deep: 64 x 8 of A and
// 8 x 64 of B, exactly one element of each per thread.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 64;                    // block tile rows
constexpr int kBN = 64;                    // block tile columns
constexpr int kBK = 8;                     // k tile depth
constexpr int kTM = 8;                     // rows of C per thread
constexpr int kThreads = kBM * kBN / kTM;  // 512
static_assert(kBM * kBK == kThreads && kBK * kBN == kThreads,
              "each thread copies exactly one element of each tile");

__global__ void __launch_bounds__(kThreads)
    thread_tile_1d_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                float const* B, int ldb, float beta, float* C, int ldc) {
  __shared__ float a_tile[kBM][kBK];  // (row, p)
  __shared__ float b_tile[kBK][kBN];  // (p, column)

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;

  // The element of each tile this thread copies. A warp reads 4 rows x 8 consecutive floats
  // of A (4 full 32-byte sectors) and 32 consecutive floats of one row of B.
  int const a_r = tid / kBK, a_c = tid % kBK;
  int const b_r = tid / kBN, b_c = tid % kBN;

  // The column of kTM results this thread owns: rows thread_row * 8 .. + 7, one column.
  // Consecutive threads take consecutive columns, so the 32 threads of a warp share
  // thread_row and read the same a_tile values (broadcasts).
  int const thread_row = tid / kBN;
  int const thread_col = tid % kBN;

  float acc[kTM] = {};
  for (int k0 = 0; k0 < k; k0 += kBK) {
    int const a_row = block_row + a_r, a_col = k0 + a_c;
    int const b_row = k0 + b_r, b_col = block_col + b_c;
    a_tile[a_r][a_c] =
        (a_row < m && a_col < k) ? A[static_cast<size_t>(a_row) * lda + a_col] : 0.0f;
    b_tile[b_r][b_c] =
        (b_row < k && b_col < n) ? B[static_cast<size_t>(b_row) * ldb + b_col] : 0.0f;
    __syncthreads();

#pragma unroll
    for (int p = 0; p < kBK; ++p) {
      float const b = b_tile[p][thread_col];  // one shared load, reused 8 times
#pragma unroll
      for (int i = 0; i < kTM; ++i)
        acc[i] += a_tile[thread_row * kTM + i][p] * b;
    }
    __syncthreads();
  }

  int const col = block_col + thread_col;
  if (col >= n) return;
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    int const row = block_row + thread_row * kTM + i;
    if (row < m) gemm::store_scaled(&C[static_cast<size_t>(row) * ldc + col], acc[i], alpha, beta);
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 04_thread_tile_1d)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  thread_tile_1d_sgemm_kernel<<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta,
                                                             C, ldc);
  check_launch(routine);
}
