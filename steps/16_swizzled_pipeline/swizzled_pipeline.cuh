// Step 16's kernel as a template over its tile configuration, so that a sweep (sweep.cu) can
// build many variants and swizzled_pipeline.cu can name the one it keeps.
//
// It is step 15's mma.sync + ldmatrix kernel with two changes:
//
//   1. Swizzled shared memory instead of padding. Padding spends shared memory and breaks the
//      power-of-two row length; an XOR swizzle keeps rows dense and moves each 16-byte chunk
//      of a row to chunk ^ f(row) instead, so the 8 rows one ldmatrix phase reads land in 8
//      different 16-byte bank groups (swizzled_chunk below).
//   2. A deeper pipeline, chosen by measurement: the tile (block, warp, k depth), the number of
//      stages and the group of the block order are template parameters (TileConfig), and a
//      sweep times the candidates. Dense tiles make room for more stages in the same shared
//      memory; the copies of a k tile are worked out once per thread (TileCopier, step 11's
//      idea for bf16 tiles), and the fragments of the next k step load while this one computes.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"
#include "tensor_core.cuh"

namespace swizzled {

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
// swizzled tiles; zeros outside A and B. kAligned: 16-byte cp.async copies (rows of A and B
// 16-byte aligned); otherwise element by element with ordinary loads and stores.
template <class Cfg, bool kAligned>
__device__ __forceinline__ void load_tile(bf16* a_tile, bf16* b_tile, bf16 const* __restrict__ A,
                                          int lda, bf16 const* __restrict__ B, int ldb, int m,
                                          int n, int k, int block_row, int block_col, int k0) {
  constexpr int kChunk = Cfg::kChunk;
  if constexpr (kAligned) {
#pragma unroll
    for (int i = 0; i < Cfg::kAStageElements / kChunk / Cfg::kThreads; ++i) {
      int const chunk = threadIdx.x + i * Cfg::kThreads;
      int const row = chunk / Cfg::kAChunksPerRow;
      int const col = (chunk % Cfg::kAChunksPerRow) * kChunk;
      int const global_row = block_row + row;
      int const global_col = k0 + col;
      int const valid = global_row < m ? max(0, min(kChunk, k - global_col)) : 0;
      bf16 const* src = valid > 0 ? A + static_cast<size_t>(global_row) * lda + global_col : A;
      gemm::cp_async_16(a_tile + swizzled_offset<Cfg::kAChunksPerRow>(row, col), src, 2 * valid);
    }
#pragma unroll
    for (int i = 0; i < Cfg::kBStageElements / kChunk / Cfg::kThreads; ++i) {
      int const chunk = threadIdx.x + i * Cfg::kThreads;
      int const row = chunk / Cfg::kBChunksPerRow;
      int const col = (chunk % Cfg::kBChunksPerRow) * kChunk;
      int const global_row = k0 + row;
      int const global_col = block_col + col;
      int const valid = global_row < k ? max(0, min(kChunk, n - global_col)) : 0;
      bf16 const* src = valid > 0 ? B + static_cast<size_t>(global_row) * ldb + global_col : B;
      gemm::cp_async_16(b_tile + swizzled_offset<Cfg::kBChunksPerRow>(row, col), src, 2 * valid);
    }
  } else {
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
}

// The copies of a full k tile, worked out once per thread before the k loop (step 11's
// TileCopier, for bf16 tiles): each chunk's source pointer, its swizzled destination and how many
// of its bytes lie inside the matrix. Inside the loop a chunk is then one cp.async and one pointer
// increment. A full tile needs no K test; rows past m and columns past n were settled here: their
// byte counts are 0 (or fewer than 16 at B's right edge) and their pointers stay inside row 0 of
// A or column 0 of B, valid addresses that are never read. The last k tile, if K leaves it
// partial, goes through load_tile instead.
template <class Cfg>
struct TileCopier {
  static constexpr int kAChunks = Cfg::kAStageElements / Cfg::kChunk / Cfg::kThreads;
  static constexpr int kBChunks = Cfg::kBStageElements / Cfg::kChunk / Cfg::kThreads;
  bf16 const* a_src[kAChunks];
  std::uint32_t a_dst[kAChunks];  // byte offset in a stage's A tile
  int a_bytes[kAChunks];
  bf16 const* b_src[kBChunks];
  std::uint32_t b_dst[kBChunks];
  int b_bytes[kBChunks];
  size_t b_advance;  // kBK rows of B

  __device__ TileCopier(bf16 const* A, int lda, bf16 const* B, int ldb, int m, int n, int block_row,
                        int block_col)
      : b_advance(static_cast<size_t>(Cfg::kBK) * ldb) {
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      int const chunk = threadIdx.x + i * Cfg::kThreads;
      int const row = chunk / Cfg::kAChunksPerRow;
      int const col = (chunk % Cfg::kAChunksPerRow) * Cfg::kChunk;
      bool const inside = block_row + row < m;
      a_src[i] = A + (inside ? static_cast<size_t>(block_row + row) * lda : 0) + col;
      a_dst[i] = 2 * swizzled_offset<Cfg::kAChunksPerRow>(row, col);
      a_bytes[i] = inside ? 16 : 0;
    }
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      int const chunk = threadIdx.x + i * Cfg::kThreads;
      int const row = chunk / Cfg::kBChunksPerRow;
      int const col = (chunk % Cfg::kBChunksPerRow) * Cfg::kChunk;
      int const valid = max(0, min(Cfg::kChunk, n - (block_col + col)));
      b_src[i] = B + static_cast<size_t>(row) * ldb + (valid > 0 ? block_col + col : 0);
      b_dst[i] = 2 * swizzled_offset<Cfg::kBChunksPerRow>(row, col);
      b_bytes[i] = 2 * valid;
    }
  }

