// Step 22: the last wave split along K. Step 21 fights wave quantization only by choosing the
// tile width, and a last round that some tiles fill still costs a whole round: at 4096x4100x4096,
// 352 cluster tiles of 192 columns make 5 full rounds of 66 clusters and a sixth of 22 tiles,
// with 44 clusters idle. This step keeps step 21's kernel and host code and changes who does
// which k tiles:
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
// We first built Stream-K (Osama et al., 2023): the left-over tiles' k-tile iterations laid end
// to end and cut into G equal ranges, so that no cluster idles at all. Measured in one process
// against these aligned slices, it lost at most shapes and widths and never won by more than
// the spread between runs (docs/results; 1024x1024x16384: 0.092 ms against 0.069 ms). It gives
// nearly every cluster two pieces with a hand-over between them, and, our explanation, not
// profiled: with ranges that start anywhere, the clusters no longer sweep K side by side, and
// tiles that share a panel of A or B in L2 fetch it at different times.
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "aligned_operand.cuh"
#include "async_copy.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "hopper.cuh"
#include "tensor_map.h"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

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

constexpr std::uint32_t kABytes = kBM * kBK * 2;
constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;
constexpr std::uint32_t kCBoxBytes = 64 * kBoxN * 2;  // one 64 x 64 piece of C: 8 KB

// How C is written. kTmaStore needs C to be a legal TMA operand (16-byte-aligned rows); the
// others are step 20's direct stores, in pairs when C's rows are 4-byte aligned.
enum class Epilogue { kTmaStore, kPairStores, kSingleStores };

// Everything that follows from the tile width kBN.
template <int kBN>
struct Tile {
  static constexpr int kBoxes = kBN / kBoxN;
  static constexpr std::uint32_t kBBytes = kBBoxBytes * kBoxes;
  static constexpr std::uint32_t kStageBytes = kABytes + kBBytes;
  // Each consumer stages C in two 8 KB buffers: it fills one while TMA still reads the other.
  static constexpr std::uint32_t kStagingBytes = kConsumers * 2 * kCBoxBytes;
  // As many stages as fit beside the staging buffers.
  static constexpr int kStages = std::min<int>(
      6, (kMaxSharedBytes - 1024 - kStagingBytes - 6 * 16) / static_cast<int>(kStageBytes));
  static constexpr int kSharedBytes =
      1024 + kStages * kStageBytes + kStagingBytes + 2 * kStages * 8;
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

__device__ __forceinline__ std::uint64_t a_descriptor(std::uint32_t a_stage, int half, int kk) {
  return swizzle128_descriptor(a_stage + half * 64 * 128 + kk * kWgmmaK * 2, 16, 1024);
}
__device__ __forceinline__ std::uint64_t b_descriptor(std::uint32_t b_stage, int kk) {
  return swizzle128_descriptor(b_stage + kk * kWgmmaK * 128, kBBoxBytes, 1024);
}

// c = alpha * acc + beta * c for C[row][col], C[row][col + 1], as bf16, reading C only when
// beta != 0 and only inside the matrix (the pieces of C staged for a TMA store may overhang it;
// TMA clips what lies outside).
__device__ __forceinline__ __nv_bfloat162 scaled_pair(bf16 const* C, int ldc, int row, int col,
                                                      int m, int n, float acc0, float acc1,
                                                      float alpha, float beta) {
  float2 value = make_float2(alpha * acc0, alpha * acc1);
  if (beta != 0.0f && row < m && col < n) {
    bf16 const* old = C + static_cast<size_t>(row) * ldc + col;
    if (col + 1 < n) {  // col is even and ldc a multiple of 8: a 4-byte aligned pair
      float2 const pair = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 const*>(old));
      value.x += beta * pair.x;
      value.y += beta * pair.y;
    } else {
      value.x += beta * __bfloat162float(old[0]);
    }
  }
  return __float22bfloat162_rn(value);
}

// --- the schedule -------------------------------------------------------------------------------

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

