// Step 33: what the cluster barriers at the two ends of the kernel cost, and what is enough.
// Steps 21-32 open and close the kernel with a full cluster barrier, release and acquire
// (cluster_sync): every thread of both blocks arrives, every thread waits. The release is what
// costs, whether or not anything needs releasing (docs/demos/cluster_sync_cost.cu times it), and
// it is a fixed cost per call, which shows where the kernel is short (see the README).
//
// What each barrier is for decides what it must order:
//  - The start: no block may multicast into the other's stages, or arrive on its barriers, before
//    thread 0 there has initialised them. fence_barrier_init already orders the initialisation for
//    the cluster; the arrival may be relaxed, and the wait keeps its acquire.
//  - The end: no block may exit while the other can still reach into its shared memory. The other
//    block's multicasts into this block's stages have landed once this block's consumers have
//    read them; what is left is the other block's consumers handing stages back, on this block's
//    empty barriers. So the producer waits, after its last load, until every stage has come back
//    from every consumer of both blocks; then nothing is on its way in, and each block leaves on
//    its own, with no barrier at the end.
//
// Everything else is step 32's: its tiles, its plan, and step 27's kernel from
// common/pair_orientation.cuh, which takes this struct as its ClusterSync.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
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

// The kernel's start and end (see the top of this file), in place of ReleaseAcquireClusterSync.
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

// Step 32's tiles. Step 26's tiles, stacked, then side by side: tiles of at most 128 rows, down to
// 64, for matrices of one or two tile rows. Stacked comes first: of two plans that cost the same,
// the model keeps the first.
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
};

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, __nv_bfloat16 const* A, int lda,
                     __nv_bfloat16 const* B, int ldb, float beta, __nv_bfloat16* C, int ldc,
                     cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, 64)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then builds
  // the schedule from the occupancy query of the kernel it picked, which may find fewer.
  TileShape const shape = choose_tile(kShapes, m, n, k, std::max(1, sms / kClusterSize));
  gemm_with_tile<kShapes, RelaxedClusterSync>(shape, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
                                              stream);
  check_launch("bf16_gemm");
}
