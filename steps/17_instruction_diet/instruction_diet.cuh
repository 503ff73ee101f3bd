// Step 17's kernel as a template over its tile configuration, so that a sweep (sweep.cu) can
// build many variants and instruction_diet.cu can name the one it keeps.
//
// It is step 16's kernel (swizzled tiles, a multistage cp.async pipeline) with fewer instructions
// around each mma.sync. Step 16 spends about as many issue slots on addresses, bounds and stage
// arithmetic as on the tensor-core instructions; four changes take most of them away:
//
//   1. A copy plan with one pointer per operand (LeanCopier): a thread's chunks of a k tile lie a
//      fixed number of rows apart, so every other address is a constant away from the first.
//   2. Blocks that lie wholly inside A, B and C take a k loop with no bounds at all.
//   3. The copies of the next k tile are spread among the mma.sync, one 16-byte chunk per row of
//      mma tiles, instead of going out in one burst (compute_tile below says why).
//   4. The k loop of whole blocks is unrolled over the stages (unrolled_for), so that each tile's
//      stage is a compile-time constant and its shared-memory addresses are immediates.
//
// With fewer instructions per k tile, a deeper k tile (64 instead of 32) with three stages is what
// the sweep picks.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"
#include "tensor_core.cuh"

namespace diet {

using bf16 = __nv_bfloat16;

template <int kBM_, int kBN_, int kBK_, int kWM_, int kWN_, int kStages_, int kMinBlocksPerSM_ = 1,
          int kGroupM_ = 8>
struct TileConfig {
  static constexpr int kBM = kBM_;  // block tile rows (M)
  static constexpr int kBN = kBN_;  // block tile columns (N)
  static constexpr int kBK = kBK_;  // k tile depth
  static constexpr int kWM = kWM_;  // warp tile rows
  static constexpr int kWN = kWN_;  // warp tile columns
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocksPerSM = kMinBlocksPerSM_;  // __launch_bounds__: caps registers
  static constexpr int kGroupM = kGroupM_;  // tile rows per group of the block order

  static constexpr int kWarpsM = kBM / kWM;
  static constexpr int kWarpsN = kBN / kWN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kTilesM = kWM / 16;  // mma tiles of 16 rows per warp
  static constexpr int kTilesN = kWN / 8;   // mma tiles of 8 columns per warp

  static constexpr int kChunk = 8;  // bf16 per 16-byte chunk
  static constexpr int kAChunksPerRow = kBK / kChunk;
  static constexpr int kBChunksPerRow = kBN / kChunk;
  static constexpr int kAStageElements = kBM * kBK;
  static constexpr int kBStageElements = kBK * kBN;
  static constexpr int kSharedBytes =
      kStages * (kAStageElements + kBStageElements) * static_cast<int>(sizeof(bf16));

  static_assert(kBM % kWM == 0 && kBN % kWN == 0, "warp tiles must cover the block tile");
  static_assert(kWM % 16 == 0 && kWN % 16 == 0,
                "a warp tile is a whole number of 16 x 16 (two 16 x 8) mma tiles");
  static_assert(kBK % 16 == 0, "mma.sync consumes k in steps of 16");
  static_assert(kAChunksPerRow >= 4 && (kAChunksPerRow & (kAChunksPerRow - 1)) == 0,
                "the swizzle needs rows of A's tile of 4, 8, 16, ... chunks (kBK = 32, 64, ...)");
  static_assert(kBChunksPerRow >= 8 && (kBChunksPerRow & (kBChunksPerRow - 1)) == 0,
                "the swizzle needs rows of B's tile of 8, 16, ... chunks (kBN = 64, 128, ...)");
  static_assert(kAStageElements / kChunk % kThreads == 0, "A copies must divide evenly");
  static_assert(kBStageElements / kChunk % kThreads == 0, "B copies must divide evenly");
  static_assert(kStages >= 2, "a pipeline needs at least two stages");
};

// Where logical 16-byte chunk `chunk` of row `row` lives in a tile whose rows are kChunksPerRow
// chunks long. A 128-byte line of shared memory holds 8 chunks, one per group of 4 banks.
// ldmatrix reads one chunk from each of 8 consecutive rows; unswizzled, those 8 chunks sit at
// the same position of their lines and all hit the same 4 banks (8-way conflict). XOR-ing the
// chunk index with the row's position among the 8 rows gives each row a different chunk slot:
//
//   rows of 8 or more chunks (one line or more per row):  chunk ^ (row % 8)
//   rows of 4 chunks (two rows per line):                  chunk ^ ((row / 2) % 4)
//
// A row's chunks are only permuted among themselves, so a row stays contiguous for the copies.
template <int kChunksPerRow>
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) {
  constexpr int kRowsPerLine = kChunksPerRow >= 8 ? 1 : 8 / kChunksPerRow;
  constexpr int kMask = (kChunksPerRow >= 8 ? 8 : kChunksPerRow) - 1;
  return chunk ^ ((row / kRowsPerLine) & kMask);
}

