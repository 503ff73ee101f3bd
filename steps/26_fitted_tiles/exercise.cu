// Exercise: step 26, tiles that fit the shape. One TODO block in the epilogue: where each lane
// points stmatrix .trans, which writes the accumulators (C^T) back to shared memory as rows of C.
// The placeholder compiles and sends the second 8-row block of every x4 onto the first, so half
// of every tile's rows are never written: every shape fails its check (the NaN poison shows).
// The README's exercises take the transposition and the tile model apart. Build and test:
// docs/teaching.md ("Exercise mode").
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
#include "warp_specialization.cuh"
#include "wgmma.cuh"
#include "workspace.h"

namespace {

using bf16 = __nv_bfloat16;
using namespace gemm::hopper;

constexpr int kBK = 64;
constexpr int kClusterSize = 2;
constexpr int kGroupM = 4;
constexpr int kBoxN = 64;       // B boxes, and the columns of the pieces of C the epilogue stores
constexpr int kPieceRows = 16;  // rows of one TMA store of C: kBM is a multiple of 16
constexpr int kGroupRows = 32;  // rows of C a consumer stages at a time (2 pieces, 4 KB)
constexpr int kWgmmaK = 16;
constexpr int kProducerRegisters = 40;
constexpr int kMaxSharedBytes = 227 * 1024;  // the most a block may opt in to on sm_90

constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;
constexpr std::uint32_t kPieceBytes = kPieceRows * kBoxN * 2;  // 2 KB

// How C is written. kTmaStore needs C to be a legal TMA operand (16-byte-aligned rows); the
// others store from the staging buffers with ordinary stores, in pairs when C's rows are 4-byte
// aligned.
enum class Epilogue { kTmaStore, kPairStores, kSingleStores };

// --- the transposed product ---------------------------------------------------------------------

// acc (this consumer's 64 columns x kBM rows of C, as C^T) += the 64 x 16 tile of B^T at `a`
// times the 16 x kBM tile of A^T at `b`.
template <int kBM>
__device__ __forceinline__ void wgmma_bf16(float (&acc)[kBM / 2], std::uint64_t a,
                                           std::uint64_t b) {
  if constexpr (kBM == 256) wgmma_transposed_m64n256k16_bf16(acc, a, b);
  if constexpr (kBM == 240) wgmma_transposed_m64n240k16_bf16(acc, a, b);
  if constexpr (kBM == 224) wgmma_transposed_m64n224k16_bf16(acc, a, b);
  if constexpr (kBM == 208) wgmma_transposed_m64n208k16_bf16(acc, a, b);
  if constexpr (kBM == 192) wgmma_transposed_m64n192k16_bf16(acc, a, b);
  if constexpr (kBM == 176) wgmma_transposed_m64n176k16_bf16(acc, a, b);
  if constexpr (kBM == 160) wgmma_transposed_m64n160k16_bf16(acc, a, b);
  if constexpr (kBM == 144) wgmma_transposed_m64n144k16_bf16(acc, a, b);
  if constexpr (kBM == 128) wgmma_transposed_m64n128k16_bf16(acc, a, b);
}

// wgmma's A: consumer c's box of B, k rows kk * 16 .. + 15, M-major (64 columns of 128 bytes per
// k row, the swizzle atom; 8 k rows 1024 bytes apart). wgmma's B: all kBM rows of A's tile, K-major
// (the next 16 k are 32 bytes further along each 128-byte row; 8 rows 1024 bytes apart).
__device__ __forceinline__ std::uint64_t b_box_descriptor(std::uint32_t b_stage, int consumer,
                                                          int kk) {
  return swizzle128_descriptor(b_stage + consumer * kBBoxBytes + kk * kWgmmaK * 128, kBBoxBytes,
                               1024);
}
__device__ __forceinline__ std::uint64_t a_tile_descriptor(std::uint32_t a_stage, int kk) {
  return swizzle128_descriptor(a_stage + kk * kWgmmaK * 2, 16, 1024);
}

// Stores four 8 x 8 bf16 matrices, each held as one register per thread in the mma fragment
// layout (thread t: row t / 4, columns 2 (t % 4), + 1), transposed: lane l gives the shared
// address of row l % 8 of matrix l / 8 of the result, i.e. of column l % 8 of the fragment.
__device__ __forceinline__ void stmatrix_x4_trans(std::uint32_t address, std::uint32_t r0,
                                                  std::uint32_t r1, std::uint32_t r2,
                                                  std::uint32_t r3) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address),
      "r"(r0), "r"(r1), "r"(r2), "r"(r3)
      : "memory");
}

