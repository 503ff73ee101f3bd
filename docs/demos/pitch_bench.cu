// Demo: how a Hopper step's speed depends on the row pitch (leading dimension) of its operands,
// beside cuBLAS BF16 in the same process. The harness's matrices always have tight leading
// dimensions; here the same 4096^3 product runs with lda, ldb and ldc padded to 4104 (16-byte
// aligned rows, pitch not a multiple of 128 bytes), 4112, 4128 and 4160, one at a time and all
// together, followed by the shapes of the Hopper progression table.
//   build/pitch_bench_NN_name         (built for steps 20-26 when the target is sm_90a)
//
// Inputs: random bf16 in [-0.5, 0.5); alpha 1, beta 0; median of 9 timed calls after 3 warm-up
// calls, each timed with CUDA events, step and cuBLAS measured one after the other per case.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "gemm.h"

namespace {

using bf16 = __nv_bfloat16;

__global__ void fill_kernel(bf16* data, size_t count, unsigned seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    data[i] = __float2bfloat16(((i * 2654435761u + seed) % 1000) / 1000.0f - 0.5f);
  }
}

template <class Call>
float median_ms(Call call) {
  cudaEvent_t start, stop;
  gemm::check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  gemm::check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i)
    call();
  std::vector<float> times;
  for (int i = 0; i < 9; ++i) {
    cudaEventRecord(start);
    call();
    cudaEventRecord(stop);
    gemm::check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return times[times.size() / 2];
}

struct Case {
  int m, n, k, lda, ldb, ldc;
};

}  // namespace

int main() {
  std::vector<Case> const cases = {
      {4096, 4096, 4096, 4096, 4096, 4096}, {4096, 4096, 4096, 4104, 4104, 4104},
      {4096, 4096, 4096, 4104, 4096, 4096}, {4096, 4096, 4096, 4096, 4104, 4096},
      {4096, 4096, 4096, 4096, 4096, 4104}, {4096, 4096, 4096, 4112, 4112, 4112},
      {4096, 4096, 4096, 4128, 4128, 4128}, {4096, 4096, 4096, 4160, 4160, 4160},
      {4104, 4104, 4104, 4104, 4104, 4104}, {4104, 4104, 4104, 4160, 4160, 4160},
      {4096, 4100, 4096, 4096, 4100, 4100}, {4096, 4096, 4100, 4100, 4096, 4096},
      {4097, 4097, 4097, 4097, 4097, 4097}, {1000, 3000, 2000, 2000, 3000, 3000},
      {8192, 8192, 1024, 1024, 8192, 8192}, {512, 8192, 8192, 8192, 8192, 8192}};
  size_t const capacity = static_cast<size_t>(8192) * 8200;
  bf16 *A, *B, *C;
  gemm::check_cuda(cudaMalloc(&A, capacity * 2), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&B, capacity * 2), "cudaMalloc");
  gemm::check_cuda(cudaMalloc(&C, capacity * 2), "cudaMalloc");
  fill_kernel<<<1024, 256>>>(A, capacity, 1);
  fill_kernel<<<1024, 256>>>(B, capacity, 2);
  gemm::check_cuda(cudaMemset(C, 0, capacity * 2), "cudaMemset");
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  std::printf("step %s: TFLOP/s at each shape and leading dimensions, and cuBLAS BF16's\n",
              GEMM_STEP_NAME);
  for (Case const& c : cases) {
    float const alpha = 1.0f;
    float const beta = 0.0f;
    float const ours = median_ms([&] {
      gemm::bf16_gemm(c.m, c.n, c.k, alpha, A, c.lda, B, c.ldb, beta, C, c.ldc, nullptr);
    });
    // Row-major C = A B is column-major C^T = B^T A^T.
    float const theirs = median_ms([&] {
      cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, c.n, c.m, c.k, &alpha, B, CUDA_R_16BF, c.ldb,
                   A, CUDA_R_16BF, c.lda, &beta, C, CUDA_R_16BF, c.ldc, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
    });
    double const flops = 2.0 * c.m * c.n * c.k;
    std::printf("%5d %5d %5d lda %5d ldb %5d ldc %5d | step %7.1f TF  cuBLAS %7.1f TF  %5.1f%%\n",
                c.m, c.n, c.k, c.lda, c.ldb, c.ldc, flops / ours / 1e9, flops / theirs / 1e9,
                100.0 * theirs / ours);
  }
  gemm::check_cuda(cudaDeviceSynchronize(), "the runs");
  cublasDestroy(handle);
  return 0;
}
