// Exercise: step 25, the last round split along K. One TODO block: which k tiles a cluster
// computes in the tail, where each left-over tile is cut into equal slices of K, one cluster per
// slice. The placeholder compiles and gives every cluster the first slice, so the slice that
// adds a tail tile up adds the same partial sums several times: every shape whose schedule
// splits a tail (the suite's cases with fewer tiles than clusters and a long K,
// 4096x4100x4096) comes out wrong, and the shapes done whole pass. The README's exercises take
// the schedule and the model apart. Build and test: docs/teaching.md ("Exercise mode").
#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
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
#include "pipeline_phases.cuh"
#include "tensor_map.h"
#include "tma_store.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

// --- the schedule ------------------------------------------------------------------------------

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
  // TODO(student): this cluster's slice j of tail tile r (cluster r x s.splits + j): the tile's
  // index among all cluster tiles, and its k tiles, the j-th of s.splits equal parts of s.k_tiles
  // (integer division, so that the slices of a tile cover its k tiles exactly once)
  unit = {s.dp_tiles + r, 0, s.k_tiles / s.splits, r};  // placeholder: every slice is the first
  // END TODO
  return true;
}

// A slice shorter than this many k tiles would spend more on handing its partial sums on than it
// saves.
constexpr int kMinSliceKTiles = 4;

// What a split costs beyond its share of the work, in k tiles: the writes of a slice's partial
// sums, the reads of every slice by the one that finishes last, and its epilogue after them.
// 8 k tiles fitted the shapes measured on the H100.
constexpr double kSplitOverheadKTiles = 8.0;

// The time of a schedule in rounds (one tile's k loop on every cluster): the data-parallel rounds,
// plus a round of 1 / splits of the k loop and the split's overhead if there is a tail.
double rounds(Schedule const& s) {
  if (s.tail_tiles == 0) return (s.dp_tiles + s.clusters - 1) / s.clusters;
  return static_cast<double>(s.dp_tiles) / s.clusters + 1.0 / s.splits +
         kSplitOverheadKTiles / s.k_tiles;
}

// How `tiles` cluster tiles of `k_tiles` k tiles each are shared among `clusters` resident
// clusters: the tiles that fill whole rounds data-parallel, and the rest split along K where the
// model says that is faster than a last round of whole tiles.
Schedule make_schedule(long long tiles, int k_tiles, int clusters) {
  Schedule const data_parallel{static_cast<int>(std::min<long long>(tiles, clusters)), k_tiles,
                               static_cast<int>(tiles), 0, 1};
  int const left_over = static_cast<int>(tiles % clusters);
  if (left_over == 0) return data_parallel;
  int const splits = std::min(clusters / left_over, k_tiles / kMinSliceKTiles);
  if (splits < 2) return data_parallel;
  Schedule const split{clusters, k_tiles, static_cast<int>(tiles - left_over), left_over, splits};
  return rounds(split) < rounds(data_parallel) ? split : data_parallel;
}

// --- the hand-over -----------------------------------------------------------------------------

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

// The slot of partial sums of warpgroup `slot` (numbered over cluster, block and consumer): kFloats
// floats per thread, stored as float4s, the i-th float4 of every thread side by side, so that a
// warp's 16-byte stores and loads cover 512 contiguous bytes.
template <int kFloats>
__device__ __forceinline__ float4* partial_slot(float* partials, std::size_t slot) {
  return reinterpret_cast<float4*>(partials + slot * 128 * kFloats);
}

