// Step 23: the tile width against wave quantization. Step 22's persistent grid runs 66 clusters on
// the H100; a shape with 64 cluster tiles leaves 2 idle, one with 67 needs a second round for one
// tile, and a round costs the same however few tiles it holds. Here the tile width is chosen per
// call among 256, 192 and 128 columns (choose_tile_width) to minimize rounds x width, with an
// overhead per tile: at 1000x3000x2000, 48 tiles of 256 columns fill 48 of 66 clusters, 64 tiles
// of 192 fill 64. The kernel becomes a template over the width (Tile<kBN>); a narrower tile takes
// less shared memory per stage, so it gets more stages.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "aligned_operand.cuh"
#include "cluster.cuh"
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

// --- the tile -----------------------------------------------------------------------------------

constexpr int kBM = 128;         // block tile rows: 64 per consumer warpgroup
constexpr int kBK = 64;          // k tile: 64 bf16 = one 128-byte swizzle span
constexpr int kConsumers = 2;    // consumer warpgroups
constexpr int kClusterSize = 2;  // blocks per cluster: two M-adjacent tiles, one B tile
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;  // in cluster tiles: 8 tile rows
constexpr int kBoxN = 64;   // B is copied in boxes 64 columns (128 bytes) wide
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kMaxSharedBytes = 227 * 1024;            // the most a block may opt in to on sm_90
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;  // 8 KB

static_assert(kBK * 2 == 128, "a row of A's tile must be exactly one 128-byte swizzle span");
static_assert(kBM == 64 * kConsumers, "each consumer warpgroup owns 64 rows of the tile");
static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
              "the register budgets must fit what the block is given at launch");

// Everything that follows from the tile width kBN: the shared memory of a stage, and as many
// stages as fit (at most 6).
template <int kBN>
struct Tile {
  static constexpr int kBoxes = kBN / kBoxN;
  struct Stage {
    alignas(1024) bf16 a[kBM * kBK];  // 16 KB
    alignas(1024) bf16 b[kBK * kBN];  // 8 KB per box of B
  };
  static constexpr int kStages =
      std::min<int>(6, (kMaxSharedBytes - 2048) / static_cast<int>(sizeof(Stage)));
  struct SharedStorage {
    Stage stages[kStages];
    std::uint64_t full[kStages];
    std::uint64_t empty[kStages];
  };
  static constexpr std::uint32_t kStageBytes = sizeof(Stage);
  static constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();
  static_assert(kBN % kBoxN == 0 && kBN >= 64 && kBN <= 256, "wgmma N: 64 .. 256");
  static_assert(kSharedBytes <= kMaxSharedBytes, "the stages must fit shared memory");
};

// One wgmma of the tile's width.
template <int kBN>
__device__ __forceinline__ void wgmma_bf16(float (&acc)[kBN / 2], std::uint64_t a,
                                           std::uint64_t b) {
  if constexpr (kBN == 256) wgmma_m64n256k16_bf16(acc, a, b);
  if constexpr (kBN == 192) wgmma_m64n192k16_bf16(acc, a, b);
  if constexpr (kBN == 128) wgmma_m64n128k16_bf16(acc, a, b);
}

__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_tile, int half, int kk) {
  return swizzle128_descriptor(a_tile + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_tile, int kk) {
  return swizzle128_descriptor(b_tile + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

template <int kBN, bool kPairs>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    tile_width_kernel(const __grid_constant__ CUtensorMap a_map,
                      const __grid_constant__ CUtensorMap b_map, int m, int n, int k, float alpha,
                      float beta, bf16* __restrict__ C, int ldc) {
  using T = Tile<kBN>;
  constexpr int kStages = T::kStages;
  extern __shared__ unsigned char shared_bytes[];
  auto& shared = shared_storage<typename T::SharedStorage>(shared_bytes);
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
          mbarrier_arrive_expect_bytes(full(write.stage), T::kStageBytes);
          tma_load_2d(a_tile(write.stage), &a_map, k_tile * kBK, tile_m * kBM, full(write.stage));
          // Boxes rank, rank + 2, ... of B, to both blocks (mask 0b11); with 3 boxes, two and one.
          for (int box = static_cast<int>(rank); box < T::kBoxes; box += kClusterSize) {
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
      float acc[kBN / 2];
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i)
        acc[i] = 0.0f;
      for (int k_tile = 0; k_tile < k_tiles; ++k_tile, read.advance()) {
        mbarrier_wait(full(read.stage), read.phase);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
          wgmma_bf16<kBN>(acc, a_descriptor(a_tile(read.stage), consumer, kk),
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

// --- the tile width -----------------------------------------------------------------------------

// Rounds of the persistent grid times the tile width, plus a per-tile overhead worth 32 columns
// (the epilogue, and the lower efficiency of narrower wgmma): the smallest estimate wins.
int choose_tile_width(int m, int n, int clusters) {
  int best_width = 256;
  long long best_cost = -1;
  for (int width : {256, 192, 128}) {
    long long const tiles =
        static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
        gemm::ceil_div(n, width);
    long long const rounds = (tiles + clusters - 1) / clusters;
    long long const cost = rounds * (width + 32);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_width = width;
    }
  }
  return best_width;
}

template <int kBN>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, int m, int n, int k, float alpha,
            float beta, bf16* C, int ldc, cudaStream_t stream) {
  constexpr int kSharedBytes = Tile<kBN>::kSharedBytes;
  gemm::dispatch_bool(gemm::rows_are_aligned<4>(C, ldc), [&](auto kPairs) {
    constexpr auto kernel = tile_width_kernel<kBN, kPairs()>;
    gemm::opt_in_shared_memory<kernel>(kSharedBytes);
    check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
    static int const resident = resident_clusters(kernel, kClusterSize, kThreads, kSharedBytes);
    long long const cluster_tiles =
        static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
        gemm::ceil_div(n, kBN);
    long long const clusters = std::min<long long>(cluster_tiles, resident);
    kernel<<<static_cast<unsigned>(clusters * kClusterSize), kThreads, kSharedBytes, stream>>>(
        a_map, b_map, m, n, k, alpha, beta, C, ldc);
  });
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then sizes the
  // grid from the occupancy query of the kernel it picked, which may find fewer.
  int const width = choose_tile_width(m, n, std::max(1, sms / kClusterSize));
  AlignedOperand const a(A, m, k, lda, should_copy_a(A, lda, n), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  if (width == 256) launch<256>(a_map, b_map, m, n, k, alpha, beta, C, ldc, stream);
  if (width == 192) launch<192>(a_map, b_map, m, n, k, alpha, beta, C, ldc, stream);
  if (width == 128) launch<128>(a_map, b_map, m, n, k, alpha, beta, C, ldc, stream);
  check_launch("bf16_gemm");
}