// Element offset of (row, col) in a swizzled tile of kChunksPerRow chunks per row; `col` must be
// a multiple of 8 (a chunk start) for ldmatrix and for the 16-byte copies.
template <int kChunksPerRow>
__device__ __forceinline__ int swizzled_offset(int row, int col) {
  return row * kChunksPerRow * 8 + swizzled_chunk<kChunksPerRow>(row, col / 8) * 8 + col % 8;
}

// One k tile of A (kBM x kBK from column k0) and B (kBK x kBN from row k0) into a stage's
// swizzled tiles, element by element with ordinary loads and stores, zeros outside A and B: the
// path for operands whose rows are not 16-byte aligned (no cp.async can copy them).
template <class Cfg>
__device__ __forceinline__ void load_tile(bf16* a_tile, bf16* b_tile, bf16 const* __restrict__ A,
                                          int lda, bf16 const* __restrict__ B, int ldb, int m,
                                          int n, int k, int block_row, int block_col, int k0) {
  bf16 const zero = __float2bfloat16(0.0f);
  for (int e = threadIdx.x; e < Cfg::kAStageElements; e += Cfg::kThreads) {
    int const row = e / Cfg::kBK;
    int const col = e % Cfg::kBK;
    int const global_row = block_row + row;
    int const global_col = k0 + col;
    a_tile[swizzled_offset<Cfg::kAChunksPerRow>(row, col)] =
        global_row < m && global_col < k ? A[static_cast<size_t>(global_row) * lda + global_col]
                                         : zero;
  }
  for (int e = threadIdx.x; e < Cfg::kBStageElements; e += Cfg::kThreads) {
    int const row = e / Cfg::kBN;
    int const col = e % Cfg::kBN;
    int const global_row = k0 + row;
    int const global_col = block_col + col;
    b_tile[swizzled_offset<Cfg::kBChunksPerRow>(row, col)] =
        global_row < k && global_col < n ? B[static_cast<size_t>(global_row) * ldb + global_col]
                                         : zero;
  }
}

// The copies of a full k tile, worked out once per thread before the k loop. A thread's chunks
// of A lie kARowsPerPass rows apart in one column (chunk i is row a_row + i * kARowsPerPass),
// and likewise for B, so one pointer per operand is enough: chunk i's global address is that
// pointer plus i * kRowsPerPass * ld elements (one IMAD.WIDE), and its shared address chunk 0's
// plus a constant, because the swizzle repeats every 8 rows and a pass covers a multiple of 8
// rows. Inside the loop a tile costs one cp.async and one address per chunk and two pointer
// increments.
//
// Blocks at the edge of A or B need byte counts: rows past m copy 0 bytes (from A itself, a
// valid address that is not read), B's last chunks fewer than 16. Rows of full k tiles are
// always inside K. A partial last k tile goes through copy_partial.
template <class Cfg>
struct LeanCopier {
  static constexpr int kAChunks = Cfg::kAStageElements / Cfg::kChunk / Cfg::kThreads;
  static constexpr int kBChunks = Cfg::kBStageElements / Cfg::kChunk / Cfg::kThreads;
  static constexpr int kARowsPerPass = Cfg::kThreads / Cfg::kAChunksPerRow;
  static constexpr int kBRowsPerPass = Cfg::kThreads / Cfg::kBChunksPerRow;
  static_assert(kARowsPerPass % 8 == 0 && kBRowsPerPass % 8 == 0,
                "a pass of the copies must cover whole periods of the swizzle (8 rows)");