// A slice of a tail tile is done: store the warpgroup's partial sums to slot `own_slot` and count
// the slice on `counter`. Returns true in the warpgroup of the last slice to finish, with acc then
// holding the whole tile's sums, added in slice order from slots first_slot, first_slot +
// slot_stride, ... (own slot included, so that the sum is the same expression whoever adds it
// up); false in the others, which have nothing more to do for this tile. `last_slice` is a shared
// int of the warpgroup's, `barrier_id` its named barrier.
template <int kFloats>
__device__ __forceinline__ bool reduce_tail_slices(float* partials, std::size_t own_slot,
                                                   std::size_t first_slot, std::size_t slot_stride,
                                                   int splits, int* counter, int& last_slice,
                                                   int barrier_id, float (&acc)[kFloats]) {
  int const thread = threadIdx.x % 128;
  float4* const out = partial_slot<kFloats>(partials, own_slot);
#pragma unroll
  for (int i = 0; i < kFloats / 4; ++i) {
    __stcg(out + i * 128 + thread,
           make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  }
  named_barrier_sync(barrier_id, 128);
  if (thread == 0) last_slice = count_finished_slice(counter) == splits - 1;
  named_barrier_sync(barrier_id, 128);
  if (!last_slice) return false;
  float4 const* const first = partial_slot<kFloats>(partials, first_slot);
#pragma unroll
  for (int i = 0; i < kFloats / 4; ++i) {
    float4 const part = __ldcg(first + i * 128 + thread);
    acc[4 * i] = part.x;
    acc[4 * i + 1] = part.y;
    acc[4 * i + 2] = part.z;
    acc[4 * i + 3] = part.w;
  }
  for (int j = 1; j < splits; ++j) {
    float4 const* const in = partial_slot<kFloats>(partials, first_slot + j * slot_stride);
#pragma unroll
    for (int i = 0; i < kFloats / 4; ++i) {
      float4 const part = __ldcg(in + i * 128 + thread);
      acc[4 * i] += part.x;
      acc[4 * i + 1] += part.y;
      acc[4 * i + 2] += part.z;
      acc[4 * i + 3] += part.w;
    }
  }
  return true;
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
constexpr int kMaxSharedBytes = 227 * 1024;            // the most a block may opt in to on sm_90
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
  static constexpr int kStages =
      std::min<int>(6, (kMaxSharedBytes - 2048 - kStagingBytes) / static_cast<int>(sizeof(Stage)));
  struct SharedStorage {
    Stage stages[kStages];
    alignas(1024) bf16 staging[kConsumers][2][64 * 64];
    std::uint64_t full[kStages];
    std::uint64_t empty[kStages];
  };
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

// --- the kernel ---------------------------------------------------------------------------------

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
  auto& shared = shared_storage<typename T::SharedStorage>(shared_bytes);
  StageRing<typename T::SharedStorage> const ring{shared};
  unsigned const rank = cluster_block_rank();
  int const pair_rows = gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster = blockIdx.x / kClusterSize;
  int const warpgroup = threadIdx.x / 128;
  auto tile_of = [&](int tile, int& tile_m, int& tile_n) {
    int pair_m = 0;
    gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
    tile_m = pair_m * kClusterSize + static_cast<int>(rank);
  };

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(ring.full(stage), 1);
      mbarrier_init(ring.empty(stage), 4 * kConsumers * kClusterSize);
    }
    fence_barrier_init();
  }
  cluster_sync();

  if (warpgroup == 0) {
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      Unit unit{};
      for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
        int tile_m = 0;
        int tile_n = 0;
        tile_of(unit.tile, tile_m, tile_n);
        produce<T::kBoxes, kClusterSize>(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN,
                                         unit.k_begin, unit.k_end, rank, write);
      }
    }
  } else {
    claim_registers<kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    __shared__ int last_slice[kConsumers];  // the leader's count, for its warpgroup
    PipelineState<kStages> read;
    PipelineState<kStages> release;
    int pieces = 0;
    Unit unit{};
    for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
      int tile_m = 0;
      int tile_n = 0;
      tile_of(unit.tile, tile_m, tile_n);
      float acc[kBN / 2];
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i)
        acc[i] = 0.0f;
      consume_k_range<kClusterSize>(ring, unit.k_begin, unit.k_end, read, release, [&](int stage) {
#pragma unroll
        for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
          wgmma_bf16<kBN>(acc, a_descriptor(ring.a_tile(stage), consumer, kk),
                          b_descriptor(ring.b_tile(stage), kk));
        }
      });
      if (unit.tail_tile >= 0) {
        // A slice: partial sums of cluster c in slot (c x kClusterSize + rank) x kConsumers +
        // consumer, so that the slices of one tail tile are kClusterSize x kConsumers slots apart.
        std::size_t const slot_stride = kClusterSize * kConsumers;
        std::size_t const own_slot = cluster * slot_stride + rank * kConsumers + consumer;
        std::size_t const first_slot =
            unit.tail_tile * schedule.splits * slot_stride + rank * kConsumers + consumer;
        int* const counter =
            counters + (unit.tail_tile * kClusterSize + rank) * kConsumers + consumer;
        if (!reduce_tail_slices<kBN / 2>(partials, own_slot, first_slot, slot_stride,
                                         schedule.splits, counter, last_slice[consumer],
                                         1 + consumer, acc)) {
          continue;  // another slice finishes the tile
        }
      }
      int const first_row = tile_m * kBM + consumer * 64;
      if constexpr (kEpilogue == Epilogue::kTmaStore) {
        store_tile<kBN>(&c_map, shared.staging[consumer], pieces, 1 + consumer, C, ldc, m, n, alpha,
                        beta, first_row, tile_n * kBN, acc);
      } else {
        store_accumulators<kBN, kEpilogue == Epilogue::kPairStores>(C, ldc, m, n, alpha, beta,
                                                                    first_row, tile_n * kBN, acc);
      }
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && threadIdx.x % 128 == 0) bulk_wait_group<0>();
  }
  cluster_sync();
}

// --- the host -----------------------------------------------------------------------------------

// Step 23's model, with the split's rounds: rounds times the tile width, plus a per-tile overhead
// worth 32 columns (the epilogue, and the lower efficiency of narrower wgmma).
int choose_tile_width(int m, int n, int k, int clusters) {
  int best_width = 256;
  double best_cost = -1.0;
  for (int width : {256, 192, 128}) {
    long long const tiles =
        static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
        gemm::ceil_div(n, width);
    double const cost =
        rounds(make_schedule(tiles, gemm::ceil_div(k, kBK), clusters)) * (width + 32);
    if (best_cost < 0.0 || cost < best_cost) {
      best_cost = cost;
      best_width = width;
    }
  }
  return best_width;
}

template <int kBN, Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float beta, bf16* C, int ldc, cudaStream_t stream) {
  constexpr int kSharedBytes = Tile<kBN>::kSharedBytes;
  constexpr auto kernel = split_k_tail_kernel<kBN, kEpilogue>;
  gemm::opt_in_shared_memory<kernel>(kSharedBytes);
  check_register_budgets<kernel>(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers);
  // The G of the schedule. (Correctness does not depend on it: no cluster waits for another, so a
  // grid that does not fit at once, beside another kernel, only runs longer.)
  static int const resident = resident_clusters(kernel, kClusterSize, kThreads, kSharedBytes);
  long long const tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, kBM), kClusterSize)) *
      gemm::ceil_div(n, kBN);
  Schedule const schedule = make_schedule(tiles, gemm::ceil_div(k, kBK), resident);
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

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, kBM)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
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
  dispatch_value<256, 192, 128>(width, [&](auto kWidth) {
    dispatch_value<Epilogue::kTmaStore, Epilogue::kPairStores, Epilogue::kSingleStores>(
        epilogue, [&](auto kEpilogue) {
          launch<kWidth(), kEpilogue()>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
        });
  });
  check_launch("bf16_gemm");
}
