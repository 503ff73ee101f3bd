// Step 09: warp tiling.
//
// Step 08 lays the threads' 8 x 8 tiles out over the block tile without regard to warps: a
// warp (32 threads, 2 rows x 16 columns of thread tiles) covers a flat 16 x 128 strip of C
// and reads, per p, 16 floats of A and 128 of B from shared memory. Here the 8 warps of the
// block each own a compact 64 x 32 warp tile (2 warps down, 4 across), and within a warp the
// lanes form an 8 x 4 grid; each lane owns 2 x 2 sub-tiles of 4 x 4, spread 32 rows and 16
// columns apart. A warp then reads, per p,
//   A: 8 lanes' chunks of 16 bytes, contiguous (128 bytes), twice;
//   B: 4 lanes' chunks, contiguous (64 bytes), twice;
// 64 + 32 = 96 distinct floats instead of 144: the smallest, squarest working set 32 threads
// with 8 x 8 tiles can have. The expectation was fewer shared-memory wavefronts per FMA; the
// measurements in README.md show why that expectation was wrong on this GPU, and why it could
// not have paid off anyway. Everything else (double buffering, padding, float4 copies) is
// step 08's.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 8;
constexpr int kWM = 64;                               // warp tile rows
constexpr int kWN = 32;                               // warp tile columns
constexpr int kWarpsN = kBN / kWN;                    // 4 (and kBM / kWM = 2 down)
constexpr int kThreads = (kBM / kWM) * kWarpsN * 32;  // 256
constexpr int kLanesM = 8;                            // lanes as an 8 x 4 grid
constexpr int kLanesN = 32 / kLanesM;                 // 4
constexpr int kIterM = kWM / (4 * kLanesM);           // 2 sub-tiles of 4 rows per lane
constexpr int kIterN = kWN / (4 * kLanesN);           // 2 sub-tiles of 4 columns per lane
constexpr int kTM = 4 * kIterM;                       // 8 rows of C per thread
constexpr int kTN = 4 * kIterN;                       // 8 columns of C per thread
constexpr int kAStride = kBM + 4;
static_assert(kBM * kBK / 4 == kThreads && kBK * kBN / 4 == kThreads,
              "each thread copies one float4 of each tile");

template <bool kVector>
// Two blocks per SM: caps registers at 128 per thread (65536 / (2 x 256)).
__global__ void __launch_bounds__(kThreads, 2)
    warp_tiled_sgemm_kernel(int m, int n, int k, float alpha, float const* A, int lda,
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

  // Warp tile origin, and the lane's first 4 x 4 sub-tile inside it.
  int const warp = tid / 32;
  int const lane = tid % 32;
  int const warp_row = (warp / kWarpsN) * kWM;
  int const warp_col = (warp % kWarpsN) * kWN;
  int const lane_row = (lane / kLanesN) * 4;
  int const lane_col = (lane % kLanesN) * 4;
  // Offsets of this lane's first fragment in a tile row: computed once, not per load.
  int const a_frag = warp_row + lane_row;
  int const b_frag = warp_col + lane_col;

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
      for (int im = 0; im < kIterM; ++im) {
        float4 const v =
            *reinterpret_cast<float4 const*>(&a_tile[buf][p][a_frag + im * 4 * kLanesM]);
        a_reg[4 * im + 0] = v.x, a_reg[4 * im + 1] = v.y;
        a_reg[4 * im + 2] = v.z, a_reg[4 * im + 3] = v.w;
      }
#pragma unroll
      for (int in = 0; in < kIterN; ++in) {
        float4 const v =
            *reinterpret_cast<float4 const*>(&b_tile[buf][p][b_frag + in * 4 * kLanesN]);
        b_reg[4 * in + 0] = v.x, b_reg[4 * in + 1] = v.y;
        b_reg[4 * in + 2] = v.z, b_reg[4 * in + 3] = v.w;
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
    int const row = block_row + warp_row + (i / 4) * 4 * kLanesM + lane_row + i % 4;
    if (row >= m) continue;
    float* const c_row = C + static_cast<size_t>(row) * ldc;
#pragma unroll
    for (int in = 0; in < kIterN; ++in) {
      float const* v = &acc[i][4 * in];
      gemm::store_scaled_float4<kVector>(c_row, block_col + warp_col + in * 4 * kLanesN + lane_col,
                                         n, make_float4(v[0], v[1], v[2], v[3]), alpha, beta);
    }
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 09_warp_tiling)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), routine);
  // Step 06's choice between the float4 and the scalar kernel, written once in common/.
  bool const vector = all_rows_16_byte_aligned(A, lda, B, ldb, C, ldc);
  dispatch_bool(vector, [&](auto kVector) {
    warp_tiled_sgemm_kernel<kVector()>
        <<<grid, kThreads, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
  });
  check_launch(routine);
}
