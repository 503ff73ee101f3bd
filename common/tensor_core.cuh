// Taught in step 15 (steps/15_mma_ldmatrix/), which writes these wrappers inline.
//
// The tensor-core instructions of sm_80 and later, as PTX: ldmatrix, which loads 8 x 8 tiles of
// 16-bit elements from shared memory straight into the register layout mma.sync expects, and
// mma.sync m16n8k16 with bf16 inputs and FP32 accumulators.
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
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "async_copy.cuh"

namespace gemm {

// Four 8 x 8 bf16 matrices from shared memory; `row` is the shared-state-space address of
// this lane's row (shared_address(pointer)). Kernels that work out their addresses once pass
// the number directly; the overloads below take a pointer.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

// The same, each matrix transposed on the way into the registers.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], void const* row_address) {
  ldmatrix_x4(r, shared_address(row_address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], void const* row_address) {
  ldmatrix_x4_trans(r, shared_address(row_address));
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

}  // namespace gemm
