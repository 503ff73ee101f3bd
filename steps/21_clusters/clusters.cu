// Step 21: thread block clusters and TMA multicast. In step 20 every block loads its own copy of
// A's 128 x 64 tile and B's 64 x 256 tile for each k tile: 48 KB per k tile, about 12 MB per SM at
// 4096^3 (its 3.9 tiles x 64 k tiles), and the two blocks that compute M-neighbouring tiles of the
// same column load the same B tile twice. Here blocks come in clusters of two
// (__cluster_dims__(2, 1, 1)) that always compute two M-adjacent tiles of one tile column. Each
// block loads its own A tile and *half* of the shared B tile, with TMA's multicast: the half lands
// in both blocks' shared memory and counts off on both blocks' full barriers. Per k tile a block
// asks L2 for 16 + 16 KB instead of 16 + 32.
//
// The price is coupling: block 0's producer now writes into block 1's stages, so it may only
// refill a stage once the consumers of *both* blocks have released it. Each consumer warp
// arrives on the empty barrier of its own block and of its partner (mbarrier_arrive_cluster),
// and each empty barrier counts both blocks' 8 warps. Both blocks walk the same sequence of
// cluster tiles, so their rings stay in step.
//
// The cluster wrappers are written out below; later steps include them from common/cluster.cuh.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "aligned_operand.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "tensor_map.h"
#include "tma.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

// --- clusters -----------------------------------------------------------------------------------

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

// tma_load_2d, multicast: the same box lands at the same shared offset in every block of the
// cluster named in `cta_mask` (bit r = the block of cluster rank r), and each landing counts off
// on the barrier at `barrier`'s offset in that block.
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

// --- the tile -----------------------------------------------------------------------------------

constexpr int kBM = 128;         // block tile rows: 64 per consumer warpgroup
constexpr int kBN = 256;         // block tile columns: the N of one wgmma
constexpr int kBK = 64;          // k tile: 64 bf16 = one 128-byte swizzle span
constexpr int kStages = 4;       // 4 x 48 KB of the 227 KB a block may have
constexpr int kConsumers = 2;    // consumer warpgroups
constexpr int kClusterSize = 2;  // blocks per cluster: two M-adjacent tiles, one B tile
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;  // in cluster tiles: 8 tile rows, as in step 20
constexpr int kBoxN = 64;   // B is copied in boxes 64 columns (128 bytes) wide
constexpr int kBoxes = kBN / kBoxN;
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;

static_assert(kBK * 2 == 128, "a row of A's tile must be exactly one 128-byte swizzle span");
static_assert(kBM == 64 * kConsumers, "each consumer warpgroup owns 64 rows of the tile");
static_assert(kBoxes % kClusterSize == 0, "each block multicasts the same number of B boxes");
static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
              "the register budgets must fit what the block is given at launch");

// Step 19's shared memory. Both blocks of a cluster lay it out alike, so a stage or barrier sits
// at the same shared address in each: what multicast and mbarrier_arrive_cluster rely on.
struct SharedStorage {
  struct Stage {
    alignas(1024) bf16 a[kBM * kBK];  // 16 KB
    alignas(1024) bf16 b[kBK * kBN];  // 32 KB, half of it from the partner
  };
  Stage stages[kStages];
  std::uint64_t full[kStages];
  std::uint64_t empty[kStages];
};
constexpr std::uint32_t kStageBytes = sizeof(SharedStorage::Stage);  // lands in each block
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;                // 8 KB
constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();

