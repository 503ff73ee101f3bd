// Exercise: step 48, the consumers take tiles in turn. One TODO block, in tiles_in_turn_pay: the
// rule that decides where two consumers take the block's tiles in turn (ConsumerWork::kTilesInTurn)
// and where the plan runs as step 47 ran it. The placeholder always returns false, which is step
// 47's call, so C is right either way. Write the TODO, then time build/exercise_48_tiles_in_turn
// against build/48_tiles_in_turn at 8192x8192x1024, 8192x6144x4096 and 4096 (the README's exercise
// 1).
//
// Needs sm_90a (built with -gencode=arch=compute_90a,code=sm_90a; meson.build does that).
#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <stdexcept>

#include "cuda_check.h"
#include "gemm.h"
#include "launch.h"
#include "mbarrier.cuh"
#include "pair_orientation.cuh"
#include "tma.cuh"
#include "tma_store.cuh"

namespace {

using namespace gemm::hopper;
using namespace gemm::hopper::pairs;

// The count of finished slices, read with acquire ordering at GPU scope: once it shows every
// slice, the sums those slices stored before counting are visible to what this thread reads next
// (and, after a named barrier, to its warpgroup).
__device__ __forceinline__ int load_acquire(int const* counter) {
  int value = 0;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(value) : "l"(counter) : "memory");
  return value;
}

// alpha * sum + beta * C as bf16 at (row, col), inside C only.
__device__ __forceinline__ void store_element(OutputTile const& out, int row, int col, float sum) {
  if (row < out.m && col < out.n) {
    out.C[static_cast<std::size_t>(row) * out.ldc + col] = __float2bfloat16_rn(
        scaled(out.C, out.ldc, row, col, out.m, out.n, sum, out.alpha, out.beta));
  }
}

// Step 36's hand-over, unchanged: step 35's, which leaves every counter it used at zero. Tiles cut
// into kFewestSlices slices or more are finished in shares: every slice stores its partial sums,
// counts itself, waits for the count to reach `splits`, then finishes entries [begin, end) of the
// tile. An entry is one float4 of a slot (step 25's layout: float4 i of thread t at i x 128 + t),
// four accumulators of one thread: floats 4 i .. 4 i + 3 of thread t are C's rows first_row + 8 i +
// 2 (t % 4) and + 1, in columns first_col + 16 (t / 32) + (t % 32) / 4 and + 8 (step 26's layout
// of C^T). Tiles cut into fewer slices keep step 25's hand-over, whose last slice resets the count.
struct ZeroingHandOver {
  // Every counter is 0 again when the kernel ends: the call keeps its workspace on the stream.
  static constexpr bool kLeavesCountersAtZero = true;
  // Shares cost every slice a wait for the last one and C stored two bytes at a time; they save
  // the last slice reading splits - 1 slots alone. On the H100 they lost at 2 slices, came out
  // level at 4 and won from 8 (step 35).
  static constexpr int kFewestSlices = 8;
  __host__ __device__ static constexpr bool waits_for_every_slice(int splits) {
    return splits >= kFewestSlices;
  }

