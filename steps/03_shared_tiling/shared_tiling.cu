// Step 03: shared-memory tiling.
//
// Step 02 reads every element of A and B from global memory once per use: each thread walks a
// whole row of A and a whole column of B, and its 1023 neighbours in the block walk almost the
// same ones. Here a 32 x 32 block of threads first copies a 32 x 32 tile of A and a 32 x 32
// tile of B into shared memory (one element each, coalesced), waits, and then every thread
// reads its 32 products from the tiles. Each element fetched from global memory is now used
// 32 times from on-chip memory, so global traffic drops by 32x (see README.md).
//
// Two barriers per tile: one before the compute (the tiles are complete), one after (nobody
// overwrites a tile that a slower warp still reads). Threads outside C (edge tiles) still load
// and still reach both barriers; they only skip the final store. Elements outside A or B are
// loaded as zeros, which add nothing to the dot products, so K need not be a multiple of 32.
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

constexpr int kTile = 32;  // a 32 x 32 tile of C per block, 1024 threads, 8 KB of shared memory

__global__ void shared_tiling_sgemm_kernel(int m, int n, int k, float alpha, float const* A,
                                           int lda, float const* B, int ldb, float beta, float* C,
                                           int ldc) {
  __shared__ float a_tile[kTile][kTile];  // (row in tile, p in tile)
  __shared__ float b_tile[kTile][kTile];  // (p in tile, column in tile)

  int const tx = threadIdx.x;  // column within the tile: consecutive in a warp (coalesced)
  int const ty = threadIdx.y;  // row within the tile
  int const row = blockIdx.y * kTile + ty;
  int const col = blockIdx.x * kTile + tx;

  float acc = 0.0f;
  for (int tile_k = 0; tile_k < k; tile_k += kTile) {
    // Each thread copies one element of each tile. A warp reads 32 consecutive floats of a row
    // of A and of a row of B: both loads are coalesced.
    int const a_col = tile_k + tx;
    int const b_row = tile_k + ty;
    a_tile[ty][tx] = (row < m && a_col < k) ? A[static_cast<size_t>(row) * lda + a_col] : 0.0f;
    b_tile[ty][tx] = (b_row < k && col < n) ? B[static_cast<size_t>(b_row) * ldb + col] : 0.0f;
    __syncthreads();  // the tiles are complete

    // a_tile[ty][p] is one address for the whole warp (a broadcast); b_tile[p][tx] is 32
    // consecutive floats, one per bank: no bank conflicts.
#pragma unroll
    for (int p = 0; p < kTile; ++p) {
      acc += a_tile[ty][p] * b_tile[p][tx];
    }
    __syncthreads();  // everyone is done with the tiles before the next copy overwrites them
  }
  if (row < m && col < n) {
    gemm::store_scaled(&C[static_cast<size_t>(row) * ldc + col], acc, alpha, beta);
  }
}

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  char const* const routine = "sgemm (step 03_shared_tiling)";
  check_gemm_arguments(routine, m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const block(kTile, kTile);
  dim3 const grid = make_grid(ceil_div(n, kTile), ceil_div(m, kTile), routine);
  shared_tiling_sgemm_kernel<<<grid, block, 0, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C,
                                                         ldc);
  check_launch(routine);
}
