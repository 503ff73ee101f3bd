// Exercise for step 05: a 2D register tile per thread. Read README.md first.
//
// Each thread now owns an 8 x 8 block of C and, for each p, computes an outer product of 8
// values of A and 8 values of B held in registers. Fill in the two TODO(student) blocks:
// which block of C the thread owns, and the register fragments with their outer product. Then
// build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_05_thread_tile_2d --print-errorlogs   the shared GPU suite
//   build/exercise_05_thread_tile_2d 4096                                time it against cuBLAS
// The suite fails until both blocks are right. The solution is thread_tile_2d.cu, beside
// this file.

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

  // TODO(student): choose this thread's 8 x 8 block of C inside the block's 128 x 128 tile: it
  // covers tile rows thread_row * kTM .. + 7 and tile columns thread_col * kTN .. + 7. The 256
  // threads form a 16 x 16 grid of such blocks (kBM / kTM rows of kBN / kTN). Derive both
  // indices from tid so that consecutive tids walk along a row of that grid (thread_col varies
  // fastest): a warp then covers 2 rows of 16 blocks, and its a_tile reads below are mostly
  // broadcasts. Every block of the grid must get exactly one thread.
  int const thread_row = 0;
  int const thread_col = 0;
  // END TODO

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
      // TODO(student): the heart of the step, an outer product per p, in two parts.
      // 1. Load the register fragments from shared memory:
      //      a_reg[i] = A(thread_row * kTM + i, p) for i < kTM: a column slice of a_tile[row][p];
      //      b_reg[j] = B(p, thread_col * kTN + j) for j < kTN: a row slice of b_tile[p][column].
      // 2. Add a_reg[i] * b_reg[j] to acc[i][j] for every i < kTM, j < kTN, reading registers
      //    only: 16 shared loads feed 64 FMAs.
      // Unroll every loop (#pragma unroll). acc, a_reg and b_reg stay in registers only if
      // every index into them is a compile-time constant; otherwise they go to local memory
      // and the kernel gets slower than step 04 (meson's -Dptxas_verbose=true shows it: the
      // kernel must report a 0 byte stack frame and no spills).
      (void)a_tile[0][p];
      (void)b_tile[p][0];
      (void)a_reg;
      (void)b_reg;
      // END TODO
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
