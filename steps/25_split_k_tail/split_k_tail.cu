// Step 25: the last wave split along K. Step 24 fights wave quantization only by choosing the tile
// width, and a last round that some tiles fill still costs a whole round: at 4096x4100x4096, 352
// cluster tiles of 192 columns make 5 full rounds of 66 clusters and a sixth of 22 tiles, with 44
// clusters idle. This step changes who does which k tiles:
//
//   - The tiles that fill whole rounds are done as before, one cluster per tile (data-parallel).
//   - The R tiles left over (R < the number of clusters G) are each cut along K into
//     s = min(G / R, k_tiles / 4) equal slices, one cluster per slice: the last round takes
//     1/s of a round (4096x4100x4096: 22 tiles x 3 slices on 66 clusters).
//   - Every slice writes its FP32 partial sums to a workspace and counts itself done on the
//     tile's counter (an atomic add); the slice that finds all the others done adds the partial
//     sums up in slice order and runs the epilogue. A fixed split and a fixed order of the
//     additions keep C bitwise the same on every run, whichever slice finishes last, and no
//     cluster ever waits for another.
//   - A model (rounds(), below) splits only where the shorter round outweighs handing the
//     partial sums on.
//
// The schedule and the hand-over come first below; the kernel is step 24's phases called in
// order: produce, consume_k_range, then reduce_tail_slices for a slice, then store_tile.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <memory>
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
#include "tma_store.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

// --- the schedule: who computes which k tiles ----------------------------------------------------

// Which k tiles of which cluster tile each cluster computes. Cluster tiles 0 .. dp_tiles - 1 are
// done whole, tile t by cluster t % G (G clusters). Each of the tail_tiles tiles after them is cut
// into `splits` slices of K: slice j of tail tile r is done by cluster r x splits + j. Without a
// split, tail_tiles is 0 and splits 1.
struct Schedule {
  int clusters;    // G
  int k_tiles;     // k tiles per tile
  int dp_tiles;    // tiles done whole, by one cluster each
  int tail_tiles;  // R: tiles cut into slices
  int splits;      // s: slices per tail tile
};

// One piece of work: k tiles [k_begin, k_end) of cluster tile `tile`; `tail_tile` is the tile's
// index among the tail tiles for a slice, -1 for a whole tile.
struct Unit {
  int tile;
  int k_begin;
  int k_end;
  int tail_tile;
};

// The index-th unit of `cluster`, or false when it has no more: its data-parallel tiles first,
// then at most one slice. Producer and consumers walk the same list.
__device__ __forceinline__ bool unit_of(Schedule const& s, int cluster, int index, Unit& unit) {
  int const dp_units =
      cluster < s.dp_tiles ? (s.dp_tiles - cluster + s.clusters - 1) / s.clusters : 0;
  if (index < dp_units) {
    unit = {cluster + index * s.clusters, 0, s.k_tiles, -1};
    return true;
  }
  if (index > dp_units || cluster >= s.tail_tiles * s.splits) return false;
  int const r = cluster / s.splits;
  int const j = cluster % s.splits;
  unit = {s.dp_tiles + r, j * s.k_tiles / s.splits, (j + 1) * s.k_tiles / s.splits, r};
  return true;
}

// Counts one more finished slice on a tail tile's counter and returns how many had finished
// before. The thread that calls it has just passed a named barrier with its warpgroup, after the
// warpgroup stored its partial sums: the first fence makes those stores visible at GPU scope
// before the count; the second makes what the other slices stored before their counts visible
// to this warpgroup's loads after its next named barrier (CUTLASS's generic barrier works the
// same way).
__device__ __forceinline__ int count_finished_slice(int* counter) {
  int before = 0;
  asm volatile(
      "fence.acq_rel.gpu;\n"
      "atom.relaxed.gpu.global.add.s32 %0, [%1], 1;\n"
      "fence.acq_rel.gpu;\n"
      : "=r"(before)
      : "l"(counter)
      : "memory");
  return before;
}

// This consumer's slot of cluster c's partial sums: kBN / 2 floats per thread, stored as float4s,
// the i-th float4 of every thread side by side, so that a warp's 16-byte stores and loads cover
// 512 contiguous bytes. The same consumer (block rank and index) of every cluster holds the same
// accumulator layout, so slots add up element by element.
template <int kBN>
__device__ __forceinline__ float4* partial_slot(float* partials, int cluster, unsigned rank,
                                                int consumer) {
  std::size_t const index =
      (static_cast<std::size_t>(cluster) * kClusterSize + rank) * kConsumers + consumer;
  return reinterpret_cast<float4*>(partials + index * 128 * (kBN / 2));
}

