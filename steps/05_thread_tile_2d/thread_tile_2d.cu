// Step 05: a 2D register tile per thread.
//
// Step 04 reused each B value 8 times but still loaded a fresh A value for every FMA. Here
// each thread computes an 8 x 8 block of C. For each p it loads 8 values of A and 8 values of
// B into registers and performs all 64 products between them (an outer product):
//   step 04: 9 shared loads per 8 FMAs (1.125 per FMA);
//   step 05: 16 shared loads per 64 FMAs (0.25 per FMA).
// The block tile grows to 128 x 128 (256 threads x 64 elements) with kBK = 8: per k tile the
// block reads (128 + 128) x 8 floats from global memory for 128 x 128 x 8 FMAs, half the
// global traffic per FMA of step 04's 64 x 64 tile. The 64 accumulators live in registers.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 128;                                // block tile rows
constexpr int kBN = 128;                                // block tile columns
constexpr int kBK = 8;                                  // k tile depth
constexpr int kTM = 8;                                  // rows of C per thread
constexpr int kTN = 8;                                  // columns of C per thread
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);     // 256
constexpr int kALoadsPerThread = kBM * kBK / kThreads;  // 4
constexpr int kBLoadsPerThread = kBK * kBN / kThreads;  // 4
static_assert(kThreads % kBK == 0 && kThreads % kBN == 0, "copy pattern must tile evenly");

__global__ void __launch_bounds__(kThreads)
    thread_tile_2d_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                float const* B, int ldb, float beta, float* C, int ldc) {
  __shared__ float a_tile[kBM][kBK];  // (row, p)
  __shared__ float b_tile[kBK][kBN];  // (p, column)

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;

  // Copy pattern: thread tid copies A elements (tid / 8 + 32 i, tid % 8) and B elements
  // (tid / 128 + 2 i, tid % 128), i = 0..3.
  int const a_r = tid / kBK, a_c = tid % kBK;
  int const b_r = tid / kBN, b_c = tid % kBN;
  constexpr int kARowStride = kThreads / kBK;  // 32
  constexpr int kBRowStride = kThreads / kBN;  // 2

  // This thread's 8 x 8 block of C: rows thread_row * 8 .. + 7, columns thread_col * 8 .. + 7.
  int const thread_row = tid / (kBN / kTN);
  int const thread_col = tid % (kBN / kTN);

  float acc[kTM][kTN] = {};
  float a_reg[kTM];
  float b_reg[kTN];
  for (int k0 = 0; k0 < k; k0 += kBK) {
#pragma unroll
    for (int i = 0; i < kALoadsPerThread; ++i) {
      int const r = a_r + i * kARowStride;
      int const row = block_row + r, col = k0 + a_c;
      a_tile[r][a_c] = (row < m && col < k) ? A[static_cast<size_t>(row) * lda + col] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kBLoadsPerThread; ++i) {
      int const r = b_r + i * kBRowStride;
      int const row = k0 + r, col = block_col + b_c;
      b_tile[r][b_c] = (row < k && col < n) ? B[static_cast<size_t>(row) * ldb + col] : 0.0f;
    }
    __syncthreads();

#pragma unroll
    for (int p = 0; p < kBK; ++p) {
#pragma unroll
      for (int i = 0; i < kTM; ++i)
        a_reg[i] = a_tile[thread_row * kTM + i][p];
#pragma unroll
      for (int j = 0; j < kTN; ++j)
        b_reg[j] = b_tile[p][thread_col * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j)
          acc[i][j] += a_reg[i] * b_reg[j];
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    int const row = block_row + thread_row * kTM + i;
    if (row >= m) break;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      int const col = block_col + thread_col * kTN + j;
      if (col < n)
        gemm::store_scaled(&C[static_cast<size_t>(row) * ldc + col], acc[i][j], alpha, beta);
    }
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 05_thread_tile_2d)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  thread_tile_2d_sgemm_kernel<<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta,
                                                             C, ldc);
  check_launch(routine);
}
