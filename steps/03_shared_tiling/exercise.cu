// Exercise for step 03: shared-memory tiling. Read README.md first.
//
// A 32 x 32 block of threads stages a 32 x 32 tile of A and one of B in shared memory, then
// every thread computes from the tiles. Fill in the two TODO(student) blocks: the copy into the
// tiles, and the compute from them. Neither block contains a barrier yet: deciding where
// __syncthreads() must go is part of the exercise. Then build and check your kernel:
//   meson setup build -Dexercises=true   (or: meson configure build -Dexercises=true)
//   meson test -C build exercise_03_shared_tiling --print-errorlogs   the shared GPU suite
//   build/exercise_03_shared_tiling 4096                                time it against cuBLAS
// A missing barrier can pass a small test and fail a large one, or fail only now and then: run
// the suite more than once. The solution is shared_tiling.cu, beside this file.

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
    // TODO(student): copy this k tile into shared memory, one element of each tile per thread:
    //   a_tile[ty][tx] = A(row, a_col) with a_col = tile_k + tx, if row < m and a_col < k;
    //   b_tile[ty][tx] = B(b_row, col) with b_row = tile_k + ty, if b_row < k and col < n;
    // and 0.0f where the element lies outside its matrix. Element (r, c) of A is at
    // A[r * lda + c], of B at B[r * ldb + c]; compute the offsets in size_t. The zeros add
    // nothing to the dot products, which is what lets k (and the edge tiles of C) be any size.
    // Every thread must write both elements, even one whose (row, col) is outside C: other
    // threads of the block read them.
    // Then decide: may a thread start reading the tiles right after writing its own elements?
    a_tile[ty][tx] = 0.0f;
    b_tile[ty][tx] = 0.0f;
    // END TODO

    // TODO(student): add this tile's contribution to acc: the dot product of row ty of a_tile
    // with column tx of b_tile, over p = 0 .. kTile-1 (every tile is full, thanks to the zero
    // fill). Keep the loop fully unrolled (#pragma unroll). In a warp, a_tile[ty][p] is one
    // address (a broadcast) and b_tile[p][tx] 32 consecutive floats, one per bank.
    // Then decide: when the next iteration's copy overwrites the tiles, may a faster warp get
    // there while a slower warp is still reading this tile?
    (void)a_tile[ty][0];
    (void)b_tile[0][tx];
    // END TODO
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
