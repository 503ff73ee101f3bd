// Taught in step 10 (steps/10_async_copy/), which writes these wrappers inline.
//
// Asynchronous global -> shared copies (cp.async, sm_80 and later).
//
// A cp.async is issued like a load but its data goes straight into shared memory without
// passing through registers, and the issuing thread does not wait for it. Copies are grouped:
// commit_group closes the group of copies issued since the last commit, and
// wait_group<N> blocks until at most N groups are still in flight. A __syncthreads() after
// the wait makes every thread's copies visible to the whole block.
//
// `src_bytes` < copy size zero-fills the rest of the destination: 0 copies nothing and writes
// zeros, which is how edge tiles are padded without a branch. The source address must still be
// a valid address aligned to the copy size, even when nothing is read from it.
#pragma once

#include <cuda_runtime.h>

namespace gemm {

__device__ __forceinline__ unsigned shared_address(void const* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// 4 bytes, through L1 (.ca: the only caching mode allowed below 16 bytes).
__device__ __forceinline__ void cp_async_4(float* dst, float const* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 4 : 0));
}

// 16 bytes, bypassing L1 (.cg): the data is used once from shared memory, caching it in L1
// would only evict something else. dst and src must be 16-byte aligned. (Any element type: 4
// floats, or 8 bf16 in the tensor-core steps.)
__device__ __forceinline__ void cp_async_16(void* dst, void const* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(src_bytes));
}

// The same with the destination as a shared-state-space address (shared_address(pointer)),
// for kernels that work out their shared offsets once.
__device__ __forceinline__ void cp_async_16(unsigned dst, void const* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}

// All 16 bytes, no byte count: for copies known to lie inside the matrix (one operand less for
// the instruction to carry, and no zero-fill variant).
__device__ __forceinline__ void cp_async_16(unsigned dst, void const* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int kGroupsStillInFlight>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kGroupsStillInFlight));
}

}  // namespace gemm