// A slice of a tail tile is done: hand its partial sums over and count the slice done. Returns
// true in the consumer of the last slice to finish, with acc then holding the whole tile's sums,
// added up in slice order; false in the others, which have nothing more to do for this tile.
template <int kBN>
__device__ __forceinline__ bool reduce_tail_slices(Schedule const& schedule, Unit const& unit,
                                                   int cluster, unsigned rank, int consumer,
                                                   float* partials, int* counters,
                                                   int& last_slice, float (&acc)[kBN / 2]) {
  int const thread = threadIdx.x % 128;
  int const barrier_id = 1 + consumer;
  float4* const out = partial_slot<kBN>(partials, cluster, rank, consumer);
#pragma unroll
  for (int i = 0; i < kBN / 8; ++i) {
    __stcg(out + i * 128 + thread,
           make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  }
  named_barrier_sync(barrier_id, 128);
  if (thread == 0) {
    int* const counter = counters + (unit.tail_tile * kClusterSize + rank) * kConsumers + consumer;
    last_slice = count_finished_slice(counter) == schedule.splits - 1;
  }
  named_barrier_sync(barrier_id, 128);
  if (!last_slice) return false;
  // Slice j of tail tile r is cluster r x splits + j's. Own slice included, every slice is read
  // back from its slot, so that the sum is the same expression whoever adds it up.
  int const first_cluster = unit.tail_tile * schedule.splits;
  for (int j = 0; j < schedule.splits; ++j) {
    float4 const* const in = partial_slot<kBN>(partials, first_cluster + j, rank, consumer);
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) {
      float4 const part = __ldcg(in + i * 128 + thread);
      acc[4 * i] = j == 0 ? part.x : acc[4 * i] + part.x;
      acc[4 * i + 1] = j == 0 ? part.y : acc[4 * i + 1] + part.y;
      acc[4 * i + 2] = j == 0 ? part.z : acc[4 * i + 2] + part.z;
      acc[4 * i + 3] = j == 0 ? part.w : acc[4 * i + 3] + part.w;
    }
  }
  return true;
}

// --- the plan: tile width and schedule ---------------------------------------------------------

// A slice shorter than this many k tiles would spend more on handing its partial sums on than it
// saves.
constexpr int kMinSliceKTiles = 4;

// What a split costs beyond its share of the work, in k tiles (a 256-column tile's k tile takes
// about 0.7 us on the H100: 44 us per round of 64 at 4096^3 in a timeline in docs/results): the
// writes of a 128 x 256 FP32 slot (about 3 us in that timeline), the reads of every slot by the
// slice that finishes last, and its epilogue after them. 8 k tiles, about 5.6 us, fitted the
// shapes measured.
constexpr double kSplitOverheadKTiles = 8.0;

// The time of a schedule in rounds (one tile's k loop on every cluster): the data-parallel rounds,
// plus a round of 1 / splits of the k loop and the split's overhead if there is a tail.
double rounds(Schedule const& s) {
  if (s.tail_tiles == 0) return (s.dp_tiles + s.clusters - 1) / s.clusters;
  return static_cast<double>(s.dp_tiles) / s.clusters + 1.0 / s.splits +
         kSplitOverheadKTiles / s.k_tiles;
}

// How the cluster tiles of a `width`-column tiling are shared among `clusters` resident
// clusters: the tiles that fill whole rounds data-parallel, and the rest split along K where the
// model says that is faster than a last round of whole tiles.
Schedule make_schedule(int m, int n, int k, int width, int clusters) {
  long long const tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
      gemm::ceil_div(n, width);
  int const k_tiles = gemm::ceil_div(k, kBK);
  Schedule const data_parallel{static_cast<int>(std::min<long long>(tiles, clusters)), k_tiles,
                               static_cast<int>(tiles), 0, 1};
  int const left_over = static_cast<int>(tiles % clusters);
  if (left_over == 0) return data_parallel;
  int const splits = std::min(clusters / left_over, k_tiles / kMinSliceKTiles);
  if (splits < 2) return data_parallel;
  Schedule const split{clusters, k_tiles, static_cast<int>(tiles - left_over), left_over, splits};
  return rounds(split) < rounds(data_parallel) ? split : data_parallel;
}

