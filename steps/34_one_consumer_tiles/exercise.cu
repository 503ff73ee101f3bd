// Exercise: step 34, tiles of one consumer. Two TODO blocks: the tiles this step adds to step
// 33's list, and the guard on the number of tiles that the smallest tile sets. The placeholders
// are step 33's (no one-consumer tile, the guard of 64 x 128 tiles), so the skeleton computes the
// right C and passes the GPU suite as given. With the TODOs done, compare
// build/exercise_34_one_consumer_tiles with build/33_relaxed_cluster_sync at 128x4096x4096,
// 64x2048x2048 and 256x256x1024 under Nsight Compute (the README's exercise 1).
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "cuda_check.h"
#include "gemm.h"
#include "launch.h"
#include "pair_orientation.cuh"

namespace {

using namespace gemm::hopper;
using namespace gemm::hopper::pairs;

// Step 33's start and end of the kernel, unchanged (see steps/33_relaxed_cluster_sync/).
struct RelaxedClusterSync {
  // Every thread of both blocks, after thread 0 has initialised and fenced the barriers.
  __device__ static void start() {
    cluster_arrive_relaxed();
    cluster_wait();
  }
  // The producer thread, after its last load: one more turn of the ring, waiting at each stage
  // until both blocks' consumers have handed it back, as if to fill it again.
  template <class Ring, int kStages>
  __device__ static void producer_done(Ring const& ring, PipelineState<kStages> write) {
    for (int stage = 0; stage < kStages; ++stage, write.advance()) {
      mbarrier_wait(ring.empty(write.stage), write.phase ^ 1);
    }
  }
  __device__ static void end() {
    // Nothing: once its producer is done, no access from the other block is on its way.
  }
};

// Step 33's tiles (step 32's list), then this step's: side by side with one consumer, 64 columns
// per block. Stacked comes first: of two plans that cost the same, the model keeps the first.
constexpr TileShape kShapes[] = {
    {256, 2, Pairing::kStacked},
    {240, 2, Pairing::kStacked},
    {224, 2, Pairing::kStacked},
    {208, 2, Pairing::kStacked},
    {192, 2, Pairing::kStacked},
    {176, 2, Pairing::kStacked},
    {160, 2, Pairing::kStacked},
    {144, 2, Pairing::kStacked},
    {128, 2, Pairing::kStacked},
    {192, 3, Pairing::kStacked},
    {176, 3, Pairing::kStacked},
    {160, 3, Pairing::kStacked},
    {144, 3, Pairing::kStacked},
    {128, 3, Pairing::kStacked},
    // Side by side, two consumers only: such a pair streams B, and the two-consumer tile streams
    // it faster than the three-consumer one (step 27 offered both; the model ranks them by how
    // they fill the rounds, not by how fast they read).
    {128, 2, Pairing::kSideBySide},
    {112, 2, Pairing::kSideBySide},
    {96, 2, Pairing::kSideBySide},
    {64, 2, Pairing::kSideBySide},
    // TODO(student): tiles of one consumer (64 columns per block). Which heights, and which
    // pairing, for a matrix with fewer tiles than SMs? (The kernel takes kBM from 64 to 256.)
    // END TODO
};

// This step's rule on top of step 26's model (choose_tile): a one-consumer tile only where its
// cluster tiles fit in one round. Beyond that it runs more rounds of half-width tiles, each paying
// the per-tile costs (the ring's fill, the epilogue, A's rows loaded per 64 columns of C instead
// of per 128), and loses to the two-consumer tiles (see the README).
bool fits_one_round(TileShape shape, int m, int n, int clusters) {
  return shape.consumers > 1 || cluster_tiles(m, n, shape) <= clusters;
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, __nv_bfloat16 const* A, int lda,
                     __nv_bfloat16 const* B, int ldb, float beta, __nv_bfloat16* C, int ldc,
                     cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  // TODO(student): the tile index must fit an int. How many tiles can the smallest tile make?
  long long const most_tiles = static_cast<long long>(ceil_div(m, 64)) * ceil_div(n, 128);
  // END TODO
  if (most_tiles > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then builds
  // the schedule from the occupancy query of the kernel it picked, which may find fewer.
  int const clusters = std::max(1, sms / kClusterSize);
  TileShape const shape = choose_tile(kShapes, m, n, k, clusters, [&](TileShape candidate) {
    return fits_one_round(candidate, m, n, clusters);
  });
  gemm_with_tile<kShapes, RelaxedClusterSync>(shape, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                                              stream);
  check_launch("bf16_gemm");
}
