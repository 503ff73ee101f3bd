// Tensor maps for TMA (steps 18 and later). A tensor map is a 128-byte descriptor of a matrix in
// global memory (base address, sizes, row pitch) and of the box one copy moves into shared
// memory (its sizes and swizzle). It is built on the host, once per call, and passed to the
// kernel by value as a `const __grid_constant__ CUtensorMap` parameter.
#pragma once

#include <cuda.h>

namespace gemm {

// The map of a row-major bf16 matrix of rows x cols with leading dimension ld, read in boxes of
// box_rows x box_cols elements (box_cols * 2 <= 128 bytes), stored in shared memory with the
// 128-byte swizzle. Reads outside rows x cols return zeros. TMA needs the base address 16-byte
// aligned and the row pitch a multiple of 16 bytes, i.e. gemm::rows_are_16_byte_aligned(data,
// ld) (device_helpers.cuh; aligned_operand.cuh makes a copy that qualifies). `promotion` is the
// L2 promotion, how wide a block the L2 fetches for a read that misses it: 256 bytes unless a
// step says otherwise (step 37 promotes 128 where rows do not start on 128-byte lines).
// `swizzle` is the layout of the box in shared memory: the 128-byte swizzle unless a step says
// otherwise (step 39 stores a 16-column piece of C, 32-byte rows, unswizzled). Throws
// std::runtime_error if the driver refuses the map.
CUtensorMap make_bf16_tensor_map(
    void const* data, int rows, int cols, long long ld, int box_rows, int box_cols,
    CUtensorMapL2promotion promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B);

// The same for a row-major matrix of one-byte elements (FP8, steps 29 on), read as bytes: TMA
// moves bits and zero-fills outside the matrix, and the 128-byte swizzle spans 128 elements. TMA
// needs the base 16-byte aligned and ld a multiple of 16.
CUtensorMap make_fp8_tensor_map(void const* data, int rows, int cols, long long ld, int box_rows,
                                int box_cols);

}  // namespace gemm