// Step 23's model, with the split's rounds: rounds times the tile width, plus a per-tile overhead
// worth 32 columns (the epilogue, and the lower efficiency of narrower wgmma).
int choose_tile_width(int m, int n, int k, int clusters) {
  int best_width = 256;
  double best_cost = -1.0;
  for (int width : {256, 192, 128}) {
    double const cost = rounds(make_schedule(m, n, k, width, clusters)) * (width + 32);
    if (best_cost < 0.0 || cost < best_cost) {
      best_cost = cost;
      best_width = width;
    }
  }
  return best_width;
}

// --- carried over from step 24 ------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBK = 64;
constexpr int kConsumers = 2;
constexpr int kClusterSize = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupM = 4;
constexpr int kBoxN = 64;  // B boxes, and the pieces of C the epilogue stores: 64 columns wide
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;
constexpr int kConsumerRegisters = 232;
constexpr int kMaxSharedBytes = 227 * 1024;  // the most a block may opt in to on sm_90
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;  // 8 KB

static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
              "the register budgets must fit what the block is given at launch");

// How C is written. kTmaStore needs C to be a legal TMA operand (16-byte-aligned rows); the
// others are step 23's direct stores, in pairs when C's rows are 4-byte aligned.
enum class Epilogue { kTmaStore, kPairStores, kSingleStores };

// Everything that follows from the tile width kBN: step 23's stages, plus the staging buffers of
// C: two 64 x 64 pieces (8 KB each) per consumer, and as many stages as fit beside them.
template <int kBN>
struct Tile {
  static constexpr int kBoxes = kBN / kBoxN;
  struct Stage {
    alignas(1024) bf16 a[kBM * kBK];
    alignas(1024) bf16 b[kBK * kBN];
  };
  static constexpr int kStagingBytes = kConsumers * 2 * 64 * 64 * 2;
  static constexpr int kStages = std::min<int>(
      6, (kMaxSharedBytes - 2048 - kStagingBytes) / static_cast<int>(sizeof(Stage)));
  struct SharedStorage {
    Stage stages[kStages];
    alignas(1024) bf16 staging[kConsumers][2][64 * 64];
    std::uint64_t full[kStages];
    std::uint64_t empty[kStages];
  };
  static constexpr std::uint32_t kStageBytes = sizeof(Stage);
  static constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();
  static_assert(kBN % kBoxN == 0 && kBN >= 64 && kBN <= 256, "wgmma N: 64 .. 256");
  static_assert(kSharedBytes <= kMaxSharedBytes, "stages and staging must fit shared memory");
};

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

// The block's place in the work: which cluster tile is whose, and the barriers' addresses.
template <int kBN>
struct Block {
  typename Tile<kBN>::SharedStorage& shared;
  unsigned rank;  // in the cluster: the upper (0) or lower (1) tile of the pair
  int pair_rows;
  int tiles_n;

  __device__ std::uint32_t a_tile(int stage) const {
    return gemm::shared_address(shared.stages[stage].a);
  }
  __device__ std::uint32_t b_tile(int stage) const {
    return gemm::shared_address(shared.stages[stage].b);
  }
  __device__ std::uint32_t full(int stage) const { return gemm::shared_address(&shared.full[stage]); }
  __device__ std::uint32_t empty(int stage) const {
    return gemm::shared_address(&shared.empty[stage]);
  }
  // This block's tile of cluster tile `tile`: the pair's place in the grouped order, and the
  // block's own row of the pair.
  __device__ void tile_of(int tile, int& tile_m, int& tile_n) const {
    int pair_m = 0;
    gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
    tile_m = pair_m * kClusterSize + static_cast<int>(rank);
  }
};

// The producer's loads of k tiles [k_begin, k_end) of tile (tile_m, tile_n).
template <int kBN>
__device__ __forceinline__ void produce(Block<kBN> const& block, CUtensorMap const* a_map,
                                        CUtensorMap const* b_map, int tile_m, int tile_n,
                                        int k_begin, int k_end,
                                        PipelineState<Tile<kBN>::kStages>& write) {
  for (int k_tile = k_begin; k_tile < k_end; ++k_tile, write.advance()) {
    mbarrier_wait(block.empty(write.stage), write.phase ^ 1);
    mbarrier_arrive_expect_bytes(block.full(write.stage), Tile<kBN>::kStageBytes);
    tma_load_2d(block.a_tile(write.stage), a_map, k_tile * kBK, tile_m * kBM,
                block.full(write.stage));
    for (int box = static_cast<int>(block.rank); box < Tile<kBN>::kBoxes; box += kClusterSize) {
      tma_load_2d_multicast(block.b_tile(write.stage) + box * kBBoxBytes, b_map,
                            tile_n * kBN + box * kBoxN, k_tile * kBK, block.full(write.stage),
                            (1u << kClusterSize) - 1);
    }
  }
}