  template <int kFloats>
  __device__ static bool finish(TailSlice const& slice, OutputTile const& out,
                                float (&acc)[kFloats]) {
    if (!waits_for_every_slice(slice.splits)) {
      // Step 25's hand-over; the last slice sets the counter back to 0 once it has counted.
      return reduce_tail_slices<kFloats, /*kResetCounter=*/true>(
          slice.partials, slice.own_slot, slice.first_slot, slice.slot_stride, slice.splits,
          slice.counter, *slice.last_slice, slice.barrier_id, acc);
    }
    int const thread = threadIdx.x % 128;
    store_partial_sums<kFloats>(slice.partials, slice.own_slot, acc);  // as step 25's slices do
    named_barrier_sync(slice.barrier_id, 128);
    if (thread == 0) {
      count_finished_slice(slice.counter);
      while (load_acquire(slice.counter) < slice.splits) {
      }
      // Counted a second time (nothing to order: a plain atomic), once this slice has seen every
      // first count: the last of the second counts is the counter's last use in this kernel and
      // sets it back to 0. A slice still waiting sees splits or more either way.
      if (atomicAdd(slice.counter, 1) == 2 * slice.splits - 1) atomicExch(slice.counter, 0);
    }
    named_barrier_sync(slice.barrier_id, 128);
    // This slice's share: entries [begin, end) of the tile's 128 x kFloats / 4.
    constexpr int kEntries = 128 * kFloats / 4;
    int const begin = slice.index * kEntries / slice.splits;
    int const end = (slice.index + 1) * kEntries / slice.splits;
    float4 const* const first = partial_slot<kFloats>(slice.partials, slice.first_slot);
    std::size_t const slice_stride = slice.slot_stride * 128 * (kFloats / 4);  // in float4s
    for (int entry = begin + thread; entry < end; entry += 128) {
      // Slice 0's sums, then each next slice's added in order: the sum step 25 adds up.
      float4 sum = __ldcg(first + entry);
#pragma unroll 8
      for (int j = 1; j < slice.splits; ++j) {
        float4 const part = __ldcg(first + j * slice_stride + entry);
        sum.x += part.x;
        sum.y += part.y;
        sum.z += part.z;
        sum.w += part.w;
      }
      int const i = entry / 128;
      int const owner = entry % 128;
      int const row = out.first_row + 8 * i + 2 * (owner % 4);
      int const col = out.first_col + 16 * (owner / 32) + (owner % 32) / 4;
      store_element(out, row, col, sum.x);
      store_element(out, row + 1, col, sum.y);
      store_element(out, row, col + 8, sum.z);
      store_element(out, row + 1, col + 8, sum.w);
    }
    return false;  // the shares are stored: nothing is left for the whole-tile epilogue
  }
};

// Step 37's rule for a row pitch that is not a multiple of 128 bytes, unchanged but for the
// pairing's name.
struct PromotionByPitch {
  // 256 bytes where the rows start on 128-byte lines, as every step before; 128 (a line) where a
  // box row straddles two. The H100 measured 64, 128 and no promotion alike there (see the README).
  static CUtensorMapL2promotion l2_promotion(long long pitch_bytes) {
    return pitch_bytes % 128 == 0 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                  : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  }
  // Step 22's copy (n >= 4096: the copy is an eighth of the work or less), now only for a block
  // that reads A in 256-row boxes: per k tile it asks the L2 for 256 rows of A and 64 columns of
  // B (its half of the pair's B), and there the copy still won with 128-byte promotion; with every
  // shorter box it lost or tied.
  static bool copy_a(bf16 const* A, int lda, int n, TileShape shape) {
    if (gemm::must_copy(A, lda)) return true;
    // (This step's stacked 256-row tiles read A's 256 rows as two boxes of 128: the same rows per
    // k tile, so the rule treats them as step 45's.)
    bool const stacked = shape.pairing != Pairing::kSideBySide;
    bool const a_box_of_256 = stacked && shape.height == 256;
    return a_box_of_256 && gemm::should_copy_a(A, lda, n);
  }
};

