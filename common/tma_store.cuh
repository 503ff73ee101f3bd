// Taught in step 24 (steps/24_tma_store_epilogue/), which writes these functions inline.
//
// The reverse direction of TMA: a box of shared memory copied to global memory, with what lies
// outside the matrix clipped, while the threads go on; the copies are tracked in bulk groups, not
// on an mbarrier. And the epilogue built on it: a consumer warpgroup's accumulators staged in
// shared memory and written by TMA stores. Compiles only for sm_90a.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "async_copy.cuh"  // shared_address

namespace gemm::hopper {

// Copies the box at shared address `source` to coordinates (inner, outer) of `map`, clipping what
// lies outside the matrix. The copy runs on after the call returns: bulk_commit_group closes the
// copies issued so far into a group, bulk_wait_group_read<N> waits until at most N groups still
// *read* shared memory (their source may then be rewritten), and bulk_wait_group<N> until their
// writes to global memory are done.
__device__ __forceinline__ void tma_store_2d(CUtensorMap const* map, std::uint32_t source,
                                             int inner, int outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
          reinterpret_cast<std::uint64_t>(map)),
      "r"(inner), "r"(outer), "r"(source)
      : "memory");
}
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Shared memory written by ordinary stores that the copy engine reads next must be made visible
// to it, the "async proxy", first: every writing thread fences, then the threads synchronize,
// then one thread issues the copy.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A barrier among `threads` threads (a multiple of 32) of the block, numbered `id` (1-15; 0 is
// __syncthreads'): lets one warpgroup synchronize without stopping the others.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// --- the epilogue -------------------------------------------------------------------------------

// c = alpha * acc + beta * c for C[row][col], C[row][col + 1], as bf16, reading C only when
// beta != 0 and only inside the matrix (the pieces of C staged for a TMA store may overhang it;
// TMA clips what lies outside).
__device__ __forceinline__ __nv_bfloat162 scaled_pair(__nv_bfloat16 const* C, int ldc, int row,
                                                      int col, int m, int n, float acc0, float acc1,
                                                      float alpha, float beta) {
  float2 value = make_float2(alpha * acc0, alpha * acc1);
  if (beta != 0.0f && row < m && col < n) {
    __nv_bfloat16 const* old = C + static_cast<std::size_t>(row) * ldc + col;
    if (col + 1 < n) {  // col is even and ldc a multiple of 8: a 4-byte aligned pair
      float2 const pair = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 const*>(old));
      value.x += beta * pair.x;
      value.y += beta * pair.y;
    } else {
      value.x += beta * __bfloat162float(old[0]);
    }
  }
  return __float22bfloat162_rn(value);
}

// One consumer warpgroup's 64 x kWidth block of C at (first_row, first_col), from its wgmma
// accumulators. Piece by piece (64 x 64): wait until TMA has finished reading the staging buffer
// (its store two pieces ago), fill it, fence, and let one thread hand it to TMA. The 128-byte
// swizzle (16-byte chunk c of row r at chunk c ^ r % 8) is what the C map expects, and it spreads
// a warp's 32 four-byte writes over all 32 banks. `pieces` counts the pieces this warpgroup has
// staged: it picks the buffer. `barrier_id` is the warpgroup's named barrier.
template <int kWidth>
__device__ __forceinline__ void store_tile(CUtensorMap const* c_map,
                                           __nv_bfloat16 (&staging)[2][64 * 64], int& pieces,
                                           int barrier_id, __nv_bfloat16 const* C, int ldc, int m,
                                           int n, float alpha, float beta, int first_row,
                                           int first_col, float const (&acc)[kWidth / 2]) {
  int const lane = threadIdx.x % 32;
  int const row = (threadIdx.x / 32) % 4 * 16 + lane / 4;  // rows row and row + 8 of the 64
  int const t2 = (lane % 4) * 2;
  bool const leader = threadIdx.x % 128 == 0;  // issues and waits for the TMA stores
#pragma unroll
  for (int piece = 0; piece < kWidth / 64; ++piece, ++pieces) {
    __nv_bfloat16* const buffer = staging[pieces % 2];
    if (leader) bulk_wait_group_read<1>();
    named_barrier_sync(barrier_id, 128);
#pragma unroll
    for (int chunk = 0; chunk < 8; ++chunk) {
      int const j = piece * 8 + chunk;  // the accumulators' 8-column block
      int const col = first_col + j * 8 + t2;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int const r = row + 8 * half;
        __nv_bfloat162 const value =
            scaled_pair(C, ldc, first_row + r, col, m, n, acc[4 * j + 2 * half],
                        acc[4 * j + 2 * half + 1], alpha, beta);
        int const offset = r * 64 + (chunk ^ (r % 8)) * 8 + t2;  // in bf16
        *reinterpret_cast<__nv_bfloat162*>(buffer + offset) = value;
      }
    }
    fence_proxy_async_shared();
    named_barrier_sync(barrier_id, 128);
    if (leader) {
      tma_store_2d(c_map, gemm::shared_address(buffer), first_col + piece * 64, first_row);
      bulk_commit_group();
    }
  }
}

}  // namespace gemm::hopper
