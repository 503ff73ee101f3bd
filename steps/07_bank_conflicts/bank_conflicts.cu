// Step 07: shared-memory bank conflicts, found and removed.
//
// Shared memory is 32 banks of 4 bytes; a warp's access is served in as many passes
// ("wavefronts") as the most-used bank needs. The profiler showed two kinds of waste in
// step 06 (README.md has the counts):
//   1. The transposing store of A. Thread t writes a_tile[a_c + i][t / 2] with a_c = 0 or 4:
//      threads 2r and 2r+1 write column r of rows i and 4 + i, which are 4 x 128 floats apart,
//      a multiple of 32 banks: the same bank, a 2-way conflict on every store. Padding each
//      row of a_tile by 4 floats (kAStride = 132) moves row 4 + i by 16 banks: conflict-free.
//      (4 and not 1: the rows must stay 16-byte aligned for the LDS.128 reads.)
//   2. The LDS.128 reads of B. With 8 contiguous columns per thread, the 16 threads of a half
//      warp read 16-byte chunks 32 bytes apart: 512 bytes spread over the banks so that chunk
//      j and chunk j + 4 collide, 4 wavefronts per load. Instead each thread now owns two
//      groups of 4 columns, 64 apart (columns 4 c .. 4 c + 3 and 64 + 4 c .. 64 + 4 c + 3):
//      the half warp reads 256 contiguous bytes per load, 2 wavefronts, the minimum. Rows are
//      split the same way.
// The split layout also makes the stores of C coalesced: the 16 threads of a half warp write
// 256 contiguous bytes of a row of C per float4 store, instead of 16 bytes every 32.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
constexpr int kTM = 8;                               // two groups of 4 rows, kBM / 2 apart
constexpr int kTN = 8;                               // two groups of 4 columns, kBN / 2 apart
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
constexpr int kAStride = kBM + 4;                    // padded row of the transposed A tile
static_assert(kBM * kBK / 4 == kThreads && kBK * kBN / 4 == kThreads,
              "each thread copies one float4 of each tile");

template <bool kVector>
__global__ void __launch_bounds__(kThreads)
    bank_conflict_free_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                    float const* B, int ldb, float beta, float* C, int ldc) {
  __shared__ float a_tile[kBK][kAStride];  // transposed and padded: (p, row)
  __shared__ float b_tile[kBK][kBN];       // (p, column)

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;

  int const a_r = tid / (kBK / 4), a_c = (tid % (kBK / 4)) * 4;
  int const b_r = tid / (kBN / 4), b_c = (tid % (kBN / 4)) * 4;
  float4 const zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  // This thread's rows: 4 r .. 4 r + 3 and 64 + 4 r .. 64 + 4 r + 3; columns likewise.
  int const thread_row = (tid / (kBN / kTN)) * 4;
  int const thread_col = (tid % (kBN / kTN)) * 4;
  constexpr int kHalfM = kBM / 2;
  constexpr int kHalfN = kBN / 2;

  float acc[kTM][kTN] = {};
  float a_reg[kTM];
  float b_reg[kTN];
  for (int k0 = 0; k0 < k; k0 += kBK) {
    int const a_row = block_row + a_r;
    float4 const a = a_row < m ? gemm::load_float4_or_zero<kVector>(
                                     A + static_cast<size_t>(a_row) * lda, k0 + a_c, k)
                               : zero;
    a_tile[a_c + 0][a_r] = a.x;
    a_tile[a_c + 1][a_r] = a.y;
    a_tile[a_c + 2][a_r] = a.z;
    a_tile[a_c + 3][a_r] = a.w;
    int const b_row = k0 + b_r;
    float4 const b = b_row < k ? gemm::load_float4_or_zero<kVector>(
                                     B + static_cast<size_t>(b_row) * ldb, block_col + b_c, n)
                               : zero;
    *reinterpret_cast<float4*>(&b_tile[b_r][b_c]) = b;
    __syncthreads();

#pragma unroll
    for (int p = 0; p < kBK; ++p) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float4 const va = *reinterpret_cast<float4 const*>(&a_tile[p][half * kHalfM + thread_row]);
        a_reg[4 * half + 0] = va.x, a_reg[4 * half + 1] = va.y;
        a_reg[4 * half + 2] = va.z, a_reg[4 * half + 3] = va.w;
        float4 const vb = *reinterpret_cast<float4 const*>(&b_tile[p][half * kHalfN + thread_col]);
        b_reg[4 * half + 0] = vb.x, b_reg[4 * half + 1] = vb.y;
        b_reg[4 * half + 2] = vb.z, b_reg[4 * half + 3] = vb.w;
      }
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
    int const row = block_row + (i / 4) * kHalfM + thread_row + i % 4;
    if (row >= m) continue;
    float* const c_row = C + static_cast<size_t>(row) * ldc;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float const* v = &acc[i][4 * half];
      gemm::store_scaled_float4<kVector>(c_row, block_col + half * kHalfN + thread_col, n,
                                         make_float4(v[0], v[1], v[2], v[3]), alpha, beta);
    }
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 07_bank_conflicts)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  // Step 06's choice between the float4 and the scalar kernel, written once in common/.
  bool const vector = all_rows_16_byte_aligned(A, lda, B, ldb, C, ldc);
  dispatch_bool(vector, [&](auto kVector) {
    bank_conflict_free_sgemm_kernel<kVector()>
        <<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  });
  check_launch(routine);
}