// One consumer's wgmma over k tiles [k_begin, k_end), into acc; each stage is handed back to both
// blocks of the cluster once its wgmma are done.
template <int kBN>
__device__ __forceinline__ void consume_k_range(Block<kBN> const& block, int consumer,
                                                int k_begin, int k_end, float (&acc)[kBN / 2],
                                                PipelineState<Tile<kBN>::kStages>& read,
                                                PipelineState<Tile<kBN>::kStages>& release) {
  bool const lane_zero = threadIdx.x % 32 == 0;
  auto release_stage = [&]() {
    if (lane_zero) {
      for (unsigned rank = 0; rank < kClusterSize; ++rank) {
        mbarrier_arrive_cluster(block.empty(release.stage), rank);
      }
    }
    release.advance();
  };
#pragma unroll
  for (int i = 0; i < kBN / 2; ++i)
    acc[i] = 0.0f;
  for (int k_tile = k_begin; k_tile < k_end; ++k_tile, read.advance()) {
    mbarrier_wait(block.full(read.stage), read.phase);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
      wgmma_bf16<kBN>(acc, a_descriptor(block.a_tile(read.stage), consumer, kk),
                      b_descriptor(block.b_tile(read.stage), kk));
    }
    wgmma_commit();
    wgmma_wait<1>();
    if (k_tile > k_begin) release_stage();
  }
  wgmma_wait<0>();
  release_stage();
}

// Step 23's epilogue, for a C that TMA cannot store: straight from the accumulators.
template <int kBN, bool kPairs>
__device__ __forceinline__ void store_tile_directly(bf16* C, int ldc, int m, int n, float alpha,
                                                    float beta, int consumer, int tile_m,
                                                    int tile_n, float const (&acc)[kBN / 2]) {
  int const lane = threadIdx.x % 32;
  int const row = tile_m * kBM + consumer * 64 + (threadIdx.x / 32) % 4 * 16 + lane / 4;
  int const t2 = (lane % 4) * 2;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    int const col = tile_n * kBN + j * 8 + t2;
    if (row < m) {
      gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row) * ldc, col, n, acc[4 * j],
                                           acc[4 * j + 1], alpha, beta);
    }
    if (row + 8 < m) {
      gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row + 8) * ldc, col, n,
                                           acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
    }
  }
}

// --- the kernel ---------------------------------------------------------------------------------

template <int kBN, Epilogue kEpilogue>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    split_k_tail_kernel(const __grid_constant__ CUtensorMap a_map,
                        const __grid_constant__ CUtensorMap b_map,
                        const __grid_constant__ CUtensorMap c_map, int m, int n, float alpha,
                        float beta, bf16* __restrict__ C, int ldc, Schedule const schedule,
                        float* __restrict__ partials, int* __restrict__ counters) {
  using T = Tile<kBN>;
  extern __shared__ unsigned char shared_bytes[];
  Block<kBN> const block{shared_storage<typename T::SharedStorage>(shared_bytes),
                         cluster_block_rank(), gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize),
                         gemm::ceil_div(n, kBN)};
  int const cluster = blockIdx.x / kClusterSize;
  int const warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < T::kStages; ++stage) {
      mbarrier_init(block.full(stage), 1);
      mbarrier_init(block.empty(stage), 4 * kConsumers * kClusterSize);
    }
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup == 0) {
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<T::kStages> write;
      Unit unit{};
      for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
        int tile_m = 0;
        int tile_n = 0;
        block.tile_of(unit.tile, tile_m, tile_n);
        produce(block, &a_map, &b_map, tile_m, tile_n, unit.k_begin, unit.k_end, write);
      }
    }
  } else {
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    __shared__ int last_slice[kConsumers];  // the leader's count, for its warpgroup
    PipelineState<T::kStages> read;
    PipelineState<T::kStages> release;
    int pieces = 0;
    Unit unit{};
    for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
      int tile_m = 0;
      int tile_n = 0;
      block.tile_of(unit.tile, tile_m, tile_n);
      float acc[kBN / 2];
      consume_k_range(block, consumer, unit.k_begin, unit.k_end, acc, read, release);
      if (unit.tail_tile >= 0 && !reduce_tail_slices<kBN>(schedule, unit, cluster, block.rank,
                                                          consumer, partials, counters,
                                                          last_slice[consumer], acc)) {
        continue;
      }
      if constexpr (kEpilogue == Epilogue::kTmaStore) {
        store_tile<kBN>(&c_map, block.shared.staging[consumer], pieces, 1 + consumer, C, ldc, m, n,
                        alpha, beta, tile_m * kBM + consumer * 64, tile_n * kBN, acc);
      } else {
        store_tile_directly<kBN, kEpilogue == Epilogue::kPairStores>(C, ldc, m, n, alpha, beta,
                                                                     consumer, tile_m, tile_n, acc);
      }
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && threadIdx.x % 128 == 0) bulk_wait_group<0>();
  }
  cluster_sync();
}

