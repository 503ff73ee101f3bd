// Not a lesson: what a launch needs beyond the defaults, written once.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_check.h"

namespace gemm {

// Above the 48 KB of dynamic shared memory a block gets by default, a kernel must opt in to what
// it uses. Done once per kernel (the first call); throws, naming the size, where the GPU cannot
// give a block that much.
template <auto kKernel>
void opt_in_shared_memory(int bytes) {
  static cudaError_t const status =
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != cudaSuccess) {
    throw std::runtime_error("bf16_gemm: this GPU cannot give a block " + std::to_string(bytes) +
                             " bytes of shared memory (" + cudaGetErrorString(status) + ")");
  }
}

// The number of SMs of the current device: persistent grids and the wave models are sized from it.
inline int multiprocessor_count() {
  int device = 0;
  int sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute");
  return sms;
}

}  // namespace gemm
