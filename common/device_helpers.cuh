// Small device-side helpers that are not the lesson of any step.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gemm {

// Number of tiles of size `tile` needed to cover `extent` elements.
__host__ __device__ constexpr int ceil_div(int extent, int tile) {
  return (extent + tile - 1) / tile;
}

// The BLAS epilogue for one element: c = alpha * acc + beta * c.
// With beta == 0 the old value is never read, so NaN left in C cannot leak into the result.
__device__ __forceinline__ void store_scaled(float* c, float acc, float alpha, float beta) {
  *c = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * *c;
}

// A 2D grid of blocks_x * blocks_y blocks. CUDA allows up to 2^31 - 1 blocks in x but only
// 65535 in y; a problem that needs more block rows than that gets a clear error instead of a
// failed launch.
inline dim3 make_grid(int blocks_x, int blocks_y, char const* routine) {
  constexpr int kMaxGridY = 65535;
  if (blocks_y > kMaxGridY) {
    throw std::invalid_argument(std::string(routine) + ": the problem needs " +
                                std::to_string(blocks_y) + " blocks in grid y, CUDA allows " +
                                std::to_string(kMaxGridY));
  }
  return dim3(static_cast<unsigned>(blocks_x), static_cast<unsigned>(blocks_y));
}

}  // namespace gemm
