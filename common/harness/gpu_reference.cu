#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <vector>

#include "cuda_check.h"
#include "device_buffer.h"
#include "gpu_reference.h"

namespace gemm {
namespace {

__device__ double to_double(float x) {
  return x;
}
__device__ double to_double(__nv_bfloat16 x) {
  return __bfloat162float(x);  // exact: a bf16 value is a float with 16 more zero bits
}
__device__ double to_double(__nv_fp8_e4m3 x) {
  return static_cast<float>(x);  // exact: every e4m3 value is a float
}

// dense[r * cols + c] = (absolute ? |x| : x) for x = src[r * ld + c], widened to double.
template <typename T>
__global__ void widen_kernel(T const* src, int rows, int cols, int ld, bool absolute,
                             double* dense) {
  std::size_t const count = static_cast<std::size_t>(rows) * cols;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::size_t const r = i / cols;
    std::size_t const c = i % cols;
    double const x = to_double(src[r * ld + c]);
    dense[i] = absolute ? fabs(x) : x;
  }
}

template <typename T>
void widen(T const* src, MatrixLayout const& layout, bool absolute, double* dense) {
  widen_kernel<<<1024, 256>>>(src, layout.rows, layout.cols, layout.ld, absolute, dense);
  check_cuda(cudaGetLastError(), "widen_kernel launch");
}

// Row-major C (m x n) = alpha * A (m x k) * B (k x n) + beta * C, all dense, through the
// column-major DGEMM: the row-major C is the column-major C^T = B^T * A^T. With b_transposed, B
// is given as its transpose, n x k (the FP8 contract): as a column-major k x n matrix it is
// B^T's transpose, so the DGEMM transposes it back.
void dgemm_row_major(cublasHandle_t handle, int m, int n, int k, double alpha, double const* A,
                     double const* B, bool b_transposed, double beta, double* C) {
  check_cublas(cublasDgemm(handle, b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
                           &alpha, B, b_transposed ? k : n, A, k, &beta, C, n),
               "cublasDgemm (reference)");
}

}  // namespace

std::size_t reference_gemm_gpu_bytes(int m, int n, int k) {
  return sizeof(double) * (static_cast<std::size_t>(m) * k + static_cast<std::size_t>(k) * n +
                           static_cast<std::size_t>(m) * n);
}

template <typename In, typename Out>
ReferenceSums reference_sums_gpu(cublasHandle_t handle, double alpha, In const* A,
                                 MatrixLayout const& a_layout, In const* B,
                                 MatrixLayout const& b_layout, float beta, Out const* C0,
                                 MatrixLayout const& c_layout, bool b_transposed) {
  int const m = a_layout.rows;
  int const k = a_layout.cols;
  int const n = b_transposed ? b_layout.rows : b_layout.cols;
  std::size_t const mn = static_cast<std::size_t>(m) * n;
  DeviceBuffer<double> a64(static_cast<std::size_t>(m) * k);
  DeviceBuffer<double> b64(static_cast<std::size_t>(k) * n);
  DeviceBuffer<double> c64(mn);

  cudaStream_t stream = nullptr;
  check_cublas(cublasGetStream(handle, &stream), "cublasGetStream");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  // Two passes over the same buffers: signed values give the result, absolute values the
  // magnitude sum_p |a_ip b_pj| + |beta c0| that scales the error bound.
  std::vector<double> value(mn);
  std::vector<double> magnitude(mn);
  for (bool const absolute : {false, true}) {
    widen(A, a_layout, absolute, a64.get());
    widen(B, b_layout, absolute, b64.get());
    if (beta != 0.0f) {
      widen(C0, c_layout, absolute, c64.get());
    } else {
      check_cuda(cudaMemset(c64.get(), 0, mn * sizeof(double)), "cudaMemset");
    }
    check_cuda(cudaDeviceSynchronize(), "widen");
    double const a = absolute ? std::fabs(alpha) : alpha;
    double const b = absolute ? std::fabs(static_cast<double>(beta)) : beta;
    dgemm_row_major(handle, m, n, k, a, a64.get(), b64.get(), b_transposed, b, c64.get());
    auto& out = absolute ? magnitude : value;
    check_cuda(cudaMemcpy(out.data(), c64.get(), mn * sizeof(double), cudaMemcpyDeviceToHost),
               "cudaMemcpy (reference)");
  }
  return {std::move(value), std::move(magnitude)};
}

template <typename In, typename Out>
Reference reference_gemm_gpu(cublasHandle_t handle, double alpha, In const* A,
                             MatrixLayout const& a_layout, In const* B,
                             MatrixLayout const& b_layout, float beta, Out const* C0,
                             MatrixLayout const& c_layout, ErrorModel const& model,
                             bool b_transposed) {
  ReferenceSums sums =
      reference_sums_gpu(handle, alpha, A, a_layout, B, b_layout, beta, C0, c_layout, b_transposed);
  int const n = b_transposed ? b_layout.rows : b_layout.cols;
  return reference_from_magnitude(a_layout.rows, n, a_layout.cols, std::move(sums.value),
                                  sums.magnitude, model);
}

template ReferenceSums reference_sums_gpu(cublasHandle_t, double, float const*, MatrixLayout const&,
                                          float const*, MatrixLayout const&, float, float const*,
                                          MatrixLayout const&, bool);
template ReferenceSums reference_sums_gpu(cublasHandle_t, double, __nv_fp8_e4m3 const*,
                                          MatrixLayout const&, __nv_fp8_e4m3 const*,
                                          MatrixLayout const&, float, __nv_bfloat16 const*,
                                          MatrixLayout const&, bool);
template Reference reference_gemm_gpu(cublasHandle_t, double, float const*, MatrixLayout const&,
                                      float const*, MatrixLayout const&, float, float const*,
                                      MatrixLayout const&, ErrorModel const&, bool);
template Reference reference_gemm_gpu(cublasHandle_t, double, __nv_bfloat16 const*,
                                      MatrixLayout const&, __nv_bfloat16 const*,
                                      MatrixLayout const&, float, __nv_bfloat16 const*,
                                      MatrixLayout const&, ErrorModel const&, bool);
template Reference reference_gemm_gpu(cublasHandle_t, double, __nv_fp8_e4m3 const*,
                                      MatrixLayout const&, __nv_fp8_e4m3 const*,
                                      MatrixLayout const&, float, __nv_bfloat16 const*,
                                      MatrixLayout const&, ErrorModel const&, bool);

}  // namespace gemm