__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_tile, int half, int kk) {
  return swizzle128_descriptor(a_tile + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_tile, int kk) {
  return swizzle128_descriptor(b_tile + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

template <bool kPairs>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    clusters_kernel(const __grid_constant__ CUtensorMap a_map,
                    const __grid_constant__ CUtensorMap b_map, int m, int n, int k, float alpha,
                    float beta, bf16* __restrict__ C, int ldc) {
  extern __shared__ unsigned char shared_bytes[];
  SharedStorage& shared = shared_storage<SharedStorage>(shared_bytes);
  auto a_tile = [&](int stage) { return gemm::shared_address(shared.stages[stage].a); };
  auto b_tile = [&](int stage) { return gemm::shared_address(shared.stages[stage].b); };
  auto full = [&](int stage) { return gemm::shared_address(&shared.full[stage]); };
  auto empty = [&](int stage) { return gemm::shared_address(&shared.empty[stage]); };

  unsigned const rank = cluster_block_rank();  // 0 or 1: the upper or lower tile of the pair
  int const tiles_m = gemm::ceil_div(m, kBM);
  int const pair_rows = gemm::ceil_div(tiles_m, kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster_tiles = pair_rows * tiles_n;
  int const cluster = blockIdx.x / kClusterSize;
  int const clusters = gridDim.x / kClusterSize;
  int const k_tiles = gemm::ceil_div(k, kBK);
  int const warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(full(stage), 1);  // this block's producer (+ the bytes of A and all of B)
      mbarrier_init(empty(stage), 4 * kConsumers * kClusterSize);  // both blocks' warps
    }
    fence_barrier_init();
  }
  // Neither block may multicast into the other, or arrive on its barriers, before the other has
  // initialized them.
  cluster_sync();

  if (warpgroup == 0) {
    // --- producer ---------------------------------------------------------------------------
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      for (int tile = cluster; tile < cluster_tiles; tile += clusters) {
        int pair_m = 0;
        int tile_n = 0;
        gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
        // With an odd number of tile rows the last pair's lower tile lies below the matrix:
        // its A boxes are all out of bounds and arrive as zeros, and its epilogue writes nothing.
        int const tile_m = pair_m * kClusterSize + static_cast<int>(rank);
        for (int k_tile = 0; k_tile < k_tiles; ++k_tile, write.advance()) {
          // Completes only when the consumers of both blocks have released the stage.
          mbarrier_wait(empty(write.stage), write.phase ^ 1);
          mbarrier_arrive_expect_bytes(full(write.stage), kStageBytes);
          tma_load_2d(a_tile(write.stage), &a_map, k_tile * kBK, tile_m * kBM, full(write.stage));
          // Boxes rank, rank + 2, ... of B, to both blocks (mask 0b11).
          for (int box = static_cast<int>(rank); box < kBoxes; box += kClusterSize) {
            tma_load_2d_multicast(b_tile(write.stage) + box * kBBoxBytes, &b_map,
                                  tile_n * kBN + box * kBoxN, k_tile * kBK, full(write.stage),
                                  (1u << kClusterSize) - 1);
          }
        }
      }
    }
  } else {
    // --- consumers --------------------------------------------------------------------------
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    int const lane = threadIdx.x % 32;
    // A stage is free again when both blocks' consumers are done with it.
    PipelineState<kStages> release;
    auto release_stage = [&]() {
      if (lane == 0) {
        for (unsigned block = 0; block < kClusterSize; ++block) {
          mbarrier_arrive_cluster(empty(release.stage), block);
        }
      }
      release.advance();
    };
    PipelineState<kStages> read;
    for (int tile = cluster; tile < cluster_tiles; tile += clusters) {
      int pair_m = 0;
      int tile_n = 0;
      gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
      int const tile_m = pair_m * kClusterSize + static_cast<int>(rank);
      float acc[128];
#pragma unroll
      for (int i = 0; i < 128; ++i)
        acc[i] = 0.0f;
      for (int k_tile = 0; k_tile < k_tiles; ++k_tile, read.advance()) {
        mbarrier_wait(full(read.stage), read.phase);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
          wgmma_m64n256k16_bf16(acc, a_descriptor(a_tile(read.stage), consumer, kk),
                                b_descriptor(b_tile(read.stage), kk));
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (k_tile > 0) release_stage();
      }
      wgmma_wait<0>();
      release_stage();

      store_accumulators<kBN, kPairs>(C, ldc, m, n, alpha, beta, tile_m * kBM + consumer * 64,
                                      tile_n * kBN, acc);
    }
  }
  // A block may not exit while its partner can still arrive on its barriers: the last
  // releases of the partner's consumers land here.
  cluster_sync();
}

// How many clusters of this kernel the GPU runs at once: 66 on a 132-SM H100 if every GPC has an
// even number of free SMs, fewer if not. The persistent grid is sized from it.
template <class Kernel>
int resident_clusters(Kernel kernel) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kClusterSize, 1, 1);
  config.blockDim = dim3(kThreads, 1, 1);
  config.dynamicSmemBytes = kSharedBytes;
  int clusters = 0;
  gemm::check_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config),
                   "cudaOccupancyMaxActiveClusters");
  if (clusters < 1) throw std::runtime_error("bf16_gemm: no cluster of 2 blocks fits this GPU");
  return clusters;
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  long long const cluster_tiles =
      static_cast<long long>(ceil_div(ceil_div(m, kBM), kClusterSize)) * ceil_div(n, kBN);
  if (cluster_tiles > 0x3fffffffLL) throw std::invalid_argument("bf16_gemm: too many tiles");
  AlignedOperand const a(A, m, k, lda, must_copy(A, lda), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  bool const pairs = rows_are_aligned<4>(C, ldc);
  dispatch_bool(pairs, [&](auto kPairs) {
    constexpr auto kernel = clusters_kernel<kPairs()>;
    opt_in_shared_memory<kernel>(kSharedBytes);
    check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
    static int const resident = resident_clusters(kernel);
    long long const clusters = std::min<long long>(cluster_tiles, resident);
    // The grid counts blocks: a whole number of clusters.
    kernel<<<static_cast<unsigned>(clusters * kClusterSize), kThreads, kSharedBytes, stream>>>(
        a_map, b_map, m, n, k, alpha, beta, C, ldc);
  });
  check_launch("bf16_gemm");
}