// Step 41's wgmma issue, unchanged: the consumer index read from lane 0 and each k tile's
// descriptors built once (see steps/41_bf16_uniform_descriptors/).
struct UniformDescriptors {
  // Read from lane 0: the same value as warpgroup - 1 in every lane, but now ptxas knows it is.
  __device__ static int consumer_index(int warpgroup) {
    return __shfl_sync(0xffffffffu, warpgroup - 1, 0);
  }
  // The stage's first two descriptors, then a constant per wgmma in the start-address field (units
  // of 16 bytes): the next 16 k are 16 rows of B's box further on (16 x 128 bytes, +128) and 32
  // bytes further along A's rows (+2). The field holds shared addresses up to 256 KB, so the sum
  // stays inside it and never carries into the fields above.
  template <int kBM>
  __device__ static void k_tile(float (&acc)[kBM / 2], std::uint32_t a_stage, std::uint32_t b_stage,
                                int consumer) {
    std::uint64_t const b_first = b_box_descriptor(b_stage, consumer, 0);
    std::uint64_t const a_first = a_tile_descriptor(a_stage, 0);
#pragma unroll
    for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
      wgmma_bf16<kBM>(acc, b_first + kk * (kWgmmaK * 128 / 16), a_first + kk * (kWgmmaK * 2 / 16));
    }
  }
};

// Step 45's epilogue for beta != 0, unchanged: C's pieces loaded by TMA into the staging buffers.
struct TmaLoadsOfC {
  static constexpr int kMostConsumers = 3;

  // One barrier per consumer and staging buffer: a group's loads of C count off on it.
  __device__ static std::uint32_t loaded(int consumer, int buffer) {
    __shared__ alignas(8) std::uint64_t barriers[kMostConsumers][2];
    return gemm::shared_address(&barriers[consumer][buffer]);
  }
  __device__ static void init() {
    for (int consumer = 0; consumer < kMostConsumers; ++consumer) {
      for (int buffer = 0; buffer < 2; ++buffer)
        mbarrier_init(loaded(consumer, buffer), 1);
    }
  }

  // The rows of group `group` of a tile kBM rows tall: kGroupRows, fewer in the last group.
  template <int kBM>
  __device__ static int group_rows(int group) {
    constexpr int kGroups = (kBM + kGroupRows - 1) / kGroupRows;
    return group + 1 < kGroups ? kGroupRows : kBM - (kGroups - 1) * kGroupRows;
  }

  // The leader's loads of group `group` of C into the staging buffer of the consumer's
  // `staged`-th group: one box of kPieceRows x kBoxN per piece, with the map the stores use, so
  // that the buffer holds C in the layout the stores read. TMA zero-fills what lies outside C.
  template <int kBM>
  __device__ static void load_group(CUtensorMap const* c_map,
                                    bf16 (&staging)[2][kGroupRows * kBoxN], int consumer,
                                    int staged, int group, int first_row, int first_col) {
    int const pieces = group_rows<kBM>(group) / kPieceRows;
    std::uint32_t const buffer = gemm::shared_address(staging[staged % 2]);
    std::uint32_t const barrier = loaded(consumer, staged % 2);
    mbarrier_arrive_expect_bytes(barrier, pieces * kPieceBytes);
    for (int piece = 0; piece < pieces; ++piece) {
      tma_load_2d(buffer + piece * kPieceBytes, c_map, first_col,
                  first_row + group * kGroupRows + piece * kPieceRows, barrier);
    }
  }

  // The leader's loads of the tile's first two groups of C, as soon as the last tile's stores
  // have read both staging buffers.
  template <int kBM>
  __device__ static void load_first_groups(CUtensorMap const* c_map,
                                           bf16 (&staging)[2][kGroupRows * kBoxN], int consumer,
                                           int groups, int first_row, int first_col) {
    bulk_wait_group_read<0>();
    load_group<kBM>(c_map, staging, consumer, groups, 0, first_row, first_col);
    load_group<kBM>(c_map, staging, consumer, groups + 1, 1, first_row, first_col);
  }

  // Once the tile's first k tile is committed, the leader asks for the first two groups: the k
  // loop hides the trip to memory.
  template <int kBM, Epilogue kEpilogue>
  __device__ static void prefetch(CUtensorMap const* c_map, bf16 (&staging)[2][kGroupRows * kBoxN],
                                  int groups, int consumer, float beta, int first_row,
                                  int first_col) {
    if constexpr (kEpilogue == Epilogue::kTmaStore) {
      if (beta == 0.0f || threadIdx.x % 128 != 0) return;
      load_first_groups<kBM>(c_map, staging, consumer, groups, first_row, first_col);
    }
  }

