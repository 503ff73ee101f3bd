// The float64 reference for large problems, computed on the GPU with cuBLAS DGEMM: one DGEMM
// for the value, one on absolute values for the magnitude that sets each element's error bound.
#pragma once

#include <cublas_v2.h>

#include <cstddef>

#include "verify.h"

namespace gemm {

// A, B, C0 point to element (0, 0) of FP32 matrices on the device, laid out as their layouts
// say. With beta == 0, C0 is not read.
Reference reference_gemm_gpu(cublasHandle_t handle, float alpha, float const* A,
                             MatrixLayout const& a_layout, float const* B,
                             MatrixLayout const& b_layout, float beta, float const* C0,
                             MatrixLayout const& c_layout, double unit_roundoff);

// Device bytes reference_gemm_gpu allocates for an m x n x k problem.
std::size_t reference_gemm_gpu_bytes(int m, int n, int k);

}  // namespace gemm
