// Step 08: double buffering (shared-memory ping-pong plus register prefetch).
//
// In step 07 every k tile goes: load from global -> store to shared -> barrier -> compute ->
// barrier. While a block waits for its global loads (hundreds of cycles) its warps have nothing
// to compute; only the other resident blocks can use the SM. Here each block overlaps the two:
//   - two copies of each shared tile: compute reads buffer `t % 2` while the next tile is
//     written to the other one;
//   - the global loads of tile t + 1 are issued into registers BEFORE computing tile t, so
//     their latency hides behind 512 FMAs per thread; the registers are written to shared
//     memory after the compute;
//   - one barrier per k tile instead of two: a buffer is only rewritten one iteration after
//     it was read, and the barrier between guarantees every warp is done with it.
// The price: twice the shared memory (16.5 KB per block) and 8 more registers per thread for
// the prefetched float4s. Whether it pays depends on how much latency the other blocks on the
// SM were already hiding; README.md measures it.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
constexpr int kTM = 8;
constexpr int kTN = 8;
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
constexpr int kAStride = kBM + 4;
static_assert(kBM * kBK / 4 == kThreads && kBK * kBN / 4 == kThreads,
              "each thread copies one float4 of each tile");

template <bool kVector>
// Two blocks per SM: caps registers at 128 per thread (65536 / (2 x 256)).
__global__ void __launch_bounds__(kThreads, 2)
    double_buffered_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
                                 float const* B, int ldb, float beta, float* C, int ldc) {
  __shared__ float a_tile[2][kBK][kAStride];  // two buffers of the transposed, padded A tile
  __shared__ float b_tile[2][kBK][kBN];

  int const block_row = blockIdx.y * kBM;
  int const block_col = blockIdx.x * kBN;
  int const tid = threadIdx.x;

  int const a_r = tid / (kBK / 4), a_c = (tid % (kBK / 4)) * 4;
  int const b_r = tid / (kBN / 4), b_c = (tid % (kBN / 4)) * 4;
  float4 const zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  int const a_row = block_row + a_r;
  float const* const a_src = A + static_cast<size_t>(a_row < m ? a_row : 0) * lda;

  int const thread_row = (tid / (kBN / kTN)) * 4;
  int const thread_col = (tid % (kBN / kTN)) * 4;
  constexpr int kHalfM = kBM / 2;
  constexpr int kHalfN = kBN / 2;

  // Global -> registers for the k tile starting at k0 ...
  float4 a_next, b_next;
  auto load_global = [&](int k0) {
    a_next = a_row < m ? gemm::load_float4_or_zero<kVector>(a_src, k0 + a_c, k) : zero;
    int const b_row = k0 + b_r;
    b_next = b_row < k ? gemm::load_float4_or_zero<kVector>(B + static_cast<size_t>(b_row) * ldb,
                                                            block_col + b_c, n)
                       : zero;
  };
  // ... and registers -> shared buffer `buf`.
  auto store_shared = [&](int buf) {
    a_tile[buf][a_c + 0][a_r] = a_next.x;
    a_tile[buf][a_c + 1][a_r] = a_next.y;
    a_tile[buf][a_c + 2][a_r] = a_next.z;
    a_tile[buf][a_c + 3][a_r] = a_next.w;
    *reinterpret_cast<float4*>(&b_tile[buf][b_r][b_c]) = b_next;
  };

  float acc[kTM][kTN] = {};
  float a_reg[kTM];
  float b_reg[kTN];
  int const k_tiles = gemm::ceil_div(k, kBK);

  load_global(0);  // prologue: tile 0 into buffer 0
  store_shared(0);
  __syncthreads();

  for (int t = 0; t < k_tiles; ++t) {
    int const buf = t % 2;
    bool const has_next = t + 1 < k_tiles;
    if (has_next) load_global((t + 1) * kBK);  // in flight while we compute

#pragma unroll
    for (int p = 0; p < kBK; ++p) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float4 const va =
            *reinterpret_cast<float4 const*>(&a_tile[buf][p][half * kHalfM + thread_row]);
        a_reg[4 * half + 0] = va.x, a_reg[4 * half + 1] = va.y;
        a_reg[4 * half + 2] = va.z, a_reg[4 * half + 3] = va.w;
        float4 const vb =
            *reinterpret_cast<float4 const*>(&b_tile[buf][p][half * kHalfN + thread_col]);
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

    // The other buffer was last read in iteration t - 1, before the previous barrier.
    if (has_next) store_shared(1 - buf);
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
  char const* const routine = "sgemm (step 08_double_buffering)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  // Step 06's choice between the float4 and the scalar kernel, written once in common/.
  bool const vector = all_rows_16_byte_aligned(A, lda, B, ldb, C, ldc);
  dispatch_bool(vector, [&](auto kVector) {
    double_buffered_sgemm_kernel<kVector()>
        <<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  });
  check_launch(routine);
}
