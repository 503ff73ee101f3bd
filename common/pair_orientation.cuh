// Taught in step 27 (steps/27_pair_orientation/), which writes this code inline: a cluster pair
// stacked (sharing B) or side by side (sharing A), the transposed product of step 26
// (transposed_tile.cuh) on tiles of 64 to 256 rows and one to three consumers, step 25's split of
// the last round, and step 26's model choosing among a list of tiles. A step that changes only the
// list includes this header, declares its list and calls choose_tile and gemm_with_tile, and may
// pass how the kernel opens and closes its cluster (ClusterSync below, taught in step 33), how
// the slices of a split tile hand over (SplitHandOver below, taught in step 35) and how the call
// treats a row pitch that is not a multiple of 128 bytes (PitchRule below, taught in step 37), how
// a consumer issues a k tile's wgmma (WgmmaIssue below, taught in step 41) and how the epilogue
// reads C where beta != 0 (CSource below, taught in step 45). Step 46 adds a third pairing,
// Pairing::kStackedOddRowSide, and step 48 a second way for the consumers to share a block's
// tiles, ConsumerWork::kTilesInTurn.
// Compiles only for sm_90a.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <utility>

#include "aligned_operand.cuh"
#include "cluster.cuh"
#include "cuda_check.h"
#include "device_helpers.cuh"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "pipeline_phases.cuh"
#include "split_k.cuh"
#include "tensor_map.h"
#include "tma_store.cuh"
#include "transposed_tile.cuh"
#include "warp_specialization.cuh"
#include "wgmma.cuh"
#include "workspace.h"

