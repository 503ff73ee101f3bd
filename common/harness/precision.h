// The precision contracts the harness and the test suite are written for. Each names its
// element types, how it rounds (for the error bound), how to call a step and how to call the
// cuBLAS routine it is measured against: FP32 for steps 01-13 (CUDA cores), BF16 in and out with
// FP32 accumulation for the BF16 tensor-core steps (14-27, 32-37, 41-43), FP32 from split
// operands on the tensor cores (28), and scaled FP8 (E4M3) in, BF16 out (29-31, 38-40, 44).
//
// Every precision has the same members, so the harness and the suite are written once:
//   Input, Output         the element types of A and B, and of C, on the device;
//   element, output_element  their formats, for rounding generated values (verify.h);
//   b_transposed          B is given as its transpose, n x k (FP8), instead of k x n;
//   scale                 the product of the operands' scales the harness passes (1 without);
//   Step, call            a step's entry point, and a call of it with the harness's scales;
//   cublas                the baseline, which returns false where it offers nothing.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "gemm.h"
#include "verify.h"

namespace gemm {

// The entry point of the FP32 and BF16 steps, and a call of it (no scales).
template <typename In, typename Out>
struct UnscaledStep {
  using Step = void (*)(int m, int n, int k, float alpha, In const* A, int lda, In const* B,
                        int ldb, float beta, Out* C, int ldc, cudaStream_t stream);
  static constexpr bool b_transposed = false;
  static constexpr double scale = 1.0;
  static void call(Step step, int m, int n, int k, float alpha, In const* A, int lda, In const* B,
                   int ldb, float beta, Out* C, int ldc, cudaStream_t stream) {
    step(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, stream);
  }
};

struct Fp32 : UnscaledStep<float, float> {
  using Input = float;   // A and B on the device
  using Output = float;  // C on the device
  static constexpr char const* name = "fp32";
  static constexpr Element element = Element::fp32;
  static constexpr Element output_element = Element::fp32;
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
  static bool cublas(cublasHandle_t handle, int m, int n, int k, float alpha, Input const* A,
                     int lda, Input const* B, int ldb, float beta, Output* C, int ldc) {
    check_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, ldb, A, lda,
                             &beta, C, ldc),
                 "cublasSgemm");
    return true;
  }
};

// The FP32 contract computed on tensor cores from split operands (step 28): the same entry
// point, inputs and baseline as Fp32 (pure FP32 SGEMM, which it is measured against), and the
// error bound of BF16x6 (kBf16x6Error): six products of bf16 parts per term, summed by tensor
// cores. The SIMT steps keep Fp32's bound.
struct Fp32Split : Fp32 {
  static constexpr ErrorModel error = kBf16x6Error;
};

struct Bf16 : UnscaledStep<__nv_bfloat16, __nv_bfloat16> {
  using Input = __nv_bfloat16;
  using Output = __nv_bfloat16;
  static constexpr char const* name = "bf16";
  static constexpr Element element = Element::bf16;
  static constexpr Element output_element = Element::bf16;
  static constexpr ErrorModel error = kBf16Error;  // FP32 accumulation, one rounding to bf16
  static constexpr char const* cublas_description =
      "cublasGemmEx, BF16 A, B and C, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT (tensor cores)";

  static void configure(cublasHandle_t handle) {
    check_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }

  // What deep-learning frameworks call for a bf16 matrix product: bf16 in and out, FP32
  // accumulation and FP32 alpha and beta, the default algorithm. Operands swapped as above.
  static bool cublas(cublasHandle_t handle, int m, int n, int k, float alpha, Input const* A,
                     int lda, Input const* B, int ldb, float beta, Output* C, int ldc) {
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, B, CUDA_R_16BF,
                              ldb, A, CUDA_R_16BF, lda, &beta, C, CUDA_R_16BF, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
    return true;
  }
};

// cuBLASLt's FP8 matmul for the row-major FP8 contract (cublaslt_fp8.cpp): C = alpha * a_scale *
// b_scale * A B^T + beta * C, E4M3 A (m x k) and B (n x k), BF16 C, FP32 accumulation with fast
// accumulation on or off. Returns false where cuBLASLt offers no algorithm (it needs k, lda, ldb
// and ldc multiples of 16 bytes' worth of elements, and 16-byte-aligned pointers, scales
// included); throws on any other failure.
bool cublaslt_fp8_gemm(cudaStream_t stream, int m, int n, int k, float alpha,
                       __nv_fp8_e4m3 const* A, int lda, __nv_fp8_e4m3 const* B, int ldb,
                       float const* a_scale, float const* b_scale, float beta, __nv_bfloat16* C,
                       int ldc, bool fast_accumulation);

// The device copies of the scales the harness gives every FP8 call: a_scale at [0] and b_scale at
// [4], 16 bytes apart (cuBLASLt refuses scale pointers that are not 16-byte aligned).
float const* fp8_device_scales(float a_scale, float b_scale);

// Scaled E4M3 in, BF16 out, FP32 accumulation (steps 29 on), against cuBLASLt with fast
// accumulation off. The harness scales A by 0.5 and B by 4: powers of two, so the scaled products
// stay exact and a step that drops a scale, or applies one twice, is off by a factor of 2 or more.
struct Fp8 {
  using Input = __nv_fp8_e4m3;
  using Output = __nv_bfloat16;
  using Step = void (*)(int m, int n, int k, float alpha, Input const* A, int lda, Input const* B,
                        int ldb, float const* a_scale, float const* b_scale, float beta, Output* C,
                        int ldc, cudaStream_t stream);
  static constexpr char const* name = "fp8";
  static constexpr Element element = Element::e4m3;
  static constexpr Element output_element = Element::bf16;
  static constexpr bool b_transposed = true;
  static constexpr float a_scale = 0.5f;
  static constexpr float b_scale = 4.0f;
  static constexpr double scale = static_cast<double>(a_scale) * b_scale;
  static constexpr ErrorModel error = kFp8Error;
  static constexpr char const* cublas_description =
      "cublasLtMatmul, E4M3 A and B (TN), BF16 C, per-tensor scales, CUBLAS_COMPUTE_32F, fast "
      "accumulation off";

  static void configure(cublasHandle_t) {}
  static void call(Step step, int m, int n, int k, float alpha, Input const* A, int lda,
                   Input const* B, int ldb, float beta, Output* C, int ldc, cudaStream_t stream) {
    float const* scales = fp8_device_scales(a_scale, b_scale);
    step(m, n, k, alpha, A, lda, B, ldb, scales, scales + 4, beta, C, ldc, stream);
  }
  static bool cublas(cublasHandle_t handle, int m, int n, int k, float alpha, Input const* A,
                     int lda, Input const* B, int ldb, float beta, Output* C, int ldc) {
    cudaStream_t stream = nullptr;
    check_cublas(cublasGetStream(handle, &stream), "cublasGetStream");
    float const* scales = fp8_device_scales(a_scale, b_scale);
    return cublaslt_fp8_gemm(stream, m, n, k, alpha, A, lda, B, ldb, scales, scales + 4, beta, C,
                             ldc, false);
  }
};

// The FP8 contract with promoted partial sums (step 30): the same calls and baseline, the bound
// of sums promoted every k tile (kFp8PromotedError).
struct Fp8Promoted : Fp8 {
  static constexpr ErrorModel error = kFp8PromotedError;
};

// A step's entry point in a precision: gemm::sgemm for Fp32 and Fp32Split, gemm::bf16_gemm for
// Bf16, gemm::fp8_gemm for Fp8.
template <typename Precision>
using StepFunction = typename Precision::Step;

}  // namespace gemm
