// The float64 reference for large problems, computed on the GPU with cuBLAS DGEMM: one DGEMM
// for the value, one on absolute values for the magnitude that sets each element's error bound.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <vector>

#include "verify.h"

namespace gemm {

// A, B, C0 point to element (0, 0) of matrices on the device, laid out as their layouts say:
// In and Out are float, or __nv_bfloat16, or In __nv_fp8_e4m3 and Out __nv_bfloat16
// (instantiated in gpu_reference.cu). With b_transposed, B is given as its transpose, n x k (the
// FP8 contract). alpha is a double so that a scale factor can join it exactly. With beta == 0,
// C0 is not read. `model` sets the error bound of every element.
template <typename In, typename Out>
Reference reference_gemm_gpu(cublasHandle_t handle, double alpha, In const* A,
                             MatrixLayout const& a_layout, In const* B,
                             MatrixLayout const& b_layout, float beta, Out const* C0,
                             MatrixLayout const& c_layout, ErrorModel const& model,
                             bool b_transposed = false);

// The two float64 sums behind a Reference, row-major m x n: value = alpha A B + beta C0, and
// magnitude = |alpha| sum_p |a_ip| |b_pj| + |beta| |c0|. For programs that measure errors
// themselves (the accuracy demos); instantiated for float in and out, and for FP8 in, bf16 out.
struct ReferenceSums {
  std::vector<double> value;
  std::vector<double> magnitude;
};
template <typename In, typename Out>
ReferenceSums reference_sums_gpu(cublasHandle_t handle, double alpha, In const* A,
                                 MatrixLayout const& a_layout, In const* B,
                                 MatrixLayout const& b_layout, float beta, Out const* C0,
                                 MatrixLayout const& c_layout, bool b_transposed = false);

// Device bytes reference_gemm_gpu allocates for an m x n x k problem.
std::size_t reference_gemm_gpu_bytes(int m, int n, int k);

}  // namespace gemm