namespace gemm::hopper::pairs {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper::transposed;

// The transposed product, its tile constants (kBK, kBoxN, ...) and its epilogue are step 26's,
// from common/transposed_tile.cuh.
inline constexpr int kClusterSize = 2;
inline constexpr int kGroupM = 4;
inline constexpr int kProducerRegisters = 40;
inline constexpr int kMaxSharedBytes = 227 * 1024;  // the most a block may opt in to on sm_90

// --- the pair -----------------------------------------------------------------------------------

// How the two blocks of a cluster sit: one above the other (same columns, sharing B, steps 21-26)
// or side by side (same rows, sharing A). kStackedOddRowSide (step 46): stacked, except that an odd
// last tile row is paired side by side instead of with a tile wholly outside C; A's map then has
// boxes of half a tile, as side by side, and a stacked pair loads its A tile in two.
enum class Pairing { kStacked, kSideBySide, kStackedOddRowSide };

// How a block's consumers share its tiles. kColumnsOfOneTile (steps 27-47): every consumer
// computes its 64 columns of every tile, so all of them reach the epilogue together. kTilesInTurn
// (step 48): two consumers take the block's tiles in turn, each computing a whole tile of 128
// columns, so that one consumer's epilogue runs while the other's k loop keeps the tensor cores
// busy.
enum class ConsumerWork { kColumnsOfOneTile, kTilesInTurn };

// The producer of a side-by-side pair: the k tiles [k_begin, k_end) of A's rows a_row .. + kBM - 1
// and of kBoxes boxes of B from column b_col. Block `rank` loads rows rank x kBM / 2 .. + kBM / 2 -
// 1 of A's tile and multicasts them to both blocks (at their offset in the stage: whole 1024-byte
// swizzle atoms, so the two halves together are the tile one box would have given); B's boxes are
// this block's own. A stage is refilled once the consumers of both blocks have handed it back.
template <int kBM, int kBoxes, class Storage>
__device__ __forceinline__ void produce_side_by_side(
    StageRing<Storage> const& ring, CUtensorMap const* a_map, CUtensorMap const* b_map, int a_row,
    int b_col, int k_begin, int k_end, unsigned rank,
    PipelineState<StageRing<Storage>::kStages>& write) {
  constexpr int kHalfRows = kBM / 2;
  static_assert(kHalfRows % 8 == 0, "each half of A's tile is whole 8-row swizzle atoms");
  int const first_row = static_cast<int>(rank) * kHalfRows;
  for (int k_tile = k_begin; k_tile < k_end; ++k_tile, write.advance()) {
    mbarrier_wait(ring.empty(write.stage), write.phase ^ 1);
    mbarrier_arrive_expect_bytes(ring.full(write.stage), StageRing<Storage>::kStageBytes);
    tma_load_2d_multicast(ring.a_tile(write.stage) + first_row * kBK * 2, a_map, k_tile * kBK,
                          a_row + first_row, ring.full(write.stage), (1u << kClusterSize) - 1);
    for (int box = 0; box < kBoxes; ++box) {
      tma_load_2d(ring.b_tile(write.stage) + box * kBBoxBytes, b_map, b_col + box * kBoxN,
                  k_tile * kBK, ring.full(write.stage));
    }
  }
}

// A stacked pair's producer when A's map has boxes of half a tile (kStackedOddRowSide): A's tile
// in two loads of kBM / 2 rows, B's boxes shared as in produce().
template <int kBM, int kBoxes, class Storage>
__device__ __forceinline__ void produce_stacked_in_halves(
    StageRing<Storage> const& ring, CUtensorMap const* a_map, CUtensorMap const* b_map, int a_row,
    int b_col, int k_begin, int k_end, unsigned rank,
    PipelineState<StageRing<Storage>::kStages>& write) {
  constexpr int kHalfRows = kBM / 2;
  static_assert(kHalfRows % 8 == 0, "each half of A's tile is whole 8-row swizzle atoms");
  for (int k_tile = k_begin; k_tile < k_end; ++k_tile, write.advance()) {
    mbarrier_wait(ring.empty(write.stage), write.phase ^ 1);
    mbarrier_arrive_expect_bytes(ring.full(write.stage), StageRing<Storage>::kStageBytes);
    for (int half = 0; half < 2; ++half) {
      tma_load_2d(ring.a_tile(write.stage) + half * kHalfRows * kBK * 2, a_map, k_tile * kBK,
                  a_row + half * kHalfRows, ring.full(write.stage));
    }
    for (int box = static_cast<int>(rank); box < kBoxes; box += kClusterSize) {
      tma_load_2d_multicast(ring.b_tile(write.stage) + box * kBBoxBytes, b_map, b_col + box * kBoxN,
                            k_tile * kBK, ring.full(write.stage), (1u << kClusterSize) - 1);
    }
  }
}

// The block tile (tile_m, tile_n) of this block for cluster tile `tile`, in groups of kGroupM tile
// rows (step 13): stacked pairs count cluster tiles two tile rows tall, side-by-side pairs two
// tile columns wide. kStackedOddRowSide: the stacked pairs of the first tiles_m / 2 x 2 tile rows
// in that order, then, where tiles_m is odd, the last tile row in side-by-side pairs, left to
// right; `side_by_side`, where given, says which of the two this cluster tile is.
template <Pairing kPairing>
__device__ __forceinline__ void pair_tile(int tile, int tiles_m, int tiles_n, unsigned rank,
                                          int& tile_m, int& tile_n, bool* side_by_side = nullptr) {
  if constexpr (kPairing == Pairing::kStackedOddRowSide) {
    int const pair_rows = tiles_m / kClusterSize;
    int const stacked_tiles = pair_rows * tiles_n;
    bool const in_odd_row = tile >= stacked_tiles;
    if (side_by_side != nullptr) *side_by_side = in_odd_row;
    if (in_odd_row) {
      tile_m = tiles_m - 1;
      tile_n = (tile - stacked_tiles) * kClusterSize + static_cast<int>(rank);
    } else {
      int pair_m = 0;
      gemm::grouped_tile(tile, pair_rows, tiles_n, kGroupM, pair_m, tile_n);
      tile_m = pair_m * kClusterSize + static_cast<int>(rank);
    }
  } else if constexpr (kPairing == Pairing::kStacked) {
    int pair_m = 0;
    gemm::grouped_tile(tile, gemm::ceil_div(tiles_m, kClusterSize), tiles_n, kGroupM, pair_m,
                       tile_n);
    tile_m = pair_m * kClusterSize + static_cast<int>(rank);
  } else {
    int pair_n = 0;
    gemm::grouped_tile(tile, tiles_m, gemm::ceil_div(tiles_n, kClusterSize), kGroupM, tile_m,
                       pair_n);
    tile_n = pair_n * kClusterSize + static_cast<int>(rank);
  }
}

// --- the tile -----------------------------------------------------------------------------------

// Everything that follows from the tile height kBM and the number of consumers (each 64 columns;
// one consumer from step 34 on).
template <int kBM, int kConsumers>
struct Tile {
  static constexpr int kBN = 64 * kConsumers;  // a block's columns: one box of B per consumer
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // setmaxnreg: what the producer gives back goes to the consumers, within the launch allocation
  // (128 x 40 + 256 x 232 = 64,512 of 384 x 168; 128 x 40 + 384 x 152 = 63,488 of 512 x 128;
  // one consumer, step 34: 128 x 40 + 128 x 232 = 34,816 of 256 x 256).
  static constexpr int kConsumerRegisters = kConsumers <= 2 ? 232 : 152;
  struct Stage {
    alignas(1024) bf16 a[kBM * kBK];  // a multiple of 1024 bytes: kBM % 8 == 0
    alignas(1024) bf16 b[kBK * kBN];
  };
  // Each consumer stages C in two buffers of kGroupRows rows: it fills one while TMA still reads
  // the other.
  static constexpr int kStagingBytes = kConsumers * 2 * kGroupRows * kBoxN * 2;
  static constexpr int kStages =
      std::min<int>(6, (kMaxSharedBytes - 2048 - kStagingBytes) / static_cast<int>(sizeof(Stage)));
  struct SharedStorage {
    Stage stages[kStages];
    alignas(1024) bf16 staging[kConsumers][2][kGroupRows * kBoxN];
    std::uint64_t full[kStages];
    std::uint64_t empty[kStages];
  };
  static constexpr int kSharedBytes = shared_storage_bytes<SharedStorage>();
  static_assert(kBM % kPieceRows == 0 && kBM >= 64 && kBM <= 256,
                "wgmma N (here kBM): a multiple of 16 from 64 to 256");
  static_assert(kSharedBytes <= kMaxSharedBytes, "stages and staging must fit shared memory");
  static_assert(kConsumers >= 1 && kConsumers <= 3, "one to three consumer warpgroups");
  static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
                "the register budgets must fit what the block is given at launch");
};