  char const* a_src;  // this thread's chunk 0 of A in the next k tile (A itself if past m)
  char const* b_src;  // and of B
  unsigned lda;
  unsigned ldb;
  std::uint32_t a_dst;  // byte offset of chunk 0 in a stage's A tile
  std::uint32_t b_dst;
  int a_chunks_inside;  // chunks 0 .. a_chunks_inside - 1 lie in rows < m
  int b_bytes;          // 16, fewer at B's right edge, 0 past it

  __device__ LeanCopier(bf16 const* A, int lda_, bf16 const* B, int ldb_, int m, int n,
                        int block_row, int block_col)
      : lda(lda_), ldb(ldb_) {
    int const a_row = threadIdx.x / Cfg::kAChunksPerRow;
    int const a_col = (threadIdx.x % Cfg::kAChunksPerRow) * Cfg::kChunk;
    int const rows_left = m - (block_row + a_row);
    a_chunks_inside =
        rows_left <= 0 ? 0 : min(kAChunks, (rows_left + kARowsPerPass - 1) / kARowsPerPass);
    a_src = reinterpret_cast<char const*>(
        rows_left > 0 ? A + static_cast<size_t>(block_row + a_row) * lda + a_col : A);
    a_dst = 2 * swizzled_offset<Cfg::kAChunksPerRow>(a_row, a_col);

    int const b_row = threadIdx.x / Cfg::kBChunksPerRow;
    int const b_col = (threadIdx.x % Cfg::kBChunksPerRow) * Cfg::kChunk;
    int const valid = max(0, min(Cfg::kChunk, n - (block_col + b_col)));
    b_src = reinterpret_cast<char const*>(B + static_cast<size_t>(b_row) * ldb +
                                          (valid > 0 ? block_col + b_col : 0));
    b_bytes = 2 * valid;
    b_dst = 2 * swizzled_offset<Cfg::kBChunksPerRow>(b_row, b_col);
  }

  // Chunk c (0 .. kChunks - 1: A's chunks first, then B's) of the next full k tile, into the
  // stage at shared addresses a_stage, b_stage. The k loop issues them one or a few at a time,
  // spread among its mma.sync, then calls advance().
  // kWholeBlock: the block lies inside A and B, every chunk is 16 bytes, no byte counts.
  static constexpr int kChunks = kAChunks + kBChunks;
  template <bool kWholeBlock>
  __device__ __forceinline__ void copy_chunk(int c, std::uint32_t a_stage, std::uint32_t b_stage) {
    if (c < kAChunks) {
      std::uint32_t const dst = a_stage + a_dst + c * kARowsPerPass * Cfg::kBK * 2;
      char const* src = a_src + static_cast<size_t>(c * kARowsPerPass * 2) * lda;
      if constexpr (kWholeBlock) {
        gemm::cp_async_16(dst, src);
      } else {
        bool const inside = c < a_chunks_inside;
        gemm::cp_async_16(dst, inside ? src : a_src, inside ? 16 : 0);
      }
    } else {
      int const i = c - kAChunks;
      std::uint32_t const dst = b_stage + b_dst + i * kBRowsPerPass * Cfg::kBN * 2;
      char const* src = b_src + static_cast<size_t>(i * kBRowsPerPass * 2) * ldb;
      if constexpr (kWholeBlock) {
        gemm::cp_async_16(dst, src);
      } else {
        gemm::cp_async_16(dst, src, b_bytes);
      }
    }
  }

  // On to the next k tile: one pointer increment per operand.
  __device__ __forceinline__ void advance() {
    a_src += Cfg::kBK * 2;
    b_src += static_cast<size_t>(Cfg::kBK * 2) * ldb;
  }