  template <int kBM, Epilogue kEpilogue>
  __device__ static void store(CUtensorMap const* c_map, bf16 (&staging)[2][kGroupRows * kBoxN],
                               int& groups, int consumer, bf16* C, int ldc, int m, int n,
                               float alpha, float beta, int first_row, int first_col,
                               float const (&acc)[kBM / 2], bool prefetched) {
    if (kEpilogue != Epilogue::kTmaStore || beta == 0.0f) {
      store_transposed_tile<kBM, kEpilogue>(c_map, staging, groups, consumer, C, ldc, m, n, alpha,
                                            beta, first_row, first_col, acc);
      return;
    }
    constexpr int kGroups = (kBM + kGroupRows - 1) / kGroupRows;
    int const thread = threadIdx.x % 128;
    int const lane = threadIdx.x % 32;
    int const warp = (threadIdx.x / 32) % 4;
    bool const leader = thread == 0;  // issues the loads and the stores
    int const barrier_id = 1 + consumer;
    int const matrix = lane / 8;      // as in store_transposed_tile: this lane addresses row
    int const matrix_row = lane % 8;  // matrix_row of 8-row block jj * 2 + matrix / 2,
    int const chunk = 2 * warp + matrix % 2;  // in the 16-byte chunk of columns 8 chunk .. + 7
    if (!prefetched && leader) {
      // A split tile's last slice: nothing was asked for during its k loop.
      load_first_groups<kBM>(c_map, staging, consumer, groups, first_row, first_col);
    }
#pragma unroll
    for (int group = 0; group < kGroups; ++group, ++groups) {
      int const rows = group_rows<kBM>(group);
      std::uint32_t const buffer = gemm::shared_address(staging[groups % 2]);
      // The buffer's loads are its (groups / 2)-th: their phase has parity (groups / 2) % 2.
      mbarrier_wait(loaded(consumer, groups % 2), (groups / 2) % 2);
#pragma unroll
      for (int jj = 0; jj < kGroupRows / 16; ++jj) {
        if (jj * 16 >= rows) break;
        int const group_row = 16 * jj + 8 * (matrix / 2) + matrix_row;
        std::uint32_t const address = buffer + group_row * 128 + ((chunk ^ (group_row % 8)) * 16);
        std::uint32_t c[4];
        ldmatrix_x4_trans(address, c);  // C's elements where the accumulators' would be stored
        std::uint32_t r[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          int const j = group * (kGroupRows / 8) + jj * 2 + i / 2;  // accumulators' 8-row block
          int const half = i % 2;
          r[i] = packed(scaled_sum(alpha, acc[4 * j + 2 * half], beta, low_half(c[i])),
                        scaled_sum(alpha, acc[4 * j + 2 * half + 1], beta, high_half(c[i])));
        }
        stmatrix_x4_trans(address, r[0], r[1], r[2], r[3]);
      }
      fence_proxy_async_shared();
      named_barrier_sync(barrier_id, 128);
      if (leader) {
        for (int piece = 0; piece < rows / kPieceRows; ++piece) {
          tma_store_2d(c_map, buffer + piece * kPieceBytes, first_col,
                       first_row + group * kGroupRows + piece * kPieceRows);
        }
        bulk_commit_group();
        if (group + 2 < kGroups) {
          // This buffer's next group: once the store just issued has read it.
          bulk_wait_group_read<0>();
          load_group<kBM>(c_map, staging, consumer, groups + 2, group + 2, first_row, first_col);
        }
      }
    }
  }