template <int kBN, Epilogue kEpilogue>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(kThreads, 1)
    split_k_tail_kernel(const __grid_constant__ CUtensorMap a_map,
                        const __grid_constant__ CUtensorMap b_map,
                        const __grid_constant__ CUtensorMap c_map, int m, int n, float alpha,
                        float beta, bf16* __restrict__ C, int ldc, Schedule const schedule,
                        float* __restrict__ partials, int* __restrict__ counters) {
  using T = Tile<kBN>;
  constexpr int kStages = T::kStages;
  extern __shared__ unsigned char shared_bytes[];
  std::uint32_t const shared_base = (gemm::shared_address(shared_bytes) + 1023) & ~1023u;
  unsigned char* const shared_pointer =
      shared_bytes + (shared_base - gemm::shared_address(shared_bytes));
  auto a_stage = [&](int stage) { return shared_base + stage * T::kStageBytes; };
  auto b_stage = [&](int stage) { return shared_base + stage * T::kStageBytes + kABytes; };
  std::uint32_t const staging = shared_base + kStages * T::kStageBytes;  // 1024-byte aligned
  std::uint32_t const barriers = staging + T::kStagingBytes;
  auto full = [&](int stage) { return barriers + stage * 8; };
  auto empty = [&](int stage) { return barriers + (kStages + stage) * 8; };

  unsigned const rank = cluster_block_rank();
  int const tiles_m = gemm::ceil_div(m, kBM);
  int const pair_rows = gemm::ceil_div(tiles_m, kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster = blockIdx.x / kClusterSize;
  int const warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(full(stage), 1);
      mbarrier_init(empty(stage), 4 * kConsumers * kClusterSize);
    }
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup == 0) {
    // --- producer: step 21's, walking units instead of tiles ------------------------------------
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      int load = 0;
      Unit unit{};
      for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
        int pair_m = 0;
        int tile_n = 0;
        gemm::grouped_tile(unit.tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
        int const tile_m = pair_m * kClusterSize + static_cast<int>(rank);
        for (int k_tile = unit.k_begin; k_tile < unit.k_end; ++k_tile, ++load) {
          int const stage = load % kStages;
          mbarrier_wait(empty(stage), (load / kStages + 1) % 2);
          mbarrier_arrive_expect_bytes(full(stage), T::kStageBytes);
          tma_load_2d(a_stage(stage), &a_map, k_tile * kBK, tile_m * kBM, full(stage));
          for (int box = static_cast<int>(rank); box < T::kBoxes; box += kClusterSize) {
            tma_load_2d_multicast(b_stage(stage) + box * kBBoxBytes, &b_map,
                                  tile_n * kBN + box * kBoxN, k_tile * kBK, full(stage),
                                  (1u << kClusterSize) - 1);
          }
        }
      }
    }
  } else {
    // --- consumers --------------------------------------------------------------------------
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    int const thread = threadIdx.x % 128;
    int const lane = threadIdx.x % 32;
    int const warp = (threadIdx.x / 32) % 4;
    int const g = lane / 4;
    int const t2 = (lane % 4) * 2;
    bool const leader = thread == 0;  // issues the TMA stores, counts the slices
    int const barrier_id = 1 + consumer;
    auto release = [&](int stage) {
      for (unsigned block = 0; block < kClusterSize; ++block) {
        mbarrier_arrive_cluster(empty(stage), block);
      }
    };
    // This consumer's slot of cluster c's partial sums: kBN / 2 floats per thread, stored as
    // float4s, the i-th float4 of every thread side by side, so that a warp's 16-byte stores and
    // loads cover 512 contiguous bytes. The same consumer (block rank and index) of every
    // cluster holds the same accumulator layout, so slots add up element by element.
    auto slot = [&](int c) {
      std::size_t const index = (static_cast<std::size_t>(c) * kClusterSize + rank) * kConsumers +
                                static_cast<std::size_t>(consumer);
      return reinterpret_cast<float4*>(partials + index * 128 * (kBN / 2));
    };
    __shared__ int last_slice[kConsumers];  // the leader's count, for its warpgroup
    int load = 0;
    int pieces = 0;  // pieces of C this consumer has staged so far: picks the staging buffer
    Unit unit{};
    for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
      int pair_m = 0;
      int tile_n = 0;
      gemm::grouped_tile(unit.tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
      int const tile_m = pair_m * kClusterSize + static_cast<int>(rank);
      float acc[kBN / 2];
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i)
        acc[i] = 0.0f;
      for (int k_tile = unit.k_begin; k_tile < unit.k_end; ++k_tile, ++load) {
        int const stage = load % kStages;
        mbarrier_wait(full(stage), (load / kStages) % 2);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
          wgmma_bf16<kBN>(acc, a_descriptor(a_stage(stage), consumer, kk),
                          b_descriptor(b_stage(stage), kk));
        }
        wgmma_commit();
        wgmma_wait<1>();
        if (k_tile > unit.k_begin && lane == 0) release((load - 1) % kStages);
      }
      wgmma_wait<0>();
      if (lane == 0) release((load - 1) % kStages);

      if (unit.tail_tile >= 0) {
        // A slice of a tail tile: hand the partial sums over and count the slice done; the last
        // slice of the tile to finish adds all of them up, in slice order, and writes the tile.
        float4* const out = slot(cluster);
#pragma unroll
        for (int i = 0; i < kBN / 8; ++i) {
          __stcg(out + i * 128 + thread,
                 make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
        }
        named_barrier_sync(barrier_id, 128);
        if (leader) {
          int* const counter =
              counters + (unit.tail_tile * kClusterSize + rank) * kConsumers + consumer;
          last_slice[consumer] = count_finished_slice(counter) == schedule.splits - 1;
        }
        named_barrier_sync(barrier_id, 128);
        if (!last_slice[consumer]) continue;
        // Slice j of tail tile r is cluster r x splits + j's. Own slice included, every slice is
        // read back from its slot, so that the sum is the same expression whoever adds it up.
        int const first_cluster = unit.tail_tile * schedule.splits;
        float4 const* const first = slot(first_cluster);
#pragma unroll
        for (int i = 0; i < kBN / 8; ++i) {
          float4 const part = __ldcg(first + i * 128 + thread);
          acc[4 * i] = part.x;
          acc[4 * i + 1] = part.y;
          acc[4 * i + 2] = part.z;
          acc[4 * i + 3] = part.w;
        }
        for (int j = 1; j < schedule.splits; ++j) {
          float4 const* const in = slot(first_cluster + j);
#pragma unroll
          for (int i = 0; i < kBN / 8; ++i) {
            float4 const part = __ldcg(in + i * 128 + thread);
            acc[4 * i] += part.x;
            acc[4 * i + 1] += part.y;
            acc[4 * i + 2] += part.z;
            acc[4 * i + 3] += part.w;
          }
        }
      }

      int const first_row = tile_m * kBM + consumer * 64;  // this consumer's 64 rows
      int const row = warp * 16 + g;                       // and rows row, row + 8 of them
      if constexpr (kEpilogue == Epilogue::kTmaStore) {
        // Step 21's epilogue: piece by piece (64 x 64) through swizzled staging to TMA stores.
#pragma unroll
        for (int piece = 0; piece < T::kBoxes; ++piece, ++pieces) {
          std::uint32_t const buffer = staging + (consumer * 2 + pieces % 2) * kCBoxBytes;
          unsigned char* const buffer_pointer = shared_pointer + (buffer - shared_base);
          if (leader) bulk_wait_group_read<1>();
          named_barrier_sync(barrier_id, 128);
#pragma unroll
          for (int chunk = 0; chunk < kBoxN / 8; ++chunk) {
            int const j = piece * (kBoxN / 8) + chunk;  // the accumulators' 8-column block
            int const col = tile_n * kBN + j * 8 + t2;
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              int const r = row + 8 * half;
              __nv_bfloat162 const value =
                  scaled_pair(C, ldc, first_row + r, col, m, n, acc[4 * j + 2 * half],
                              acc[4 * j + 2 * half + 1], alpha, beta);
              int const offset = r * 128 + ((chunk ^ (r % 8)) * 16) + t2 * 2;
              *reinterpret_cast<__nv_bfloat162*>(buffer_pointer + offset) = value;
            }
          }
          fence_proxy_async_shared();
          named_barrier_sync(barrier_id, 128);
          if (leader) {
            tma_store_2d(&c_map, buffer, tile_n * kBN + piece * kBoxN, first_row);
            bulk_commit_group();
          }
        }
      } else {
        constexpr bool kPairs = kEpilogue == Epilogue::kPairStores;
        int const out_row = first_row + row;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
          int const col = tile_n * kBN + j * 8 + t2;
          if (out_row < m) {
            gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(out_row) * ldc, col, n,
                                                 acc[4 * j], acc[4 * j + 1], alpha, beta);
          }
          if (out_row + 8 < m) {
            gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(out_row + 8) * ldc, col, n,
                                                 acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
          }
        }
      }
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && leader) bulk_wait_group<0>();
  }
  cluster_sync();
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