// --- the kernel ---------------------------------------------------------------------------------

// How the kernel opens and closes its cluster: start() runs in every thread once thread 0 has
// initialised the mbarriers, producer_done() in the producer thread after its last load, end() in
// every thread before it exits. The default: a full cluster barrier, with release and acquire
// ordering, at both ends, as step 21 teaches. Step 33 (steps/33_relaxed_cluster_sync/) teaches
// what each end must order, and a lighter one.
struct ReleaseAcquireClusterSync {
  __device__ static void start() { cluster_sync(); }
  template <class Ring, int kStages>
  __device__ static void producer_done(Ring const&, PipelineState<kStages>) {}
  __device__ static void end() { cluster_sync(); }
};

// Where a consumer's part of C goes: its tile's 64 columns from first_col and kBM rows from
// first_row, held as C^T (step 26), and what the epilogue needs to store them.
struct OutputTile {
  bf16* C;
  int ldc;
  int m;
  int n;
  float alpha;
  float beta;
  int first_row;
  int first_col;
};

// A consumer warpgroup's slice of a split tile (step 25): its partial sums' slot, slice 0's slot
// of the same tile, block and consumer (the others follow slot_stride apart), the tile's counter
// of finished slices, and the warpgroup's shared int and named barrier.
struct TailSlice {
  float* partials;
  std::size_t own_slot;
  std::size_t first_slot;
  std::size_t slot_stride;
  int splits;
  int index;  // which slice of its tile: 0 .. splits - 1
  int* counter;
  int* last_slice;
  int barrier_id;
};

// How the slices of a split tile hand over. finish() runs in every consumer warpgroup that has
// computed a slice, with the slice's partial sums in acc; it returns true where that warpgroup is
// to store the whole tile next (acc then holding the tile's sums), false where it has nothing
// more to do for this tile. The default is step 25's: the slice that finishes last adds up every
// slice. waits_for_every_slice(splits): whether, for tiles cut into `splits` slices, a slice waits
// for the others, which needs every cluster of the grid resident at once (step 35,
// steps/35_split_shares/, teaches a hand-over that does).
struct LastSliceHandOver {
  __host__ __device__ static constexpr bool waits_for_every_slice(int) { return false; }
  template <int kFloats>
  __device__ static bool finish(TailSlice const& slice, OutputTile const&, float (&acc)[kFloats]) {
    return reduce_tail_slices<kFloats>(slice.partials, slice.own_slot, slice.first_slot,
                                       slice.slot_stride, slice.splits, slice.counter,
                                       *slice.last_slice, slice.barrier_id, acc);
  }
};

// Whether a hand-over sets every counter it used back to 0 before its kernel ends (its
// kLeavesCountersAtZero; step 36), so that the counters can outlive the call.
template <class SplitHandOver>
constexpr bool leaves_counters_at_zero() {
  if constexpr (requires { SplitHandOver::kLeavesCountersAtZero; }) {
    return SplitHandOver::kLeavesCountersAtZero;
  } else {
    return false;
  }
}

