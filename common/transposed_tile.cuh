// Taught in step 26 (steps/26_fitted_tiles/), which writes this code inline.
//
// Tiles of C^T = B^T A^T: wgmma's A operand is a 64-column box of B (M-major, the "transposed"
// flag), its B operand a whole tile of A, kBM rows (K-major), so that wgmma's N counts rows of C
// and the tile height can be any multiple of 16 from 64 to 256 that has a wrapper below
// (common/wgmma.cuh defines N = 64, 96, 112 and 128 to 256 in steps of 16). The accumulators hold
// C^T; store_transposed_tile writes them back as rows of C with stmatrix .trans through a swizzled
// staging buffer, then with TMA stores or ordinary ones. Compiles only for sm_90a.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "async_copy.cuh"  // shared_address
#include "tma_store.cuh"
#include "wgmma.cuh"

namespace gemm::hopper::transposed {

inline constexpr int kBK = 64;         // k per stage
inline constexpr int kBoxN = 64;       // B boxes, and the columns of the pieces of C stored
inline constexpr int kPieceRows = 16;  // rows of one TMA store of C: kBM is a multiple of 16
inline constexpr int kGroupRows = 32;  // rows of C a consumer stages at a time (2 pieces, 4 KB)
inline constexpr int kWgmmaK = 16;
inline constexpr std::uint32_t kBBoxBytes = kBK * kBoxN * 2;
inline constexpr std::uint32_t kPieceBytes = kPieceRows * kBoxN * 2;  // 2 KB

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
  if constexpr (kBM == 112) wgmma_transposed_m64n112k16_bf16(acc, a, b);
  if constexpr (kBM == 96) wgmma_transposed_m64n96k16_bf16(acc, a, b);
  if constexpr (kBM == 64) wgmma_transposed_m64n64k16_bf16(acc, a, b);
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

// Stores four 8 x 8 bf16 matrices, each held as one register per thread in the mma
// fragment layout (thread t: row t / 4, columns 2 (t % 4), + 1), transposed: lane l gives the
// shared address of row l % 8 of matrix l / 8 of the result, i.e. of column l % 8 of the fragment.
__device__ __forceinline__ void stmatrix_x4_trans(std::uint32_t address, std::uint32_t r0,
                                                  std::uint32_t r1, std::uint32_t r2,
                                                  std::uint32_t r3) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address),
      "r"(r0), "r"(r1), "r"(r2), "r"(r3)
      : "memory");
}

// alpha * acc + beta * C[row][col] as bf16, reading C only when beta != 0 and only inside
// the matrix (the pieces of C staged for a TMA store may overhang it; TMA clips what lies outside).
__device__ __forceinline__ float scaled(__nv_bfloat16 const* C, int ldc, int row, int col, int m,
                                        int n, float acc, float alpha, float beta) {
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

// --- the epilogue -------------------------------------------------------------------------------

// One consumer's 64 columns x kBM rows of C (held as C^T) at (first_row, first_col): kGroupRows
// rows of C at a time into a swizzled staging buffer (rows of 128 bytes: this consumer's 64
// columns), then out. The accumulators' 8-column block j (of wgmma's N) is 8 rows of C: floats
// 4 j, 4 j + 1 are rows 8 j + t2, + 1 of column 16 warp + g, and floats 4 j + 2, 4 j + 3 the same
// rows of column 16 warp + g + 8. Packed in pairs, each half is one 8 x 8 mma fragment with C's
// columns as its rows: stmatrix .trans writes it back as 8 rows of C, each 8 columns (16 bytes)
// long. `groups` counts the groups this consumer has staged: it picks the buffer.
template <int kBM, Epilogue kEpilogue>
__device__ __forceinline__ void store_transposed_tile(
    CUtensorMap const* c_map, __nv_bfloat16 (&staging)[2][kGroupRows * kBoxN], int& groups,
    int consumer, __nv_bfloat16* C, int ldc, int m, int n, float alpha, float beta, int first_row,
    int first_col, float const (&acc)[kBM / 2]) {
  constexpr int kGroups = (kBM + kGroupRows - 1) / kGroupRows;
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
  for (int group = 0; group < kGroups; ++group, ++groups) {
    constexpr int kLastRows = kBM - (kGroups - 1) * kGroupRows;
    int const rows = group + 1 < kGroups ? kGroupRows : kLastRows;
    __nv_bfloat16* const buffer_pointer = staging[groups % 2];
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
      int const group_row = 16 * jj + 8 * (matrix / 2) + matrix_row;
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
        __nv_bfloat16 const* const values = reinterpret_cast<__nv_bfloat16 const*>(&chunk_value);
        __nv_bfloat16* const out = C + static_cast<size_t>(row) * ldc + col;
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

}  // namespace gemm::hopper::transposed
