// Step 15: mma.sync and ldmatrix: the tensor-core instruction without WMMA's wrapper.
//
// Step 14's WMMA keeps the fragment layout secret. Its loads are already ldmatrix (step 14 writes
// them in PTX for that), but the epilogue has to pass every accumulator through shared memory to
// learn which element a lane holds, and the k loop around the loads spends more instructions than
// it needs. PTX documents the layout (drawn below, with the wrappers), so this step writes the two
// instructions by hand:
//
//   ldmatrix.x4        four 8 x 8 bf16 tiles from shared memory into registers, already in the
//                      layout mma.sync wants (.trans for B, whose shared rows run along N):
//                      one instruction for what WMMA loads with several
//   mma.sync m16n8k16  D (16 x 8, FP32) += A (16 x 16, bf16) * B (16 x 8, bf16), one warp
//
// and the epilogue writes the accumulators straight from the registers, two bf16 at a time.
// Everything else is step 14's: the 128 x 128 x 32 block tile, 4 warps of 64 x 64 (4 x 8 mma
// tiles of 16 x 8, 128 FP32 accumulators per lane), the padding, the copies, the three-stage
// cp.async pipeline with one barrier per k tile and the grouped block order.
//
// Per warp and 16 of k: 4 ldmatrix.x4 for A (one per 16 rows), 4 ldmatrix.x4.trans for B (one
// per 16 columns), 32 mma.sync.
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "device_helpers.cuh"
#include "gemm.h"

namespace {

using bf16 = __nv_bfloat16;

// --- ldmatrix and mma.sync, as PTX (later steps include these from common/tensor_core.cuh) ------
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D (16 x 8) = A (16 x 16) * B (16 x 8) + C,
// one warp, registers only. With g = lane / 4 (the "group", 0..7) and t = lane % 4:
//
//   A, 4 registers of 2 bf16:   a0 = A[g][2t, 2t+1]      a1 = A[g+8][2t, 2t+1]
//                               a2 = A[g][2t+8, 2t+9]    a3 = A[g+8][2t+8, 2t+9]
//   B, 2 registers of 2 bf16:   b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]
//   C and D, 4 floats:          c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
//
// ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8 x 8 matrices of 16-bit elements; lane l gives
// the shared address of one row (16 bytes) of matrix l / 8, and receives, in register i, the two
// elements (row l / 4, columns 2 (l % 4), +1) of matrix i. That is exactly a0..a3 above when
// the four matrices are A's quadrants in the order top-left, bottom-left, top-right,
// bottom-right. With .trans each matrix is transposed on the way: lane l receives (rows
// 2 (l % 4), +1; column l / 4), which is b0 (and b1) when the rows in shared memory are rows
// of a row-major B, k by k.

// Four 8 x 8 bf16 matrices from shared memory; `row_address` is this lane's row.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], void const* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(gemm::shared_address(row_address)));
}

// The same, each matrix transposed on the way into the registers.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], void const* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(gemm::shared_address(row_address)));
}

// d += a * b for one 16 x 8 x 16 tile: bf16 inputs, FP32 accumulators (layouts above).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], std::uint32_t const (&a)[4],
                                               std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// --- the kernel ---------------------------------------------------------------------------------

constexpr int kBM = 128;
constexpr int kBN = 128;
constexpr int kBK = 32;
constexpr int kStages = 3;  // shared buffers (step 14's pipeline)
constexpr int kGroupM = 8;  // tile rows per group of the block order (step 13)
constexpr int kWarpsM = 2;
constexpr int kWarpsN = 2;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;  // 128
constexpr int kWM = kBM / kWarpsM;                // 64
constexpr int kWN = kBN / kWarpsN;                // 64
constexpr int kTilesM = kWM / 16;                 // 4 mma tiles of 16 rows
constexpr int kTilesN = kWN / 8;                  // 8 mma tiles of 8 columns

constexpr int kPad = 8;
constexpr int kAStride = kBK + kPad;  // 40 bf16 = 80 bytes: 8 rows hit 8 different bank groups
constexpr int kBStride = kBN + kPad;  // 136 bf16 = 272 bytes: likewise