// How a consumer warpgroup learns which consumer it is, and issues the wgmma of one k tile.
// consumer_index(warpgroup): 0 .. kConsumers - 1, from the warpgroup's index in the block (the
// producer is warpgroup 0). k_tile(acc, a_stage, b_stage, consumer): the kBK / kWgmmaK wgmma of
// the stage at those shared addresses, into acc. The default is step 27's: the index computed in
// every thread, and both descriptors built for every wgmma. Step 41
// (steps/41_bf16_uniform_descriptors/) teaches what that costs in the k loop, and a cheaper way.
struct DescriptorsPerWgmma {
  __device__ static int consumer_index(int warpgroup) { return warpgroup - 1; }
  template <int kBM>
  __device__ static void k_tile(float (&acc)[kBM / 2], std::uint32_t a_stage, std::uint32_t b_stage,
                                int consumer) {
#pragma unroll
    for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
      wgmma_bf16<kBM>(acc, b_box_descriptor(b_stage, consumer, kk), a_tile_descriptor(a_stage, kk));
    }
  }
};

// How the epilogue reads C where beta != 0. init() runs in thread 0 before the barriers are
// fenced; prefetch() in every thread of a consumer once it has committed the first k tile of a
// whole tile; store() writes the consumer's part of the tile. The default is
// step 24's: each thread loads its elements of C from global memory as it scales them. Step 45
// (steps/45_c_by_tma/) teaches loading C's pieces by TMA into the staging buffers instead.
struct ElementLoadsOfC {
  __device__ static void init() {}
  template <int kBM, Epilogue kEpilogue>
  __device__ static void prefetch(CUtensorMap const*, bf16 (&)[2][kGroupRows * kBoxN], int, int,
                                  float, int, int) {}
  template <int kBM, Epilogue kEpilogue>
  __device__ static void store(CUtensorMap const* c_map, bf16 (&staging)[2][kGroupRows * kBoxN],
                               int& groups, int consumer, bf16* C, int ldc, int m, int n,
                               float alpha, float beta, int first_row, int first_col,
                               float const (&acc)[kBM / 2], bool /*prefetched*/) {
    store_transposed_tile<kBM, kEpilogue>(c_map, staging, groups, consumer, C, ldc, m, n, alpha,
                                          beta, first_row, first_col, acc);
  }
};

