// The precision contracts the harness and the test suite are written for. Each names its
// element types, how it rounds (for the error bound) and how to call the cuBLAS routine it is
// measured against: FP32 for steps 01-13 (CUDA cores), BF16 in and out with FP32 accumulation for
// the BF16 tensor-core steps (14-27), and FP32 from split operands on the tensor cores (28).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "gemm.h"
#include "verify.h"

namespace gemm {

struct Fp32 {
  using Input = float;   // A and B on the device
  using Output = float;  // C on the device
  static constexpr char const* name = "fp32";
  static constexpr Element element = Element::fp32;
  static constexpr ErrorModel error = kFp32Error;  // accumulation and output in FP32
  static constexpr char const* cublas_description =
      "cublasSgemm, CUBLAS_DEFAULT_MATH (FP32 FFMA; TF32 not allowed)";

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

// The FP32 contract computed on tensor cores from split operands (step 28): the same entry
// point, inputs and baseline as Fp32 (pure FP32 SGEMM, which it is measured against), and the
// error bound of BF16x6 (kBf16x6Error): six products of bf16 parts per term, summed by tensor
// cores. The SIMT steps keep Fp32's bound.
struct Fp32Split : Fp32 {
  static constexpr ErrorModel error = kBf16x6Error;
};

struct Bf16 {
  using Input = __nv_bfloat16;
  using Output = __nv_bfloat16;
  static constexpr char const* name = "bf16";
  static constexpr Element element = Element::bf16;
  static constexpr ErrorModel error = kBf16Error;  // FP32 accumulation, one rounding to bf16
  static constexpr char const* cublas_description =
      "cublasGemmEx, BF16 A, B and C, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT (tensor cores)";

  static void configure(cublasHandle_t handle) {
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }

  // What deep-learning frameworks call for a bf16 matrix product: bf16 in and out, FP32
  // accumulation and FP32 alpha and beta, the default algorithm. Operands swapped as above.
  static void cublas(cublasHandle_t handle, int m, int n, int k, float alpha, Input const* A,
                     int lda, Input const* B, int ldb, float beta, Output* C, int ldc) {
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, CUDA_R_16BF,
                              ldb, A, CUDA_R_16BF, lda, &beta, C, CUDA_R_16BF, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
};

// A step's entry point in a precision: gemm::sgemm for Fp32, gemm::bf16_gemm for Bf16.
template <typename Precision>
using StepFunction = void (*)(int m, int n, int k, float alpha, typename Precision::Input const* A,
                              int lda, typename Precision::Input const* B, int ldb, float beta,
                              typename Precision::Output* C, int ldc, cudaStream_t stream);

}  // namespace gemm