// alpha * acc + beta * C[row][col] as bf16, reading C only when beta != 0 and only inside the
// matrix (the pieces of C staged for a TMA store may overhang it; TMA clips what lies outside).
__device__ __forceinline__ float scaled(bf16 const* C, int ldc, int row, int col, int m, int n,
                                        float acc, float alpha, float beta) {
  float value = alpha * acc;
  if (beta != 0.0f && row < m && col < n) {
    value += beta * __bfloat162float(C[static_cast<size_t>(row) * ldc + col]);
  }
  return value;
}

// Two bf16 in one register, `low` in the low half (the lower column of an mma fragment).
__device__ __forceinline__ std::uint32_t packed(float low, float high) {
  __nv_bfloat162 const pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<std::uint32_t const*>(&pair);
}

// --- the tile -----------------------------------------------------------------------------------

// Everything that follows from the tile height kBM and the number of consumers (each 64 columns).
template <int kBM, int kConsumers>
struct Tile {
  static constexpr int kBN = 64 * kConsumers;  // a block's columns: one box of B per consumer
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // setmaxnreg: what the producer gives back goes to the consumers, within the launch allocation
  // (128 x 40 + 256 x 232 = 64,512 of 384 x 168; 128 x 40 + 384 x 152 = 63,488 of 512 x 128).
  static constexpr int kConsumerRegisters = kConsumers == 2 ? 232 : 152;
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
  static constexpr int kGroups = (kBM + kGroupRows - 1) / kGroupRows;
  static_assert(kBM % kPieceRows == 0 && kBM >= 128 && kBM <= 256,
                "wgmma N (here kBM): a multiple of 16 from 128 to 256");
  static_assert(kSharedBytes <= kMaxSharedBytes, "stages and staging must fit shared memory");
  static_assert(kConsumers == 2 || kConsumers == 3, "two or three consumer warpgroups");
  static_assert(register_budgets_fit(kThreads, kProducerRegisters, kConsumerRegisters, kConsumers),
                "the register budgets must fit what the block is given at launch");
};

// --- the epilogue -------------------------------------------------------------------------------