template <int kBM, int kConsumers, Pairing kPairing, ConsumerWork kWork, Epilogue kEpilogue,
          class ClusterSync, class SplitHandOver, class WgmmaIssue, class CSource>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(128 * (1 + kConsumers), 1)
    pair_orientation_kernel(const __grid_constant__ CUtensorMap a_map,
                            const __grid_constant__ CUtensorMap b_map,
                            const __grid_constant__ CUtensorMap c_map, int m, int n, float alpha,
                            float beta, bf16* __restrict__ C, int ldc, Schedule const schedule,
                            float* __restrict__ partials, int* __restrict__ counters) {
  using T = Tile<kBM, kConsumers>;
  constexpr int kStages = T::kStages;
  constexpr int kBN = T::kBN;
  extern __shared__ unsigned char shared_bytes[];
  auto& shared = shared_storage<typename T::SharedStorage>(shared_bytes);
  StageRing<typename T::SharedStorage> const ring{shared};
  unsigned const rank = cluster_block_rank();
  int const tiles_m = gemm::ceil_div(m, kBM);
  int const tiles_n = gemm::ceil_div(n, kBN);
  int const cluster = blockIdx.x / kClusterSize;
  int const warpgroup = threadIdx.x / 128;
  auto tile_of = [&](int tile, int& tile_m, int& tile_n) {
    pair_tile<kPairing>(tile, tiles_m, tiles_n, rank, tile_m, tile_n);
  };

  // Tiles in turn: one consumer per block reads each stage, and consumer c arrives on
  // turn_taken[c] once it has waited for the last stage of its tile (see the consumers below).
  constexpr bool kInTurn = kWork == ConsumerWork::kTilesInTurn;
  static_assert(!kInTurn || kConsumers == 2, "tiles in turn: two consumers");
  constexpr int kReadersPerStage = kInTurn ? 1 : kConsumers;
  __shared__ alignas(8) std::uint64_t turn_taken[2];
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      mbarrier_init(ring.full(stage), 1);
      mbarrier_init(ring.empty(stage), 4 * kReadersPerStage * kClusterSize);
    }
    if constexpr (kInTurn) {
      for (int c = 0; c < 2; ++c)
        mbarrier_init(gemm::shared_address(&turn_taken[c]), 1);
    }
    CSource::init();
    fence_barrier_init();
  }
  ClusterSync::start();

  if (warpgroup == 0) {
    release_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      PipelineState<kStages> write;
      Unit unit{};
      for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
        int tile_m = 0;
        int tile_n = 0;
        bool side_by_side = kPairing == Pairing::kSideBySide;
        pair_tile<kPairing>(unit.tile, tiles_m, tiles_n, rank, tile_m, tile_n, &side_by_side);
        // Stacked: A's box is the whole tile, kBM rows, and B's boxes are shared (step 21).
        // Side by side: A's box is half the tile, shared, and B's boxes are this block's own.
        // kStackedOddRowSide: A's box is half the tile for both kinds of pair.
        if constexpr (kPairing == Pairing::kStackedOddRowSide) {
          if (side_by_side) {
            produce_side_by_side<kBM, kConsumers>(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN,
                                                  unit.k_begin, unit.k_end, rank, write);
          } else {
            produce_stacked_in_halves<kBM, kConsumers>(ring, &a_map, &b_map, tile_m * kBM,
                                                       tile_n * kBN, unit.k_begin, unit.k_end, rank,
                                                       write);
          }
        } else if constexpr (kPairing == Pairing::kStacked) {
          produce<kConsumers, kClusterSize>(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN,
                                            unit.k_begin, unit.k_end, rank, write);
        } else {
          produce_side_by_side<kBM, kConsumers>(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN,
                                                unit.k_begin, unit.k_end, rank, write);
        }
      }
      ClusterSync::producer_done(ring, write);
    }
  } else {
    claim_registers<T::kConsumerRegisters>();
    int const consumer = WgmmaIssue::consumer_index(warpgroup);
    __shared__ int last_slice[kConsumers];  // the leader's count, for its warpgroup
    // The slice of a split tile (step 25) that holds `part` of this block's tile: this consumer's
    // 64 columns, or box `part` of a tile in turn. Slots and counters go per part; a tile's slices
    // sit kClusterSize x kConsumers slots apart, and slice j of tail tile r is cluster r x splits
    // + j's (unit_of).
    auto const tail_slice = [&](Unit const& unit, int part) {
      std::size_t const slot_stride = kClusterSize * kConsumers;
      std::size_t const own_slot = cluster * slot_stride + rank * kConsumers + part;
      std::size_t const first_slot =
          unit.tail_tile * schedule.splits * slot_stride + rank * kConsumers + part;
      int* const counter = counters + (unit.tail_tile * kClusterSize + rank) * kConsumers + part;
      return TailSlice{partials,        own_slot,
                       first_slot,      slot_stride,
                       schedule.splits, cluster % schedule.splits,
                       counter,         &last_slice[consumer],
                       1 + consumer};
    };
    PipelineState<kStages> read;
    PipelineState<kStages> release;
    int groups = 0;  // groups of C rows this consumer has staged so far: picks the buffer
    Unit unit{};
    if constexpr (kInTurn) {
      // Tiles in turn: consumer c takes the cluster's units c, c + 2, c + 4, ... and computes the
      // whole block tile (both boxes of B, one accumulator array per box); it passes over the
      // stages of the other consumer's units. The full barriers are waited on in the order the
      // producer fills them: before its first stage of a unit, a consumer waits until the other
      // has waited for the last stage of the unit before (turn_taken). Without that, a consumer
      // done early could wait on a stage's barrier a whole ring turn ahead of the other, and
      // its parity alone cannot tell those two phases apart.
      bool const leader = threadIdx.x % 128 == 0;
      int turns_seen = 0;
      for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
        if (index % 2 != consumer) {
          for (int k_tile = unit.k_begin; k_tile < unit.k_end; ++k_tile) {
            read.advance();
            release.advance();
          }
          continue;
        }
        if (index > 0) {
          mbarrier_wait(gemm::shared_address(&turn_taken[1 - consumer]), turns_seen % 2);
          ++turns_seen;
        }
        int tile_m = 0;
        int tile_n = 0;
        tile_of(unit.tile, tile_m, tile_n);
        float acc0[kBM / 2];  // box 0: the tile's first 64 columns, as C^T
        float acc1[kBM / 2];  // box 1: the next 64
#pragma unroll
        for (int i = 0; i < kBM / 2; ++i) {
          acc0[i] = 0.0f;
          acc1[i] = 0.0f;
        }
        int k_tile = unit.k_begin;
        consume_k_range<kClusterSize>(
            ring, unit.k_begin, unit.k_end, read, release, [&](int stage) {
              if (++k_tile == unit.k_end && leader) {
                mbarrier_arrive(gemm::shared_address(&turn_taken[consumer]));
              }
              WgmmaIssue::template k_tile<kBM>(acc0, ring.a_tile(stage), ring.b_tile(stage), 0);
              WgmmaIssue::template k_tile<kBM>(acc1, ring.a_tile(stage), ring.b_tile(stage), 1);
            });
        // Each box as one consumer's columns were stored before: a slice hands over with slots
        // and counters per box (step 25's were per consumer), and a whole tile, or the slice
        // that finishes it, stores. C is not asked for ahead (step 45): it is loaded as it is
        // stored.
        auto const finish_box = [&](float(&acc)[kBM / 2], int box) {
          int const first_col = tile_n * kBN + box * kBoxN;
          if (unit.tail_tile >= 0) {
            OutputTile const output{C, ldc, m, n, alpha, beta, tile_m * kBM, first_col};
            if (!SplitHandOver::template finish<kBM / 2>(tail_slice(unit, box), output, acc)) {
              return;
            }
          }
          CSource::template store<kBM, kEpilogue>(&c_map, shared.staging[consumer], groups,
                                                  consumer, C, ldc, m, n, alpha, beta, tile_m * kBM,
                                                  first_col, acc, false);
        };
        finish_box(acc0, 0);
        finish_box(acc1, 1);
      }
    } else {
      for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
        // acc holds C^T: this consumer's 64 columns of C as wgmma's M, the tile's kBM rows as N.
        float acc[kBM / 2];
#pragma unroll
        for (int i = 0; i < kBM / 2; ++i)
          acc[i] = 0.0f;
        bool const whole_tile = unit.tail_tile < 0;  // a whole tile always reaches its epilogue
        consume_k_range<kClusterSize>(
            ring, unit.k_begin, unit.k_end, read, release,
            [&](int stage) {
              WgmmaIssue::template k_tile<kBM>(acc, ring.a_tile(stage), ring.b_tile(stage),
                                               consumer);
            },
            [&] {
              if (whole_tile) {
                int tile_m = 0;
                int tile_n = 0;
                tile_of(unit.tile, tile_m, tile_n);
                CSource::template prefetch<kBM, kEpilogue>(&c_map, shared.staging[consumer], groups,
                                                           consumer, beta, tile_m * kBM,
                                                           tile_n * kBN + consumer * kBoxN);
              }
            });
        // Where the tile lies is worked out after its k loop, and in the prefetch above, which
        // needs it early, rather than held across the loop. Held there, the position of
        // kStackedOddRowSide's tiles led ptxas to keep the whole schedule, and with it each k
        // tile's wgmma descriptors, in vector registers instead of uniform ones (the SASS and
        // its cost: docs/results/notebooks/48_tiles_in_turn.md).
        int tile_m = 0;
        int tile_n = 0;
        tile_of(unit.tile, tile_m, tile_n);
        if (unit.tail_tile >= 0) {
          OutputTile const output{
              C, ldc, m, n, alpha, beta, tile_m * kBM, tile_n * kBN + consumer * kBoxN};
          if (!SplitHandOver::template finish<kBM / 2>(tail_slice(unit, consumer), output, acc)) {
            continue;  // nothing more for this warpgroup to do on the tile
          }
        }
        CSource::template store<kBM, kEpilogue>(&c_map, shared.staging[consumer], groups, consumer,
                                                C, ldc, m, n, alpha, beta, tile_m * kBM,
                                                tile_n * kBN + consumer * kBoxN, acc, whole_tile);
      }
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && threadIdx.x % 128 == 0) bulk_wait_group<0>();
  }
  ClusterSync::end();
}