  // All chunks of the next full k tile at once (the prologue's tiles).
  template <bool kWholeBlock>
  __device__ __forceinline__ void copy_and_advance(std::uint32_t a_stage, std::uint32_t b_stage) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      copy_chunk<kWholeBlock>(c, a_stage, b_stage);
    advance();
  }

  // The last k tile when K leaves it partial: k_left = k - k0 (0 < k_left < kBK) columns of A
  // and rows of B remain. The same chunks with byte counts for K as well; a chunk with nothing
  // to copy reads 0 bytes from A or B itself.
  __device__ __forceinline__ void copy_partial(std::uint32_t a_stage, std::uint32_t b_stage,
                                               int k_left, bf16 const* A, bf16 const* B) {
    int const a_col = (threadIdx.x % Cfg::kAChunksPerRow) * Cfg::kChunk;
    int const a_bytes = 2 * max(0, min(Cfg::kChunk, k_left - a_col));
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      std::uint32_t const dst = a_stage + a_dst + i * kARowsPerPass * Cfg::kBK * 2;
      char const* src = a_src + static_cast<size_t>(i * kARowsPerPass * 2) * lda;
      bool const copy = i < a_chunks_inside && a_bytes > 0;
      gemm::cp_async_16(dst, copy ? src : reinterpret_cast<char const*>(A), copy ? a_bytes : 0);
    }
    int const b_row = threadIdx.x / Cfg::kBChunksPerRow;
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      std::uint32_t const dst = b_stage + b_dst + i * kBRowsPerPass * Cfg::kBN * 2;
      char const* src = b_src + static_cast<size_t>(i * kBRowsPerPass * 2) * ldb;
      bool const copy = b_row + i * kBRowsPerPass < k_left;
      gemm::cp_async_16(dst, copy ? src : reinterpret_cast<char const*>(B), copy ? b_bytes : 0);
    }
  }
};

// unrolled_for<N>(body) calls body(std::integral_constant<int, i>{}) for i = 0, 1, ..., N - 1:
// N copies of the body, each with its index i as a compile-time constant (decltype(i)::value).
template <class Body, int... kIndex>
__device__ __forceinline__ void unrolled_for_each(Body& body,
                                                  std::integer_sequence<int, kIndex...>) {
  (body(std::integral_constant<int, kIndex>{}), ...);
}

template <int kCount, class Body>
__device__ __forceinline__ void unrolled_for(Body&& body) {
  unrolled_for_each(body, std::make_integer_sequence<int, kCount>{});
}

// A stage index given either as an int (known at run time) or as a std::integral_constant (known
// at compile time, from unrolled_for).
template <class Stage>
__device__ __forceinline__ int stage_value(Stage stage) {
  if constexpr (std::is_same_v<Stage, int>) {
    return stage;
  } else {
    return Stage::value;
  }
}

