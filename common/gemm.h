// The step contract: the one entry point every step defines, sgemm for the FP32 steps
// (01-13 on the CUDA cores, 28 on the tensor cores), bf16_gemm for the BF16 steps (14-27,
// 32-37, 41-43), fp8_gemm for the FP8 steps (29-31, 38-40, 44), whose B is given transposed and
// whose operands carry scales.
//
//   C = alpha * A * B + beta * C      (row-major, BLAS-style)
//
//   A is m x k with leading dimension lda >= k  (element (i, p) at A[i * lda + p])
//   B is k x n with leading dimension ldb >= n  (element (p, j) at B[p * ldb + j])
//   C is m x n with leading dimension ldc >= n  (element (i, j) at C[i * ldc + j])
//
// Rules every step keeps (the shared GPU suite checks each of them):
//   - correct for every m, n, k >= 1 and every leading dimension >= the row length, for any
//     element-aligned pointers (a fast path may need 16-byte alignment; the step then falls
//     back);
//   - beta == 0 means C is not read, as in BLAS, so NaN or garbage in C does not leak into it;
//   - nothing outside the m x n submatrix of C is written (the columns n..ldc-1 are not ours);
//   - invalid arguments throw std::invalid_argument with a message naming the argument;
//     a failed launch throws std::runtime_error. Neither leaves C half-written on purpose;
//   - the same inputs give bitwise the same C on every run (the promise cuBLAS makes).
//
// The call is asynchronous like any kernel launch: it enqueues work on `stream` and returns.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace gemm {

// Defined once in every FP32 step (steps/NN_name/*.cu).
void sgemm(int m, int n, int k, float alpha, float const* A, int lda, float const* B, int ldb,
           float beta, float* C, int ldc, cudaStream_t stream);

// Defined once in every BF16 step. A, B and C hold bf16; the products are accumulated in FP32,
// alpha * AB + beta * C is formed in FP32 and rounded once to bf16 (round to nearest even):
// cublasGemmEx with CUDA_R_16BF in and out and CUBLAS_COMPUTE_32F.
void bf16_gemm(int m, int n, int k, float alpha, __nv_bfloat16 const* A, int lda,
               __nv_bfloat16 const* B, int ldb, float beta, __nv_bfloat16* C, int ldc,
               cudaStream_t stream);

// Defined once in every FP8 step (29 on): scaled E4M3 in, BF16 out, FP32 accumulation, as
// cuBLASLt's FP8 matmul computes it. A is m x k, row-major, lda >= k. B is given as its transpose,
// n x k row-major with ldb >= k (B[j * ldb + p] is element (p, j) of the product's B): each row of
// B is a column of the product, contiguous along k, which is how FP8 wgmma reads both operands
// ("K-major") and how cuBLASLt and DeepGEMM take them. a_scale and b_scale point to one float each
// in device memory (the values A and B stand for are a_scale * A and b_scale * B); they are read by
// the kernel, so they may be produced on the stream before the call.
//   C = alpha * (a_scale * b_scale) * A B^T + beta * C, formed in FP32, rounded once to bf16.
void fp8_gemm(int m, int n, int k, float alpha, __nv_fp8_e4m3 const* A, int lda,
              __nv_fp8_e4m3 const* B, int ldb, float const* a_scale, float const* b_scale,
              float beta, __nv_bfloat16* C, int ldc, cudaStream_t stream);

// Throws std::invalid_argument naming the first bad argument. Every step calls it first, so the
// rules above are written once. `routine` prefixes the message (e.g. "sgemm").
void check_gemm_arguments(char const* routine, int m, int n, int k, void const* A, int lda,
                          void const* B, int ldb, void const* C, int ldc);

// The same for fp8_gemm, whose B is n x k (ldb >= k) and whose scale pointers must not be null.
void check_fp8_gemm_arguments(char const* routine, int m, int n, int k, void const* A, int lda,
                              void const* B, int ldb, float const* a_scale, float const* b_scale,
                              void const* C, int ldc);

// Throws std::runtime_error if the last launch on this thread failed (bad configuration,
// too much shared memory, ...). Steps call it right after their launches.
void check_launch(char const* routine);

}  // namespace gemm
