// The precision contracts the harness and the test suite are written for. Each names its
// element types, its unit roundoff (for the error bound), how to call a step and how to call
// the cuBLAS routine it is measured against. FP32 is the first; the tensor-core steps add
// their own (16-bit inputs, FP32 accumulation) beside it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "gemm.h"
#include "verify.h"

namespace gemm {

struct Fp32 {
  using Input = float;   // A and B on the device
  using Output = float;  // C on the device
  static constexpr char const* name = "fp32";
  static constexpr double unit_roundoff = kFloatUnitRoundoff;  // accumulation in FP32
  static constexpr char const* cublas_description =
      "cublasSgemm, CUBLAS_DEFAULT_MATH (FP32 FFMA; TF32 not allowed)";

  static void step(int m, int n, int k, float alpha, Input const* A, int lda, Input const* B,
                   int ldb, float beta, Output* C, int ldc, cudaStream_t stream) {
    sgemm(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  }

  // Pins the math mode: CUBLAS_DEFAULT_MATH never rounds FP32 inputs to TF32, so cuBLAS does
  // the same arithmetic the steps do (its result is checked against the same bound).
  static void configure(cublasHandle_t handle) {
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }

  // cuBLAS is column-major; row-major C = A * B is column-major C^T = B^T * A^T, so the
  // operands swap and m and n trade places. No transposes, no copies.
  static void cublas(cublasHandle_t handle, int m, int n, int k, float alpha, Input const* A,
                     int lda, Input const* B, int ldb, float beta, Output* C, int ldc) {
    check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, ldb, A, lda,
                             &beta, C, ldc),
                 "cublasSgemm");
  }
};

}  // namespace gemm