constexpr int kChunk = 8;                                         // bf16 per 16-byte copy
constexpr int kAChunksPerThread = kBM * kBK / kChunk / kThreads;  // 4
constexpr int kBChunksPerThread = kBK * kBN / kChunk / kThreads;  // 4
static_assert(kAChunksPerThread * kChunk * kThreads == kBM * kBK, "A copies must divide evenly");
static_assert(kBChunksPerThread * kChunk * kThreads == kBK * kBN, "B copies must divide evenly");

struct SharedTiles {
  bf16 a[kStages][kBM][kAStride];  // 30,720 bytes
  bf16 b[kStages][kBK][kBStride];  // 26,112 bytes
};

// Step 14's tile copy: one k tile of A and B into the buffers of `stage`, zeros outside.
template <bool kAligned>
__device__ void load_tile(SharedTiles& s, int stage, bf16 const* __restrict__ A, int lda,
                          bf16 const* __restrict__ B, int ldb, int m, int n, int k, int block_row,
                          int block_col, int k0) {
  if constexpr (kAligned) {
#pragma unroll
    for (int i = 0; i < kAChunksPerThread; ++i) {
      int const chunk = threadIdx.x + i * kThreads;
      int const row = chunk / (kBK / kChunk);
      int const col = (chunk % (kBK / kChunk)) * kChunk;
      int const global_row = block_row + row;
      int const global_col = k0 + col;
      int const valid = global_row < m ? max(0, min(kChunk, k - global_col)) : 0;
      bf16 const* src = valid > 0 ? A + static_cast<size_t>(global_row) * lda + global_col : A;
      gemm::cp_async_16(&s.a[stage][row][col], src, 2 * valid);
    }
#pragma unroll
    for (int i = 0; i < kBChunksPerThread; ++i) {
      int const chunk = threadIdx.x + i * kThreads;
      int const row = chunk / (kBN / kChunk);
      int const col = (chunk % (kBN / kChunk)) * kChunk;
      int const global_row = k0 + row;
      int const global_col = block_col + col;
      int const valid = global_row < k ? max(0, min(kChunk, n - global_col)) : 0;
      bf16 const* src = valid > 0 ? B + static_cast<size_t>(global_row) * ldb + global_col : B;
      gemm::cp_async_16(&s.b[stage][row][col], src, 2 * valid);
    }
  } else {
    bf16 const zero = __float2bfloat16(0.0f);
    for (int e = threadIdx.x; e < kBM * kBK; e += kThreads) {
      int const row = e / kBK;
      int const col = e % kBK;
      int const global_row = block_row + row;
      int const global_col = k0 + col;
      s.a[stage][row][col] = global_row < m && global_col < k
                                 ? A[static_cast<size_t>(global_row) * lda + global_col]
                                 : zero;
    }
    for (int e = threadIdx.x; e < kBK * kBN; e += kThreads) {
      int const row = e / kBN;
      int const col = e % kBN;
      int const global_row = k0 + row;
      int const global_col = block_col + col;
      s.b[stage][row][col] = global_row < k && global_col < n
                                 ? B[static_cast<size_t>(global_row) * ldb + global_col]
                                 : zero;
    }
  }
}