 private:
  // Loads four 8 x 8 bf16 matrices, transposed: the inverse of stmatrix_x4_trans at the same
  // addresses.
  __device__ static void ldmatrix_x4_trans(std::uint32_t address, std::uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
  }
  // alpha * sum + beta * c rounded as step 24's epilogue rounds it (alpha * sum, then one fused
  // multiply-add), so that C is the same bits.
  __device__ static float scaled_sum(float alpha, float sum, float beta, float c) {
    return __fmaf_rn(beta, c, __fmul_rn(alpha, sum));
  }
  // The bf16 in the low and high half of a register, as floats.
  __device__ static float low_half(std::uint32_t pair) {
    return __uint_as_float(pair << 16);
  }
  __device__ static float high_half(std::uint32_t pair) {
    return __uint_as_float(pair & 0xffff0000u);
  }
};

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

// The plan's tiles: step 45's list, unchanged (step 34's tiles with the short tiles stacked ahead
// of their side-by-side twins). Stacked comes first: of two plans that cost the same, the model
// keeps the first.
constexpr TileShape kPlanShapes[] = {
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
    // Step 42's short tiles stacked, sharing B, ahead of the same tiles side by side below (see
    // stacks_where_it_pays). Where a matrix has one tile row, the stacked pair counts as many
    // cluster tiles as it has block tiles and the side-by-side pair half as many, so the model
    // still picks the side-by-side one.
    {112, 2, Pairing::kStacked},
    {96, 2, Pairing::kStacked},
    {64, 2, Pairing::kStacked},
    // Side by side, two consumers only: such a pair streams B, and the two-consumer tile streams
    // it faster than the three-consumer one (step 27 offered both; the model ranks them by how
    // they fill the rounds, not by how fast they read).
    {128, 2, Pairing::kSideBySide},
    {112, 2, Pairing::kSideBySide},
    {96, 2, Pairing::kSideBySide},
    {64, 2, Pairing::kSideBySide},
    // One consumer: half the columns of the tiles above, so twice as many tiles where a matrix
    // has fewer tiles than there are SMs, and a split of K needed later or not at all.
    {128, 1, Pairing::kSideBySide},
    {64, 1, Pairing::kSideBySide},
};

// The stacked tiles of 128 rows or more that may run as Pairing::kStackedOddRowSide: with A in
// half boxes, and an odd last tile row side by side (the short stacked tiles keep step 43's rule,
// which already weighs their pairs against side-by-side ones).
constexpr bool has_odd_row_twin(TileShape shape) {
  return shape.pairing == Pairing::kStacked && shape.height >= 128;
}

// This step's tiles: two consumers taking tiles of 128 columns in turn, stacked pairs. A consumer
// holds the whole tile, kBM x 128 / 128 threads = kBM accumulators per thread: 192 rows is the
// tallest that leaves it room (256 would be more than the 232 registers a consumer claims).
constexpr TileShape kInTurnShapes[] = {
    {192, 2, Pairing::kStacked, ConsumerWork::kTilesInTurn},
    {176, 2, Pairing::kStacked, ConsumerWork::kTilesInTurn},
    {160, 2, Pairing::kStacked, ConsumerWork::kTilesInTurn},
    {144, 2, Pairing::kStacked, ConsumerWork::kTilesInTurn},
    {128, 2, Pairing::kStacked, ConsumerWork::kTilesInTurn},
};

// What the call can run, one launch compiled per entry: the plan's tiles and their twins, then
// the tiles in turn and theirs (every tile in turn is stacked and 128 rows or more).
constexpr std::size_t kTwins =
    std::count_if(std::begin(kPlanShapes), std::end(kPlanShapes), has_odd_row_twin);
constexpr std::size_t kShapeCount = std::size(kPlanShapes) + kTwins + 2 * std::size(kInTurnShapes);
constexpr std::array<TileShape, kShapeCount> kShapes = [] {
  std::array<TileShape, kShapeCount> shapes{};
  std::size_t next = 0;
  for (TileShape const shape : kPlanShapes)
    shapes[next++] = shape;
  for (TileShape const shape : kPlanShapes) {
    if (has_odd_row_twin(shape)) {
      shapes[next++] = {shape.height, shape.consumers, Pairing::kStackedOddRowSide};
    }
  }
  for (TileShape const shape : kInTurnShapes) {
    shapes[next++] = shape;
    shapes[next++] = {shape.height, shape.consumers, Pairing::kStackedOddRowSide, shape.work};
  }
  return shapes;
}();

