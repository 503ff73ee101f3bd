// Not a lesson: what a launch needs beyond the defaults, written once.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

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

// A cooperative launch of `kernel` (its cluster shape compiled in, if any) over `blocks` blocks:
// the driver checks that every block of the grid can be resident at once and fails the launch
// otherwise, so that blocks may wait for each other (taught in step 35). cudaLaunchKernelEx
// converts the arguments to the kernel's parameter types.
template <class... Parameters, class... Arguments>
void launch_cooperative(void (*kernel)(Parameters...), unsigned blocks, int threads,
                        int shared_bytes, cudaStream_t stream, Arguments&&... arguments) {
  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<std::size_t>(shared_bytes);
  config.stream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Arguments>(arguments)...),
             "cudaLaunchKernelEx (cooperative)");
}

}  // namespace gemm