template <bool kAligned, bool kPairs>
__global__ void __launch_bounds__(kThreads)
    mma_ldmatrix_gemm_kernel(int m, int n, int k, float alpha, bf16 const* __restrict__ A, int lda,
                             bf16 const* __restrict__ B, int ldb, float beta, bf16* __restrict__ C,
                             int ldc) {
  // 56,832 bytes of tiles: more than the 48 KB of static shared memory a block may have, so
  // they live in dynamic shared memory, sized and opted into by the launcher.
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  SharedTiles& s = *reinterpret_cast<SharedTiles*>(shared_bytes);

  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const warp_row = (warp / kWarpsN) * kWM;
  int const warp_col = (warp % kWarpsN) * kWN;
  int tile_m = 0;
  int tile_n = 0;
  gemm::grouped_tile(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, kGroupM, tile_m,
                     tile_n);
  int const block_row = tile_m * kBM;
  int const block_col = tile_n * kBN;

  // The row each lane addresses for ldmatrix.x4: lanes 0-15 rows 0-15 of the first 8 columns,
  // lanes 16-31 the same rows 8 columns on. For A that yields a0..a3 of a 16 x 16 tile; for
  // B (.trans, rows along k) b0, b1 of two adjacent 8-column tiles (the layouts above).
  int const ld_row = lane % 16;
  int const ld_col = (lane / 16) * 8;

  float acc[kTilesM][kTilesN][4] = {};

  int const k_tiles = gemm::ceil_div(k, kBK);
  // Step 14's pipeline: kStages - 1 tiles in flight, one barrier per k tile.
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < k_tiles) {
      load_tile<kAligned>(s, stage, A, lda, B, ldb, m, n, k, block_row, block_col, stage * kBK);
    }
    gemm::cp_async_commit();
  }

  for (int t = 0; t < k_tiles; ++t) {
    gemm::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t has arrived for every warp; every warp is done with tile t - 1
    int const next = t + kStages - 1;
    if (next < k_tiles) {
      load_tile<kAligned>(s, next % kStages, A, lda, B, ldb, m, n, k, block_row, block_col,
                          next * kBK);
    }
    gemm::cp_async_commit();

    int const stage = t % kStages;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      std::uint32_t a[kTilesM][4];
      std::uint32_t b[kTilesN / 2][4];  // each ldmatrix.x4.trans: b0, b1 of two 8-column tiles
#pragma unroll
      for (int i = 0; i < kTilesM; ++i)
        ldmatrix_x4(a[i], &s.a[stage][warp_row + i * 16 + ld_row][kk + ld_col]);
#pragma unroll
      for (int j = 0; j < kTilesN / 2; ++j)
        ldmatrix_x4_trans(b[j], &s.b[stage][kk + ld_row][warp_col + j * 16 + ld_col]);
#pragma unroll
      for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
        for (int j = 0; j < kTilesN; ++j)
          mma_bf16_16816(acc[i][j], a[i], b[j / 2][(j % 2) * 2], b[j / 2][(j % 2) * 2 + 1]);
      }
    }
  }
  gemm::cp_async_wait<0>();  // only empty groups can be pending here; none may be at exit

  // Epilogue straight from the registers: lane (g, t) holds rows g and g + 8, columns 2t and
  // 2t + 1 of every 16 x 8 tile.
  int const g = lane / 4;
  int const t2 = (lane % 4) * 2;
#pragma unroll
  for (int i = 0; i < kTilesM; ++i) {
#pragma unroll
    for (int j = 0; j < kTilesN; ++j) {
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

}  // namespace

void gemm::bf16_gemm(int m, int n, int k, float alpha, bf16 const* A, int lda, bf16 const* B,
                     int ldb, float beta, bf16* C, int ldc, cudaStream_t stream) {
  check_gemm_arguments("bf16_gemm", m, n, k, A, lda, B, ldb, C, ldc);
  dim3 const grid = make_grid(ceil_div(n, kBN), ceil_div(m, kBM), "bf16_gemm");
  bool const aligned = rows_are_16_byte_aligned(A, lda) && rows_are_16_byte_aligned(B, ldb);
  bool const pairs = rows_are_aligned<4>(C, ldc);
  dispatch_bool(aligned, [&](auto kAligned) {
    dispatch_bool(pairs, [&](auto kPairs) {
      auto const kernel = mma_ldmatrix_gemm_kernel<kAligned(), kPairs()>;
      constexpr int kSharedBytes = sizeof(SharedTiles);
      static cudaError_t const opt_in =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
      if (opt_in != cudaSuccess) {
        throw std::runtime_error("bf16_gemm: this GPU cannot give a block " +
                                 std::to_string(kSharedBytes) + " bytes of shared memory (" +
                                 cudaGetErrorString(opt_in) + ")");
      }
      kernel<<<grid, kThreads, kSharedBytes, stream>>>(m, n, k, alpha, A, lda, B, ldb, beta, C,
                                                       ldc);
    });
  });
  check_launch("bf16_gemm");
}
