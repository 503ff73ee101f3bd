// Taught in steps 19-21 (steps/19_warp_specialized/ ... steps/21_clusters/), whose kernels write
// these loops inline: the producer's and the consumers' walk around the ring of stages of a
// warp-specialized cluster kernel, as two functions a kernel calls in order.
//
// The ring lives in a shared-memory `Storage` with `stages[kStages]` (each with an `a` and a `b`
// tile, the stage 1024-byte aligned) and the mbarriers `full[kStages]` and `empty[kStages]`; the
// full barriers count one producer arrival plus the stage's bytes, the empty barriers one arrival
// per consumer warp of every block of the cluster. Compiles only for sm_90a.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>
#include <type_traits>

#include "async_copy.cuh"  // shared_address
#include "cluster.cuh"
#include "mbarrier.cuh"
#include "tma.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"

namespace gemm::hopper {

// The shared addresses of a ring's tiles and barriers.
template <class Storage>
struct StageRing {
  Storage& shared;

  static constexpr int kStages = std::extent_v<decltype(Storage::stages)>;
  static constexpr std::uint32_t kStageBytes =
      sizeof(std::remove_extent_t<decltype(Storage::stages)>);

  __device__ std::uint32_t a_tile(int stage) const {
    return gemm::shared_address(shared.stages[stage].a);
  }
  __device__ std::uint32_t b_tile(int stage) const {
    return gemm::shared_address(shared.stages[stage].b);
  }
  __device__ std::uint32_t full(int stage) const {
    return gemm::shared_address(&shared.full[stage]);
  }
  __device__ std::uint32_t empty(int stage) const {
    return gemm::shared_address(&shared.empty[stage]);
  }
};

// The producer thread's loads of k tiles [k_begin, k_end), 64 deep: A's box of the tile at row
// a_row (the whole a tile of a stage), and kBoxes boxes of B, 64 columns each, from column b_col.
// The blocks of the cluster share B: block `rank` loads boxes rank, rank + kClusterSize, ... and
// multicasts each to every block. A stage is refilled once every consumer of the cluster has
// handed it back.
template <int kBoxes, int kClusterSize, class Storage>
__device__ __forceinline__ void produce(StageRing<Storage> const& ring, CUtensorMap const* a_map,
                                        CUtensorMap const* b_map, int a_row, int b_col, int k_begin,
                                        int k_end, unsigned rank,
                                        PipelineState<StageRing<Storage>::kStages>& write) {
  constexpr std::uint32_t kBBoxBytes = 64 * 64 * 2;
  for (int k_tile = k_begin; k_tile < k_end; ++k_tile, write.advance()) {
    mbarrier_wait(ring.empty(write.stage), write.phase ^ 1);
    mbarrier_arrive_expect_bytes(ring.full(write.stage), StageRing<Storage>::kStageBytes);
    tma_load_2d(ring.a_tile(write.stage), a_map, k_tile * 64, a_row, ring.full(write.stage));
    for (int box = static_cast<int>(rank); box < kBoxes; box += kClusterSize) {
      tma_load_2d_multicast(ring.b_tile(write.stage) + box * kBBoxBytes, b_map, b_col + box * 64,
                            k_tile * 64, ring.full(write.stage), (1u << kClusterSize) - 1);
    }
  }
}

// Hands a consumed stage back to every block of the cluster (one arrival per warp).
template <int kClusterSize, class Storage>
__device__ __forceinline__ void release_stage_to_cluster(
    StageRing<Storage> const& ring, PipelineState<StageRing<Storage>::kStages>& release) {
  if (threadIdx.x % 32 == 0) {
    for (unsigned rank = 0; rank < kClusterSize; ++rank) {
      mbarrier_arrive_cluster(ring.empty(release.stage), rank);
    }
  }
  release.advance();
}

// A consumer warpgroup's walk over k tiles [k_begin, k_end), at least one: wait until the stage
// is full, let `issue(stage)` issue its wgmma, commit them, and keep one group running while the
// previous stage is handed back. The last stage is handed back once all the wgmma are done.
template <int kClusterSize, class Storage, class Issue>
__device__ __forceinline__ void consume_k_range(StageRing<Storage> const& ring, int k_begin,
                                                int k_end,
                                                PipelineState<StageRing<Storage>::kStages>& read,
                                                PipelineState<StageRing<Storage>::kStages>& release,
                                                Issue&& issue) {
  for (int k_tile = k_begin; k_tile < k_end; ++k_tile, read.advance()) {
    mbarrier_wait(ring.full(read.stage), read.phase);
    wgmma_fence();
    issue(read.stage);
    wgmma_commit();
    wgmma_wait<1>();
    if (k_tile > k_begin) release_stage_to_cluster<kClusterSize>(ring, release);
  }
  wgmma_wait<0>();
  release_stage_to_cluster<kClusterSize>(ring, release);
}

// The same with `after_first_commit()` run once, while the first k tile's wgmma run (step 45 asks
// for C there). The first k tile is written out ahead of the loop, so that the hook is no branch
// in every k tile's path (with it inside, ptxas kept the loop's wgmma descriptors in ordinary
// registers in some kernels). The function above keeps its single loop: written out the same way
// for the tiles in turn (step 48), ptxas waits for their wgmma before issuing more (its warning
// C7517).
template <int kClusterSize, class Storage, class Issue, class AfterFirstCommit>
__device__ __forceinline__ void consume_k_range(StageRing<Storage> const& ring, int k_begin,
                                                int k_end,
                                                PipelineState<StageRing<Storage>::kStages>& read,
                                                PipelineState<StageRing<Storage>::kStages>& release,
                                                Issue&& issue,
                                                AfterFirstCommit&& after_first_commit) {
  mbarrier_wait(ring.full(read.stage), read.phase);
  wgmma_fence();
  issue(read.stage);
  wgmma_commit();
  after_first_commit();
  read.advance();
  for (int k_tile = k_begin + 1; k_tile < k_end; ++k_tile, read.advance()) {
    mbarrier_wait(ring.full(read.stage), read.phase);
    wgmma_fence();
    issue(read.stage);
    wgmma_commit();
    wgmma_wait<1>();
    release_stage_to_cluster<kClusterSize>(ring, release);
  }
  wgmma_wait<0>();
  release_stage_to_cluster<kClusterSize>(ring, release);
}

}  // namespace gemm::hopper