// Step 21's model, with the split's rounds: rounds times the tile width, plus a per-tile overhead
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

// How many clusters of this kernel fit the GPU at once (66 on the H100): the G of the schedule.
// (Correctness does not depend on it: no cluster waits for another, so a grid that does not fit
// at once, beside another kernel, only runs longer.)
template <class Kernel>
int resident_clusters(Kernel kernel, int shared_bytes) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kClusterSize, 1, 1);
  config.blockDim = dim3(kThreads, 1, 1);
  config.dynamicSmemBytes = shared_bytes;
  int clusters = 0;
  gemm::check_cuda(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config),
                   "cudaOccupancyMaxActiveClusters");
  if (clusters < 1) throw std::runtime_error("bf16_gemm: no cluster of 2 blocks fits this GPU");
  return clusters;
}

template <int kBN, Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float beta, bf16* C, int ldc, cudaStream_t stream) {
  constexpr int kSharedBytes = Tile<kBN>::kSharedBytes;
  auto const kernel = split_k_tail_kernel<kBN, kEpilogue>;
  static cudaError_t const opt_in =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  if (opt_in != cudaSuccess) {
    throw std::runtime_error("bf16_gemm: this GPU cannot give a block " +
                             std::to_string(kSharedBytes) + " bytes of shared memory (" +
                             cudaGetErrorString(opt_in) + ")");
  }
  static int const resident = resident_clusters(kernel, kSharedBytes);
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
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then builds
  // the schedule from the occupancy query of the kernel it picked, which may find fewer.
  int const width = choose_tile_width(m, n, k, std::max(1, sms / kClusterSize));

  // A copied when TMA cannot read it or reads it slowly, B only when TMA cannot read it
  // (common/aligned_operand.cuh says why).
  AlignedOperand const a(A, m, k, lda, should_copy_a(A, lda, n), stream);
  AlignedOperand const b(B, k, n, ldb, must_copy(B, ldb), stream);
  CUtensorMap const a_map = make_bf16_tensor_map(a.data(), m, k, a.ld(), kBM, kBK);
  CUtensorMap const b_map = make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};  // unused by the direct-store kernels
  // TMA stores need C's rows 16-byte aligned, and n a multiple of 8 (step 21).
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