// One consumer's 64 columns x kBM rows of C (held as C^T) at (first_row, first_col): kGroupRows
// rows of C at a time into a swizzled staging buffer (rows of 128 bytes: this consumer's 64
// columns), then out. The accumulators' 8-column block j (of wgmma's N) is 8 rows of C: floats
// 4 j, 4 j + 1 are rows 8 j + t2, + 1 of column 16 warp + g, and floats 4 j + 2, 4 j + 3 the same
// rows of column 16 warp + g + 8. Packed in pairs, each half is one 8 x 8 mma fragment with C's
// columns as its rows: stmatrix .trans writes it back as 8 rows of C, each 8 columns (16 bytes)
// long. `groups` counts the groups this consumer has staged: it picks the buffer.
template <int kBM, int kConsumers, Epilogue kEpilogue>
__device__ __forceinline__ void store_transposed_tile(CUtensorMap const* c_map,
                                                      bf16 (&staging)[2][kGroupRows * kBoxN],
                                                      int& groups, int consumer, bf16* C, int ldc,
                                                      int m, int n, float alpha, float beta,
                                                      int first_row, int first_col,
                                                      float const (&acc)[kBM / 2]) {
  using T = Tile<kBM, kConsumers>;
  int const thread = threadIdx.x % 128;
  int const lane = threadIdx.x % 32;
  int const warp = (threadIdx.x / 32) % 4;
  int const g = lane / 4;
  int const t2 = (lane % 4) * 2;
  bool const leader = thread == 0;  // issues the TMA stores
  int const barrier_id = 1 + consumer;
  int const matrix = lane / 8;      // this lane addresses a row of matrix `matrix` of each x4:
  int const matrix_row = lane % 8;  // row matrix_row of 8-row block jj * 2 + matrix / 2,
  int const chunk = 2 * warp + matrix % 2;  // in the 16-byte chunk of columns 8 chunk .. + 7
#pragma unroll
  for (int group = 0; group < T::kGroups; ++group, ++groups) {
    constexpr int kLastRows = kBM - (T::kGroups - 1) * kGroupRows;
    int const rows = group + 1 < T::kGroups ? kGroupRows : kLastRows;
    bf16* const buffer_pointer = staging[groups % 2];
    std::uint32_t const buffer = gemm::shared_address(buffer_pointer);
    if (kEpilogue == Epilogue::kTmaStore && leader) bulk_wait_group_read<1>();
    named_barrier_sync(barrier_id, 128);
#pragma unroll
    for (int jj = 0; jj < kGroupRows / 16; ++jj) {
      if (jj * 16 >= rows) break;
      std::uint32_t r[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int const j = group * (kGroupRows / 8) + jj * 2 + i / 2;  // accumulators' 8-row block
        int const half = i % 2;
        int const row = first_row + 8 * j + t2;
        int const col = first_col + 16 * warp + 8 * half + g;
        r[i] = packed(scaled(C, ldc, row, col, m, n, acc[4 * j + 2 * half], alpha, beta),
                      scaled(C, ldc, row + 1, col, m, n, acc[4 * j + 2 * half + 1], alpha, beta));
      }
      // TODO(student): the row of the staging buffer (0 .. kGroupRows - 1) whose 16-byte
      // chunk `chunk` this lane addresses: lane l gives row l % 8 of matrix l / 8 of the x4,
      // and matrices 0 and 1 are the accumulators' 8-row block jj * 2 of this group (r[0],
      // r[1] above), matrices 2 and 3 the block jj * 2 + 1
      int const group_row = 16 * jj + matrix_row;  // placeholder: both blocks on the first
                                                   // END TODO
      stmatrix_x4_trans(buffer + group_row * 128 + ((chunk ^ (group_row % 8)) * 16), r[0], r[1],
                        r[2], r[3]);
    }
    if constexpr (kEpilogue == Epilogue::kTmaStore) {
      fence_proxy_async_shared();
      named_barrier_sync(barrier_id, 128);
      if (leader) {
        for (int piece = 0; piece < rows / kPieceRows; ++piece) {
          tma_store_2d(c_map, buffer + piece * kPieceBytes, first_col,
                       first_row + group * kGroupRows + piece * kPieceRows);
        }
        bulk_commit_group();
      }
    } else {
      // C's rows are not 16-byte aligned: each thread copies 16-byte chunks of the buffer to C
      // with 4-byte (pairs) or 2-byte stores, inside C only.
      named_barrier_sync(barrier_id, 128);
      unsigned char const* const bytes = reinterpret_cast<unsigned char const*>(buffer_pointer);
      for (int c = thread; c < rows * 8; c += 128) {
        int const group_row = c / 8;
        int const row = first_row + group * kGroupRows + group_row;
        int const col = first_col + (c % 8) * 8;
        if (row >= m || col >= n) continue;
        uint4 const chunk_value = *reinterpret_cast<uint4 const*>(
            bytes + group_row * 128 + (((c % 8) ^ (group_row % 8)) * 16));
        bf16 const* const values = reinterpret_cast<bf16 const*>(&chunk_value);
        bf16* const out = C + static_cast<size_t>(row) * ldc + col;
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
          if (col + e + 1 < n && kEpilogue == Epilogue::kPairStores) {
            *reinterpret_cast<__nv_bfloat162*>(out + e) =
                __halves2bfloat162(values[e], values[e + 1]);
          } else {
            if (col + e < n) out[e] = values[e];
            if (col + e + 1 < n) out[e + 1] = values[e + 1];
          }
        }
      }
    }
  }
}

// --- the kernel ---------------------------------------------------------------------------------

template <int kBM, int kConsumers, Epilogue kEpilogue>
__global__ void __cluster_dims__(kClusterSize, 1, 1) __launch_bounds__(128 * (1 + kConsumers), 1)
    fitted_tiles_kernel(const __grid_constant__ CUtensorMap a_map,
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
        // A's box is the whole tile, kBM rows; B's boxes, one per consumer.
        produce<kConsumers, kClusterSize>(ring, &a_map, &b_map, tile_m * kBM, tile_n * kBN,
                                          unit.k_begin, unit.k_end, rank, write);
      }
    }
  } else {
    claim_registers<T::kConsumerRegisters>();
    int const consumer = warpgroup - 1;
    __shared__ int last_slice[kConsumers];  // the leader's count, for its warpgroup
    PipelineState<kStages> read;
    PipelineState<kStages> release;
    int groups = 0;  // groups of C rows this consumer has staged so far: picks the buffer
    Unit unit{};
    for (int index = 0; unit_of(schedule, cluster, index, unit); ++index) {
      int tile_m = 0;
      int tile_n = 0;
      tile_of(unit.tile, tile_m, tile_n);
      // acc holds C^T: this consumer's 64 columns of C as wgmma's M, the tile's kBM rows as N.
      float acc[kBM / 2];
#pragma unroll
      for (int i = 0; i < kBM / 2; ++i)
        acc[i] = 0.0f;
      consume_k_range<kClusterSize>(ring, unit.k_begin, unit.k_end, read, release, [&](int stage) {
#pragma unroll
        for (int kk = 0; kk < kBK / kWgmmaK; ++kk) {
          wgmma_bf16<kBM>(acc, b_box_descriptor(ring.b_tile(stage), consumer, kk),
                          a_tile_descriptor(ring.a_tile(stage), kk));
        }
      });
      if (unit.tail_tile >= 0) {
        // A slice (step 25): slots kClusterSize x kConsumers apart for the slices of a tile.
        std::size_t const slot_stride = kClusterSize * kConsumers;
        std::size_t const own_slot = cluster * slot_stride + rank * kConsumers + consumer;
        std::size_t const first_slot =
            unit.tail_tile * schedule.splits * slot_stride + rank * kConsumers + consumer;
        int* const counter =
            counters + (unit.tail_tile * kClusterSize + rank) * kConsumers + consumer;
        if (!reduce_tail_slices<kBM / 2>(partials, own_slot, first_slot, slot_stride,
                                         schedule.splits, counter, last_slice[consumer],
                                         1 + consumer, acc)) {
          continue;  // another slice finishes the tile
        }
      }
      store_transposed_tile<kBM, kConsumers, kEpilogue>(
          &c_map, shared.staging[consumer], groups, consumer, C, ldc, m, n, alpha, beta,
          tile_m * kBM, tile_n * kBN + consumer * kBoxN, acc);
    }
    // The last stores must have landed before the kernel ends.
    if (kEpilogue == Epilogue::kTmaStore && threadIdx.x % 128 == 0) bulk_wait_group<0>();
  }
  cluster_sync();
}