// Step 34's rule on top of step 26's model (choose_tile): a one-consumer tile only where its
// cluster tiles fit in one round. Beyond that it runs more rounds of half-width tiles, each paying
// the per-tile costs (the ring's fill, the epilogue, A's rows loaded per 64 columns of C instead
// of per 128), and loses to the two-consumer tiles (see step 34's README).
bool fits_one_round(TileShape shape, int m, int n, int clusters) {
  return shape.consumers > 1 || cluster_tiles(m, n, shape) <= clusters;
}

// Step 43's rule, step 42's widened: a short tile stacked where B, the operand a stacked pair
// shares, is the larger one (n > m), as in step 42, or where stacked it needs fewer cluster tiles
// than the same tile side by side. A pair covers the same area either way, so fewer pairs compute
// less padding past C's edge and request fewer bytes. Where both need as many pairs, step 42's
// measurements stand: side by side where m >= n.
bool stacks_where_it_pays(TileShape shape, int m, int n) {
  bool const short_and_stacked = shape.pairing == Pairing::kStacked && shape.height < 128;
  if (!short_and_stacked || n > m) return true;
  TileShape const side_by_side = {shape.height, shape.consumers, Pairing::kSideBySide};
  return cluster_tiles(m, n, shape) < cluster_tiles(m, n, side_by_side);
}

// Step 46's rule for an odd number of tile rows, three or more: the odd row side by side where
// the fewer cluster tiles save time in the schedule's own count (rounds()) without a split of K
// that the plan did not have.
bool odd_row_pays(TileShape plan, TileShape odd_row_side, int m, int n, int k, int clusters) {
  Schedule const plan_schedule = schedule_for(m, n, k, plan, clusters);
  Schedule const odd_row_schedule = schedule_for(m, n, k, odd_row_side, clusters);
  bool const saves_time = rounds(odd_row_schedule) < rounds(plan_schedule);
  bool const adds_a_split = odd_row_schedule.tail_tiles > 0 && plan_schedule.tail_tiles == 0;
  return saves_time && !adds_a_split;
}

// Step 47's rule, the twin now keeping the tile's ConsumerWork: the twin (kStackedOddRowSide, A in
// half boxes) also where the tile rows are even, A's rows straddle lines, the tile is shorter than
// 256 rows and the problem takes more than one round. With an even number of tile rows the twin has
// no side-by-side row: every pair is stacked, as in the plan, and only A's boxes change. The H100
// measured the half boxes slower in problems of one round, and slower than step 37's copy of A for
// 256-row tiles with n >= 4096 (see the README). An odd number of tile rows keeps step 46's rule,
// whatever the pitch: there the twin also changes the pairs, which can cost a round. A tile in turn
// comes here only with A's rows on lines (tiles_in_turn_pay), so it keeps step 46's rule alone.
TileShape run_shape(TileShape plan, int m, int n, int k, bf16 const* A, int lda, int clusters) {
  int const tiles_m = gemm::ceil_div(m, plan.height);
  if (!has_odd_row_twin(plan) || tiles_m < 2) {
    return plan;
  }
  TileShape const twin = {plan.height, plan.consumers, Pairing::kStackedOddRowSide, plan.work};
  if (tiles_m % 2 == 0) {
    bool const straddles = gemm::rows_straddle_lines(A, lda);
    bool const more_than_one_round = cluster_tiles(m, n, plan) > clusters;
    return straddles && plan.height < 256 && more_than_one_round ? twin : plan;
  }
  return odd_row_pays(plan, twin, m, n, k, clusters) ? twin : plan;  // odd: three rows or more
}

