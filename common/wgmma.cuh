// Taught in step 18 (steps/18_tma_wgmma/), which writes the descriptor, the fence, commit and wait
// and its one wgmma inline.
//
// wgmma, warpgroup MMA: the 4 warps of a warpgroup (128 threads) together multiply a 64 x N x 16
// block, A and B read straight from shared memory through 64-bit matrix descriptors, the
// accumulators in registers, asynchronously: issue, commit as a group, wait for the group later.
// Compiles only for sm_90a.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "device_helpers.cuh"  // store_scaled_bf16_pair

namespace gemm::hopper {

// A shared-memory matrix descriptor for a tile stored with the 128-byte swizzle (what TMA writes
// with CU_TENSOR_MAP_SWIZZLE_128B):
//
//   bits  0-13  start address >> 4 (the low 18 bits of the shared address)
//   bits 16-29  leading dimension byte offset >> 4
//   bits 32-45  stride dimension byte offset >> 4 (8-row groups of 128 bytes: 1024)
//   bits 49-51  base offset: where the start lies within the swizzle pattern, which repeats every
//               8 rows of 128 bytes (1024 bytes); (start >> 7) % 8 when the tile's base is not
//               1024-byte aligned
//   bits 62-63  swizzle mode (1 = 128 bytes)
//
// Every tile here starts on a 1024-byte boundary, so the base offset is 0 and left out. A start
// inside the tile that keeps bits 7-9 of the address (the next 16 k of a K-major tile, 32 bytes
// further, or a 64-row half 8 KB further) needs no base offset either: the hardware applies the
// swizzle to the final addresses.
__device__ __forceinline__ std::uint64_t swizzle128_descriptor(std::uint32_t start,
                                                               std::uint32_t leading_bytes,
                                                               std::uint32_t stride_bytes) {
  return static_cast<std::uint64_t>((start & 0x3FFFF) >> 4) |
         static_cast<std::uint64_t>(leading_bytes >> 4) << 16 |
         static_cast<std::uint64_t>(stride_bytes >> 4) << 32 | 1ull << 62;
}

// Orders this thread's earlier register accesses before the wgmma that follow (needed before
// the first wgmma of a batch, since the accumulators are registers wgmma reads asynchronously).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

// Closes the wgmma issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most `kPending` committed groups are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// The accumulator layout of wgmma m64nNk16 (f32): warp w of the warpgroup owns rows
// 16 w .. 16 w + 15; within them each 8-column block j is laid out as one mma.sync m16n8 tile
// (tensor_core.cuh): with g = lane / 4 and t = lane % 4, floats 4 j + 0, 1 are row g,
// columns 8 j + 2 t, +1, and floats 4 j + 2, 3 are row g + 8, the same columns.
//
// Each wrapper below is one instruction. For N = 128, wgmma_m64n128k16_bf16 is
//
//   asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
//                "{%0, %1, ..., %63}, %64, %65, 1, 1, 1, 0, 1;\n"
//                : "+f"(d[0]), "+f"(d[1]), ..., "+f"(d[63])
//                : "l"(a_descriptor), "l"(b_descriptor));
//
// Inline PTX names every accumulator register, N / 2 of them, so the lists are spelled by the
// macros GEMM_WGMMA_REGS_R ("%0, ..., %R-1") and GEMM_WGMMA_D_R ("+f"(d[0]) ... "+f"(d[R-1])),
// 8 at a time. The trailing immediates: scale-d = 1 (D += A * B), scale-a = scale-b = 1, then
// whether A and B are transposed.
//
//   wgmma_m64nNk16_bf16: "0, 1". A is K-major (a row of the row-major A is
//     contiguous along k), B transposed, N-major (a row of the row-major B is contiguous along
//     n). D (64 x N) += A (64 x 16) * B (16 x N).
//   wgmma_transposed_m64nNk16_bf16: "1, 0", the layouts the other way round: A M-major (a
//     column of the 64 x 16 A is contiguous) and B K-major; with them a kernel can compute tiles
//     of C^T = B^T A^T (step 26).
// clang-format off
#define GEMM_WGMMA_REGS_8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define GEMM_WGMMA_REGS_16 GEMM_WGMMA_REGS_8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define GEMM_WGMMA_REGS_24 GEMM_WGMMA_REGS_16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define GEMM_WGMMA_REGS_32 GEMM_WGMMA_REGS_24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define GEMM_WGMMA_REGS_40 GEMM_WGMMA_REGS_32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define GEMM_WGMMA_REGS_48 GEMM_WGMMA_REGS_40 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define GEMM_WGMMA_REGS_56 GEMM_WGMMA_REGS_48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define GEMM_WGMMA_REGS_64 GEMM_WGMMA_REGS_56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define GEMM_WGMMA_REGS_72 GEMM_WGMMA_REGS_64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define GEMM_WGMMA_REGS_80 GEMM_WGMMA_REGS_72 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define GEMM_WGMMA_REGS_88 GEMM_WGMMA_REGS_80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define GEMM_WGMMA_REGS_96 GEMM_WGMMA_REGS_88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define GEMM_WGMMA_REGS_104 GEMM_WGMMA_REGS_96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define GEMM_WGMMA_REGS_112 GEMM_WGMMA_REGS_104 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define GEMM_WGMMA_REGS_120 GEMM_WGMMA_REGS_112 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define GEMM_WGMMA_REGS_128 GEMM_WGMMA_REGS_120 ", %120, %121, %122, %123, %124, %125, %126, %127"

#define GEMM_WGMMA_D8(i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
  "+f"(d[i + 6]), "+f"(d[i + 7])
#define GEMM_WGMMA_D_8 GEMM_WGMMA_D8(0)
#define GEMM_WGMMA_D_16 GEMM_WGMMA_D_8, GEMM_WGMMA_D8(8)
#define GEMM_WGMMA_D_24 GEMM_WGMMA_D_16, GEMM_WGMMA_D8(16)
#define GEMM_WGMMA_D_32 GEMM_WGMMA_D_24, GEMM_WGMMA_D8(24)
#define GEMM_WGMMA_D_40 GEMM_WGMMA_D_32, GEMM_WGMMA_D8(32)
#define GEMM_WGMMA_D_48 GEMM_WGMMA_D_40, GEMM_WGMMA_D8(40)
#define GEMM_WGMMA_D_56 GEMM_WGMMA_D_48, GEMM_WGMMA_D8(48)
#define GEMM_WGMMA_D_64 GEMM_WGMMA_D_56, GEMM_WGMMA_D8(56)
#define GEMM_WGMMA_D_72 GEMM_WGMMA_D_64, GEMM_WGMMA_D8(64)
#define GEMM_WGMMA_D_80 GEMM_WGMMA_D_72, GEMM_WGMMA_D8(72)
#define GEMM_WGMMA_D_88 GEMM_WGMMA_D_80, GEMM_WGMMA_D8(80)
#define GEMM_WGMMA_D_96 GEMM_WGMMA_D_88, GEMM_WGMMA_D8(88)
#define GEMM_WGMMA_D_104 GEMM_WGMMA_D_96, GEMM_WGMMA_D8(96)
#define GEMM_WGMMA_D_112 GEMM_WGMMA_D_104, GEMM_WGMMA_D8(104)
#define GEMM_WGMMA_D_120 GEMM_WGMMA_D_112, GEMM_WGMMA_D8(112)
#define GEMM_WGMMA_D_128 GEMM_WGMMA_D_120, GEMM_WGMMA_D8(120)

// Defines one wrapper: NAME for width N (R = N / 2 accumulators per thread; DESCRIPTORS names the
// two descriptor operands, %R and %R+1; TRANSPOSES is the last two immediates).
#define GEMM_DEFINE_WGMMA(NAME, N, R, DESCRIPTORS, TRANSPOSES)                                     \
  __device__ __forceinline__ void NAME(float (&d)[R], std::uint64_t a_descriptor,                  \
                                       std::uint64_t b_descriptor) {                               \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 "                       \
                 "{" GEMM_WGMMA_REGS_##R "}, " DESCRIPTORS ", 1, 1, 1, " TRANSPOSES ";\n"          \
                 : GEMM_WGMMA_D_##R                                                                \
                 : "l"(a_descriptor), "l"(b_descriptor));                                          \
  }

// Defines both wrappers for width N.
#define GEMM_DEFINE_WGMMA_BF16(N, R, DESCRIPTORS)                                                  \
  GEMM_DEFINE_WGMMA(wgmma_m64n##N##k16_bf16, N, R, DESCRIPTORS, "0, 1")                            \
  GEMM_DEFINE_WGMMA(wgmma_transposed_m64n##N##k16_bf16, N, R, DESCRIPTORS, "1, 0")

GEMM_DEFINE_WGMMA_BF16(64, 32, "%32, %33")
GEMM_DEFINE_WGMMA_BF16(96, 48, "%48, %49")
GEMM_DEFINE_WGMMA_BF16(112, 56, "%56, %57")
GEMM_DEFINE_WGMMA_BF16(128, 64, "%64, %65")
GEMM_DEFINE_WGMMA_BF16(144, 72, "%72, %73")
GEMM_DEFINE_WGMMA_BF16(160, 80, "%80, %81")
GEMM_DEFINE_WGMMA_BF16(176, 88, "%88, %89")
GEMM_DEFINE_WGMMA_BF16(192, 96, "%96, %97")
GEMM_DEFINE_WGMMA_BF16(208, 104, "%104, %105")
GEMM_DEFINE_WGMMA_BF16(224, 112, "%112, %113")
GEMM_DEFINE_WGMMA_BF16(240, 120, "%120, %121")
GEMM_DEFINE_WGMMA_BF16(256, 128, "%128, %129")
// clang-format on

// The epilogue of step 18, for one warpgroup's 64 x kWidth accumulators (the layout above): rows
// first_row .. + 63 and columns first_col .. + kWidth - 1 of C get alpha * acc + beta * C, stored
// straight from the registers, two bf16 at a time where kPairs (C's rows 4-byte aligned).
template <int kWidth, bool kPairs>
__device__ __forceinline__ void store_accumulators(__nv_bfloat16* C, int ldc, int m, int n,
                                                   float alpha, float beta, int first_row,
                                                   int first_col, float const (&acc)[kWidth / 2]) {
  int const lane = threadIdx.x % 32;
  int const row = first_row + (threadIdx.x / 32) % 4 * 16 + lane / 4;
  int const t2 = (lane % 4) * 2;
#pragma unroll
  for (int j = 0; j < kWidth / 8; ++j) {
    int const col = first_col + j * 8 + t2;
    if (row < m) {
      gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<std::size_t>(row) * ldc, col, n,
                                           acc[4 * j], acc[4 * j + 1], alpha, beta);
    }
    if (row + 8 < m) {
      gemm::store_scaled_bf16_pair<kPairs>(C + static_cast<std::size_t>(row + 8) * ldc, col, n,
                                           acc[4 * j + 2], acc[4 * j + 3], alpha, beta);
    }
  }
}

}  // namespace gemm::hopper