// --- the host -----------------------------------------------------------------------------------

template <int kBN, Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float beta, bf16* C, int ldc, cudaStream_t stream) {
  constexpr int kSharedBytes = Tile<kBN>::kSharedBytes;
  constexpr auto kernel = split_k_tail_kernel<kBN, kEpilogue>;
  gemm::opt_in_shared_memory<kernel>(kSharedBytes);
  check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
  static int const resident = resident_clusters(kernel, kClusterSize, kThreads, kSharedBytes);
  Schedule const schedule = make_schedule(m, n, k, kBN, resident);
  // The split's workspace: one slot of partial sums per cluster, block and consumer (a cluster
  // does at most one slice), and a counter per tail tile, block and consumer, cleared on the
  // stream before the kernel.
  std::unique_ptr<gemm::StreamWorkspace> workspace;
  float* partials = nullptr;
  int* counters = nullptr;
  if (schedule.tail_tiles > 0) {
    std::size_t const slots =
        static_cast<std::size_t>(schedule.clusters) * kClusterSize * kConsumers;
    std::size_t const partial_bytes = slots * 128 * (kBN / 2) * sizeof(float);
    std::size_t const counter_bytes =
        static_cast<std::size_t>(schedule.tail_tiles) * kClusterSize * kConsumers * sizeof(int);
    workspace = std::make_unique<gemm::StreamWorkspace>(partial_bytes + counter_bytes, stream);
    partials = workspace->get<float>();
    counters = reinterpret_cast<int*>(workspace->get<unsigned char>() + partial_bytes);
    gemm::check_cuda(cudaMemsetAsync(counters, 0, counter_bytes, stream), "cudaMemsetAsync");
  }
  kernel<<<static_cast<unsigned>(schedule.clusters * kClusterSize), kThreads, kSharedBytes,
           stream>>>(a_map, b_map, c_map, m, n, alpha, beta, C, ldc, schedule, partials, counters);
}

template <int kBN>
void launch_width(Epilogue epilogue, CUtensorMap const& a_map, CUtensorMap const& b_map,
                  CUtensorMap const& c_map, int m, int n, int k, float alpha, float beta, bf16* C,
                  int ldc, cudaStream_t stream) {
  switch (epilogue) {
    case Epilogue::kTmaStore:
      return launch<kBN, Epilogue::kTmaStore>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc,
                                              stream);
    case Epilogue::kPairStores:
      return launch<kBN, Epilogue::kPairStores>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc,
                                                stream);
    case Epilogue::kSingleStores:
      return launch<kBN, Epilogue::kSingleStores>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc,
                                                  stream);
  }
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int device = 0;
  int sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute");
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then builds the
  // schedule from the occupancy query of the kernel it picked, which may find fewer.
  int const width = choose_tile_width(m, n, k, std::max(1, sms / kClusterSize));
  AlignedOperand const a(A, m, k, lda, should_copy_a(A, lda, n), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};  // unused by the direct stores
  // TMA stores need C's rows 16-byte aligned, and n a multiple of 8: at the right edge they write
  // whole 16-byte units (with n = 33 and ldc = 40, columns 33-39 too), and those columns are not
  // C's.
  if (rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) {
    epilogue = Epilogue::kTmaStore;
    c_map = make_bf16_tensor_map(C, m, n, ldc, 64, kBoxN);
  } else if (rows_are_aligned<4>(C, ldc)) {
    epilogue = Epilogue::kPairStores;
  }
  if (width == 256)
    launch_width<256>(epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
  if (width == 192)
    launch_width<192>(epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
  if (width == 128)
    launch_width<128>(epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
  check_launch("bf16_gemm");
}