// --- the plan: tile height and width ----------------------------------------------------------

// A block tile: `height` rows (wgmma's N) by 64 columns per consumer.
struct TileShape {
  int height;
  int consumers;
};

// The schedule (step 25) of the cluster tiles (2 x height rows, 64 x consumers columns).
Schedule schedule_for(int m, int n, int k, TileShape shape, int clusters) {
  long long const tiles =
      static_cast<long long>(gemm::ceil_div(gemm::ceil_div(m, shape.height), kClusterSize)) *
      gemm::ceil_div(n, 64 * shape.consumers);
  return make_schedule(tiles, gemm::ceil_div(k, kBK), clusters);
}

// The tiles this step is built for: with two consumers (128 columns) every height from 128 to
// 256 in steps of 16; with three (192 columns) up to 192. A 512-thread block is launched with 128
// registers per thread, and ptxas checks every instruction against that: one wgmma of N = 208
// needs 130 (its 104 accumulators, the descriptors and what stays live), so it does not compile
// (error C7602), whatever setmaxnreg gives the consumers later. Taller three-consumer tiles do
// build as two wgmma of N / 2 each, in the consumers' 152 registers, but they ran slower.
constexpr TileShape kShapes[] = {{256, 2}, {240, 2}, {224, 2}, {208, 2}, {192, 2},
                                 {176, 2}, {160, 2}, {144, 2}, {128, 2}, {192, 3},
                                 {176, 3}, {160, 3}, {144, 3}, {128, 3}};

// Step 23's model in two dimensions: rounds times the tile's area, each side with an overhead
// worth 32 rows or columns (the epilogue, and the lower efficiency of smaller wgmma).
TileShape choose_tile(int m, int n, int k, int clusters) {
  TileShape best = kShapes[0];
  double best_cost = -1.0;
  for (TileShape const shape : kShapes) {
    double const cost = rounds(schedule_for(m, n, k, shape, clusters)) * (shape.height + 32) *
                        (64 * shape.consumers + 32);
    if (best_cost < 0.0 || cost < best_cost) {
      best_cost = cost;
      best = shape;
    }
  }
  return best;
}

// --- the host -----------------------------------------------------------------------------------

