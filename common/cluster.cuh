// Taught in step 21 (steps/21_clusters/), which writes these wrappers inline.
//
// A thread block cluster is a group of blocks the hardware runs at the same time on neighbouring
// SMs; each block can reach the others' shared memory and mbarriers, and one TMA copy can land in
// several of them (multicast). Compiles only for sm_90a.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gemm::hopper {

// This block's rank in its cluster: 0 .. cluster size - 1.
__device__ __forceinline__ unsigned cluster_block_rank() {
  unsigned rank = 0;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every block of the cluster arrives, then waits for all the others: a
// __syncthreads() across the cluster, with release/acquire ordering at cluster scope.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}

// The two halves of a cluster barrier, for step 33 (steps/33_relaxed_cluster_sync/). Arriving
// relaxed orders nothing: it only counts this thread in. What the others need to see must be
// ordered by something else, as fence_barrier_init (mbarrier.cuh) does for mbarrier.init, the one
// pairing the PTX ISA names for it. The wait keeps its default acquire.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
}

// The multicast form of tma_load_2d (tma.cuh): the same box lands at the same shared offset in
// every block of the cluster named in `cta_mask` (bit r = the block of cluster rank r), and each
// landing counts off on the barrier at `barrier`'s offset in that block.
__device__ __forceinline__ void tma_load_2d_multicast(std::uint32_t destination,
                                                      CUtensorMap const* map, int inner, int outer,
                                                      std::uint32_t barrier,
                                                      std::uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(destination),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(barrier), "h"(cta_mask)
      : "memory");
}

// One arrival on the barrier at shared address `barrier`, but in the block of cluster rank `rank`
// (mapa translates a local shared address to the same offset in another block). It keeps
// mbarrier.arrive's default semantics, as CUTLASS's ClusterBarrier does: what it hands back is a
// stage whose wgmma have completed (wgmma_wait), nothing the other block must see.
__device__ __forceinline__ void mbarrier_arrive_cluster(std::uint32_t barrier, unsigned rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(barrier),
      "r"(rank)
      : "memory");
}

// How many clusters of `cluster_size` blocks of this kernel (whose __cluster_dims__ say the same)
// the GPU runs at once (66 on a 132-SM
// H100 when every GPC has an even number of free SMs, fewer otherwise); persistent grids are
// sized from it.
template <class Kernel>
int resident_clusters(Kernel kernel, int cluster_size, int threads, int shared_bytes) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(cluster_size, 1, 1);
  config.blockDim = dim3(threads, 1, 1);
  config.dynamicSmemBytes = shared_bytes;
  int clusters = 0;
  cudaError_t const status = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("cudaOccupancyMaxActiveClusters: ") +
                             cudaGetErrorString(status));
  }
  if (clusters < 1) {
    throw std::runtime_error("bf16_gemm: no cluster of " + std::to_string(cluster_size) +
                             " blocks fits this GPU");
  }
  return clusters;
}

}  // namespace gemm::hopper