// --- the plan: tile height, width and pairing ------------------------------------------------

// A block tile: `height` rows (wgmma's N) by 64 columns per consumer, how its pair sits and how
// its consumers share it (tiles in turn: two consumers, 128 columns, each tile computed by one).
struct TileShape {
  int height;
  int consumers;
  Pairing pairing;
  ConsumerWork work = ConsumerWork::kColumnsOfOneTile;
};

// The cluster tiles of `shape`: a stacked pair covers two tile rows, a side-by-side pair two tile
// columns; kStackedOddRowSide pairs an odd last tile row side by side.
inline long long cluster_tiles(int m, int n, TileShape shape) {
  long long const tiles_m = gemm::ceil_div(m, shape.height);
  long long const tiles_n = gemm::ceil_div(n, 64 * shape.consumers);
  switch (shape.pairing) {
    case Pairing::kStacked:
      return gemm::ceil_div(tiles_m, kClusterSize) * tiles_n;
    case Pairing::kSideBySide:
      return tiles_m * gemm::ceil_div(tiles_n, kClusterSize);
    case Pairing::kStackedOddRowSide:
      return tiles_m / kClusterSize * tiles_n +
             tiles_m % kClusterSize * gemm::ceil_div(tiles_n, kClusterSize);
  }
  return 0;
}

// The schedule (step 25) of the cluster tiles.
inline Schedule schedule_for(int m, int n, int k, TileShape shape, int clusters) {
  return make_schedule(cluster_tiles(m, n, shape), gemm::ceil_div(k, kBK), clusters);
}

