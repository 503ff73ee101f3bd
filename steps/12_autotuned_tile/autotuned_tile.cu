// Step 12: the tile a sweep picks.
//
// Steps 05-11 chose their tiles by reasoning: 128 x 128 blocks of 256 threads, 8 x 8 results
// per thread, two blocks per SM. Reasoning gets the neighbourhood right, but the last ten
// percent depend on things that are hard to predict on paper: how ptxas schedules a given
// unrolled loop, how many warps an SM needs to hide the latency that schedule leaves, how the
// tiles of one problem size fall into waves. So this step measures instead. The kernel of
// step 11 becomes a template over its tile configuration (autotuned_tile.cuh), a sweep
// (sweep.cu) builds a dozen configurations from that one source, checks every one against the
// float64 reference and times it against cuBLAS on the GPU present, and this file keeps the
// winner. Nothing in the kernel is new; only the numbers in the line below.
//
// The sweep's answer on the H100/H200 (README.md, docs/results/sweep_12_*): 64 x 128 x 16
// tiles of 128 threads (4 warps of 32 x 64, 8 x 8 results per thread), 4 stages (49 KB), and
// FOUR blocks per SM: 16 resident warps in four independent blocks instead of step 11's 16
// warps in two. Each block is half as big, so a barrier stalls 4 warps instead of 8, and the
// 2048 tiles of a 4096^3 problem fill 3.9 waves of 528 blocks.
#include "autotuned_tile.cuh"
#include "gemm.h"

namespace {

//                                   kBM  kBN kBK kWM kWN lanesM stages blocks/SM
using Tile = autotuned::TileConfig<64, 128, 16, 32, 64, 4, 4, 4>;

}  // namespace

void gemm::sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
                 float beta, float* C, int ldc, cudaStream_t stream) {
  autotuned::launch<Tile>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
}
