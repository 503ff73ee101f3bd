// Taught in step 18 (steps/18_tma_wgmma/), which writes this wrapper inline.
//
// TMA, the Tensor Memory Accelerator: one thread hands it a tensor map (built on the host, see
// tensor_map.h) and the coordinates of a box; the copy engine moves the whole box from global to
// shared memory, swizzled as the map says, zero-filling what lies outside the matrix, and counts
// the bytes off on an mbarrier (mbarrier.cuh). Compiles only for sm_90a.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

namespace gemm::hopper {

// Copies the box at coordinates (inner, outer) of `map` (inner = the contiguous dimension) to
// shared address `destination`; the bytes count off on `barrier`. The tensor map must live in
// kernel parameter space (a const __grid_constant__ parameter) or in global memory.
__device__ __forceinline__ void tma_load_2d(std::uint32_t destination, CUtensorMap const* map,
                                            int inner, int outer, std::uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(destination),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(barrier)
      : "memory");
}

}  // namespace gemm::hopper