// Step 26's model over a list of tiles: rounds times the tile's area, each side with an overhead
// worth 32 rows or columns. Of two plans that cost the same, the model keeps the earlier one.
// `allowed(shape)` leaves tiles out of the comparison (step 34 keeps one-consumer tiles to one
// round); the first entry of the list should always be allowed.
template <std::size_t kCount, class Allowed>
TileShape choose_tile(TileShape const (&shapes)[kCount], int m, int n, int k, int clusters,
                      Allowed&& allowed) {
  TileShape best = shapes[0];
  double best_cost = -1.0;
  for (TileShape const shape : shapes) {
    if (!allowed(shape)) continue;
    double const cost = rounds(schedule_for(m, n, k, shape, clusters)) * (shape.height + 32) *
                        (64 * shape.consumers + 32);
    if (best_cost < 0.0 || cost < best_cost) {
      best_cost = cost;
      best = shape;
    }
  }
  return best;
}

// The same over every tile of the list.
template <std::size_t kCount>
TileShape choose_tile(TileShape const (&shapes)[kCount], int m, int n, int k, int clusters) {
  return choose_tile(shapes, m, n, k, clusters, [](TileShape) { return true; });
}

// How a call treats the row pitch of its operands: whether A is copied to a 128-byte pitch
// (step 22), and the L2 promotion of each tensor map. Step 27's rule, kept by steps 32-36: A is
// copied when TMA cannot read it, or its pitch is off and n >= 4096; every map promotes 256 bytes.
struct CopyOffPitchA {
  static bool copy_a(bf16 const* A, int lda, int n, TileShape /*shape*/) {
    return gemm::should_copy_a(A, lda, n);
  }
  static CUtensorMapL2promotion l2_promotion(long long /*pitch_bytes*/) {
    return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  }
};

// --- the host -----------------------------------------------------------------------------------

template <int kBM, int kConsumers, Pairing kPairing, ConsumerWork kWork, Epilogue kEpilogue,
          class ClusterSync, class SplitHandOver, class WgmmaIssue, class CSource>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float beta, bf16* C, int ldc, cudaStream_t stream) {
  using T = Tile<kBM, kConsumers>;
  constexpr auto kernel = pair_orientation_kernel<kBM, kConsumers, kPairing, kWork, kEpilogue,
                                                  ClusterSync, SplitHandOver, WgmmaIssue, CSource>;
  gemm::opt_in_shared_memory<kernel>(T::kSharedBytes);
  check_register_budgets<kernel>(T::kThreads, kProducerRegisters, T::kConsumerRegisters,
                                 kConsumers);
  static int const resident = resident_clusters(kernel, kClusterSize, T::kThreads, T::kSharedBytes);
  Schedule const schedule = schedule_for(m, n, k, {kBM, kConsumers, kPairing}, resident);
  // The split's workspace (step 25): one slot of partial sums per cluster, block and consumer
  // (box, for tiles in turn), and a counter per tail tile, block and consumer (box), cleared on the
  // stream before the kernel. A hand-over that leaves its counters at zero keeps both on the stream
  // instead (step 36).
  std::unique_ptr<gemm::StreamWorkspace> workspace;
  float* partials = nullptr;
  int* counters = nullptr;
  if (schedule.tail_tiles > 0) {
    std::size_t const slots =
        static_cast<std::size_t>(schedule.clusters) * kClusterSize * kConsumers;
    std::size_t const partial_bytes = slots * 128 * (kBM / 2) * sizeof(float);
    std::size_t const counter_bytes =
        static_cast<std::size_t>(schedule.tail_tiles) * kClusterSize * kConsumers * sizeof(int);
    if constexpr (leaves_counters_at_zero<SplitHandOver>()) {
      gemm::LastingWorkspace const lasting =
          gemm::lasting_workspace(stream, partial_bytes, counter_bytes);
      partials = static_cast<float*>(lasting.scratch);
      counters = static_cast<int*>(lasting.zeroed);
    } else {
      workspace = std::make_unique<gemm::StreamWorkspace>(partial_bytes + counter_bytes, stream);
      partials = workspace->get<float>();
      counters = reinterpret_cast<int*>(workspace->get<unsigned char>() + partial_bytes);
      gemm::check_cuda(cudaMemsetAsync(counters, 0, counter_bytes, stream), "cudaMemsetAsync");
    }
  }
  unsigned const blocks = static_cast<unsigned>(schedule.clusters * kClusterSize);
  if (schedule.tail_tiles > 0 && SplitHandOver::waits_for_every_slice(schedule.splits)) {
    // The slices wait for each other: a cooperative launch, which the driver refuses (an error,
    // not a hang) unless every block of the grid can be resident at once (taught in step 35).
    gemm::launch_cooperative(kernel, blocks, T::kThreads, T::kSharedBytes, stream, a_map, b_map,
                             c_map, m, n, alpha, beta, C, ldc, schedule, partials, counters);
    return;
  }
  kernel<<<blocks, T::kThreads, T::kSharedBytes, stream>>>(a_map, b_map, c_map, m, n, alpha, beta,
                                                           C, ldc, schedule, partials, counters);
}