// An epilogue's time in k tiles of the same tile, from step 47's clock stamps: the epilogue's share
// of a consumer's time over the k loop's, times the k tiles per tile (the README gives the
// figures).
constexpr double kEpilogueKTiles = 3.0;

// Step 26's model with the epilogue counted, in k tiles of work per SM: rounds, each a tile's k
// loop and, where the consumers work together, its epilogue, which stalls the tensor cores. Tiles
// in turn hide every epilogue but the last behind the other consumer's k loop; a round then is one
// tile per block, computed by one consumer while the other stores (the two share the SM's tensor
// cores, so a tile of 128 columns still takes a whole round of them).
double modeled_time(TileShape shape, int m, int n, int k, int clusters) {
  double const k_tiles = gemm::ceil_div(k, kBK);
  double const tile_rounds = rounds(schedule_for(m, n, k, shape, clusters));
  double const area = (shape.height + 32.0) * (64.0 * shape.consumers + 32.0);
  if (shape.work == ConsumerWork::kTilesInTurn) {
    return (tile_rounds * k_tiles + kEpilogueKTiles) * area;
  }
  return tile_rounds * (k_tiles + kEpilogueKTiles) * area;
}

// This step's rule: tiles in turn where the model says they take less time than the plan, and
//  - a tile's k loop is at least an epilogue long (three k tiles), so that the other consumer's
//    can cover an epilogue;
//  - A's rows start on 128-byte lines: with A in half boxes (step 47's twin where they do not)
//    the tiles in turn ran slower than step 47. So run_shape gives a tile in turn its twin only
//    for an odd row (step 46's rule);
//  - C is stored by TMA (step 24), the only epilogue measured with tiles in turn: the direct
//    stores of a 192-row tile in turn spill registers.
bool tiles_in_turn_pay(TileShape plan, TileShape in_turn, int m, int n, int k, bf16 const* A,
                       int lda, bf16 const* C, int ldc, int clusters) {
  // TODO(student): return true where K has at least kEpilogueKTiles k tiles (gemm::ceil_div(k,
  // kBK)), A's rows do not straddle lines (gemm::rows_straddle_lines(A, lda)), C is stored by TMA
  // (gemm::rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) and modeled_time(in_turn, ...) is less
  // than modeled_time(plan, ...); otherwise false. The placeholder never takes turns.
  (void)plan, (void)in_turn, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)C, (void)ldc;
  (void)clusters, (void)&modeled_time;
  return false;
  // END TODO
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, __nv_bfloat16 const* A, int lda,
                     __nv_bfloat16 const* B, int ldb, float beta, __nv_bfloat16* C, int ldc,
                     cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  // The tile index must fit an int, and the smallest tile is now 64 x 64.
  long long const most_tiles = static_cast<long long>(ceil_div(m, 64)) * ceil_div(n, 64);
  if (most_tiles > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then builds
  // the schedule from the occupancy query of the kernel it picked, which may find fewer.
  int const clusters = std::max(1, sms / kClusterSize);
  TileShape const plan = choose_tile(kPlanShapes, m, n, k, clusters, [&](TileShape candidate) {
    return fits_one_round(candidate, m, n, clusters) && stacks_where_it_pays(candidate, m, n);
  });
  TileShape const in_turn = choose_tile(kInTurnShapes, m, n, k, clusters);
  bool const take_turns = tiles_in_turn_pay(plan, in_turn, m, n, k, A, lda, C, ldc, clusters);
  TileShape const shape = run_shape(take_turns ? in_turn : plan, m, n, k, A, lda, clusters);
  gemm_with_tile<kShapes, RelaxedClusterSync, ZeroingHandOver, PromotionByPitch, UniformDescriptors,
                 TmaLoadsOfC>(shape, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  check_launch("bf16_gemm");
}
