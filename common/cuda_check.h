// Host-side error handling for CUDA and cuBLAS calls: every failure becomes an exception
// carrying the call that failed, so no error code is silently dropped.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gemm {

// A CUDA runtime failure; `status` lets callers tell "out of memory" from the rest.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t status, std::string const& what)
      : std::runtime_error(what + ": " + cudaGetErrorString(status)), status_(status) {}
  cudaError_t status() const { return status_; }

 private:
  cudaError_t status_;
};

inline void check_cuda(cudaError_t status, char const* what) {
  if (status != cudaSuccess) throw CudaError(status, what);
}

inline void check_cublas(cublasStatus_t status, char const* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(status));
  }
}

}  // namespace gemm