// The kernel of tile kBM x kConsumers, paired kPairing, its consumers sharing it as kWork says,
// with the epilogue `epilogue`.
template <int kBM, int kConsumers, Pairing kPairing, ConsumerWork kWork, class ClusterSync,
          class SplitHandOver, class WgmmaIssue, class CSource>
void launch_shape(Epilogue epilogue, CUtensorMap const& a_map, CUtensorMap const& b_map,
                  CUtensorMap const& c_map, int m, int n, int k, float alpha, float beta, bf16* C,
                  int ldc, cudaStream_t stream) {
  gemm::dispatch_value<Epilogue::kTmaStore, Epilogue::kPairStores, Epilogue::kSingleStores>(
      epilogue, [&](auto kEpilogue) {
        launch<kBM, kConsumers, kPairing, kWork, kEpilogue(), ClusterSync, SplitHandOver,
               WgmmaIssue, CSource>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream);
      });
}

// The GEMM with block tiles of `shape`, one of the list kShapes: one launch is compiled per entry
// and epilogue. ClusterSync: how the kernel opens and closes its cluster (see the kernel);
// SplitHandOver: how the slices of a split tile hand over (see LastSliceHandOver); PitchRule:
// what the call does about a row pitch that is not a multiple of 128 bytes (see CopyOffPitchA);
// WgmmaIssue: how a consumer issues a k tile's wgmma (see DescriptorsPerWgmma); CSource: how the
// epilogue reads C where beta != 0 (see ElementLoadsOfC).
template <auto const& kShapes, class ClusterSync = ReleaseAcquireClusterSync,
          class SplitHandOver = LastSliceHandOver, class PitchRule = CopyOffPitchA,
          class WgmmaIssue = DescriptorsPerWgmma, class CSource = ElementLoadsOfC>
void gemm_with_tile(TileShape shape, int m, int n, int k, float alpha, bf16 const* A, int lda,
                    bf16 const* B, int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  // A copied when TMA cannot read it or when the rule says so, B only when TMA cannot read it.
  gemm::AlignedOperand const a(A, m, k, lda, PitchRule::copy_a(A, lda, n, shape), stream);
  gemm::AlignedOperand const b(B, k, n, ldb, gemm::must_copy(B, ldb), stream);
  // A's box is a whole block tile (shape.height rows, at most 256: TMA's limit), or half of one
  // where a pair shares A (side by side, and the odd row of kStackedOddRowSide); C's a piece.
  int const a_box_rows =
      shape.pairing == Pairing::kStacked ? shape.height : shape.height / kClusterSize;
  CUtensorMap const a_map = gemm::make_bf16_tensor_map(a.data(), m, k, a.ld(), a_box_rows, kBK,
                                                       PitchRule::l2_promotion(a.ld() * 2));
  CUtensorMap const b_map = gemm::make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN,
                                                       PitchRule::l2_promotion(b.ld() * 2));
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};  // unused by the direct stores
  // TMA stores need C's rows 16-byte aligned, and n a multiple of 8 (step 24).
  if (gemm::rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) {
    epilogue = Epilogue::kTmaStore;
    c_map = gemm::make_bf16_tensor_map(C, m, n, ldc, kPieceRows, kBoxN,
                                       PitchRule::l2_promotion(ldc * 2LL));
  } else if (gemm::rows_are_aligned<4>(C, ldc)) {
    epilogue = Epilogue::kPairStores;
  }
  // One launch per entry of kShapes and epilogue; the one that matches runs.
  auto const launch_matching = [&]<std::size_t... kIndex>(std::index_sequence<kIndex...>) {
    (...,
     (shape.height == kShapes[kIndex].height && shape.consumers == kShapes[kIndex].consumers &&
              shape.pairing == kShapes[kIndex].pairing && shape.work == kShapes[kIndex].work
          ? launch_shape<kShapes[kIndex].height, kShapes[kIndex].consumers, kShapes[kIndex].pairing,
                         kShapes[kIndex].work, ClusterSync, SplitHandOver, WgmmaIssue, CSource>(
                epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream)
          : void()));
  };
  launch_matching(std::make_index_sequence<std::size(kShapes)>{});
}

}  // namespace gemm::hopper::pairs