template <int kBM, int kConsumers, Epilogue kEpilogue>
void launch(CUtensorMap const& a_map, CUtensorMap const& b_map, CUtensorMap const& c_map, int m,
            int n, int k, float alpha, float beta, bf16* C, int ldc, cudaStream_t stream) {
  using T = Tile<kBM, kConsumers>;
  constexpr auto kernel = fitted_tiles_kernel<kBM, kConsumers, kEpilogue>;
  gemm::opt_in_shared_memory<kernel>(T::kSharedBytes);
  check_register_budgets<kernel>(T::kThreads, kProducerRegisters, T::kConsumerRegisters,
                                 kConsumers);
  static int const resident = resident_clusters(kernel, kClusterSize, T::kThreads, T::kSharedBytes);
  Schedule const schedule = schedule_for(m, n, k, {kBM, kConsumers}, resident);
  // The split's workspace (step 25): one slot of partial sums per cluster, block and consumer,
  // and a counter per tail tile, block and consumer, cleared on the stream before the kernel.
  std::unique_ptr<gemm::StreamWorkspace> workspace;
  float* partials = nullptr;
  int* counters = nullptr;
  if (schedule.tail_tiles > 0) {
    std::size_t const slots =
        static_cast<std::size_t>(schedule.clusters) * kClusterSize * kConsumers;
    std::size_t const partial_bytes = slots * 128 * (kBM / 2) * sizeof(float);
    std::size_t const counter_bytes =
        static_cast<std::size_t>(schedule.tail_tiles) * kClusterSize * kConsumers * sizeof(int);
    workspace = std::make_unique<gemm::StreamWorkspace>(partial_bytes + counter_bytes, stream);
    partials = workspace->get<float>();
    counters = reinterpret_cast<int*>(workspace->get<unsigned char>() + partial_bytes);
    gemm::check_cuda(cudaMemsetAsync(counters, 0, counter_bytes, stream), "cudaMemsetAsync");
  }
  kernel<<<static_cast<unsigned>(schedule.clusters * kClusterSize), T::kThreads, T::kSharedBytes,
           stream>>>(a_map, b_map, c_map, m, n, alpha, beta, C, ldc, schedule, partials, counters);
}

// The kernel of tile kBM x kConsumers with the epilogue `epilogue`.
template <int kBM, int kConsumers>
void launch_shape(Epilogue epilogue, CUtensorMap const& a_map, CUtensorMap const& b_map,
                  CUtensorMap const& c_map, int m, int n, int k, float alpha, float beta, bf16* C,
                  int ldc, cudaStream_t stream) {
  gemm::dispatch_value<Epilogue::kTmaStore, Epilogue::kPairStores, Epilogue::kSingleStores>(
      epilogue, [&](auto kEpilogue) {
        launch<kBM, kConsumers, kEpilogue()>(a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc,
                                             stream);
      });
}

// The GEMM with block tiles of `shape` (one of kShapes).
void gemm_with_tile(TileShape shape, int m, int n, int k, float alpha, bf16 const* A, int lda,
                    bf16 const* B, int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  // A copied when TMA cannot read it or reads it slowly, B only when TMA cannot read it (step 22).
  gemm::AlignedOperand const a(A, m, k, lda, gemm::should_copy_a(A, lda, n), stream);
  gemm::AlignedOperand const b(B, k, n, ldb, gemm::must_copy(B, ldb), stream);
  // A's box is a whole block tile (shape.height rows, at most 256: TMA's limit); C's a piece.
  CUtensorMap const a_map = gemm::make_bf16_tensor_map(a.data(), m, k, a.ld(), shape.height, kBK);
  CUtensorMap const b_map = gemm::make_bf16_tensor_map(b.data(), k, n, b.ld(), kBK, kBoxN);
  Epilogue epilogue = Epilogue::kSingleStores;
  CUtensorMap c_map{};  // unused by the direct stores
  // TMA stores need C's rows 16-byte aligned, and n a multiple of 8 (step 24).
  if (gemm::rows_are_16_byte_aligned(C, ldc) && n % 8 == 0) {
    epilogue = Epilogue::kTmaStore;
    c_map = gemm::make_bf16_tensor_map(C, m, n, ldc, kPieceRows, kBoxN);
  } else if (gemm::rows_are_aligned<4>(C, ldc)) {
    epilogue = Epilogue::kPairStores;
  }
  // One launch per entry of kShapes and epilogue; the one that matches runs.
  auto const launch_matching = [&]<std::size_t... kIndex>(std::index_sequence<kIndex...>) {
    (..., (shape.height == kShapes[kIndex].height && shape.consumers == kShapes[kIndex].consumers
               ? launch_shape<kShapes[kIndex].height, kShapes[kIndex].consumers>(
                     epilogue, a_map, b_map, c_map, m, n, k, alpha, beta, C, ldc, stream)
               : void()));
  };
  launch_matching(std::make_index_sequence<std::size(kShapes)>{});
}

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  if (static_cast<long long>(ceil_div(m, 128)) * ceil_div(n, 128) > 0x3fffffffLL) {
    throw std::invalid_argument("bf16_gemm: too many tiles");
  }
  int const sms = multiprocessor_count();
  // The model assumes every SM pair can hold a cluster (66 on the H100); the launch then builds
  // the schedule from the occupancy query of the kernel it picked, which may find fewer.
  TileShape const shape = choose_tile(m, n, k, std::max(1, sms / kClusterSize));
  gemm_with_tile(shape, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  check_launch("bf16_gemm");
}