// kWholeBlocks: A's and B's rows are 16-byte aligned and K is a multiple of kBK, so blocks that lie
// inside C take the whole-block k loop; launch() says why this is a template parameter.
template <class Cfg, bool kAligned, bool kPairs, bool kWholeBlocks>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSM)
    instruction_diet_kernel(int m, int n, int k, float alpha, bf16 const* __restrict__ A, int lda,
                            bf16 const* __restrict__ B, int ldb, float beta, bf16* __restrict__ C,
                            int ldc) {
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  bf16* const shared = reinterpret_cast<bf16*>(shared_bytes);
  auto a_tile = [&](int stage) { return shared + stage * Cfg::kAStageElements; };
  auto b_tile = [&](int stage) {
    return shared + Cfg::kStages * Cfg::kAStageElements + stage * Cfg::kBStageElements;
  };
  constexpr std::uint32_t kAStageBytes = 2 * Cfg::kAStageElements;
  constexpr std::uint32_t kBStageBytes = 2 * Cfg::kBStageElements;
  std::uint32_t const a_shared = gemm::shared_address(shared);
  std::uint32_t const b_shared = a_shared + Cfg::kStages * kAStageBytes;

  int tile_m = 0;
  int tile_n = 0;
  gemm::grouped_tile(blockIdx.x, gemm::ceil_div(m, Cfg::kBM), gemm::ceil_div(n, Cfg::kBN),
                     Cfg::kGroupM, tile_m, tile_n);
  int const block_row = tile_m * Cfg::kBM;
  int const block_col = tile_n * Cfg::kBN;

  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const warp_row = (warp / Cfg::kWarpsN) * Cfg::kWM;
  int const warp_col = (warp % Cfg::kWarpsN) * Cfg::kWN;
  int const ld_row = lane % 16;        // the row this lane addresses for ldmatrix.x4 (step 15)
  int const ld_col = (lane / 16) * 8;  // and its first column

  // This lane's ldmatrix addresses, as byte offsets into a stage, worked out once. The swizzle
  // depends on the row only through row % 8, which is ld_row % 8 for every 16-row tile i and
  // every k step kk, so tile i of A is a constant i * 16 rows further, and k step kk of B a
  // constant kk rows further; only the chunk index of A (per kk) and of B (per pair j) varies.
  constexpr int kKSteps = Cfg::kBK / 16;
  std::uint32_t a_ldm[kKSteps];
  std::uint32_t b_ldm[Cfg::kTilesN / 2];
#pragma unroll
  for (int s = 0; s < kKSteps; ++s)
    a_ldm[s] = 2 * swizzled_offset<Cfg::kAChunksPerRow>(warp_row + ld_row, s * 16 + ld_col);
#pragma unroll
  for (int j = 0; j < Cfg::kTilesN / 2; ++j)
    b_ldm[j] = 2 * swizzled_offset<Cfg::kBChunksPerRow>(ld_row, warp_col + j * 16 + ld_col);

  float acc[Cfg::kTilesM][Cfg::kTilesN][4] = {};

  int const k_tiles = gemm::ceil_div(k, Cfg::kBK);
  int const full_tiles = k / Cfg::kBK;
  LeanCopier<Cfg> copier(A, lda, B, ldb, m, n, block_row, block_col);

  // The k loop, in two versions. kWholeBlock (a block inside A, B and C, aligned rows, K a
  // multiple of kBK): every k tile is copied with copy_chunk<true>, no byte counts, no partial
  // tile. Otherwise full tiles go through copy_and_advance<false> (the same chunks with byte
  // counts), a partial last tile through copy_partial, and on the unaligned path every tile
  // through load_tile.
  auto k_loop = [&](auto whole_block) {
    constexpr bool kWholeBlock = decltype(whole_block)::value;
    // Starts the copies of k tile `tile` into `stage`.
    auto start_tile = [&](int tile, int stage) {
      std::uint32_t const a_stage = a_shared + stage * kAStageBytes;
      std::uint32_t const b_stage = b_shared + stage * kBStageBytes;
      if constexpr (kWholeBlock) {
        if (tile < k_tiles) copier.template copy_and_advance<true>(a_stage, b_stage);
      } else if constexpr (kAligned) {
        if (tile < full_tiles) {
          copier.template copy_and_advance<false>(a_stage, b_stage);
        } else if (tile < k_tiles) {
          copier.copy_partial(a_stage, b_stage, k - tile * Cfg::kBK, A, B);
        }
      } else if (tile < k_tiles) {
        load_tile<Cfg>(a_tile(stage), b_tile(stage), A, lda, B, ldb, m, n, k, block_row, block_col,
                       tile * Cfg::kBK);
      }
    };

    // Prologue: start the first kStages - 1 tiles. Every stage slot commits a group, empty or
    // not, so that "wait until at most kStages - 2 groups are pending" always means "tile t is
    // here".
#pragma unroll
    for (int s = 0; s < Cfg::kStages - 1; ++s) {
      start_tile(s, s);
      gemm::cp_async_commit();
    }

    // One k tile. kSpread (whole blocks, while a next tile remains): the copies of the next
    // tile go out chunk by chunk among the mma.sync, kPerRow after each row of mma tiles.
    // Otherwise start_tile issues them all after the first k step (edge blocks, a partial last
    // tile, unaligned rows), or there is nothing left to copy.
    auto compute_tile = [&](int t, auto spread, auto stage_index) {
      constexpr bool kSpread = decltype(spread)::value;
      constexpr int kRows = kKSteps * Cfg::kTilesM;  // rows of mma tiles per k tile
      constexpr int kPerRow = (LeanCopier<Cfg>::kChunks + kRows - 1) / kRows;
      gemm::cp_async_wait<Cfg::kStages - 2>();
      // Tile t is visible to every warp, and every warp has finished tile t - 1, whose stage the
      // copies of tile t + kStages - 1 refill (starting after the first row of mma below).
      __syncthreads();
      int const stage = stage_value(stage_index);  // t % kStages
      int const next = t + Cfg::kStages - 1;
      // next % kStages, a constant too when the stage is one.
      constexpr bool kConstantStage = !std::is_same_v<decltype(stage_index), int>;
      int const next_stage =
          kConstantStage ? (stage + Cfg::kStages - 1) % Cfg::kStages : next % Cfg::kStages;

      std::uint32_t const a_stage = a_shared + stage * kAStageBytes;
      std::uint32_t const b_stage = b_shared + stage * kBStageBytes;
      // Fragments in two register buffers: the ldmatrix of k step s + 1 are issued before the
      // mma of step s, so their latency hides behind 32 mma instead of stalling the warp.
      std::uint32_t a[2][Cfg::kTilesM][4];
      std::uint32_t b[2][Cfg::kTilesN / 2][4];
      auto load_fragments = [&](int s, int buffer) {
#pragma unroll
        for (int i = 0; i < Cfg::kTilesM; ++i)
          gemm::ldmatrix_x4(a[buffer][i], a_stage + a_ldm[s] + i * 16 * Cfg::kBK * 2);
#pragma unroll
        for (int j = 0; j < Cfg::kTilesN / 2; ++j)
          gemm::ldmatrix_x4_trans(b[buffer][j], b_stage + b_ldm[j] + s * 16 * Cfg::kBN * 2);
      };
      load_fragments(0, 0);
#pragma unroll
      for (int s = 0; s < kKSteps; ++s) {
        if (s + 1 < kKSteps) load_fragments(s + 1, (s + 1) % 2);
        int const f = s % 2;
#pragma unroll
        for (int i = 0; i < Cfg::kTilesM; ++i) {
#pragma unroll
          for (int j = 0; j < Cfg::kTilesN; ++j)
            gemm::mma_bf16_16816(acc[i][j], a[f][i], b[f][j / 2][(j % 2) * 2],
                                 b[f][j / 2][(j % 2) * 2 + 1]);
          // The copies of tile `next`, a few behind each row of mma.sync. Issued in one burst
          // (16 per thread) they stall the warp: a cp.async holds its address registers until
          // the memory pipe takes it, the next address computed into the same registers waits
          // for that, and meanwhile only the other warp feeds the tensor pipe.
          if constexpr (kSpread) {
            int const row = s * Cfg::kTilesM + i;
#pragma unroll
            for (int c = row * kPerRow; c < (row + 1) * kPerRow; ++c) {
              if (c < LeanCopier<Cfg>::kChunks) {
                copier.template copy_chunk<true>(c, a_shared + next_stage * kAStageBytes,
                                                 b_shared + next_stage * kBStageBytes);
              }
            }
          }
        }
        if (!kSpread && s == 0) start_tile(next, next_stage);
      }
      if constexpr (kSpread) copier.advance();
      gemm::cp_async_commit();
    };

    // A whole block spreads the copies of every tile but its last kStages - 1, which have
    // nothing left to copy. The other blocks (at the edges, or all of them when K is not a
    // multiple of kBK) keep one burst: spreading their copies too, with byte counts, made
    // ptxas spill registers in the aligned kernel.
    int t = 0;
    if constexpr (kWholeBlock) {
      // Unrolled kStages times, so that each copy of compute_tile knows its stage at compile time:
      // every shared-memory address of the tile (its ldmatrix, and the copies into the stage of
      // tile t + kStages - 1) is then a register plus an immediate offset, and the loop has no
      // stage arithmetic left.
      for (; t + 2 * Cfg::kStages - 2 < full_tiles; t += Cfg::kStages) {
        unrolled_for<Cfg::kStages>(
            [&](auto stage) { compute_tile(t + decltype(stage)::value, std::true_type{}, stage); });
      }
      for (; t + Cfg::kStages - 1 < full_tiles; ++t)
        compute_tile(t, std::true_type{}, t % Cfg::kStages);
    }
    for (; t < k_tiles; ++t)
      compute_tile(t, std::false_type{}, t % Cfg::kStages);
  };
  bool const whole_block = kWholeBlocks && block_row + Cfg::kBM <= m && block_col + Cfg::kBN <= n;
  if (whole_block) {
    k_loop(std::true_type{});
  } else {
    k_loop(std::false_type{});
  }
  gemm::cp_async_wait<0>();  // nothing may be in flight when the block exits

  int const g = lane / 4;
  int const t2 = (lane % 4) * 2;
#pragma unroll
  for (int i = 0; i < Cfg::kTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < Cfg::kTilesN; ++j) {
      int const row = block_row + warp_row + i * 16 + g;
      int const col = block_col + warp_col + j * 8 + t2;
      if (row < m) {
        gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row) * ldc, col, n,
                                             acc[i][j][0], acc[i][j][1], alpha, beta);
      }
      if (row + 8 < m) {
        gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<size_t>(row + 8) * ldc, col, n,
                                             acc[i][j][2], acc[i][j][3], alpha, beta);
      }
    }
  }
}