  // Copies the next full k tile into the stage at shared addresses a_stage, b_stage.
  __device__ __forceinline__ void copy_and_advance(std::uint32_t a_stage, std::uint32_t b_stage) {
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      gemm::cp_async_16(a_stage + a_dst[i], a_src[i], a_bytes[i]);
      a_src[i] += Cfg::kBK;
    }
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      gemm::cp_async_16(b_stage + b_dst[i], b_src[i], b_bytes[i]);
      b_src[i] += b_advance;
    }
  }
};

template <class Cfg, bool kAligned, bool kPairs>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSM)
    swizzled_pipeline_kernel(int m, int n, int k, float alpha, bf16 const* __restrict__ A, int lda,
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
  TileCopier<Cfg> copier(A, lda, B, ldb, m, n, block_row, block_col);
  // Starts the copies of k tile `tile` into `stage`: full tiles through the copier, a partial
  // last tile (or every tile, on the unaligned path) through load_tile.
  auto start_tile = [&](int tile, int stage) {
    if (kAligned && tile < full_tiles) {
      copier.copy_and_advance(a_shared + stage * kAStageBytes, b_shared + stage * kBStageBytes);
    } else if (tile < k_tiles) {
      load_tile<Cfg, kAligned>(a_tile(stage), b_tile(stage), A, lda, B, ldb, m, n, k, block_row,
                               block_col, tile * Cfg::kBK);
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

  for (int t = 0; t < k_tiles; ++t) {
    gemm::cp_async_wait<Cfg::kStages - 2>();
    // Tile t is visible to every warp, and every warp has finished tile t - 1, whose stage the
    // copies below refill.
    __syncthreads();
    int const next = t + Cfg::kStages - 1;
    start_tile(next, next % Cfg::kStages);
    gemm::cp_async_commit();

    int const stage = t % Cfg::kStages;
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
      }
    }
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
  gemm::dispatch_bool(aligned, [&](auto kAligned) {
    gemm::dispatch_bool(pairs, [&](auto kPairs) {
      auto const kernel = swizzled_pipeline_kernel<Cfg, kAligned(), kPairs()>;
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
  gemm::check_launch("bf16_gemm");
}

}  // namespace swizzled
