// The FP8 baseline: cuBLASLt's matmul with E4M3 inputs, per-tensor scales and BF16 output, called
// for the row-major contract of gemm::fp8_gemm (precision.h).
#include <cublasLt.h>

#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "precision.h"

namespace gemm {
namespace {

void check_lt(cublasStatus_t status, char const* what) {
  check_cublas(status, what);
}

// One handle and one workspace for the process; cuBLASLt picks algorithms that fit the workspace.
struct LtState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 32u << 20;
  LtState() {
    check_lt(cublasLtCreate(&handle), "cublasLtCreate");
    check_cuda(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc (cuBLASLt workspace)");
  }
};

LtState& lt_state() {
  static LtState state;
  return state;
}

}  // namespace

float const* fp8_device_scales(float a_scale, float b_scale) {
  static float* scales = [] {
    float* p = nullptr;
    check_cuda(cudaMalloc(&p, 8 * sizeof(float)), "cudaMalloc (scales)");
    return p;
  }();
  static float uploaded[2] = {0.0f, 0.0f};
  if (uploaded[0] != a_scale || uploaded[1] != b_scale) {
    float const values[8] = {a_scale, 0.0f, 0.0f, 0.0f, b_scale, 0.0f, 0.0f, 0.0f};
    check_cuda(cudaMemcpy(scales, values, sizeof values, cudaMemcpyHostToDevice),
               "cudaMemcpy (scales)");
    uploaded[0] = a_scale;
    uploaded[1] = b_scale;
  }
  return scales;
}

// Row-major C (m x n) = A (m x k) B^T, B given as n x k: column-major, that is C^T (n x m) =
// B (k x n column-major, transposed) times A (k x m column-major): the "TN" layout cuBLASLt's FP8
// matmul takes. cuBLASLt's A is our B and its B our A, so their scales swap too.
bool cublaslt_fp8_gemm(cudaStream_t stream, int m, int n, int k, float alpha,
                       __nv_fp8_e4m3 const* A, int lda, __nv_fp8_e4m3 const* B, int ldb,
                       float const* a_scale, float const* b_scale, float beta, __nv_bfloat16* C,
                       int ldc, bool fast_accumulation) {
  LtState& lt = lt_state();
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_c = nullptr, lt_d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  check_lt(cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  cublasOperation_t const transposed = CUBLAS_OP_T;
  cublasOperation_t const plain = CUBLAS_OP_N;
  std::int8_t const fast = fast_accumulation ? 1 : 0;
  check_lt(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &transposed,
                                          sizeof transposed),
           "TRANSA");
  check_lt(
      cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain),
      "TRANSB");
  check_lt(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale,
                                          sizeof b_scale),
           "A_SCALE_POINTER");
  check_lt(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale,
                                          sizeof a_scale),
           "B_SCALE_POINTER");
  check_lt(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                          sizeof fast),
           "FAST_ACCUM");
  check_lt(cublasLtMatrixLayoutCreate(&lt_a, CUDA_R_8F_E4M3, k, n, ldb), "layout A");
  check_lt(cublasLtMatrixLayoutCreate(&lt_b, CUDA_R_8F_E4M3, k, m, lda), "layout B");
  check_lt(cublasLtMatrixLayoutCreate(&lt_c, CUDA_R_16BF, n, m, ldc), "layout C");
  check_lt(cublasLtMatrixLayoutCreate(&lt_d, CUDA_R_16BF, n, m, ldc), "layout D");
  check_lt(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  check_lt(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &lt.workspace_bytes, sizeof lt.workspace_bytes),
      "MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt.handle, operation, lt_a, lt_b, lt_c,
                                                         lt_d, preference, 1, &heuristic, &found);
  bool ran = false;
  if (status == CUBLAS_STATUS_SUCCESS && found > 0) {
    status = cublasLtMatmul(lt.handle, operation, &alpha, B, lt_a, A, lt_b, &beta, C, lt_c, C, lt_d,
                            &heuristic.algo, lt.workspace, lt.workspace_bytes, stream);
    ran = status == CUBLAS_STATUS_SUCCESS;
  }
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatrixLayoutDestroy(lt_d);
  cublasLtMatrixLayoutDestroy(lt_c);
  cublasLtMatrixLayoutDestroy(lt_b);
  cublasLtMatrixLayoutDestroy(lt_a);
  cublasLtMatmulDescDestroy(operation);
  if (!ran && status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_SUCCESS) {
    check_lt(status, "cublasLtMatmul");
  }
  return ran;
}

}  // namespace gemm