// Launches the kernel of configuration Cfg. The stages live in dynamic shared memory; above the
// 48 KB a block gets by default the kernel must opt in, once per instantiation.
template <class Cfg>
void launch(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B, int ldb,
            float beta, bf16* C, int ldc, cudaStream_t stream) {
  gemm::check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  long long const tiles =
      static_cast<long long>(gemm::ceil_div(m, Cfg::kBM)) * gemm::ceil_div(n, Cfg::kBN);
  if (tiles > 0x7fffffffLL) throw std::invalid_argument("bf16_gemm: too many tiles for one grid");
  bool const aligned =
      gemm::rows_are_16_byte_aligned(A, lda) && gemm::rows_are_16_byte_aligned(B, ldb);
  bool const pairs = gemm::rows_are_aligned<4>(C, ldc);
  // When K is not a multiple of kBK no block can take the whole-block loop, so the kernel is
  // instantiated without it. Compiled into the same kernel, the unrolled loop's 255 registers
  // change how ptxas compiles the loop of the other blocks, which is then all that runs: that
  // loop is longer, and slower, than in this instantiation.
  bool const whole_blocks = aligned && k % Cfg::kBK == 0;
  gemm::dispatch_bool(aligned, [&](auto kAligned) {
    gemm::dispatch_bool(pairs, [&](auto kPairs) {
      gemm::dispatch_bool(whole_blocks, [&](auto kWholeBlocks) {
        constexpr bool kWhole = kAligned() && kWholeBlocks();
        auto const kernel = instruction_diet_kernel<Cfg, kAligned(), kPairs(), kWhole>;
        static cudaError_t const opt_in = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSharedBytes);
        if (opt_in != cudaSuccess) {
          throw std::runtime_error("bf16_gemm: this GPU cannot give a block " +
                                   std::to_string(Cfg::kSharedBytes) + " bytes of shared memory (" +
                                   cudaGetErrorString(opt_in) + ")");
        }
        kernel<<<static_cast<unsigned>(tiles), Cfg::kThreads, Cfg::kSharedBytes, stream>>>(
            m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
      });
    });
  });
  gemm::check_launch("bf16_gemm");
}

}  // namespace diet
