// Small device-side helpers that are not the lesson of any step.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// Whether kBytes-wide accesses are legal on a row-major matrix of T: the pointer is kBytes
// aligned and every row starts kBytes aligned (ld x sizeof(T) a multiple of kBytes).
template <int kBytes, typename T>
inline bool rows_are_aligned(T const* pointer, int ld) {
  return reinterpret_cast<std::uintptr_t>(pointer) % kBytes == 0 &&
         static_cast<std::size_t>(ld) * sizeof(T) % kBytes == 0;
}

// Whether 16-byte accesses (a float4, or 8 bf16) are legal: for floats the leading dimension
// must be a multiple of 4, for bf16 a multiple of 8.
template <typename T>
inline bool rows_are_16_byte_aligned(T const* pointer, int ld) {
  return rows_are_aligned<16>(pointer, ld);
}

// The fast-path test of steps 06-09: A, B and C can all be read and written with float4.
inline bool all_rows_16_byte_aligned(float const* A, int lda, float const* B, int ldb,
                                     float const* C, int ldc) {
  return rows_are_16_byte_aligned(A, lda) && rows_are_16_byte_aligned(B, ldb) &&
         rows_are_16_byte_aligned(C, ldc);
}

// Step 13's grouped block order, for the steps after it (step 13 writes it out and explains
// it): maps a linear tile index to (tile_m, tile_n) so that indices run down `group_m` tile rows
// before moving one column right; the blocks in flight together then cover a compact patch of C
// and share A and B panels in L2. group_m = 1 is plain row-major order.
__device__ __forceinline__ void grouped_tile(int tile, int tiles_m, int tiles_n, int group_m,
                                             int& tile_m, int& tile_n) {
  int const tiles_per_group = group_m * tiles_n;
  int const first_m = (tile / tiles_per_group) * group_m;
  int const rows_in_group = min(tiles_m - first_m, group_m);  // the last group may be short
  int const within = tile % tiles_per_group;
  tile_m = first_m + within % rows_in_group;
  tile_n = within / rows_in_group;
}

// Turns a run-time flag into a compile-time one: calls launch(std::true_type{}) or
// launch(std::false_type{}), so that a generic lambda can instantiate the right kernel,
//   dispatch_bool(aligned, [&](auto kAligned) { kernel<kAligned()><<<...>>>(...); });
// Step 06 writes the if/else out; the later steps use this for the same choice.
template <typename Launch>
void dispatch_bool(bool flag, Launch&& launch) {
  if (flag) {
    launch(std::true_type{});
  } else {
    launch(std::false_type{});
  }
}

// The same for a choice among compile-time values: calls launch(std::integral_constant<T, v>{})
// for the one kValues entry v equal to `value` (and nothing if none is), e.g.
//   dispatch_value<256, 192, 128>(width, [&](auto kWidth) { launch<kWidth()>(...); });
template <auto... kValues, typename T, typename Launch>
void dispatch_value(T value, Launch&& launch) {
  ((value == kValues ? launch(std::integral_constant<decltype(kValues), kValues>{}) : void()), ...);
}

// Reads the 4 floats row[col .. col+3], with zeros for the ones at or beyond `cols`.
// kVector: the row is 16-byte aligned (rows_are_16_byte_aligned) and col a multiple of 4, so a
// full group is one 16-byte load; otherwise, and for a partial group, 4 guarded scalar loads.
template <bool kVector>
__device__ __forceinline__ float4 load_float4_or_zero(float const* row, int col, int cols) {
  if (kVector && col + 3 < cols) return *reinterpret_cast<float4 const*>(row + col);
  float4 v;
  v.x = col + 0 < cols ? row[col + 0] : 0.0f;
  v.y = col + 1 < cols ? row[col + 1] : 0.0f;
  v.z = col + 2 < cols ? row[col + 2] : 0.0f;
  v.w = col + 3 < cols ? row[col + 3] : 0.0f;
  return v;
}

// The epilogue for 4 consecutive elements row[col .. col+3]: c = alpha * acc + beta * c for
// those below `cols`. kVector as in load_float4_or_zero: one 16-byte store (and load, when
// beta != 0) for a full group.
template <bool kVector>
__device__ __forceinline__ void store_scaled_float4(float* row, int col, int cols, float4 acc,
                                                    float alpha, float beta) {
  if (kVector && col + 3 < cols) {
    float4* out = reinterpret_cast<float4*>(row + col);
    float4 r = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.0f) {
      float4 const old = *out;
      r.x += beta * old.x;
      r.y += beta * old.y;
      r.z += beta * old.z;
      r.w += beta * old.w;
    }
    *out = r;
    return;
  }
  float const values[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (col + i < cols) store_scaled(row + col + i, values[i], alpha, beta);
  }
}

// The BF16 epilogue for row[col], row[col + 1]: c = alpha * acc + beta * c in FP32, rounded once
// to bf16, for those below `cols`. kPairs: the row is 4-byte aligned (rows_are_aligned<4>) and col
// even, so a full pair is one 4-byte load and store; otherwise single elements. With beta == 0
// the old values are never read.
template <bool kPairs>
__device__ __forceinline__ void store_scaled_bf16_pair(__nv_bfloat16* row, int col, int cols,
                                                       float acc0, float acc1, float alpha,
                                                       float beta) {
  __nv_bfloat16* out = row + col;
  if (kPairs && col + 1 < cols) {
    float2 value = make_float2(alpha * acc0, alpha * acc1);
    if (beta != 0.0f) {
      float2 const old = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 const*>(out));
      value.x += beta * old.x;
      value.y += beta * old.y;
    }
    *reinterpret_cast<__nv_bfloat162*>(out) = __float22bfloat162_rn(value);
    return;
  }
  float const values[2] = {acc0, acc1};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (col + i < cols) {
      float value = alpha * values[i];
      if (beta != 0.0f) value += beta * __bfloat162float(out[i]);
      out[i] = __float2bfloat16_rn(value);
    }
  }
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
